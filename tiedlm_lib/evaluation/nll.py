"""Evaluation: NLL with and without pad targets, depth sweeps, and post-hoc max-prob early exit (PROTOCOL §5).

Everything is kept per position and per document, so later analyses (bootstrap CIs, per-token probes) need no
second pass. Exits are computed from per-depth arrays of CE and max-probability: locking a position at depth k and
scoring its depth-k logits is the same as reading CE_k there, so one pass serves every threshold and both fallbacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from tiedlm_lib import devices
from tiedlm_lib.data import PAD_ID, EvalBatch
from tiedlm_lib.model.tied import TiedLM, eval_mode
from tiedlm_lib.stats.bootstrap import NLLStats

FALLBACKS = ("paper", "final")


def token_ce(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-position cross-entropy in fp32, pads included: (B, T)."""
    return F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")


@dataclass
class DepthStats:
    """Per-depth, per-position CE and max-softmax probability over an evaluation set.

    ``ce[j]`` and ``maxprob[j]`` belong to depth ``depths[j]``; positions are (rows, T); ``real`` marks targets that
    are not pad; ``batch`` is the evaluation batch of each row (the original exit loop ran per batch)."""

    depths: list[int]
    ce: np.ndarray  # (D, N, T)
    maxprob: np.ndarray  # (D, N, T)
    real: np.ndarray  # (N, T) bool
    doc_index: np.ndarray  # (N,)
    batch: np.ndarray  # (N,)

    def nll(self, k: int) -> NLLStats:
        j = self.depths.index(k)
        return NLLStats.from_positions(self.ce[j], self.real, self.doc_index)

    def take(self, rows: np.ndarray) -> DepthStats:
        """The same sweep on a subset of the rows (an index array or a boolean mask), in their order."""
        return DepthStats(self.depths, self.ce[:, rows], self.maxprob[:, rows], self.real[rows], self.doc_index[rows],
                          self.batch[rows])

    def best_depth(self, metric: str = "masked") -> int:
        """The evaluated depth with the lowest NLL on ``metric`` ("masked" or "with_pad"; the shallowest on a tie)."""
        if metric not in ("masked", "with_pad"):
            raise ValueError(f"metric must be 'masked' or 'with_pad', got {metric!r}")
        return min(self.depths, key=lambda k: (getattr(self.nll(k), metric), k))

    def table(self) -> list[dict]:
        return [{"k": k, **self.nll(k).row(), "maxprob_real": float(self.maxprob[j][self.real].mean())}
                for j, k in enumerate(self.depths)]


def _check_device(model, device) -> None:
    """A ``device`` argument must name the model's own device: inputs follow the model (``tiedlm_lib.devices``)."""
    want, have = (torch.device(device) if device is not None else None), devices.model_device(model)
    if want is not None and (want.type != have.type or want.index not in (None, have.index)):
        raise ValueError(f"device {device!r} is not the model's ({devices.model_device(model)}): move the model "
                         "(model.to(device)); its inputs follow it")


@torch.no_grad()
def depth_stats(model: TiedLM, batches: Iterable[EvalBatch], depths: Sequence[int],
                device: str | torch.device | None = None) -> DepthStats:
    """One forward per batch reads out every requested depth (loop iterations shared where the layout allows). The
    batches go to the model's device (``device``, if given, must be it: it is kept for the callers that pass it)."""
    _check_device(model, device)
    with eval_mode(model):
        depths = sorted(set(depths))
        ce, mp, real, docs, bidx = [], [], [], [], []
        for b, batch in enumerate(batches):
            on = devices.to_model(batch, model)
            x, y = on.inputs, on.targets
            c_b, m_b = [], []
            for _, logits in model.iter_depths(x, depths):
                logits = logits.float()
                c_b.append(token_ce(logits, y).cpu())
                m_b.append(logits.softmax(-1).amax(-1).cpu())
            ce.append(torch.stack(c_b))
            mp.append(torch.stack(m_b))
            real.append(batch.targets != PAD_ID)
            docs.append(batch.doc_index)
            bidx.append(torch.full((len(x),), b))
    if not ce:
        raise ValueError("no evaluation batches were given")
    return DepthStats(depths, torch.cat(ce, 1).numpy(), torch.cat(mp, 1).numpy(), torch.cat(real).numpy(),
                      torch.cat(docs).numpy(), torch.cat(bidx).numpy())


@torch.no_grad()
def evaluate_nll(model: TiedLM, batches: Iterable[EvalBatch], depth: int | None = None,
                 device: str | torch.device | None = None) -> NLLStats:
    """NLL at one depth (None: the trained depth; any layout, looped or not), on the model's device."""
    _check_device(model, device)
    with eval_mode(model):
        parts = []
        for batch in batches:
            on = devices.to_model(batch, model)
            ce = token_ce(model(on.inputs, depth=depth).float(), on.targets).cpu().numpy()
            parts.append(NLLStats.from_positions(ce, (batch.targets != PAD_ID).numpy(), batch.doc_index.numpy()))
    if not parts:
        raise ValueError("no evaluation batches were given")
    return NLLStats(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                      ("doc_index", "sum_all", "n_all", "sum_real", "n_real")))


def depth_sweep(model: TiedLM, batches: Iterable[EvalBatch], depths: Sequence[int],
                device: str | torch.device | None = None) -> list[dict]:
    """The k-sweep table: NLL masked and with pad, pad fraction, mean max-prob, per depth."""
    return depth_stats(model, batches, depths, device).table()


@dataclass
class ExitResult:
    tau: float
    fallback: str
    nll_with_pad: float  # all positions (the original's metric)
    nll_masked: float  # real targets only
    avg_k_all: float  # nominal exit depth over all positions, pads included (the original's avg k)
    avg_k_real: float  # nominal exit depth over real-target positions
    realised_k: float  # mean over batches of the depth the batch actually ran to (all positions iterate until
    #                    every position has locked; never-locked positions force the full depth)
    never_locked: float  # fraction of real-target positions that never passed tau


def _exit_positions(stats: DepthStats, tau: float, fallback: str, allowed: Sequence[int] | None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per position: the CE scored, the depth counted, and whether the position locked."""
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback must be one of {FALLBACKS}, got {fallback!r}")
    allowed = sorted(stats.depths if allowed is None else allowed)
    missing = [k for k in allowed if k not in stats.depths]
    if missing:
        raise ValueError(f"exit depths {missing} were not evaluated (have {stats.depths})")
    js = [stats.depths.index(k) for k in allowed]
    ce, mp = stats.ce[js], stats.maxprob[js]  # (D, N, T)
    ks = np.array(allowed, dtype=float)
    passed = mp > tau
    locked = passed.any(0)
    first = passed.argmax(0)  # the first passing depth (index 0 where none passes)
    j = np.where(locked, first, 0 if fallback == "paper" else len(allowed) - 1)
    score = np.take_along_axis(ce, j[None], 0)[0]
    return score, np.where(locked, ks[first], ks[-1]), locked


def exit_nll(stats: DepthStats, tau: float, fallback: str = "final", allowed: Sequence[int] | None = None
             ) -> NLLStats:
    """The exit's NLL as per-document sums (for paired bootstrap comparisons)."""
    score, _, _ = _exit_positions(stats, tau, fallback, allowed)
    return NLLStats.from_positions(score, stats.real, stats.doc_index)


def maxprob_exit(stats: DepthStats, taus: Sequence[float], fallback: str = "final",
                 allowed: Sequence[int] | None = None) -> list[ExitResult]:
    """Post-hoc max-prob early exit per position (PROTOCOL §5.2).

    A position locks at the first allowed depth whose max softmax probability exceeds tau and is scored with that
    depth's logits. Positions that never lock are counted at the deepest allowed depth and scored with
    ``fallback="paper"``: the shallowest depth's logits (the original code's buffer initialisation), or
    ``fallback="final"``: the deepest depth's logits (the corrected protocol). ``allowed`` restricts exits to a set
    of depths (the staircase exit of multi-depth models uses the supervised depths)."""
    real = stats.real
    results = []
    for tau in taus:
        score, k, locked = _exit_positions(stats, tau, fallback, allowed)
        realised = [k[stats.batch == b].max() for b in np.unique(stats.batch)]
        results.append(ExitResult(
            float(tau), fallback, float(score.mean()), float(score[real].mean()), float(k.mean()),
            float(k[real].mean()), float(np.mean(realised)), float(1 - locked[real].mean())))
    return results
