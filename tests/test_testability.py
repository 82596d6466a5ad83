"""What a scale can test, from the ledger: each outcome of the rule on hand-made entries, what would change a
decided verdict, the seeds that would decide an undecided one by its cheapest route, and the scale's own limits."""

from tiedlm_lib.paper import testability as T

SCALE_LIMITS = T.SCALE_LIMITS
COL = "what would change or decide it"


def _unit(mde, sesoi=0.05, need=4, seeds=3, verdict="reproduced", sensitive=False, routes=None, observed=None):
    p = {"point": 0.1, "interval": [0.0, 0.2], "seeds": seeds, "sesoi": sesoi, "MDE at these seeds": mde,
         "seeds to detect SESOI": need, "verdict": verdict, "seed-sensitive": sensitive,
         "seeds to detect the observed distance": observed}
    if routes is not None:
        p["seeds to decide, by route"] = routes
    return {"s0": [0.1, 0.0, 0.2], "pooled": p}


def _entry(cid, verdict="reproduced", units=None, seeds=(0, 1, 2)):
    return {"id": cid, "protocol": "corrected", "verdict": verdict, "seeds": list(seeds),
            "evidence": {"part": units or {}}}


def test_a_decided_verdict_says_what_would_change_it_whatever_its_power():
    big = T.testability_row(_entry("A4", units={"small": _unit(0.6), "large": _unit(0.05, sensitive=True)}))
    assert big["tested here"] == "decided" and big["worst unit's MDE / SESOI"] == "0.6 / 0.05"
    assert big[COL] == "a new seed could land across the boundary in part / large (seed-sensitive)"
    calm = T.testability_row(_entry("A4", "not reproduced", {"small": _unit(0.6, verdict="not reproduced")}))
    assert calm["tested here"] == "decided"
    assert calm[COL] == "no new seed is predicted across its boundary at this scale"


def test_an_undecided_verdict_names_the_seeds_of_its_cheapest_route():
    low = T.testability_row(_entry("A4", "inconclusive", {
        "small": _unit(0.03), "large": _unit(0.2, verdict="inconclusive", routes={"not reproduced (inside ±SESOI)": 9}),
        "other": _unit(0.2, verdict="inconclusive", routes={"reproduced": 14})}))
    assert low["tested here"] == "undecided, underpowered"
    assert low[COL] == "about 9 seeds would decide it (not reproduced (inside ±SESOI) in part / large)"
    powered = T.testability_row(_entry("A4", "inconclusive", {"small": _unit(0.03, verdict="inconclusive",
                                                                                 routes={"reproduced": None})}))
    assert powered["tested here"] == "undecided, powered for its SESOI"
    assert powered[COL] == "no route decides it within 50 seeds at the distances observed"
    old = T.testability_row(_entry("A4", "inconclusive", {"small": _unit(0.2, verdict="inconclusive", observed=7)}))
    assert old[COL].startswith("about 7 seeds to clear the threshold") and "predates" in old[COL]


def test_the_other_outcomes_of_the_rule():
    assert T.testability_row(_entry("A18", "check passed"))["tested here"] == "by construction"
    gone = T.testability_row(_entry("A21", "not testable", seeds=()))
    assert gone["tested here"] == "no" and gone[COL] == SCALE_LIMITS["A21"]
    one = T.testability_row(_entry("A4", units={"small": _unit(0.5, seeds=1)}, seeds=(0,)))
    assert one["tested here"] == "single seed" and one[COL].startswith("at least 2 seeds")


def test_a_claim_about_the_papers_scale_names_what_would_test_it():
    row = T.testability_row(_entry("A2", units={"k=1": _unit(0.01)}))
    assert row["tested here"] == "decided at this scale only"
    assert row[COL] == "no new seed is predicted across its boundary at this scale; " + SCALE_LIMITS["A2"]
    row = T.testability_row(_entry("A10", "inconclusive", {"gap": _unit(0.3, verdict="inconclusive",
                                                                         routes={"reproduced": 12})}))
    assert row[COL] == "about 12 seeds would decide it (reproduced in every undecided unit); " + SCALE_LIMITS["A10"]
    assert [r["claim"] for r in T.testability({"claims": [_entry("A1"), _entry("B1")]})] == ["A1", "B1"]


def test_the_across_sizes_column_reads_section_14s_trends():
    def row(claim, axis, read, points, direction):  # as read back from the CSV: strings
        return {"claim": claim, "axis": axis, "read": read, "points": points, "direction": direction}

    trends = [row("A1", "width", "True", "5", "holds at every size"),
              row("A1", "depth", "True", "3", "changes direction between sizes"),
              row("A4", "width", "False", "5", "changes direction between sizes"),
              row("A4", "width", "True", "5", "decided at no size"),
              row("A6", "width", "True", "2", "holds at every size")]
    assert T.across_sizes("A1", trends) == "direction holds (width), changes direction (depth)"
    assert T.across_sizes("A4", trends) == "decided at no size (width)"  # τ = 0.2 / 0.6 are shown, not read
    assert T.across_sizes("A6", trends) == "not measured"  # two sizes are not a trend
    assert T.across_sizes("A13", trends) == "not measured"
    rows = T.testability({"claims": [_entry("A1")]}, trends)
    assert rows[0]["across sizes"] == "direction holds (width), changes direction (depth)"
    assert "across sizes" not in T.testability({"claims": [_entry("A1")]})[0]  # a scale without section 14
