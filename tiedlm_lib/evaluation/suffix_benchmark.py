"""The suffix benchmark of paper A §5 (PROTOCOL §5.6): score the last quarter of each padded sequence.

The original drew 60 × 16 sequences with replacement (``random.Random(777)``) from the *first 5000 sequences of the
pre-training cache* — inside the training split — ran the full 256-token sequence and scored logits 192..254 against
targets x[193..255]: 63 targets per sequence, 61.6% of them pad. It reported the mean over all targets ("with pad")
and over real ones ("real token"). Here the sequences come from the held-out split by default, or — to reproduce the
paper — from the first documents of the training split (``source="train-overlap"``), with the fraction the model
actually saw during training computed by replaying its batch stream.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tiedlm_lib import devices
from tiedlm_lib.data import PAD_ID, TokenDocs, pad_batch, shift_targets
from tiedlm_lib.evaluation.nll import token_ce
from tiedlm_lib.model.config import RunConfig
from tiedlm_lib.model.tied import eval_mode
from tiedlm_lib.stats.bootstrap import NLLStats

SOURCES = ("heldout", "train-overlap")


def suffix_start(seq_len: int) -> int:
    """P: the first scored logit position (192 of 256; the same quarter at other lengths)."""
    return seq_len * 3 // 4


@dataclass
class SuffixBenchmark:
    inputs: torch.Tensor  # (n, L) the drawn sequences, padded
    doc: np.ndarray  # (n,) index of each draw in its pool (draws are with replacement)
    source: str
    start: int  # P

    @property
    def targets(self) -> torch.Tensor:
        """(n, L − 1 − P): x[P+1 .. L−1], the targets of logits P .. L−2."""
        return shift_targets(self.inputs)[:, self.start:-1]

    @property
    def pad_fraction(self) -> float:
        return float((self.targets == PAD_ID).float().mean())


def draw(docs: TokenDocs, seq_len: int, source: str = "heldout", n_batches: int = 60, batch_size: int = 16,
         seed: int = 777, pool: int | None = None) -> SuffixBenchmark:
    """Draw n_batches × batch_size sequences with replacement from the first ``pool`` documents of ``docs``
    (all of them by default; the paper: the first 5000) with one ``random.Random(seed)`` stream."""
    if source not in SOURCES:
        raise ValueError(f"benchmark source must be one of {SOURCES}, got {source!r}")
    n_pool = len(docs) if pool is None else min(pool, len(docs))
    if n_pool < 1:
        raise ValueError("the benchmark needs at least one document to draw from")
    rng = random.Random(seed)
    idx = [rng.randrange(n_pool) for _ in range(n_batches * batch_size)]
    return SuffixBenchmark(pad_batch(docs, idx, seq_len), np.array(idx), source, suffix_start(seq_len))


def seen_in_training(run: RunConfig, n_docs: int, steps: int | None = None) -> np.ndarray:
    """Which of the training split's documents the run drew at least once: its batch stream replayed (padded mode:
    one ``randrange`` per row, in order) without building a batch."""
    if run.data.batch_mode != "padded":
        raise ValueError("replaying the stream is implemented for the padded batch mode only")
    rng = random.Random(run.train.data_seed)
    seen = np.zeros(n_docs, dtype=bool)
    for _ in range((steps or run.train.steps) * run.train.batch_size):
        seen[rng.randrange(n_docs)] = True
    return seen


@torch.no_grad()
def suffix_nll(model, bench: SuffixBenchmark, batch_size: int = 16, depth: int | None = None) -> NLLStats:
    """Per-draw CE sums over the suffix targets: with pad (all targets) and real (non-pad). Draw i is "document" i,
    so two models scored on one benchmark are paired draw by draw. Run on the model's device."""
    with eval_mode(model):
        ce_parts = []
        for i in range(0, len(bench.inputs), batch_size):
            x = devices.to_model(bench.inputs[i:i + batch_size], model)
            logits = model(x, depth=depth)[:, bench.start:-1]
            ce_parts.append(token_ce(logits, shift_targets(x)[:, bench.start:-1]).cpu().numpy())
    ce = np.concatenate(ce_parts)
    real = (bench.targets != PAD_ID).numpy()
    return NLLStats.from_positions(ce, real, np.arange(len(ce)))


def implied_pad_nll(with_pad: float, real: float, pad_fraction: float) -> float:
    """The mean CE on pad targets implied by with_pad = (1 − f)·real + f·pad."""
    if not 0 < pad_fraction <= 1:
        raise ValueError(f"pad_fraction must be in (0, 1], got {pad_fraction}")
    return (with_pad - (1 - pad_fraction) * real) / pad_fraction


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's τ-b between two scorings of the same items (1: same order, −1: reversed)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("kendall_tau needs two equal-length sequences of at least 2 values")
    i, j = np.triu_indices(len(a), 1)
    da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    n0 = len(i)
    ta, tb = (da == 0).sum(), (db == 0).sum()
    denom = np.sqrt((n0 - ta) * (n0 - tb))
    return float((da * db).sum() / denom) if denom else float("nan")
