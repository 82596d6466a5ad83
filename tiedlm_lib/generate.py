"""Sampling as paper A's generation comparison did it (PROTOCOL §5.7), with its repetition penalty in both forms.

Order per step: repetition penalty on every token generated so far and the last ``penalty_window`` prompt tokens,
then temperature, then top-k, then top-p (drop tokens whose *preceding* cumulative mass is already ≥ p), then a
multinomial draw from a seeded generator. The penalty comes in two forms:

* ``"paper"``: divide the logit by the penalty whatever its sign — a negative logit is *raised* toward 0, so a
  repeated token the model disliked becomes more likely (PROTOCOL §7.13);
* ``"ctrl"``: divide positive logits, multiply negative ones (CTRL's rule, as in HF transformers): always a penalty.

With ``use_cache=True`` the model keeps one KV cache per block application (per loop iteration), so each new token
costs one position's computation; ``use_cache=False`` recomputes the whole sequence each step, as the original did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .model import eval_mode

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


@torch.no_grad()
def generate(model, prompt: Sequence[int], cfg: SamplingConfig = SamplingConfig(), seed: int = 42,
             use_cache: bool = True, depth: int | None = None, stop: Sequence[int] = ()) -> list[int]:
    """New token ids after ``prompt`` (the paper: 48 tokens, seed 42 reset per model). Stops early at a ``stop``
    id (which is included)."""
    prompt = [int(t) for t in prompt]
    if not prompt:
        raise ValueError("the prompt must hold at least one token")
    limit = model.config.max_seq_len
    if len(prompt) + cfg.max_new > limit:
        raise ValueError(f"prompt of {len(prompt)} tokens + max_new {cfg.max_new} exceeds max_seq_len {limit}")
    with eval_mode(model):
        g = torch.Generator().manual_seed(seed)
        window = prompt[-cfg.penalty_window:] if cfg.penalty_window else []
        seq, new = list(prompt), []
        cache: dict = {}
        logits = None
        for _ in range(cfg.max_new):
            if use_cache:
                if logits is None:
                    logits = model.forward_cached(torch.tensor([seq]), cache, 0, depth)[0, -1]
                else:
                    logits = model.forward_cached(torch.tensor([[seq[-1]]]), cache, len(seq) - 1, depth)[0, -1]
            else:
                logits = model(torch.tensor([seq]), depth=depth)[0, -1]  # the original: the whole sequence each step
            tok = next_token(logits, window + new, cfg, g)
            seq.append(tok)
            new.append(tok)
            if tok in stop:
                break
    return new


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
