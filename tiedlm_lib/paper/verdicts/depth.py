"""Sections 03 and 04, depth scaling, exit and the trade-off law: A1 (depth scaling), A2 (the larger model is better
at every depth and scales more), Q3 (does the block form drive A1), A4 (post-hoc exit fails), Q2 (A4 under the
corrected fallback), A5 (confident but wrong), A6 (free exit after multi-depth training), A7 (the trade-off law) and
A8 (the ceiling is not lowered)."""

from __future__ import annotations

from collections.abc import Mapping

from tiedlm_lib.paper.claimbook import claim
from tiedlm_lib.paper.claims import answer, evidence_seeds, verdict
from tiedlm_lib.paper.judging import (
    Judgement,
    Parts,
    PerSeed,
    _basis,
    judge,
    nonempty,
    quantised,
    ratio,
    render,
    rule,
    sesoi,
    unit_evidence,
)
from tiedlm_lib.stats import inference as inf


def a1(gaps: Mapping[str, PerSeed], max_rise: Mapping[str, PerSeed], metric: str, protocol: str) -> Judgement:
    """Depth scaling per size: the gap NLL(1) − NLL(K) pooled above 0 (not reproduced inside ±0.05 or below 0), and
    the sweep non-increasing to K: each seed's largest rise between consecutive swept depths non-inferior at
    0.01 nats."""
    return judge(claim("A1"), Parts("A1").add("depth scaling", gaps).add("monotone", max_rise), protocol=protocol,
                 metric=metric)


def a2(diffs: Mapping[int, PerSeed], gaps_small: PerSeed, gaps_large: PerSeed, metric: str, protocol: str,
       reported_ratio: float) -> Judgement:
    """Two halves: the larger model is better at every swept k ≤ K (NLL(large) − NLL(small) pooled below 0, SESOI
    0.02, intersection–union over k), and depth scaling strengthens: the depth-gap ratio large/small of the same seed
    pooled above 1 (not reproduced inside 1 ± 0.1 or below; the paper's own ratio, ``reported_ratio``, is 0.74). With
    the ratio undefined (a small-model gap not positive) the second half is not judged and the claim is at best
    inconclusive."""
    both = sorted(set(gaps_small) & set(gaps_large))
    ratios = {s: ratio(gaps_large[s], gaps_small[s]) for s in both if gaps_small[s].point > 0}
    parts = Parts("A2").add("better at every k", {f"k={k}": d for k, d in diffs.items()})
    extra = {"depth gap ratio large/small": {f"s{s}": r.point for s, r in ratios.items()},
             "reported ratio": reported_ratio}
    if len(ratios) == len(both):
        parts.add("strengthens", {"gap ratio large/small": ratios})
    else:
        extra["strengthens"] = "not judged: some seed's small-model gap is not positive, so its ratio is undefined"
    j = judge(claim("A2"), parts, protocol=protocol, shown=extra, metric=metric, reported_ratio=reported_ratio)
    if "strengthens" in extra and j.verdict == "reproduced":  # half of the claim not judged: at best undecided
        j = Judgement("A2", "inconclusive", j.criterion, j.evidence, j.protocol,
                      j.basis + "; the 'strengthens' half is not judged (a small-model gap is not positive)",
                      j.outcomes)
    return j


def q3(residual_gaps: Mapping[str, PerSeed], paper_gaps: Mapping[str, PerSeed]) -> Judgement:
    """Does the paper's block form drive A1? no: the residual form keeps depth scaling at every size (its gap pooled
    above 0 and not inside ±0.05); yes: it loses it at some size (Bonferroni) while the paper form keeps it."""
    c = claim("Q3")
    rv, rres, rev = Parts("Q3").add(c.parts[0], residual_gaps).judge()
    pv, pres, pev = Parts("Q3").add(c.parts[0], paper_gaps).judge()
    a = answer(rv == "not reproduced" and pv == "reproduced", rv == "reproduced")
    return Judgement("Q3", a, render(c), {"residual": rev, "paper": pev}, c.protocol, _basis(rres),
                     {f"residual {u}": r.verdict for u, r in rres.items()})


A4_SAVING = 0.05  # A4 judges a threshold only where its exit saves at least this share of the depth


def a4_judged(tau: float, avg_depth: Mapping[int, float], K: int) -> bool:
    """Whether A4 judges threshold ``tau``: τ > 0 and its exit's average depth, averaged over the seeds, saves at
    least ``A4_SAVING`` of K. Decided once per (size, τ) for all seeds together."""
    if not avg_depth:
        raise ValueError(f"a4_judged needs each seed's average depth for tau {tau}, got none")
    return tau > 0 and sum(avg_depth.values()) / len(avg_depth) <= (1 - A4_SAVING) * K


def a4(diffs: Mapping[str, PerSeed], penalty_share: float, reported_share: float, protocol: str,
       metric: str, fallback: str) -> Judgement:
    """Post-hoc exit fails: exit NLL − uniform NLL at the same average depth pooled above 0 for every judged
    threshold (intersection–union over size × τ)."""
    if not diffs:
        return Judgement("A4", "inconclusive", f"no threshold saved at least {A4_SAVING:.0%} of the depth", {},
                         protocol, "nothing to judge")
    return judge(claim("A4"), Parts("A4").add("exit fails", diffs), protocol=protocol, max_depth=1 - A4_SAVING,
                 fallback=fallback, metric=metric,
                 shown={"exit penalty / depth gap (mean)": penalty_share, "reported exit penalty / depth gap":
                        reported_share, "ratio to the paper's": penalty_share / reported_share})


def q2(a4_corrected: Judgement, a4_paper: Judgement) -> Judgement:
    """A4's pooled verdict under the corrected fallback, read as an answer."""
    c = claim("Q2")
    return Judgement("Q2", {"reproduced": "yes", "not reproduced": "no"}.get(a4_corrected.verdict, "inconclusive"),
                     render(c), {"A4_paper": a4_paper.verdict, "A4_corrected": a4_corrected.verdict}, c.protocol,
                     a4_corrected.basis, seeds=tuple(evidence_seeds(a4_corrected.evidence)) or a4_corrected.seeds)


def a5(saturation: Mapping[str, Mapping[int, tuple[int, int]]], step: float = 1.0) -> Judgement:
    """Confident but wrong: per seed the depth at which NLL reaches 95% of its k=1..K change minus the depth at which
    mean max-prob does, pooled above 0 iterations at every size (not reproduced inside ±1 iteration or below). Each
    seed's difference carries the rounding variance of depths read off a grid of spacing ``step`` (``quantised``)."""
    nonempty("A5", saturation, "a size's saturation depths")
    units = {u: {s: quantised(nl - mp, step) for s, (mp, nl) in d.items()} for u, d in saturation.items()}
    return judge(claim("A5"), Parts("A5").add("confident but wrong", units),
                 shown={f"{u}/s{s}": {"maxprob": mp, "nll": nl} for u, d in saturation.items()
                        for s, (mp, nl) in d.items()})


MARGIN_NATS = sesoi("A6", "free exit")  # "costs about nothing" (A6, A8): an absolute margin in nats
MARGIN_GAP_FRACTION = 0.10  # the relative alternative, shown beside: a tenth of the same size's single-depth gap


def a6_margin(single_gap: float) -> float:
    """A6's (and A8's) pre-registered margin: MARGIN_NATS (the relative one is shown beside, not used)."""
    return MARGIN_NATS


def _margins(single_gap: float) -> dict[str, float]:
    out = {f"absolute {MARGIN_NATS:g} nats (stated)": MARGIN_NATS}
    if single_gap > 0:
        out[f"relative {MARGIN_GAP_FRACTION:.0%} of the gap"] = MARGIN_GAP_FRACTION * single_gap
    return out


def _by_margin(claim_id: str, part: str, units: Mapping[str, PerSeed],
               single_gaps: Mapping[str, float]) -> dict[str, str]:
    """The verdict under each margin alone (the stated one and the relative alternative), so a reader sees whether
    the conclusion depends on the margin."""
    base = rule(claim_id, part)
    out = {}
    for name in _margins(min(single_gaps.values())):
        p = Parts(claim_id)
        for u, ps in units.items():
            m = _margins(single_gaps[u])[name]
            p.add(part, {u: ps}, inf.Rule(base.kind, m, base.threshold, base.side, base.negligible))
        out[name] = p.judge()[0]
    return out


def a6(costs: Mapping[str, PerSeed], single_gaps: Mapping[str, float]) -> Judgement:
    """Free exit after multi-depth training: the exit cost NLL(1) − min_k NLL(k) pooled inside ±0.05 nats at every
    size (equivalence); not reproduced when it lies wholly beyond. The verdict under the relative margin beside."""
    by = _by_margin("A6", "free exit", costs, single_gaps)
    return judge(claim("A6"), Parts("A6").add("free exit", costs), shown={"verdict by margin": by},
                 by_margin=", ".join(f"{k}: {v}" for k, v in by.items()))


def a7(models: Mapping[str, Mapping[str, Mapping[str, PerSeed]]], best: Mapping[str, str],
       reading: Mapping[str, PerSeed] | None = None) -> Judgement:
    """The trade-off law across every trained model of a size: no model has both a free exit and a depth gap.
    ``models``: size → model → {"exit cost": NLL_m(1) − the best other model's min_k NLL (paired), "depth gap":
    NLL_m(1) − NLL_m(K)}; ``best``: size → the model with the lowest best NLL (mean over seeds).

    Only the best model of a size can have both: for any other model the best other model is the best one, whose best
    NLL is at most this model's NLL(K), so its exit cost is at least its depth gap by definition and "exit cost below
    0.05 and depth gap above 0.05" cannot hold. So the law is judged on each size's best model, whose exit cost is
    measured against the runner-up: it *lacks one* when its exit cost lies wholly above 0.05 nats or its depth gap
    wholly below 0.05; it *has both* when its exit cost lies below 0.05 and its depth gap above 0.05, at the
    Bonferroni level over sizes. Reproduced when every size's best model lacks one; not reproduced when one has both;
    otherwise inconclusive. The other models are shown, labelled. ``reading``: multi-depth NLL(1) − single-depth
    NLL(K) per size, shown beside (not deciding)."""
    c = claim("A7")
    d = sesoi("A7", c.parts[0])
    free = inf.Rule("noninferiority", d)  # reproduced: exit cost below +d (free); not: wholly above (not free)
    depth = inf.Rule("superiority", d, threshold=d, negligible=False)  # reproduced: gap above d; not: below d
    nonempty("A7", models, "a size's models")
    for size, ms in models.items():
        if len(ms) < 2:
            raise ValueError(f"A7 compares models: size {size!r} needs at least two trained models, got {list(ms)}")
        if best.get(size) not in ms:
            raise ValueError(f"A7 judges each size's best model: {best.get(size)!r} is not a model of {size!r}")
    n_sizes = len(models)
    ev, outcomes, has, lacks = {}, {}, [], []
    for size, ms in models.items():
        for m, q in ms.items():
            rf = inf.judge_unit("exit cost", list(q["exit cost"].values()), free, n_sizes)
            rd = inf.judge_unit("depth gap", list(q["depth gap"].values()), depth, n_sizes)
            key = f"{size} / {m}"
            if m != best[size]:
                outcomes[key] = "not the best model: cannot have both by definition"
            else:
                lack = rf.verdict == "not reproduced" or rd.verdict == "not reproduced"
                both = rf.verdict_corrected == "reproduced" and rd.verdict_corrected == "reproduced"
                outcomes[key] = "lacks one" if lack else "has both" if both else "undetermined"
                (lacks if lack else has if both else []).append(key)
            ev[key] = {"exit cost": unit_evidence(q["exit cost"], free, rf),
                       "depth gap": unit_evidence(q["depth gap"], depth, rd), "outcome": outcomes[key]}
    v = verdict(len(lacks) == n_sizes, bool(has))
    if reading:
        rv, _, rev = Parts("A7").add("reading (shown)", reading).judge()
        ev["reading: multi NLL(1) - single NLL(K)"] = rev | {
            "equivalence verdict (shown, not deciding; 'reproduced' here would mean the multi-depth model at k=1 "
            "matches the single-depth model at K, against the law)": rv}
    return Judgement("A7", v, render(c, n_sizes=n_sizes), ev | {"best": dict(best)}, c.protocol,
                     f"pooled over seeds per model; {len(lacks)} of {n_sizes} best models lack one"
                     + (f"; {', '.join(has)} has both" if has else ""), outcomes)


def a8(diffs: Mapping[str, PerSeed], single_gaps: Mapping[str, float]) -> Judgement:
    """Multi-depth supervision does not lower the quality ceiling: best multi-depth NLL − best single-depth NLL
    pooled non-inferior at 0.05 nats at every size (being better also passes). The relative margin beside."""
    by = _by_margin("A8", "ceiling not lowered", diffs, single_gaps)
    return judge(claim("A8"), Parts("A8").add("ceiling not lowered", diffs), shown={"verdict by margin": by},
                 by_margin=", ".join(f"{k}: {v}" for k, v in by.items()))
