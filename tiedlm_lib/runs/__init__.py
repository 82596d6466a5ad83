"""Runs: the registry of the paper's runs (``registry``: scales, named experiments, continuation and SFT runs), the
size ladder (``ladder``) and the cache that trains each run once (``cache``), as one import
(``from tiedlm_lib.runs import experiment, get_run``)."""

from tiedlm_lib.runs.cache import Run, StaleRunError, check_entry, get_run, is_complete, run_dir  # noqa: F401
from tiedlm_lib.runs.registry import (  # noqa: F401
    EXPERIMENTS,
    EXTENDED,
    SCALES,
    Experiment,
    Scale,
    Size,
    check_seed,
    check_seeds,
    continuation,
    experiment,
    extended_seeds,
    get_scale,
    horizon_seeds,
    intervention_arm,
    paper_config,
    section_overrides,
    sft_run,
    split_iters,
)
