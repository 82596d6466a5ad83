"""Storage: files written whole or not at all (``atomic``), results kept as data, never code (``datafile``),
derived results kept beside a run and keyed by the code that computed them (``memo``), tables as text (``tables``)."""
