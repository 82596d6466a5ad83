"""What a scale can test: per claim, whether it was tested here, the minimum detectable effect at its seeds, and
what would test it — read from the ledger, so it changes when the ledger does.

A claim is *tested here* ("yes") when every pooled unit it rests on could detect an effect of the claim's smallest
effect size of interest (its MDE at the seeds it has is at most its SESOI), and *at this scale only* when it is so
but the claim speaks of something this scale cannot reach (``SCALE_LIMITS``); *underpowered* when some unit could
not (its verdict can still be decided, by an effect larger than the SESOI); *single seed* when nothing is pooled;
*by construction* when it is a check; *no* when the ledger says "not testable". What would test it joins two
things: more seeds (how many every unit needs to detect its SESOI, from the power analysis beside each verdict) and
what the scale itself cannot reach (``SCALE_LIMITS``: claims about the paper's sizes, horizon, recipes or models).
"""

from __future__ import annotations

import math
from typing import Any

from .claims import CHECK_VERDICTS, _pooled_units

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


def testability_row(entry: dict[str, Any]) -> dict[str, Any]:
    """One ledger entry's row (see the module docstring)."""
    units = {u: p for u, p in _units(entry).items() if p.get("seeds", 0) and p.get("sesoi")}
    seeds = len(entry.get("seeds") or [])
    mde = [(p.get("MDE at these seeds"), p["sesoi"]) for p in units.values()]
    worst = max(mde, key=lambda m: math.inf if m[0] is None else m[0] / m[1], default=None)
    if entry["verdict"] == "not testable":
        tested = "no"
    elif entry["verdict"] in CHECK_VERDICTS:
        tested = "by construction"
    elif not units or seeds < 2:
        tested = "no pooled unit" if not units else "single seed"
    else:
        tested = "yes" if all(m is not None and m <= s for m, s in mde) else "underpowered"
    if tested == "yes" and entry["id"] in SCALE_LIMITS:
        tested = "at this scale only"  # powered here, but the claim is about what this scale cannot reach
    need = [p.get("seeds to detect SESOI") for p in units.values()]
    what = []
    if tested == "single seed":
        what.append("at least 2 seeds (power needs a between-seed spread)")
    elif tested == "underpowered":
        what.append("more than 50 seeds" if any(n is None for n in need) or not need else
                    f"about {max(need)} seeds to detect the SESOI in every unit")
    if entry["id"] in SCALE_LIMITS:
        what.append(SCALE_LIMITS[entry["id"]])
    return {"claim": entry["id"], "protocol": entry["protocol"], "verdict": entry["verdict"], "seeds": seeds,
            "tested here": tested,
            "worst unit's MDE / SESOI": "—" if worst is None else
            ("inf" if worst[0] is None else f"{worst[0]:.3g}") + f" / {worst[1]:g}",
            "what would test it": "; ".join(what) or "—"}


def testability(ledger: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ledger entry's row, in ledger order."""
    return [testability_row(e) for e in ledger.get("claims", [])]
