"""Seed-level inference: per-seed paired estimates pooled over training seeds, decided against a claim's threshold and
its smallest effect size of interest (SESOI). The rule is docs/statistics.md; this module is its one implementation.

Each training seed gives one paired estimate with a document-bootstrap CI (a ``stats.Estimate``). The seed is the unit:
the estimates are pooled by a random-effects model (Paule–Mandel τ²) with the Hartung–Knapp–Sidik–Jonkman (HKSJ)
variance and a t quantile with n − 1 degrees of freedom. With equal within-seed variances the HKSJ interval is exactly
the t-interval on the seed points (tested). Every seed is scored on the same evaluation documents, so the document
error is shared by all seeds and does not average out over them; the decision interval adds the mean within-seed
variance once (the shared-document term) to the HKSJ variance. That is conservative: the HKSJ variance already
holds the part of the document error that differs between seeds.

A decision (``decide``) reads that interval against the claim's threshold: reproduced when it clears the threshold on
the claimed side; not reproduced when it clears it on the other side or, for a claim about a nonzero effect, lies
inside ±SESOI; inconclusive otherwise. Margin claims are equivalence or non-inferiority tests on the same interval.
A claim over several units (sizes, pairs) is reproduced only if every unit is (intersection–union, no correction) and
not reproduced if some unit is at the Bonferroni level 1 − α/m. "Seeds disagree" is a description: each pooled
estimate carries how many seeds' CIs exclude the threshold each way, the between-seed SD and a 95% prediction
interval for a new seed ("seed-sensitive" when it crosses the threshold).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import optimize
from scipy import stats as sps

from tiedlm_lib.stats.bootstrap import Estimate

LEVEL = 0.95
POWER = 0.80
SD_UPPER_LEVEL = 0.80  # the one-sided confidence level of the between-seed SD's upper bound used for power
MAX_SEEDS = 50  # seeds_needed searches up to this many

RULES = ("superiority", "equivalence", "noninferiority")
VERDICTS = ("reproduced", "not reproduced", "inconclusive")


def within_variance(e: Estimate) -> float:
    """A per-seed CI's variance on the normal scale: ((hi − lo) / (2 z))², z the two-sided quantile of its level. A
    percentile interval need not hold its point (an estimand built on a minimum, a refit shift); then the interval
    is widened symmetrically to reach it — twice the larger distance from the point to an end — which is
    conservative."""
    if not all(math.isfinite(x) for x in (e.point, e.lo, e.hi)) or e.lo > e.hi:
        raise ValueError(f"an estimate needs a finite point and a finite interval lo <= hi, got {e}")
    z = sps.norm.ppf(0.5 + e.level / 2)
    width = e.hi - e.lo if e.lo <= e.point <= e.hi else 2 * max(abs(e.hi - e.point), abs(e.point - e.lo))
    return (width / (2 * z)) ** 2


def paule_mandel_tau2(y: np.ndarray, v: np.ndarray) -> float:
    """τ² solving the generalised Q equation Σ wᵢ(yᵢ − μ̂)² = n − 1 with wᵢ = 1/(vᵢ + τ²); 0 when Q(0) ≤ n − 1.
    With every vᵢ = 0 (points without CIs) τ² is the sample variance of the points."""
    n = len(y)
    if n < 2:
        return 0.0

    def excess(t2: float) -> float:
        w = 1 / (v + t2)
        mu = float((w * y).sum() / w.sum())
        return float((w * (y - mu) ** 2).sum()) - (n - 1)

    if not np.any(v > 0):
        return float(y.var(ddof=1))
    floor = 0.0 if np.all(v > 0) else 1e-12 * max(float(v.max()), float(y.var(ddof=1)), 1e-30)  # 1/0 weights
    if excess(floor) <= 0:
        return floor
    hi = max(float(y.var(ddof=1)), 1e-12)
    while excess(hi) > 0:
        hi *= 2
    return float(optimize.brentq(excess, floor, hi, xtol=1e-14, rtol=1e-12))


@dataclass(frozen=True)
class Pooled:
    """One claim unit's per-seed estimates pooled over seeds."""

    n: int
    point: float  # the random-effects pooled estimate
    lo: float  # the decision interval: HKSJ variance plus the shared-document term, t with n − 1 df
    hi: float
    level: float
    se: float  # of the decision interval
    hksj_lo: float  # the HKSJ interval alone (what statsmodels' combine_effects calls "random effect wls")
    hksj_hi: float
    tau2: float  # between-seed variance beyond the within-seed variance (Paule–Mandel)
    between_sd: float  # SD of the seed points
    doc_sd: float  # root mean within-seed variance: the document error every seed shares
    pred_lo: float  # 95% prediction interval for a new seed's estimate
    pred_hi: float
    df: float = math.nan  # the decision interval's Welch–Satterthwaite degrees of freedom (n − 1 to infinity)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def pool(estimates: Sequence[Estimate], level: float = LEVEL) -> Pooled:
    """Pool per-seed estimates (one per training seed); see the module docstring. One seed: its own CI (nothing to
    pool; ``n`` = 1 says so)."""
    if not estimates:
        raise ValueError("pooling needs at least one seed's estimate, got none")
    y = np.array([e.point for e in estimates], dtype=float)
    if not np.all(np.isfinite(y)):
        raise ValueError(f"pooling needs finite per-seed points, got {y.tolist()}")
    v = np.array([within_variance(e) for e in estimates], dtype=float)
    n = len(y)
    if n == 1:
        e = estimates[0]
        return Pooled(1, e.point, e.lo, e.hi, e.level, math.sqrt(v[0]), e.lo, e.hi, 0.0, float("nan"),
                      math.sqrt(v[0]), float("-inf"), float("inf"))
    tau2 = paule_mandel_tau2(y, v)
    total = v + tau2
    if np.all(total == 0):  # identical points without CIs: no spread to estimate
        w = np.ones(n)
        mu, var_hk = float(y.mean()), 0.0
    else:
        w = 1 / total
        mu = float((w * y).sum() / w.sum())
        q = float((w * (y - mu) ** 2).sum()) / (n - 1)
        var_hk = q / float(w.sum())
    t = float(sps.t.ppf(0.5 + level / 2, n - 1))
    v_doc = float(v.mean())
    se = math.sqrt(var_hk + v_doc)
    # Welch–Satterthwaite: the HKSJ part is estimated on n − 1 df, the shared-document part is known from the
    # bootstraps (infinite df), so the decision interval's quantile lies between t(n − 1) and the normal one.
    df = (n - 1) * (var_hk + v_doc) ** 2 / var_hk ** 2 if var_hk > 0 else math.inf
    t_dec = float(sps.t.ppf(0.5 + level / 2, df)) if math.isfinite(df) else float(sps.norm.ppf(0.5 + level / 2))
    # the prediction interval for a new seed: t with n − 2 df (Higgins, Thompson & Spiegelhalter 2009: τ² and μ̂ are
    # both estimated), so it is undefined (NaN) below three seeds (docs/statistics.md amendment 18)
    pred = float(sps.t.ppf(0.5 + level / 2, n - 2)) * math.sqrt(tau2 + v_doc + var_hk) if n >= 3 else math.nan
    return Pooled(n, mu, mu - t_dec * se, mu + t_dec * se, level, se, mu - t * math.sqrt(var_hk),
                  mu + t * math.sqrt(var_hk), tau2, float(y.std(ddof=1)), math.sqrt(v_doc), mu - pred, mu + pred, df)


def seed_counts(estimates: Sequence[Estimate], threshold: float = 0.0) -> dict[str, int]:
    """How many seeds' own CIs lie wholly above / below the threshold (a description, never the verdict)."""
    return {"seeds above": sum(e.lo > threshold for e in estimates),
            "seeds below": sum(e.hi < threshold for e in estimates), "seeds": len(estimates)}


@dataclass(frozen=True)
class Rule:
    """How one unit's pooled interval is read.

    * ``superiority``: the claim is that the estimand lies on ``side`` (+1 above, −1 below) of ``threshold``.
      Reproduced when the interval clears it on that side; not reproduced when it clears it on the other side, or
      (``negligible``: claims about a nonzero effect, threshold 0) when it lies inside threshold ± ``sesoi``.
    * ``equivalence``: "costs nothing": reproduced inside (threshold − sesoi, threshold + sesoi); not reproduced when
      wholly beyond threshold ± sesoi.
    * ``noninferiority``: "does not lower", where ``side`` is the direction that is worse: reproduced when the
      interval's worse end is short of threshold + side·sesoi, not reproduced when it lies wholly beyond it.
    """

    kind: str
    sesoi: float
    threshold: float = 0.0
    side: int = 1
    negligible: bool = True

    def __post_init__(self):
        if self.kind not in RULES:
            raise ValueError(f"a rule's kind must be one of {RULES}, got {self.kind!r}")
        if not self.sesoi > 0:
            raise ValueError(f"a SESOI must be > 0, got {self.sesoi!r}")
        if self.side not in (1, -1):
            raise ValueError(f"side must be +1 or -1, got {self.side!r}")

    def boundaries(self) -> tuple[float, ...]:
        """Where the verdict changes: the threshold (superiority), threshold ± SESOI (equivalence), threshold +
        side·SESOI (non-inferiority). A unit is seed-sensitive when a new seed's prediction interval holds one."""
        t, d = self.threshold, self.sesoi
        return {"superiority": (t,), "equivalence": (t - d, t + d), "noninferiority": (t + self.side * d,)}[self.kind]

    def judge(self, lo: float, hi: float) -> str:
        """The verdict of one interval [lo, hi] under this rule."""
        t, d, s = self.threshold, self.sesoi, self.side
        if self.kind == "superiority":
            claimed = lo > t if s > 0 else hi < t
            other = hi < t if s > 0 else lo > t
            # inside ±SESOI wins over clearing the threshold: a demonstrated effect too small to matter is not the
            # claimed effect (docs/statistics.md §2)
            nil = self.negligible and t - d < lo and hi < t + d
            return "not reproduced" if other or nil else "reproduced" if claimed else "inconclusive"
        if self.kind == "equivalence":
            if t - d < lo and hi < t + d:
                return "reproduced"
            return "not reproduced" if lo > t + d or hi < t - d else "inconclusive"
        bound = t + s * d  # noninferiority
        worse_end, better_end = (hi, lo) if s > 0 else (lo, hi)
        if (worse_end < bound) if s > 0 else (worse_end > bound):
            return "reproduced"
        return "not reproduced" if ((better_end > bound) if s > 0 else (better_end < bound)) else "inconclusive"


def interval_at(estimates: Sequence[Estimate], level: float) -> tuple[float, float]:
    p = pool(estimates, level)
    return p.lo, p.hi


@dataclass(frozen=True)
class UnitResult:
    unit: str
    verdict: str  # at LEVEL
    verdict_corrected: str  # at the Bonferroni level used for "not reproduced" over several units
    pooled: Pooled
    counts: dict[str, int]
    seed_sensitive: bool  # the prediction interval for a new seed crosses the threshold

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "verdict at the Bonferroni level": self.verdict_corrected,
                **self.pooled.as_dict(), **self.counts, "seed-sensitive": self.seed_sensitive}


def judge_unit(unit: str, estimates: Sequence[Estimate], rule: Rule, m: int = 1, level: float = LEVEL) -> UnitResult:
    p = pool(estimates, level)
    corrected = rule.judge(*interval_at(estimates, 1 - (1 - level) / m)) if m > 1 else rule.judge(p.lo, p.hi)
    crosses = p.n > 2 and any(p.pred_lo < b < p.pred_hi for b in rule.boundaries())  # undefined below 3 seeds
    return UnitResult(unit, rule.judge(p.lo, p.hi), corrected, p, seed_counts(estimates, rule.threshold), crosses)


def combine(results: Sequence[UnitResult]) -> str:
    """Intersection–union over units: reproduced when every unit is at the nominal level; not reproduced when some
    unit is at the Bonferroni level (its interval at 1 − α/m); inconclusive otherwise."""
    if not results:
        raise ValueError("a claim needs at least one unit to judge")
    if all(r.verdict == "reproduced" for r in results):
        return "reproduced"
    if any(r.verdict_corrected == "not reproduced" for r in results):
        return "not reproduced"
    return "inconclusive"


def judge_units(units: Mapping[str, Sequence[Estimate]], rule: Rule | Mapping[str, Rule],
                level: float = LEVEL) -> tuple[str, dict[str, UnitResult]]:
    """Judge every unit (its own rule where ``rule`` is a mapping) and combine them."""
    if not units:
        raise ValueError("a claim needs at least one unit to judge, got none")
    m = len(units)
    res = {u: judge_unit(u, list(es), rule[u] if isinstance(rule, Mapping) else rule, m, level)
           for u, es in units.items()}
    return combine(list(res.values())), res


# --- the exact sign test, for per-seed outcomes that are categories, not estimates ---------------------------------

def sign_test(n_claimed: int, n: int, alpha: float = (1 - LEVEL) / 2) -> dict[str, float | str]:
    """One-sided exact binomial test of ``n_claimed`` seeds of ``n`` showing the claimed outcome against chance (½),
    at ``alpha`` (the one-sided level of the 95% intervals used elsewhere), and the same test the other way."""
    if not 0 <= n_claimed <= n or n < 1:
        raise ValueError(f"sign test needs 0 <= claimed <= n, n >= 1, got {n_claimed} of {n}")
    p_for = float(sps.binom.sf(n_claimed - 1, n, 0.5))
    p_against = float(sps.binom.sf(n - n_claimed - 1, n, 0.5))
    v = "reproduced" if p_for <= alpha else "not reproduced" if p_against <= alpha else "inconclusive"
    return {"verdict": v, "p claimed": p_for, "p other": p_against, "seeds needed": min_sign_seeds(alpha)}


def min_sign_seeds(alpha: float = (1 - LEVEL) / 2) -> int:
    """The fewest seeds with which a unanimous outcome is significant: 0.5ⁿ ≤ α."""
    return math.ceil(math.log(alpha) / math.log(0.5))


# --- power ---------------------------------------------------------------------------------------------------------

def sd_upper(sd: float, n: int, conf: float = SD_UPPER_LEVEL) -> float:
    """One-sided upper confidence bound of a normal SD from n points: sd·√((n − 1)/χ²_{1−conf, n−1})."""
    if n < 2:
        raise ValueError(f"an SD's upper bound needs at least 2 points, got {n}")
    return sd * math.sqrt((n - 1) / sps.chi2.ppf(1 - conf, n - 1))


def power_at(effect: float, sd: float, doc_sd: float, n: int, level: float = LEVEL) -> float:
    """Probability that the pooled interval clears 0 on the effect's side when the true effect is ``effect``: the
    one-sided test at (1 − level)/2 with standard error √(sd²/n + doc_sd²) and n − 1 df (noncentral t)."""
    if n < 2:
        return 0.0
    se = math.sqrt(sd ** 2 / n + doc_sd ** 2)
    if se == 0:
        return 1.0 if effect != 0 else 0.0
    df = (n - 1) * se ** 4 / (sd ** 2 / n) ** 2 if sd > 0 else 1e9  # as pool(): Welch–Satterthwaite
    crit = sps.t.ppf(0.5 + level / 2, df)
    return float(sps.nct.sf(crit, df, abs(effect) / se))


def mde(sd: float, doc_sd: float, n: int, power: float = POWER, level: float = LEVEL) -> float:
    """The minimum detectable effect: the smallest true effect whose interval clears 0 with probability ``power``."""
    if n < 2:
        return float("inf")
    se = math.sqrt(sd ** 2 / n + doc_sd ** 2)
    if se == 0:
        return 0.0
    return float(optimize.brentq(lambda d: power_at(d, sd, doc_sd, n, level) - power, 0.0, 100 * se + 1e-9))


def seeds_needed(effect: float, sd: float, doc_sd: float, power: float = POWER, level: float = LEVEL,
                 most: int = MAX_SEEDS) -> int | None:
    """The fewest seeds (2..most) at which an effect of ``effect`` is detected with ``power``; None when even
    ``most`` seeds do not suffice (the shared document error alone may be too large: more documents, not seeds)."""
    for n in range(2, most + 1):
        if power_at(effect, sd, doc_sd, n, level) >= power:
            return n
    return None


def power_row(estimates: Sequence[Estimate], sesoi: float, distance: float | None = None) -> dict[str, float | None]:
    """The power analysis of one unit from the seeds it has: the between-seed SD and its upper bound, the MDE at
    these seeds and at five (with the upper bound), and the seeds that would detect an effect of SESOI — and, given
    ``distance`` (the observed pooled distance of the estimate from its threshold), the seeds that would detect it."""
    n = len(estimates)
    p = pool(estimates)
    up = sd_upper(p.between_sd, n) if n > 1 else float("nan")
    row: dict[str, float | None] = {"seeds": n, "between-seed sd": p.between_sd, "sd upper bound": up,
                                    "document sd": p.doc_sd, "MDE at these seeds": mde(up, p.doc_sd, n),
                                    "MDE at 5 seeds": mde(up, p.doc_sd, 5), "SESOI": sesoi,
                                    "seeds to detect SESOI": seeds_needed(sesoi, up, p.doc_sd)}
    if distance is not None:
        row["seeds to detect the observed distance"] = seeds_needed(distance, up, p.doc_sd)
    return row


def route_seeds(estimates: Sequence[Estimate], rule: Rule, m: int = 1) -> dict[str, int | None]:
    """For an undecided unit, the seeds that would decide it by each route its rule has, at the distance observed
    (docs/statistics.md §5 and amendment 18): "reproduced" (the interval clears the rule's reproducing boundary at
    the nominal level) and "not reproduced" (it clears the other boundary, or for a claim about a nonzero effect lies
    inside ±SESOI, at the Bonferroni level 1 − α/m, as ``combine`` reads it). Each is ``seeds_needed`` for the
    distance from the pooled point to that route's boundary, with the between-seed SD's upper bound; a route the point
    does not lie on is absent (the observed point would have to move), and None means more than MAX_SEEDS."""
    n = len(estimates)
    if n < 2:
        return {}
    p = pool(estimates)
    up, doc = sd_upper(p.between_sd, n), p.doc_sd
    corrected = 1 - (1 - LEVEL) / m
    t, d, s, x = rule.threshold, rule.sesoi, rule.side, p.point
    out: dict[str, int | None] = {}

    def need(distance: float, level: float) -> int | None:
        return seeds_needed(distance, up, doc, level=level) if distance > 0 else None

    if rule.kind == "superiority":
        if s * (x - t) > 0 and not (rule.negligible and abs(x - t) < d):
            out["reproduced"] = need(abs(x - t), LEVEL)
        if s * (x - t) < 0:
            out["not reproduced (other side)"] = need(abs(x - t), corrected)
        if rule.negligible and abs(x - t) < d:
            out["not reproduced (inside ±SESOI)"] = need(d - abs(x - t), corrected)
    elif rule.kind == "equivalence":
        if abs(x - t) < d:
            out["reproduced"] = need(d - abs(x - t), LEVEL)
        else:
            out["not reproduced (beyond ±SESOI)"] = need(abs(x - t) - d, corrected)
    else:  # non-inferiority: the margin t + side·d, worse beyond it
        b = t + s * d
        if s * (b - x) > 0:
            out["reproduced"] = need(abs(b - x), LEVEL)
        else:
            out["not reproduced (beyond the margin)"] = need(abs(x - b), corrected)
    return out


# --- the pre-registered specification and the power table ----------------------------------------------------------

def spec_path():
    from pathlib import Path
    return Path(__file__).parent.parent / "preregistered.csv"  # package data, at the top of tiedlm_lib


def read_spec() -> list[dict[str, str]]:
    """docs/statistics.md's per-claim rules as rows (tiedlm_lib/preregistered.csv)."""
    import csv
    with open(spec_path(), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def principal_sesoi(claim: str, spec: Sequence[Mapping[str, str]] | None = None) -> float | None:
    """The SESOI of a claim's first part that has one (the power table's yardstick for every block of the claim)."""
    for row in spec or read_spec():
        if row["claim"] == claim and row["sesoi"]:
            return float(row["sesoi"])
    return None


def seed_cis(block: dict[str, Any]) -> dict[str, list[float]]:
    """The per-seed entries of an evidence block: {"s0": [point, lo, hi], ...}."""
    return {k: v for k, v in block.items() if k[:1] == "s" and k[1:].isdigit() and isinstance(v, list)}


def _blocks(evidence: Mapping, threshold: float, path: str = ""):
    """(unit, per-seed estimates, threshold) for every evidence block that holds per-seed CIs."""
    threshold = float(evidence.get("threshold", threshold)) if isinstance(evidence.get("threshold"), int | float) \
        else threshold
    for key, block in evidence.items():
        if not isinstance(block, Mapping):
            continue
        cis = seed_cis(block)
        if len(cis) >= 2:
            # a paired difference is judged against 0 even where its claim's shares are judged against a threshold
            thr = 0.0 if "paired" in key else float(block.get("margin", threshold))
            yield f"{path}{key}", [Estimate(*v) for v in cis.values()], thr
        yield from _blocks(block, threshold, f"{path}{key} / ")


def power_table(ledger: Mapping) -> list[dict]:
    """One row per evidence block of every ledger entry with at least two seeds: the power analysis at the seeds it
    has (``power_row``), against the claim's principal SESOI and the observed distance from the block's threshold."""
    spec = read_spec()
    rows = []
    for e in ledger["claims"]:
        sesoi = principal_sesoi(e["id"], spec)
        if sesoi is None:
            continue
        for unit, ests, thr in _blocks(e.get("evidence", {}), 0.0):
            p = pool(ests)
            r = power_row(ests, sesoi, abs(p.point - thr))
            rows.append({"claim": e["id"], "protocol": e["protocol"], "unit": unit, "threshold": thr,
                         "pooled": p.point, "interval": (p.lo, p.hi)} | r)
    return rows


def power_markdown(rows: Sequence[Mapping]) -> str:
    def n(x):
        return "> 50" if x is None else str(x)

    out = ["| claim | protocol | unit | pooled [95% interval] | threshold | between-seed sd (upper) | doc sd | "
           "MDE at 3 / 5 seeds | SESOI | seeds for SESOI | seeds for observed |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['claim']} | {r['protocol']} | {r['unit']} | {r['pooled']:+.3f} [{r['interval'][0]:+.3f}, "
                   f"{r['interval'][1]:+.3f}] | {r['threshold']:g} | {r['between-seed sd']:.3f} "
                   f"({r['sd upper bound']:.3f}) | {r['document sd']:.3f} | {r['MDE at these seeds']:.3f} / "
                   f"{r['MDE at 5 seeds']:.3f} | {r['SESOI']:g} | {n(r['seeds to detect SESOI'])} | "
                   f"{n(r['seeds to detect the observed distance'])} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import json
    p = argparse.ArgumentParser(prog="python -m tiedlm_lib.stats.inference",
                                description="the power analysis of docs/statistics.md from a claims ledger")
    p.add_argument("ledger", help="a claims.json, e.g. paper/cpu/claims.json")
    a = p.parse_args(argv)
    with open(a.ledger, encoding="utf-8") as f:
        print(power_markdown(power_table(json.load(f))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
