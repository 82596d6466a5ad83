"""What a scale can test, from the ledger: each outcome of the rule on hand-made entries, the seeds that would
decide an underpowered claim, and the scale's own limits."""

from tiedlm_lib import testability as T

SCALE_LIMITS = T.SCALE_LIMITS


def _unit(mde, sesoi=0.05, need=4, seeds=3):
    return {"s0": [0.1, 0.0, 0.2], "pooled": {"point": 0.1, "interval": [0.0, 0.2], "seeds": seeds, "sesoi": sesoi,
                                              "MDE at these seeds": mde, "seeds to detect SESOI": need}}


def _entry(cid, verdict="reproduced", units=None, seeds=(0, 1, 2)):
    return {"id": cid, "protocol": "corrected", "verdict": verdict, "seeds": list(seeds),
            "evidence": {"part": units or {}}}


def test_each_outcome_of_the_rule():
    ok = T.testability_row(_entry("A4", units={"small": _unit(0.03), "large": _unit(0.05)}))
    assert ok["tested here"] == "yes" and ok["what would test it"] == "—" and ok["worst unit's MDE / SESOI"] == \
        "0.05 / 0.05"
    low = T.testability_row(_entry("A4", "inconclusive", {"small": _unit(0.03, need=4), "large": _unit(0.2, need=9)}))
    assert low["tested here"] == "underpowered" and low["what would test it"] == \
        "about 9 seeds to detect the SESOI in every unit" and low["worst unit's MDE / SESOI"] == "0.2 / 0.05"
    never = T.testability_row(_entry("A4", "inconclusive", {"small": _unit(None, need=None)}))
    assert never["tested here"] == "underpowered" and never["what would test it"] == "more than 50 seeds"
    assert never["worst unit's MDE / SESOI"] == "inf / 0.05"
    assert T.testability_row(_entry("A18", "check passed"))["tested here"] == "by construction"
    gone = T.testability_row(_entry("A21", "not testable", seeds=()))
    assert gone["tested here"] == "no" and gone["what would test it"] == SCALE_LIMITS["A21"]
    one = T.testability_row(_entry("A4", units={"small": _unit(0.5, seeds=1)}, seeds=(0,)))
    assert one["tested here"] == "single seed" and one["what would test it"].startswith("at least 2 seeds")


def test_a_claim_about_the_papers_scale_names_what_would_test_it():
    row = T.testability_row(_entry("A2", units={"k=1": _unit(0.01)}))
    assert row["tested here"] == "at this scale only" and row["what would test it"] == SCALE_LIMITS["A2"]
    row = T.testability_row(_entry("A10", "inconclusive", {"gap": _unit(0.3, need=12)}))
    assert row["what would test it"] == "about 12 seeds to detect the SESOI in every unit; " + SCALE_LIMITS["A10"]
    assert [r["claim"] for r in T.testability({"claims": [_entry("A1"), _entry("B1")]})] == ["A1", "B1"]
