"""The model: configs (``config``), the layout grammar (``layout``), execution schedules (``schedules``), the
tied-depth language model (``tied``), gradient estimators of a tied loop (``gradients``) and checkpoints
(``checkpoint``)."""
