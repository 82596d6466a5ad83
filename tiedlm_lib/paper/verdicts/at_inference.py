"""Section 12, depth at inference: Q7 (does self-speculative decoding buy 1.5x), Q8 (does an exit with a guarantee
save depth) and Q9 (does the guarantee hold on unseen documents)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tiedlm_lib.paper.claimbook import claim
from tiedlm_lib.paper.judging import (
    Judgement,
    Parts,
    PerSeed,
    _basis,
    judge,
    nonempty,
    pts,
    render,
    rule,
    sesoi,
    spec,
    unit_evidence,
)
from tiedlm_lib.stats import inference as inf

SPEEDUP_TARGET = float(spec("Q7", "speculative decoding buys 1.5x")["threshold"])
Q7_CONFIG = "d1 L2"  # selected on seed 0 (best point there) before the pre-registration; judged on the other seeds
DEPTH_SAVING = 0.1  # "saves depth": the guaranteed exit's average depth at most (1 - 0.1) x K


def q7(speedups: Mapping[str, PerSeed], target: float = SPEEDUP_TARGET, selected: str = Q7_CONFIG,
       selection_seed: int | None = 0) -> Judgement:
    """Does self-speculative decoding buy ≥ ``target``× greedy tokens/s at identical outputs? The configuration
    ``selected`` was chosen on ``selection_seed`` before this rule; it is judged, yes and no alike, on the other
    seeds: yes if its pooled speed-up lies above ``target``, no if below; otherwise inconclusive. Every other
    configuration is shown beside (pooled over all seeds, not deciding). ``selection_seed=None``: a run of the
    selection seed alone (smoke, ``SEEDS=0``), judged on it and labelled "single seed: selected and judged on the same
    seed"."""
    if selected not in speedups:
        raise ValueError(f"Q7 judges the pre-selected configuration {selected!r}, which was not measured (got "
                         f"{sorted(speedups)})")
    judged_seeds = {s: e for s, e in speedups[selected].items() if s != selection_seed}
    if not judged_seeds:
        raise ValueError(f"Q7 is judged on seeds other than the selection seed {selection_seed}; none was measured")
    c = claim("Q7")
    r = inf.Rule("superiority", sesoi("Q7", c.parts[0]), target, 1, False)
    res = inf.judge_unit(selected, list(judged_seeds.values()), r)
    ev = {selected: unit_evidence(judged_seeds, r, res)}
    for cfg, ps in speedups.items():
        ev[f"{cfg} (all seeds, shown)"] = unit_evidence(ps, r, inf.judge_unit(cfg, list(ps.values()), r))
    sel0 = {cfg: ps[selection_seed].point for cfg, ps in speedups.items() if selection_seed in ps}
    best0 = max(sel0, key=sel0.get) if sel0 else None
    same = selection_seed is None
    how = ("on the selection seed alone (single seed: selected and judged on the same seed; no seed the selection "
           "did not see)" if same else f"selected on seed {selection_seed} before this rule, pooled over the other "
           "seeds")
    return Judgement("Q7", {"reproduced": "yes", "not reproduced": "no"}.get(res.verdict, "inconclusive"),
                     render(c, selected=selected, how=how, target=target),
                     ev | {"selected": selected, "best on the selection seed in this run": best0, "threshold": target},
                     c.protocol, _basis({selected: res}, "; single seed: selected and judged on the same seed" if same
                                        else f"; selected on seed {selection_seed}, judged without it"),
                     {selected: res.verdict})


def q8(avg_depth: Mapping[int, float], K: int, eps: float, delta: float, model: str) -> Judgement:
    """Does an exit with a guarantee save depth? Per seed the guaranteed exit's average depth on unseen documents
    (averaged over calibration splits); yes if pooled below (1 − DEPTH_SAVING)·K, no if above."""
    bound = (1 - DEPTH_SAVING) * K
    nonempty("Q8", avg_depth, "a seed's average depth")
    c = claim("Q8")
    parts = Parts("Q8").add(c.parts[0], {model: pts(avg_depth)}, rule("Q8", c.parts[0], threshold=bound))
    return judge(c, parts, shown={"bound": bound}, model=model, eps=eps, delta=delta, bound=bound, K=K)


def q9(rates: Mapping[str, PerSeed], delta: float, never_certified: Sequence[str] = ()) -> Judgement:
    """Does the guarantee hold on unseen documents? Per unit (model, rule, ε) and seed: the test half's disagreement
    rate minus ε, averaged over calibration splits, with its interval (``exits.rate_minus_eps``: document-clustered,
    conservative for the splits' dependence). Pooled over seeds: yes if every unit's interval lies below 0 (the rate
    is below ε), no if some unit's lies above 0 (Bonferroni over units), inconclusive otherwise. Learn-then-Test
    bounds the long-run rate, not a finite half's, so the rate is judged with its interval, not by counting halves
    above ε; the slack ε − rate is in the evidence (a large slack is a conservative guarantee, not a tight one).
    Only certified splits enter; ``never_certified`` units (no split certified in any seed) are listed, not judged,
    and with no judged unit the answer is inconclusive."""
    if not rates:
        if not never_certified:
            raise ValueError("Q9 needs at least one unit")
        return Judgement("Q9", "inconclusive", "no model, rule and eps was certified on any calibration split, so "
                         "there is no guaranteed exit to test", {"never certified": list(never_certified)},
                         "corrected", f"nothing certified, {len(never_certified)} units")
    return judge(claim("Q9"), Parts("Q9").add("guarantee holds", rates), delta=delta,
                 shown={"never certified": list(never_certified)})
