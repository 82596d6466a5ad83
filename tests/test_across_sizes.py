"""Section 14's measurements and tables (tiedlm_lib.paper.across_sizes): the trend recovers a known slope, the words
follow the pre-registered rule, the band is drawn only beyond the last measured point, and the section runs only at
the scales that define a ladder."""

import math

import numpy as np
import pytest

from tiedlm_lib.paper import across_sizes as xs
from tiedlm_lib.paper.execute import ONLY_AT, execute
from tiedlm_lib.runs import ladder as lad


def rows(effect="A1 depth gap", slope=0.1, seeds=(0, 1, 2), xs_=(10.0, 11.0, 12.0, 13.0), half=0.01, noise=0.0,
         axis="width", seed=0):
    """Synthetic per-seed estimates on a line of known slope (per doubling), each with a ±``half`` interval."""
    rng = np.random.default_rng(seed)
    out = []
    for sd in seeds:
        offset = rng.normal(0, noise)
        for x in xs_:
            y = 0.2 + slope * (x - xs_[0]) + offset + rng.normal(0, noise)
            out.append({"axis": axis, "effect": effect, "d": int(2 ** x), "K": 16, "seed": sd, "x": x,
                        "size": int(2 ** x), "point": y, "lo": y - half, "hi": y + half})
    return out


def test_the_effects_read_their_side_and_threshold_from_the_preregistered_rows():
    th = {e.name: e.threshold for e in xs.EFFECTS}
    assert th["A1 depth gap"] == 0 and th["A6 exit cost"] == 0.05 and th["A7 multi-depth gain"] == 0.05
    assert th["A8 ceiling"] == 0.05 and th["B1 application-count share"] == 0.95
    assert th["B3 head/diagonal share"] == th["B3 loop/diagonal share"] == 0.2
    assert all(e.side == 1 for e in xs.EFFECTS)
    # A4 is read at τ = 0.4 only; 0.2 and 0.6 are shown beside
    assert [e.name for e in xs.EFFECTS if e.claim == "A4" and e.read] == ["A4 exit penalty τ=0.4"]


def test_the_trend_recovers_a_known_slope_and_words_it_by_the_rule():
    r = rows(slope=0.1)
    t = {row["effect"]: row for row in xs.trends(r, xs.pooled_points(r))}["A1 depth gap"]
    assert t["slope per doubling"] == pytest.approx(0.1, abs=1e-9)
    assert t["slope lo"] < 0.1 < t["slope hi"] and t["trend"] == "grows" and t["points"] == 4
    assert t["direction"] == "holds at every size"  # every point's interval above 0
    down = rows(slope=-0.1)
    assert xs.trends(down, xs.pooled_points(down))[0]["trend"] == "shrinks"
    flat = rows(slope=0.0, half=0.05, noise=0.02)
    assert xs.trends(flat, xs.pooled_points(flat))[0]["trend"] == "no detectable trend"


def test_a_sign_that_crosses_the_threshold_is_a_change_of_direction():
    r = rows(slope=0.1, xs_=(10.0, 11.0, 12.0, 13.0), half=0.01)
    for row in r:  # shift the line so that it crosses 0 between the first and the last size
        row["point"] -= 0.35
        row["lo"] -= 0.35
        row["hi"] -= 0.35
    p = xs.pooled_points(r)
    assert [q["side of threshold"] for q in p] == ["below", "below", "above", "above"]
    assert xs.trends(r, p)[0]["direction"] == "changes direction between sizes"


def test_fewer_than_three_sizes_are_not_a_trend():
    r = rows(xs_=(10.0, 11.0))
    t = xs.trends(r, xs.pooled_points(r))[0]
    assert math.isnan(t["slope per doubling"]) and t["trend"].startswith("not measured")


def test_the_pooled_point_pools_over_seeds_and_says_how_many():
    r = rows(seeds=(0, 1, 2, 3, 4), noise=0.01)
    p = xs.pooled_points(r)
    assert len(p) == 4 and all(q["seeds"] == 5 for q in p)
    first = [row["point"] for row in r if row["x"] == 10.0]
    assert p[0]["pooled"] == pytest.approx(np.mean(first), abs=0.01)


def test_the_band_starts_at_the_last_measured_point_and_only_before_the_target():
    r = rows(slope=0.1)
    p = xs.pooled_points(r)
    t = xs.trends(r, p)
    (b,) = xs.extrapolation(p, t, "width", 15.0)
    assert b["from x"] == 13.0 and b["label"] == "extrapolation, not a verdict"
    assert b["centre"] == pytest.approx(p[-1]["pooled"] + 0.2, abs=1e-9)  # two doublings at 0.1
    assert b["lo"] < b["centre"] < b["hi"]
    assert xs.extrapolation(p, t, "width", 13.0) == [] and xs.extrapolation(p, t, "depth", 15.0) == []


def test_budgets_refuse_bad_values():
    with pytest.raises(ValueError, match="n_boot"):
        xs.Budgets(n_boot=0)
    with pytest.raises(ValueError, match="n_refit"):
        xs.Budgets(n_refit=-1)


def test_a_point_needs_its_runs_of_one_seed(tmp_path):
    class Cfg:
        def __init__(self, seed):
            self.train = type("T", (), {"seed": seed})()

    class R:
        def __init__(self, seed):
            self.config = Cfg(seed)

    with pytest.raises(ValueError, match="runs of seeds 0, 1"):
        xs.point_effects(R(0), R(1), 0)


def test_section_14_runs_at_the_scales_that_define_a_ladder_and_is_left_out_elsewhere(tmp_path):
    assert set(ONLY_AT["14_across_sizes"]) == set(lad.LADDERS)
    said = []
    assert execute("paper", only=["14_across_sizes"], log=said.append, into=tmp_path) == []
    assert said == ["14_across_sizes is defined at the scales smoke, cpu, not at paper: left out"]


def test_one_seed_is_not_pooled_and_a_trend_needs_two_seeds():
    """docs/statistics.md §1: one seed is never pooled. A point with one seed says so and decides no side; a slope
    resting on one seed carries no trend word; a seed with fewer than three points is listed as left out."""
    r = rows(slope=0.1, seeds=(0,))
    p = xs.pooled_points(r)
    assert {q["side of threshold"] for q in p} == {xs.SINGLE_SEED}
    (t,) = xs.trends(r, p)
    assert t["trend"] == xs.SINGLE_SEED and math.isnan(t["slope per doubling"])
    assert t["direction"] == "not measured"  # no point pooled from two seeds
    two = rows(slope=0.1, seeds=(0, 1, 2)) + rows(slope=0.1, seeds=(3,), xs_=(10.0, 11.0))
    (t,) = xs.trends(two, xs.pooled_points(two))
    assert t["trend"] == "grows" and t["seeds in slope"] == 3 and t["seeds left out"] == "3"


def test_a_seed_without_a_finite_estimate_is_left_out_and_counted():
    r = rows(seeds=(0, 1, 2))
    r[0] |= {"point": float("nan"), "lo": float("nan"), "hi": float("nan")}  # a share of a zero gap
    p = xs.pooled_points(r)
    assert p[0]["seeds"] == 2 and p[0]["seeds not finite"] == 1 and math.isfinite(p[0]["pooled"])
    assert xs.trends(r, p)[0]["trend"] == "grows"
