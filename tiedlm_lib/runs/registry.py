"""The registry of the paper's runs: each by name, at three scales from one code path.

A scale is a preset of sizes and lengths; an experiment is a small delta on it (size, layout, horizon, supervision,
backprop). ``experiment(name, scale, seed)`` gives the exact ``RunConfig``; the runs cache (``tiedlm_lib.runs.cache``)
trains it once.

Seeds: seed s initialises with ``torch.manual_seed(s)`` and draws batches from ``random.Random(42 + s)``; seed 0 is
the paper's setting (init 0, data stream 42, identical across every run).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tiedlm_lib.model.config import DataConfig, ModelConfig, RunConfig, TrainConfig


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
    chosen: str = ""  # how the sizes and learning rates were chosen (disclosed beside every result at this scale)
    seeds: tuple[int, ...] = (0,)  # the training seeds every section's verdicts rest on at this scale
    # further seeds for the cheap small-model runs of ``EXTENDED`` and the units that read them (docs/statistics.md
    # amendment 14); a section run with its own ``seeds`` uses none unless it asks (``extended_seeds``)
    extended_seeds: tuple[int, ...] = ()
    exact: bool = False  # the paper's own runs and recipes (no small-model economy in sections 05-07 and 10)
    sft_steps: int | None = None  # SFT steps and lr; None: a quarter of the base run's steps at a quarter of its lr
    sft_lr: float | None = None
    checkpoint_every: int = 0  # a resumable checkpoint every this many steps (a label: no run's fingerprint changes)
    # the horizon study (section 02): the small sandwich trained this many steps with the paper's long-run recipe
    # (None: long_steps, the paper's own horizon), its weights kept along the way (``horizon_points``)
    horizon_steps: int | None = None

    @property
    def horizon(self) -> int:
        return self.long_steps if self.horizon_steps is None else self.horizon_steps

    @property
    def horizon_warmup(self) -> int:
        """The paper's long-run warm-up (1,000 of 39,695 steps) as the same fraction of the horizon, so that the lr
        curve has the paper's shape in the fraction of training done (13,000 steps: 327)."""
        p = SCALES["paper"]
        return int(self.horizon * p.long_warmup / p.long_steps + 0.5)

    @property
    def horizon_points(self) -> tuple[int, ...]:
        """The steps whose weights a horizon run keeps before its last: the short run's length times 1, 2, 4, ...
        below the horizon (cpu: 1000, 2000, 4000, 8000; the final 13,000 is the trained model)."""
        return tuple(self.short_steps * 2 ** i for i in range(32) if self.short_steps * 2 ** i < self.horizon)


SFT_STEPS, SFT_LR = 28_304, 1e-4  # PROTOCOL §4.6: the paper's SFT runs

SCALES: dict[str, Scale] = {
    "smoke": Scale("smoke", Size(32, 2, 2e-3, 2e-4), Size(48, 2, 2e-3, 2e-4), K=4, seq_len=64, vocab_size=320,
                   batch_size=8, short_steps=30, long_steps=40, long_warmup=5, depths=(1, 2, 4), max_docs=1500,
                   log_every=5, seeds=(0,), horizon_steps=120,
                   chosen="sized only to run every notebook in CI in minutes; its verdicts are not evidence for or "
                   "against any claim"),
    "cpu": Scale("cpu", Size(64, 2, 2e-3, 2e-4), Size(128, 4, 1e-3, 1e-4), K=16, seq_len=128, vocab_size=512,
                 batch_size=16, short_steps=1000, long_steps=1500, long_warmup=100, depths=(1, 2, 4, 8, 16),
                 seeds=(0, 1, 2, 3, 4), extended_seeds=(5, 6, 7, 8, 9), checkpoint_every=100, horizon_steps=13_000,
                 chosen="vocabulary and learning rate picked on 2 cores to make the single-depth depth gap of v3 "
                 "visible (1000 steps, held-out NLL k=1 -> 16): vocab 2048 / lr 1e-3 gave a 0.12-nat gap, vocab 512 / "
                 "lr 1e-3 0.23, vocab 512 / lr 2e-3 0.83 (3.74 -> 2.91); the large size at lr 1e-3 3.31 -> 2.89. The "
                 "choice favours A1 (a larger depth gap); other claims were not consulted"),
    # PROTOCOL §1-§4 exactly. The corpus is the minimind pretraining JSONL: set TIEDLM_MINIMIND to its path.
    "paper": Scale("paper", Size(128, 4, 6e-4, 6e-5), Size(320, 10, 4e-4, 4e-5), K=30, seq_len=256,
                   vocab_size=23005, batch_size=32, short_steps=3000, long_steps=39695, long_warmup=1000,
                   depths=(1, 2, 4, 8, 16, 30), corpus="minimind", split="paper", log_every=100, seeds=(0,),
                   exact=True, sft_steps=SFT_STEPS, sft_lr=SFT_LR,
                   chosen="the original configurations (docs/protocol.md §1-§4); the tokenizer is retrained (the "
                   "paper's is not public)"),
}
# The paper scale rehearsed on a CPU (`python -m tiedlm_lib.paper --scale paper --rehearse`): the paper's exact models
# (V = 23005, d128/d320, K = 30, seq 256, its layouts and depth set), data split and recipes, on a generated
# minimind-format fixture (data.rehearsal_corpus), with budgets cut to a few steps and a batch of 2. Its runs and
# outputs live under their own name ("rehearsal"), so they never mix with real paper-scale results; its numbers
# mean nothing: it proves that every notebook and every run of the paper scale executes.
SCALES["rehearsal"] = dataclasses.replace(
    SCALES["paper"], name="rehearsal", batch_size=2, short_steps=4, long_steps=6, long_warmup=1, corpus="rehearsal",
    log_every=1, sft_steps=2,
    chosen="a rehearsal of the paper scale: its exact models on a generated minimind-format fixture, a few steps at "
    "batch 2; no number at this scale is evidence of anything")
# The paper scale's first minutes on a GPU (benchmarks/gpu_first_run.py): its exact models, batch 32 and recipes on the
# rehearsal's fixture (a GPU machine may have no corpus and no network), a few hundred steps a run. It proves that the
# paper scale trains and a section executes on the device, and how fast; its numbers are no evidence of anything.
SCALES["first-run"] = dataclasses.replace(
    SCALES["paper"], name="first-run", short_steps=300, long_steps=300, long_warmup=30, corpus="rehearsal",
    log_every=50, sft_steps=30,
    chosen="the paper scale's first run on a GPU: its exact models and batch on a generated minimind-format fixture, "
    "300 steps a run; no number at this scale is evidence of anything")


def scale_changes(scale: str) -> list[dict[str, Any]]:
    """What differs between a scale and the paper's: one row per quantity, with both values."""
    s, p = get_scale(scale), SCALES["paper"]
    size = lambda z: f"d{z.d_model}, {z.n_heads} heads, lr {z.lr:g}"  # noqa: E731
    rows = [("corpus", p.corpus, s.corpus), ("documents", "all" if p.max_docs is None else p.max_docs,
                                             "all" if s.max_docs is None else s.max_docs),
            ("train/validation split", p.split, s.split), ("vocabulary", p.vocab_size, s.vocab_size),
            ("small model (the 7.27M family)", size(p.small), size(s.small)),
            ("large model (the 23.05M family)", size(p.large), size(s.large)),
            ("loop depth K", p.K, s.K), ("sequence length", p.seq_len, s.seq_len), ("batch", p.batch_size,
                                                                                  s.batch_size),
            ("short-run steps (v3-v6)", p.short_steps, s.short_steps),
            ("long-run steps (section 02's v7 and long runs)", p.long_steps, s.long_steps),
            ("v7 (section 06), v9-v14, v9c: steps and size", f"{p.long_steps}, large", _family_steps(s)),
            ("horizon study steps (section 02)", p.horizon, s.horizon),
            ("multi-depth set", p.depths, s.depths), ("training seeds per verdict", len(p.seeds), len(s.seeds))]
    return [{"quantity": q, "paper": str(a), scale: str(b), "changed": a != b} for q, a, b in rows]


def _family_steps(s: Scale) -> str:
    """The steps and size the sections' v9-v14 runs train for at scale ``s`` (``section_overrides``)."""
    ovr = section_overrides(s.name)
    return f"{ovr.get('train.steps', s.long_steps)}, {ovr.get('size', 'large')}"


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


@dataclass(frozen=True)
class Experiment:
    """One of the paper's runs as a delta on a scale."""

    description: str
    reference: str  # where the paper (or this project) defines it
    size: str  # the scale's "small" (7.27M-family) or "large" (23.05M-family) preset
    layout: Callable[[Scale], str]
    horizon: str = "short"  # "short": the paper's 3000-step runs (v3-v6); "long": its 39,695-step runs; "study":
    # the horizon study's scale.horizon steps with the long-run recipe, weights kept at scale.horizon_points
    multi_depth: bool = False  # supervise the scale's depth set (the paper's v4 / v6)
    backprop: str = "full"

    def train_fields(self, s: Scale) -> dict[str, Any]:
        """The TrainConfig fields this experiment sets at scale ``s``."""
        if self.horizon == "short":
            kw: dict[str, Any] = {"steps": s.short_steps, "warmup": 0, "betas": (0.9, 0.999)}
        elif self.horizon == "study":
            kw = {"steps": s.horizon, "warmup": s.horizon_warmup, "betas": (0.9, 0.95),
                  "keep_weights_at": s.horizon_points}
        else:
            kw = {"steps": s.long_steps, "warmup": s.long_warmup, "betas": (0.9, 0.95)}
        if self.multi_depth:
            kw["depths"] = s.depths
        if self.backprop != "full":
            kw["backprop"] = self.backprop
        return kw


def _sandwich(s: Scale) -> str:
    return f"S S A*{s.K} S S"


EXPERIMENTS: dict[str, Experiment] = {
    "v3": Experiment("7M-family sandwich, single-depth, full backprop", "§4.1; PROTOCOL §3.4, §4.2", "small",
                     _sandwich),
    "v4": Experiment("v3 with multi-depth supervision", "§4.2; PROTOCOL §4.3", "small", _sandwich, multi_depth=True),
    "v5": Experiment("23M-family sandwich, single-depth, full backprop", "§4.1; PROTOCOL §3.4, §4.2", "large",
                     _sandwich),
    "v6": Experiment("v5 with multi-depth supervision", "§4.2; PROTOCOL §4.3", "large", _sandwich, multi_depth=True),
    "v7": Experiment("23M sandwich, long run, paper-form phantom gradient", "§3, §5.5; PROTOCOL §4.4-4.5", "large",
                     _sandwich, "long", backprop="phantom"),
    "v9": Experiment("iso-parameter vanilla: five distinct standard layers", "§5.5; PROTOCOL §3.6", "large",
                     lambda s: "S*5", "long"),
    "v10": Experiment("23M sandwich, long run, full backprop", "§5.5; PROTOCOL §4.5", "large", _sandwich, "long"),
    "v12": Experiment("two loops with a bridge layer", "§5.5; PROTOCOL §3.5", "large",
                      lambda s: f"S {_loops('A', s.K // 2)} S {_loops('B', s.K - s.K // 2)} S", "long"),
    "v13": Experiment("three loops", "§5.5; PROTOCOL §3.5", "large", lambda s: f"S {_loops('ABC', s.K)} S", "long"),
    "v14": Experiment("four loops, no closing standard layer", "§5.5; PROTOCOL §3.5", "large",
                      lambda s: f"S {_loops('ABCD', s.K)}", "long"),
    "v14c": Experiment("v14 with the closing standard layer restored (the confound the paper names)", "§5.5 (ours)",
                       "large", lambda s: f"S {_loops('ABCD', s.K)} S", "long"),
    "v14u": Experiment("v14 with its last loop under-iterated (an eighth of K), to test A16's second half",
                       "§5.5, A16 (ours)", "large", lambda s: f"S {_loops('ABC', s.K - max(1, s.K // 8))} "
                                                               f"D*{max(1, s.K // 8)}", "long"),
    **{f"horizon-{mode}": Experiment(
        f"the horizon study: the small sandwich, {mode} backprop, the paper's long-run recipe over the scale's "
        "horizon (cpu: 13x the short run)", "§3; issue 32 (ours)", "small", _sandwich, "study", backprop=mode)
       for mode in ("full", "phantom", "phantom-last")},
    "v9c": Experiment("compute-matched vanilla: one distinct layer per layer application of the tied sandwich",
                      "PROTOCOL §6.6 (v18 analogue; ours)", "large", lambda s: f"S*{s.K + 4}", "long"),
}


def _lookup(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}: expected one of {list(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def _data_config(s: Scale) -> DataConfig:
    corpus = s.corpus
    if corpus == "rehearsal":
        from tiedlm_lib.data import rehearsal_corpus

        corpus = str(rehearsal_corpus())
    elif corpus == "minimind":
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
    exp = _lookup(name)
    check_seed(seed)
    s = get_scale(scale)
    overrides = dict(overrides or {})
    size_name = overrides.pop("size", exp.size)  # "small" | "large": the scale's size preset
    model = model_config(name, scale, size_name)
    size: Size = getattr(s, size_name)
    train = TrainConfig(batch_size=s.batch_size, lr=size.lr, lr_min=size.lr_min, seed=seed, data_seed=42 + seed,
                        log_every=s.log_every, checkpoint_every=s.checkpoint_every, **exp.train_fields(s))
    run = RunConfig(name, scale, model, train, _data_config(s))
    return _apply_overrides(run, overrides) if overrides else run


def continuation(base: RunConfig, name: str, steps: int, lr: float, **train: Any) -> RunConfig:
    """A run that starts from ``base``'s final weights with a fresh optimiser and a constant lr (paper B's training
    intervention; SFT). ``train`` overrides further TrainConfig fields (e.g. depth_sampling="uniform")."""
    source = f"{base.scale}/{base.cache_name()}/model.safetensors"  # relative to the runs directory
    kw = {"steps": steps, "lr": lr, "lr_min": lr, "warmup": 0, "schedule": "constant", "init_from": source, **train}
    return RunConfig(name, base.scale, base.model, dataclasses.replace(base.train, **kw), base.data)


INTERVENTION_ARMS = {"fixed": "fixed", "sampled": "uniform"}  # arm -> TrainConfig.depth_sampling


def intervention_arm(base: RunConfig, arm: str, short_steps: int, steps: int | None = None, warmup: int = 100,
                     lr: float | None = None) -> RunConfig:
    """Paper B's training intervention on a single-depth run, as section 10 runs it: ``steps`` (default a quarter of
    the scale's ``short_steps``) of continued training from ``base``'s final weights with a fresh AdamW, warm-up
    ``warmup`` (capped at a quarter of the steps) then a constant lr (default a quarter of the base's peak), on a
    fresh batch stream (data seed + 1000) shared by both arms. ``fixed``: the loss at full depth; ``sampled``: each
    step trains a depth drawn uniformly from 1..N (a sampled-depth model)."""
    if arm not in INTERVENTION_ARMS:
        raise ValueError(f"arm must be one of {sorted(INTERVENTION_ARMS)}, got {arm!r}")
    steps = steps or max(2, short_steps // 4)
    return continuation(base, f"dcp-{arm}", steps, lr or base.train.lr / 4, depth_sampling=INTERVENTION_ARMS[arm],
                        warmup=min(warmup, steps // 4), data_seed=base.train.data_seed + 1000)


def sft_run(base: RunConfig, name: str, loss: str = "paper", steps: int | None = None, lr: float | None = None,
            conversations: str | None = None, layout: str | None = None) -> RunConfig:
    """SFT from ``base``'s final weights as PROTOCOL §4.6: a fresh AdamW with default betas, constant lr, batch as in
    pre-training; loss protocol ``"paper"`` (the whole suffix, pad targets included) or ``"masked"`` (response tokens
    only). ``layout`` (``tiedlm_lib.training.sft``) defaults to the protocol's own: the paper's grid for
    ``"paper"``, the packed layout (no real token attends to a pad) for the corrected ``"masked"``. Defaults: the
    scale's recipe where it has one (paper: the original SFT_STEPS = 28,304 steps at lr 1e-4); else a quarter of the
    base run's steps at a quarter of its peak lr (the paper's 1e-4 is a quarter of 23M's)."""
    s = get_scale(base.scale)
    cfg = continuation(base, name, steps or s.sft_steps or max(2, base.train.steps // 4),
                       lr or s.sft_lr or base.train.lr / 4, betas=(0.9, 0.999), pad_targets="include")
    layout = layout or ("grid" if loss == "paper" else "packed")
    data = dataclasses.replace(base.data, task="sft", sft_loss=loss, sft_layout=layout, conversations=conversations)
    return dataclasses.replace(cfg, data=data)


def paper_config(name: str) -> ModelConfig:
    """The exact model of a paper version (PROTOCOL §3.4) at V = 23005."""
    return model_config(name, "paper")


def model_config(name: str, scale: str = "cpu", size: str | None = None) -> ModelConfig:
    """The model of a named experiment at a scale (its size preset, or ``size``), without its data: no corpus is
    needed (``experiment`` builds the whole run)."""
    s, exp = get_scale(scale), _lookup(name)
    size = exp.size if size is None else size
    if size not in ("small", "large"):
        raise ValueError(f"size must be 'small' or 'large', got {size!r}")
    z: Size = getattr(s, size)
    return ModelConfig(vocab_size=s.vocab_size, d_model=z.d_model, n_heads=z.n_heads, layout=exp.layout(s),
                       max_seq_len=s.seq_len)


# ---------------------------------------------------------------------------------------------------- every run
def section_overrides(scale: str) -> dict[str, Any]:
    """The extra models of sections 05–07 and 10 (v7, v9, v9c, v10, v12–v14c): at the paper scale the paper's own
    runs (no override); at the smaller scales the small size for 0.8 × the short run, an economy that keeps the cpu
    paper within its budget (and that the sections state)."""
    s = get_scale(scale)
    return {} if s.exact else {"size": "small", "train.steps": int(0.8 * s.short_steps)}


def notebook_runs(scale: str, seeds: Sequence[int] | None = None,
                  extended: Sequence[int] | None = None) -> list[RunConfig]:
    """Every run the sections train at ``scale`` for ``seeds`` (default: the scale's), in a training order (bases
    before their continuations), without duplicates: what ``python -m tiedlm_lib train-all`` trains into the runs
    cache ahead of ``make paper``, and what ``python -m tiedlm_lib.paper --plan`` budgets. It mirrors the sections'
    ``get_run`` calls at their default parameters; a section run with other parameters trains what it lacks itself.
    ``extended``: the seeds at which only ``EXTENDED``'s runs are trained (default as ``extended_seeds``)."""
    return [cfg for cfg, _ in _tagged_runs(scale, seeds, extended)]


def section_runs(scale: str, seeds: Sequence[int] | None = None,
                 extended: Sequence[int] | None = None) -> dict[str, list[RunConfig]]:
    """Per section (its two-digit number, "01" … "12"), the runs of ``notebook_runs`` it trains, bases included,
    in the same order: train one section's runs (``train-all --sections 06``), then execute that section while the
    next one's train. The claims section (11) trains nothing and has no entry."""
    out: dict[str, list[RunConfig]] = {}
    for cfg, sections in _tagged_runs(scale, seeds, extended):
        for sec in sorted(sections):
            out.setdefault(sec, []).append(cfg)
    return dict(sorted(out.items()))


def _tagged_runs(scale: str, seeds: Sequence[int] | None, extended: Sequence[int] | None = None
                 ) -> list[tuple[RunConfig, set[str]]]:
    """``notebook_runs`` with, for each run, the sections whose ``get_run`` calls ask for it."""
    s = get_scale(scale)
    more = extended_seeds(scale, seeds, extended)
    seeds = check_seeds(list(seeds) if seeds is not None else list(s.seeds))
    short = section_overrides(scale)  # sections 05-07 and 10
    sft_short = None if s.exact else max(2, int(0.8 * s.short_steps) // 4)  # paper: the original recipe
    out: dict[str, tuple[RunConfig, set[str]]] = {}

    def add(cfg: RunConfig, *sections: str) -> RunConfig:
        out.setdefault(f"{cfg.train.seed}/{cfg.cache_name()}", (cfg, set()))[1].update(sections)
        return cfg

    short_users = {"v10": ("06", "07"), "v7": ("06",), "v9": ("05", "06", "07", "10"), "v9c": ("06",),
                   "v12": ("07",), "v13": ("05", "07", "10"), "v14": ("07",), "v14c": ("07",), "v14u": ("07",)}
    sft_users = {"v10": ("06", "07"), "v9": ("06", "07"), "v13": ("07",)}  # SFT of the tied, vanilla, 3-loop models
    for seed in seeds:
        small = add(experiment("v3", scale, seed), "01", "02", "03", "04", "05", "08", "09", "10", "12")
        add(experiment("v3", scale, seed, {"model.block": "residual"}), "01", "03", "09")  # both block forms
        add(experiment("v5", scale, seed), "03", "04", "05", "09", "10")
        add(experiment("v5", scale, seed, {"model.block": "residual"}), "03", "09")
        add(experiment("v4", scale, seed), "04", "10", "12")
        add(experiment("v6", scale, seed), "04", "10")
        for name, users in short_users.items():
            base = add(experiment(name, scale, seed, short), *users)
            if name in sft_users:
                add(sft_run(base, f"{name}-sft-paper", "paper", steps=sft_short), *sft_users[name])
        add(sft_run(small, "v3-sft-paper", "paper"), "05", "08")
        add(sft_run(small, "v3-sft-masked", "masked"), "05", "08")
        add(experiment("v3", scale, seed, {"train.pad_targets": "include"}), "05")
        add(experiment("v7", scale, seed), "02")  # the long phantom run
        for mode in ("phantom", "phantom-last", "truncated:4"):  # short runs ("full" is v3)
            add(experiment("v3", scale, seed, {"train.backprop": mode}), "02")
        for mode in ("full", "phantom", "phantom-last"):  # the long horizon
            add(experiment("v3", scale, seed, {"train.backprop": mode, "train.steps": s.long_steps}), "02")
        for arm in INTERVENTION_ARMS:  # paper B's intervention (the sampled arm is the sampled-depth model)
            add(intervention_arm(small, arm, s.short_steps), "10", *(("04", "12") if arm == "sampled" else ()))
    for seed in (x for x in more if x not in seeds):  # EXTENDED's runs only
        small = add(experiment("v3", scale, seed), *EXTENDED["v3"])
        add(experiment("v4", scale, seed), *EXTENDED["v4"])
        add(intervention_arm(small, "sampled", s.short_steps), *EXTENDED["sampled"])
        for name in ("v14", "v14u"):
            add(experiment(name, scale, seed, short), *EXTENDED[name])
    for seed in seeds:  # the horizon study last: the longest runs, no other section waits for them; seed by seed,
        for mode in HORIZON_SEEDS:  # so that two workers (one --reverse) each complete a paired seed early
            if seed in horizon_seeds(scale, mode, seeds):
                add(experiment(f"horizon-{mode}", scale, seed), "02")
    from tiedlm_lib.runs.ladder import (  # the size ladder (section 14; docs/statistics.md amendment 17)
        LADDERS,
        ladder_runs,
    )

    if scale in LADDERS:  # its fixed seeds among ``seeds``, cheapest points first; its v3-v6 points are the runs above
        for cfg in ladder_runs(scale):
            if cfg.train.seed in seeds:
                add(cfg, "14")
    # stable: the rest keep their order; the horizon study and then the ladder's own runs last
    return sorted(out.values(), key=lambda v: (v[0].name.startswith("horizon-"), v[0].name.startswith("ladder-")))


# The horizon study's seeds, fixed in advance (docs/statistics.md amendment 12): seeds 0-4 for the paper phantom and
# full backprop, 0-2 for phantom-last (Q5's comparison); an execution trains those of them it runs with
HORIZON_SEEDS: dict[str, tuple[int, ...]] = {"full": (0, 1, 2, 3, 4), "phantom": (0, 1, 2, 3, 4),
                                             "phantom-last": (0, 1, 2)}


def horizon_seeds(scale: str, mode: str, seeds: Sequence[int] | None = None) -> list[int]:
    """The seeds among ``seeds`` (default: the scale's) that the horizon study trains for ``mode``: those of
    ``HORIZON_SEEDS[mode]`` (none else, however many seeds a section runs with)."""
    if mode not in HORIZON_SEEDS:
        raise ValueError(f"mode must be one of {list(HORIZON_SEEDS)}, got {mode!r}")
    s = get_scale(scale)
    seeds = check_seeds(list(seeds) if seeds is not None else list(s.seeds))
    return [x for x in seeds if x in HORIZON_SEEDS[mode]]


# The runs trained at a scale's ``extended_seeds`` and the sections that read them there (docs/statistics.md
# amendment 14): the single-depth, multi-depth and sampled-depth small models (A4/Q2 and A7 at the small size, Q7) and
# A16's equal-loop / under-iterated pair. Every other run, and every other unit, stays on the scale's ``seeds``.
EXTENDED: dict[str, tuple[str, ...]] = {"v3": ("04",), "v4": ("04", "12"), "sampled": ("04",),
                                        "v14": ("07",), "v14u": ("07",)}  # section 12 reads v4 alone there (Q7)


def extended_seeds(scale: str, seeds: Sequence[int] | None = None, extended: Sequence[int] | None = None
                   ) -> list[int]:
    """The seeds beyond ``seeds`` at which ``EXTENDED``'s units are also pooled: ``extended`` when given (``[]``:
    none), else the scale's ``extended_seeds`` when ``seeds`` is the default (None) and none when a caller chose its
    own seeds (``make paper SEEDS=0`` runs one seed throughout). Seeds already in ``seeds`` are left out."""
    s = get_scale(scale)
    base = check_seeds(list(seeds) if seeds is not None else list(s.seeds))
    if extended is None:
        extended = list(s.extended_seeds) if seeds is None else []
    if not isinstance(extended, (list, tuple)):
        raise ValueError(f"extended seeds must be a list of integers >= 0 such as [5, 6], got {extended!r}")
    more = check_seeds(list(extended)) if extended else []
    return [x for x in more if x not in base]


# PROTOCOL §4.8: the paper's logged step times (ms/step, one GPU, 23M models unless named) per run name
LOGGED_MS = {"v5": 143, "v6": 300, "v7": 69, "v9": 34, "v10": 143, "v13": 135, "v14": 133, "v9-sft-paper": 54,
             "v13-sft-paper": 180}


def plan_rows(scale: str = "paper", seeds: Sequence[int] | None = None,
              step_ms: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """What ``notebook_runs`` will train, with an estimate of its cost: steps, parameters, ms/step — the paper's
    logged time for the run (``LOGGED_MS``, or ``step_ms`` of the user's own measurements), else scaled from v5's
    143 ms by block applications × d² (× 2.1 for multi-depth supervision, as v6/v5; × 0.48 for the phantom
    gradient, as v7/v5) — GPU hours and the disk of its final weights (float32)."""


    unset = not os.environ.get("TIEDLM_MINIMIND")
    if unset:  # a plan reads no data: the configs only need some corpus name
        os.environ["TIEDLM_MINIMIND"] = "minimind (not needed for a plan)"
    try:
        return _plan_rows(scale, seeds, {**LOGGED_MS, **(step_ms or {})}, bool(step_ms))
    finally:
        if unset:
            del os.environ["TIEDLM_MINIMIND"]


def _plan_rows(scale: str, seeds: Sequence[int] | None, times: dict[str, float], measured: bool
               ) -> list[dict[str, Any]]:
    import torch

    from tiedlm_lib.model.layout import parse_layout
    from tiedlm_lib.model.tied import TiedLM

    def apps(layout: str) -> int:
        return sum(seg.iters for seg in parse_layout(layout))

    v5 = experiment("v5", "paper")
    rows = []
    for cfg in notebook_runs(scale, seeds):
        with torch.device("meta"):
            params = TiedLM(cfg.model).num_params()
        base = cfg.name.split("-sft")[0]
        ref = experiment(base, "paper") if base in EXPERIMENTS else None  # the run the time was logged on
        same = ref is not None and cfg.model == ref.model and cfg.train.backprop == ref.train.backprop
        if cfg.name in times and same:
            ms, basis = float(times[cfg.name]), "measured" if measured else "logged"
        else:
            ms = times["v5"] * apps(cfg.model.layout) * cfg.model.d_model ** 2 / (apps(v5.model.layout)
                                                                                   * v5.model.d_model ** 2)
            ms *= cfg.train.batch_size * cfg.data.seq_len / (v5.train.batch_size * v5.data.seq_len)
            ms *= 2.1 if cfg.train.depths else 1.0
            ms *= 0.48 if cfg.train.backprop.startswith("phantom") else 1.0
            basis = "scaled from v5"
        rows.append({"run": cfg.name, "seed": cfg.train.seed, "layout": cfg.model.layout, "steps": cfg.train.steps,
                     "params": params, "ms/step": round(ms, 1), "basis": basis,
                     "GPU hours": cfg.train.steps * ms / 3.6e6, "disk MB": params * 4 / 2 ** 20})
    return rows
