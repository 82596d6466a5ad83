"""tiedlm_lib: weight-tied ("looped") Transformer LMs — the library behind the executable companion to
"Tied-Depth Language Models" (paper A) and the Depth Control Protocol (paper B)."""

from .config import DataConfig, ModelConfig, RunConfig, TrainConfig
from .data import Corpus, eval_batches, load_corpus, prepare_corpus, split_corpus
from .evaluation import DepthStats, NLLStats, depth_stats, depth_sweep, evaluate_nll, maxprob_exit
from .experiments import EXPERIMENTS, SCALES, experiment, get_run, paper_config
from .layout import parse_layout
from .model import TiedLM
from .schedules import plan, run_plan
from .training import train

__version__ = "0.1.0"

__all__ = [
    "DataConfig", "ModelConfig", "RunConfig", "TrainConfig", "TiedLM", "parse_layout", "Corpus", "load_corpus",
    "prepare_corpus", "split_corpus", "eval_batches", "train", "NLLStats", "DepthStats", "depth_stats",
    "depth_sweep", "evaluate_nll", "maxprob_exit", "EXPERIMENTS", "SCALES", "experiment", "get_run", "paper_config",
    "plan", "run_plan",
]
