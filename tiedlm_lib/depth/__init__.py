"""Depth at inference: readout probes (``readout``), the Depth Control Protocol's decomposition (``dcp``), calibrated
early exits (``exits``), generation at a depth (``generate``) and exact self-speculative decoding
(``speculative``)."""
