"""Training: the loop (``loop``), SFT (``sft``) and the distributed launch (``distributed``)."""
