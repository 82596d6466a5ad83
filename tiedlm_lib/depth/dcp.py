"""The Depth Control Protocol (paper B; PROTOCOL §8): schedules × readout recalibration, the gap decomposition with a
paired document bootstrap, and the sampled-depth training intervention.

The question it answers: when a model truncated to k applications does worse than at full depth N, how much of the
gap is fewer writes into the residual stream, how much is less distinct computation, and how much is only a readout
that was trained on depth-N states and now reads an out-of-distribution one? The last part is what a per-depth
recalibration of the readout (a probe of ``tiedlm_lib.depth.readout``: paper B's temperature and per-feature affine map
on the head input, or a more capable one) recovers.

Everything is measured on real (non-pad) target tokens and kept per document, so one bootstrap resample of documents
is shared by every condition and every term.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from tiedlm_lib import devices
from tiedlm_lib.data import EvalBatch
from tiedlm_lib.depth.readout import (
    FittedProbe,
    ProbeSpec,
    Readout,
    collect_states,
    fit_probe,
    probe_nll,
    readout_metrics,
    share_interval,
)
from tiedlm_lib.model.schedules import budget, plan
from tiedlm_lib.stats.bootstrap import Estimate, NLLStats, bootstrap_indices, percentile, replicates, value


# ---------------------------------------------------------------------------------------------------- documents
def split_documents(n_docs: int, n_cal: int, n_eval: int | None = None, seed: int = 0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint calibration and evaluation document indices drawn from ``n_docs`` held-out documents."""
    if n_cal < 1 or n_cal >= n_docs:
        raise ValueError(f"n_cal must be in 1..{n_docs - 1} (there are {n_docs} held-out documents), got {n_cal}")
    perm = np.random.default_rng(seed).permutation(n_docs)
    cal, ev = perm[:n_cal], perm[n_cal:]
    if n_eval is not None:
        ev = ev[:n_eval]
    return np.sort(cal), np.sort(ev)


# ---------------------------------------------------------------------------------------------------- conditions
@dataclass
class Condition:
    schedule: str
    k: int
    raw: NLLStats
    calibrated: dict[str, NLLStats]  # probe name -> NLL after that probe, fitted for this condition
    fits: dict[str, FittedProbe]
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # "raw" / probe -> ECE, Brier, accuracy
    seconds_per_token: float = float("nan")  # wall-clock of the schedule's forward on the evaluation documents


def evaluate_schedules(model, cal_batches: Callable[[], Iterable[EvalBatch]] | None,
                       eval_batches: Callable[[], Iterable[EvalBatch]], schedules: Sequence[str], ks: Sequence[int],
                       probes: Sequence[str] = ("head/temperature", "head/diagonal"), in_sample: bool = False,
                       seed: int = 0, progress: bool = False, **fit_kw) -> dict[tuple, Condition]:
    """Raw NLL for each (schedule, k), and NLL after each readout probe of ``tiedlm_lib.depth.readout`` (named
    "placement/form"; paper B's are head/temperature and head/diagonal) fitted per condition on the calibration
    documents — disjoint from the evaluation documents unless ``in_sample=True``, which fits on the evaluation
    documents themselves, as paper B's recurrent script did. ``fit_kw`` goes to ``lens.fit_probe`` (lams, iters).
    Each condition also carries paper B's calibration metrics of the raw and recalibrated readouts (ECE, Brier) and
    the wall-clock seconds per evaluation token of the schedule's forward pass."""
    specs = [ProbeSpec.parse(p) for p in probes]
    placements = sorted({s.placement for s in specs} | {"head"})
    readouts = {pl: Readout(model, pl) for pl in placements}
    full = plan(model.layout, "prefix", budget(model.layout))
    tuned = any(s.form == "tuned" for s in specs)
    out = {}
    todo = [(s, k) for s in schedules for k in ks]
    # one untimed forward first, so that the first condition's timing does not include the device's start-up (CUDA
    # context, kernel selection, the allocator's first blocks)
    collect_states(model, itertools.islice(eval_batches(), 1), full, "head")
    for s, k in tqdm(todo, desc="DCP conditions", disable=not progress, leave=False):
        p = plan(model.layout, s, k)
        devices.synchronize(model)
        t0 = time.perf_counter()
        ev = {"head": collect_states(model, eval_batches(), p, "head")}  # timed: the forward
        devices.synchronize(model)  # the states are on the device: wait for the kernels that made them
        seconds = time.perf_counter() - t0
        ev |= {pl: collect_states(model, eval_batches(), p, pl) for pl in placements if pl != "head"}
        if in_sample:
            cal = {pl: collect_states(model, eval_batches(), p, pl, full if tuned else None) for pl in placements}
        else:
            if cal_batches is None:
                raise ValueError("cal_batches is None: pass calibration batches, or in_sample=True")
            cal = {pl: collect_states(model, cal_batches(), p, pl, full if tuned else None) for pl in placements}
            if np.intersect1d(cal["head"].doc, ev["head"].doc).size:
                raise ValueError("calibration and evaluation documents overlap: pass disjoint document sets (see "
                                 "split_documents), or in_sample=True to fit on the evaluation documents on purpose")
        fits = {sp.name: fit_probe(readouts[sp.placement], cal[sp.placement], sp, seed=seed, **fit_kw)
                for sp in specs}
        metrics = {"raw": readout_metrics(readouts["head"], ev["head"])} | {
            n: readout_metrics(readouts[f.spec.placement], ev[f.spec.placement], f) for n, f in fits.items()}
        out[s, k] = Condition(s, k, probe_nll(readouts["head"], ev["head"]),
                              {n: probe_nll(readouts[f.spec.placement], ev[f.spec.placement], f)
                               for n, f in fits.items()}, fits, metrics, seconds / max(1, ev["head"].n_tokens))
    return out


# ---------------------------------------------------------------------------------------------------- bootstrap
def bootstrap_terms(conds: dict[str, NLLStats], terms: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
                    n_boot: int = 5000, seed: int = 0, level: float = 0.95) -> dict[str, Estimate]:
    """Point estimates and percentile CIs of quantities computed from several conditions' NLLs, with one document
    resample shared by every condition in each replicate (paired). ``terms`` maps {condition: NLL} to {term: value}
    and must work elementwise on arrays (one entry per replicate)."""
    names = list(conds)
    ref = conds[names[0]].doc_index
    for n in names[1:]:
        if not np.array_equal(conds[n].doc_index, ref):
            raise ValueError(f"condition {n!r} is not on the same documents in the same order as {names[0]!r}")
    idx = bootstrap_indices(len(ref), n_boot, seed)
    point = terms({n: np.float64(value(conds[n])) for n in names})
    reps = terms({n: replicates(conds[n], idx) for n in names})
    return {t: percentile(point[t], reps[t], level) for t in point}


def decomposition_terms(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The schedule terms of the DCP decomposition of the naive gap prefix(k_min) − prefix(k_max) (PROTOCOL §8).
    Condition keys: prefix_min, prefix_max, control_min, control_mid (the same-application-count schedule: paper B's
    repeat, or frozen for a single tied loop). The three terms telescope to the total."""
    return {"total": v["prefix_min"] - v["prefix_max"],
            "application count": v["prefix_min"] - v["control_min"],
            "distinct depth": v["control_min"] - v["control_mid"],
            "block composition": v["control_mid"] - v["prefix_max"]}


def decompose(conditions: dict[tuple, Condition], k_min: int, k_mid: int, k_max: int, control: str = "repeat",
              probe: str = "head/diagonal", n_boot: int = 5000, seed: int = 0) -> dict[str, Estimate]:
    """The decomposition from ``evaluate_schedules`` output (which must hold prefix and ``control`` at the ks): the
    three schedule terms (``decomposition_terms``) and the calibration terms — the part of the total that ``probe``
    removes and its share — from the one share estimator, ``lens.share_interval``, on the same resample. The probes
    are held fixed here (evaluation resampling only); ``lens.share_by_probe`` gives the share with refits."""
    need = [("prefix", k_min), ("prefix", k_max), (control, k_min), (control, k_mid)]
    missing = [c for c in need if c not in conditions]
    if missing:
        raise ValueError(f"the decomposition needs conditions {missing}, which were not evaluated")
    raw = (conditions["prefix", k_min].raw, conditions["prefix", k_max].raw)
    conds = {"prefix_min": raw[0], "prefix_max": raw[1],
             "control_min": conditions[control, k_min].raw, "control_mid": conditions[control, k_mid].raw}
    out = bootstrap_terms(conds, decomposition_terms, n_boot, seed)
    cal = share_interval(raw, (conditions["prefix", k_min].calibrated[probe],
                               conditions["prefix", k_max].calibrated[probe]), [], n_boot, seed, centre=False)
    return {"total": out["total"], **{k: cal[k] for k in ("calibrated gap", "calibration", "calibration share")},
            **{k: out[k] for k in ("application count", "distinct depth", "block composition")}}
