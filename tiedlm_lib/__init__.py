"""tiedlm_lib: weight-tied ("looped") Transformer LMs — the library behind the executable companion to
"Tied-Depth Language Models" (paper A) and the Depth Control Protocol (paper B)."""

from tiedlm_lib.data import Corpus, eval_batches, load_corpus, prepare_corpus, split_corpus
from tiedlm_lib.evaluation.nll import DepthStats, depth_stats, depth_sweep, evaluate_nll, maxprob_exit
from tiedlm_lib.model.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from tiedlm_lib.model.layout import parse_layout
from tiedlm_lib.model.schedules import plan, run_plan
from tiedlm_lib.model.tied import TiedLM
from tiedlm_lib.runs import EXPERIMENTS, SCALES, experiment, get_run, paper_config
from tiedlm_lib.stats.bootstrap import NLLStats
from tiedlm_lib.training.loop import train

__version__ = "0.1.0"

__all__ = [
    "DataConfig", "ModelConfig", "RunConfig", "TrainConfig", "TiedLM", "parse_layout", "Corpus", "load_corpus",
    "prepare_corpus", "split_corpus", "eval_batches", "train", "NLLStats", "DepthStats", "depth_stats",
    "depth_sweep", "evaluate_nll", "maxprob_exit", "EXPERIMENTS", "SCALES", "experiment", "get_run", "paper_config",
    "plan", "run_plan",
]
