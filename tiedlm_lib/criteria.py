"""Decision rules for verdicts, written (and unit-tested) before the numbers they judge.

A claim's verdict combines per-seed evidence; each rule here returns one of a few named outcomes, and every outcome
is reachable (tests/test_criteria.py produces each on synthetic estimates). Margins are stated once, here.

* ``sign``: a gap's direction over seeds — every seed's CI above 0, every one below, seeds whose CIs exclude 0 on
  opposite sides ("seeds disagree"), or "within noise".
* ``equivalence``: "costs nothing" as two one-sided tests against a margin: "equivalent" when a seed's CI lies inside
  (−margin, +margin), "not equivalent" when it lies wholly outside [−margin, +margin] (the effect exceeds the margin);
  over seeds, every seed must agree.
* ``noninferiority``: the upper of those two one-sided tests, for "does not lower" (being better also passes).
* ``spread``: the between-seed spread of point estimates beside the per-seed CIs, with a t-interval on the mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # stats builds its seed verdict on this module
    from .stats import Estimate

# "Costs about nothing" (A6: exit at k=1 after multi-depth training; A8: the quality ceiling) is judged against
# both margins; the paper reported 0.02-0.04 nats for its exit cost.
MARGIN_NATS = 0.05  # an absolute margin in nats of NLL
MARGIN_GAP_FRACTION = 0.10  # a margin relative to the single-depth depth gap NLL(k=1) - NLL(k=K) of the same size

SIGN_OUTCOMES = ("above 0", "below 0", "seeds disagree", "within noise")
EQUIVALENCE_OUTCOMES = ("equivalent", "not equivalent", "seeds disagree", "inconclusive")
NONINFERIORITY_OUTCOMES = ("non-inferior", "inferior", "seeds disagree", "inconclusive")


def _check(estimates: Sequence[Estimate]) -> None:
    if not estimates:
        raise ValueError("a criterion needs at least one estimate (one per seed)")


def sign(estimates: Sequence[Estimate]) -> str:
    """The direction of a gap over seeds (one paired CI per seed)."""
    _check(estimates)
    if all(e.lo > 0 for e in estimates):
        return "above 0"
    if all(e.hi < 0 for e in estimates):
        return "below 0"
    if any(e.lo > 0 for e in estimates) and any(e.hi < 0 for e in estimates):
        return "seeds disagree"
    return "within noise"


def equivalent_one(e: Estimate, margin: float) -> str:
    """Two one-sided tests at the CI's level: inside (−m, m) is equivalent; wholly beyond ±m is not."""
    if not margin > 0:
        raise ValueError(f"an equivalence margin must be > 0, got {margin!r}")
    if -margin < e.lo and e.hi < margin:
        return "equivalent"
    if e.lo > margin or e.hi < -margin:
        return "not equivalent"
    return "inconclusive"


def equivalence(estimates: Sequence[Estimate], margin: float) -> str:
    """Equivalence over seeds: every seed equivalent, every seed not, seeds that split both ways, or inconclusive."""
    _check(estimates)
    per_seed = [equivalent_one(e, margin) for e in estimates]
    if all(v == "equivalent" for v in per_seed):
        return "equivalent"
    if all(v == "not equivalent" for v in per_seed):
        return "not equivalent"
    if "equivalent" in per_seed and "not equivalent" in per_seed:
        return "seeds disagree"
    return "inconclusive"


def noninferiority(estimates: Sequence[Estimate], margin: float) -> str:
    """The upper one-sided test of ``equivalence``, for claims that only exclude being worse ("does not lower the
    ceiling"; a difference where larger is worse): "non-inferior" when every seed's CI upper end is below +margin,
    "inferior" when every seed's CI lies wholly above it, "seeds disagree" when seeds split both ways."""
    _check(estimates)
    if not margin > 0:
        raise ValueError(f"a non-inferiority margin must be > 0, got {margin!r}")
    per_seed = ["non-inferior" if e.hi < margin else "inferior" if e.lo > margin else "?" for e in estimates]
    if all(v == "non-inferior" for v in per_seed):
        return "non-inferior"
    if all(v == "inferior" for v in per_seed):
        return "inferior"
    if "non-inferior" in per_seed and "inferior" in per_seed:
        return "seeds disagree"
    return "inconclusive"


def margin_for(depth_gap: float) -> float:
    """The stricter of the two stated margins for a model whose single-depth depth gap is ``depth_gap`` nats."""
    if not depth_gap > 0:
        raise ValueError(f"the relative margin needs a positive depth gap, got {depth_gap!r}")
    return min(MARGIN_NATS, MARGIN_GAP_FRACTION * depth_gap)


@dataclass(frozen=True)
class Spread:
    """Point estimates over seeds: their mean, standard deviation, range and a t-interval on the mean (n >= 2)."""

    n: int
    mean: float
    sd: float
    lo: float
    hi: float
    min: float
    max: float
    exceeds_per_seed_ci: bool  # the points' range is wider than the mean per-seed CI


# Student t quantiles (two-sided 95%) for 1..10 degrees of freedom; more seeds use the normal quantile.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def spread(estimates: Sequence[Estimate]) -> Spread:
    """The between-seed spread of per-seed point estimates, beside the per-seed CIs: ``exceeds_per_seed_ci`` when
    the range of the points is wider than the mean per-seed CI (seed-to-seed variation the per-seed CIs miss)."""
    _check(estimates)
    pts = np.array([e.point for e in estimates], dtype=float)
    n = len(pts)
    sd = float(pts.std(ddof=1)) if n > 1 else float("nan")
    half = (_T95[n - 2] if n - 1 <= len(_T95) else 1.96) * sd / math.sqrt(n) if n > 1 else float("nan")
    width = float(np.mean([e.hi - e.lo for e in estimates]))
    return Spread(n, float(pts.mean()), sd, float(pts.mean() - half), float(pts.mean() + half), float(pts.min()),
                  float(pts.max()), bool(n > 1 and pts.max() - pts.min() > width))


def spread_columns(estimates: Sequence[Estimate]) -> dict[str, float | bool]:
    """Table columns for the between-seed spread beside the per-seed CIs (one seed: the mean only)."""
    s = spread(estimates)
    return {"mean over seeds": s.mean, "sd over seeds": s.sd, "t95 lo": s.lo, "t95 hi": s.hi,
            "mean per-seed CI width": float(np.mean([e.hi - e.lo for e in estimates])),
            "seed spread wider than a per-seed CI": s.exceeds_per_seed_ci}
