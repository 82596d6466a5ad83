"""Statistics: the paired document bootstrap and its estimates (``bootstrap``) and the seed-level rule that pools
per-seed estimates over training seeds (``inference``, docs/statistics.md)."""
