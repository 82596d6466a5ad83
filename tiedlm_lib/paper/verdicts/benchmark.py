"""Sections 05-08, the suffix benchmark, the 2x2, loops and SFT: A11 (padding dominates and rankings reverse), Q6
(does the draw change the conclusions), A12 (SFT costs real-token NLL), A13/A14 (tied beats vanilla, also after SFT),
Q4 (do the gaps exceed their noise), A15 (three loops best), A16 (alpha by loop), A17 (three loops best after SFT) and
A20 (pre-trained models never emit pad)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tiedlm_lib.paper.claimbook import claim
from tiedlm_lib.paper.claims import answer
from tiedlm_lib.paper.judging import (
    Judgement,
    Parts,
    PerSeed,
    _basis,
    ci,
    judge,
    nonempty,
    point,
    pts,
    render,
    rule,
    spec,
    unit_evidence,
)
from tiedlm_lib.stats import inference as inf


def a11(per_seed: Mapping[int, Mapping[str, Any]], protocol: str, where: str) -> Judgement:
    """Padding dominates and rankings reverse: the pad targets' share of every pad-ignoring PT model's with-pad NLL
    pooled above 0.5, and Kendall τ between the with-pad and real-token rankings of the cast pooled below 0 (a
    reversal; not reproduced inside ±0.2 or above 0). Whether SFT − PT flips sign between the metrics is shown."""
    nonempty("A11", per_seed, "a seed's benchmark numbers")
    share = pts({s: d["pad_share"] for s, d in per_seed.items()})
    parts = (Parts("A11").add("padding-dominated", {"pad share": share})
             .add("ranking reverses", {"kendall tau": pts({s: d["tau"] for s, d in per_seed.items()})}))
    ev = {f"s{s}": {"pad_share_of_with_pad_nll": d["pad_share"], "pad_fraction": d.get("pad_fraction"),
                    "kendall_tau": d["tau"], "champion's with-pad rank": d.get("champion_rank"),
                    "sft_minus_pt_with_pad": ci(d["sft_minus_pt_with_pad"]),
                    "sft_minus_pt_real": ci(d["sft_minus_pt_real"]),
                    "with pad improves while real worsens": d["sft_minus_pt_with_pad"].hi < 0 < d[
                        "sft_minus_pt_real"].lo} for s, d in per_seed.items()}
    return judge(claim("A11"), parts, protocol=protocol, shown=ev, where=where)


Q6_TAU = float(spec("Q6", "conclusions change with the draw")["threshold"])


def q6(a11_train: Judgement, a11_heldout: Judgement, draw_tau: Mapping[int, float],
       unseen_minus_seen: Mapping[str, PerSeed]) -> Judgement:
    """Does evaluating on training sequences change the benchmark's conclusions? yes when A11 is decided one way on
    the train-overlap draws and the other on held-out ones, or the draws' real-token rankings disagree (Kendall τ
    between them pooled below Q6_TAU); no when A11's pooled verdict is the same on both and the τ interval lies above
    Q6_TAU; otherwise inconclusive. The level shift unseen − seen within the train-overlap draw is shown beside."""
    c = claim("Q6")
    nonempty("Q6", draw_tau, "a seed's draw-vs-draw Kendall tau")
    bad = {s: t for s, t in draw_tau.items() if not math.isfinite(t)}
    if bad:
        raise ValueError(f"Q6 needs a finite Kendall τ per seed (a ranking of all-tied values has none), got {bad}")
    r = inf.Rule("superiority", 0.05, Q6_TAU, 1, False)
    res = inf.judge_unit("draw tau", [point(t) for t in draw_tau.values()], r)
    pair = {a11_train.verdict, a11_heldout.verdict}
    changed = pair == {"reproduced", "not reproduced"} or res.verdict == "not reproduced"
    same = a11_train.verdict == a11_heldout.verdict and res.verdict == "reproduced"
    ests = [e for ps in unseen_minus_seen.values() for e in ps.values()]
    ev = {"A11 on train-overlap draws": a11_train.verdict, "A11 on held-out draws": a11_heldout.verdict,
          "kendall tau, train-overlap vs held-out": unit_evidence(pts(draw_tau), r, res)}
    ev["unseen - seen within the train-overlap draw (pooled)"] = (
        {"estimates": len(ests), "positive": sum(e.point > 0 for e in ests), "CI above 0": sum(e.lo > 0 for e in ests),
         "CI below 0": sum(e.hi < 0 for e in ests), "mean": sum(e.point for e in ests) / len(ests)} if ests else
        "no model saw only part of the draw: nothing to compare")
    shown = inf.Rule("superiority", 0.05)
    for u, ps in unseen_minus_seen.items():
        ev[u] = unit_evidence(ps, shown, inf.judge_unit(u, list(ps.values()), shown))
    return Judgement("Q6", answer(changed, same and not changed), render(c), ev, c.protocol,
                     _basis({"draw tau": res}), {"draw tau": res.verdict})


def _implication(vp: str, vc: str) -> str:
    """What A12's pair of verdicts (the paper's SFT loss, response-only SFT) implies about the paper's attribution."""
    if vp == "reproduced" and vc == "reproduced":
        return ("SFT costs real-token NLL without pad targets too: the paper's attribution of the cost to SFT itself "
                "survives the correction.")
    if vp == "reproduced" and vc == "not reproduced":
        return ("Without pad targets SFT's cost is absent or negligible here: the paper's cost is attributable to "
                "training on pad targets, not to SFT as such.")
    if vp == "reproduced":
        return ("Without pad targets SFT's cost is undecided here: the paper's cost may come from training on pad "
                "targets rather than from SFT as such, but this does not settle it.")
    if vc == "reproduced":
        return ("Response-only SFT costs real-token NLL while the paper's SFT does not measurably: the cost is not a "
                "pad-target effect here.")
    return "Neither SFT is shown to cost real-token NLL here, so there is no cost to attribute."


def a12(paper_costs: PerSeed, masked_costs: PerSeed, pt_nll: Mapping[int, float], reported_rel: float
        ) -> tuple[Judgement, Judgement]:
    """SFT costs real-token NLL: SFT − PT pooled above 0 (SESOI 0.05) under the paper's SFT loss and under the
    corrected one; the corrected row states what the pair implies about the paper's attribution of the cost."""
    rows = (("paper", "SFT on the paper's loss (suffix, pad targets)", paper_costs),
            ("corrected", "SFT on response tokens only", masked_costs))
    out = []
    for p, name, costs in rows:
        rel = sum(e.point / pt_nll[s] for s, e in costs.items()) / len(costs)
        out.append(judge(claim("A12"), Parts("A12").add("SFT costs real-token NLL", {name: costs}), protocol=p,
                         name=name, shown={"cost / PT NLL (mean)": rel, "reported cost / PT NLL": reported_rel,
                                           "ratio to the paper's": rel / reported_rel}))
    paper, corrected = out
    implication = _implication(paper.verdict, corrected.verdict)
    corrected = Judgement("A12", corrected.verdict, f"{corrected.criterion}. {implication}",
                          corrected.evidence | {"implication": implication}, corrected.protocol, corrected.basis,
                          corrected.outcomes)
    return paper, corrected


def a13(gap: PerSeed, vanilla_nll: Mapping[int, float], reported_rel: float) -> Judgement:
    """Tied beats the iso-parameter vanilla model: tied − vanilla pooled below 0 (SESOI 0.02)."""
    rel = sum(e.point / vanilla_nll[s] for s, e in gap.items()) / len(gap)
    return judge(claim("A13"), Parts("A13").add("tied beats vanilla", {"tied - vanilla": gap}),
                 shown={"gap / vanilla NLL (mean)": rel, "reported gap / vanilla NLL": reported_rel,
                        "ratio to the paper's": rel / reported_rel})


def a14(gaps: Mapping[str, PerSeed]) -> Judgement:
    """...and after SFT, on both metrics the paper names: tied − vanilla pooled below 0 on each."""
    return judge(claim("A14"), Parts("A14").add("after SFT on both metrics", gaps), metrics=", ".join(gaps))


def q4_part(unit: str) -> str:
    """Q4's pre-registered part for one gap: the multi-loop pairs ("... loops ...") read their own row, whose inside
    ±SESOI ("no") route is withdrawn (amendment 18: paper A's own multi-loop steps lie inside it)."""
    return "multi-loop gaps exceed noise" if "loop" in unit else "gaps exceed noise"


def q4_rule(unit: str, side: int) -> inf.Rule:
    """Q4's rule for one gap (``q4_part``): a two-sided question read as superiority on the side the pooled gap lies
    (either side answers "yes")."""
    r = spec("Q4", q4_part(unit))
    return inf.Rule("superiority", float(r["sesoi"]), float(r["threshold"] or 0), side, r["negligible"] == "yes")


def q4(gaps: Mapping[str, PerSeed], name: str) -> Judgement:
    """Do the gaps exceed their noise across seeds? yes: the pooled interval of the ``name`` gap excludes 0; no: it
    lies inside ±SESOI (not for the multi-loop pairs, ``q4_rule``); otherwise inconclusive. Every gap's own answer is
    in the outcomes."""
    c = claim("Q4")
    ev, outcomes, results = {}, {}, {}
    for u, ps in gaps.items():
        r = q4_rule(u, 1 if sum(e.point for e in ps.values()) >= 0 else -1)
        res = results[u] = inf.judge_unit(u, list(ps.values()), r)
        p, d = res.pooled, r.sesoi
        # inside ±SESOI first, as every superiority rule (docs/statistics.md §2): shown to be too small to matter
        outcomes[u] = ("no" if r.negligible and -d < p.lo and p.hi < d else
                       "yes" if p.lo > 0 or p.hi < 0 else "inconclusive")
        ev[u] = unit_evidence(ps, r, res) | {"answer": outcomes[u]}
    return Judgement("Q4", outcomes[name], render(c, name=name, part=q4_part(name)), ev, c.protocol,
                     _basis(results, combine=f"each of the {len(results)} gaps answered on its own (the outcomes), "
                            f"the verdict the {name} gap's"), outcomes)


A15_WANT = {"3 loops - 1 loop": -1, "3 loops - 2 loops": -1, "4 loops - 3 loops": 1}


def a15(gaps: Mapping[str, PerSeed]) -> Judgement:
    """Loop diversity helps up to three loops, then regresses: 3 − 1 and 3 − 2 loops pooled below 0 and 4 − 3 loops
    above 0 (SESOI 0.02, intersection–union; not reproduced when one is shown the other way or negligible)."""
    missing = set(A15_WANT) - set(gaps)
    if missing:
        raise ValueError(f"A15 needs the gaps {sorted(missing)}")
    c = claim("A15")
    parts = Parts("A15")
    for u, side in A15_WANT.items():
        parts.add(c.parts[0], {u: gaps[u]}, rule("A15", c.parts[0], side=side))
    return judge(c, parts, shown={u: {f"s{s}": ci(e) for s, e in ps.items()} for u, ps in gaps.items()
                                  if u not in A15_WANT})


def a16(final_alpha: Mapping[str, Mapping[int, Mapping[str, float]]], under: str | None = None,
        equal: str = "v14", extended: Sequence[int] = ()) -> Judgement:
    """α differentiates by loop: log(α of the last loop / α of the first) pooled above 0 (SESOI log 1.1) in every
    multi-loop layout. An under-iterated loop inflates its α: in layout ``under`` (its last loop has fewer
    iterations) log(α_last / mean α of its other loops) minus the same in ``equal`` (equal loops), same seed, pooled
    above 0. Without ``under`` the second half is not judged and the verdict cannot be "reproduced". ``extended``:
    seeds that only the second half reads (docs/statistics.md amendment 14: v14 and v14u also at seeds 5-9); the
    first half leaves them out, so each layout's unit rests on the section's seeds."""
    multi = {u: {s: a for s, a in d.items() if s not in set(extended)} for u, d in final_alpha.items()
             if u != under and all(len(a) > 1 for a in d.values())}
    nonempty("A16", multi, "a multi-loop layout's final α per loop")
    parts = Parts("A16").add("alpha differentiates by loop", {
        u: pts({s: math.log(list(a.values())[-1] / list(a.values())[0]) for s, a in d.items()})
        for u, d in multi.items()})

    def inflation(a: Mapping[str, float]) -> float:
        v = list(a.values())
        return math.log(v[-1] / (sum(v[:-1]) / len(v[:-1])))

    extra: dict[str, Any] = {f"{u}/s{s}": dict(a) for u, d in final_alpha.items() for s, a in d.items()}
    if under is not None:
        both = sorted(set(final_alpha[under]) & set(final_alpha[equal]))
        parts.add("an under-iterated loop inflates alpha", {f"{under} - {equal}": pts(
            {s: inflation(final_alpha[under][s]) - inflation(final_alpha[equal][s]) for s in both})})
    else:
        extra["an under-iterated loop inflates alpha"] = ("not judged: no layout with an under-iterated loop was "
                                                          "trained at this scale")
    j = judge(claim("A16"), parts, shown=extra, under=under is not None, under_layout=under, equal=equal)
    if under is None and j.verdict == "reproduced":
        j = Judgement(j.claim, "inconclusive", j.criterion, j.evidence, j.protocol,
                      j.basis + "; the under-iterated half is not judged", j.outcomes)
    return j


def a17(gaps: Mapping[str, PerSeed]) -> Judgement:
    """Three loops are best after SFT: v13 − v10 and v13 − v9 pooled below 0 (SESOI 0.02)."""
    return judge(claim("A17"), Parts("A17").add("three loops best after SFT", gaps))


def a20(pad_rates: Mapping[int, Mapping[str, float]], protocol: str, where: str,
        pt_tokens: Mapping[int, int] | None = None) -> Judgement:
    """Pre-trained-only models never emit pad (measurable: one emission in any seed's samples falsifies "never";
    none in every seed's reproduces this half) and generate better than SFT models (not testable at this scale: no
    generation-quality measure means something on this corpus; distinct-n is diversity). The verdict is the
    measurable half's; the criterion says the other is not testable. With ``pt_tokens`` (the PT tokens generated per
    seed) the evidence gives how much "never" means: with no emission, the rule-of-three 95% upper bound 3/n on the
    pad rate over all n tokens (statistics.md amendment 13); with some, the count."""
    nonempty("A20", pad_rates, "a seed's pad rates")
    emits = {f"s{s}": d["PT"] > 0 for s, d in pad_rates.items()}
    half = "not reproduced" if any(emits.values()) else "reproduced"
    # a claim with a half that cannot be tested is at best inconclusive (docs/statistics.md §2, amendments 6 and 18);
    # one pad still falsifies the claim, since "never emits pad" is then shown false
    v = "not reproduced" if half == "not reproduced" else "inconclusive"
    bound: dict[str, Any] = {}
    if pt_tokens is not None:
        if set(pt_tokens) != set(pad_rates) or any(int(n) < 1 for n in pt_tokens.values()):
            raise ValueError(f"pt_tokens needs a positive token count for every seed of pad_rates ({sorted(pad_rates)})"
                             f", got {dict(pt_tokens)}")
        n = sum(int(x) for x in pt_tokens.values())
        pads = sum(pad_rates[s]["PT"] * pt_tokens[s] for s in pad_rates)
        bound = {"PT tokens generated": n, "PT pads emitted": round(pads)}
        if not any(emits.values()):
            bound["rule-of-three 95% upper bound on the PT pad rate"] = 3 / n
    return Judgement("A20", v, render(claim("A20"), where=where),
                     {f"s{s}": dict(d) for s, d in pad_rates.items()} | bound | {
                         "generates better": "not testable at this scale: a quality judgement (human or a reference "
                                             "model) at the paper scale would test it"}, protocol,
                     f"pad counts over every seed's samples, {len(pad_rates)} seeds; the quality half not testable, "
                     "so at best inconclusive (amendment 18)",
                     {"never emits pad": half, "generates better": "not testable"})
