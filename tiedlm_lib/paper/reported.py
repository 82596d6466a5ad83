"""The numbers the papers reported, each with its unit, metric and source (``reported.csv`` beside this file).

Notebooks print these *beside* reproduced numbers, labelled as reported, never in place of them."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

FILE = Path(__file__).parent.parent / "reported.csv"  # package data, at the top of tiedlm_lib
COLUMNS = ["id", "value", "unit", "metric", "source"]


@cache
def _rows() -> tuple[dict, ...]:
    with open(FILE, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["value"] = float(r["value"])
    return tuple(rows)


def reported(prefix: str = "") -> list[dict]:
    """Every reported number whose id starts with ``prefix`` (e.g. "v3.k_sweep.")."""
    return [dict(r) for r in _rows() if r["id"].startswith(prefix)]


def reported_value(key: str) -> float:
    for r in _rows():
        if r["id"] == key:
            return r["value"]
    raise KeyError(f"no reported number {key!r} in {FILE.name}")


def reported_k_sweep(version: str) -> dict[int, float]:
    """{k: NLL} of a version's reported k sweep."""
    p = f"{version}.k_sweep.k"
    return {int(r["id"][len(p):]): r["value"] for r in _rows() if r["id"].startswith(p)}
