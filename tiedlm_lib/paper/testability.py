"""What a scale can test: per claim, whether it was tested here, the minimum detectable effect at its seeds, and
what would test it — read from the ledger, so it changes when the ledger does.

A decided verdict (reproduced, not reproduced, yes, no) is *decided* here — *at this scale only* when the claim
speaks of something this scale cannot reach (``SCALE_LIMITS``) — and what would change it is a new seed where a unit
is seed-sensitive (its prediction interval for a new seed crosses the boundary), else nothing at this scale. An
inconclusive one is *undecided*, *powered for its SESOI* when every pooled unit could detect an effect of the SESOI
(its MDE at the seeds it has is at most the SESOI) and *underpowered* otherwise; what would decide it is the seeds
of its cheapest route (reproduced in every undecided unit, or not reproduced in one: other side or inside ±SESOI,
at the Bonferroni level; docs/statistics.md amendment 18). *single seed* when nothing is pooled; *by construction*
for a check; *no* when the ledger says "not testable". Both join what the scale itself cannot reach.

*Across sizes* (``across_sizes``) is read from section 14's trend table where the scale has one: whether the
claim's effect keeps its side of the threshold over the size ladder (docs/statistics.md amendment 17) — "direction
holds", "changes direction", "decided at no size" — on each axis measured at three or more sizes, else "not
measured". A description beside the verdict, never a change to it.
"""

from __future__ import annotations

import math
from typing import Any

from tiedlm_lib.paper.claims import CHECK_VERDICTS, _pooled_units

# What no number of seeds at a small CPU scale can supply, per claim (docs/claims.md; the cpu scale card).
SCALE_LIMITS: dict[str, str] = {
    "A2": "the paper's sizes (7.27M / 23.05M parameters): the claim is about scaling with size",
    "A3": "the paper's 23.05M model over its 39,695 steps, on a GPU",
    "A9": "the paper's GPU memory and step-time measurements (CPU ratios here)",
    "A11": "the paper's cast of models on its minimind benchmark",
    "A12": "the paper's SFT recipe (28,304 steps at 1e-4; here a quarter of the base run)",
    "A20": "the paper's SFT recipe and its models' generations",
    "A10": "the paper's 23.05M model over its 39,695 steps, on a GPU",
    "A13": "the paper's 23M runs of 39,695 steps (here the small size for 0.8x the short run)",
    "A14": "the paper's 23M runs and SFT recipe (here the small size, shorter runs)",
    "A15": "the paper's 23M runs of 39,695 steps (here the small size for 0.8x the short run)",
    "A16": "the paper's 23M runs of 39,695 steps (here the small size for 0.8x the short run)",
    "A17": "the paper's 23M runs and SFT recipe (here the small size, shorter runs)",
    "A19": "the paper's sizes: the claim compares them",
    "A21": "the original CEDLR-Hybrid2 and Meta-ASH models, which are not public",
    "B1": "paper B's own models (Huginn-0125 and 1.5B-class dense models, docs/protocol.md section 8)",
    "B2": "paper B's own models (Huginn-0125 and 1.5B-class dense models, docs/protocol.md section 8)",
    "B3": "paper B's own models (Huginn-0125 and 1.5B-class dense models, docs/protocol.md section 8)",
    "B4": "paper B's dense models (Qwen, SmolLM2, Pythia, OPT; 0.35B-1.7B parameters)",
    "B5": "paper B's recurrent checkpoint and its intervention runs",
    "B6": "paper B's own models (Huginn-0125 and 1.5B-class dense models, docs/protocol.md section 8)",
    "Q5": "the paper's 23.05M model over its 39,695 steps, on a GPU",
    "Q7": "the paper's sizes on a GPU, where a block call costs what it does there",
}


def _units(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return _pooled_units(entry.get("evidence", {}))


DECIDED = ("reproduced", "not reproduced", "yes", "no")


def _to_decide(units: dict[str, dict[str, Any]]) -> str:
    """For an undecided entry: the seeds that would decide it by the cheapest route (``verdicts.seeds_to_decide``
    over its undecided units' routes, docs/statistics.md amendment 18). A ledger written before the routes were
    recorded gives the seeds that would clear the threshold at the distance observed, and says the other routes are
    not in it."""
    from tiedlm_lib.paper.judging import seeds_to_decide

    open_units = {u: p for u, p in units.items() if p.get("verdict") == "inconclusive"}
    if open_units and all("seeds to decide, by route" in p for p in open_units.values()):
        seeds, how = seeds_to_decide({u: p["seeds to decide, by route"] for u, p in open_units.items()})
        return (f"about {seeds} seeds would decide it ({how})" if seeds is not None else
                "no route decides it within 50 seeds at the distances observed")
    need = [p.get("seeds to detect the observed distance") for p in open_units.values()]
    if not need:
        return ""
    return ("more than 50 seeds to clear the threshold" if any(n is None for n in need) else
            f"about {max(need)} seeds to clear the threshold in every undecided unit") + \
        " (this ledger predates the other routes: amendment 18)"


def testability_row(entry: dict[str, Any]) -> dict[str, Any]:
    """One ledger entry's row (see the module docstring)."""
    units = {u: p for u, p in _units(entry).items() if p.get("seeds", 0) and p.get("sesoi")}
    seeds = len(entry.get("seeds") or [])
    mde = [(p.get("MDE at these seeds"), p["sesoi"]) for p in units.values()]
    worst = max(mde, key=lambda m: math.inf if m[0] is None else m[0] / m[1], default=None)
    decided = entry["verdict"] in DECIDED
    if entry["verdict"] == "not testable":
        tested = "no"
    elif entry["verdict"] in CHECK_VERDICTS:
        tested = "by construction"
    elif not units or seeds < 2:
        tested = "no pooled unit" if not units else "single seed"
    elif decided:
        tested = "decided"  # its MDE describes power for the SESOI, not whether the effect found is real
    else:
        powered = all(m is not None and m <= s for m, s in mde)
        tested = "undecided, powered for its SESOI" if powered else "undecided, underpowered"
    if tested == "decided" and entry["id"] in SCALE_LIMITS:
        tested = "decided at this scale only"  # the claim is about what this scale cannot reach
    what = []
    if tested == "single seed":
        what.append("at least 2 seeds (power needs a between-seed spread)")
    elif tested.startswith("decided"):
        sens = [u for u, p in units.items() if p.get("seed-sensitive")]
        what.append(f"a new seed could land across the boundary in {', '.join(sens)} (seed-sensitive)" if sens else
                    "no new seed is predicted across its boundary at this scale")
    elif tested.startswith("undecided"):
        what.append(_to_decide(units) or "—")
    if entry["id"] in SCALE_LIMITS:
        what.append(SCALE_LIMITS[entry["id"]])
    return {"claim": entry["id"], "protocol": entry["protocol"], "verdict": entry["verdict"], "seeds": seeds,
            "tested here": tested,
            "worst unit's MDE / SESOI": "—" if worst is None else
            ("inf" if worst[0] is None else f"{worst[0]:.3g}") + f" / {worst[1]:g}",
            "what would change or decide it": "; ".join(w for w in what if w) or "—"}


ACROSS = {"holds at every size": "direction holds", "holds where decided": "direction holds where decided",
          "changes direction between sizes": "changes direction", "decided at no size": "decided at no size"}


def across_sizes(claim: str, trends: list[dict[str, Any]] | None) -> str:
    """The claim's "across sizes" cell from section 14's trend rows (``paper.across_sizes.trends``; only the effects
    the section reads, on the axes measured at three or more sizes): each axis's direction word, or "not measured"."""
    rows = [t for t in trends or [] if t["claim"] == claim and str(t.get("read", True)) in ("True", "true", "1")
            and int(t["points"]) >= 3]
    if not rows:
        return "not measured"
    by_axis: dict[str, list[str]] = {}
    for t in rows:
        by_axis.setdefault(t["axis"], []).append(ACROSS.get(t["direction"], t["direction"]))
    words = {a: (w[0] if len(set(w)) == 1 else "; ".join(sorted(set(w)))) for a, w in by_axis.items()}
    return ", ".join(f"{w} ({a})" for a, w in sorted(words.items(), key=lambda kv: kv[0] != "width"))


def testability(ledger: dict[str, Any], trends: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every ledger entry's row, in ledger order; with section 14's ``trends``, an "across sizes" column."""
    rows = [testability_row(e) for e in ledger.get("claims", [])]
    if trends is not None:
        rows = [r | {"across sizes": across_sizes(r["claim"], trends)} for r in rows]
    return rows


def read_trends(paper_dir) -> list[dict[str, Any]] | None:
    """Section 14's trend rows as saved (``tables/14_across_sizes-trends.csv``), None where the scale has none."""
    import csv
    from pathlib import Path

    path = Path(paper_dir) / "tables" / "14_across_sizes-trends.csv"
    if not path.is_file():
        return None
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
