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
from tiedlm_lib.store.memo import memoised, weights_fingerprint

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
    Effect("B1", "B1 application-count share", "(prefix(1) − frozen(1)) / (prefix(1) − prefix(K)), single-depth"),
    *(Effect("B3", f"B3 {p} share", f"share of prefix(1) − prefix(K) a {p} probe recovers, single-depth, 30 refits")
      for p in B3_PROBES),
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


def _measure(single, multi, seed: int, b: Budgets) -> dict:
    K = budget(single.config.model.layout)
    if budget(multi.config.model.layout) != K:
        raise ValueError(f"a ladder point pairs models of one K, got {single.config.name} (K = {K}) and "
                         f"{multi.config.name} (K = {budget(multi.config.model.layout)})")
    depths = list(range(1, K + 1))
    st = {kind: depth_stats(r.model, heldout(r.config)(), depths) for kind, r in (("single", single), ("multi", multi))}
    if not np.array_equal(st["single"].doc_index, st["multi"].doc_index):
        raise ValueError("the two models of a ladder point must be scored on the same held-out documents")
    out = {"A1 depth gap": depth_gap(st["single"], 1, K, "masked", b.n_boot),
           "A7 multi-depth gain": depth_gap(st["multi"], 1, K, "masked", b.n_boot)}
    for row in exit_vs_uniform(st["single"], TAUS, "final", n_boot=b.n_boot):
        out[f"A4 exit penalty τ={row['tau']:g}"] = Estimate(row["exit_minus_uniform_masked"], *row["ci_masked"])
    # A6 and A8 choose a depth: on the selection half, estimated on the other (amendment 9)
    sel, est = selection_split(st["single"].doc_index)
    chosen = {kind: s.take(sel).best_depth() for kind, s in st.items()}
    on_est = {kind: s.take(est) for kind, s in st.items()}
    out["A6 exit cost"] = paired_diff(on_est["multi"].nll(1), on_est["multi"].nll(chosen["multi"]), "masked", b.n_boot)
    out["A8 ceiling"] = paired_diff(on_est["multi"].nll(chosen["multi"]), on_est["single"].nll(chosen["single"]),
                                    "masked", b.n_boot)
    # B1 and B3 on section 10's evaluation documents (B3's probes fitted on its calibration documents)
    cal_b, ev_b = document_sets(single.config, seed, b.n_cal, b.n_eval)
    layout = single.config.model.layout
    raw = {(s, k): probe_nll(single.model, collect_states(single.model, ev_b(), plan(layout, s, k), "head"))
           for s, k in (("prefix", 1), ("frozen", 1), ("prefix", K))}
    total = paired_diff(raw["prefix", 1], raw["prefix", K], "masked", b.n_boot, seed)
    out["B1 application-count share"] = ratio(paired_diff(raw["prefix", 1], raw["frozen", 1], "masked", b.n_boot, seed),
                                              total)
    for r in share_by_probe(single.model, cal_b, ev_b, 1, K, probes=[ProbeSpec.parse(p) for p in B3_PROBES],
                            n_refit=b.n_refit, n_boot=b.probe_boot, seed=seed, lams=list(b.probe_lams),
                            iters=b.probe_iters):
        out[f"B3 {r['probe']} share"] = Estimate(r["share"], r["share lo"], r["share hi"])
    context = {"single NLL(K)": st["single"].nll(K).masked, "multi NLL(K)": st["multi"].nll(K).masked,
               "single chosen k": chosen["single"], "multi chosen k": chosen["multi"],
               "prefix(1) - prefix(K), section 10 documents": total.point}
    return {"effects": {n: [e.point, e.lo, e.hi] for n, e in out.items()}, "context": context}


def point_effects(single, multi, seed: int, budgets: Budgets | None = None
                  ) -> tuple[dict[str, Estimate], dict[str, float]]:
    """One seed's estimate of every ``EFFECTS`` entry at one ladder point: ``single`` and ``multi`` are the point's
    trained runs (``runs.Run``) of that seed; with the estimates, a few numbers for context (each model's NLL at K,
    the depths chosen). Kept beside the single-depth run, keyed by the budgets, the multi-depth
    run and both runs' weights (and the library's deciding code), so a re-execution reads it back."""
    b = budgets or Budgets()
    if single.config.train.seed != seed or multi.config.train.seed != seed:
        raise ValueError(f"point_effects(seed={seed}) got runs of seeds {single.config.train.seed} and "
                         f"{multi.config.train.seed}")
    key = {"multi": multi.config.fingerprint(), "multi weights": weights_fingerprint(multi.dir), "seed": seed,
           "budgets": b.__dict__, "effects": [e.name for e in EFFECTS]}
    kept = memoised(single.dir, "ladder_point", key, lambda: _measure(single, multi, seed, b))
    return {n: Estimate(*v) for n, v in kept["effects"].items()}, kept["context"]


# --- pooling over seeds, the trend, the band -----------------------------------------------------------------------

def pooled_points(rows: Iterable[Mapping]) -> list[dict]:
    """``rows``: one per (axis, point, seed, effect) with ``point``, ``lo``, ``hi`` and the point's ``x`` (log₂ size).
    Returns one row per (axis, effect, point): the pooled estimate and interval over the point's seeds, their count,
    and where the interval lies against the effect's threshold ("above", "below" or "undecided")."""
    groups: dict[tuple, list[Mapping]] = {}
    for r in rows:
        groups.setdefault((r["axis"], r["effect"], r["x"]), []).append(r)
    out = []
    for (axis, effect, _), g in sorted(groups.items(), key=lambda kv: (kv[0][0], list(BY_NAME).index(kv[0][1]),
                                                                       kv[0][2])):
        p = inf.pool([Estimate(r["point"], r["lo"], r["hi"]) for r in g])
        thr = BY_NAME[effect].threshold
        out.append({"axis": axis, "effect": effect, **{k: g[0][k] for k in ("x", "size", "d", "K")},
                    "seeds": len(g), "pooled": p.point, "lo": p.lo, "hi": p.hi, "threshold": thr,
                    "side of threshold": "above" if p.lo > thr else "below" if p.hi < thr else "undecided"})
    return out


def trends(rows: Iterable[Mapping], pooled: Sequence[Mapping]) -> list[dict]:
    """One row per (axis, effect): the pooled per-seed slope per doubling of size (``ladder.trend``) with its 95%
    interval, its word (``ladder.trend_word``, signed by the effect's side), the sign across the points
    (``ladder.direction_word`` against the effect's threshold) and the points it rests on."""
    by: dict[tuple, dict[int, dict[float, Estimate]]] = {}
    for r in rows:
        by.setdefault((r["axis"], r["effect"]), {}).setdefault(r["seed"], {})[r["x"]] = Estimate(r["point"], r["lo"],
                                                                                                 r["hi"])
    out = []
    for (axis, effect), by_seed in sorted(by.items(), key=lambda kv: (kv[0][0], list(BY_NAME).index(kv[0][1]))):
        e = BY_NAME[effect]
        pts = [p for p in pooled if p["axis"] == axis and p["effect"] == effect]
        row = {"axis": axis, "effect": effect, "claim": e.claim, "read": e.read, "points": len(pts),
               "sizes": ", ".join(str(p["size"]) for p in pts),
               "direction": lad.direction_word([(p["lo"], p["hi"]) for p in pts], e.threshold),
               "threshold": e.threshold}
        if len(pts) < 3:
            out.append(row | {"slope per doubling": math.nan, "slope lo": math.nan, "slope hi": math.nan,
                              "seeds in slope": 0, "trend": f"not measured (points at {len(pts)} of 3 sizes needed)"})
            continue
        t = lad.trend(by_seed)
        p = t["pooled"]
        out.append(row | {"slope per doubling": p["point"], "slope lo": p["lo"], "slope hi": p["hi"],
                          "seeds in slope": len(t["seeds"]),
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
