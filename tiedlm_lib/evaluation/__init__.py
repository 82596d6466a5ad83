"""Evaluation of trained models: NLL with and without pads, depth sweeps and max-prob exits (``nll``), the suffix
benchmark (``suffix_benchmark``), paper A's residual probe (``residual_probe``) and the analyses the sections share
(``analysis``)."""
