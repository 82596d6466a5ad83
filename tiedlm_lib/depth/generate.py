"""Sampling as paper A's generation comparison did it (PROTOCOL §5.7), with its repetition penalty in both forms.

Order per step: repetition penalty on every token generated so far and the last ``penalty_window`` prompt tokens,
then temperature, then top-k, then top-p (drop tokens whose *preceding* cumulative mass is already ≥ p), then a
multinomial draw from a seeded generator. The penalty comes in two forms:

* ``"paper"``: divide the logit by the penalty whatever its sign — a negative logit is *raised* toward 0, so a
  repeated token the model disliked becomes more likely (PROTOCOL §7.13);
* ``"ctrl"``: divide positive logits, multiply negative ones (CTRL's rule, as in HF transformers): always a penalty.

With ``use_cache=True`` the model keeps one KV cache per block application (per loop iteration), so each new token
costs one position's computation; ``use_cache=False`` recomputes the whole sequence each step, as the original did.

``generate`` and ``speculative.generate`` share one signature and return type: ``tokens, info = generate(model,
prompt, sampling, max_new=..., seed=..., stop=...)``, with ``sampling=None`` for greedy decoding and ``info`` the
counts of what the call computed (``GenerationInfo``; the speculative one adds its rounds and acceptance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tiedlm_lib import devices
from tiedlm_lib.model.tied import eval_mode

PENALTIES = ("paper", "ctrl")


@dataclass(frozen=True)
class SamplingConfig:
    max_new: int = 48
    temperature: float = 1.0
    top_k: int | None = 50
    top_p: float | None = 0.9
    repetition_penalty: float = 1.2
    penalty: str = "ctrl"  # the corrected form by default; "paper" reproduces the original's sign bug (§7.13)
    penalty_window: int = 20  # the last prompt tokens the penalty also covers

    def __post_init__(self) -> None:
        if not isinstance(self.max_new, int) or self.max_new < 1:
            raise ValueError(f"max_new must be a positive integer, got {self.max_new!r}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise ValueError(f"top_k must be a positive integer or None, got {self.top_k!r}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p!r}")
        if not self.repetition_penalty >= 1:
            raise ValueError(f"repetition_penalty must be >= 1, got {self.repetition_penalty!r}")
        if self.penalty not in PENALTIES:
            raise ValueError(f"penalty must be one of {PENALTIES}, got {self.penalty!r}")


def apply_penalty(logits: torch.Tensor, ids: Sequence[int], penalty: float, mode: str) -> torch.Tensor:
    """Penalise the logits (V,) of ``ids`` (each once, however often it occurred)."""
    if mode not in PENALTIES:
        raise ValueError(f"penalty must be one of {PENALTIES}, got {mode!r}")
    out = logits.clone()
    if penalty == 1 or not len(ids):
        return out
    idx = torch.tensor(sorted(set(int(i) for i in ids)), dtype=torch.long)
    sel = out[idx]
    out[idx] = sel / penalty if mode == "paper" else torch.where(sel > 0, sel / penalty, sel * penalty)
    return out


def filter_logits(logits: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Top-k then top-p (nucleus) filtering of logits (V,); removed entries become -inf."""
    out = logits.clone()
    if top_k is not None and top_k < out.numel():
        kth = torch.topk(out, top_k).values[-1]
        out[out < kth] = float("-inf")
    if top_p is not None and top_p < 1:
        sorted_logits, order = torch.sort(out, descending=True)
        probs = sorted_logits.softmax(-1)
        before = probs.cumsum(-1) - probs  # mass of the tokens ranked above each one
        drop = before >= top_p
        out[order[drop]] = float("-inf")
    return out


def distribution(logits: torch.Tensor, history: Sequence[int], cfg: SamplingConfig) -> torch.Tensor:
    """The sampling distribution (V,) after the repetition penalty on ``history``, temperature, top-k and top-p."""
    logits = apply_penalty(logits.float(), history, cfg.repetition_penalty, cfg.penalty)
    return filter_logits(logits / cfg.temperature, cfg.top_k, cfg.top_p).softmax(-1)


def next_token(logits: torch.Tensor, history: Sequence[int], cfg: SamplingConfig,
               generator: torch.Generator) -> int:
    return int(torch.multinomial(distribution(logits, history, cfg), 1, generator=generator))


@dataclass
class GenerationInfo:
    """What one generation call computed: new tokens, block *applications* (one block on one position) and block
    *calls* (sequential steps, each over any number of positions), and whether it ended at a stop id."""

    new_tokens: int = 0
    applications: int = 0
    calls: int = 0
    stopped: bool = False


def check_request(model, prompt: Sequence[int], sampling: SamplingConfig | None, max_new: int | None
                  ) -> tuple[list[int], int]:
    """The prompt as a list of ints and the number of new tokens asked for (``max_new``; None: ``sampling.max_new``,
    or SamplingConfig's default for greedy decoding), each checked against the model's context."""
    if sampling is not None and not isinstance(sampling, SamplingConfig):
        raise ValueError(f"sampling must be a SamplingConfig or None (greedy), got {type(sampling).__name__}")
    prompt = [int(t) for t in prompt]
    if not prompt:
        raise ValueError("the prompt must hold at least one token")
    if max_new is None:
        max_new = sampling.max_new if sampling is not None else SamplingConfig.max_new
    if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 1:
        raise ValueError(f"max_new must be a positive integer, got {max_new!r}")
    limit = model.config.max_seq_len
    if len(prompt) + max_new > limit:
        raise ValueError(f"prompt of {len(prompt)} tokens + max_new {max_new} exceeds max_seq_len {limit}")
    return prompt, max_new


@torch.no_grad()
def generate(model, prompt: Sequence[int], sampling: SamplingConfig | None = None, *, max_new: int | None = None,
             seed: int = 42, stop: Sequence[int] = (), depth: int | None = None, use_cache: bool = True
             ) -> tuple[list[int], GenerationInfo]:
    """Up to ``max_new`` new token ids after ``prompt`` and what the call computed. ``sampling=None``: greedy
    (argmax); otherwise a seeded draw from ``sampling``'s distribution (the paper: 48 tokens, seed 42 reset per
    model). Stops early after a ``stop`` id (included). ``depth``: every loop at that many iterations (None: the
    trained model)."""
    prompt, max_new = check_request(model, prompt, sampling, max_new)
    per_token = model.applications_per_token(depth)
    dev = devices.model_device(model)  # tokens go to the model; logits come back to the CPU to be sampled
    info = GenerationInfo()
    with eval_mode(model):
        g = torch.Generator().manual_seed(seed)
        window = prompt[-sampling.penalty_window:] if sampling is not None and sampling.penalty_window else []
        seq, new = list(prompt), []
        cache: dict = {}
        for _ in range(max_new):
            if not use_cache:  # the original: the whole sequence each step
                inputs, logits = len(seq), model(torch.tensor([seq], device=dev), depth=depth)[0, -1]
            elif not new:
                inputs, logits = len(seq), model.forward_cached(torch.tensor([seq], device=dev), cache, 0, depth)[0, -1]
            else:
                inputs, logits = 1, model.forward_cached(torch.tensor([[seq[-1]]], device=dev), cache, len(seq) - 1,
                                                         depth)[0, -1]
            logits = logits.cpu()  # sampled on the CPU with a CPU generator: the same draw whatever the device
            info.applications += inputs * per_token
            info.calls += per_token
            tok = int(logits.argmax()) if sampling is None else next_token(logits, window + new, sampling, g)
            seq.append(tok)
            new.append(tok)
            if tok in stop:
                info.stopped = True
                break
    info.new_tokens = len(new)
    return new, info


def distinct_n(ids: Sequence[int], n: int) -> float:
    """Distinct n-grams / all n-grams (1.0: no n-gram repeats)."""
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else float("nan")


def repetition_rate(ids: Sequence[int]) -> float:
    """Share of tokens that repeat an earlier token of the same sample."""
    seen, rep = set(), 0
    for t in ids:
        rep += t in seen
        seen.add(t)
    return rep / len(ids) if ids else float("nan")
