"""Every claim's criterion (tiedlm_lib.verdicts) reaches every outcome it can return, on synthetic estimates."""

import math

import pytest

from tiedlm_lib import verdicts as V
from tiedlm_lib.claims import validate_entry
from tiedlm_lib.stats import Estimate


def E(point, lo, hi):
    return Estimate(point, lo, hi)


UP, DOWN, NOISE = E(0.3, 0.1, 0.5), E(-0.3, -0.5, -0.1), E(0.0, -0.1, 0.1)


def seeds(*ests):
    return dict(enumerate(ests))


SEEN: dict[str, set[str]] = {}  # claim -> every verdict its own function produced in some test (read by the last)
RAN: set[str] = set()  # the tests of this module that ran to the end


@pytest.fixture(autouse=True)
def _ran(request):
    yield
    RAN.add(request.node.originalname)


def check(j, want, claim=None, record=True):
    """``record=False``: a judgement of the generic sign_claim, which does not count as its claim function's."""
    assert want is None or j.verdict == want, (j.verdict, j.basis, j.outcomes)
    if record:
        SEEN.setdefault(j.claim, set()).add(j.verdict)
    if claim:
        assert j.claim == claim
    entry = {"id": j.claim, "claim": "", "scale": "smoke", "notebook": "nb", "protocol": j.protocol,
             "verdict": j.verdict, "criterion": j.criterion, "evidence": j.evidence, "recorded": "now",
             "basis": j.basis}
    validate_entry(entry)  # every judgement is a well-formed ledger entry
    assert j.criterion.strip() and j.basis.strip()
    return j


def test_sign_claims_name_seeds_that_disagree_and_show_the_spread():
    j = check(V.sign_claim("A13", {"gap": seeds(UP, DOWN, UP)}, "below 0", "c"), "inconclusive", record=False)
    assert "seeds disagree on gap" in j.basis and j.outcomes == {"gap": "seeds disagree"}
    assert j.evidence["gap"]["between seeds"]["points spread wider than a per-seed CI"]
    check(V.sign_claim("A13", {"gap": seeds(DOWN, DOWN, DOWN)}, "below 0", "c"), "reproduced", record=False)
    check(V.sign_claim("A13", {"gap": seeds(UP, UP, UP)}, "below 0", "c"), "not reproduced", record=False)
    check(V.sign_claim("A13", {"gap": seeds(DOWN, NOISE, DOWN)}, "below 0", "c"), "inconclusive", record=False)
    one = check(V.sign_claim("A13", {"gap": seeds(DOWN)}, "below 0", "c"), "reproduced", record=False)
    assert "single-seed" in one.basis and "between seeds" not in one.evidence["gap"]
    with pytest.raises(ValueError, match="want must be"):
        V.sign_claim("A13", {"gap": seeds(DOWN)}, "up", "c")


@pytest.mark.parametrize("mem, short, want", [
    (0.5, seeds(E(0.03, 0.0, 0.06), E(0.02, -0.01, 0.05)), "reproduced"),
    (0.7, seeds(E(0.03, 0.0, 0.06)), "not reproduced"),
    (0.5, seeds(E(0.3, 0.2, 0.4), E(0.3, 0.2, 0.4)), "not reproduced"),
    (0.5, seeds(E(0.08, 0.05, 0.12)), "inconclusive"),
])
def test_a9(mem, short, want):
    check(V.a9(mem, 0.5, short, 30), want, "A9")


def test_a10_reports_the_size_against_the_papers_and_needs_growth():
    full = {0: 2.0, 1: 2.0}
    j = check(V.a10(seeds(UP, UP), full, 0.54, short_gap=seeds(E(0.1, 0.0, 0.2), E(0.1, 0.0, 0.2))), "reproduced")
    assert j.evidence["gap / full NLL (mean over seeds)"] == pytest.approx(0.15)
    assert j.evidence["ratio to the paper's"] == pytest.approx(0.15 / 0.54)
    check(V.a10(seeds(UP, UP), full, 0.54, short_gap=seeds(E(0.5, 0.4, 0.6), E(0.5, 0.4, 0.6))), "inconclusive")
    check(V.a10(seeds(DOWN, DOWN), full, 0.54), "not reproduced")
    check(V.a10(seeds(NOISE, UP), full, 0.54), "inconclusive")


def test_a3_on_the_long_phantom_run():
    lnv = math.log(512)
    near = {1: lnv - 0.2, 8: lnv - 0.5, 16: 3.0}
    far = {1: lnv - 0.2, 8: lnv - 2.0, 16: 3.0}
    check(V.a3(seeds(near, near), 512, 16), "reproduced", "A3")
    check(V.a3(seeds(far, far), 512, 16), "not reproduced")
    j = check(V.a3(seeds(near, far), 512, 16), "inconclusive")
    assert "seeds disagree" in j.basis
    with pytest.raises(ValueError, match="NLL at some k"):
        V.a3(seeds({1: 5.0}), 512, 16)


def test_q5():
    check(V.q5(seeds(DOWN, DOWN), seeds(UP, UP)), "yes", "Q5")
    check(V.q5(seeds(UP, UP), seeds(UP, UP)), "no")
    check(V.q5(seeds(NOISE, DOWN), seeds(UP, UP)), "inconclusive")


def test_a1_needs_the_gap_and_a_monotone_sweep():
    mono = {"small": {0: True, 1: True}}
    check(V.a1({"small": seeds(UP, UP)}, mono, "masked", "corrected"), "reproduced", "A1")
    check(V.a1({"small": seeds(UP, UP)}, {"small": {0: False, 1: False}}, "masked", "corrected"), "not reproduced")
    check(V.a1({"small": seeds(UP, UP)}, {"small": {0: True, 1: False}}, "masked", "corrected"), "inconclusive")
    check(V.a1({"small": seeds(DOWN, DOWN)}, mono, "masked", "corrected"), "not reproduced")
    check(V.a1({"small": seeds(UP, NOISE)}, mono, "masked", "corrected"), "inconclusive")


def test_a2_reports_the_gap_ratio_beside_the_pointwise_test():
    j = check(V.a2({1: seeds(DOWN, DOWN), 16: seeds(DOWN, DOWN)}, seeds(E(1, 0.9, 1.1), E(1, 0.9, 1.1)),
                   seeds(E(0.8, 0.7, 0.9), E(0.6, 0.5, 0.7)), "masked", "corrected", 0.74), "reproduced", "A2")
    assert j.evidence["depth gap ratio large/small"] == {"s0": pytest.approx(0.8), "s1": pytest.approx(0.6)}
    check(V.a2({1: seeds(UP), 16: seeds(DOWN)}, seeds(UP), seeds(UP), "masked", "corrected", 0.74), "not reproduced")
    check(V.a2({1: seeds(NOISE), 16: seeds(DOWN)}, seeds(UP), seeds(UP), "masked", "corrected", 0.74),
          "inconclusive")


def test_q3():
    check(V.q3({"small": seeds(NOISE)}, {"small": seeds(UP)}), "yes", "Q3")
    check(V.q3({"small": seeds(UP)}, {"small": seeds(UP)}), "no")
    check(V.q3({"small": seeds(NOISE)}, {"small": seeds(NOISE)}), "inconclusive")


def test_a4_and_q2():
    args = (0.5, 0.7, "corrected", "masked", "final")
    assert V.a4_judged(0.4, {0: 14.0, 1: 16.0}, 16) and not V.a4_judged(0.4, {0: 15.0, 1: 16.0}, 16)
    assert not V.a4_judged(0.0, {0: 1.0}, 16)  # tau 0 exits everywhere at k = 1: not an exit rule that is judged
    with pytest.raises(ValueError, match="average depth for tau 0.4"):
        V.a4_judged(0.4, {}, 16)
    a = check(V.a4({"small/tau0.4": seeds(UP, UP)}, *args), "reproduced", "A4")
    assert a.evidence["ratio to the paper's"] == pytest.approx(0.5 / 0.7)
    b = check(V.a4({"small/tau0.4": seeds(DOWN, DOWN)}, *args), "not reproduced")
    c = check(V.a4({"small/tau0.4": seeds(UP, DOWN)}, *args), "inconclusive")
    assert V.a4({}, *args).verdict == "inconclusive"
    assert [check(V.q2(x, a), None).verdict for x in (a, b, c)] == ["yes", "no", "inconclusive"]


def test_a5():
    check(V.a5({"small": {0: (3, 8), 1: (4, 9)}}), "reproduced", "A5")
    check(V.a5({"small": {0: (9, 8), 1: (9, 9)}}), "not reproduced")
    assert "seeds disagree" in check(V.a5({"small": {0: (3, 8), 1: (9, 8)}}), "inconclusive").basis


def test_a6_is_an_equivalence_test_with_the_stated_margin():
    gap = {"small": 2.0}  # margin = min(0.05, 0.2) = 0.05
    j = check(V.a6({"small": seeds(E(0.01, -0.02, 0.04), E(0.0, -0.03, 0.03))}, gap), "reproduced", "A6")
    assert j.evidence["small"]["margin"] == pytest.approx(0.05)
    check(V.a6({"small": seeds(E(0.2, 0.1, 0.3), E(0.3, 0.2, 0.4))}, gap), "not reproduced")
    # a small point estimate with a CI reaching past the margin is not "free": inconclusive, not reproduced
    check(V.a6({"small": seeds(E(0.01, -0.02, 0.06))}, gap), "inconclusive")
    assert V.a6({"small": seeds(E(0.01, -0.01, 0.03))}, {"small": 0.2}).evidence["small"]["margin"] == \
        pytest.approx(0.02)  # 10% of a 0.2-nat gap is the stricter margin


def test_a7_the_law_is_a_cross_model_test_that_can_fail():
    # multi NLL(1) - single NLL(K): well above the margin (max(0.05, 10% of 1.0) = 0.1) = the free exit costs the
    # quality depth buys
    j = check(V.a7({"small": seeds(E(0.5, 0.4, 0.6), E(0.4, 0.3, 0.5)), "large": seeds(E(0.3, 0.2, 0.4))},
                   {"small": 1.0, "large": 1.0}), "reproduced", "A7")
    assert j.evidence["small"]["margin"] == pytest.approx(0.1)
    # the paper's own numbers (+0.041, +0.047 against 1.91- and 1.41-nat gaps) sit inside the margin
    paper = V.a7({"7M": seeds(E(0.041, 0.031, 0.051)), "23M": seeds(E(0.047, 0.037, 0.057))},
                 {"7M": 1.91, "23M": 1.41})
    assert paper.verdict == "not reproduced"
    # a model that exits at k=1 as well as the deep model reads out at K breaks the law
    check(V.a7({"small": seeds(E(0.5, 0.4, 0.6)), "large": seeds(E(0.0, -0.02, 0.02))},
               {"small": 1.0, "large": 1.0}), "not reproduced")
    check(V.a7({"small": seeds(E(0.1, 0.07, 0.13))}, {"small": 1.0}), "inconclusive")
    # the verdict under each margin: the stated one is the larger (cautious for a claim that a difference exceeds it)
    j = check(V.a7({"small": seeds(E(0.035, 0.03, 0.04))}, {"small": 0.2}), "not reproduced")
    assert j.evidence["small"]["margin"] == pytest.approx(0.05)
    assert j.evidence["verdict by margin"] == {"stated": "not reproduced", "absolute 0.05 nats": "not reproduced",
                                               "relative 10% of the gap": "reproduced"}
    assert "relative 10% of the gap: reproduced" in j.criterion


def test_a8_is_non_inferiority():
    check(V.a8({"s": seeds(E(-0.2, -0.3, -0.1))}, {"s": 1.0}), "reproduced", "A8")  # better also passes
    check(V.a8({"s": seeds(E(0.2, 0.1, 0.3))}, {"s": 1.0}), "not reproduced")
    check(V.a8({"s": seeds(E(0.04, 0.01, 0.07))}, {"s": 1.0}), "inconclusive")
    # the verdict under each margin alone is given beside the stated one
    j = check(V.a8({"s": seeds(E(0.035, 0.03, 0.04))}, {"s": 0.2}), "not reproduced")  # stated margin 0.02
    assert j.evidence["verdict by margin"]["absolute 0.05 nats"] == "reproduced"
    assert "absolute 0.05 nats: reproduced" in j.criterion


def test_a11():
    ok = {"tau": 0.2, "pad_share": 0.7, "sft_minus_pt_with_pad": DOWN, "sft_minus_pt_real": UP}
    agree = {**ok, "tau": 0.8}
    check(V.a11(seeds(ok, ok), "paper", "draws"), "reproduced", "A11")
    check(V.a11(seeds(agree, agree), "paper", "draws"), "not reproduced")
    assert "seeds disagree" in check(V.a11(seeds(ok, agree), "paper", "draws"), "inconclusive").basis
    check(V.a11(seeds({**ok, "pad_share": 0.3}), "paper", "draws"), "inconclusive")
    check(V.a11(seeds({**ok, "sft_minus_pt_real": NOISE}), "paper", "draws"), "inconclusive")  # no evidence
    check(V.a11(seeds({**ok, "sft_minus_pt_real": DOWN}), "paper", "draws"), "not reproduced")  # same sign


def test_a12_states_what_the_corrected_row_implies():
    pt = {0: 3.0, 1: 3.0}
    paper, corr = V.a12(seeds(UP, UP), seeds(UP, UP), pt, 0.16)
    check(paper, "reproduced", "A12") and check(corr, "reproduced")
    assert "survives" in corr.evidence["implication"] and paper.protocol == "paper" and corr.protocol == "corrected"
    _, corr = V.a12(seeds(UP, UP), seeds(DOWN, DOWN), pt, 0.16)
    check(corr, "not reproduced")
    assert "attributable to training on pad targets" in corr.criterion
    _, corr = V.a12(seeds(UP, UP), seeds(NOISE, DOWN), pt, 0.16)
    check(corr, "inconclusive")
    assert "does not settle it" in corr.criterion
    paper, corr = V.a12(seeds(DOWN, DOWN), seeds(DOWN, DOWN), pt, 0.16)
    check(paper, "not reproduced") and check(corr, "not reproduced")
    assert "no cost to attribute" in corr.criterion
    _, corr = V.a12(seeds(NOISE), seeds(UP), {0: 3.0}, 0.16)
    assert "not a pad-target effect" in corr.criterion


def test_a13_a14_a17_q4():
    j = check(V.a13(seeds(DOWN, DOWN), {0: 3.0, 1: 3.0}, -0.011), "reproduced", "A13")
    assert j.evidence["ratio to the paper's"] == pytest.approx((-0.3 / 3.0) / -0.011)
    check(V.a13(seeds(UP, UP), {0: 3.0, 1: 3.0}, -0.011), "not reproduced")
    check(V.a13(seeds(DOWN, UP), {0: 3.0, 1: 3.0}, -0.011), "inconclusive")  # seeds disagree
    check(V.a14({"real": seeds(DOWN), "with pad": seeds(DOWN)}), "reproduced", "A14")
    check(V.a14({"real": seeds(DOWN), "with pad": seeds(UP)}), "not reproduced")
    check(V.a14({"real": seeds(DOWN), "with pad": seeds(NOISE)}), "inconclusive")
    check(V.a17({"a": seeds(DOWN), "b": seeds(DOWN)}), "reproduced", "A17")
    check(V.a17({"a": seeds(DOWN), "b": seeds(UP)}), "not reproduced")
    check(V.a17({"a": seeds(DOWN, DOWN), "b": seeds(DOWN, NOISE)}), "inconclusive")
    check(V.a17({"a": seeds(DOWN, UP), "b": seeds(DOWN, DOWN)}), "inconclusive")  # seeds disagree on a
    check(V.q4({"g": seeds(DOWN, DOWN)}, "g"), "yes", "Q4")
    check(V.q4({"g": seeds(NOISE, NOISE)}, "g"), "no")
    check(V.q4({"g": seeds(DOWN, UP)}, "g"), "inconclusive")


def test_a15_a16():
    ok = {"3 loops - 1 loop": seeds(DOWN), "3 loops - 2 loops": seeds(DOWN), "4 loops - 3 loops": seeds(UP)}
    check(V.a15(ok), "reproduced", "A15")
    check(V.a15({**ok, "3 loops - 1 loop": seeds(UP)}), "not reproduced")
    check(V.a15({**ok, "3 loops - 2 loops": seeds(NOISE)}), "inconclusive")
    last = {"A": 0.1, "B": 0.2}
    first = {"A": 0.3, "B": 0.2}
    check(V.a16({"v13": {0: last, 1: last}, "v10": {0: {"A": 0.1}}}), "reproduced", "A16")
    check(V.a16({"v13": {0: first, 1: first}}), "not reproduced")
    check(V.a16({"v13": {0: last, 1: first}}), "inconclusive")


def test_a20_cannot_be_reproduced_on_a_proxy():
    check(V.a20(seeds({"PT": 0.0, "SFT": 0.1}), "paper", "w"), "inconclusive", "A20")
    check(V.a20(seeds({"PT": 0.05, "SFT": 0.1}), "paper", "w"), "not reproduced")
    check(V.a20(seeds({"PT": 0.0, "SFT": 0.0}), "paper", "w"), "not reproduced")


def test_a18_a19():
    check(V.a18({"small": {0: 0.9, 1: 0.8}}, "paper", "w"), "reproduced", "A18")
    check(V.a18({"small": {0: 0.05, 1: 0.02}}, "paper", "w"), "not reproduced")
    check(V.a18({"small": {0: 0.3}}, "paper", "w"), "inconclusive")
    weak, weaker = E(0.3, 0.2, 0.4), E(0.2, 0.1, 0.3)
    weakest = E(0.1, 0.05, 0.15)
    check(V.a19({"v3": seeds(weakest), "v5": seeds(weak)}, "paper", "w", "v3", "v5"), "reproduced", "A19")
    # one seed: the conservative CI of the size difference (0.2 - 0.3, ...) must exclude 0
    check(V.a19({"v3": seeds(weaker), "v5": seeds(weak)}, "paper", "w", "v3", "v5"), "inconclusive")
    # several seeds: the t-interval of the per-seed differences
    j = check(V.a19({"v3": seeds(weaker, weaker, E(0.21, 0.11, 0.31)), "v5": seeds(weak, E(0.32, 0.22, 0.42), weak)},
                    "paper", "w", "v3", "v5"), "reproduced")
    assert j.evidence["larger size stronger"] and j.evidence["r(v5) - r(v3)"]["interval"][0] > 0
    check(V.a19({"v3": seeds(E(0.7, 0.6, 0.8)), "v5": seeds(weak)}, "paper", "w", "v3", "v5"), "not reproduced")
    # one seed above 0.5 and one weak: the seeds split, so not a contradiction
    check(V.a19({"v3": seeds(E(0.7, 0.6, 0.8), weakest), "v5": seeds(weak, weak)}, "paper", "w", "v3", "v5"),
          "inconclusive")
    check(V.a19({"v3": seeds(weak), "v5": seeds(weaker)}, "paper", "w", "v3", "v5"), "inconclusive")
    # the larger size clearly weaker in every seed: the ordering half contradicts the claim
    check(V.a19({"v3": seeds(E(0.4, 0.35, 0.45), E(0.41, 0.36, 0.46)), "v5": seeds(weakest, E(0.12, 0.07, 0.17))},
                "paper", "w", "v3", "v5"), "not reproduced")
    # no probe at all at one size, in every seed
    check(V.a19({"v3": seeds(E(-0.1, -0.2, 0.0)), "v5": seeds(weak)}, "paper", "w", "v3", "v5"), "not reproduced")
    # a t-interval above 0 is not enough when a seed's own CI says the opposite
    check(V.a19({"v3": seeds(weakest, weakest, E(0.45, 0.42, 0.48)), "v5": seeds(weak, weak, E(0.25, 0.2, 0.3))},
                "paper", "w", "v3", "v5"), "inconclusive")
    with pytest.raises(ValueError, match="same seeds"):
        V.a19({"v3": {0: weak}, "v5": {1: weak}}, "paper", "w", "v3", "v5")


def test_q6_asks_whether_the_conclusions_change():
    shift = {"m": seeds(UP, NOISE)}
    same, tau_hi = {0: ("holds", "holds"), 1: ("neither", "neither")}, {0: 0.9, 1: 0.6}
    # the level shift alone does not decide: seen sequences scored better (UP) with every conclusion unchanged is a no
    j = check(V.q6(same, tau_hi, shift), "no", "Q6")
    assert j.outcomes == {"s0": "unchanged", "s1": "unchanged"}
    lv = j.evidence["unseen - seen within the train-overlap draw (pooled)"]
    assert (lv["estimates"], lv["positive"], lv["CI above 0"], lv["CI below 0"]) == (2, 1, 1, 0)
    assert lv["mean"] == pytest.approx(0.15)
    assert j.evidence["s0"]["A11 on train-overlap draws"] == "holds"
    # an A11 outcome that differs between the draws, or rankings that disagree, changes a seed's conclusions
    check(V.q6({0: ("holds", "contradicted"), 1: ("contradicted", "holds")}, tau_hi, shift), "yes")
    check(V.q6(same, {0: 0.2, 1: 0.4}, shift), "yes")
    j = check(V.q6({0: ("holds", "contradicted"), 1: ("neither", "neither")}, tau_hi, shift), "inconclusive")
    assert "seeds disagree" in j.basis
    # a CI that straddles 0 on one draw only is no evidence of a change: that seed is undetermined
    j = check(V.q6({0: ("holds", "neither"), 1: ("neither", "neither")}, tau_hi, shift), "inconclusive")
    assert j.outcomes == {"s0": "undetermined", "s1": "unchanged"} and "undetermined" in j.basis
    assert V.q6({0: ("holds", "neither")}, {0: 0.1}, shift).outcomes == {"s0": "changed"}  # the rankings disagree
    with pytest.raises(ValueError, match="finite Kendall"):
        V.q6(same, {0: float("nan"), 1: 0.9}, shift)
    # τ exactly at the threshold counts as agreement
    assert V.q6(same, {0: V.Q6_TAU, 1: V.Q6_TAU}, {}).verdict == "no"
    assert isinstance(V.q6(same, tau_hi, {}).evidence["unseen - seen within the train-overlap draw (pooled)"], str)
    with pytest.raises(ValueError, match="Q6 needs at least one unit"):
        V.q6({}, {}, shift)
    with pytest.raises(ValueError, match="Kendall τ for each seed"):
        V.q6(same, {0: 0.9}, shift)


# --- section 10 ----------------------------------------------------------------------------------------------------

TOT = E(1.0, 0.9, 1.1)


def test_b1_b2():
    check(V.b1({"m": seeds(E(0.3, 0.2, 0.4))}, {"m": seeds(E(0.2, 0.1, 0.3))}, {"m": seeds(TOT)}), "reproduced", "B1")
    check(V.b1({"m": seeds(E(0.99, 0.9, 1.1))}, {"m": seeds(E(0.2, 0.1, 0.3))}, {"m": seeds(TOT)}),
          "not reproduced")  # one factor is the whole slope
    check(V.b1({"m": seeds(NOISE)}, {"m": seeds(E(0.2, 0.1, 0.3))}, {"m": seeds(TOT)}), "inconclusive")
    check(V.b2({"m": seeds(UP)}, seeds(DOWN)), "reproduced", "B2")
    check(V.b2({"m": seeds(UP)}, seeds(UP)), "not reproduced")
    check(V.b2({"m": seeds(NOISE)}, seeds(DOWN)), "inconclusive")
    # frozen(k) is this project's control: B1, B2 and B6 are recorded as extensions
    assert V.b1({"m": seeds(UP)}, {"m": seeds(UP)}, {"m": seeds(TOT)}).protocol == "extension"
    assert V.b2({"m": seeds(UP)}, seeds(DOWN)).protocol == "extension"
    # paper B's own repeat(1) control, on a multi-loop layout: protocol "paper", the control named in the criterion
    j = check(V.b2({"three loops": seeds(DOWN)}, seeds(DOWN), control="repeat"), "not reproduced")
    assert j.protocol == "paper" and "prefix(1) - repeat(1) above 0" in j.criterion and "frozen" not in j.criterion
    with pytest.raises(ValueError, match="control must be"):
        V.b2({"m": seeds(UP)}, seeds(DOWN), control="suffix")
    terms = {n: seeds(E(0.25, 0.2, 0.3)) for n in ("application count", "distinct depth", "block composition",
                                                  "calibration")}
    assert V.b6({"m": terms | {"total": seeds(E(0.75, 0.7, 0.8))}}).protocol == "extension"
    # a negative calibration term (the probe widens the gap) does not support B1
    check(V.b1({"m": seeds(E(0.3, 0.2, 0.4))}, {"m": seeds(E(-0.2, -0.3, -0.1))}, {"m": seeds(TOT)}), "inconclusive")


def test_q1_is_answered_per_probe_and_names_the_probe():
    lo, hi = E(0.1, 0.05, 0.15), E(0.5, 0.4, 0.6)
    shares = {"head/diagonal": {"small": seeds(lo, lo)}, "loop/tuned": {"small": seeds(hi, hi)}}
    j = check(V.q1(shares), "yes", "Q1")
    assert "loop/tuned" in j.criterion and "head/diagonal: no" in j.criterion
    assert j.outcomes == {"head/diagonal": "no", "loop/tuned": "yes"} and j.evidence["headline probe"] == "loop/tuned"
    # the answer is the pre-named probe's, not the largest share's
    j = check(V.q1({"head/diagonal": {"small": seeds(hi)}, "loop/tuned": {"small": seeds(lo)}}), "no")
    assert j.evidence["headline probe"] == V.HEADLINE_PROBE == "loop/tuned"
    check(V.q1({"head/diagonal": {"small": seeds(lo)}}, headline="head/diagonal"), "no")
    j = check(V.q1({"head/diagonal": {"small": seeds(lo, hi)}}, headline="head/diagonal"), "inconclusive")
    assert j.outcomes["head/diagonal"] == "seeds disagree"
    with pytest.raises(ValueError, match="pre-named probe"):
        V.q1({"head/diagonal": {"small": seeds(lo)}})
    assert V.share_answer({"m": seeds(E(0.2, 0.15, 0.25))}) == "inconclusive"
    # the uncentred intervals: recorded per probe, and a probe whose answer depends on the centring is named
    raw = {"head/diagonal": {"small": seeds(lo, lo)}, "loop/tuned": {"small": seeds(E(0.5, 0.15, 0.6))}}
    j = check(V.q1(shares, uncentred=raw), "yes")
    assert "changes for loop/tuned (yes centred, inconclusive uncentred)" in j.criterion
    assert j.evidence["loop/tuned"]["answer with uncentred intervals"] == "inconclusive"
    assert "no probe's answer changes" in V.q1(shares, uncentred=shares).criterion
    with pytest.raises(ValueError, match="same probes"):
        V.q1(shares, uncentred={"loop/tuned": raw["loop/tuned"]})


def test_b3_b4():
    dense = seeds(E(0.5, 0.4, 0.6))
    below, above, tied = seeds(E(-0.4, -0.5, -0.3)), seeds(E(0.2, 0.1, 0.3)), seeds(E(0.0, -0.1, 0.1))

    def d(ps):  # the paired looped - dense differences, one model
        return {"m": ps}

    check(V.b3({"m": seeds(E(0.05, 0.0, 0.1))}, dense, d(below), "head/diagonal", "paper"), "reproduced", "B3")
    check(V.b3({"m": seeds(E(0.5, 0.3, 0.6))}, dense, d(tied), "loop/tuned", "corrected"), "not reproduced")
    check(V.b3({"m": seeds(E(0.15, 0.1, 0.25))}, dense, d(below), "head/diagonal", "paper"), "inconclusive")
    # small, but the paired difference does not put it below the dense share: inconclusive
    j = check(V.b3({"m": seeds(E(0.05, 0.0, 0.1))}, dense, d(tied), "head/diagonal", "paper"), "inconclusive")
    assert j.evidence["looped below dense (paired CI < 0)"] == "0 of 1"
    # seeds are paired: each looped seed judged by its own paired difference
    looped, dense2 = seeds(E(0.05, 0.0, 0.08), E(0.15, 0.12, 0.18)), seeds(E(0.3, 0.1, 0.5), E(0.5, 0.3, 0.6))
    j = check(V.b3({"m": looped}, dense2, d(seeds(E(-0.25, -0.4, -0.05), E(-0.35, -0.5, -0.2))), "loop/tuned",
                   "corrected", "prefix(1) - prefix(L)"), "reproduced")
    assert "prefix(1) - prefix(L)" in j.criterion and j.evidence["m"]["per seed"] == {"s0": "holds", "s1": "holds"}
    assert "looped - dense (paired)" in j.evidence["m"]
    # small but above the dense share in every seed (paired difference above 0): "unlike dense models" fails
    check(V.b3({"m": seeds(E(0.15, 0.12, 0.18))}, seeds(E(0.05, 0.0, 0.1)), d(above), "head/diagonal", "paper"),
          "not reproduced")
    with pytest.raises(ValueError, match="pairs seeds"):
        V.b3({"m": seeds(E(0.1, 0, 0.1), E(0.1, 0, 0.1))}, seeds(E(0.5, 0.4, 0.6)), d(below), "head/diagonal",
             "paper")
    with pytest.raises(ValueError, match="paired looped - dense difference"):
        V.b3({"m": seeds(E(0.1, 0, 0.1), E(0.1, 0, 0.1))}, seeds(E(0.5, 0.4, 0.6), E(0.5, 0.4, 0.6)), d(below),
             "head/diagonal", "paper")
    check(V.b4(dense, 4, 5), "reproduced", "B4")
    check(V.b4(seeds(E(0.05, 0.0, 0.1)), 4, 5), "not reproduced")
    check(V.b4(seeds(E(0.2, 0.1, 0.3)), 4, 5), "inconclusive")


def test_b5():
    fixed, low = seeds(E(0.3, 0.25, 0.35)), seeds(E(0.05, 0.0, 0.1))
    check(V.b5(fixed, low, {0: 1.5}, {0: 1.05}), "reproduced", "B5")
    check(V.b5(low, fixed, {0: 1.5}, {0: 1.05}), "not reproduced")
    check(V.b5(fixed, low, {0: 1.05}, {0: 1.5}), "inconclusive")  # T moved the wrong way


def test_b6_can_fail_and_checks_the_telescoping_sum():
    def terms(app, dist, block, cal):
        return {"m": {"application count": seeds(app), "distinct depth": seeds(dist), "block composition": seeds(block),
                      "calibration": seeds(cal), "total": seeds(E(app.point + dist.point + block.point, 0.9, 1.1))}}

    check(V.b6(terms(E(0.5, 0.4, 0.6), E(0.3, 0.2, 0.4), E(0.2, 0.1, 0.3), E(0.1, 0.05, 0.15))), "reproduced", "B6")
    check(V.b6(terms(E(0.98, 0.9, 1.1), E(0.01, -0.1, 0.1), E(0.01, -0.1, 0.1), NOISE)), "not reproduced")
    check(V.b6(terms(E(0.5, 0.4, 0.6), E(0.5, -0.1, 0.9), E(0.0, -0.1, 0.1), NOISE)), "inconclusive")
    # B1's premise (application count and calibration above 0, neither the whole gap) does not decide B6: with no
    # second schedule term excluding 0 it is inconclusive
    j = check(V.b6(terms(E(0.5, 0.4, 0.6), E(0.3, -0.1, 0.7), E(0.2, -0.2, 0.6), E(0.4, 0.3, 0.5))), "inconclusive")
    assert "calibration" in j.evidence["m"] and j.outcomes["m"].startswith("1 of 3")
    bad = terms(E(0.5, 0.4, 0.6), E(0.3, 0.2, 0.4), E(0.2, 0.1, 0.3), NOISE)
    bad["m"]["total"] = seeds(E(2.0, 1.9, 2.1))
    with pytest.raises(ValueError, match="do not telescope"):
        V.b6(bad)


def test_spread_lines_put_each_seeds_ci_beside_the_spread():
    j = V.sign_claim("A13", {"gap": seeds(UP, DOWN, UP), "one": seeds(UP)}, "below 0", "c")
    lines = V.spread_lines(j.evidence)
    assert len(lines) == 1 and "gap: s0 +0.300 [+0.100, +0.500]" in lines[0] and "sd 0.346" in lines[0]
    assert "wider than a per-seed CI" in lines[0]


def test_every_claim_function_is_tested_here():
    import pathlib

    text = pathlib.Path(__file__).read_text()
    untested = [n for n in V.judgement_names() if f"V.{n}(" not in text]
    assert not untested, f"criteria without a test of their outcomes: {untested}"


def test_without_a_single_depth_gap_the_absolute_margin_stands_alone():
    j = check(V.a6({"s": seeds(E(0.01, -0.02, 0.04))}, {"s": -0.001}), "reproduced")
    assert j.evidence["s"]["margin"] == pytest.approx(0.05)


def test_forest_rows_take_the_spread_over_seeds_and_each_criterions_threshold():
    j = V.a6({"small": seeds(E(0.01, -0.02, 0.04), E(0.03, 0.0, 0.06))}, {"small": 2.0})
    (row,) = V.forest_rows(j.evidence)
    assert row["unit"] == "small" and row["point"] == pytest.approx(0.02) and row["threshold"] == pytest.approx(0.05)
    assert row["lo"] < 0.02 < row["hi"] and row["seeds"] == 2
    one = V.forest_rows(V.b4(seeds(E(0.5, 0.4, 0.6)), 4, 5).evidence)
    assert one == [{"unit": "dense", "point": 0.5, "lo": 0.4, "hi": 0.6, "seeds": 1, "threshold": 0.2}]
    nested = V.forest_rows(V.q3({"small": seeds(NOISE)}, {"small": seeds(UP)}).evidence)
    assert [r["unit"] for r in nested] == ["residual / small", "paper / small"]


# --- section 12 ----------------------------------------------------------------------------------------------------

def test_q7_selects_on_one_seed_and_confirms_on_the_others():
    fast, slow = E(1.8, 1.6, 2.0), E(1.1, 1.0, 1.2)
    j = check(V.q7({"d4 L4": seeds(fast, fast, fast), "d1 L2": seeds(slow, slow, slow)}), "yes", "Q7")
    assert j.evidence["selected"] == "d4 L4"
    check(V.q7({"d4 L4": seeds(slow, slow), "d1 L2": seeds(E(1.2, 1.0, 1.4), slow)}), "no")
    # the best configuration on the first seed is not confirmed on the second
    check(V.q7({"d4 L4": seeds(fast, E(1.5, 1.3, 1.7)), "d1 L2": seeds(slow, slow)}), "inconclusive")
    assert "same seed" in check(V.q7({"d4 L4": seeds(fast)}), "yes").basis


def test_q8_q9():
    check(V.q8({0: 10.0, 1: 12.0}, 16, 0.1, 0.1, "v3"), "yes", "Q8")
    check(V.q8({0: 15.5, 1: 16.0}, 16, 0.1, 0.1, "v3"), "no")
    assert "seeds disagree" in check(V.q8({0: 10.0, 1: 16.0}, 16, 0.1, 0.1, "v3"), "inconclusive").basis
    check(V.q9({"v3/s0": (3, 50), "v4/s0": (5, 50)}, 0.1), "yes", "Q9")
    check(V.q9({"v3/s0": (20, 50)}, 0.1), "no")  # 40% of splits against delta 10%
    check(V.q9({"v3/s0": (7, 50)}, 0.1), "inconclusive")  # above delta, not significantly


def test_criteria_refuse_empty_evidence_by_name():
    with pytest.raises(ValueError, match="A5 needs at least one unit"):
        V.a5({})
    with pytest.raises(ValueError, match="A16 needs at least one unit"):
        V.a16({"v13": {0: {"A": 0.1}}})  # a one-loop layout is no unit of A16
    with pytest.raises(ValueError, match="Q8 needs at least one unit"):
        V.q8({}, 16, 0.1, 0.1, "v3")


# --- keep last: reads what every test above produced ----------------------------------------------------------------

def test_every_outcome_of_every_criterion_is_reached(request):
    """Each claim's function returns each verdict it can return in some test above (a claim: reproduced / not
    reproduced / inconclusive; a question: yes / no / inconclusive), except the outcomes ``V.UNREACHABLE`` declares
    impossible, with its reason."""
    others = {n for n in dir(request.module) if n.startswith("test_")} - {request.node.originalname}
    if not others <= RAN:
        pytest.skip(f"needs every test of this module to have run first ({len(others - RAN)} did not)")
    missing = {}
    for name in V.judgement_names():
        cid = name.upper()
        want = {"yes", "no", "inconclusive"} if cid[0] == "Q" else {"reproduced", "not reproduced", "inconclusive"}
        lacking = want - V.UNREACHABLE.get(cid, {}).keys() - SEEN.get(cid, set())
        if lacking:
            missing[cid] = sorted(lacking)
    assert not missing, f"outcomes no test produces: {missing}"
    for cid, why in V.UNREACHABLE.items():
        assert not (why.keys() & SEEN.get(cid, set())), f"{cid} reached an outcome declared unreachable"
