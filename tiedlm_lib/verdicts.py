"""One function per claim: the criterion that decides its verdict, written before the numbers it judges.

A notebook computes the evidence (per-seed estimates with confidence intervals) and calls the claim's function; the
function returns a ``Judgement`` — the verdict, the criterion in words, the evidence and the *basis* (which
statistic decided: per-seed CIs that every seed must agree on, or the between-seed spread). Every outcome each
function can return is produced by tests/test_verdicts.py on synthetic estimates, so no criterion is one that cannot
fail.

Conventions. ``PerSeed`` maps a training seed to that seed's estimate (a paired document-bootstrap CI). A sign
criterion holds when every seed's CI excludes 0 on the claimed side; it is contradicted when every seed's CI excludes
0 on the other side; seeds whose CIs exclude 0 on opposite sides are reported as "seeds disagree" (inconclusive).
Beside each per-seed CI the evidence carries the between-seed spread (mean, sd, a t-interval over seeds) and whether
the points spread wider than a per-seed CI. Margins for "costs nothing" are stated in ``tiedlm_lib.criteria``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .claims import answer, evidence_seeds, seed_cis, verdict
from .criteria import MARGIN_GAP_FRACTION, MARGIN_NATS, equivalence, margin_for, noninferiority, sign, spread
from .stats import Estimate

PerSeed = Mapping[int, Estimate]
OPPOSITE = {"above 0": "below 0", "below 0": "above 0"}


@dataclass(frozen=True)
class Judgement:
    """A claim's verdict with its criterion, evidence and basis, ready for ``Report.judge``."""

    claim: str
    verdict: str
    criterion: str
    evidence: dict[str, Any]
    protocol: str = "corrected"
    basis: str = ""
    outcomes: dict[str, str] = field(default_factory=dict)  # per unit (size, pair, ...): the rule's outcome
    seeds: tuple[int, ...] | None = None  # the seeds it rests on when its evidence names none (a derived answer)


def spread_lines(evidence: dict[str, Any], prefix: str = "") -> list[str]:
    """One line per evidence block that has several seeds: each seed's CI beside the between-seed spread."""
    out = []
    for key, block in evidence.items():
        if not isinstance(block, dict):
            continue
        if "between seeds" in block:
            cis = ", ".join(f"{k} {v[0]:+.3f} [{v[1]:+.3f}, {v[2]:+.3f}]" for k, v in seed_cis(block).items())
            b = block["between seeds"]
            wide = "; the points spread wider than a per-seed CI" if b["points spread wider than a per-seed CI"] else ""
            out.append(f"  {prefix}{key}: {cis} | between seeds mean {b['mean']:+.3f}, sd {b['sd']:.3f}, t95 "
                       f"[{b['t95 of the mean'][0]:+.3f}, {b['t95 of the mean'][1]:+.3f}]{wide}")
        else:
            out += spread_lines(block, f"{prefix}{key} / ")
    return out


def forest_rows(evidence: dict[str, Any], threshold: float = 0.0, path: str = "") -> list[dict[str, Any]]:
    """One row per evidence block with per-seed CIs, for a forest plot: the mean over seeds with its t-interval
    (one seed: that seed's CI), and the threshold its criterion compares against (the block's "margin", else the
    evidence's "threshold", else 0)."""
    threshold = float(evidence.get("threshold", threshold))
    rows = []
    for key, block in evidence.items():
        if not isinstance(block, dict):
            continue
        seeds = seed_cis(block)
        if seeds:
            b = block.get("between seeds")
            point, lo, hi = (b["mean"], *b["t95 of the mean"]) if b else next(iter(seeds.values()))
            rows.append({"unit": f"{path}{key}", "point": point, "lo": lo, "hi": hi, "seeds": len(seeds),
                         "threshold": float(block.get("margin", threshold))})
        else:
            rows += forest_rows(block, threshold, f"{path}{key} / ")
    return rows


def ci(e: Estimate) -> list[float]:
    return [e.point, e.lo, e.hi]


def seed_evidence(per_seed: PerSeed) -> dict[str, Any]:
    """Each seed's CI and, with several seeds, the between-seed spread beside them."""
    if not per_seed:
        raise ValueError("a claim needs at least one seed's estimate")
    ev: dict[str, Any] = {f"s{s}": ci(e) for s, e in per_seed.items()}
    if len(per_seed) > 1:
        sp = spread(list(per_seed.values()))
        ev["between seeds"] = {"mean": sp.mean, "sd": sp.sd, "t95 of the mean": [sp.lo, sp.hi],
                               "points spread wider than a per-seed CI": sp.exceeds_per_seed_ci}
    return ev


def _n_seeds(units: Mapping[str, Mapping]) -> int | tuple[int, int]:
    """The seeds behind each unit: one count, or (fewest, most) when units rest on different numbers of seeds."""
    counts = {len(ps) for ps in units.values()}
    return min(counts) if len(counts) == 1 else (min(counts), max(counts))


def _seeds(n: int | tuple[int, int]) -> str:
    if isinstance(n, tuple):
        return f"{n[0]} to {n[1]} seeds by unit" + (" (single-seed units)" if n[0] == 1 else "")
    return f"{n} seeds" if n != 1 else "1 seed (single-seed)"


def _basis(rule: str, units: Mapping[str, Any], outcomes: Mapping[str, str]) -> str:
    n = _n_seeds(units) if units and isinstance(next(iter(units.values())), Mapping) else 1
    split = [u for u, o in outcomes.items() if o == "seeds disagree"]
    tail = f"; seeds disagree on {', '.join(split)}" if split else ""
    return f"{rule}, {_seeds(n)}{tail}"


def _units(claim: str, flags: dict, what: str) -> dict:
    """A criterion's per-unit outcomes, refused when empty (all() and not any() of nothing would both hold)."""
    if not flags:
        raise ValueError(f"{claim} needs at least one unit to judge ({what}), got none")
    return flags


def tally(per_seed: Mapping[int, str], rule: str) -> tuple[str, str]:
    """Per-seed outcomes "holds" / "contradicted" / "neither" as a verdict (reproduced only if every seed holds, not
    reproduced only if every seed contradicts) and its basis, naming seeds that split both ways."""
    outs = set(per_seed.values())
    split = "holds" in outs and "contradicted" in outs
    return (verdict(outs == {"holds"}, outs == {"contradicted"}),
            f"{rule}, {_seeds(len(per_seed))}" + ("; seeds disagree" if split else ""))


def sign_claim(claim: str, units: Mapping[str, PerSeed], want: str, criterion: str,
               protocol: str = "corrected", extra: dict[str, Any] | None = None) -> Judgement:
    """Reproduced when every unit's gap is ``want`` ("above 0" / "below 0") in every seed; not reproduced when some
    unit's gap is the opposite in every seed; otherwise inconclusive (within noise, or seeds disagree)."""
    if want not in OPPOSITE:
        raise ValueError(f"want must be 'above 0' or 'below 0', got {want!r}")
    if not units:
        raise ValueError(f"claim {claim}: no estimates to judge")
    outcomes = {u: sign(list(ps.values())) for u, ps in units.items()}
    v = verdict(all(o == want for o in outcomes.values()), any(o == OPPOSITE[want] for o in outcomes.values()))
    ev = {u: seed_evidence(ps) for u, ps in units.items()} | (extra or {})
    return Judgement(claim, v, criterion, ev, protocol, _basis("per-seed 95% CIs, every seed must agree", units,
                                                               outcomes), outcomes)


# --- section 02: gradient estimators -------------------------------------------------------------------------------

A9_RATIO = 0.6  # phantom/full memory and time at the deepest benchmarked depth (the paper: 0.54 and 0.48)
A9_SHORT_MARGIN = 0.1  # nats: "costs little over a short run" (the paper: +0.03 at 1000 steps)


def a9(memory_ratio: float, time_ratio: float, short_gap: PerSeed, k: int) -> Judgement:
    """Phantom saves memory and time (benchmark ratios ≤ A9_RATIO) and costs little over a short run: the short-run
    gap phantom − full is non-inferior at A9_SHORT_MARGIN in every seed (CI upper end below the margin)."""
    cost = noninferiority(list(short_gap.values()), A9_SHORT_MARGIN)
    saves = memory_ratio <= A9_RATIO and time_ratio <= A9_RATIO
    v = verdict(saves and cost == "non-inferior", not saves or cost == "inferior")
    return Judgement("A9", v, f"at k={k} the benchmark's phantom/full memory and time ratios are <= {A9_RATIO}, "
                     f"and the short-run NLL gap phantom - full is below +{A9_SHORT_MARGIN} nats in every seed (CI "
                     "upper end; not reproduced if a ratio exceeds it or some seed's CI lies wholly above the margin)",
                     {"k": k, "memory_ratio": memory_ratio, "time_ratio": time_ratio,
                      "short_gap": seed_evidence(short_gap) | {"margin": A9_SHORT_MARGIN},
                      "short-run outcome": cost, "saves memory and time": saves}, "corrected",
                     _basis(f"benchmark ratios; non-inferiority at +{A9_SHORT_MARGIN} nats", {"short": short_gap},
                            {"short": cost}), {"short": cost})


def a10(long_gap: PerSeed, full_nll: Mapping[int, float], reported_rel: float, short_gap: PerSeed | None = None,
        protocol: str = "corrected", where: str = "long-run") -> Judgement:
    """Phantom underfits over the long horizon: phantom − full has its CI above 0 in every seed (and, with a short
    run, the mean long-run gap exceeds the mean short-run gap). Its size is reported against the paper's as a
    fraction of full backprop's NLL (``reported_rel``: 1.36 / 2.508)."""
    j = sign_claim("A10", {"phantom - full": long_gap}, "above 0", "", protocol)
    rel = {s: e.point / full_nll[s] for s, e in long_gap.items()}
    mean_rel = sum(rel.values()) / len(rel)
    grows = short_gap is None or (_mean(long_gap) > _mean(short_gap))
    v = j.verdict if grows or j.verdict != "reproduced" else "inconclusive"
    crit = (f"{where} NLL gap phantom - full has 95% CI above 0 in every seed" +
            ("" if short_gap is None else " and its mean exceeds the short-run gap's (it grows with the horizon)"))
    ev = j.evidence | {"gap / full NLL (mean over seeds)": mean_rel, "reported gap / full NLL": reported_rel,
                       "ratio to the paper's": mean_rel / reported_rel}
    if short_gap is not None:
        ev["short_gap"] = seed_evidence(short_gap)
        ev["grows with the horizon"] = grows  # mean over seeds, long-run gap above the short-run gap
    return Judgement("A10", v, crit, ev, protocol, j.basis, j.outcomes)


def _mean(ps: PerSeed) -> float:
    return sum(e.point for e in ps.values()) / len(ps)


A3_NATS = 1.0  # "near ln V": within 1 nat of uniform guessing


def a3(nll_by_k: Mapping[int, Mapping[int, float]], vocab_size: int, K: int, metric: str = "masked",
       protocol: str = "corrected") -> Judgement:
    """Long phantom training makes shallow depths useless: on the long phantom run, NLL(k) for every k ≤ K/2 is
    within A3_NATS of ln V, in every seed, while NLL(K) is not. Not reproduced if some seed's NLL(K/2) lies more
    than A3_NATS below ln V; seeds that split both ways disagree."""
    ln_v = math.log(vocab_size)
    per_seed = {}
    for s, d in nll_by_k.items():
        shallow = [v for k, v in d.items() if k <= K // 2]
        if not shallow or K not in d:
            raise ValueError(f"A3 needs NLL at some k <= K/2 and at K = {K} (seed {s} has {sorted(d)})")
        near = all(v >= ln_v - A3_NATS for v in shallow) and d[K] < ln_v - A3_NATS
        far = d[max(k for k in d if k <= K // 2)] < ln_v - A3_NATS
        per_seed[s] = "holds" if near else "contradicted" if far else "neither"
    v, basis = tally(per_seed, "per-seed point NLLs")
    return Judgement("A3", v, f"on the long phantom run, NLL({metric}) at every k <= K/2 is within {A3_NATS:g} nat of "
                     f"ln V = {ln_v:.3f} and NLL(K) is not, in every seed; not reproduced if NLL(K/2) < ln V - "
                     f"{A3_NATS:g} in every seed",
                     {"ln V": ln_v, **{f"s{s}": dict(d) for s, d in nll_by_k.items()}, "per seed": per_seed}, protocol,
                     basis, {"long phantom run": "seeds disagree" if "seeds disagree" in basis
                                     else ", ".join(sorted(set(per_seed.values())))})


def q5(last_minus_paper: PerSeed, paper_long_gap: PerSeed) -> Judgement:
    """Is the long-horizon penalty specific to the paper's loop-input phantom? yes: the paper phantom underfits
    (gap above 0 in every seed) and phantom-last is better than it (CI below 0 in every seed); no: phantom-last is
    worse in every seed (CI above 0) or the paper phantom is better than full backprop in every seed."""
    underfits, better = sign(list(paper_long_gap.values())), sign(list(last_minus_paper.values()))
    a = answer(underfits == "above 0" and better == "below 0", better == "above 0" or underfits == "below 0")
    return Judgement("Q5", a, "yes if phantom-last's long-run NLL is below the paper phantom's (CI below 0 in every "
                     "seed) while the paper phantom underfits full backprop (CI above 0 in every seed); no if "
                     "phantom-last is worse in every seed or the paper phantom beats full backprop in every seed",
                     {"phantom_last_minus_phantom": seed_evidence(last_minus_paper),
                      "phantom_minus_full": seed_evidence(paper_long_gap)}, "corrected",
                     _basis("per-seed 95% CIs", {"q5": last_minus_paper}, {"last - paper": better,
                                                                            "paper - full": underfits}),
                     {"phantom-last - phantom": better, "phantom - full": underfits})


# --- section 03: depth scaling -------------------------------------------------------------------------------------

def a1(gaps: Mapping[str, PerSeed], monotone: Mapping[str, Mapping[int, bool]], metric: str,
       protocol: str) -> Judgement:
    """Depth scaling: for every size the gap NLL(1) − NLL(K) has its CI above 0 in every seed and the sweep is
    non-increasing to K (0.01-nat tolerance) in every seed. Not reproduced if some size's gap lies below 0 in every
    seed or every seed's sweep of some size rises."""
    j = sign_claim("A1", gaps, "above 0", "", protocol)
    mono_all = all(all(m.values()) for m in monotone.values())
    rises = any(not any(m.values()) for m in monotone.values())
    v = verdict(j.verdict == "reproduced" and mono_all, j.verdict == "not reproduced" or rises)
    ev = {u: j.evidence[u] | {"monotone to K": {f"s{s}": bool(b) for s, b in monotone[u].items()}} for u in gaps}
    return Judgement("A1", v, f"NLL({metric}) gap k=1 minus k=K has 95% CI above 0 and the sweep is non-increasing to "
                     "K, for every size and seed (paper block form)", ev, protocol, j.basis, j.outcomes)


def a2(diffs: Mapping[int, PerSeed], gaps_small: PerSeed, gaps_large: PerSeed, metric: str, protocol: str,
       reported_ratio: float) -> Judgement:
    """"Strengthens with scale" as the paper measured it: the larger model is better at every k ≤ K (NLL(large) −
    NLL(small) has its CI below 0 at every k, in every seed). Beside it the ratio of depth gaps (large / small): the
    paper's own gaps give ``reported_ratio`` < 1, so "strengthens" there never meant a larger gap."""
    j = sign_claim("A2", {f"k={k}": d for k, d in diffs.items()}, "below 0", "", protocol)
    ratio = {f"s{s}": gaps_large[s].point / gaps_small[s].point for s in gaps_small}
    return Judgement("A2", j.verdict, f"NLL({metric}) of the large minus the small model has 95% CI below 0 at every "
                     "k <= K, in every seed (paper block form); the depth-gap ratio large/small is reported beside it",
                     j.evidence | {"depth gap ratio large/small": ratio, "reported ratio": reported_ratio},
                     protocol, j.basis, j.outcomes)


def q3(residual_gaps: Mapping[str, PerSeed], paper_gaps: Mapping[str, PerSeed]) -> Judgement:
    """Does the paper's block form drive A1? yes: residual-form models lose depth scaling (their gap is not above 0
    in every seed for some size) while paper-form ones keep it; no: residual-form models show it at every size."""
    res = {u: sign(list(ps.values())) for u, ps in residual_gaps.items()}
    pap = {u: sign(list(ps.values())) for u, ps in paper_gaps.items()}
    a = answer(any(o != "above 0" for o in res.values()) and all(o == "above 0" for o in pap.values()),
               all(o == "above 0" for o in res.values()))
    return Judgement("Q3", a, "yes if residual-form models lose depth scaling (masked gap CI not above 0 in every "
                     "seed, for some size) while paper-form ones keep it; no if residual-form models also show it",
                     {"residual": {u: seed_evidence(p) for u, p in residual_gaps.items()},
                      "paper": {u: seed_evidence(p) for u, p in paper_gaps.items()}}, "corrected",
                     _basis("per-seed 95% CIs", residual_gaps, res), {f"residual {u}": o for u, o in res.items()})


# --- section 04: exit and the trade-off law ------------------------------------------------------------------------

A4_SAVING = 0.05  # A4 judges a threshold only where its exit saves at least this share of the depth


def a4_judged(tau: float, avg_depth: Mapping[int, float], K: int) -> bool:
    """Whether A4 judges threshold ``tau``: τ > 0 and its exit's average depth, averaged over the seeds
    (``avg_depth``: seed -> that seed's average depth), saves at least ``A4_SAVING`` of K. Decided once per (size, τ)
    for all seeds together, so that a judged threshold carries every seed's estimate."""
    if not avg_depth:
        raise ValueError(f"a4_judged needs each seed's average depth for tau {tau}, got none")
    return tau > 0 and sum(avg_depth.values()) / len(avg_depth) <= (1 - A4_SAVING) * K


def a4(diffs: Mapping[str, PerSeed], penalty_share: float, reported_share: float, protocol: str,
       metric: str, fallback: str) -> Judgement:
    """Post-hoc exit fails: exit NLL − uniform NLL at the same average depth has its CI above 0 for every judged
    threshold (``a4_judged``: those saving ≥ 5% of the depth on average over seeds), in every seed.
    ``penalty_share``: the mean exit penalty as a share of the depth gap, beside the paper's (``reported_share``)."""
    if not diffs:
        return Judgement("A4", "inconclusive", "no threshold saved at least 5% of the depth", {}, protocol,
                         "nothing to judge")
    j = sign_claim("A4", diffs, "above 0", "", protocol)
    return Judgement("A4", j.verdict, f"exit NLL minus uniform-depth NLL at the same average depth has 95% CI above 0 "
                     f"for every tau > 0 with average depth <= 0.95 K, in every seed ({fallback} fallback, {metric} "
                     "NLL)", j.evidence | {"exit penalty / depth gap (mean)": penalty_share,
                                           "reported exit penalty / depth gap": reported_share,
                                           "ratio to the paper's": penalty_share / reported_share},
                     protocol, j.basis, j.outcomes)


def q2(a4_corrected: Judgement, a4_paper: Judgement) -> Judgement:
    return Judgement("Q2", {"reproduced": "yes", "not reproduced": "no"}.get(a4_corrected.verdict, "inconclusive"),
                     "A4's verdict under the corrected fallback (never-exited positions scored at full depth, masked "
                     "NLL)", {"A4_paper": a4_paper.verdict, "A4_corrected": a4_corrected.verdict}, "corrected",
                     a4_corrected.basis, seeds=tuple(evidence_seeds(a4_corrected.evidence)) or a4_corrected.seeds)


def a5(saturation: Mapping[str, Mapping[int, tuple[int, int]]]) -> Judgement:
    """Confident but wrong: on the single-depth models, mean max-prob reaches 95% of its k=1..K change at a shallower
    depth than NLL, in every seed and size (point estimates). Not reproduced if it never does."""
    flags = _units("A5", {f"{u}/s{s}": mp < nl for u, d in saturation.items() for s, (mp, nl) in d.items()},
                   "a (size, seed) saturation pair")
    v = verdict(all(flags.values()), not any(flags.values()))
    split = any(flags.values()) and not all(flags.values())
    return Judgement("A5", v, "on single-depth models, mean max-prob reaches 95% of its k=1..K change at a shallower "
                     "depth than NLL does, in every seed and size (point estimates; no CI)",
                     {f"{u}/s{s}": {"maxprob": mp, "nll": nl} for u, d in saturation.items()
                      for s, (mp, nl) in d.items()}, "corrected",
                     f"per-seed saturation depths, {_seeds(_n_seeds(saturation))}"
                     + ("; seeds disagree" if split else ""))


def a6_margin(single_gap: float) -> float:
    """The A6 margin; without a positive single-depth gap the relative margin is undefined and the absolute one
    (MARGIN_NATS) stands alone."""
    return margin_for(single_gap) if single_gap > 0 else MARGIN_NATS


def a7_margin(single_gap: float) -> float:
    """A7's margin: the larger of the two, since a claim that a difference *exceeds* the margin is harder to
    reproduce with a larger one (for A6 and A8, whose claims sit inside the margin, the smaller is the cautious one)."""
    return max(MARGIN_NATS, MARGIN_GAP_FRACTION * single_gap)


def _margins(single_gap: float, stated=a6_margin) -> dict[str, float]:
    """The stated margin (the cautious one for the claim) and each of the two alone: a verdict is given under each,
    so a reader sees whether the conclusion depends on the margin."""
    out = {"stated": stated(single_gap), f"absolute {MARGIN_NATS:g} nats": MARGIN_NATS}
    if single_gap > 0:
        out[f"relative {MARGIN_GAP_FRACTION:.0%} of the gap"] = MARGIN_GAP_FRACTION * single_gap
    return out


def _by_margin(units: Mapping[str, PerSeed], single_gaps: Mapping[str, float], test, good: str, bad: str,
               stated=a6_margin) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The verdict under the stated margin (and its per-unit outcomes), and the verdict under each margin alone.
    Reproduced when every unit's outcome is ``good``; not reproduced when some unit's is ``bad``."""
    names = list(_margins(min(single_gaps.values())))  # the relative margin only where every size has a gap
    per: dict[str, dict[str, str]] = {}
    verdicts_: dict[str, str] = {}
    for name in names:
        out = {u: test(list(ps.values()), _margins(single_gaps[u], stated)[name]) for u, ps in units.items()}
        per[name] = out
        verdicts_[name] = verdict(all(o == good for o in out.values()), any(o == bad for o in out.values()))
    return verdicts_["stated"], per["stated"], {"verdict by margin": verdicts_, "outcomes by margin": per}


def _alone(by: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}: {x}" for k, x in by["verdict by margin"].items() if k != "stated")


def a6(costs: Mapping[str, PerSeed], single_gaps: Mapping[str, float]) -> Judgement:
    """Free exit after multi-depth training, as an equivalence test: the exit cost NLL(1) − min_k NLL(k) of the
    multi-depth model lies inside ±margin in every seed (two one-sided tests at the CI's level), the margin being
    the stricter of MARGIN_NATS and MARGIN_GAP_FRACTION of the same size's single-depth gap. The verdict under each
    margin alone is reported beside it."""
    v, outcomes, by = _by_margin(costs, single_gaps, equivalence, "equivalent", "not equivalent")
    margins = {u: a6_margin(g) for u, g in single_gaps.items()}
    return Judgement("A6", v, f"multi-depth exit cost NLL(1) - min_k NLL(k) is equivalent to 0 within +/-margin in "
                     f"every seed (95% CI inside), margin = min({MARGIN_NATS} nats, {MARGIN_GAP_FRACTION:.0%} of the "
                     "single-depth k=1..K gap of the same size); verdict under each margin alone: " + _alone(by),
                     {u: seed_evidence(ps) | {"margin": margins[u], "outcome": outcomes[u]} for u, ps in costs.items()}
                     | by, "corrected", _basis("equivalence (TOST) per seed", costs, outcomes), outcomes)


def a7(shallow_minus_deep: Mapping[str, PerSeed], single_gaps: Mapping[str, float]) -> Judgement:
    """The law, across models: no model gets both free exit and depth scaling, so the multi-depth model exited at
    k = 1 is worse than the single-depth model at full depth. Per size, multi NLL(1) − single NLL(K) (paired over
    documents, same seed): reproduced when its CI lies wholly above +margin in every seed at every size (the free
    exit costs the quality depth buys); not reproduced when at some size its CI upper end is below +margin in every
    seed (a model exits at k = 1 as well as the deep model reads out at K: the law is broken). The margin is the
    larger of A6's two (cautious for a claim that a difference exceeds it). (Within one model the exit cost NLL(1) −
    min NLL is at least the depth gap NLL(1) − NLL(K) by definition, so a within-model test of the law could not fail;
    this one can — and the paper's own numbers, +0.041 and +0.047 nats, sit inside the 0.05-nat margin.)"""
    v, outcomes, by = _by_margin(shallow_minus_deep, single_gaps, noninferiority, "inferior", "non-inferior",
                                 a7_margin)
    margins = {u: a7_margin(g) for u, g in single_gaps.items()}
    return Judgement("A7", v, "multi-depth NLL at k=1 minus single-depth NLL at k=K (same seed, paired over "
                     f"documents) has its 95% CI above +margin in every seed at every size, margin = max({MARGIN_NATS} "
                     f"nats, {MARGIN_GAP_FRACTION:.0%} of the single-depth gap); broken if at some size its CI upper "
                     "end is below +margin in every seed; verdict under each margin alone: " + _alone(by),
                     {u: seed_evidence(ps) | {"margin": margins[u], "outcome": outcomes[u]}
                      for u, ps in shallow_minus_deep.items()} | by, "corrected",
                     _basis("non-inferiority per seed (the law holds when inferior)", shallow_minus_deep, outcomes),
                     outcomes)


def a8(diffs: Mapping[str, PerSeed], single_gaps: Mapping[str, float]) -> Judgement:
    """Multi-depth supervision does not lower the quality ceiling: best multi-depth NLL − best single-depth NLL is
    non-inferior at the A6 margin in every seed (CI upper end below +margin: the upper of the two one-sided tests;
    a multi-depth model that is *better* also satisfies "does not lower"). Not reproduced if some size's CI lies
    wholly above +margin in every seed. The verdict under each margin alone is reported beside it."""
    v, outcomes, by = _by_margin(diffs, single_gaps, noninferiority, "non-inferior", "inferior")
    margins = {u: a6_margin(g) for u, g in single_gaps.items()}
    return Judgement("A8", v, "best multi-depth NLL minus best single-depth NLL has its 95% CI upper end below +margin "
                     "in every seed (non-inferiority; margin as A6), masked NLL; verdict under each margin alone: "
                     + _alone(by),
                     {u: seed_evidence(ps) | {"margin": margins[u], "outcome": outcomes[u]} for u, ps in diffs.items()}
                     | by, "corrected", _basis("non-inferiority per seed", diffs, outcomes), outcomes)


# --- sections 05-08: benchmark, 2x2, loops, SFT --------------------------------------------------------------------

def a11(per_seed: Mapping[int, Mapping[str, Any]], protocol: str, where: str) -> Judgement:
    """Padding dominates and rankings reverse, per seed: pads carry > 50% of every pad-ignoring pre-trained model's
    with-pad NLL, Kendall τ(with pad, real) < 0.5, and SFT − PT flips sign between the metrics with both CIs
    excluding 0. Not reproduced in a seed if τ ≥ 0.5 or both differences exclude 0 with the same sign (a CI that
    straddles 0 is no evidence either way); seeds that split disagree."""
    res = {}
    for s, d in per_seed.items():
        wp, rl = d["sft_minus_pt_with_pad"], d["sft_minus_pt_real"]
        flip = (wp.hi < 0 < rl.lo) or (rl.hi < 0 < wp.lo)
        same = (wp.lo > 0 and rl.lo > 0) or (wp.hi < 0 and rl.hi < 0)  # both significant, the same sign: no flip
        res[s] = ("holds" if d["pad_share"] > 0.5 and d["tau"] < 0.5 and flip
                  else "contradicted" if d["tau"] >= 0.5 or same else "neither")
    v, basis = tally(res, "per-seed CIs and rankings")
    ev = {f"s{s}": {"pad_share_of_with_pad_nll": d["pad_share"], "pad_fraction": d.get("pad_fraction"),
                    "kendall_tau": d["tau"], "sft_minus_pt_with_pad": ci(d["sft_minus_pt_with_pad"]),
                    "sft_minus_pt_real": ci(d["sft_minus_pt_real"]), "outcome": res[s],
                    "with pad improves while real worsens": d["sft_minus_pt_with_pad"].hi < 0 < d[
                        "sft_minus_pt_real"].lo} for s, d in per_seed.items()}
    return Judgement("A11", v, f"{where}: pad targets carry > 50% of every pad-ignoring PT model's with-pad NLL, "
                     "Kendall tau(with pad, real) < 0.5, and SFT - PT flips sign between the metrics with both CIs "
                     "excluding 0, in every seed", ev, protocol, basis)


Q6_TAU = 0.5  # the two draws' real-token rankings "agree" at Kendall τ ≥ this (A11's own threshold for a reversal)


def _q6_seed(train_overlap: str, heldout: str, tau: float) -> str:
    """One seed's Q6 outcome: "changed" when the rankings disagree or A11 is decided one way on one draw and the other
    way on the other; "unchanged" when the rankings agree and A11's outcome is the same on both; "undetermined" when
    one draw decides A11 and the other does not ("neither": a CI that straddles 0 is no evidence of a change)."""
    if tau < Q6_TAU or {train_overlap, heldout} == {"holds", "contradicted"}:
        return "changed"
    return "unchanged" if train_overlap == heldout else "undetermined"


def q6(a11_by_draw: Mapping[int, tuple[str, str]], draw_tau: Mapping[int, float],
       unseen_minus_seen: Mapping[str, PerSeed]) -> Judgement:
    """Does evaluating on training sequences change the benchmark's conclusions? Per seed, the conclusions are A11's
    per-seed outcome and the real-token ranking of the cast. They change in a seed when A11's outcome on the
    train-overlap draws differs from its outcome on held-out draws, or when the two draws rank the models
    differently (Kendall τ between the draws' real-token NLLs below ``Q6_TAU``); they are unchanged when the rankings
    agree and A11's outcome is the same on both; a seed where one draw decides A11 and the other does not is
    undetermined. yes: changed in every seed; no: unchanged in every seed; otherwise inconclusive. The claim names
    A11–A14; A12–A14 are judged on held-out documents only (sections 06 and 08), so the conclusions this compares are
    A11's and the cast's real-token ranking — the ones section 05 computes on both draws.

    The level shift — within the train-overlap draw, real-token NLL of sequences a model did not see minus those it
    saw — is evidence beside the answer, pooled over models and seeds (how many estimates are positive, how many CIs
    exclude 0, their mean): seen sequences can score better without any conclusion moving, and a small per-seed
    shift inside its CI says little about whether the conclusions move. (A first version answered Q6 from that shift
    alone; it answered "are seen sequences scored better", not the question asked.)"""
    seeds_ = _units("Q6", dict(a11_by_draw), "seeds with A11 outcomes on both draws")
    if set(draw_tau) != set(seeds_):
        raise ValueError(f"Q6 needs a draw-vs-draw Kendall τ for each seed {sorted(seeds_)}, got {sorted(draw_tau)}")
    bad = {s: t for s, t in draw_tau.items() if not math.isfinite(t)}
    if bad:
        raise ValueError(f"Q6 needs a finite Kendall τ per seed (a ranking of all-tied values has none), got {bad}")
    per_seed = {s: _q6_seed(tr, ho, draw_tau[s]) for s, (tr, ho) in seeds_.items()}
    outs = set(per_seed.values())
    a = answer(outs == {"changed"}, outs == {"unchanged"})
    ests = [e for ps in unseen_minus_seen.values() for e in ps.values()]
    level = ({"estimates": len(ests), "positive": sum(e.point > 0 for e in ests),
              "CI above 0": sum(e.lo > 0 for e in ests), "CI below 0": sum(e.hi < 0 for e in ests),
              "mean": sum(e.point for e in ests) / len(ests)} if ests else
             "no model saw only part of the draw: nothing to compare")
    ev = {f"s{s}": {"A11 on train-overlap draws": tr, "A11 on held-out draws": ho,
                    "kendall tau, train-overlap vs held-out": draw_tau[s], "outcome": per_seed[s]}
          for s, (tr, ho) in seeds_.items()}
    ev["unseen - seen within the train-overlap draw (pooled)"] = level
    ev |= {u: seed_evidence(ps) for u, ps in unseen_minus_seen.items()}
    basis = (f"per-seed conclusions, {_seeds(len(seeds_))}" + ("; seeds disagree" if {"changed", "unchanged"} <= outs
                                                              else "")
             + ("; undetermined in some seeds (A11 decided on one draw only)" if "undetermined" in outs else ""))
    return Judgement("Q6", a, "per seed, the conclusions (A11's outcome, the cast's real-token ranking) change if the "
                     f"draws' real-token rankings have Kendall τ < {Q6_TAU} or A11 holds on one draw and is "
                     "contradicted on the other, and are unchanged if the rankings agree and A11's outcome is the same "
                     "on both: yes if changed in every seed, no if unchanged in every seed; the level shift unseen − "
                     "seen within the train-overlap draw is reported beside it (pooled)", ev, "both", basis,
                     {f"s{s}": o for s, o in per_seed.items()})


def a12(paper_costs: PerSeed, masked_costs: PerSeed, pt_nll: Mapping[int, float], reported_rel: float
        ) -> tuple[Judgement, Judgement]:
    """SFT costs real-token NLL: SFT − PT above 0 in every seed, under the paper's SFT loss (suffix, pad targets
    included) and under the corrected one (response tokens only); its size relative to the PT model's NLL beside the
    paper's (``reported_rel``: 0.4 / 2.51). The corrected row states what the pair implies about the paper's
    attribution of the cost to SFT."""
    out = []
    rows = (("paper", "SFT on the paper's loss (suffix, pad targets)", paper_costs),
            ("corrected", "SFT on response tokens only", masked_costs))
    signs = {p: sign(list(c.values())) for p, _, c in rows}
    if signs["paper"] == "above 0" and signs["corrected"] == "above 0":
        implication = ("SFT costs real-token NLL without pad targets too: the paper's attribution of the cost to SFT "
                       "itself survives the correction.")
    elif signs["paper"] == "above 0" and signs["corrected"] == "below 0":
        implication = ("Without pad targets SFT lowers real-token NLL here: the paper's cost is attributable to "
                       "training on pad targets, not to SFT as such.")
    elif signs["paper"] == "above 0":
        implication = ("Without pad targets SFT's cost is within noise here: the paper's cost may come from training "
                       "on pad targets rather than from SFT as such, but this does not settle it.")
    elif signs["corrected"] == "above 0":
        implication = ("Response-only SFT costs real-token NLL while the paper's SFT does not measurably: the cost is "
                       "not a pad-target effect here.")
    else:
        implication = "Neither SFT measurably costs real-token NLL here, so there is no cost to attribute."
    for protocol, name, costs in rows:
        j = sign_claim("A12", {name: costs}, "above 0", "", protocol)
        rel = sum(e.point / pt_nll[s] for s, e in costs.items()) / len(costs)
        out.append(Judgement("A12", j.verdict, f"{name}: real-token NLL on the held-out suffix benchmark minus the PT "
                             "model's, 95% CI above 0 in every seed" + (f". {implication}" if protocol == "corrected"
                                                                        else ""),
                             j.evidence | {"cost / PT NLL (mean)": rel, "reported cost / PT NLL": reported_rel,
                                           "ratio to the paper's": rel / reported_rel}
                             | ({"implication": implication} if protocol == "corrected" else {}), protocol, j.basis,
                             j.outcomes))
    return out[0], out[1]


def a13(gap: PerSeed, vanilla_nll: Mapping[int, float], reported_rel: float) -> Judgement:
    """Tied beats the iso-parameter vanilla model: tied − vanilla below 0 in every seed; its size relative to the
    vanilla NLL beside the paper's (−0.028 / 2.536)."""
    j = sign_claim("A13", {"tied - vanilla": gap}, "below 0", "")
    rel = sum(e.point / vanilla_nll[s] for s, e in gap.items()) / len(gap)
    return Judgement("A13", j.verdict, "tied(v10) - vanilla(v9) real-token NLL on the held-out suffix benchmark: 95% "
                     "CI below 0 in every seed", j.evidence | {
                         "gap / vanilla NLL (mean)": rel, "reported gap / vanilla NLL": reported_rel,
                         "ratio to the paper's": rel / reported_rel}, "corrected", j.basis, j.outcomes)


def a14(gaps: Mapping[str, PerSeed]) -> Judgement:
    """...and after SFT, on both metrics the paper names (real-token and with-pad suffix NLL): tied − vanilla below
    0 in every seed on each."""
    j = sign_claim("A14", gaps, "below 0", "")
    return Judgement("A14", j.verdict, "after SFT (paper protocol) of both models, tied - vanilla has its 95% CI "
                     f"below 0 in every seed on every metric ({', '.join(gaps)})", j.evidence, "corrected", j.basis,
                     j.outcomes)


def q4(gaps: Mapping[str, PerSeed], name: str) -> Judgement:
    """Do the gaps exceed their CIs across seeds? yes: one sign with CIs excluding 0 in every seed; no: within
    noise; seeds that disagree are answered inconclusive and named."""
    outcomes = {u: sign(list(ps.values())) for u, ps in gaps.items()}
    main = outcomes[name]
    return Judgement("Q4", answer(main in OPPOSITE, main == "within noise"),
                     f"the {name} gap has one sign with CIs excluding 0 in every seed (yes), or is within noise (no); "
                     "seeds that disagree are inconclusive", {u: seed_evidence(ps) for u, ps in gaps.items()},
                     "corrected", _basis("per-seed 95% CIs", gaps, outcomes), outcomes)


def a15(gaps: Mapping[str, PerSeed]) -> Judgement:
    """Loop diversity helps up to three loops, then regresses: 3 − 1 and 3 − 2 loops below 0 and 4 − 3 loops above
    0, in every seed. Not reproduced if 3 − 1 is above 0 or 4 − 3 below 0 in every seed."""
    want = {"3 loops - 1 loop": "below 0", "3 loops - 2 loops": "below 0", "4 loops - 3 loops": "above 0"}
    outcomes = {u: sign(list(gaps[u].values())) for u in want}
    v = verdict(all(outcomes[u] == w for u, w in want.items()),
                outcomes["3 loops - 1 loop"] == "above 0" or outcomes["4 loops - 3 loops"] == "below 0")
    return Judgement("A15", v, "every seed: v13 - v10 and v13 - v12 CIs below 0 and v14 - v13 CI above 0 (real-token "
                     "suffix NLL)", {u: seed_evidence(ps) for u, ps in gaps.items()}, "corrected",
                     _basis("per-seed 95% CIs, every seed must agree", gaps, outcomes), outcomes)


def a16(final_alpha: Mapping[str, Mapping[int, Mapping[str, float]]]) -> Judgement:
    """α differentiates by loop and the loop with the fewest iterations inflates its α: in every seed and
    multi-loop layout the last loop has the largest final α."""
    flags = _units("A16", {f"{u}/s{s}": max(a, key=a.get) == list(a)[-1] for u, d in final_alpha.items()
                           for s, a in d.items() if len(a) > 1}, "a multi-loop layout's final α per loop")
    split = any(flags.values()) and not all(flags.values())
    return Judgement("A16", verdict(all(flags.values()), not any(flags.values())),
                     "in every seed and multi-loop layout the last loop has the largest final alpha",
                     {f"{u}/s{s}": dict(a) for u, d in final_alpha.items() for s, a in d.items() if len(a) > 1},
                     "corrected", f"per-seed point values, {_seeds(_n_seeds(final_alpha))}" +
                     ("; seeds disagree" if split else ""))


def a17(gaps: Mapping[str, PerSeed]) -> Judgement:
    j = sign_claim("A17", gaps, "below 0", "")
    return Judgement("A17", j.verdict, "after SFT (paper protocol): v13 - v10 and v13 - v9 real-token suffix NLL, CIs "
                     "below 0 in every seed", j.evidence, "corrected", j.basis, j.outcomes)


def a20(pad_rates: Mapping[int, Mapping[str, float]], protocol: str, where: str) -> Judgement:
    """Pre-trained-only models never emit pad and generate better than SFT models. The first half is measurable:
    not reproduced if the PT model emits pad or the SFT model never does, in some seed. The second half needs a
    quality measure of generations that means something on this corpus at this scale; distinct-n measures
    diversity, not quality, so "generates better" is not judged and the verdict is at best inconclusive."""
    bad = {f"s{s}": d["PT"] > 0 or d["SFT"] == 0 for s, d in pad_rates.items()}
    v = "not reproduced" if any(bad.values()) else "inconclusive"
    return Judgement("A20", v, f"{where}: not reproduced if the PT model emits pad or the SFT model never does; "
                     "otherwise inconclusive at this scale (no generation-quality measure that means something on "
                     "this corpus; distinct-n is diversity, not quality)",
                     {f"s{s}": dict(d) for s, d in pad_rates.items()}, protocol,
                     f"per-seed pad rates over prompts, {_seeds(len(pad_rates))}")


# --- section 09: negative results ----------------------------------------------------------------------------------

def a18(last_over_first: Mapping[str, Mapping[int, float]], protocol: str, where: str) -> Judgement:
    """No fixed point: the relative residual at the last iterated depth is ≥ 0.5 × its value at iteration 1 in every
    seed and size; not reproduced if < 0.1 × in every seed of some size."""
    flags = {u: {s: (r >= 0.5, r < 0.1) for s, r in d.items()} for u, d in last_over_first.items()}
    holds = all(h for d in flags.values() for h, _ in d.values())
    contra = any(all(c for _, c in d.values()) for d in flags.values())
    return Judgement("A18", verdict(holds, contra), f"{where}: relative residual at the last iteration >= 0.5 x "
                     "its value at iteration 1 in every seed and size (no decay toward a fixed point); not "
                     "reproduced if < 0.1 x in every seed of some size", {u: {f"s{s}": r for s, r in d.items()}
                                                    for u, d in last_over_first.items()}, protocol,
                     f"per-seed point ratios, {_seeds(_n_seeds(last_over_first))}")


def a19(r: Mapping[str, PerSeed], protocol: str, where: str, small: str, large: str) -> Judgement:
    """A weak probe, stronger at the larger size: every seed's r has its CI inside (0, 0.5) at both sizes, and the
    larger size's r exceeds the smaller's — per seed the difference large − small with a conservative CI (large.lo −
    small.hi, large.hi − small.lo); over several seeds the t-interval of the per-seed differences must lie above 0,
    with one seed that seed's conservative CI. Not reproduced if at some size every seed's CI lies above 0.5 (not
    weak) or at/below 0 (no probe); seeds that split are inconclusive."""
    weak = all(0 < e.lo and e.hi < 0.5 for ps in r.values() for e in ps.values())
    contra = any(all(e.lo > 0.5 for e in ps.values()) or all(e.hi <= 0 for e in ps.values()) for ps in r.values())
    # (the size ordering is judged below: stronger needs the interval above 0 and no seed's CI below it)
    diffs = {sd: Estimate(r[large][sd].point - r[small][sd].point, r[large][sd].lo - r[small][sd].hi,
                          r[large][sd].hi - r[small][sd].lo) for sd in r[large] if sd in r[small]}
    if not diffs:
        raise ValueError(f"A19 needs the same seeds at both sizes ({small}, {large})")
    if len(diffs) > 1:
        sp = spread(list(diffs.values()))
        diff_lo, diff_hi = sp.lo, sp.hi
    else:
        diff_lo, diff_hi = next(iter(diffs.values())).lo, next(iter(diffs.values())).hi
    stronger = diff_lo > 0 and not any(e.hi < 0 for e in diffs.values())
    weaker = diff_hi < 0 and not any(e.lo > 0 for e in diffs.values())
    return Judgement("A19", verdict(weak and stronger, contra or weaker), f"{where}: 95% CI of r inside (0, 0.5) at "
                     f"both sizes in every seed, and r({large}) - r({small}) above 0 (t-interval over seeds of the "
                     "per-seed differences, no seed's conservative CI below 0; one seed: its conservative CI); not "
                     "reproduced if at some size every seed's CI is above 0.5 or at/below 0, or if the larger size is "
                     "weaker by the same rule",
                     {u: seed_evidence(ps) for u, ps in r.items()}
                     | {f"r({large}) - r({small})": seed_evidence(diffs) | {"interval": [diff_lo, diff_hi]},
                        "larger size stronger": stronger, "weak at both sizes": weak}, protocol,
                     f"per-seed 95% CIs, {_seeds(_n_seeds(r))}; the size difference over seeds")


# --- section 10: the Depth Control Protocol ------------------------------------------------------------------------

SHARE_THRESHOLD = 0.2  # "a substantial part of the gap is correctable at the readout": a fifth or more
TERM_FRACTION = 0.05  # a term "is not the whole gap" when total − term exceeds this fraction of the total


def _nonzero(ps: PerSeed) -> str:
    return sign(list(ps.values()))


def b1(app: Mapping[str, PerSeed], cal: Mapping[str, PerSeed], total: Mapping[str, PerSeed]) -> Judgement:
    """The slope conflates application count and readout calibration (an **extension**: the application-count term
    uses this project's frozen(1) control): on every single-depth model both terms have CIs above 0 in every
    seed and neither is the whole gap (each below (1 − TERM_FRACTION) × the total in every seed). Not reproduced
    if, on some model, one of them carries the whole gap in every seed (the slope is that one factor)."""
    out, holds, contra = {}, True, False
    for m in app:
        sa, sc = _nonzero(app[m]), _nonzero(cal[m])
        whole = {t: [ps[s].point >= (1 - TERM_FRACTION) * total[m][s].point for s in ps]
                 for t, ps in (("application count", app[m]), ("calibration", cal[m]))}
        out |= {f"{m} application count": sa, f"{m} calibration": sc}
        holds &= sa == "above 0" and sc == "above 0" and not any(any(w) for w in whole.values())
        contra |= any(all(w) for w in whole.values())
    ev = {m: {"application count": seed_evidence(app[m]), "calibration (head/diagonal)": seed_evidence(cal[m]),
              "total": seed_evidence(total[m]),
              "application count carries the whole gap": all(
                  app[m][s].point >= (1 - TERM_FRACTION) * total[m][s].point for s in app[m])} for m in app}
    return Judgement("B1", verdict(holds, contra), "extension (frozen control): on every single-depth model the "
                     "application-count term prefix(1) - frozen(1) and the head/diagonal calibration term both have "
                     f"CIs above 0 in every seed, and neither exceeds {1 - TERM_FRACTION:.0%} of the total",
                     ev, "extension", _basis("per-seed 95% CIs", app, out), out)


def b2(looped: Mapping[str, PerSeed], dense: PerSeed, control: str = "frozen") -> Judgement:
    """Full application count with one distinct iteration is realisable only with weight sharing: on the looped
    models ``control``(1) beats prefix(1) (prefix(1) − control(1) above 0 in every seed), while on the dense model
    repeat(1) — layer 0 applied N times — is worse than prefix(1) (prefix(1) − repeat(1) below 0 in every seed).
    ``control="frozen"`` (single-loop models, where paper B's repeat(1) is the full model) is an **extension**;
    ``control="repeat"`` (a multi-loop layout, where repeat(1) re-applies the first loop's block) is paper B's own
    control: protocol "paper"."""
    if control not in ("frozen", "repeat"):
        raise ValueError(f"control must be 'frozen' or 'repeat', got {control!r}")
    out = {m: _nonzero(ps) for m, ps in looped.items()} | {"dense prefix(1) - repeat(1)": _nonzero(dense)}
    holds = all(out[m] == "above 0" for m in looped) and out["dense prefix(1) - repeat(1)"] == "below 0"
    contra = any(out[m] == "below 0" for m in looped) or out["dense prefix(1) - repeat(1)"] == "above 0"
    ext = control == "frozen"
    return Judgement("B2", verdict(holds, contra), f"{'extension (frozen control): ' if ext else ''}looped models "
                     f"({', '.join(looped)}): prefix(1) - {control}(1) above 0 in every seed; dense model: "
                     "prefix(1) - repeat(1) below 0 in every seed",
                     {m: seed_evidence(ps) for m, ps in looped.items()} | {"dense": seed_evidence(dense)},
                     "extension" if ext else "paper", _basis("per-seed 95% CIs", looped, out), out)


def share_answer(per_model: Mapping[str, PerSeed], threshold: float = SHARE_THRESHOLD) -> str:
    """"yes" when every model's share has its CI lower end at or above ``threshold`` in every seed, "no" when every
    CI upper end is below it, "seeds disagree" when seeds of one model fall on both sides, else "inconclusive"."""
    ests = [e for ps in per_model.values() for e in ps.values()]
    if all(e.lo >= threshold for e in ests):
        return "yes"
    if all(e.hi < threshold for e in ests):
        return "no"
    for ps in per_model.values():
        if any(e.lo >= threshold for e in ps.values()) and any(e.hi < threshold for e in ps.values()):
            return "seeds disagree"
    return "inconclusive"


HEADLINE_PROBE = "loop/tuned"
"""The probe Q1's and B3's corrected answers come from: the tuned-lens translator (the literature's standard probe of
what a truncated state can read out) at the loop's output, so that everything trained on full-depth states — the layers
after the loop, the final norm and the head — is downstream of the map. Named before the three-seed cpu run, but after
a one-seed first look at the probe family (benchmarks/results/probe_family_v3_cpu.csv, v3 seed 0) in which it had the
largest share: not a blind choice, so every other probe's answer is reported beside it."""


def q1(shares: Mapping[str, Mapping[str, PerSeed]], paper_probe: str = "head/diagonal",
       headline: str = HEADLINE_PROBE, uncentred: Mapping[str, Mapping[str, PerSeed]] | None = None) -> Judgement:
    """How much of the single-depth gap is correctable at the readout, per probe (placement/form): *yes* (≥ a fifth)
    when the probe's share CI lower end is ≥ SHARE_THRESHOLD on every single-depth model and seed, *no* when every
    CI upper end is below it. The ledger's answer is the pre-named ``headline`` probe's, and the criterion names it
    beside paper B's probe and every other probe's answer. ``uncentred``: the same shares with the raw refits'
    intervals (``lens.calibration_share``'s other interval); each probe's answer under them is recorded beside, and
    the criterion names every probe whose answer depends on the centring."""
    if headline not in shares:
        raise ValueError(f"Q1 is answered by the pre-named probe {headline!r}, which was not fitted (got "
                         f"{sorted(shares)})")
    if uncentred is not None and set(uncentred) != set(shares):
        raise ValueError(f"uncentred intervals must cover the same probes: got {sorted(uncentred)} for "
                         f"{sorted(shares)}")
    per_probe = {p: share_answer(m) for p, m in shares.items()}
    raw_answers = {p: share_answer(m) for p, m in (uncentred or {}).items()}
    a = {"seeds disagree": "inconclusive"}.get(per_probe[headline], per_probe[headline])
    others = "; ".join(f"{p}: {v}" for p, v in per_probe.items())
    moved = [f"{p} ({per_probe[p]} centred, {v} uncentred)" for p, v in raw_answers.items() if v != per_probe[p]]
    centring = ("" if uncentred is None else " With the uncentred refit intervals " + (
        f"the answer changes for {', '.join(moved)}" if moved else "no probe's answer changes") + ".")
    return Judgement("Q1", a, f"share of the single-depth k=1..N gap recovered by a readout probe, >= "
                     f"{SHARE_THRESHOLD:g} (CI lower end, every model and seed) for yes, < {SHARE_THRESHOLD:g} "
                     f"(CI upper end) for no. Answer from probe {headline} (named before the three-seed run, after a "
                     f"one-seed first look); paper B's {paper_probe}: {per_probe.get(paper_probe, 'not fitted')}. "
                     f"Per probe: {others}.{centring}",
                     {p: {m: seed_evidence(ps) for m, ps in models.items()} | {"answer": per_probe[p]}
                      | ({"answer with uncentred intervals": raw_answers[p]} if p in raw_answers else {})
                      for p, models in shares.items()} | {"headline probe": headline, "threshold": SHARE_THRESHOLD},
                     "corrected",
                     _basis("per-seed 95% CIs including refits", shares[headline], per_probe), per_probe)


def b3(shares: Mapping[str, PerSeed], dense: PerSeed, diffs: Mapping[str, PerSeed], probe: str, protocol: str,
       dense_gap: str = "prefix(L-1) - prefix(L)") -> Judgement:
    """Little of a recurrent model's gap is correctable at the readout, unlike dense models: with ``probe``, every
    looped single-depth share has its CI upper end below SHARE_THRESHOLD and lies below the dense model's share
    **of the same seed** (``dense``: the same probe on the gap ``dense_gap``), in every seed. "Below" is judged on
    the paired difference ``diffs`` (looped share − dense share, one bootstrap resample of the shared evaluation
    documents): its CI upper end below 0. Not reproduced if, on some looped model in every seed, the share's CI
    lower end is ≥ SHARE_THRESHOLD (a substantial correctable part) or the paired difference's CI lower end is
    above 0 (more correctable than the dense model, not less).

    Which dense gap is the comparison is a choice: paper B set the recurrent k = 1..N share beside the dense
    near-full truncation L−1 → L; a matched comparison truncates the dense model as far, 1 → L."""
    missing = {s for ps in shares.values() for s in ps} - set(dense)
    if missing:
        raise ValueError(f"B3 pairs seeds: the dense model has no share for seed(s) {sorted(missing)}")
    if set(diffs) != set(shares) or any(set(diffs[m]) != set(shares[m]) for m in shares):
        raise ValueError("B3 needs a paired looped - dense difference for every looped model and seed it judges")
    per = {m: {s: ("holds" if e.hi < SHARE_THRESHOLD and diffs[m][s].hi < 0 else
                   "contradicted" if e.lo >= SHARE_THRESHOLD or diffs[m][s].lo > 0 else "neither")
               for s, e in ps.items()} for m, ps in shares.items()}
    holds = all(o == "holds" for ps in per.values() for o in ps.values())
    contra = any(all(o == "contradicted" for o in ps.values()) for ps in per.values())
    outcomes = {m: tally(ps, "")[0] for m, ps in per.items()}
    below = sum(diffs[m][s].hi < 0 for m in diffs for s in diffs[m])
    return Judgement("B3", verdict(holds, contra), f"probe {probe}: every looped single-depth calibration share has "
                     f"its CI upper end < {SHARE_THRESHOLD:g} and lies below the same seed's dense share (dense: the "
                     f"same probe, gap {dense_gap}; paired looped - dense difference, CI upper end < 0), in every "
                     f"seed; not reproduced if on some looped model in every seed the share's CI lower end is >= "
                     f"{SHARE_THRESHOLD:g} or the paired difference's CI lower end is > 0",
                     {m: seed_evidence(ps) | {"looped - dense (paired)": seed_evidence(diffs[m]),
                                              "per seed": {f"s{sd}": o for sd, o in per[m].items()}}
                      for m, ps in shares.items()}
                     | {"dense": seed_evidence(dense), "dense gap": dense_gap, "probe": probe,
                        "threshold": SHARE_THRESHOLD,
                        "looped below dense (paired CI < 0)": f"{below} of {sum(len(d) for d in diffs.values())}"},
                     protocol, _basis("per-seed 95% CIs including refits, seeds and documents paired with the dense "
                                      "model's", shares, outcomes), outcomes)


def b4(dense_share: PerSeed, k_min: int, k_max: int) -> Judgement:
    """Paper B's negative control: the same schedules and recalibration on a dense (non-shared) model find a
    substantial readout-correctable share (paper B: 47–75% affine), so a small share in a looped model is not an
    artefact of the protocol. Reproduced if the dense model's head/diagonal share of prefix(k_min) − prefix(k_max)
    has its CI lower end ≥ SHARE_THRESHOLD in every seed; not reproduced if its CI upper end is below it in every
    seed. Paper B's probe and gap: protocol "paper"."""
    ans = share_answer({"dense": dense_share})
    return Judgement("B4", verdict(ans == "yes", ans == "no"), f"negative control: the dense model's head/diagonal "
                     f"calibration share of prefix({k_min}) - prefix({k_max}) has its CI lower end >= "
                     f"{SHARE_THRESHOLD:g} in every seed (the protocol detects readout miscalibration where paper B "
                     "found it); not reproduced if its CI upper end is below it in every seed",
                     {"dense": seed_evidence(dense_share), "threshold": SHARE_THRESHOLD}, "paper",
                     _basis("per-seed 95% CIs including refits", {"dense": dense_share}, {"dense": ans}),
                     {"dense": ans})


def b5(fixed: PerSeed, sampled: PerSeed, t_fixed: Mapping[int, float], t_sampled: Mapping[int, float]) -> Judgement:
    """Sampled-depth training collapses the calibration share: per seed the sampled arm's share has its CI upper end
    below the fixed arm's CI lower end and its fitted T at k = 1 is closer to 1. Not reproduced if the sampled arm's
    share CI lies above the fixed arm's in every seed."""
    per = {s: ("holds" if sampled[s].hi < fixed[s].lo and abs(t_sampled[s] - 1) < abs(t_fixed[s] - 1)
               else "contradicted" if sampled[s].lo > fixed[s].hi else "neither") for s in fixed}
    v, basis = tally(per, "per-seed 95% CIs")
    return Judgement("B5", v,
                     "sampled arm: head/diagonal calibration share below the fixed arm's (CIs disjoint) and T at k=1 "
                     "closer to 1, in every seed",
                     {f"s{s}": {"fixed": ci(fixed[s]), "sampled": ci(sampled[s]), "T_k1 fixed": t_fixed[s],
                                "T_k1 sampled": t_sampled[s], "outcome": per[s]} for s in fixed}, "paper", basis)


def b6(terms: Mapping[str, Mapping[str, PerSeed]]) -> Judgement:
    """The decomposition separates factors (an **extension**: control frozen). The three schedule terms
    (application count, distinct depth, block composition) telescope to the total by construction — checked, an
    error if not, never judged. The calibration term measures the same gap from another side (what a probe removes)
    and overlaps the schedule terms, so it is reported beside them and does not count. The claim that can fail, and
    that B1 does not imply (B1 concerns the application count alone): on every single-depth model at least two of
    the three schedule terms have CIs excluding 0 on the same side in every seed and none carries the whole gap
    (each below (1 − TERM_FRACTION) × the total in every seed). Not reproduced if on some model one schedule term
    carries the whole gap in every seed."""
    names = ("application count", "distinct depth", "block composition")
    out, holds, contra = {}, True, False
    for m, t in terms.items():
        nz = [n for n in names if _nonzero(t[n]) in ("above 0", "below 0")]
        whole = [n for n in names if all(t[n][s].point >= (1 - TERM_FRACTION) * t["total"][s].point
                                         for s in t["total"])]
        some_whole = [n for n in names if any(t[n][s].point >= (1 - TERM_FRACTION) * t["total"][s].point
                                              for s in t["total"])]
        for s in t["total"]:
            tele = sum(t[n][s].point for n in names)
            if abs(tele - t["total"][s].point) > 1e-9 * max(1.0, abs(t["total"][s].point)):
                raise ValueError(f"{m} seed {s}: the schedule terms do not telescope to the total ({tele} vs "
                                 f"{t['total'][s].point}): the decomposition is computed wrongly")
        out[m] = f"{len(nz)} of 3 schedule terms nonzero" + (f"; {whole[0]} carries the gap" if whole else "")
        holds &= len(nz) >= 2 and not some_whole
        contra |= bool(whole)
    shown = (*names, *(["calibration"] if all("calibration" in t for t in terms.values()) else []), "total")
    return Judgement("B6", verdict(holds, contra), "extension (frozen control): on every single-depth model at least "
                     "two of the three schedule terms (application count, distinct depth, block composition) have CIs "
                     f"excluding 0 on the same side in every seed and none reaches {1 - TERM_FRACTION:.0%} of the "
                     "total in any seed (they telescope to the total by construction: checked, not judged; the "
                     "calibration term overlaps them and is shown beside, not counted)",
                     {m: {n: seed_evidence(t[n]) for n in shown} for m, t in terms.items()}, "extension",
                     f"per-seed 95% CIs, {_seeds(_n_seeds(next(iter(terms.values()))))}", out)


# --- section 12: depth at inference --------------------------------------------------------------------------------

SPEEDUP_TARGET = 1.5  # "buys wall-clock speed": at least 1.5x the greedy tokens/s of plain cached decoding
DEPTH_SAVING = 0.1  # "saves depth": the guaranteed exit's average depth at most (1 - 0.1) x K


def q7(speedups: Mapping[str, PerSeed], target: float = SPEEDUP_TARGET) -> Judgement:
    """Does self-speculative decoding buy ≥ ``target``× greedy tokens/s at identical outputs (the benchmark refuses
    to time an output that differs)? ``speedups`` maps a configuration (draft depth, length) to each seed's speed-up
    with its CI over prompts. The configuration is *selected* on the first seed (best point) and *confirmed* on the
    others: yes if its CI lower end is ≥ target in every other seed (one seed: in that seed, selection unconfirmed);
    no if every configuration's CI upper end is below target in every seed; otherwise inconclusive."""
    if not speedups:
        raise ValueError("Q7 needs at least one configuration's speed-ups")
    first = next(iter(next(iter(speedups.values()))))  # the first seed as the caller lists them
    best = max(speedups, key=lambda c: speedups[c][first].point)
    others = {s: e for s, e in speedups[best].items() if s != first} or {first: speedups[best][first]}
    yes = all(e.lo >= target for e in others.values())
    no = all(e.hi < target for ps in speedups.values() for e in ps.values())
    n = len(speedups[best])
    return Judgement("Q7", answer(yes, no), f"greedy tokens/s of self-speculative decoding over plain cached decoding "
                     f"at full depth (identical outputs checked): the configuration best on seed {first} ({best}) has "
                     f"its CI lower end >= {target:g} in every other seed (yes); every configuration's CI upper end < "
                     f"{target:g} in every seed (no)",
                     {c: seed_evidence(ps) for c, ps in speedups.items()} | {"selected": best, "threshold": target},
                     "corrected", f"per-seed CIs over prompts, {_seeds(n)}" + (
                         "; selected and judged on the same seed" if n == 1 else f"; selected on seed {first}"))


def q8(avg_depth: Mapping[int, float], K: int, eps: float, delta: float, model: str) -> Judgement:
    """Does an exit with a guarantee save depth? ``avg_depth``: per seed, the guaranteed exit's average depth on
    unseen documents, averaged over calibration splits (a split whose ε cannot be certified runs at full depth K).
    yes if it is ≤ (1 − DEPTH_SAVING)·K in every seed, no if above it in every seed, else inconclusive."""
    bound = (1 - DEPTH_SAVING) * K
    outs = _units("Q8", {s: d <= bound for s, d in avg_depth.items()}, "a seed's average depth")
    return Judgement("Q8", answer(all(outs.values()), not any(outs.values())), f"{model}: the Learn-then-Test exit "
                     f"(eps {eps:g}, delta {delta:g}) averages at most {bound:g} of {K} depths on unseen documents in "
                     "every seed (yes), above it in every seed (no)",
                     {f"s{s}": {"average depth": d, "saves depth": outs[s]} for s, d in avg_depth.items()}
                     | {"bound": bound}, "corrected",
                     f"per-seed means over calibration splits, {_seeds(len(avg_depth))}"
                     + ("; seeds disagree" if len(set(outs.values())) > 1 else ""))


def q9(violations: Mapping[str, tuple[int, int]], delta: float, alpha: float = 0.01) -> Judgement:
    """Does the guarantee hold? Per unit (model, seed, rule, ε): (splits whose test-half disagreement exceeded ε,
    splits). The guarantee bounds the long-run rate, so a test half may exceed ε by chance; if it holds, about δ or
    fewer of the splits do. yes if every unit's frequency is ≤ δ; no if some unit's count is significantly above δ
    (one-sided binomial test at ``alpha`` / number of units, Bonferroni; the splits reuse one pool of documents, so
    they are dependent and this is a check, not a test of exact level); otherwise inconclusive."""
    if not violations:
        raise ValueError("Q9 needs at least one unit's violation count")

    def p_above(k: int, n: int) -> float:  # P(X >= k) for X ~ Binomial(n, delta)
        return float(sum(math.comb(n, i) * delta ** i * (1 - delta) ** (n - i) for i in range(k, n + 1)))

    freq = {u: k / n for u, (k, n) in violations.items()}
    sig = {u: p_above(k, n) < alpha / len(violations) for u, (k, n) in violations.items()}
    return Judgement("Q9", answer(all(f <= delta for f in freq.values()), any(sig.values())),
                     f"the share of calibration splits whose guaranteed exit disagrees with full depth on more than "
                     f"eps of the unseen documents' tokens is <= delta = {delta:g} for every model, seed, rule and eps "
                     f"(yes); some unit significantly above delta (binomial, p < {alpha:g} / units) (no); the splits "
                     "share one pool (dependent)",
                     {u: {"violations": k, "splits": n, "frequency": freq[u], "significantly above delta": sig[u]}
                      for u, (k, n) in violations.items()}, "corrected",
                     f"violation counts over calibration splits, {len(violations)} units")


# Outcomes a claim's function cannot return, with the reason (tests/test_verdicts.py checks every other outcome is
# reached and these never are).
UNREACHABLE: dict[str, dict[str, str]] = {
    "A20": {"reproduced": "its second half (SFT generates better) has no quality measure at this scale, so the verdict "
                          "is at best inconclusive"},
}


def judgement_names() -> Sequence[str]:
    return [n for n in globals() if n[:1] in "abq" and n[1:].isdigit()]
