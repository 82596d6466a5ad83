"""Paired document bootstrap for NLL comparisons.

Every NLL here is a ratio of sums over documents (summed CE / number of targets), so a replicate resamples documents
with replacement and recomputes the ratio. Comparisons are *paired*: one resample of document indices is shared by
every condition, so a difference's CI reflects only how the conditions differ on the same documents.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass
class NLLStats:
    """Per-document sums of CE over all target positions and over real (non-pad) targets."""

    doc_index: np.ndarray  # (n,)
    sum_all: np.ndarray  # (n,) CE summed over every target position, pads included
    n_all: np.ndarray
    sum_real: np.ndarray  # (n,) CE summed over targets != pad
    n_real: np.ndarray

    @property
    def with_pad(self) -> float:
        """Summed CE over all B·L positions / B·L: the original k-sweep and exit metric (PROTOCOL §5.1)."""
        return float(self.sum_all.sum() / self.n_all.sum())

    @property
    def masked(self) -> float:
        """Token-mean CE over real targets only: the metric training optimised."""
        return float(self.sum_real.sum() / max(1, self.n_real.sum()))

    @property
    def pad_fraction(self) -> float:
        return float(1 - self.n_real.sum() / self.n_all.sum())

    @classmethod
    def from_positions(cls, ce: np.ndarray, real: np.ndarray, doc_index: np.ndarray) -> NLLStats:
        return cls(doc_index, ce.sum(1), np.full(len(ce), ce.shape[1]), (ce * real).sum(1), real.sum(1))

    def take(self, rows: np.ndarray) -> NLLStats:
        """The same statistics on a subset of the rows (an index array or a boolean mask), in their order."""
        return NLLStats(self.doc_index[rows], self.sum_all[rows], self.n_all[rows], self.sum_real[rows],
                        self.n_real[rows])

    def row(self) -> dict[str, float]:
        return {"nll_masked": self.masked, "nll_with_pad": self.with_pad, "pad_fraction": self.pad_fraction,
                "real_tokens": int(self.n_real.sum())}


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


CHUNK_INDICES = 1 << 22  # document indices drawn at a time (32 MiB of int64): the bootstrap's memory bound


@dataclass(frozen=True)
class Resample:
    """One shared document resample: replicate i draws ``n_docs`` documents with replacement. The draws come chunk by
    chunk from ``numpy.random.default_rng(seed)`` — the same numbers as one (n_boot, n_docs) draw, which a test pins
    — so a bootstrap holds one chunk of indices (``CHUNK_INDICES``) instead of n_boot × n_docs of them (about 1 GB
    at the paper scale's 63,512 documents and 2,000 replicates). Every use regenerates the same draws from the seed,
    so one ``Resample`` shared by several conditions pairs them."""

    n_docs: int
    n_boot: int
    seed: int = 0

    def chunks(self) -> Iterator[np.ndarray]:
        """The (rows, n_docs) index arrays of consecutive replicates, in order."""
        rng = np.random.default_rng(self.seed)
        per = max(1, CHUNK_INDICES // self.n_docs)
        for start in range(0, self.n_boot, per):
            yield rng.integers(0, self.n_docs, size=(min(per, self.n_boot - start), self.n_docs))

    def sums(self, *vectors: np.ndarray) -> list[np.ndarray]:
        """For each per-document vector (n_docs,), its (n_boot,) sums over each replicate's documents."""
        vs = [np.asarray(v) for v in vectors]
        for v in vs:
            if v.shape != (self.n_docs,):
                raise ValueError(f"a resampled vector needs one value per document ({self.n_docs}), got shape "
                                 f"{v.shape}")
        parts: list[list[np.ndarray]] = [[] for _ in vs]
        for idx in self.chunks():
            for part, v in zip(parts, vs):
                part.append(v[idx].sum(1))
        return [np.concatenate(p) for p in parts]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """Every index at once, (n_boot, n_docs): for small problems and for checking against the chunks."""
        out = np.concatenate(list(self.chunks()))
        return out if dtype is None else out.astype(dtype)

    @property
    def shape(self) -> tuple[int, int]:
        return self.n_boot, self.n_docs


def bootstrap_indices(n_docs: int, n_boot: int = 2000, seed: int = 0) -> Resample:
    """The shared resample of ``n_docs`` documents, ``n_boot`` replicates (``Resample``: generated in chunks)."""
    if n_docs < 2:
        raise ValueError(f"a bootstrap needs at least 2 documents, got {n_docs}")
    if not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    return Resample(int(n_docs), n_boot, seed)


def _num_den(s: NLLStats, metric: str) -> tuple[np.ndarray, np.ndarray]:
    if metric == "masked":
        return s.sum_real, s.n_real
    if metric == "with_pad":
        return s.sum_all, s.n_all
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")


def value(s: NLLStats, metric: str = "masked") -> float:
    num, den = _num_den(s, metric)
    return float(num.sum() / den.sum())


def replicates(s: NLLStats, idx: Resample | np.ndarray, metric: str = "masked") -> np.ndarray:
    """The NLL of every replicate of the resample ``idx`` (a ``Resample``, or an explicit index array)."""
    num, den = _num_den(s, metric)
    if isinstance(idx, Resample):
        r_num, r_den = idx.sums(num, den)
        return r_num / np.maximum(r_den, 1)
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
    n_in, n_out, d_in, d_out = bootstrap_indices(len(g), n_boot, seed).sums(num * g, num * ~g, den * g, den * ~g)
    with np.errstate(invalid="ignore", divide="ignore"):  # a replicate that drew no row of a group has no NLL there
        rep = n_out / d_out - n_in / d_in
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
