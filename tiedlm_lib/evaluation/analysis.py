"""Analyses shared by the notebooks: held-out evaluation sets, depth grids, state norms, depth-scaling gaps,
exit-versus-uniform comparisons and saturation depths. Each returns plain data (dicts, Estimates)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from tiedlm_lib import devices
from tiedlm_lib.data import PAD_ID, Corpus, EvalBatch, eval_batches, prepare_corpus
from tiedlm_lib.evaluation.nll import DepthStats, depth_stats, evaluate_nll, exit_nll, maxprob_exit
from tiedlm_lib.evaluation.suffix_benchmark import suffix_nll
from tiedlm_lib.model.config import DataConfig, RunConfig
from tiedlm_lib.model.tied import TiedLM, eval_mode
from tiedlm_lib.stats.bootstrap import Estimate, NLLStats, interpolate, paired_diff, value


@lru_cache(maxsize=8)
def cached_corpus(cfg: DataConfig) -> Corpus:
    """One prepared corpus per data config per process (the tokenizer and tokens are also cached on disk)."""
    return prepare_corpus(cfg)


def heldout(run: RunConfig, n_docs: int | None = None, sampling: str = "all") -> Callable[[], Iterator[EvalBatch]]:
    """A factory of evaluation batches over the held-out documents of a run's corpus: each document once
    (``sampling="all"``), or the paper's 20 batches drawn with replacement, seeds 999 + i (``sampling="paper"``)."""
    corpus = cached_corpus(run.data)
    return lambda: eval_batches(corpus.val, run.data.seq_len, run.train.batch_size, n_docs=n_docs, sampling=sampling)


def depth_grid(K: int, extra: Iterable[int] = ()) -> list[int]:
    """The depths a sweep evaluates: powers of two up to K, K itself, and any ``extra`` depths, sorted."""
    if not isinstance(K, int) or K < 1:
        raise ValueError(f"K must be a positive integer (the trained depth), got {K!r}")
    return sorted({2 ** i for i in range(K.bit_length())} | {K} | set(extra))


def sweep_depths(K: int, extrapolate: float = 2.0) -> list[int]:
    """The depth grid with depths past K up to extrapolate·K (to show extrapolation)."""
    return depth_grid(K, [k for k in (int(1.5 * K), int(extrapolate * K)) if k > K])


@torch.no_grad()
def state_norms(model: TiedLM, batches: Sequence[EvalBatch] | Iterator[EvalBatch], depth: int
                ) -> dict[str, dict[str, list[float]]]:
    """Per loop, per iteration i = 0..depth: mean ‖z_i‖, mean ‖z_i‖/‖z_0‖ and mean relative residual
    ‖z_{i+1} − z_i‖/‖z_0‖, over real (non-pad) input positions."""
    sums: dict[str, dict[str, np.ndarray]] = {}
    count = 0
    with eval_mode(model):
        for b in devices.on_model(batches, model):
            real = (b.inputs != PAD_ID).float()
            _, trace = model.run(b.inputs, depth=depth)
            for name, lt in trace.loops.items():
                n = lt.state_norm  # (I+1, B, T)
                s = sums.setdefault(name, {"norm": 0.0, "ratio": 0.0, "residual": 0.0})
                s["norm"] = s["norm"] + (n * real).sum((1, 2)).cpu().numpy()
                s["ratio"] = s["ratio"] + (n / n[:1].clamp_min(1e-12) * real).sum((1, 2)).cpu().numpy()
                s["residual"] = s["residual"] + (lt.rel_residual * real).sum((1, 2)).cpu().numpy()
            count += real.sum().item()
    return {name: {k: (v / count).tolist() for k, v in s.items()} for name, s in sums.items()}


def monotone_nonincreasing(values: Sequence[float], tol: float = 0.01) -> bool:
    return all(b <= a + tol for a, b in zip(values, values[1:]))


def depth_gap(stats: DepthStats, k_shallow: int, k_deep: int, metric: str = "masked", n_boot: int = 2000,
              seed: int = 0) -> Estimate:
    """NLL(k_shallow) − NLL(k_deep) with a paired document-bootstrap CI: the depth-scaling gap."""
    return paired_diff(stats.nll(k_shallow), stats.nll(k_deep), metric, n_boot, seed)


def uniform_at(stats: DepthStats, kbar: float) -> NLLStats:
    """Uniform-depth NLL at a fractional average depth: per-document interpolation between the nearest depths."""
    ks = stats.depths
    if not ks[0] <= kbar <= ks[-1]:
        raise ValueError(f"average depth {kbar} lies outside the evaluated depths {ks[0]}..{ks[-1]}")
    lo = max(k for k in ks if k <= kbar)
    hi = min(k for k in ks if k >= kbar)
    if lo == hi:
        return stats.nll(lo)
    return interpolate(stats.nll(lo), stats.nll(hi), (kbar - lo) / (hi - lo))


def exit_vs_uniform(stats: DepthStats, taus: Sequence[float], fallback: str, allowed: Sequence[int] | None = None,
                    n_boot: int = 1000, seed: int = 0) -> list[dict]:
    """For each τ: the exit's NLL (with pad and masked), its average depth, and the difference to uniform depth at
    the same average depth (with pad: average over all positions; masked: over real-target positions), with CIs."""
    rows = []
    for res in maxprob_exit(stats, taus, fallback, allowed):
        ex = exit_nll(stats, res.tau, fallback, allowed)
        d_pad = paired_diff(ex, uniform_at(stats, res.avg_k_all), "with_pad", n_boot, seed)
        d_real = paired_diff(ex, uniform_at(stats, res.avg_k_real), "masked", n_boot, seed)
        rows.append({**res.__dict__,
                     "uniform_with_pad": value(uniform_at(stats, res.avg_k_all), "with_pad"),
                     "uniform_masked": value(uniform_at(stats, res.avg_k_real), "masked"),
                     "exit_minus_uniform_with_pad": d_pad.point, "ci_with_pad": (d_pad.lo, d_pad.hi),
                     "exit_minus_uniform_masked": d_real.point, "ci_masked": (d_real.lo, d_real.hi)})
    return rows


SELECTION_SEED = 20261202  # fixed once, before any five-seed output (docs/statistics.md §9, amendment 9)


def selection_split(doc_index: np.ndarray, frac: float = 0.5, seed: int = SELECTION_SEED
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of a *selection* set and a disjoint *estimation* set of whole documents.

    A quantity chosen on the data (the best depth, the best model of a size) is chosen on the selection rows only and
    estimated, with its paired bootstrap interval, on the estimation rows only, so the interval is a fixed-choice
    interval that is valid for the choice made (choosing and estimating on the same documents biases a minimum low
    and under-covers: tests/test_stats_analysis.py). The split depends only on the set of document ids and ``seed``, so
    every model evaluated on the same documents gets the same split and stays paired."""
    docs = np.asarray(doc_index)
    if not 0 < frac < 1:
        raise ValueError(f"frac must lie strictly between 0 and 1, got {frac}")
    ids = np.unique(docs)
    if len(ids) < 2:
        raise ValueError(f"a selection split needs at least 2 documents, got {len(ids)}")
    n_sel = min(len(ids) - 1, max(1, round(frac * len(ids))))
    chosen = np.random.default_rng(seed).permutation(ids)[:n_sel]
    in_sel = np.isin(docs, chosen)
    return np.flatnonzero(in_sel), np.flatnonzero(~in_sel)


def saturation_depth(depths: Sequence[int], values: Sequence[float], frac: float = 0.95) -> int:
    """The first depth at which ``values`` has covered ``frac`` of its change from the first to the last depth."""
    v = np.asarray(values, dtype=float)
    total = v[-1] - v[0]
    if total == 0:
        return depths[0]
    progress = (v - v[0]) / total
    return int(depths[int(np.argmax(progress >= frac))])


def heldout_scores(run, bench=None, n_docs: int | None = None) -> dict[str, NLLStats]:
    """A trained run's held-out NLLs: full-sequence (every held-out document once, masked and with pad) and, given a
    suffix benchmark, its per-draw suffix NLL."""
    out = {"full": evaluate_nll(run.model, heldout(run.config, n_docs)())}
    if bench is not None:
        out["suffix"] = suffix_nll(run.model, bench)
    return out


def assert_direction(label: str, evidence: Mapping, first: Mapping, second: Mapping, kind: str = "difference",
                     tol: float = 1e-9) -> None:
    """Fail loudly unless every unit's evidence point is ``first − second`` (``kind="difference"``) or ``first /
    second`` (``"ratio"``), where ``first`` and ``second`` are recomputed by the caller from the quantities its table
    shows, by another code path than the one that built the evidence. A notebook calls it before handing evidence
    to a verdict, so that a flipped sign (or a swapped ratio) fails the notebook instead of reversing a verdict
    silently. The three mappings are keyed alike (seeds, or (unit, seed) pairs); evidence values are Estimates or
    numbers. Raises AssertionError naming the label, the unit and both values."""
    if kind not in ("difference", "ratio"):
        raise ValueError(f"kind must be 'difference' or 'ratio', got {kind!r}")
    if not evidence:
        raise ValueError(f"{label}: no evidence to check")
    if set(evidence) != set(first) or set(first) != set(second):
        raise ValueError(f"{label}: evidence, first and second must have the same keys, got {sorted(evidence)}, "
                         f"{sorted(first)} and {sorted(second)}")
    for key, e in evidence.items():
        got = float(getattr(e, "point", e))
        a, b = float(first[key]), float(second[key])
        want = a - b if kind == "difference" else a / b
        if not (np.isfinite(got) and np.isfinite(want)):
            if got == want or (np.isnan(got) and np.isnan(want)):
                continue
            raise AssertionError(f"{label}, {key}: evidence {got} but the recomputed {kind} is {want}")
        if abs(got - want) > tol * max(1.0, abs(want)):
            raise AssertionError(f"{label}, {key}: the evidence handed to the verdict is {got:.6g}, but {kind} of the "
                                 f"table's values ({a:.6g}, {b:.6g}) is {want:.6g}: its direction or its inputs are "
                                 "not what its name says")


@dataclass(frozen=True)
class HorizonPoint:
    """One point of a run's training-horizon curve: the weights after ``step`` steps evaluated on every held-out
    document — per-document NLL at each swept depth (``nll[k]``: paired comparisons between runs stay possible),
    the loop's state norms at the trained depth (``state_norms``) and each loop's α."""

    step: int
    nll: dict[int, NLLStats]
    norms: dict[str, dict[str, list[float]]]
    alpha: dict[str, float]
    train_nll: NLLStats | None = None  # at the trained depth on a fixed sample of training documents


TRAIN_SAMPLE = 512  # training documents a horizon point is also scored on (seeded: the same for every run and step)


def train_sample(run: RunConfig, n: int = TRAIN_SAMPLE, seed: int = 0) -> Callable[[], Iterator[EvalBatch]]:
    """A factory of batches over a fixed, seeded sample of the run's *training* documents (each once): how well a
    model fits what it was trained on, beside its held-out score, so that overfitting can be told from underfitting."""
    corpus = cached_corpus(run.data)
    n = min(n, len(corpus.train))
    idx = sorted(np.random.default_rng(seed).choice(len(corpus.train), n, replace=False).tolist())
    return lambda: eval_batches(corpus.train, run.data.seq_len, run.train.batch_size, indices=idx)


def horizon_curve(run, depths: Sequence[int], n_docs: int | None = None, memo: bool = True,
                  n_train: int = TRAIN_SAMPLE) -> list[HorizonPoint]:
    """The run evaluated at each step whose weights it kept (``Run.kept_steps``, the last being the trained model),
    in order of steps: held-out NLL at each depth, state norms and α, and NLL at the trained depth on ``n_train``
    training documents (``train_sample``). A point inside a run is not a shorter run: its learning rate has not
    decayed. Kept beside the run (``tiedlm_lib.store.memo``) unless ``memo=False``, since a 13,000-step run's five
    points take minutes."""
    from tiedlm_lib.store.memo import memoised

    depths = sorted({int(k) for k in depths})
    K = run.model.full_depth

    def compute() -> list[HorizonPoint]:
        out = []
        for step in run.kept_steps:
            model = run.model_at(step)
            stats = depth_stats(model, heldout(run.config, n_docs)(), depths)
            norms = state_norms(model, heldout(run.config, n_docs)(), K)
            train = evaluate_nll(model, train_sample(run.config, n_train)()) if n_train else None
            out.append(HorizonPoint(step, {k: stats.nll(k) for k in depths}, norms, model.alphas(), train))
        return out

    if not memo:
        return compute()
    return memoised(run.dir, "horizon_curve", {"depths": depths, "n_docs": n_docs, "steps": run.kept_steps,
                                                "n_train": n_train}, compute)


def log_slope(steps: Sequence[float], values: Sequence[float]) -> float:
    """The least-squares slope of ``values`` on log2(steps): the change per doubling of the training steps."""
    x, y = np.log2(np.asarray(steps, dtype=np.float64)), np.asarray(values, dtype=np.float64)
    if x.size < 2 or x.size != y.size or np.ptp(x) == 0:
        raise ValueError(f"a slope needs at least two distinct steps and one value per step, got steps {list(steps)} "
                         f"and {y.size} values")
    return float(np.polyfit(x, y, 1)[0])
