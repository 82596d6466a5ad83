"""The paper's experiments as one import: the registry of its runs (``tiedlm_lib.registry``: scales, named
experiments, continuation and SFT runs) and the cache that trains each run once (``tiedlm_lib.runs``)."""

from .registry import (  # noqa: F401
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
from .runs import Run, StaleRunError, check_entry, get_run, is_complete, run_dir  # noqa: F401
