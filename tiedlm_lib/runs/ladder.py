"""The size ladder: the small recipe trained at several widths and loop depths, and each effect read as a trend.

Every verdict of the ledger is measured at one point (d64 / d128, K = 16). The ladder asks how an effect moves with
size (docs/statistics.md amendment 17, pre-registered before any ladder run):

* **the width ladder**: the single-depth (v3) and multi-depth (v4) small recipe at K = 16 and the short run's steps,
  at widths ``WIDTHS`` — the same batches of the same documents at every width (a seed's data stream does not depend
  on the model), so size is the only change. The recipe's rule across widths: heads = d / 32 and a learning rate
  ∝ 1 / d (``recipe``); today's v3/v4 (d64) and v5/v6 (d128) follow it and are points of the ladder as they are.
* **the depth ladder**: the same two models at d64 with K = 8, 16, 30 (30 is paper A's), the multi-depth set the powers
  of two below K and K itself.

``trend`` fits, per training seed, the OLS slope of a per-point estimate against log₂ of the point's size (block
parameters for the width ladder, K for the depth ladder) and pools the slopes over seeds with the ledger's engine
(``inference.pool``): the seed is the unit. ``trend_word`` and ``direction_word`` are the only words the section may
use for a trend and for the sign of an effect across sizes; both are descriptions and never change a verdict.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tiedlm_lib.model.config import ModelConfig, RunConfig
from tiedlm_lib.runs.registry import experiment, get_scale
from tiedlm_lib.stats import inference as inf
from tiedlm_lib.stats.bootstrap import Estimate

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Ladder:
    """The ladder of one scale."""

    widths: tuple[int, ...]  # the width ladder (at the scale's K)
    Ks: tuple[int, ...]  # the depth ladder (at ``base_width``)
    base_width: int  # the scale's small model, whose lr the rule scales from
    base_lr: float
    head_dim: int  # heads = d / head_dim
    seeds: Mapping[int, tuple[int, ...]]  # training seeds per width (a width absent here: ``default_seeds``)
    default_seeds: tuple[int, ...]


LADDERS: dict[str, Ladder] = {
    # paper A's small model has d128's blocks (1.32M), its large model d320's (8.22M); d320 at three seeds, fixed now
    # from its measured cost (6-7 s a step on one thread: about 2 h a single-depth run, 2.5 h a multi-depth one)
    "cpu": Ladder(widths=(32, 64, 96, 128, 192, 320), Ks=(8, 16, 30), base_width=64, base_lr=2e-3, head_dim=32,
                  seeds={320: (0, 1, 2)}, default_seeds=(0, 1, 2, 3, 4)),
    # CI: three widths and three depths of the smoke scale (its numbers are not evidence of anything), two seeds so
    # that the pooled points, the slopes and their words run (one seed is never pooled)
    "smoke": Ladder(widths=(16, 32, 48), Ks=(2, 4, 8), base_width=32, base_lr=2e-3, head_dim=16, seeds={},
                    default_seeds=(0, 1)),
}
KINDS = {"single": "v3", "multi": "v4"}  # the small recipe's single- and multi-depth runs
MATCH = ("v3", "v4", "v5", "v6")  # registry runs that are ladder points where their recipe matches


def get_ladder(scale: str) -> Ladder:
    if scale not in LADDERS:
        raise ValueError(f"the size ladder is defined at scales {sorted(LADDERS)}, not {scale!r}")
    return LADDERS[scale]


def recipe(scale: str, d: int) -> dict[str, float | int]:
    """The small recipe at width ``d``: heads = d / head_dim, lr = base_lr · base_width / d, lr_min = lr / 10."""
    lad = get_ladder(scale)
    if not isinstance(d, int) or d <= 0 or d % lad.head_dim:
        raise ValueError(f"a ladder width must be a positive multiple of {lad.head_dim} at scale {scale!r}, got {d!r}")
    lr = lad.base_lr * lad.base_width / d
    return {"d_model": d, "n_heads": d // lad.head_dim, "lr": lr, "lr_min": lr / 10}


def depth_set(K: int) -> tuple[int, ...]:
    """The multi-depth supervision set at K: the powers of two below K, then K (16: 1, 2, 4, 8, 16; 30: … 16, 30)."""
    return tuple(2 ** i for i in range(K.bit_length()) if 2 ** i < K) + (K,)


def seeds_at(scale: str, d: int) -> tuple[int, ...]:
    lad = get_ladder(scale)
    return lad.seeds.get(d, lad.default_seeds)


def point_run(kind: str, scale: str, seed: int, d: int | None = None, K: int | None = None) -> RunConfig:
    """The run of one ladder point: the small recipe's ``kind`` ("single" or "multi") at width ``d`` (default the
    scale's small width) and loop depth ``K`` (default the scale's). Where a registry run (v3-v6) is the same run, it is
    returned under its own name, so the ladder reads the runs the ledger already has; otherwise the run is named
    ``ladder-<kind>-d<d>-K<K>``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    s, lad = get_scale(scale), get_ladder(scale)
    d = lad.base_width if d is None else d
    K = s.K if K is None else K
    if not isinstance(K, int) or K < 1:
        raise ValueError(f"a ladder depth K must be an integer >= 1, got {K!r}")
    r = recipe(scale, d)
    over = {"model.d_model": d, "model.n_heads": r["n_heads"], "model.layout": f"S S A*{K} S S",
            "train.lr": r["lr"], "train.lr_min": r["lr_min"]}
    if kind == "multi":
        over["train.depths"] = depth_set(K)
    cfg = experiment(KINDS[kind], scale, seed, over)
    for name in MATCH:
        same = experiment(name, scale, seed)
        if same.fingerprint() == cfg.fingerprint():
            return same
    return dataclasses.replace(cfg, name=f"ladder-{kind}-d{d}-K{K}")


def points(scale: str) -> list[dict]:
    """Every point of both ladders: axis, kind, width, K, seeds (the width ladder's K = 16 points are shared with the
    depth ladder's d64 points; each appears once, on both axes)."""
    s, lad = get_scale(scale), get_ladder(scale)
    out = []
    for kind in KINDS:
        for d in lad.widths:
            out.append({"axes": ("width",) + (("depth",) if d == lad.base_width else ()), "kind": kind, "d": d,
                        "K": s.K, "seeds": seeds_at(scale, d)})
        for K in lad.Ks:
            if K != s.K:
                out.append({"axes": ("depth",), "kind": kind, "d": lad.base_width, "K": K,
                            "seeds": seeds_at(scale, lad.base_width)})
    return out


def ladder_runs(scale: str) -> list[RunConfig]:
    """Every run of the ladder, cheapest points first (an estimate: width² × K), seed by seed within a point."""
    def cost(p: dict) -> float:
        return p["d"] ** 2 * p["K"] * (1.4 if p["kind"] == "multi" else 1.0)

    return [point_run(p["kind"], scale, seed, p["d"], p["K"]) for p in sorted(points(scale), key=cost)
            for seed in p["seeds"]]


def param_counts(cfg: RunConfig | ModelConfig) -> dict[str, int]:
    """Where a model's parameters sit (``TiedLM.param_breakdown``), counted without allocating the weights (meta
    device)."""
    import torch

    from tiedlm_lib.model.tied import TiedLM

    with torch.device("meta"):
        return TiedLM(cfg.model if isinstance(cfg, RunConfig) else cfg).param_breakdown()


def block_params(cfg: RunConfig | ModelConfig) -> int:
    """Parameters in the standard and tied blocks (no embedding, positions, outer LayerNorms or head)."""
    b = param_counts(cfg)
    return b["standard blocks"] + b["tied blocks"]


# --- the trend: a per-seed slope against log2(size), pooled over seeds ------------------------------------------

def seed_slope(xs: Sequence[float], estimates: Sequence[Estimate]) -> Estimate:
    """One seed's OLS slope of its per-point estimates on ``xs`` (log₂ size), with a normal interval from the points'
    own CIs taken as independent: Var b = Σ cᵢ² vᵢ, cᵢ = (xᵢ − x̄) / Σ(x − x̄)². The points share their evaluation
    documents; with positively and about equally correlated document errors the covariance terms of a contrast are
    negative, so leaving them out widens the interval. Needs at least two distinct sizes."""
    x = np.asarray(xs, dtype=float)
    if len(x) != len(estimates) or len(set(x.tolist())) < 2:
        raise ValueError(f"a slope needs estimates at two or more distinct sizes, got sizes {list(xs)} for "
                         f"{len(estimates)} estimates")
    y = np.array([e.point for e in estimates])
    c = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    b = float(c @ y)
    v = np.array([inf.within_variance(e) for e in estimates])
    half = Z95 * math.sqrt(float((c ** 2) @ v))
    return Estimate(b, b - half, b + half)


def trend(by_seed: Mapping[int, Mapping[float, Estimate]], min_points: int = 3) -> dict:
    """The pooled slope per doubling of size. ``by_seed[seed][log2 size]`` is that seed's estimate at that point; a
    seed with fewer than ``min_points`` points is left out (listed). Returns the pooled slope (``inference.Pooled``
    as a dict), the per-seed slopes and the seeds used."""
    slopes, left_out = {}, []
    for seed, pts in sorted(by_seed.items()):
        if len(pts) < min_points:
            left_out.append(seed)
            continue
        xs = sorted(pts)
        slopes[seed] = seed_slope(xs, [pts[x] for x in xs])
    if not slopes:
        raise ValueError(f"a trend needs some seed with estimates at {min_points} or more sizes; seeds "
                         f"{sorted(by_seed)} have {[len(p) for _, p in sorted(by_seed.items())]}")
    p = inf.pool(list(slopes.values()))
    return {"pooled": p.as_dict(), "slopes": {s: e.as_dict() for s, e in slopes.items()}, "seeds": sorted(slopes),
            "left out (too few points)": left_out}


TREND_WORDS = ("grows", "shrinks", "no detectable trend")
DIRECTION_WORDS = ("holds at every size", "holds where decided", "changes direction between sizes",
                   "decided at no size", "not measured")


def trend_word(lo: float, hi: float, side: int = 1) -> str:
    """The pre-registered word for a pooled slope interval [lo, hi] (per doubling of size): the effect, signed by
    ``side`` (+1: larger is more of the effect), "grows" when the interval lies above 0, "shrinks" when below,
    "no detectable trend" otherwise. A description of the ladder, never a verdict."""
    if side not in (1, -1):
        raise ValueError(f"side must be +1 or -1, got {side!r}")
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"a slope interval needs finite lo <= hi, got [{lo}, {hi}]")
    lo, hi = sorted((side * lo, side * hi))
    return "grows" if lo > 0 else "shrinks" if hi < 0 else "no detectable trend"


def direction_word(intervals: Sequence[tuple[float, float]], threshold: float = 0.0) -> str:
    """The pre-registered word for the sign of an effect across the ladder's points: each point's pooled interval is
    above the claim's threshold, below it, or undecided. "changes direction between sizes" when some point is above
    and another below; "holds at every size" when every point is decided on one side; "holds where decided" when the
    decided points agree and some are undecided; "decided at no size" when none is decided; "not measured" without
    points."""
    if not intervals:
        return "not measured"
    sides = []
    for lo, hi in intervals:
        if lo > hi:
            raise ValueError(f"an interval needs lo <= hi, got [{lo}, {hi}]")
        sides.append(1 if lo > threshold else -1 if hi < threshold else 0)
    decided = {s for s in sides if s}
    if len(decided) == 2:
        return "changes direction between sizes"
    if not decided:
        return "decided at no size"
    return "holds at every size" if all(sides) else "holds where decided"
