"""Section 09, the negative results: A18 (no fixed point: a check under the paper's block form, a claim under the
residual form) and A19 (the residual-norm probe is weak and stronger at the larger size)."""

from __future__ import annotations

from collections.abc import Mapping

from tiedlm_lib.paper.claimbook import claim
from tiedlm_lib.paper.judging import CHECK, Judgement, Parts, PerSeed, difference, judge, nonempty, pts, render, spec


def a18(last_over_first: Mapping[str, Mapping[int, float]], protocol: str, where: str) -> Judgement:
    """No fixed point. Under the paper's block form this holds by construction (it re-adds a normalised state, a
    floor on the residual): a **check** (passed when the relative residual at the last iteration is at least 0.5 ×
    its first-iteration value in every seed and size), not a reproduction. Under the residual form (extension) a
    claim: last / first pooled above 0.5 at every size."""
    nonempty("A18", last_over_first, "a size's residual ratios")
    if protocol == "paper":
        c = claim("A18")
        floor = float(spec("A18", c.parts[0])["threshold"])
        ok = all(r >= floor for d in last_over_first.values() for r in d.values())
        return Judgement("A18", CHECK[0] if ok else CHECK[1], render(c, where=where),
                         {u: {f"s{s}": r for s, r in d.items()} for u, d in last_over_first.items()}, protocol,
                         "per-seed point ratios; holds by construction")
    parts = Parts("A18").add("never converges", {u: pts(d) for u, d in last_over_first.items()})
    return judge(claim("A18 extension"), parts, protocol=protocol, where=where)


def a19(r: Mapping[str, PerSeed], protocol: str, where: str, small: str, large: str) -> Judgement:
    """A weak probe, stronger at the larger size: r pooled above 0 and below 0.5 at both sizes, and r(large) −
    r(small) of the same seed pooled above 0 (SESOI 0.05)."""
    both = sorted(set(r[small]) & set(r[large]))
    if not both:
        raise ValueError(f"A19 needs the same seeds at both sizes ({small}, {large})")
    parts = (Parts("A19").add("a probe at all", r).add("weak", r)
             .add("stronger at the larger size", {f"r({large}) - r({small})": {
                 s: difference(r[large][s], r[small][s]) for s in both}}))
    return judge(claim("A19"), parts, protocol=protocol, where=where, small=small, large=large)
