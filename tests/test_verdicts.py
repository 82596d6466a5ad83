"""Every claim's specification (tiedlm_lib.paper.verdicts) reaches every outcome it can return under the pre-registered
seed-level rule, on synthetic per-seed estimates whose pooled intervals are worked out in the comments."""

import math

import pytest

from tiedlm_lib.paper import verdicts as V
from tiedlm_lib.paper.claims import validate_entry
from tiedlm_lib.stats.bootstrap import Estimate


def E(point, lo, hi):
    return Estimate(point, lo, hi)


# Three identical seeds with narrow CIs pool to about point ± 0.022 (t on 2 df times the shared-document SE).
UP, DOWN, NIL = E(0.3, 0.29, 0.31), E(-0.3, -0.31, -0.29), E(0.0, -0.005, 0.005)


def seeds(*ests):
    return dict(enumerate(ests))


def same(e, n=3):
    return seeds(*[e] * n)


def pts(*xs):
    return seeds(*[V.point(x) for x in xs])


SPLIT = seeds(UP, DOWN, UP)  # every seed's CI excludes 0, the seeds on both sides: pooled [−0.77, +0.97]

SEEN: dict[str, set[str]] = {}  # claim -> every verdict its own function produced in some test (read by the last)
RAN: set[str] = set()


@pytest.fixture(autouse=True)
def _ran(request):
    yield
    RAN.add(request.node.originalname)


def check(j, want, claim=None):
    assert want is None or j.verdict == want, (j.verdict, j.basis, j.outcomes)
    SEEN.setdefault(j.claim, set()).add(j.verdict)
    if claim:
        assert j.claim == claim
    validate_entry({"id": j.claim, "claim": "", "scale": "smoke", "notebook": "nb", "protocol": j.protocol,
                    "verdict": j.verdict, "criterion": j.criterion, "evidence": j.evidence, "recorded": "now",
                    "basis": j.basis})
    assert j.criterion.strip() and j.basis.strip()
    return j


def test_the_pooled_block_is_recorded_beside_every_seed():
    j = check(V.a13(SPLIT, {0: 3.0, 1: 3.0, 2: 3.0}, -0.011), "inconclusive", "A13")
    block = j.evidence["tied - vanilla"]
    assert set(block) >= {"s0", "s1", "s2", "pooled"}
    p = block["pooled"]
    assert p["seeds above"] == 2 and p["seeds below"] == 1 and p["seed-sensitive"]
    assert p["interval"][0] < 0 < p["interval"][1] and p["sesoi"] == 0.02 and p["threshold"] == 0
    assert "seed-sensitive" in j.basis and "pooled over 3 seeds" in j.basis
    assert "undecided at 3 seeds" in j.basis  # how many seeds would decide it, or that more would not
    one = check(V.a13(seeds(DOWN), {0: 3.0}, -0.011), "reproduced")
    assert "single-seed" in one.basis


def test_the_basis_names_the_interval_each_unit_was_pooled_with():
    # a unit of bare points (no per-seed CIs) has no shared-document term: its interval is a t-interval on the points
    gaps = {"small": same(UP), "large": same(UP)}
    ci = check(V.a1(gaps, {"small": same(NIL), "large": same(NIL)}, "masked", "corrected"), "reproduced")
    assert "with the shared-document term" in ci.basis and "points without per-seed CIs" not in ci.basis
    mixed = check(V.a1(gaps, {"small": pts(0.0, 0.001, -0.001), "large": pts(0.0, 0.002, -0.001)}, "masked",
                       "corrected"), "reproduced")
    assert "seed points for monotone: small and monotone: large, which have no per-seed CIs" in mixed.basis
    bare = check(V.a1({"small": pts(0.3, 0.31, 0.29), "large": pts(0.3, 0.32, 0.28)},
                      {"small": pts(0.0, 0.001, -0.001), "large": pts(0.0, 0.002, -0.001)}, "masked", "corrected"),
                 "reproduced")
    assert "(a t-interval on the seed points (points without per-seed CIs);" in bare.basis
    assert "shared-document" not in bare.basis


@pytest.mark.parametrize("mem,short,want", [(0.5, same(NIL), "reproduced"), (0.7, same(NIL), "not reproduced"),
                                            (0.5, same(UP), "not reproduced"), (0.5, same(E(0.1, 0.09, 0.11)),
                                                                                    "inconclusive")])
def test_a9_one_rule_in_code_and_text(mem, short, want):
    j = check(V.a9(mem, 0.5, short, 30), want, "A9")
    assert "non-inferiority" in j.criterion and f"+{V.A9_SHORT_MARGIN:g}" in j.criterion


def test_a10_needs_the_gap_and_its_growth():
    full = {0: 3.0, 1: 3.0, 2: 3.0}
    check(V.a10(same(UP), full, 0.5, short_gap=same(E(0.1, 0.09, 0.11))), "reproduced", "A10")
    check(V.a10(same(NIL), full, 0.5), "not reproduced")  # negligible: inside ±0.05
    check(V.a10(SPLIT, full, 0.5), "inconclusive")
    j = check(V.a10(same(UP), full, 0.5, short_gap=same(UP)), "not reproduced")  # no growth: long − short = 0
    assert j.evidence["grows with the horizon"] == "not reproduced"
    assert j.evidence["ratio to the paper's"] == pytest.approx(0.1 / 0.5)


def test_a3_on_the_masked_sweep_of_the_long_phantom_run():
    ln_v, K = math.log(512), 16
    useless = {s: {1: ln_v - 0.2, 8: ln_v - 0.3, 16: ln_v - 3} for s in range(3)}
    fine = {s: {1: ln_v - 2.5, 8: ln_v - 3, 16: ln_v - 3.2} for s in range(3)}
    split = {0: useless[0], 1: fine[1], 2: useless[2]}
    check(V.a3(useless, 512, K), "reproduced", "A3")
    check(V.a3(fine, 512, K), "not reproduced")
    check(V.a3(split, 512, K), "inconclusive")
    # the threshold pinned on both sides: best shallow 0.65-0.75 nats below ln V is within 1 nat (not within 0.5)
    near = {s: {1: ln_v - 0.5, 8: ln_v - 0.65 - 0.05 * s, 16: ln_v - 3} for s in range(3)}
    check(V.a3(near, 512, K), "reproduced")
    beyond = {s: {1: ln_v - 1.3, 8: ln_v - 1.35 - 0.05 * s, 16: ln_v - 3} for s in range(3)}
    check(V.a3(beyond, 512, K), "not reproduced")
    # both conjuncts decide: shallow depths useless but K useless too is not "only K lands"
    all_useless = {s: {1: ln_v - 0.2, 8: ln_v - 0.3, 16: ln_v - 0.35 - 0.05 * s} for s in range(3)}
    check(V.a3(all_useless, 512, K), "not reproduced")
    with pytest.raises(ValueError, match="A3 needs NLL"):
        V.a3({0: {1: 5.0}}, 512, K)


def test_q5():
    check(V.q5(same(DOWN), same(UP)), "yes", "Q5")
    check(V.q5(same(NIL), same(UP)), "no")  # phantom-last no better: inside ±0.05
    check(V.q5(same(DOWN), same(DOWN)), "no")  # the paper phantom does not underfit
    check(V.q5(SPLIT, same(UP)), "inconclusive")


@pytest.mark.parametrize("j", [V.q5(same(DOWN), same(UP)), V.q5(same(NIL), same(UP)),
                               V.a10(same(UP), {0: 3.0, 1: 3.0, 2: 3.0}, 0.5),
                               V.a10(same(NIL), {0: 3.0, 1: 3.0, 2: 3.0}, 0.5)], ids=["yes", "no", "rep", "not rep"])
def test_a_claim_reading_a_stopped_or_diverged_run_is_at_best_inconclusive(j):
    assert j.verdict in ("yes", "no", "reproduced", "not reproduced")
    capped = check(V.at_best_inconclusive(j, ["horizon-phantom seed 1 (diverged)"]), "inconclusive")
    assert capped.evidence["verdict before the cap"] == j.verdict
    assert capped.evidence["runs that stopped or diverged"] == ["horizon-phantom seed 1 (diverged)"]
    assert "horizon-phantom seed 1 (diverged)" in capped.basis and j.basis in capped.basis
    assert j.verdict != "inconclusive"  # the original is left as it was
    assert V.at_best_inconclusive(j, []) is j  # no such run: unchanged


def test_the_cap_leaves_undecided_and_checks_alone_and_refuses_a_bare_string():
    undecided = V.q5(SPLIT, same(UP))
    assert V.at_best_inconclusive(undecided, ["x"]).verdict == "inconclusive"
    checked = V.Judgement("A18", "check passed", "c", {}, "paper", "b")
    assert V.at_best_inconclusive(checked, ["x"]).verdict == "check passed"
    with pytest.raises(TypeError, match="sequence of run names"):
        V.at_best_inconclusive(checked, "horizon-full seed 1")


def test_a1_needs_the_gap_and_a_monotone_sweep():
    flat = {"v3": pts(-0.02, -0.01, -0.03), "v5": pts(-0.02, -0.01, -0.03)}
    j = check(V.a1({"v3": same(UP), "v5": same(UP)}, flat, "masked", "corrected"), "reproduced", "A1")
    assert set(j.outcomes) == {"depth scaling: v3", "depth scaling: v5", "monotone: v3", "monotone: v5"}
    check(V.a1({"v3": same(UP), "v5": same(NIL)}, flat, "masked", "corrected"), "not reproduced")
    rises = {"v3": pts(0.2, 0.21, 0.22), "v5": pts(-0.02, -0.01, -0.03)}  # clears 0.01 at the Bonferroni level
    check(V.a1({"v3": same(UP), "v5": same(UP)}, rises, "masked", "corrected"), "not reproduced")
    check(V.a1({"v3": SPLIT, "v5": same(UP)}, flat, "masked", "corrected"), "inconclusive")


def test_a2_has_two_halves():
    small, large = same(E(0.5, 0.49, 0.51)), same(E(0.8, 0.79, 0.81))  # ratio 1.6: strengthens
    j = check(V.a2({1: same(DOWN), 16: same(DOWN)}, small, large, "masked", "corrected", 0.74), "reproduced", "A2")
    assert j.evidence["reported ratio"] == 0.74
    weaker = same(E(0.37, 0.36, 0.38))  # ratio 0.74, as the paper's own: not "strengthens"
    check(V.a2({1: same(DOWN)}, small, weaker, "masked", "corrected", 0.74), "not reproduced")
    check(V.a2({1: same(UP)}, small, large, "masked", "corrected", 0.74), "not reproduced")
    check(V.a2({1: SPLIT}, small, large, "masked", "corrected", 0.74), "inconclusive")
    neg = check(V.a2({1: same(DOWN)}, seeds(UP, DOWN, UP), large, "masked", "corrected", 0.74), "inconclusive")
    assert "undefined" in neg.evidence["strengthens"] and "not judged" in neg.basis  # half unjudged: not reproduced


def test_q3():
    check(V.q3({"v3": same(NIL)}, {"v3": same(UP)}), "yes", "Q3")
    check(V.q3({"v3": same(UP)}, {"v3": same(UP)}), "no")
    check(V.q3({"v3": SPLIT}, {"v3": same(UP)}), "inconclusive")


def test_a4_and_q2():
    sh = 0.7
    a = check(V.a4({"small/tau0.4": same(UP)}, sh, 0.7, "corrected", "masked", "final"), "reproduced", "A4")
    check(V.a4({"small/tau0.4": same(DOWN)}, sh, 0.7, "corrected", "masked", "final"), "not reproduced")
    b = check(V.a4({"small/tau0.4": SPLIT}, sh, 0.7, "paper", "with_pad", "paper"), "inconclusive")
    check(V.a4({}, sh, 0.7, "paper", "with_pad", "paper"), "inconclusive")
    check(V.q2(a, b), "yes", "Q2")
    check(V.q2(V.a4({"x": same(DOWN)}, sh, 0.7, "corrected", "masked", "final"), b), "no")
    check(V.q2(b, a), "inconclusive")
    assert V.a4_judged(0.4, {0: 10, 1: 12}, 16) and not V.a4_judged(0.4, {0: 16, 1: 15.5}, 16)
    assert not V.a4_judged(0.0, {0: 1}, 16)


def test_a5_pools_the_saturation_depths():
    check(V.a5({"small": {0: (4, 12), 1: (5, 12), 2: (4, 14)}}), "reproduced", "A5")
    check(V.a5({"small": {0: (8, 8), 1: (8, 8), 2: (8, 8)}}), "not reproduced")
    check(V.a5({"small": {0: (2, 12), 1: (12, 2), 2: (6, 8)}}), "inconclusive")
    # seeds agreeing on the same integers: the rounding variance keeps the pooled interval from collapsing to a point
    same = V.a5({"small": {s: (6, 9) for s in range(5)}})
    e = V.quantised(3, 1.0)
    assert e.hi - e.lo == pytest.approx(2 * 1.959963984540054 * math.sqrt(1 / 6))
    assert V.quantised(3, 2.0).hi - V.quantised(3, 2.0).lo == pytest.approx(2 * (e.hi - e.lo))
    from tiedlm_lib.stats import inference
    pooled = inference.pool([e] * 5)
    # pooled as §1's shared-document term (not averaged down over seeds): conservative for independent rounding
    assert pooled.hi - pooled.lo == pytest.approx(e.hi - e.lo) and pooled.point == 3
    check(same, "reproduced")  # 3 iterations apart in every seed, an interval about +/-0.4 wide: above +1
    with pytest.raises(ValueError, match="step must be > 0"):
        V.quantised(1, 0)


def test_a6_is_equivalence_and_shows_the_relative_margin():
    gaps = {"small": 0.7}
    j = check(V.a6({"small": same(NIL)}, gaps), "reproduced", "A6")
    assert set(j.evidence["verdict by margin"]) == {"absolute 0.05 nats (stated)", "relative 10% of the gap"}
    check(V.a6({"small": same(E(0.2, 0.19, 0.21))}, gaps), "not reproduced")
    check(V.a6({"small": same(E(0.05, 0.04, 0.06))}, gaps), "inconclusive")
    assert V.a6_margin(0.01) == V.MARGIN_NATS == 0.05


def _law(curves):
    """A7's inputs from synthetic NLL(1) / NLL(K) / best NLL per model (three identical seeds, narrow CIs): the exit
    cost against the best other model's best, and the depth gap."""
    best_of = {m: c[2] for m, c in curves.items()}
    out = {}
    for m, (n1, nk, _) in curves.items():
        other = min((o for o in curves if o != m), key=best_of.get)
        out[m] = {"exit cost": same(E(n1 - best_of[other], n1 - best_of[other] - 0.005, n1 - best_of[other] + 0.005)),
                  "depth gap": same(E(n1 - nk, n1 - nk - 0.005, n1 - nk + 0.005))}
    return {"small": out}, {"small": min(curves, key=best_of.get)}


def test_a7_the_law_is_judged_on_the_best_model_and_can_fail():
    models, best = _law({"single": (3.5, 2.8, 2.8), "multi": (2.9, 2.9, 2.88)})
    j = check(V.a7(models, best, {"small": same(E(0.1, 0.09, 0.11))}), "reproduced", "A7")
    assert j.outcomes == {"small / single": "lacks one",
                          "small / multi": "not the best model: cannot have both by definition"}
    assert any("not deciding" in k for k in j.evidence["reading: multi NLL(1) - single NLL(K)"])
    # a model whose k=1 comes within 0.05 of the runner-up's best while its depth still buys 0.12: the law fails
    models, best = _law({"single": (3.5, 2.8, 2.8), "sampled": (2.82, 2.70, 2.70)})
    j = check(V.a7(models, best), "not reproduced")
    assert best == {"small": "sampled"} and j.outcomes["small / sampled"] == "has both" and "has both" in j.basis
    models, best = _law({"single": (3.5, 2.8, 2.8), "multi": (2.9, 2.9, 2.88)})
    models["small"]["single"] = {"exit cost": SPLIT, "depth gap": SPLIT}
    check(V.a7(models, best), "inconclusive")
    with pytest.raises(ValueError, match="at least two"):
        V.a7({"small": {"single": models["small"]["multi"]}}, {"small": "single"})
    with pytest.raises(ValueError, match="best model"):
        V.a7(models, {"small": "vanilla"})


def test_a8_is_non_inferiority():
    gaps = {"small": 0.7, "large": 0.5}
    check(V.a8({"small": same(DOWN), "large": same(NIL)}, gaps), "reproduced", "A8")  # better also passes
    check(V.a8({"small": same(UP), "large": same(NIL)}, gaps), "not reproduced")
    check(V.a8({"small": same(E(0.05, 0.04, 0.06)), "large": same(NIL)}, gaps), "inconclusive")


def _bench(share, tau, wp=DOWN, rl=UP, rank=5):
    return {"pad_share": share, "tau": tau, "sft_minus_pt_with_pad": wp, "sft_minus_pt_real": rl,
            "champion_rank": rank}


def test_a11_is_a_ranking_reversal():
    rev = {s: _bench(0.6 + 0.01 * s, -0.6 - 0.05 * s) for s in range(3)}
    j = check(V.a11(rev, "corrected", "held-out"), "reproduced", "A11")
    assert j.evidence["s0"]["with pad improves while real worsens"] and j.evidence["s0"]["champion's with-pad rank"]
    check(V.a11({s: _bench(0.6, 0.8 + 0.02 * s) for s in range(3)}, "corrected", "held-out"), "not reproduced")
    check(V.a11({s: _bench(0.6, 0.01 * s) for s in range(3)}, "corrected", "held-out"), "not reproduced")  # no relation
    check(V.a11({s: _bench(0.6, t) for s, t in enumerate((-0.8, 0.6, -0.7))}, "paper", "train"), "inconclusive")


def test_q6_asks_whether_the_conclusions_change():
    rev = {s: _bench(0.6, -0.6 - 0.05 * s) for s in range(3)}
    agree = {s: _bench(0.6, 0.8 + 0.02 * s) for s in range(3)}
    a_rep, a_not = V.a11(rev, "paper", "t"), V.a11(agree, "corrected", "h")
    lvl = {"v3": same(E(0.06, -0.04, 0.16))}
    j = check(V.q6(a_rep, a_not, {0: 0.9, 1: 1.0, 2: 0.95}, lvl), "yes", "Q6")
    assert j.evidence["unseen - seen within the train-overlap draw (pooled)"]["positive"] == 3
    check(V.q6(a_rep, a_rep, {0: 0.9, 1: 1.0, 2: 0.95}, lvl), "no")
    check(V.q6(a_rep, a_rep, {0: 0.1, 1: 0.0, 2: 0.05}, lvl), "yes")  # the draws rank the cast differently
    check(V.q6(a_rep, a_rep, {0: 0.9, 1: 0.1, 2: 0.6}, {}), "inconclusive")
    with pytest.raises(ValueError, match="finite Kendall"):
        V.q6(a_rep, a_rep, {0: float("nan")}, lvl)


def test_a12_states_what_the_corrected_row_implies():
    pt = {0: 3.0, 1: 3.0, 2: 3.0}
    p, c = V.a12(same(UP), same(UP), pt, 0.16)
    check(p, "reproduced", "A12")
    assert "survives" in check(c, "reproduced").evidence["implication"]
    _, c = V.a12(same(UP), same(NIL), pt, 0.16)
    assert "attributable to training on pad targets" in check(c, "not reproduced").criterion
    p, c = V.a12(same(UP), SPLIT, pt, 0.16)
    assert "undecided" in check(c, "inconclusive").criterion
    p, c = V.a12(SPLIT, same(UP), pt, 0.16)
    assert "not a pad-target effect" in c.criterion and check(p, "inconclusive")
    p, c = V.a12(same(NIL), same(NIL), pt, 0.16)
    assert "no cost to attribute" in check(c, "not reproduced").criterion


def test_a13_a14_a17_q4():
    van = {0: 3.0, 1: 3.0, 2: 3.0}
    check(V.a13(same(DOWN), van, -0.011), "reproduced")
    check(V.a13(same(UP), van, -0.011), "not reproduced")
    check(V.a14({"real": same(DOWN), "with pad": same(DOWN)}), "reproduced", "A14")
    check(V.a14({"real": same(DOWN), "with pad": same(UP)}), "not reproduced")
    check(V.a14({"real": same(DOWN), "with pad": SPLIT}), "inconclusive")
    check(V.a17({"v10": same(DOWN), "v9": same(DOWN)}), "reproduced", "A17")
    check(V.a17({"v10": same(NIL), "v9": same(DOWN)}), "not reproduced")
    check(V.a17({"v10": SPLIT, "v9": same(DOWN)}), "inconclusive")
    j = check(V.q4({"tied - vanilla": same(DOWN), "other": same(NIL)}, "tied - vanilla"), "yes", "Q4")
    assert j.outcomes == {"tied - vanilla": "yes", "other": "no"}
    # each gap is answered alone: the basis must not call the verdict an intersection over the gaps
    assert "each of the 2 gaps answered on its own" in j.basis and "intersection-union" not in j.basis
    check(V.q4({"g": same(NIL)}, "g"), "no")
    check(V.q4({"g": same(E(0.012, 0.011, 0.013))}, "g"), "no")  # excludes 0 but inside ±0.02: too small to matter
    check(V.q4({"g": SPLIT}, "g"), "inconclusive")


def test_a15_a16():
    ok = {"3 loops - 1 loop": same(DOWN), "3 loops - 2 loops": same(DOWN), "4 loops - 3 loops": same(UP)}
    check(V.a15(ok), "reproduced", "A15")
    check(V.a15(ok | {"4 loops - 3 loops": same(DOWN)}), "not reproduced")
    check(V.a15(ok | {"3 loops - 2 loops": SPLIT}), "inconclusive")
    with pytest.raises(ValueError, match="A15 needs"):
        V.a15({"3 loops - 1 loop": same(DOWN)})
    rising = {s: {"A": 0.07, "B": 0.1, "C": 0.13 + 0.001 * s} for s in range(3)}
    equal4 = {s: {"A": 0.1, "B": 0.1, "C": 0.11, "D": 0.12 + 0.001 * s} for s in range(3)}
    under = {s: {"A": 0.1, "B": 0.1, "C": 0.11, "D": 0.2 + 0.002 * s} for s in range(3)}
    check(V.a16({"v13": rising, "v14": equal4, "v14u": under}, under="v14u"), "reproduced", "A16")
    j = check(V.a16({"v13": rising, "v14": equal4}), "inconclusive")  # the under-iterated half not judged
    assert "not judged" in j.evidence["an under-iterated loop inflates alpha"]
    flat = {s: {"A": 0.1, "B": 0.1, "C": 0.1} for s in range(3)}
    check(V.a16({"v13": flat, "v14": equal4}), "not reproduced")
    with pytest.raises(ValueError, match="A16 needs at least one unit"):
        V.a16({"v10": {0: {"A": 0.1}}})
    # seeds only the under-iterated half reads (amendment 14): v14's seeds 3 and 4, whose last loop sits below its
    # first, would break the first half; left out of it, they still enter v14u - v14
    late = {s: {"A": 0.1, "B": 0.1, "C": 0.11, "D": 0.05} for s in (3, 4)}
    wide = {"v13": rising, "v14": equal4 | late, "v14u": under | {s: under[0] for s in (3, 4)}}
    assert V.a16(wide, under="v14u").verdict != "reproduced"
    j = check(V.a16(wide, under="v14u", extended=[3, 4]), "reproduced")
    assert sorted(j.evidence["alpha differentiates by loop: v14"]) == ["pooled", "s0", "s1", "s2"]
    assert [k for k in j.evidence["an under-iterated loop inflates alpha: v14u - v14"] if k[:1] == "s"] == [
        "s0", "s1", "s2", "s3", "s4"]


def test_a20_decides_its_measurable_half_and_names_the_other():
    # no pad: the measurable half holds, the other is not testable, so the claim is at best inconclusive (amendment 18)
    j = check(V.a20({0: {"PT": 0.0, "SFT": 0.2}, 1: {"PT": 0.0, "SFT": 0.1}}, "corrected", "x"), "inconclusive", "A20")
    assert "not testable" in j.criterion and "not testable" in j.evidence["generates better"]
    assert j.outcomes == {"never emits pad": "reproduced", "generates better": "not testable"}
    check(V.a20({0: {"PT": 0.01, "SFT": 0.2}, 1: {"PT": 0.0, "SFT": 0.1}}, "corrected", "x"), "not reproduced")
    none = V.a20({0: {"PT": 0.0, "SFT": 0.2}, 1: {"PT": 0.0, "SFT": 0.1}}, "corrected", "x", {0: 600, 1: 900})
    assert none.evidence["rule-of-three 95% upper bound on the PT pad rate"] == pytest.approx(3 / 1500)
    some = V.a20({0: {"PT": 0.01, "SFT": 0.2}, 1: {"PT": 0.0, "SFT": 0.1}}, "corrected", "x", {0: 600, 1: 900})
    assert some.evidence["PT pads emitted"] == 6 and "rule-of-three 95% upper bound on the PT pad rate" not in (
        some.evidence)
    with pytest.raises(ValueError, match="pt_tokens needs a positive token count for every seed"):
        V.a20({0: {"PT": 0.0, "SFT": 0.2}}, "corrected", "x", {1: 10})


def test_a18_is_a_check_under_the_paper_form_and_a_claim_under_the_residual_form():
    check(V.a18({"v3": {0: 0.9, 1: 0.8}}, "paper", "p"), "check passed", "A18")
    check(V.a18({"v3": {0: 0.9, 1: 0.3}}, "paper", "p"), "check failed")
    check(V.a18({"v3": {0: 0.9, 1: 0.85, 2: 0.88}}, "extension", "r"), "reproduced")
    check(V.a18({"v3": {0: 0.1, 1: 0.12, 2: 0.11}}, "extension", "r"), "not reproduced")
    check(V.a18({"v3": {0: 0.1, 1: 0.9, 2: 0.5}}, "extension", "r"), "inconclusive")


def test_a19():
    weak_s, weak_l = same(E(0.2, 0.19, 0.21)), same(E(0.35, 0.34, 0.36))
    check(V.a19({"v3": weak_s, "v5": weak_l}, "corrected", "w", "v3", "v5"), "reproduced", "A19")
    check(V.a19({"v3": weak_s, "v5": same(E(0.8, 0.79, 0.81))}, "corrected", "w", "v3", "v5"), "not reproduced")
    check(V.a19({"v3": weak_s, "v5": SPLIT}, "corrected", "w", "v3", "v5"), "inconclusive")
    with pytest.raises(ValueError, match="same seeds"):
        V.a19({"v3": {0: UP}, "v5": {1: UP}}, "paper", "w", "v3", "v5")


def test_b1_b2():
    tot = same(E(0.7, 0.69, 0.71))
    app, cal = same(E(0.5, 0.49, 0.51)), same(E(0.1, 0.09, 0.11))
    check(V.b1({"m": app}, {"m": cal}, {"m": tot}), "reproduced", "B1")
    check(V.b1({"m": same(E(0.69, 0.68, 0.7))}, {"m": same(NIL)}, {"m": tot}), "not reproduced")
    check(V.b1({"m": app}, {"m": seeds(E(0.1, 0.09, 0.11), E(-0.1, -0.11, -0.09), E(0.1, 0.09, 0.11))},
               {"m": tot}), "inconclusive")
    check(V.b2({"m": same(UP)}, same(DOWN)), "reproduced", "B2")
    check(V.b2({"m": same(UP)}, same(UP), "repeat"), "not reproduced")
    check(V.b2({"m": SPLIT}, same(DOWN)), "inconclusive")
    with pytest.raises(ValueError, match="control must be"):
        V.b2({"m": same(UP)}, same(DOWN), "twice")


def test_q1_answers_with_the_largest_share_paid_for_by_bonferroni():
    hi, lo = same(E(0.5, 0.49, 0.51)), same(E(0.05, 0.04, 0.06))
    j = check(V.q1({"a": {"s": hi, "l": hi}, "b": {"s": lo, "l": lo}}), "yes", "Q1")
    assert j.outcomes == {"a": "yes", "b": "no"} and "Bonferroni" in j.criterion
    check(V.q1({"a": {"s": lo, "l": lo}, "b": {"s": lo, "l": lo}}), "no")
    check(V.q1({"a": {"s": hi, "l": lo}, "b": {"s": lo, "l": lo}}), "inconclusive")
    # above a fifth at 95% but not at the Bonferroni level over many probes: not "yes"
    edge = seeds(E(0.245, 0.24, 0.25), E(0.26, 0.255, 0.265), E(0.275, 0.27, 0.28))
    fam = {f"p{i}": {"s": edge} for i in range(7)}
    assert V.share_answer({"s": edge}) == "yes"
    j = check(V.q1(fam, uncentred=fam), "inconclusive")
    assert "no probe's answer changes" in j.criterion
    # the basis as every other claim's: seeds pooled, how units combine, and what more seeds would do when undecided
    assert j.basis.startswith("pooled over 3 seeds") and "Bonferroni level over the 7 probes" in j.basis
    spread = seeds(E(0.1, 0.09, 0.11), E(0.3, 0.29, 0.31), E(0.2, 0.19, 0.21))  # its pooled interval holds 0.2
    j = check(V.q1({"a": {"s": spread}}), "inconclusive")
    assert "undecided at 3 seeds" in j.basis
    with pytest.raises(ValueError, match="same probes"):
        V.q1(fam, uncentred={"p0": fam["p0"]})


def test_b3_b4():
    small, dense = same(E(0.1, 0.09, 0.11)), same(E(0.5, 0.49, 0.51))
    diff = same(E(-0.4, -0.41, -0.39))
    check(V.b3({"single small": small}, dense, {"single small": diff}, "head/diagonal", "paper"), "reproduced", "B3")
    check(V.b3({"single small": same(E(0.6, 0.59, 0.61))}, dense, {"single small": same(E(0.1, 0.09, 0.11))},
               "loop/tuned", "extension"), "not reproduced")
    check(V.b3({"single small": small}, dense, {"single small": SPLIT}, "head/diagonal", "corrected"),
          "inconclusive")
    with pytest.raises(ValueError, match="pairs seeds"):
        V.b3({"m": small}, {0: UP}, {"m": diff}, "p", "paper")
    with pytest.raises(ValueError, match="paired"):
        V.b3({"m": small}, dense, {}, "p", "paper")
    check(V.b4(dense, 4, 5), "reproduced", "B4")
    check(V.b4(small, 4, 5), "not reproduced")
    check(V.b4(seeds(E(0.5, 0.49, 0.51), E(0.05, 0.04, 0.06), E(0.2, 0.19, 0.21)), 4, 5), "inconclusive")


def test_b5():
    fixed, low = same(E(0.5, 0.49, 0.51)), same(E(0.05, 0.04, 0.06))
    check(V.b5(fixed, low, {0: 1.5, 1: 1.5, 2: 1.5}, {0: 1.0, 1: 1.05, 2: 1.02}), "reproduced", "B5")
    check(V.b5(fixed, same(E(0.8, 0.79, 0.81)), {0: 1.5, 1: 1.5, 2: 1.5}, {0: 1.0, 1: 1.05, 2: 1.02}),
          "not reproduced")
    check(V.b5(fixed, seeds(E(0.05, 0.04, 0.06), E(0.9, 0.89, 0.91), E(0.05, 0.04, 0.06)),
               {0: 1.5, 1: 1.5, 2: 1.5}, {0: 1.0, 1: 1.05, 2: 1.02}), "inconclusive")


def test_b6_is_a_check_of_the_telescoping_sum():
    t = {"application count": same(E(0.5, 0.49, 0.51)), "distinct depth": same(E(0.1, 0.09, 0.11)),
         "block composition": same(E(0.0, -0.01, 0.01)), "calibration": same(E(0.05, 0.04, 0.06)),
         "total": same(E(0.6, 0.59, 0.61))}
    j = check(V.b6({"m": t}), "check passed", "B6")
    assert j.protocol == "extension" and "calibration" in j.evidence["m"]
    # each term's share of the total, pooled over seeds (a ratio per seed): 0.5 / 0.6 and 0.1 / 0.6
    assert j.evidence["m"]["application count / total"]["pooled"]["point"] == pytest.approx(0.5 / 0.6)
    assert j.evidence["m"]["distinct depth / total"]["pooled"]["point"] == pytest.approx(0.1 / 0.6)
    assert "total / total" not in j.evidence["m"]
    with pytest.raises(ValueError, match="telescope"):
        V.b6({"m": t | {"total": same(E(0.9, 0.89, 0.91))}})


def test_q7_is_judged_on_the_preselected_configuration_without_its_selection_seed():
    fast, slow = seeds(E(1.0, 0.9, 1.1), E(1.9, 1.85, 1.95), E(1.92, 1.88, 1.96)), same(E(1.1, 1.05, 1.15))
    j = check(V.q7({"d1 L2": fast, "d2 L2": slow}), "yes", "Q7")  # seed 0 (slow there) is not judged
    assert j.evidence["selected"] == "d1 L2" and j.evidence["d1 L2"]["pooled"]["seeds"] == 2
    check(V.q7({"d1 L2": slow}), "no")
    check(V.q7({"d1 L2": seeds(E(1.0, 0.9, 1.1), E(1.9, 1.85, 1.95), E(1.2, 1.15, 1.25))}), "inconclusive")
    with pytest.raises(ValueError, match="pre-selected"):
        V.q7({"d4 L4": fast})
    with pytest.raises(ValueError, match="other than the selection seed"):
        V.q7({"d1 L2": {0: UP}})


def test_q8_q9():
    check(V.q8({0: 10.0, 1: 12.0, 2: 11.0}, 16, 0.1, 0.1, "v3"), "yes", "Q8")
    check(V.q8({0: 15.5, 1: 16.0, 2: 15.8}, 16, 0.1, 0.1, "v3"), "no")
    check(V.q8({0: 10.0, 1: 16.0, 2: 14.0}, 16, 0.1, 0.1, "v3"), "inconclusive")
    below, above = same(E(-0.02, -0.03, -0.01)), same(E(0.02, 0.01, 0.03))
    j = check(V.q9({"v3/maxprob/eps0.1": below, "v4/maxprob/eps0.1": below}, 0.1), "yes", "Q9")
    assert j.outcomes == {"v3/maxprob/eps0.1": "reproduced", "v4/maxprob/eps0.1": "reproduced"}
    check(V.q9({"v3/maxprob/eps0.1": below, "v4/maxprob/eps0.1": above}, 0.1), "no")  # one unit above eps: no
    check(V.q9({"v3/maxprob/eps0.1": seeds(E(-0.02, -0.03, -0.01), E(0.01, 0.0, 0.02), E(0.0, -0.01, 0.01))}, 0.1),
          "inconclusive")
    check(V.q9({"v3/maxprob/eps0.1": below, "v4/maxprob/eps0.1": same(NIL)}, 0.1), "inconclusive")  # one at eps
    with pytest.raises(ValueError, match="Q9 needs at least one unit"):
        V.q9({}, 0.1)
    assert V.q9({}, 0.1, ["v3/maxprob/eps0.1"]).verdict == "inconclusive"  # nothing certified: nothing to test
    j = V.q9({"v3/maxprob/eps0.2": below}, 0.1, ["v3/maxprob/eps0.1"])
    assert j.verdict == "yes" and j.evidence["never certified"] == ["v3/maxprob/eps0.1"]


def test_spread_lines_and_forest_rows_read_the_pooled_blocks():
    j = V.a14({"real": same(DOWN), "with pad": SPLIT})
    lines = V.spread_lines(j.evidence)
    assert len(lines) == 2 and "pooled" in lines[0] and "SESOI 0.02" in lines[0]
    rows = V.forest_rows(j.evidence)
    assert {r["unit"] for r in rows} == {"real", "with pad"}
    r = next(r for r in rows if r["unit"] == "real")
    assert r["hi"] < 0 and r["verdict"] == "reproduced" and r["threshold"] == 0


def test_side_words_follow_the_rules_precedence():
    j = V.a14({"nil": same(E(0.012, 0.011, 0.013)), "down": same(DOWN), "split": SPLIT})
    assert [V.side(j.evidence[u]) for u in ("nil", "down", "split")] == ["negligible", "below 0", "undecided"]
    assert V.side(j.evidence["nil"]["pooled"]) == "negligible"  # inside ±0.02 although it excludes 0


def test_every_rule_comes_from_the_preregistered_spec():
    assert V.rule("A13", "tied beats vanilla").sesoi == 0.02
    with pytest.raises(KeyError, match="no pre-registered part"):
        V.rule("A13", "a part nobody wrote")


def _numeric(x):
    try:
        return float(x)
    except ValueError:
        return None


def test_every_preregistered_rule_flips_at_its_boundary_on_both_sides():
    """Each numeric row of preregistered.csv, read through V.rule as the criteria read it: a narrow interval just on
    each side of each boundary the row implies (written here from the row's threshold t, SESOI d and side s, not
    from Rule.boundaries) gets the verdict docs/statistics.md §2 gives it. A threshold, SESOI or side read wrongly
    moves a boundary and fails here."""
    from tiedlm_lib.stats.inference import read_spec

    checked = 0

    def at(c):  # a narrow interval around c, narrower than the step e below
        return (c - 1e-3 * d, c + 1e-3 * d)

    for row in read_spec():
        t, d = _numeric(row["threshold"] or "0"), _numeric(row["sesoi"])
        if row["rule"] not in ("superiority", "equivalence", "noninferiority") or t is None or d is None:
            continue
        r = V.rule(row["claim"], row["part"])
        s = int(row["side"] or 1)
        assert (r.threshold, r.sesoi, r.side) == (t, d, s), row
        e = 0.01 * d  # a small step beyond a boundary
        if r.kind == "superiority":
            assert r.judge(*at(t + s * (d + e))) == "reproduced", row
            assert r.judge(*at(t - s * e)) == "not reproduced", row
            assert r.judge(t - e, t + d + e) == "inconclusive", row  # straddles the threshold
            inside = r.judge(*at(t + s * d / 2))  # clears t but lies inside ±d
            assert inside == ("not reproduced" if row["negligible"] == "yes" else "reproduced"), row
        elif r.kind == "equivalence":
            assert r.judge(*at(t + d - e)) == r.judge(*at(t - d + e)) == "reproduced", row
            assert r.judge(*at(t + d + e)) == r.judge(*at(t - d - e)) == "not reproduced", row
            assert r.judge(t + d - e, t + d + e) == "inconclusive", row
        else:
            b = t + s * d  # the worse side's margin
            assert r.judge(*at(b - s * e)) == "reproduced", row
            assert r.judge(*at(b + s * e)) == "not reproduced", row
            assert r.judge(b - e, b + e) == "inconclusive", row
        checked += 1
    assert checked >= 30  # the spec's numeric rows, not a few


def test_criteria_refuse_empty_evidence_by_name():
    with pytest.raises(ValueError, match="A5 needs at least one unit"):
        V.a5({})
    with pytest.raises(ValueError, match="Q8 needs at least one unit"):
        V.q8({}, 16, 0.1, 0.1, "v3")
    with pytest.raises(ValueError, match="no seed's estimate"):
        V.a14({"real": {}})


def test_ratio_keeps_the_document_error_by_the_delta_method():
    """Against a simulation of two independent normal estimates with small relative errors, the delta-method
    interval of a / b matches the simulated ratio's 2.5-97.5% range to a few percent; b's point 0 is undefined."""
    import numpy as np

    from tiedlm_lib.stats.bootstrap import Estimate

    z = 1.959963984540054
    a, b = Estimate(0.6, 0.6 - z * 0.02, 0.6 + z * 0.02), Estimate(1.5, 1.5 - z * 0.03, 1.5 + z * 0.03)
    r = V.ratio(a, b)
    rng = np.random.default_rng(0)
    sim = rng.normal(0.6, 0.02, 200_000) / rng.normal(1.5, 0.03, 200_000)
    lo, hi = np.percentile(sim, [2.5, 97.5])
    assert r.point == pytest.approx(0.4)
    assert (r.hi - r.lo) == pytest.approx(hi - lo, rel=0.03) and r.lo == pytest.approx(lo, abs=0.003)
    assert math.isnan(V.ratio(a, Estimate(0.0, -0.1, 0.1)).point)
    zero = V.ratio(Estimate(0.0, -0.04, 0.04), b)
    assert zero.point == 0 and zero.hi == pytest.approx(0.04 / 1.5)
    # a share whose total is uncertain is uncertain: B1 reads the ratio's interval, not a bare point
    wide = V._shares({0: a}, {0: Estimate(1.5, 0.5, 2.5)})[0]
    assert wide.hi - wide.lo > 5 * (r.hi - r.lo)


# --- keep last: reads what every test above produced ----------------------------------------------------------------

CHECKS = {"A18": set(V.CHECK), "B6": set(V.CHECK)}


# --- amendment 18: one source for every rule, every route that decides, the withdrawn and post-hoc rules ---------

def _with_csv(monkeypatch, edit):
    """Read the claims through a preregistered.csv changed by ``edit(rows)``."""
    from tiedlm_lib.stats import inference as inf

    rows = [dict(r) for r in inf.read_spec()]
    edit(rows)
    monkeypatch.setattr(inf, "read_spec", lambda: rows)
    V._spec.cache_clear()


def _set(rows, claim, part, **kw):
    hit = [r for r in rows if r["claim"] == claim and r["part"] == part]
    assert len(hit) == 1, (claim, part)
    hit[0].update({k: str(v) for k, v in kw.items()})


def test_the_csv_drives_both_the_verdict_and_its_criterion_text(monkeypatch):
    wide = E(0.1, 0.09, 0.11)  # inside +/-0.2 but outside +/-0.05
    before5, before3 = V.q5(same(E(-0.1, -0.11, -0.09)), same(UP)), V.q3({"v3": same(wide)}, {"v3": same(UP)})
    assert before5.verdict == "yes" and "+/-0.05" in before5.criterion
    assert before3.verdict == "no" and "+/-0.05" in before3.criterion
    try:
        _with_csv(monkeypatch, lambda rows: (_set(rows, "Q5", "penalty specific to loop-input phantom", sesoi=0.2),
                                             _set(rows, "Q3", "block form drives A1", sesoi=0.2)))
        after5 = V.q5(same(E(-0.1, -0.11, -0.09)), same(UP))
        after3 = V.q3({"v3": same(wide)}, {"v3": same(UP)})
        assert after5.verdict == "no" and "+/-0.2" in after5.criterion and "0.05" not in after5.criterion
        assert after3.verdict == "yes" and "+/-0.2" in after3.criterion and "0.05" not in after3.criterion
        _with_csv(monkeypatch, lambda rows: _set(rows, "A15", "up to three loops then regresses", negligible="yes"))
        assert "inside +/-0.02" in V.a15({u: same(E(0.01 * s, 0.01 * s - 0.001, 0.01 * s + 0.001))
                                          for u, s in V.A15_WANT.items()}).criterion
    finally:
        V._spec.cache_clear()


def test_a15_and_q4_multi_loop_pairs_have_no_inside_sesoi_route():
    small = {u: same(E(0.01 * s, 0.01 * s - 0.002, 0.01 * s + 0.002)) for u, s in V.A15_WANT.items()}  # paper-sized
    j = V.a15(small)
    assert j.verdict == "reproduced" and "inside" not in j.criterion  # the steps clear 0: nothing rules them out
    q = V.q4({"3 loops - 2 loops": same(NIL), "tied - vanilla": same(NIL)}, "3 loops - 2 loops")
    assert q.verdict == "inconclusive" and q.outcomes == {"3 loops - 2 loops": "inconclusive", "tied - vanilla": "no"}
    assert "withdrawn" in q.criterion


def test_a9_is_shown_under_section_3s_sesoi_beside_its_recorded_margin():
    gap = same(E(0.08, 0.07, 0.09))  # below the recorded +0.1, above section 3's +0.05
    j = V.a9(0.5, 0.5, gap, 16)
    assert j.verdict == "reproduced" and j.outcomes["short at 0.05"] == "not reproduced"
    assert "it would be not reproduced" in j.basis and "post hoc" in j.basis


def test_the_seeds_to_decide_cover_every_route_and_take_the_cheapest():
    from tiedlm_lib.stats import inference as inf

    up = inf.Rule("superiority", 0.05, side=1)
    near = [E(x, x - 0.01, x + 0.01) for x in (0.02, 0.12, -0.05, 0.10, 0.06)]  # mean +0.05 above 0, spread wide
    routes = inf.route_seeds(near, up)
    assert set(routes) == {"reproduced"}  # on the claimed side, at the SESOI: only reproducing is on the cards
    against = [E(-x, -x - 0.01, -x + 0.01) for x in (0.02, 0.12, -0.05, 0.10, 0.06)]
    assert set(inf.route_seeds(against, up, m=2)) == {"not reproduced (other side)"}
    tiny = [E(x, x - 0.002, x + 0.002) for x in (0.01, -0.03, 0.04, -0.02, 0.02)]  # mean +0.004, inside +/-0.05
    assert set(inf.route_seeds(tiny, up)) == {"not reproduced (inside ±SESOI)"}
    eq = inf.Rule("equivalence", 0.05)
    assert set(inf.route_seeds(tiny, eq)) == {"reproduced"}
    assert set(inf.route_seeds([E(x + 0.2, x + 0.19, x + 0.21) for x in (0.01, -0.3, 0.3)], eq)) == {
        "not reproduced (beyond ±SESOI)"}
    # the claim: reproducing needs every undecided unit, not reproducing needs one
    assert V.seeds_to_decide({"a": {"reproduced": 30}, "b": {"not reproduced (other side)": 12}}) == (
        12, "not reproduced (other side) in b")
    assert V.seeds_to_decide({"a": {"reproduced": 8}, "b": {"reproduced": 9}}) == (9, "reproduced in every "
                                                                                      "undecided unit")
    assert V.seeds_to_decide({"a": {"reproduced": None}}) == (None, "")
    # in a verdict's basis
    j = V.a1({"v3": seeds(E(0.3, 0.29, 0.31), E(-0.05, -0.06, -0.04), E(0.35, 0.34, 0.36))},
             {"v3": same(E(0.0, -0.001, 0.001))}, "masked", "corrected")
    assert j.verdict == "inconclusive" and "would decide it at the distances observed (reproduced" in j.basis


def test_every_outcome_of_every_criterion_is_reached(request):
    """Each claim's function returns each verdict it can return in some test above, except the outcomes
    ``V.UNREACHABLE`` declares impossible, with its reason."""
    others = {n for n in dir(request.module) if n.startswith("test_")} - {request.node.originalname}
    if not others <= RAN:
        pytest.skip(f"needs every test of this module to have run first ({len(others - RAN)} did not)")
    missing = {}
    for name in V.judgement_names():
        cid = name.upper()
        want = {"yes", "no", "inconclusive"} if cid[0] == "Q" else {"reproduced", "not reproduced", "inconclusive"}
        if cid == "B6":
            want = set()
        want |= CHECKS.get(cid, set())
        lacking = want - V.UNREACHABLE.get(cid, {}).keys() - SEEN.get(cid, set())
        if lacking:
            missing[cid] = sorted(lacking)
    assert not missing, f"outcomes no test produces: {missing}"
    for cid, why in V.UNREACHABLE.items():
        assert not (why.keys() & SEEN.get(cid, set())), f"{cid} reached an outcome declared unreachable"
