"""Each claim's evidence shaped for judgement, by section: a notebook computes per training seed a paired estimate
with its document-bootstrap CI (``PerSeed``: seed → ``stats.Estimate``) and calls its claim's function here, which
puts the numbers into the claim's parts and units and hands them to the engine (``paper.judging.judge``) with the
claim's specification (``paper.claimbook``). Every outcome each function can return is produced by
tests/test_verdicts.py on synthetic estimates; ``UNREACHABLE`` lists the ones it cannot return, with the reason.
"""

from tiedlm_lib.paper.judging import (
    CHECK,
    RULE_TEXT,
    Z95,
    Judgement,
    Parts,
    PerSeed,
    _spec,
    at_best_inconclusive,
    ci,
    difference,
    forest_rows,
    point,
    quantised,
    ratio,
    rule,
    seed_evidence,
    seeds_to_decide,
    sesoi,
    side,
    spec,
    spread_lines,
    undecided,
    unit_evidence,
)
from tiedlm_lib.paper.verdicts.at_inference import DEPTH_SAVING, Q7_CONFIG, SPEEDUP_TARGET, q7, q8, q9
from tiedlm_lib.paper.verdicts.benchmark import (
    A15_WANT,
    Q6_TAU,
    a11,
    a12,
    a13,
    a14,
    a15,
    a16,
    a17,
    a20,
    q4,
    q4_part,
    q4_rule,
    q6,
)
from tiedlm_lib.paper.verdicts.depth import (
    A4_SAVING,
    MARGIN_GAP_FRACTION,
    MARGIN_NATS,
    a1,
    a2,
    a4,
    a4_judged,
    a5,
    a6,
    a6_margin,
    a7,
    a8,
    q2,
    q3,
)
from tiedlm_lib.paper.verdicts.gradients import A9_RATIO, A9_SHORT_MARGIN, a3, a9, a10, q5
from tiedlm_lib.paper.verdicts.negative import a18, a19
from tiedlm_lib.paper.verdicts.protocol import (
    HEADLINE_PROBE,
    SHARE_THRESHOLD,
    TERM_FRACTION,
    _shares,
    b1,
    b2,
    b3,
    b4,
    b5,
    b6,
    q1,
    share_answer,
)

__all__ = [
    "CHECK", "RULE_TEXT", "Z95", "Judgement", "Parts", "PerSeed", "_spec", "at_best_inconclusive", "ci",
    "difference", "forest_rows", "point", "quantised", "ratio", "rule", "seed_evidence", "seeds_to_decide", "sesoi",
    "side", "spec", "spread_lines", "undecided", "unit_evidence", "DEPTH_SAVING", "Q7_CONFIG", "SPEEDUP_TARGET",
    "q7", "q8", "q9", "A15_WANT", "Q6_TAU", "a11", "a12", "a13", "a14", "a15", "a16", "a17", "a20", "q4", "q4_part",
    "q4_rule", "q6", "A4_SAVING", "MARGIN_GAP_FRACTION", "MARGIN_NATS", "a1", "a2", "a4", "a4_judged", "a5", "a6",
    "a6_margin", "a7", "a8", "q2", "q3", "A9_RATIO", "A9_SHORT_MARGIN", "a3", "a9", "a10", "q5", "a18", "a19",
    "HEADLINE_PROBE", "SHARE_THRESHOLD", "TERM_FRACTION", "_shares", "b1", "b2", "b3", "b4", "b5", "b6", "q1",
    "share_answer",
]  # the names the sections and tests read as verdicts.<name> (judgement_names() and UNREACHABLE too)

# Outcomes a claim's function cannot return, with the reason (tests/test_verdicts.py checks every other outcome is
# reached and these never are).
UNREACHABLE: dict[str, dict[str, str]] = {
    "A20": {"reproduced": "its quality half is not testable at this scale, so the claim is at best inconclusive "
                          "(amendment 18); its measurable half's own outcome is in the outcomes"},
    "B6": {"check failed": "the decomposition telescopes by construction; a failure is an error, not a verdict"},
}


def judgement_names() -> list[str]:
    """The claim functions (a1 ... q9), one per claim ID."""
    return [n for n in globals() if n[:1] in "abq" and n[1:].isdigit()]
