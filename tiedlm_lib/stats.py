"""Paired document bootstrap for NLL comparisons.

Every NLL here is a ratio of sums over documents (summed CE / number of targets), so a replicate resamples documents
with replacement and recomputes the ratio. Comparisons are *paired*: one resample of document indices is shared by
every condition, so a difference's CI reflects only how the conditions differ on the same documents.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .evaluation import NLLStats

METRICS = ("masked", "with_pad")


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a percentile bootstrap interval."""

    point: float
    lo: float
    hi: float
    level: float = 0.95

    def __str__(self) -> str:
        return f"{self.point:.4f} [{self.lo:.4f}, {self.hi:.4f}]"

    @property
    def above_zero(self) -> bool:
        return self.lo > 0

    @property
    def below_zero(self) -> bool:
        return self.hi < 0

    def as_dict(self) -> dict[str, float]:
        return {"point": self.point, "lo": self.lo, "hi": self.hi, "level": self.level}


MAX_NAN_REPLICATES = 0.01  # the share of undefined replicates an interval may leave out before it is refused


def percentile(point: float, reps: np.ndarray, level: float = 0.95) -> Estimate:
    """The percentile bootstrap interval of ``reps`` around ``point``: the one place this project turns replicates
    into an interval. Replicates that are NaN (undefined in their resample) are left out, up to
    MAX_NAN_REPLICATES of them; more would make the interval describe a selected subset of resamples, so it is
    refused, naming the share."""
    reps = np.asarray(reps, dtype=float)
    nan = float(np.isnan(reps).mean()) if reps.size else 1.0
    if nan > MAX_NAN_REPLICATES:
        raise ValueError(f"{nan:.1%} of the {reps.size} bootstrap replicates are undefined (NaN); at most "
                         f"{MAX_NAN_REPLICATES:.0%} may be left out of a percentile interval")
    q = (1 - level) / 2
    return Estimate(float(point), float(np.nanquantile(reps, q)), float(np.nanquantile(reps, 1 - q)), level)


def bootstrap_indices(n_docs: int, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """(n_boot, n_docs) document indices, one shared resample per replicate."""
    if n_docs < 2:
        raise ValueError(f"a bootstrap needs at least 2 documents, got {n_docs}")
    return np.random.default_rng(seed).integers(0, n_docs, size=(n_boot, n_docs))


def _num_den(s: NLLStats, metric: str) -> tuple[np.ndarray, np.ndarray]:
    if metric == "masked":
        return s.sum_real, s.n_real
    if metric == "with_pad":
        return s.sum_all, s.n_all
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")


def value(s: NLLStats, metric: str = "masked") -> float:
    num, den = _num_den(s, metric)
    return float(num.sum() / den.sum())


def replicates(s: NLLStats, idx: np.ndarray, metric: str = "masked") -> np.ndarray:
    num, den = _num_den(s, metric)
    return num[idx].sum(1) / np.maximum(den[idx].sum(1), 1)


def _check_paired(a: NLLStats, b: NLLStats) -> None:
    if len(a.doc_index) != len(b.doc_index) or not np.array_equal(a.doc_index, b.doc_index):
        raise ValueError("paired comparison needs both results on the same documents in the same order")


def paired_diff(a: NLLStats, b: NLLStats, metric: str = "masked", n_boot: int = 2000, seed: int = 0,
                level: float = 0.95) -> Estimate:
    """NLL(a) − NLL(b) with a paired document-bootstrap percentile interval."""
    _check_paired(a, b)
    idx = bootstrap_indices(len(a.doc_index), n_boot, seed)
    return percentile(value(a, metric) - value(b, metric), replicates(a, idx, metric) - replicates(b, idx, metric),
                      level)


def mean_ci(s: NLLStats, metric: str = "masked", n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> Estimate:
    return percentile(value(s, metric), replicates(s, bootstrap_indices(len(s.doc_index), n_boot, seed), metric), level)


def group_diff(s: NLLStats, in_group: np.ndarray, metric: str = "masked", n_boot: int = 2000, seed: int = 0,
               level: float = 0.95) -> Estimate:
    """NLL of the rows outside a group minus NLL of the rows inside it, both from the same draw (e.g. benchmark
    sequences the model did not see in training minus those it saw). A replicate resamples the rows of the draw
    once and recomputes both ratios, so the CI reflects which rows fell in each group."""
    g = np.asarray(in_group, dtype=bool)
    if g.shape != s.doc_index.shape:
        raise ValueError(f"in_group must have one flag per row ({s.doc_index.shape[0]}), got shape {g.shape}")
    if g.all() or not g.any():
        raise ValueError("both groups need at least one row: the comparison is undefined otherwise")
    num, den = _num_den(s, metric)
    idx = bootstrap_indices(len(g), n_boot, seed)
    w_in, w_out = g[idx], ~g[idx]
    d_in, d_out = (den[idx] * w_in).sum(1), (den[idx] * w_out).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):  # a replicate that drew no row of a group has no NLL there
        rep = (num[idx] * w_out).sum(1) / d_out - (num[idx] * w_in).sum(1) / d_in
    rep[(d_in == 0) | (d_out == 0)] = np.nan
    if np.isnan(rep).mean() > 0.01:
        raise ValueError(f"{np.isnan(rep).mean():.1%} of the replicates drew no row (or no target) of one group: "
                         "the group is too small for a row bootstrap")
    return percentile(float(num[~g].sum() / den[~g].sum() - num[g].sum() / den[g].sum()), rep, level)


def interpolate(lo: NLLStats, hi: NLLStats, w: float) -> NLLStats:
    """Per-document linear interpolation (1 − w)·lo + w·hi: uniform depth at a fractional average depth."""
    _check_paired(lo, hi)
    return NLLStats(lo.doc_index, (1 - w) * lo.sum_all + w * hi.sum_all, lo.n_all,
                    (1 - w) * lo.sum_real + w * hi.sum_real, lo.n_real)
