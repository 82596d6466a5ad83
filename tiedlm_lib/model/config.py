"""Configuration dataclasses. Every field is validated on construction so a bad value fails at once, by name."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from tiedlm_lib.model.gradients import Backprop
from tiedlm_lib.model.layout import parse_layout

BLOCK_FORMS = ("paper", "residual")
PAD_TARGETS = ("ignore", "include")
SCHEDULES = ("cosine", "constant")
BATCH_MODES = ("padded", "packed")
AMP_MODES = ("auto", "bf16", "none")
SPLITS = ("document", "paper")


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def _positive_int(obj: Any, name: str) -> None:
    v = getattr(obj, name)
    _check(isinstance(v, int) and not isinstance(v, bool) and v > 0,
           f"{type(obj).__name__}.{name} must be a positive integer, got {v!r}")


def _choice(obj: Any, name: str, choices: tuple[str, ...]) -> None:
    v = getattr(obj, name)
    _check(v in choices, f"{type(obj).__name__}.{name} must be one of {choices}, got {v!r}")


@dataclass(frozen=True)
class ModelConfig:
    """A tied-depth LM. Defaults are the paper's 7.27M family (v3) except the vocabulary."""

    vocab_size: int = 23005
    d_model: int = 128
    n_heads: int = 4
    layout: str = "S S A*30 S S"
    max_seq_len: int = 256
    # "paper": f(z) = LN2(z + attn) + MLP(LN2(.)), re-adds a normalised state each step (PROTOCOL §3.3);
    # "residual": f(z) = attn + MLP(LN2(z + attn)), a plain pre-norm residual update with the same parameters.
    block: str = "paper"
    mlp_ratio: int = 4
    alpha_init: float = 0.1  # α = clamp(sigmoid(a), alpha_min, alpha_max), a initialised at logit(alpha_init)
    alpha_min: float = 0.01
    alpha_max: float = 0.9
    gate_init: float = 0.1  # raw (unconstrained) sublayer gates of standard layers
    ln_eps: float = 1e-5
    # The original position table has max_seq_len + 1 rows (257 at L = 256); one row is never used but counts
    # toward the paper's parameter totals.
    extra_pos_rows: int = 1

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "max_seq_len", "mlp_ratio"):
            _positive_int(self, name)
        _check(self.d_model % self.n_heads == 0,
               f"ModelConfig.d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        _choice(self, "block", BLOCK_FORMS)
        parse_layout(self.layout)  # raises on a bad layout
        _check(0.0 < self.alpha_min <= self.alpha_init <= self.alpha_max < 1.0,
               f"ModelConfig needs 0 < alpha_min <= alpha_init <= alpha_max < 1, got "
               f"{self.alpha_min}, {self.alpha_init}, {self.alpha_max}")
        _check(isinstance(self.extra_pos_rows, int) and self.extra_pos_rows >= 0,
               f"ModelConfig.extra_pos_rows must be an integer >= 0, got {self.extra_pos_rows!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def trained_depth(self) -> dict[str, int]:
        """Each loop's trained number of applications, by loop letter."""
        return {s.name: s.iters for s in parse_layout(self.layout) if s.kind == "loop"}


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Defaults follow the paper's short 7M runs (PROTOCOL §4.2), at a smaller step count."""

    steps: int = 3000
    batch_size: int = 32
    lr: float = 6e-4
    lr_min: float = 6e-5
    warmup: int = 0  # linear from 0; the paper's 39,695-step runs use 1000, the 3000-step runs none
    schedule: str = "cosine"  # cosine from lr to lr_min after warmup, or constant lr (SFT)
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.01  # on all parameters, as the original code did (PROTOCOL §7.14)
    clip: float = 1.0
    # "full": exact BPTT through every iteration; "phantom": the paper's one-step phantom gradient at the loop input
    # (PROTOCOL §4.4); "phantom-last": the standard one-step form at the last state; "truncated:n": gradient through
    # the last n iterations; "checkpoint": exact gradients, activations recomputed per iteration (memory near
    # phantom's). See tiedlm_lib.model.gradients for how the bottom stack gets its gradient in each.
    backprop: str = "full"
    # Supervision: None trains at the model's trained depth only; a tuple of depths trains the weighted mean of the
    # CE at each (the paper's multi-depth: (1, 2, 4, 8, 16, 30), equal weights).
    depths: tuple[int, ...] | None = None
    depth_weights: tuple[float, ...] | None = None
    pad_targets: str = "ignore"  # "ignore": CE with ignore_index = pad (PT); "include": pad targets trained (SFT)
    # "uniform": each step draws k ~ Uniform{1..N} total core applications and trains the prefix(k) plan (paper B's
    # sampled-depth intervention); "fixed": the trained depth (or the depths above)
    depth_sampling: str = "fixed"
    # start from these weights (a model/checkpoint file; relative paths are inside the runs directory) with a fresh
    # optimiser: continued training such as paper B's intervention or SFT
    init_from: str | None = None
    amp: str = "auto"  # bf16 autocast on CUDA, fp32 on CPU
    compile: bool = False  # torch.compile each block (pays off on CUDA; did not on the 2-core CPU)
    seed: int = 0  # initialisation (torch.manual_seed)
    data_seed: int = 42  # the batch stream (random.Random), as in every original PT script
    checkpoint_every: int = 0  # 0: only at the end
    # steps after which the weights alone are kept (weights-step<N>.safetensors beside the final model): the points
    # of a training-horizon curve. Part of the run's identity, unlike checkpoint_every: a run keeps what it promised
    keep_weights_at: tuple[int, ...] = ()
    log_every: int = 10
    max_nonfinite: int = 100  # consecutive-or-not non-finite losses tolerated before the run stops

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(self.betas))
        object.__setattr__(self, "keep_weights_at", tuple(self.keep_weights_at))
        for name in ("steps", "batch_size", "log_every", "max_nonfinite"):
            _positive_int(self, name)
        _check(isinstance(self.warmup, int) and 0 <= self.warmup < self.steps,
               f"TrainConfig.warmup must be an integer in [0, steps), got {self.warmup!r}")
        _check(isinstance(self.checkpoint_every, int) and self.checkpoint_every >= 0,
               f"TrainConfig.checkpoint_every must be an integer >= 0, got {self.checkpoint_every!r}")
        keep = self.keep_weights_at
        _check(all(isinstance(k, int) and not isinstance(k, bool) and 0 < k < self.steps for k in keep)
               and list(keep) == sorted(set(keep)),
               f"TrainConfig.keep_weights_at must be increasing integers in [1, steps) (steps {self.steps}; the final "
               f"weights are always kept), got {keep!r}")
        _check(self.lr > 0 and 0 <= self.lr_min <= self.lr,
               f"TrainConfig needs lr > 0 and 0 <= lr_min <= lr, got lr={self.lr}, lr_min={self.lr_min}")
        _check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
               f"TrainConfig.betas must be two numbers in [0, 1), got {self.betas!r}")
        _check(self.clip > 0 and math.isfinite(self.clip), f"TrainConfig.clip must be > 0, got {self.clip!r}")
        _check(self.weight_decay >= 0, f"TrainConfig.weight_decay must be >= 0, got {self.weight_decay!r}")
        _choice(self, "schedule", SCHEDULES)
        Backprop.parse(self.backprop)  # raises on an unknown mode
        _choice(self, "pad_targets", PAD_TARGETS)
        _choice(self, "depth_sampling", ("fixed", "uniform"))
        _check(self.depth_sampling == "fixed" or (self.depths is None and self.backprop == "full"),
               "TrainConfig.depth_sampling='uniform' trains one sampled depth per step with full backprop: "
               "it cannot be combined with depths or another backprop mode")
        _choice(self, "amp", AMP_MODES)
        _check(isinstance(self.seed, int) and self.seed >= 0,
               f"TrainConfig.seed must be an integer >= 0, got {self.seed!r}")
        _check(isinstance(self.data_seed, int) and self.data_seed >= 0,
               f"TrainConfig.data_seed must be an integer >= 0, got {self.data_seed!r}")
        if self.depths is not None:
            object.__setattr__(self, "depths", tuple(self.depths))
            _check(len(self.depths) > 0 and all(isinstance(k, int) and k > 0 for k in self.depths),
                   f"TrainConfig.depths must be positive integers, got {self.depths!r}")
            _check(len(set(self.depths)) == len(self.depths), f"TrainConfig.depths has repeats: {self.depths!r}")
        if self.depth_weights is not None:
            object.__setattr__(self, "depth_weights", tuple(float(w) for w in self.depth_weights))
            _check(self.depths is not None and len(self.depth_weights) == len(self.depths),
                   "TrainConfig.depth_weights needs depths of the same length")
            _check(all(w >= 0 for w in self.depth_weights) and sum(self.depth_weights) > 0,
                   f"TrainConfig.depth_weights must be >= 0 with a positive sum, got {self.depth_weights!r}")


@dataclass(frozen=True)
class DataConfig:
    """Where the tokens come from and how they are batched."""

    corpus: str = "kjv"  # "kjv" (embedded) or a path to a .jsonl / .json / .txt file
    text_field: str = "text"
    vocab_size: int = 2048  # tokenizer vocabulary; must equal ModelConfig.vocab_size
    tokenizer: str | None = None  # a tokenizer.json to use instead of training one
    seq_len: int = 128
    batch_mode: str = "padded"  # "padded": one document per row, truncated/right-padded with 0 (the paper)
    val_fraction: float = 0.05
    # "document": by a seeded hash of each text, disjoint by construction (the default); "paper": the first 95% of
    # the file trains and the last 5% validates, as in the original scripts.
    split: str = "document"
    split_seed: int = 0
    verses_per_doc: tuple[int, int] = (1, 4)  # kjv only: a document is 1..4 consecutive verses of one chapter
    max_docs: int | None = None  # use only the first n documents (small runs, tests)
    # "lm": pre-training on documents; "sft": conversations rendered prompt | response (tiedlm_lib.training.sft)
    task: str = "lm"
    sft_loss: str = "paper"  # "paper": the whole suffix, pad targets included; "masked": response tokens only
    # "grid": the response at 3/4 of the length, pads between it and the prompt that it attends to (the paper);
    # "packed": the response right after the prompt, pads only at the end (the corrected protocol;
    # tiedlm_lib.training.sft)
    sft_layout: str = "grid"
    conversations: str | None = None  # SFT: a minimind-format JSONL; None: a chat task derived from the corpus

    def __post_init__(self) -> None:
        object.__setattr__(self, "verses_per_doc", tuple(self.verses_per_doc))
        _check(isinstance(self.corpus, str) and self.corpus != "", "DataConfig.corpus must be 'kjv' or a file path")
        for name in ("vocab_size", "seq_len"):
            _positive_int(self, name)
        _choice(self, "batch_mode", BATCH_MODES)
        _choice(self, "split", SPLITS)
        _choice(self, "task", ("lm", "sft"))
        _choice(self, "sft_loss", ("paper", "masked"))
        _choice(self, "sft_layout", ("grid", "packed"))
        _check(0.0 < self.val_fraction < 1.0, f"DataConfig.val_fraction must be in (0, 1), got {self.val_fraction!r}")
        lo, hi = self.verses_per_doc
        _check(1 <= lo <= hi,
               f"DataConfig.verses_per_doc must be (lo, hi) with 1 <= lo <= hi, got {self.verses_per_doc}")
        if self.max_docs is not None:
            _positive_int(self, "max_docs")


# Fields that label or pace a run without changing its weights: left out of the fingerprint whatever their value.
LABELS = ("name", "scale", "train.log_every", "train.checkpoint_every")


def non_defaults(obj: Any) -> dict[str, Any]:
    """The fields of a config dataclass whose value differs from the field's declared default."""
    out = {}
    for f in dataclasses.fields(obj):
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        if getattr(obj, f.name) != default:
            out[f.name] = getattr(obj, f.name)
    return out


@dataclass(frozen=True)
class RunConfig:
    """A complete, hashable description of one training run."""

    name: str
    scale: str
    model: ModelConfig
    train: TrainConfig
    data: DataConfig = field(default_factory=DataConfig)

    def __post_init__(self) -> None:
        _check(self.model.vocab_size == self.data.vocab_size,
               f"ModelConfig.vocab_size ({self.model.vocab_size}) must equal DataConfig.vocab_size "
               f"({self.data.vocab_size})")
        _check(self.data.seq_len <= self.model.max_seq_len,
               f"DataConfig.seq_len ({self.data.seq_len}) exceeds ModelConfig.max_seq_len ({self.model.max_seq_len})")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        return cls(name=d["name"], scale=d["scale"], model=ModelConfig(**d["model"]),
                   train=TrainConfig(**d["train"]), data=DataConfig(**d["data"]))

    def fingerprint(self) -> str:
        """A short hash of everything that changes the trained weights: every field that differs from its declared
        default (labels such as the name, scale and logging cadence left out).

        Derived, not listed: a field added later with a default leaves every existing fingerprint as it was, and
        setting it to another value changes the fingerprint — so a new field's default must reproduce the behaviour
        from before the field existed. A changed *default* would make an old entry hash like the new default; the
        runs cache catches that by comparing the entry's stored config (``runs.check_entry``), and
        ``tests/data/config_defaults.json`` makes every change of a default a deliberate one."""
        d = {section: non_defaults(getattr(self, section)) for section in ("model", "train", "data")}
        for label in LABELS:
            section, _, key = label.partition(".")
            if key:
                d[section].pop(key, None)
        blob = json.dumps(d, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def cache_name(self) -> str:
        """The run's folder name in the runs cache: ``<name>-s<seed>-<fingerprint>``."""
        return f"{self.name}-s{self.train.seed}-{self.fingerprint()}"
