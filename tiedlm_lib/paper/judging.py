"""The engine that judges every claim: a claim is data (``Claim``: the pre-registered parts that decide it, how
their units combine, its criterion as a template filled from ``tiedlm_lib/preregistered.csv``), its evidence is the
units a section computed (``Parts``: per part and unit, each training seed's estimate with its document-bootstrap
CI), and ``judge(claim, parts, **context)`` pools every unit over seeds under its part's rule
(``tiedlm_lib.stats.inference``), combines them and returns a ``Judgement``: the verdict, the criterion in words, the
evidence (each seed's CI and, per unit, the pooled estimate with its interval, the SESOI, the seeds significant each
way, the prediction interval for a new seed, the MDE at the seeds it has) and the basis. A claim is reproduced when
every unit of every part is (intersection–union) and not reproduced when some unit is at the Bonferroni level over
its units (docs/statistics.md). The claims themselves are in ``paper.claimbook``; the shaping of each claim's
evidence in ``paper.verdicts``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from tiedlm_lib.stats import inference as inf
from tiedlm_lib.stats.bootstrap import Estimate
from tiedlm_lib.stats.inference import seed_cis

Z95 = 1.959963984540054  # the normal 0.975 quantile: the normal-scale intervals built here are 95% intervals

PerSeed = Mapping[int, Estimate]


@dataclass(frozen=True)
class Judgement:
    """A claim's verdict with its criterion, evidence and basis, ready for ``Report.judge``."""

    claim: str
    verdict: str
    criterion: str
    evidence: dict[str, Any]
    protocol: str = "corrected"
    basis: str = ""
    outcomes: dict[str, str] = field(default_factory=dict)  # per unit: that unit's verdict under its rule
    seeds: tuple[int, ...] | None = None  # the seeds it rests on when its evidence names none (a derived answer)


def at_best_inconclusive(j: Judgement, runs: Sequence[str]) -> Judgement:
    """A claim that reads a run which stopped or diverged (docs/statistics.md amendments 12 and 15) is at best
    inconclusive: a decided verdict or answer becomes "inconclusive", and the basis and evidence name the runs and
    the verdict before the cap. With no such run the judgement is returned as it is."""
    if isinstance(runs, str):
        raise TypeError(f"runs must be a sequence of run names, got the string {runs!r}")
    if not runs:
        return j
    named = ", ".join(runs)
    decided = ("reproduced", "not reproduced", "yes", "no")  # checks and "not testable" are not verdicts to cap
    return replace(j, verdict="inconclusive" if j.verdict in decided else j.verdict,
                   basis=f"{j.basis}; at best inconclusive: it reads {named}, which stopped or diverged "
                         "(statistics.md amendment 15)",
                   evidence={**j.evidence, "runs that stopped or diverged": list(runs),
                             "verdict before the cap": j.verdict})


# --- the specifications --------------------------------------------------------------------------------------------

@cache
def _spec() -> dict[tuple[str, str], dict[str, str]]:
    return {(r["claim"], r["part"]): r for r in inf.read_spec()}


def spec(claim: str, part: str) -> dict[str, str]:
    """The pre-registered row of one claim part (tiedlm_lib/preregistered.csv)."""
    try:
        return _spec()[claim, part]
    except KeyError:
        parts = sorted(p for c, p in _spec() if c == claim)
        raise KeyError(f"{claim} has no pre-registered part {part!r}; its parts: {parts}") from None


def rule(claim: str, part: str, threshold: float | None = None, side: int | None = None) -> inf.Rule:
    """The ``inference.Rule`` of a claim part; ``threshold`` where the row's is symbolic (Q8's 0.9K), ``side`` where
    one part holds units of both sides (A15's pairs)."""
    r = spec(claim, part)
    thr = threshold if threshold is not None else float(r["threshold"] or 0)
    return inf.Rule(r["rule"], float(r["sesoi"]), thr, side if side is not None else int(r["side"] or 1),
                    r["negligible"] == "yes")


def sesoi(claim: str, part: str) -> float:
    return float(spec(claim, part)["sesoi"])


# --- evidence ------------------------------------------------------------------------------------------------------

def ci(e: Estimate) -> list[float]:
    return [e.point, e.lo, e.hi]


def point(x: float) -> Estimate:
    """A per-seed quantity without a CI (a depth, a ratio, a rank correlation): pooled with zero within-seed
    variance, i.e. by the t-interval on the seed points."""
    return Estimate(float(x), float(x), float(x))


def difference(a: Estimate, b: Estimate) -> Estimate:
    """a − b for two estimates from separate resamples, their variances added (a normal-scale interval)."""
    half = Z95 * math.sqrt(inf.within_variance(a) + inf.within_variance(b))
    d = a.point - b.point
    return Estimate(d, d - half, d + half)


def ratio(a: Estimate, b: Estimate) -> Estimate:
    """a / b with a delta-method interval, r ± z·|r|·√(var a / a² + var b / b²) (statistics.md amendment 13), so that a
    ratio of two estimates keeps their document error instead of entering as a bare point. The covariance is left
    out: for two quantities measured on the same documents with the same sign (a term and the total it is part of,
    two models' gaps) it is positive, and leaving it out widens the interval. Undefined (NaN) when b's point is 0."""
    if b.point == 0:
        nan = float("nan")
        return Estimate(nan, nan, nan)
    r = a.point / b.point
    if a.point == 0:
        half = Z95 * math.sqrt(inf.within_variance(a)) / abs(b.point)
    else:
        half = Z95 * abs(r) * math.sqrt(inf.within_variance(a) / a.point ** 2 + inf.within_variance(b) / b.point ** 2)
    return Estimate(r, r - half, r + half)


def _finite(x: float) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def unit_evidence(per_seed: PerSeed, r: inf.Rule, res: inf.UnitResult, m: int = 1) -> dict[str, Any]:
    """Each seed's CI and the pooled block: what the verdict rests on, and what describes the seeds beside it; for
    an undecided unit, the seeds each route would need (``inference.route_seeds``; ``m`` units in the claim)."""
    p = res.pooled
    ests = list(per_seed.values())
    # power against the boundary nearest the point where the verdict changes (the threshold; the margin for
    # equivalence and non-inferiority)
    pw = inf.power_row(ests, r.sesoi, min(abs(p.point - b) for b in r.boundaries())) if p.n > 1 else {}
    pooled = {"point": p.point, "interval": [p.lo, p.hi], "HKSJ interval": [p.hksj_lo, p.hksj_hi], "tau2": p.tau2,
              "between-seed sd": _finite(p.between_sd), "document sd": p.doc_sd,
              "prediction interval": [_finite(p.pred_lo), _finite(p.pred_hi)], **res.counts,
              "seed-sensitive": res.seed_sensitive, "rule": r.kind, "side": r.side, "threshold": r.threshold,
              "negligible route": r.negligible, "df": _finite(p.df),
              "sesoi": r.sesoi, "verdict": res.verdict, "verdict at the Bonferroni level": res.verdict_corrected,
              "MDE at these seeds": _finite(pw.get("MDE at these seeds", math.inf)),
              "seeds to detect SESOI": pw.get("seeds to detect SESOI"),
              "seeds to detect the observed distance": pw.get("seeds to detect the observed distance")}
    if res.verdict == "inconclusive" and p.n > 1:
        pooled["seeds to decide, by route"] = inf.route_seeds(ests, r, m)
    return {f"s{s}": ci(e) for s, e in per_seed.items()} | {"pooled": pooled}


@dataclass
class Parts:
    """A claim's parts as they are judged: (part name, unit, per-seed estimates, rule), collected, then pooled and
    combined by intersection–union over every unit of every part."""

    claim: str
    units: list[tuple[str, str, PerSeed, inf.Rule]] = field(default_factory=list)

    def add(self, part: str, units: Mapping[str, PerSeed], r: inf.Rule | None = None) -> Parts:
        if not units:
            raise ValueError(f"{self.claim} ({part}): no units to judge")
        for u, ps in units.items():
            if not ps:
                raise ValueError(f"{self.claim} ({part}): unit {u!r} has no seed's estimate")
            self.units.append((part, u, ps, r or rule(self.claim, part)))
        return self

    def judge(self) -> tuple[str, dict[str, inf.UnitResult], dict[str, Any]]:
        m = len(self.units)
        res, ev = {}, {}
        one_part = len({p for p, *_ in self.units}) == 1
        for part, u, ps, r in self.units:
            key = u if one_part else f"{part}: {u}"
            if key in res:
                raise ValueError(f"{self.claim}: unit {key!r} is judged twice")
            res[key] = inf.judge_unit(key, list(ps.values()), r, m)
            ev[key] = unit_evidence(ps, r, res[key], m)
        return inf.combine(list(res.values())), res, ev


def _basis(res: Mapping[str, inf.UnitResult], extra: str = "", combine: str | None = None) -> str:
    """How a verdict was reached: the seeds pooled, how its units combine (``combine``; default intersection-union)
    and which units are seed-sensitive."""
    ns = sorted({r.pooled.n for r in res.values()})
    n = f"{ns[0]} seeds" if len(ns) == 1 else f"{ns[0]} to {ns[-1]} seeds by unit"
    if ns[-1] == 1:
        return "single-seed: each unit is that seed's CI (nothing pooled)" + extra
    sens = [u for u, r in res.items() if r.seed_sensitive]
    bare = [u for u, r in res.items() if r.pooled.n > 1 and r.pooled.doc_sd == 0]
    how = ("random effects, HKSJ t-interval with the shared-document term" if not bare else
           "a t-interval on the seed points (points without per-seed CIs)" if len(bare) == len(res) else
           "random effects, HKSJ t-interval with the shared-document term; a t-interval on the seed points for "
           f"{' and '.join(bare)}, which have no per-seed CIs")
    return (f"pooled over {n} ({how}; docs/statistics.md), "
            + (combine or f"intersection-union over {len(res)} unit{'s' if len(res) != 1 else ''}")
            + (f"; seed-sensitive (a new seed's prediction interval crosses the threshold): {', '.join(sens)}"
               if sens else "") + extra)


def seeds_to_decide(routes: Mapping[str, Mapping[str, int | None]]) -> tuple[int | None, str]:
    """The seeds that would decide a claim over its undecided units, by the cheapest route (docs/statistics.md
    amendment 18): "reproduced" needs every undecided unit reproduced (the most any of them needs), "not reproduced"
    needs one unit not reproduced at the Bonferroni level (the fewest any needs). ``routes``: per undecided unit,
    ``inference.route_seeds``. Returns (seeds or None for more than MAX_SEEDS, the route in words)."""
    rep = [r.get("reproduced", -1) for r in routes.values()]
    reproduce = None if not rep or any(x is None or x == -1 for x in rep) else max(rep)
    against = [(n, f"{how} in {u}") for u, r in routes.items() for how, n in r.items()
               if how != "reproduced" and n is not None]
    best_against = min(against, default=None)
    if reproduce is not None and (best_against is None or reproduce <= best_against[0]):
        return reproduce, "reproduced in every undecided unit"
    if best_against is not None:
        return best_against
    return None, ""


def undecided(res: Mapping[str, inf.UnitResult], ev: Mapping[str, Any]) -> str:
    """For an inconclusive verdict: how many seeds would decide it at the distances observed, by the cheapest route
    (``seeds_to_decide``: reproduced in every undecided unit, or not reproduced in one, other side or inside ±SESOI,
    at the Bonferroni level), or that more than MAX_SEEDS would not."""
    routes = {u: ev[u]["pooled"].get("seeds to decide, by route", {}) for u, r in res.items()
              if r.verdict == "inconclusive" and r.pooled.n > 1}
    if not routes:
        return ""
    n = max(r.pooled.n for r in res.values())
    seeds, how = seeds_to_decide(routes)
    if seeds is None:
        return (f"; undecided at {n} seeds, and no route decides it within {inf.MAX_SEEDS} seeds at the distances "
                "observed")
    return f"; undecided at {n} seeds: about {seeds} would decide it at the distances observed ({how})"


def side(block: Mapping[str, Any]) -> str:
    """Where a unit's pooled interval lies, in the words prose uses, with the rule's precedence (docs/statistics.md
    §2): "negligible" (inside ±SESOI around a zero threshold), else "below 0" / "above 0" (it excludes the
    threshold), else "undecided". ``block``: a unit's evidence (with its "pooled" block) or the pooled block."""
    p = block.get("pooled", block)
    lo, hi = p["interval"]
    t, d = p["threshold"], p["sesoi"]
    if p.get("negligible route", True) and p.get("rule", "superiority") == "superiority" and t == 0 \
            and -d < lo and hi < d:
        return "negligible"
    if hi < t or lo > t:
        return "below 0" if hi < t else "above 0"
    return "undecided"


def spread_lines(evidence: dict[str, Any], prefix: str = "") -> list[str]:
    """One line per pooled unit: each seed's CI beside the pooled estimate, its interval and the seed counts."""
    out = []
    for key, block in evidence.items():
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("pooled"), dict):
            cis = ", ".join(f"{k} {v[0]:+.3f} [{v[1]:+.3f}, {v[2]:+.3f}]" for k, v in seed_cis(block).items())
            p = block["pooled"]
            sens = "; seed-sensitive" if p["seed-sensitive"] else ""
            out.append(f"  {prefix}{key}: {cis} | pooled {p['point']:+.3f} [{p['interval'][0]:+.3f}, "
                       f"{p['interval'][1]:+.3f}] vs {p['threshold']:g} (SESOI {p['sesoi']:g}): {p['verdict']}; "
                       f"seeds above/below {p['seeds above']}/{p['seeds below']}{sens}")
        else:
            out += spread_lines(block, f"{prefix}{key} / ")
    return out


def forest_rows(evidence: dict[str, Any], path: str = "") -> list[dict[str, Any]]:
    """One row per pooled unit, for a forest plot: the pooled estimate, its interval, its threshold and SESOI."""
    rows = []
    for key, block in evidence.items():
        if not isinstance(block, dict):
            continue
        p = block.get("pooled")
        if isinstance(p, dict):
            rows.append({"unit": f"{path}{key}", "point": p["point"], "lo": p["interval"][0], "hi": p["interval"][1],
                         "seeds": p["seeds"], "threshold": p["threshold"], "sesoi": p["sesoi"],
                         "verdict": p["verdict"]})
        else:
            rows += forest_rows(block, f"{path}{key} / ")
    return rows


def nonempty(claim: str, flags: Mapping, what: str) -> Mapping:
    if not flags:
        raise ValueError(f"{claim} needs at least one unit to judge ({what}), got none")
    return flags


def pts(values: Mapping[int, float]) -> dict[int, Estimate]:
    return {s: point(v) for s, v in values.items()}


def words(r: inf.Rule, what: str) -> str:
    """A rule in words, for a criterion."""
    t, d = f"{r.threshold:g}", f"{r.sesoi:g}"
    if r.kind == "equivalence":
        return f"{what} inside +/-{d} (equivalence)"
    if r.kind == "noninferiority":
        return f"{what} {'below +' if r.side > 0 else 'above -'}{d} (non-inferiority)"
    nil = f"; not reproduced also inside {t} +/- {d}" if r.negligible else ""
    return f"{what} {'above' if r.side > 0 else 'below'} {t}{nil}"


# --- section 02: gradient estimators -------------------------------------------------------------------------------

A9_RATIO = float(spec("A9", "saves memory and time")["threshold"])  # phantom/full memory and time (paper 0.54, 0.48)
A9_SHORT_MARGIN = sesoi("A9", "costs little over a short run")


def quantised(x: float, step: float) -> Estimate:
    """A per-seed difference of two depths each read off a grid of spacing ``step`` (the first grid depth past a
    threshold): each true crossing lies somewhere in the step before it, so each carries the rounding variance of a
    uniform over one step, step²/12, and their difference twice that (statistics.md amendment 13). Without it,
    seeds that agree on the same integers would pool to an interval of zero width."""
    if not step > 0:
        raise ValueError(f"step must be > 0, got {step!r}")
    half = Z95 * step * math.sqrt(2 / 12)
    return Estimate(float(x), float(x) - half, float(x) + half)


def seed_evidence(per_seed: PerSeed, r: inf.Rule | None = None) -> dict[str, Any]:
    """Each seed's CI with the pooled block under ``r`` (default: a sign rule with SESOI 0.05), for evidence that is
    shown beside a verdict rather than judged."""
    if not per_seed:
        raise ValueError("a claim needs at least one seed's estimate")
    r = r or inf.Rule("superiority", 0.05)
    return unit_evidence(per_seed, r, inf.judge_unit("shown", list(per_seed.values()), r))


# --- claims as data ------------------------------------------------------------------------------------------------

RULE_TEXT = "pooled over seeds (docs/statistics.md)"
CHECK = ("check passed", "check failed")  # the outcomes of a check (kind "check"): never a reproduction

KINDS = {
    "all": "intersection-union over every unit of every part: reproduced, not reproduced or inconclusive",
    "answer": "a question judged as 'all', read as yes, no or inconclusive",
    "measurement": "a measurement on one machine (no seeds to pool) and pooled parts must all hold",
    "law": "each size's best model must lack one of two properties (A7)",
    "count": "one event falsifies 'never'; a half not testable at this scale caps it at inconclusive",
    "check": "holds by construction: check passed or failed, never a reproduction",
    "derived": "read off other judgements",
    "family": "some member of a family of probes at the Bonferroni level over the family",
    "per unit": "each unit answered on its own; the named unit's answer is the verdict",
    "either": "yes and no from two groups of units, each at its own level",
    "selected": "a configuration selected on one seed before the rule, judged on the other seeds",
}


@dataclass(frozen=True)
class Claim:
    """A claim as data. ``parts``: the rows of ``preregistered.csv`` that decide it (their rule kind, side, threshold
    and SESOI come from there); ``kind``: how the parts' units combine (``KINDS``); ``criterion``: the criterion's
    template (``render``); ``clauses``: named optional clauses of the template, ``{name}`` in it, each a pair (text
    when the section passes ``name=True``, text otherwise)."""

    id: str
    criterion: str
    parts: tuple[str, ...] = ()
    kind: str = "all"
    protocol: str = "corrected"
    clauses: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind {self.kind!r} is not one of {sorted(KINDS)}")
        for part in self.parts:
            spec(self.id, part)  # a part the CSV does not have is an error now, not at the first judgement

    def rule(self, part: str | None = None, **override) -> inf.Rule:
        """The pre-registered rule of ``part`` (default: the first deciding part)."""
        return rule(self.id, part or self.parts[0], **override)


_FIELD = re.compile(r"\[\[(words|sesoi|threshold|percent|negligible):([^|\]]+)(?:\|([^|\]]*))?(?:\|([^\]]*))?\]\]")


def render(claim: Claim, **context: Any) -> str:
    """The criterion of ``claim`` in words. Its template takes ``{name}`` from ``context`` (and ``{rule_text}``, how
    the units are pooled), then each part's pre-registered rule: ``[[words:PART|WHAT]]`` the rule in words about WHAT,
    ``[[threshold:PART]]``, ``[[percent:PART]]`` (the threshold as a percentage) and ``[[sesoi:PART]]`` its numbers,
    ``[[negligible:PART|IF|ELSE]]`` IF where the part has the inside +/-SESOI route, ELSE (default nothing) where not,
    with SESOI in either replaced by the number. A number the CSV changes changes the text with the verdict."""
    text = claim.criterion
    for name, (yes, no) in claim.clauses.items():
        text = text.replace("{" + name + "}", yes if context.pop(name, False) else no)
    try:
        text = text.format(rule_text=RULE_TEXT, **context)
    except KeyError as e:
        raise KeyError(f"{claim.id}'s criterion names {e.args[0]!r}, which the section did not pass") from None

    def fill(m: re.Match) -> str:
        what, part, a, b = m.groups()
        if what == "words":
            return words(rule(claim.id, part), a or "")
        row = spec(claim.id, part)
        if what == "negligible":
            return (a if row["negligible"] == "yes" else b or "").replace("SESOI", f"{float(row['sesoi']):g}")
        x = float(row["sesoi" if what == "sesoi" else "threshold"])
        return f"{x:.0%}" if what == "percent" else f"{x:g}"

    return _FIELD.sub(fill, text)


def judge(claim: Claim, parts: Parts, *, protocol: str | None = None, shown: Mapping[str, Any] | None = None,
          basis: str = "", **context: Any) -> Judgement:
    """Judge ``claim`` on ``parts`` (kinds "all" and "answer"): every unit pooled over seeds under its part's rule and
    combined by intersection-union; an undecided verdict's basis says how many seeds would decide it. ``shown``:
    evidence shown beside, not deciding; ``basis``: a sentence the section adds to the basis; ``context``: the values
    the criterion's template names."""
    if claim.kind not in ("all", "answer"):
        raise ValueError(f"{claim.id} is judged by its kind {claim.kind!r} ({KINDS[claim.kind]}), not by judge()")
    if parts.claim != claim.id:
        raise ValueError(f"the evidence is {parts.claim}'s, not {claim.id}'s")
    v, res, ev = parts.judge()
    tail = undecided(res, ev) if v == "inconclusive" else ""
    if claim.kind == "answer":
        v = {"reproduced": "yes", "not reproduced": "no"}.get(v, "inconclusive")
    return Judgement(claim.id, v, render(claim, **context), ev | dict(shown or {}), protocol or claim.protocol,
                     _basis(res, basis + tail), {u: r.verdict for u, r in res.items()})
