"""Every outcome of every decision rule is reachable, on synthetic per-seed estimates."""

import math

import pytest

from tiedlm_lib import criteria
from tiedlm_lib.stats import Estimate


def E(point, lo, hi):
    return Estimate(point, lo, hi)


@pytest.mark.parametrize("ests, want", [
    ([E(0.3, 0.1, 0.5), E(0.2, 0.05, 0.4), E(0.4, 0.3, 0.5)], "above 0"),
    ([E(-0.3, -0.5, -0.1), E(-0.2, -0.4, -0.05)], "below 0"),
    ([E(0.3, 0.1, 0.5), E(-0.3, -0.5, -0.1), E(0.0, -0.1, 0.1)], "seeds disagree"),
    ([E(0.3, 0.1, 0.5), E(0.05, -0.1, 0.2)], "within noise"),
    ([E(0.0, -0.1, 0.1)], "within noise"),
])
def test_sign_reaches_every_outcome(ests, want):
    assert criteria.sign(ests) == want
    assert want in criteria.SIGN_OUTCOMES


@pytest.mark.parametrize("ests, want", [
    ([E(0.01, -0.02, 0.04), E(0.0, -0.03, 0.03)], "equivalent"),
    ([E(0.2, 0.1, 0.3), E(-0.2, -0.3, -0.1)], "not equivalent"),
    ([E(0.01, -0.02, 0.04), E(0.2, 0.1, 0.3)], "seeds disagree"),
    ([E(0.04, 0.01, 0.07), E(0.0, -0.03, 0.03)], "inconclusive"),  # one CI straddles the margin
    ([E(0.05, 0.02, 0.08)], "inconclusive"),
])
def test_equivalence_reaches_every_outcome(ests, want):
    assert criteria.equivalence(ests, 0.05) == want
    assert want in criteria.EQUIVALENCE_OUTCOMES


def test_equivalence_is_a_two_sided_test_not_a_loose_bound():
    # a small point estimate is not enough: a CI reaching past the margin on either side is not equivalence
    assert criteria.equivalent_one(E(0.0, -0.06, 0.01), 0.05) == "inconclusive"
    assert criteria.equivalent_one(E(0.0, -0.01, 0.06), 0.05) == "inconclusive"
    assert criteria.equivalent_one(E(-0.1, -0.12, -0.06), 0.05) == "not equivalent"
    with pytest.raises(ValueError, match="margin must be > 0"):
        criteria.equivalent_one(E(0, 0, 0), 0.0)
    with pytest.raises(ValueError, match="at least one estimate"):
        criteria.equivalence([], 0.05)


def test_the_margin_is_the_stricter_of_the_stated_two():
    assert criteria.margin_for(2.0) == criteria.MARGIN_NATS  # 10% of 2 nats = 0.2 > 0.05
    assert criteria.margin_for(0.2) == pytest.approx(0.02)  # 10% of 0.2 nats
    with pytest.raises(ValueError, match="positive depth gap"):
        criteria.margin_for(-0.1)


def test_spread_flags_seed_variation_the_per_seed_cis_miss():
    tight_far = [E(0.10, 0.09, 0.11), E(-0.10, -0.11, -0.09), E(0.02, 0.01, 0.03)]
    s = criteria.spread(tight_far)
    assert s.n == 3 and s.exceeds_per_seed_ci and s.min == -0.10 and s.max == 0.10
    assert s.lo < s.mean < s.hi and s.sd == pytest.approx(0.1006645, rel=1e-5)
    assert s.hi - s.mean == pytest.approx(4.303 * s.sd / 3 ** 0.5)  # t(2) quantile
    wide_close = [E(0.10, 0.0, 0.2), E(0.12, 0.02, 0.22)]
    assert not criteria.spread(wide_close).exceeds_per_seed_ci
    one = criteria.spread([E(0.1, 0.0, 0.2)])
    assert one.n == 1 and not one.exceeds_per_seed_ci


@pytest.mark.parametrize("ests, want", [
    ([E(-0.2, -0.3, -0.1), E(0.01, -0.02, 0.04)], "non-inferior"),  # better, or equal within the margin
    ([E(0.2, 0.1, 0.3), E(0.3, 0.2, 0.4)], "inferior"),
    ([E(0.01, -0.02, 0.04), E(0.2, 0.1, 0.3)], "seeds disagree"),
    ([E(0.04, 0.01, 0.07)], "inconclusive"),
])
def test_noninferiority_reaches_every_outcome(ests, want):
    assert criteria.noninferiority(ests, 0.05) == want
    assert want in criteria.NONINFERIORITY_OUTCOMES
    with pytest.raises(ValueError, match="margin must be > 0"):
        criteria.noninferiority(ests, -1.0)


def test_spread_columns_sit_beside_the_per_seed_cis():
    cols = criteria.spread_columns([E(0.10, 0.09, 0.11), E(-0.10, -0.11, -0.09)])
    assert cols["mean over seeds"] == pytest.approx(0.0) and cols["seed spread wider than a per-seed CI"]
    assert cols["mean per-seed CI width"] == pytest.approx(0.02)
    one = criteria.spread_columns([E(0.1, 0.0, 0.2)])
    assert one["mean over seeds"] == 0.1 and math.isnan(one["sd over seeds"])
