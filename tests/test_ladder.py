"""The size ladder (docs/statistics.md amendment 17): its runs, the recipe rule, the trend and its words."""

import math

import numpy as np
import pytest

from tiedlm_lib.runs import ladder as L
from tiedlm_lib.runs.registry import experiment, section_runs
from tiedlm_lib.stats import inference as inf
from tiedlm_lib.stats.bootstrap import Estimate


def test_the_recipe_rule_makes_the_ledgers_small_and_large_runs_ladder_points():
    for kind, d, name in [("single", 64, "v3"), ("multi", 64, "v4"), ("single", 128, "v5"), ("multi", 128, "v6")]:
        r = L.point_run(kind, "cpu", 3, d)
        assert r.name == name and r.cache_name() == experiment(name, "cpu", 3).cache_name()
    r = L.point_run("single", "cpu", 0, 320)
    assert (r.name, r.model.n_heads, r.train.lr, r.train.lr_min) == ("ladder-single-d320-K16", 10, 4e-4, 4e-5)
    assert L.block_params(r) == pytest.approx(8.22e6, rel=0.001)  # paper A's large model's blocks
    assert L.block_params(L.point_run("single", "cpu", 0, 128)) == pytest.approx(1.32e6, rel=0.005)  # its small one
    with pytest.raises(ValueError, match="multiple of 32"):
        L.recipe("cpu", 100)
    with pytest.raises(ValueError, match="kind must be"):
        L.point_run("sampled", "cpu", 0)


def test_only_size_changes_along_the_ladder():
    base = experiment("v3", "cpu", 2)
    for d in L.get_ladder("cpu").widths:
        r = L.point_run("single", "cpu", 2, d)
        assert (r.train.seed, r.train.data_seed, r.train.steps, r.train.batch_size, r.data) == \
               (base.train.seed, base.train.data_seed, base.train.steps, base.train.batch_size, base.data)
        assert r.model.layout == base.model.layout
    k30 = L.point_run("multi", "cpu", 0, K=30)
    assert (k30.model.layout, k30.train.depths, k30.model.d_model) == ("S S A*30 S S", (1, 2, 4, 8, 16, 30), 64)
    assert L.depth_set(8) == (1, 2, 4, 8) and L.depth_set(16) == (1, 2, 4, 8, 16)


def test_the_ladder_trains_under_section_14_with_its_fixed_seeds():
    runs = section_runs("cpu")["14"]
    assert len(runs) == 2 * (5 * 5 + 3) + 2 * 2 * 5  # two kinds: five widths at 5 seeds, d320 at 3; K = 8, 30
    assert {r.train.seed for r in runs if r.model.d_model == 320} == {0, 1, 2}
    assert len({r.cache_name() for r in runs}) == len(runs)
    assert {r.train.seed for r in section_runs("cpu", [0])["14"]} == {0}


def test_a_seeds_slope_is_ols_with_the_points_variances_propagated():
    xs = [math.log2(n) for n in (1e5, 4e5, 1.6e6, 6.4e6)]
    pts = [Estimate(1.0, 0.9, 1.1), Estimate(0.8, 0.75, 0.85), Estimate(0.7, 0.6, 0.8), Estimate(0.5, 0.3, 0.7)]
    e = L.seed_slope(xs, pts)
    y = np.array([p.point for p in pts])
    assert e.point == pytest.approx(np.polyfit(xs, y, 1)[0])
    x = np.array(xs)
    c = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    v = np.array([((p.hi - p.lo) / (2 * 1.959963984540054)) ** 2 for p in pts])
    assert (e.hi - e.lo) / 2 == pytest.approx(1.959963984540054 * math.sqrt((c ** 2 * v).sum()))
    with pytest.raises(ValueError, match="two or more distinct sizes"):
        L.seed_slope([1.0, 1.0], pts[:2])


def test_the_trend_pools_the_seeds_slopes_and_leaves_out_seeds_with_too_few_points():
    rng = np.random.default_rng(0)
    by_seed = {s: {x: Estimate(0.3 * x + rng.normal(0, 0.05), 0.3 * x - 0.02, 0.3 * x + 0.02) for x in (1, 2, 3, 4)}
               for s in range(4)}
    for s in by_seed:  # centre each interval on its point
        by_seed[s] = {x: Estimate(e.point, e.point - 0.02, e.point + 0.02) for x, e in by_seed[s].items()}
    by_seed[9] = {1: Estimate(0, -1, 1), 2: Estimate(0, -1, 1)}
    t = L.trend(by_seed)
    assert t["seeds"] == [0, 1, 2, 3] and t["left out (too few points)"] == [9]
    slopes = [L.seed_slope([1, 2, 3, 4], [by_seed[s][x] for x in (1, 2, 3, 4)]) for s in range(4)]
    assert t["pooled"]["point"] == pytest.approx(inf.pool(slopes).point)
    assert t["pooled"]["lo"] > 0.2 and L.trend_word(t["pooled"]["lo"], t["pooled"]["hi"]) == "grows"
    with pytest.raises(ValueError, match="3 or more sizes"):
        L.trend({0: by_seed[9]})


def test_the_trend_words_follow_the_interval_and_the_side():
    assert L.trend_word(0.01, 0.2) == "grows" and L.trend_word(-0.2, -0.01) == "shrinks"
    assert L.trend_word(-0.01, 0.2) == "no detectable trend"
    assert L.trend_word(0.01, 0.2, side=-1) == "shrinks" and L.trend_word(-0.2, -0.01, side=-1) == "grows"
    with pytest.raises(ValueError):
        L.trend_word(0.2, 0.1)


def test_the_direction_words_read_each_point_against_the_threshold():
    assert L.direction_word([(0.1, 0.3), (0.2, 0.5)]) == "holds at every size"
    assert L.direction_word([(-0.3, -0.1), (-0.5, -0.2)]) == "holds at every size"
    assert L.direction_word([(0.1, 0.3), (-0.1, 0.5)]) == "holds where decided"
    assert L.direction_word([(0.1, 0.3), (-0.4, -0.1)]) == "changes direction between sizes"
    assert L.direction_word([(-0.1, 0.3)]) == "decided at no size"
    assert L.direction_word([]) == "not measured"
    assert L.direction_word([(0.25, 0.3), (0.15, 0.4)], threshold=0.2) == "holds where decided"
    assert L.direction_word([(0.25, 0.3), (0.05, 0.15)], threshold=0.2) == "changes direction between sizes"
    assert set(L.DIRECTION_WORDS) >= {"holds at every size", "changes direction between sizes", "not measured"}
