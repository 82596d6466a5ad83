"""Section 14, "Across sizes": each effect of the size ladder measured at one point and seed, and read as a trend.

``runs.ladder`` defines the ladder (its points, the recipe across widths, the per-seed slope and the words); this
module measures the pre-registered estimands at a point (docs/statistics.md amendment 17, rows ``ladder`` of
``preregistered.csv``) and shapes them into the section's tables:

* ``point_effects``: one seed's estimates at one point — A1's depth gap, A4's exit penalty at τ = 0.2 / 0.4 / 0.6
  (corrected fallback), A6's exit cost, A7's other half (the multi-depth model's own depth gain), A8's ceiling, B1's
  application-count share and B3's calibration shares with head/diagonal and loop/diagonal — each a document-bootstrap
  interval, on the held-out documents of sections 04 (A1-A8) and 10 (B1, B3). Kept beside the point's single-depth
  run (``tiedlm_lib.store.memo``), since B3's 30 refits are minutes a point.
* ``pooled_points``: every point's estimate pooled over its seeds (the seed is the unit).
* ``trends``: per effect and axis, the pooled slope per doubling of size with its words.
* ``extrapolation``: where the paper's size lies beyond the largest measured point, the labelled band.

Nothing here judges a claim: the ladder describes how the ledger's effects move with size beside the ledger.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tiedlm_lib.depth.dcp import split_documents
from tiedlm_lib.depth.readout import ProbeSpec, collect_states, probe_nll, share_by_probe
from tiedlm_lib.evaluation.analysis import cached_corpus, depth_gap, exit_vs_uniform, heldout, selection_split
from tiedlm_lib.evaluation.nll import depth_stats
from tiedlm_lib.model.schedules import budget, plan
from tiedlm_lib.paper.judging import ratio, spec
from tiedlm_lib.runs import ladder as lad
from tiedlm_lib.stats import inference as inf
from tiedlm_lib.stats.bootstrap import Estimate, paired_diff
from tiedlm_lib.store.memo import code_fingerprint, memoised, weights_fingerprint

TAUS = (0.2, 0.4, 0.6)  # A4's thresholds: 0.4 is read, 0.2 and 0.6 are shown beside (amendment 17)
B3_PROBES = ("head/diagonal", "loop/diagonal")  # paper B's probe and the cheap loop-placed one (the tuned form is not)


@dataclass(frozen=True)
class Effect:
    """One estimand of the ladder: its claim, its name in the tables, what it measures and which model it reads."""

    claim: str
    name: str
    what: str
    read: bool = True  # False: shown beside (A4 at τ = 0.2 and 0.6), no trend word of its own in the prose

    @property
    def row(self) -> dict[str, str]:
        """The pre-registered row (claim, part "across sizes") that gives the effect's side and threshold."""
        return spec(self.claim, "across sizes")

    @property
    def side(self) -> int:
        return int(self.row["side"] or 1)

    @property
    def threshold(self) -> float:
        return float(self.row["threshold"] or 0)


EFFECTS = (
    Effect("A1", "A1 depth gap", "single-depth NLL(1) − NLL(K)"),
    *(Effect("A4", f"A4 exit penalty τ={t:g}", f"max-prob exit at τ = {t:g} (corrected fallback) − uniform depth at "
             "the same average depth, single-depth model", read=t == 0.4) for t in TAUS),
    Effect("A6", "A6 exit cost", "multi-depth NLL(1) − NLL(best k), k chosen on the selection half"),
    Effect("A7", "A7 multi-depth gain", "multi-depth NLL(1) − NLL(K): the depth gain multi-depth supervision leaves"),
    Effect("A8", "A8 ceiling", "best multi-depth NLL − best single-depth NLL, depths chosen on the selection half"),
    *(Effect("A7", f"A7 law: {m} {what}", f"the law at the point (section 04's reading across models): the "
             f"{m}-depth model's " + ("NLL(1) − the other model's best NLL" if what == "exit cost" else
                                      "NLL(1) − NLL(K)") + ", estimation half", read=False)
      for m in ("single", "multi") for what in ("exit cost", "depth gap")),
    Effect("B1", "B1 application-count share", "(prefix(1) − frozen(1)) / (prefix(1) − prefix(K)), single-depth"),
    *(Effect("B3", f"B3 {p} share", f"share of prefix(1) − prefix(K) a {p} probe recovers, single-depth, with "
             "refits (amendment 10: 30)") for p in B3_PROBES),
)
BY_NAME = {e.name: e for e in EFFECTS}


@dataclass(frozen=True)
class Budgets:
    """The evaluation budgets of a point: bootstrap replicates, section 10's document sets and probe fits."""

    n_boot: int = 1000
    n_cal: int = 100  # calibration documents (section 10's)
    n_eval: int = 300  # evaluation documents (section 10's)
    n_refit: int = 30
    probe_boot: int = 1000
    probe_iters: int = 40
    probe_lams: tuple[float, ...] = (1e-3, 1e-2, 1e-1)

    def __post_init__(self):
        for f in ("n_boot", "n_cal", "n_eval", "probe_boot", "probe_iters"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{f} must be an integer >= 1, got {v!r}")
        if not isinstance(self.n_refit, int) or self.n_refit < 0:
            raise ValueError(f"n_refit must be an integer >= 0, got {self.n_refit!r}")


def document_sets(run_config, seed: int, n_cal: int, n_eval: int):
    """Section 10's calibration and evaluation documents of a run's held-out split, as batch factories: disjoint,
    drawn by ``seed`` (its ``doc_sets``, with its ``n_cal`` capped at a third of the held-out documents)."""
    from tiedlm_lib.data import eval_batches

    docs = cached_corpus(run_config.data).val
    n = len(docs)
    c = min(n_cal, n // 3)
    idx = split_documents(n, c, min(n_eval, n - c), seed=seed)
    return tuple((lambda i=i: eval_batches(docs, run_config.data.seq_len, run_config.train.batch_size, indices=i))
                 for i in idx)


# The code a kept measurement depends on beyond the library's deciding modules (memo.CODE_MODULES): this module's
# estimands and document sets, the delta-method ratio and the pooling's variance
OWN_CODE = ("tiedlm_lib.paper.across_sizes", "tiedlm_lib.paper.judging", "tiedlm_lib.stats.inference")


def _stats(run):
    K = budget(run.config.model.layout)
    return K, depth_stats(run.model, heldout(run.config)(), list(range(1, K + 1)))


def _halves(st):
    """(depth chosen on the selection half, the estimation half): A6, A8 and the law choose a depth on one half
    of the held-out documents and are estimated on the other (amendment 9)."""
    sel, est = selection_split(st.doc_index)
    return st.take(sel).best_depth(), st.take(est)


def _single(run, seed: int, b: Budgets, st) -> dict:
    """The single-depth model's effects: A1, A4 at each τ, B1 and B3."""
    K, st = st
    out = {"A1 depth gap": depth_gap(st, 1, K, "masked", b.n_boot)}
    context = {"single NLL(K)": st.nll(K).masked}
    for row in exit_vs_uniform(st, TAUS, "final", n_boot=b.n_boot):
        out[f"A4 exit penalty τ={row['tau']:g}"] = Estimate(row["exit_minus_uniform_masked"], *row["ci_masked"])
        context[f"A4 average depth τ={row['tau']:g}"] = row["avg_k_real"]  # where the exit rarely fires, ≈ K
    # B1 and B3 on section 10's evaluation documents (B3's probes fitted on its calibration documents)
    cal_b, ev_b = document_sets(run.config, seed, b.n_cal, b.n_eval)
    layout = run.config.model.layout
    raw = {(s, k): probe_nll(run.model, collect_states(run.model, ev_b(), plan(layout, s, k), "head"))
           for s, k in (("prefix", 1), ("frozen", 1), ("prefix", K))}
    total = paired_diff(raw["prefix", 1], raw["prefix", K], "masked", b.n_boot, seed)
    out["B1 application-count share"] = ratio(paired_diff(raw["prefix", 1], raw["frozen", 1], "masked", b.n_boot,
                                                          seed), total)
    context["prefix(1) - prefix(K), section 10 documents"] = total.point
    for r in share_by_probe(run.model, cal_b, ev_b, 1, K, probes=[ProbeSpec.parse(p) for p in B3_PROBES],
                            n_refit=b.n_refit, n_boot=b.probe_boot, seed=seed, lams=list(b.probe_lams),
                            iters=b.probe_iters):
        out[f"B3 {r['probe']} share"] = Estimate(r["share"], r["share lo"], r["share hi"])
    return {"effects": {n: [e.point, e.lo, e.hi] for n, e in out.items()}, "context": context}


def _multi(b: Budgets, st) -> dict:
    """The multi-depth model's effects: A6's exit cost (its depth chosen on the selection half) and A7's other
    half, its own depth gain on every held-out document."""
    K, st = st
    chosen, on_est = _halves(st)
    out = {"A6 exit cost": paired_diff(on_est.nll(1), on_est.nll(chosen), "masked", b.n_boot),
           "A7 multi-depth gain": depth_gap(st, 1, K, "masked", b.n_boot)}
    return {"effects": {n: [e.point, e.lo, e.hi] for n, e in out.items()},
            "context": {"multi NLL(K)": st.nll(K).masked, "multi chosen k": chosen}}


def _pair(b: Budgets, st_single, st_multi) -> dict:
    """What needs both models: A8's ceiling (best multi − best single) and the law at the point as section 04 reads
    it across models, each model's exit cost against the other's best NLL and its own depth gap, all on the
    estimation half with every depth chosen on the selection half."""
    (K, s), (_, m) = st_single, st_multi
    if not np.array_equal(s.doc_index, m.doc_index):
        raise ValueError("the two models of a ladder point must be scored on the same held-out documents")
    (ks, es), (km, em) = _halves(s), _halves(m)
    out = {"A8 ceiling": paired_diff(em.nll(km), es.nll(ks), "masked", b.n_boot),
           "A7 law: single exit cost": paired_diff(es.nll(1), em.nll(km), "masked", b.n_boot),
           "A7 law: single depth gap": paired_diff(es.nll(1), es.nll(K), "masked", b.n_boot),
           "A7 law: multi exit cost": paired_diff(em.nll(1), es.nll(ks), "masked", b.n_boot),
           "A7 law: multi depth gap": paired_diff(em.nll(1), em.nll(K), "masked", b.n_boot)}
    return {"effects": {n: [e.point, e.lo, e.hi] for n, e in out.items()}, "context": {"single chosen k": ks}}


def usable(run) -> str:
    """A ladder run's training status (``cache.training_status``, amendment 15): "complete", "stopped" or
    "diverged"; only a complete run enters a point (amendment 17: a stopped or diverged run leaves its seed out)."""
    from tiedlm_lib.runs.cache import training_status

    return training_status(run.result, run.config.model.vocab_size, run.config.train.max_nonfinite)


def point_effects(single, multi, seed: int, budgets: Budgets | None = None
                  ) -> tuple[dict[str, Estimate], dict[str, float]]:
    """One seed's estimates of the ``EFFECTS`` at one ladder point, with a few numbers for context (each model's NLL
    at K, the depths chosen, A4's average depths). ``single`` and ``multi`` are the point's trained runs
    (``runs.Run``) of that seed; either may be None (not trained, stopped or diverged), which leaves out the effects
    that read it. Each part is kept beside its run (the single-depth effects and the pair's beside the single-depth
    run, the multi-depth ones beside the multi-depth run), keyed by the budgets, the runs' weights and the code
    that computes them (the library's deciding modules and ``OWN_CODE``), so a re-execution reads it back."""
    b = budgets or Budgets()
    runs = {k: r for k, r in (("single", single), ("multi", multi)) if r is not None}
    if any(r.config.train.seed != seed for r in runs.values()):
        raise ValueError(f"point_effects(seed={seed}) got runs of seeds "
                         f"{', '.join(str(r.config.train.seed) for r in runs.values())}")
    if len({budget(r.config.model.layout) for r in runs.values()}) > 1:
        raise ValueError(f"a ladder point pairs models of one K, got {[r.config.model.layout for r in runs.values()]}")
    stats: dict = {}

    def st(kind):  # each model's depth sweep, computed at most once and only when a part is not kept
        if kind not in stats:
            stats[kind] = _stats(runs[kind])
        return stats[kind]

    key = {"seed": seed, "budgets": b.__dict__, "effects": [e.name for e in EFFECTS],
           "own code": code_fingerprint(OWN_CODE)}
    parts = []
    if "single" in runs:
        parts.append(memoised(single.dir, "ladder_single", key, lambda: _single(single, seed, b, st("single"))))
    if "multi" in runs:
        parts.append(memoised(multi.dir, "ladder_multi", key, lambda: _multi(b, st("multi"))))
    if len(runs) == 2:
        pair_key = key | {"multi": multi.config.fingerprint(), "multi weights": weights_fingerprint(multi.dir)}
        parts.append(memoised(single.dir, "ladder_pair", pair_key, lambda: _pair(b, st("single"), st("multi"))))
    effects = {n: Estimate(*v) for p in parts for n, v in p["effects"].items()}
    return effects, {k: v for p in parts for k, v in p["context"].items()}


# --- pooling over seeds, the trend, the band -----------------------------------------------------------------------

SINGLE_SEED = "single seed (not pooled)"  # docs/statistics.md §1: one seed is never pooled


def pooled_points(rows: Iterable[Mapping]) -> list[dict]:
    """``rows``: one per (axis, point, seed, effect) with ``point``, ``lo``, ``hi`` and the point's ``x`` (log₂ size).
    Returns one row per (axis, effect, point): the estimate pooled over the point's seeds with its interval, their
    count, and where the interval lies against the effect's threshold ("above", "below" or "undecided"). A point
    with one seed is not pooled (§1): its row shows that seed's estimate and says so. A seed whose estimate is not
    finite (a share of a zero gap) is left out and counted."""
    groups: dict[tuple, list[Mapping]] = {}
    for r in rows:
        groups.setdefault((r["axis"], r["effect"], r["x"]), []).append(r)
    out = []
    for (axis, effect, _), g in sorted(groups.items(), key=lambda kv: (kv[0][0], list(BY_NAME).index(kv[0][1]),
                                                                       kv[0][2])):
        ests = [Estimate(r["point"], r["lo"], r["hi"]) for r in g]
        finite = [e for e in ests if all(math.isfinite(v) for v in (e.point, e.lo, e.hi))]
        thr = BY_NAME[effect].threshold
        row = {"axis": axis, "effect": effect, **{k: g[0][k] for k in ("x", "size", "d", "K")},
               "seeds": len(finite), "seeds not finite": len(ests) - len(finite), "threshold": thr}
        if not finite:
            out.append(row | {"pooled": math.nan, "lo": math.nan, "hi": math.nan, "side of threshold": "not measured"})
            continue
        p = inf.pool(finite)
        side = "above" if p.lo > thr else "below" if p.hi < thr else "undecided"
        out.append(row | {"pooled": p.point, "lo": p.lo, "hi": p.hi,
                          "side of threshold": SINGLE_SEED if len(finite) == 1 else side})
    return out


def trends(rows: Iterable[Mapping], pooled: Sequence[Mapping]) -> list[dict]:
    """One row per (axis, effect): the per-seed slopes per doubling of size pooled over seeds (``ladder.trend``)
    with its 95% interval and word (``ladder.trend_word``, signed by the effect's side), and the sign across the
    points (``ladder.direction_word`` against the effect's threshold, over the points pooled from two or more seeds).
    A trend needs three sizes and two seeds with three points each: one seed's slope is not pooled (§1), so its row
    says so and carries no word. Seeds left out of the slope (fewer than three points) are listed."""
    by: dict[tuple, dict[int, dict[float, Estimate]]] = {}
    for r in rows:
        if all(math.isfinite(r[k]) for k in ("point", "lo", "hi")):
            by.setdefault((r["axis"], r["effect"]), {}).setdefault(r["seed"], {})[r["x"]] = Estimate(
                r["point"], r["lo"], r["hi"])
    out = []
    for (axis, effect), by_seed in sorted(by.items(), key=lambda kv: (kv[0][0], list(BY_NAME).index(kv[0][1]))):
        e = BY_NAME[effect]
        pts = [p for p in pooled if p["axis"] == axis and p["effect"] == effect and math.isfinite(p["pooled"])]
        decided = [p for p in pts if p["seeds"] >= 2]
        row = {"axis": axis, "effect": effect, "claim": e.claim, "read": e.read, "points": len(pts),
               "sizes": ", ".join(str(p["size"]) for p in pts),
               "direction": lad.direction_word([(p["lo"], p["hi"]) for p in decided], e.threshold),
               "threshold": e.threshold}
        nan = {"slope per doubling": math.nan, "slope lo": math.nan, "slope hi": math.nan}
        usable = [sd for sd, p in by_seed.items() if len(p) >= 3]
        if len(pts) < 3 or not usable:
            out.append(row | nan | {"seeds in slope": 0, "seeds left out": ", ".join(map(str, sorted(by_seed))),
                                    "trend": f"not measured (points at {len(pts)} of 3 sizes needed)"})
            continue
        t = lad.trend(by_seed)
        p = t["pooled"]
        left = ", ".join(map(str, t["left out (too few points)"]))
        if len(t["seeds"]) < 2:
            out.append(row | nan | {"seeds in slope": 1, "seeds left out": left, "trend": SINGLE_SEED})
            continue
        out.append(row | {"slope per doubling": p["point"], "slope lo": p["lo"], "slope hi": p["hi"],
                          "seeds in slope": len(t["seeds"]), "seeds left out": left,
                          "trend": lad.trend_word(p["lo"], p["hi"], e.side)})
    return out


def extrapolation(pooled: Sequence[Mapping], trend_rows: Sequence[Mapping], axis: str, x_target: float) -> list[dict]:
    """Per effect of ``axis`` whose largest measured point lies below ``x_target`` (log₂ of the paper's size), the band
    amendment 17 draws: from that point, its pooled interval plus the slope's interval times the distance, added
    ("extrapolation, not a verdict"). Nothing where the target was measured or the trend was not."""
    out = []
    for t in trend_rows:
        if t["axis"] != axis or not math.isfinite(t["slope per doubling"]):
            continue
        pts = [p for p in pooled if p["axis"] == axis and p["effect"] == t["effect"]]
        last = max(pts, key=lambda p: p["x"])
        dx = x_target - last["x"]
        if dx <= 1e-9:
            continue
        out.append({"axis": axis, "effect": t["effect"], "from x": last["x"], "x": x_target,
                    "centre": last["pooled"] + t["slope per doubling"] * dx,
                    "lo": last["lo"] + t["slope lo"] * dx, "hi": last["hi"] + t["slope hi"] * dx,
                    "label": "extrapolation, not a verdict"})
    return out
