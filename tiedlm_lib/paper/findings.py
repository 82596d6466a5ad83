"""The findings in words: the abstract's sentences, each a finding with its pooled effect, interval and verdict,
generated from the ledger (so they change when a verdict does), then the verdict counts.

A finding names one unit of one ledger entry (``Finding``: claim, protocol, unit); its sentence is written only
when the ledger holds that unit, from the unit's pooled block (point, 95% interval, seeds) and the entry's
verdict, and may be followed by a sentence of the entry's scalar evidence (``after``). The sentences come in short
paragraphs (``paragraph``): what depth and exit do, then training, architecture and the protocol. The README's
findings block and the HTML index open with the same sentences.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiedlm_lib.paper.claims import _pooled_units, abstract_findings, findings_markdown
from tiedlm_lib.store.atomic import replace_block


@dataclass(frozen=True)
class Finding:
    claim: str
    protocol: str
    unit: str  # the unit's key in the entry's evidence (as ``claims._pooled_units`` names it)
    template: str  # {p}, {lo}, {hi}: the pooled point and interval; {n}: the seeds. The sentence ends with where
    # the unit's interval lies and the entry's verdict (``finding_sentences``)
    after: str = ""  # a further sentence from scalar evidence: {ev[key]} of this entry, {other[key]} of the same
    # claim's entry under protocol ``also``; left out when a key is missing (a point, shown as measured)
    also: str = ""
    paragraph: int = 0  # findings of one paragraph number form one paragraph, in ``FINDINGS`` order


FINDINGS: tuple[Finding, ...] = (
    Finding("A1", "corrected", "depth scaling: v3",
            "Depth scaling under single-depth training: on the small model NLL(1) − NLL(K) is {p:+.2f} [{lo:+.2f}, "
            "{hi:+.2f}] nats, pooled over {n}"),
    Finding("A4", "corrected", "small/tau0.4",
            "Post-hoc max-prob exit at τ = 0.4 on the small single-depth model: its NLL minus uniform depth's at the "
            "same average depth is {p:+.3f} [{lo:+.3f}, {hi:+.3f}] nats, pooled over {n}",
            after="At τ = 0.4 the exit penalty is {ev[exit penalty / depth gap (mean)]:.0%} of the depth gap with "
                  "the corrected fallback and {other[exit penalty / depth gap (mean)]:.0%} with the paper's (the "
                  "paper reports {ev[reported exit penalty / depth gap]:.0%}).", also="paper"),
    Finding("A6", "corrected", "small",
            "Exiting a multi-depth model at k = 1 costs {p:+.3f} [{lo:+.3f}, {hi:+.3f}] nats against its best "
            "depth on the small model"),
    Finding("A8", "corrected", "small",
            "On the small model the best NLL under multi-depth supervision minus the best under single-depth "
            "training is {p:+.3f} [{lo:+.3f}, {hi:+.3f}] nats"),
    Finding("A10", "corrected", "underfits over the horizon: phantom - full",
            "At the end of the horizon study the paper's phantom gradient's NLL minus full backprop's is {p:+.3f} "
            "[{lo:+.3f}, {hi:+.3f}] nats", paragraph=1),
    Finding("A13", "corrected", "tied - vanilla",
            "The tied model's real-token NLL minus the iso-parameter vanilla model's is {p:+.3f} [{lo:+.3f}, "
            "{hi:+.3f}] nats", paragraph=1),
    Finding("Q4", "corrected", "tied - compute-matched vanilla",
            "Against a vanilla model matched in compute rather than parameters, the tied model's NLL minus the "
            "vanilla model's is {p:+.3f} [{lo:+.3f}, {hi:+.3f}] nats", paragraph=1),
    Finding("B1", "extension", "neither is the whole: single small application count / total",
            "Of the small single-depth model's depth gap, the share the number of block applications accounts for "
            "(prefix(1) − frozen(1) over the whole gap) is {p:.0%} [{lo:.0%}, {hi:.0%}], pooled over {n}",
            paragraph=1),
    # B3 and Q1 read together (docs/statistics.md amendment 18): "little is correctable" is a property of the probe
    Finding("B3", "corrected", "little correctable: single small",
            "With paper B's probe (head/diagonal; for this row chosen post hoc, after the three-seed table) a "
            "readout fit removes {p:.0%} [{lo:.0%}, {hi:.0%}] of the small model's matched-truncation gap",
            paragraph=2),
    Finding("Q1", "corrected", "loop/tuned / single small",
            "With the strongest probe (loop/tuned) it is {p:.0%} [{lo:.0%}, {hi:.0%}], so how little is correctable "
            "is a property of the probe, not of the model", paragraph=2),
)


def _unit(ledger: dict[str, Any], f: Finding) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(entry, pooled block) of the first entry of the finding's claim and protocol that holds its unit."""
    for e in ledger.get("claims", []):
        if e["id"] == f.claim and e["protocol"] == f.protocol:
            block = _pooled_units(e.get("evidence", {})).get(f.unit)
            if block is not None:
                return e, block
    return None


def where(block: dict[str, Any]) -> str:
    """Where a unit's pooled interval lies against what decides it, in words: the threshold (and ±SESOI) for a
    superiority rule (``verdicts.side``), ±SESOI for equivalence, the margin for non-inferiority."""
    from tiedlm_lib.paper.judging import side

    t, d = block.get("threshold", 0.0), block.get("sesoi")
    if "threshold" not in block or d is None:
        return "95% interval"
    lo, hi = block["interval"]
    kind = block.get("rule", "superiority")
    if kind == "equivalence":
        if t - d < lo and hi < t + d:
            return f"interval inside ±{d:g}"
        return f"interval beyond ±{d:g}" if lo > t + d or hi < t - d else f"interval across the ±{d:g} margin"
    if kind == "noninferiority":
        b = t + block.get("side", 1) * d
        return (f"interval below the {b:+g} margin" if hi < b else f"interval above the {b:+g} margin" if lo > b
                else f"interval across the {b:+g} margin")
    return {"negligible": f"interval inside ±{d:g}", "below 0": f"interval below {t:g}",
            "above 0": f"interval above {t:g}"}.get(side(block), f"interval across {t:g} or its margin")


def _own(claim: str, block: dict[str, Any]) -> str | None:
    """The unit's own verdict, in the words of its claim (questions answer yes / no)."""
    v = block.get("verdict")
    return {"reproduced": "yes", "not reproduced": "no"}.get(v, v) if claim.startswith("Q") else v


def finding_rows(ledger: dict[str, Any], findings: tuple[Finding, ...] = FINDINGS) -> list[dict[str, Any]]:
    """One row per finding the ledger holds, for the index's figure: the pooled point and 95% interval, its threshold
    and SESOI, and each on one scale — the distance from the threshold in SESOIs (0 is the threshold, ±1 its SESOI
    band) — so effects in nats and in shares sit on one axis; the unit's own verdict (Q4's compute-matched gap is
    undecided while Q4 is answered yes) and its claim's."""
    rows = []
    for f in findings:
        hit = _unit(ledger, f)
        if hit is None:
            continue
        e, b = hit
        t, d = b.get("threshold", 0.0), b.get("sesoi")
        if not d:
            continue
        lo, hi = b["interval"]
        rows.append({"finding": f"{f.claim} ({f.protocol}): {f.unit}", "claim": f.claim, "point": b["point"],
                     "lo": lo, "hi": hi, "threshold": t, "sesoi": d, "verdict": _own(f.claim, b) or e["verdict"],
                     "claim verdict": e["verdict"],
                     "in SESOIs": (b["point"] - t) / d, "lo in SESOIs": (lo - t) / d, "hi in SESOIs": (hi - t) / d})
    return rows


def finding_sentences(ledger: dict[str, Any], findings: tuple[Finding, ...] = FINDINGS) -> list[str]:
    """One sentence per finding whose unit the ledger holds (with its ``after`` sentence where the evidence has
    it), in ``findings`` order."""
    return [text for _, text in _written(ledger, findings)]


def _written(ledger: dict[str, Any], findings: tuple[Finding, ...]) -> list[tuple[int, str]]:
    out = []
    for f in findings:
        hit = _unit(ledger, f)
        if hit is None:
            continue
        e, block = hit
        lo, hi = block["interval"]
        n = block.get("seeds")
        text = f.template.format(p=block["point"], lo=lo, hi=hi,
                                 n="? seeds" if n is None else f"{n} seed{'s' if n != 1 else ''}")
        whole = " as a whole" if len(_pooled_units(e.get("evidence", {}))) > 1 else ""
        own = _own(f.claim, block)
        # a unit that does not decide its claim's verdict says its own first (Q4's compute-matched gap is undecided
        # while Q4 is answered yes by the iso-parameter gap)
        mine = f": this unit {own}" if whole and own and own != e["verdict"] else ""
        by = ", decided by its other units" if mine and e["verdict"] != "inconclusive" else ""
        out.append((f.paragraph, f"{text} ({where(block)}{mine}; {f.claim}{whole} {e['verdict']}{by})."
                                 f"{_after(ledger, f, e)}"))
    return out


def _after(ledger: dict[str, Any], f: Finding, e: dict[str, Any]) -> str:
    """The finding's ``after`` sentence (with a leading space), or "" when the evidence lacks one of its keys."""
    if not f.after:
        return ""
    other = next((o.get("evidence", {}) for o in ledger.get("claims", [])
                  if o["id"] == f.claim and o["protocol"] == f.also), {})
    try:
        return " " + f.after.format(ev=e.get("evidence", {}), other=other)
    except (KeyError, TypeError, ValueError):
        return ""


def findings_text(ledger: dict[str, Any], findings: tuple[Finding, ...] = FINDINGS) -> str:
    """The findings' sentences as paragraphs (``Finding.paragraph``), "" when the ledger holds none of them."""
    paras: dict[int, list[str]] = {}
    for k, text in _written(ledger, findings):
        paras.setdefault(k, []).append(text)
    return "\n\n".join(" ".join(v) for _, v in sorted(paras.items()))


def across_sizes_text(trends: list[dict[str, Any]] | None) -> str:
    """What holds across sizes and what does not, from section 14's trend rows (the effects it reads, on the axes
    measured at three or more sizes): one sentence per axis, "" without the section. A description beside the
    verdicts (docs/statistics.md amendment 17)."""
    from tiedlm_lib.paper.testability import ACROSS

    rows = [t for t in trends or [] if str(t.get("read", True)) in ("True", "true", "1") and int(t["points"]) >= 3]
    out = []
    for axis, what in (("width", "the width ladder (block parameters)"), ("depth", "the depth ladder (K)")):
        mine = [t for t in rows if t["axis"] == axis]
        if not mine:
            continue
        by: dict[str, list[str]] = {}
        for t in mine:
            by.setdefault(ACROSS.get(t["direction"], t["direction"]), []).append(t["effect"])
        sizes = max(int(t["points"]) for t in mine)
        out.append(f"Across {what}, {sizes} sizes: " + "; ".join(f"{w} for {', '.join(e)}" for w, e in by.items())
                   + " (section 14; a description beside the verdicts, never a change to them).")
    return " ".join(out)


def _with_sizes(text: str, trends: list[dict[str, Any]] | None) -> str:
    sizes = across_sizes_text(trends)
    return "\n\n".join(t for t in (text, sizes) if t)


def abstract(ledger: dict[str, Any], trends: list[dict[str, Any]] | None = None) -> str:
    """The findings' paragraphs, what holds across sizes (``across_sizes_text``, where section 14 ran), then the
    verdict counts (``claims.abstract_findings``)."""
    text = _with_sizes(findings_text(ledger), trends)
    return (text + "\n\n" if text else "") + abstract_findings(ledger)


FINDINGS_BEGIN = "<!-- findings: generated from paper/cpu/claims.json by tiedlm_lib.paper.findings.readme_block -->"
FINDINGS_END = "<!-- findings: end -->"


def readme_block(ledger: dict[str, Any], trends: list[dict[str, Any]] | None = None) -> str:
    """The README's findings: the findings' sentences (``finding_sentences``), what holds across sizes, then the
    verdict table (``claims.findings_markdown``)."""
    text = _with_sizes(findings_text(ledger), trends)
    return (text + "\n\n" if text else "") + findings_markdown(ledger)


def update_readme(readme: str | Path, ledger: dict[str, Any], trends: list[dict[str, Any]] | None = None) -> bool:
    """Rewrite the README's findings block from the ledger (and section 14's trends); True if it changed."""
    return replace_block(readme, FINDINGS_BEGIN, FINDINGS_END, readme_block(ledger, trends))
