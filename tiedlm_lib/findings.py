"""The findings in words: the abstract's sentences, each a finding with its pooled effect, interval and verdict,
generated from the ledger (so they change when a verdict does), then the verdict counts.

A finding names one unit of one ledger entry (``Finding``: claim, protocol, unit); its sentence is written only
when the ledger holds that unit, from the unit's pooled block (point, 95% interval, seeds) and the entry's
verdict. The README's findings block and the HTML index open with the same sentences.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .atomic import replace_block
from .claims import _pooled_units, abstract_findings, findings_markdown


@dataclass(frozen=True)
class Finding:
    claim: str
    protocol: str
    unit: str  # the unit's key in the entry's evidence (as ``claims._pooled_units`` names it)
    template: str  # {p}, {lo}, {hi}: the pooled point and interval; {v}: the verdict; {n}: the seeds


FINDINGS: tuple[Finding, ...] = (
    Finding("A1", "corrected", "depth scaling: v3",
            "Depth scaling under single-depth training: on the small model NLL(1) − NLL(K) is {p:+.2f} [{lo:+.2f}, "
            "{hi:+.2f}] nats, pooled over {n} (A1 {v})."),
    Finding("A6", "corrected", "small",
            "Exiting a multi-depth model at k = 1 costs {p:+.3f} [{lo:+.3f}, {hi:+.3f}] nats against its best "
            "depth on the small model (A6 {v})."),
    Finding("A8", "corrected", "small",
            "Multi-depth supervision moves the small model's best NLL by {p:+.3f} [{lo:+.3f}, {hi:+.3f}] nats "
            "against single-depth training (A8 {v})."),
    Finding("A10", "corrected", "underfits over the horizon: phantom - full",
            "At the end of the horizon study the paper's phantom gradient lies {p:+.3f} [{lo:+.3f}, {hi:+.3f}] "
            "nats from full backprop (A10 {v})."),
    Finding("A13", "corrected", "tied - vanilla",
            "The tied model minus the iso-parameter vanilla model is {p:+.3f} [{lo:+.3f}, {hi:+.3f}] nats of "
            "real-token NLL (A13 {v})."),
    Finding("Q4", "corrected", "tied - compute-matched vanilla",
            "Against a vanilla model matched in compute rather than parameters, the tied model is {p:+.3f} "
            "[{lo:+.3f}, {hi:+.3f}] nats (Q4 {v})."),
)


def _unit(ledger: dict[str, Any], f: Finding) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(entry, pooled block) of the first entry of the finding's claim and protocol that holds its unit."""
    for e in ledger.get("claims", []):
        if e["id"] == f.claim and e["protocol"] == f.protocol:
            block = _pooled_units(e.get("evidence", {})).get(f.unit)
            if block is not None:
                return e, block
    return None


def finding_sentences(ledger: dict[str, Any], findings: tuple[Finding, ...] = FINDINGS) -> list[str]:
    """One sentence per finding whose unit the ledger holds, in ``findings`` order."""
    out = []
    for f in findings:
        hit = _unit(ledger, f)
        if hit is None:
            continue
        e, block = hit
        lo, hi = block["interval"]
        n = block.get("seeds")
        out.append(f.template.format(p=block["point"], lo=lo, hi=hi, v=e["verdict"],
                                     n="? seeds" if n is None else f"{n} seed{'s' if n != 1 else ''}"))
    return out


def abstract(ledger: dict[str, Any]) -> str:
    """Two paragraphs: the findings, then the verdict counts (``claims.abstract_findings``)."""
    sentences = finding_sentences(ledger)
    return (" ".join(sentences) + "\n\n" if sentences else "") + abstract_findings(ledger)


FINDINGS_BEGIN = "<!-- findings: generated from paper/cpu/claims.json by tiedlm_lib.findings.readme_block -->"
FINDINGS_END = "<!-- findings: end -->"


def readme_block(ledger: dict[str, Any]) -> str:
    """The README's findings: the findings' sentences (``finding_sentences``), then the verdict table
    (``claims.findings_markdown``)."""
    sentences = finding_sentences(ledger)
    return (" ".join(sentences) + "\n\n" if sentences else "") + findings_markdown(ledger)


def update_readme(readme: str | Path, ledger: dict[str, Any]) -> bool:
    """Rewrite the README's findings block from the ledger; True if it changed."""
    return replace_block(readme, FINDINGS_BEGIN, FINDINGS_END, readme_block(ledger))
