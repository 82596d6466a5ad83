"""The paper's runs by name, at three scales from one code path, and a cache that trains each run once.

A scale is a preset of sizes and lengths; an experiment is a small delta on it (layout, supervision, backprop,
schedule). ``get_run(name, scale, seed)`` returns a trained model, training it only if the runs cache has no
complete entry for exactly that configuration (the directory name carries a hash of the whole config).

Seeds: seed s initialises with ``torch.manual_seed(s)`` and draws batches from ``random.Random(42 + s)``; seed 0 is
the paper's setting (init 0, data stream 42, identical across every run).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import distributed
from .checkpoint import load_model
from .config import DataConfig, ModelConfig, RunConfig, TrainConfig
from .model import TiedLM
from .paths import runs_dir


@dataclass(frozen=True)
class Size:
    d_model: int
    n_heads: int
    lr: float
    lr_min: float


@dataclass(frozen=True)
class Scale:
    """Sizes and lengths of one scale. ``small``/``large`` are the analogues of the paper's 7.27M / 23.05M."""

    name: str
    small: Size
    large: Size
    K: int  # trained loop depth (total applications over all loops)
    seq_len: int
    vocab_size: int
    batch_size: int
    short_steps: int  # the paper's 3000-step runs (v3-v6)
    long_steps: int  # the paper's 39,695-step runs (v7, v9, v10, v12-v14)
    long_warmup: int
    depths: tuple[int, ...]  # the multi-depth supervision set, ending at K
    corpus: str = "kjv"
    split: str = "document"  # "paper": the original positional 95%/5% split
    max_docs: int | None = None
    log_every: int = 10


SCALES: dict[str, Scale] = {
    "smoke": Scale("smoke", Size(32, 2, 2e-3, 2e-4), Size(48, 2, 2e-3, 2e-4), K=4, seq_len=64, vocab_size=320,
                   batch_size=8, short_steps=30, long_steps=40, long_warmup=5, depths=(1, 2, 4), max_docs=1500,
                   log_every=5),
    # Calibrated on 2 cores (1000 steps, v3, held-out NLL k=1 -> 16): vocab 2048 / lr 1e-3 gave a 0.12-nat depth gap,
    # vocab 512 / lr 1e-3 0.23, vocab 512 / lr 2e-3 0.83 (3.74 -> 2.91); the large size at lr 1e-3: 3.31 -> 2.89.
    "cpu": Scale("cpu", Size(64, 2, 2e-3, 2e-4), Size(128, 4, 1e-3, 1e-4), K=16, seq_len=128, vocab_size=512,
                 batch_size=16, short_steps=1000, long_steps=1500, long_warmup=100, depths=(1, 2, 4, 8, 16)),
    # PROTOCOL §1-§4 exactly. The corpus is the minimind pretraining JSONL: set TIEDLM_MINIMIND to its path.
    "paper": Scale("paper", Size(128, 4, 6e-4, 6e-5), Size(320, 10, 4e-4, 4e-5), K=30, seq_len=256,
                   vocab_size=23005, batch_size=32, short_steps=3000, long_steps=39695, long_warmup=1000,
                   depths=(1, 2, 4, 8, 16, 30), corpus="minimind", split="paper", log_every=100),
}


def get_scale(scale: str) -> Scale:
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}: expected one of {sorted(SCALES)}")
    return SCALES[scale]


def check_seed(seed: Any) -> int:
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return seed


def check_seeds(seeds: Any) -> list[int]:
    """A notebook's ``seeds`` parameter: a non-empty list of distinct integers >= 0."""
    if not isinstance(seeds, (list, tuple)) or not seeds:
        raise ValueError(f"seeds must be a non-empty list of integers >= 0 such as [0, 1, 2], got {seeds!r}")
    for s in seeds:
        check_seed(s)
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds!r}")
    return list(seeds)


def split_iters(total: int, n: int) -> list[int]:
    """Split a total iteration budget over n loops, larger shares first (30 over 4 gives 8, 8, 7, 7 as in v14)."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def _loops(letters: str, K: int) -> str:
    return " ".join(f"{c}*{k}" for c, k in zip(letters, split_iters(K, len(letters))))


# name -> (description, paper reference, builder(scale) -> (size, layout, train-kwargs))
Builder = Callable[[Scale], tuple[str, str, dict[str, Any]]]


def _short(s: Scale) -> dict[str, Any]:
    return {"steps": s.short_steps, "warmup": 0, "betas": (0.9, 0.999)}


def _long(s: Scale) -> dict[str, Any]:
    return {"steps": s.long_steps, "warmup": s.long_warmup, "betas": (0.9, 0.95)}


EXPERIMENTS: dict[str, tuple[str, str, Builder]] = {
    "v3": ("7M-family sandwich, single-depth, full backprop", "§4.1; PROTOCOL §3.4, §4.2",
           lambda s: ("small", f"S S A*{s.K} S S", _short(s))),
    "v4": ("v3 with multi-depth supervision", "§4.2; PROTOCOL §4.3",
           lambda s: ("small", f"S S A*{s.K} S S", {**_short(s), "depths": s.depths})),
    "v5": ("23M-family sandwich, single-depth, full backprop", "§4.1; PROTOCOL §3.4, §4.2",
           lambda s: ("large", f"S S A*{s.K} S S", _short(s))),
    "v6": ("v5 with multi-depth supervision", "§4.2; PROTOCOL §4.3",
           lambda s: ("large", f"S S A*{s.K} S S", {**_short(s), "depths": s.depths})),
    "v7": ("23M sandwich, long run, paper-form phantom gradient", "§3, §5.5; PROTOCOL §4.4-4.5",
           lambda s: ("large", f"S S A*{s.K} S S", {**_long(s), "backprop": "phantom"})),
    "v9": ("iso-parameter vanilla: five distinct standard layers", "§5.5; PROTOCOL §3.6",
           lambda s: ("large", "S*5", _long(s))),
    "v10": ("23M sandwich, long run, full backprop", "§5.5; PROTOCOL §4.5",
            lambda s: ("large", f"S S A*{s.K} S S", _long(s))),
    "v12": ("two loops with a bridge layer", "§5.5; PROTOCOL §3.5",
            lambda s: ("large", f"S {_loops('A', s.K // 2)} S {_loops('B', s.K - s.K // 2)} S", _long(s))),
    "v13": ("three loops", "§5.5; PROTOCOL §3.5", lambda s: ("large", f"S {_loops('ABC', s.K)} S", _long(s))),
    "v14": ("four loops, no closing standard layer", "§5.5; PROTOCOL §3.5",
            lambda s: ("large", f"S {_loops('ABCD', s.K)}", _long(s))),
    "v14c": ("v14 with the closing standard layer restored (the confound the paper names)", "§5.5 (ours)",
             lambda s: ("large", f"S {_loops('ABCD', s.K)} S", _long(s))),
    "v9c": ("compute-matched vanilla: one distinct layer per layer application of the tied sandwich", "PROTOCOL "
            "§6.6 (v18 analogue; ours)", lambda s: ("large", f"S*{s.K + 4}", _long(s))),
}


def _data_config(s: Scale) -> DataConfig:
    corpus = s.corpus
    if corpus == "minimind":
        corpus = os.environ.get("TIEDLM_MINIMIND", "")
        if not corpus:
            raise ValueError("the paper scale trains on the minimind pretraining JSONL: set TIEDLM_MINIMIND to its "
                             "local path (e.g. /data/pretrain_hq.jsonl), or to "
                             "hf://jingyaogong/minimind_dataset/pretrain_hq.jsonl to download it from the hub")
    return DataConfig(corpus=corpus, vocab_size=s.vocab_size, seq_len=s.seq_len, max_docs=s.max_docs, split=s.split)


def _apply_overrides(run: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """Overrides are dotted keys into the run config: {"model.block": "residual", "train.steps": 500}."""
    parts: dict[str, dict[str, Any]] = {"model": {}, "train": {}, "data": {}}
    for key, value in overrides.items():
        section, _, fld = key.partition(".")
        if section not in parts or fld not in {f.name for f in dataclasses.fields(getattr(run, section))}:
            raise ValueError(f"unknown override {key!r}: expected 'model.<field>', 'train.<field>' or 'data.<field>'")
        parts[section][fld] = value
    model = dataclasses.replace(run.model, **parts["model"])
    data = dataclasses.replace(run.data, **parts["data"])
    if "vocab_size" in parts["data"] and "vocab_size" not in parts["model"]:
        model = dataclasses.replace(model, vocab_size=data.vocab_size)
    return RunConfig(run.name, run.scale, model, dataclasses.replace(run.train, **parts["train"]), data)


def experiment(name: str, scale: str = "cpu", seed: int = 0, overrides: dict[str, Any] | None = None) -> RunConfig:
    """The run config of a named experiment at a scale. ``overrides`` change fields by dotted key."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}: expected one of {list(EXPERIMENTS)}")
    check_seed(seed)
    s = get_scale(scale)
    size_name, layout, train_kw = EXPERIMENTS[name][2](s)
    overrides = dict(overrides or {})
    size_name = overrides.pop("size", size_name)  # "small" | "large": the scale's size preset
    if size_name not in ("small", "large"):
        raise ValueError(f"size must be 'small' or 'large', got {size_name!r}")
    size: Size = getattr(s, size_name)
    model = ModelConfig(vocab_size=s.vocab_size, d_model=size.d_model, n_heads=size.n_heads, layout=layout,
                        max_seq_len=s.seq_len)
    train = TrainConfig(batch_size=s.batch_size, lr=size.lr, lr_min=size.lr_min, seed=seed, data_seed=42 + seed,
                        log_every=s.log_every, **train_kw)
    run = RunConfig(name, scale, model, train, _data_config(s))
    return _apply_overrides(run, overrides) if overrides else run


def continuation(base: RunConfig, name: str, steps: int, lr: float, **train: Any) -> RunConfig:
    """A run that starts from ``base``'s final weights with a fresh optimiser and a constant lr (paper B's training
    intervention; SFT). ``train`` overrides further TrainConfig fields (e.g. depth_sampling="uniform")."""
    source = f"{base.scale}/{run_dir(base, root='.').name}/model.safetensors"  # relative to the runs directory
    kw = {"steps": steps, "lr": lr, "lr_min": lr, "warmup": 0, "schedule": "constant", "init_from": source, **train}
    return RunConfig(name, base.scale, base.model, dataclasses.replace(base.train, **kw), base.data)


def sft_run(base: RunConfig, name: str, loss: str = "paper", steps: int | None = None, lr: float | None = None,
            conversations: str | None = None) -> RunConfig:
    """SFT from ``base``'s final weights as PROTOCOL §4.6: a fresh AdamW with default betas, constant lr (the paper:
    1e-4, a quarter of the 23M peak; default here: a quarter of the base's peak), batch as in pre-training; loss
    protocol ``"paper"`` (the whole suffix, pad targets included) or ``"masked"`` (response tokens only)."""
    cfg = continuation(base, name, steps or max(2, base.train.steps // 4), lr or base.train.lr / 4,
                       betas=(0.9, 0.999), pad_targets="include")
    data = dataclasses.replace(base.data, task="sft", sft_loss=loss, conversations=conversations)
    return dataclasses.replace(cfg, data=data)


def paper_config(name: str) -> ModelConfig:
    """The exact model of a paper version (PROTOCOL §3.4) at V = 23005."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown paper version {name!r}: expected one of {list(EXPERIMENTS)}")
    s = SCALES["paper"]
    size_name, layout, _ = EXPERIMENTS[name][2](s)
    size = getattr(s, size_name)
    return ModelConfig(vocab_size=s.vocab_size, d_model=size.d_model, n_heads=size.n_heads, layout=layout,
                       max_seq_len=s.seq_len)


# ---------------------------------------------------------------------------------------------------- runs cache
@dataclass
class Run:
    config: RunConfig
    dir: Path
    model: TiedLM
    fresh: bool = False  # trained (or resumed) by this call rather than loaded from the cache

    @property
    def metrics(self) -> list[dict[str, Any]]:
        p = self.dir / "metrics.jsonl"
        return [json.loads(line) for line in p.read_text().splitlines()] if p.is_file() else []

    @property
    def result(self) -> dict[str, Any]:
        return json.loads((self.dir / "result.json").read_text())


def run_dir(run: RunConfig, root: str | Path | None = None) -> Path:
    root = Path(root) if root is not None else runs_dir()
    return root / run.scale / f"{run.name}-s{run.train.seed}-{run.fingerprint()}"


def is_complete(path: Path) -> bool:
    """A run is complete only once result.json exists; it is written last, after the final weights."""
    return (path / "result.json").is_file() and (path / "model.safetensors").is_file()


def get_run(name_or_config: str | RunConfig, scale: str = "cpu", seed: int = 0,
            overrides: dict[str, Any] | None = None, *, root: str | Path | None = None, train_if_missing: bool = True,
            progress: bool | None = None, device: str = "cpu") -> Run:
    """A trained run from the cache, training (or resuming) it first if needed. Concurrent callers asking for the
    same run wait on a file lock instead of training it twice."""
    from .atomic import atomic_write_text
    from .training import FINAL, train

    if isinstance(name_or_config, RunConfig):
        cfg = name_or_config
    else:
        cfg = experiment(name_or_config, scale, seed, overrides)
    path = run_dir(cfg, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    distributed.init_from_env(torch.device(device))
    rank, world = distributed.rank_world()
    fresh = False
    # Rank 0 holds the lock; under torchrun every rank trains together (rank 0 decides whether training is needed).
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        if rank == 0:
            fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = distributed.broadcast_object(not is_complete(path))
        if fresh:
            if not train_if_missing:
                raise FileNotFoundError(f"run {cfg.name}/{cfg.scale}/seed {cfg.train.seed} is not in the cache: {path}")
            res = train(cfg, path, progress=progress, device=device)
            if rank == 0:
                atomic_write_text(path / "result.json", json.dumps(
                    {"final_loss": res.final_loss, "skipped_steps": res.skipped_steps, "seconds": res.seconds,
                     "steps": cfg.train.steps, "params": res.model.num_params(), "alpha": res.model.alphas(),
                     "processes": world}, indent=1))
                (path / "checkpoint.safetensors").unlink(missing_ok=True)  # the final weights supersede it
            distributed.barrier()
    return Run(cfg, path, load_model(path / FINAL, cfg.model), fresh)
