"""The layout grammar: one string describes the stack between the embedding and the head.

Tokens are separated by whitespace and read bottom to top:

* ``S``    — one standard (untied) layer; every ``S`` is a distinct layer with its own weights.
* ``S*n``  — n distinct standard layers (``"S*5"`` is the paper's iso-parameter vanilla v9).
* ``X*n``  — a tied loop named by the capital letter X (any letter but S), applied n times with one set of
  weights; ``X`` alone means ``X*1``. Each loop letter may appear once: a loop is one block.

Examples from the paper: ``"S S A*30 S S"`` (v3/v5), ``"S A*15 S B*15 S"`` (v12), ``"S A*10 B*10 C*10 S"`` (v13),
``"S A*8 B*8 C*7 D*7"`` (v14).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"^([A-Z])(?:\*(\d+))?$")


@dataclass(frozen=True)
class Segment:
    """One element of the stack: a standard layer (kind "std") or a tied loop (kind "loop")."""

    kind: str  # "std" | "loop"
    name: str  # "S0", "S1", ... for standard layers; the loop letter for loops
    iters: int = 1  # trained number of applications (loops); 1 for standard layers


def parse_layout(layout: str) -> list[Segment]:
    """Parse a layout string into segments; raises ValueError naming the offending token."""
    if not isinstance(layout, str) or not layout.strip():
        raise ValueError(f"layout must be a non-empty string such as 'S S A*30 S S', got {layout!r}")
    segments: list[Segment] = []
    n_std = 0
    seen_loops: set[str] = set()
    for tok in layout.split():
        m = _TOKEN.match(tok)
        if m is None:
            raise ValueError(
                f"unknown layout token {tok!r} in layout {layout!r}: expected 'S', 'S*n' (n distinct standard "
                "layers) or a capital letter with an optional count such as 'A*30' (a tied loop)"
            )
        letter, count = m.group(1), m.group(2)
        n = 1 if count is None else int(count)
        if n < 1:
            raise ValueError(f"layout token {tok!r} in {layout!r}: the count must be >= 1")
        if letter == "S":
            for _ in range(n):
                segments.append(Segment("std", f"S{n_std}"))
                n_std += 1
        else:
            if letter in seen_loops:
                raise ValueError(
                    f"tied loop {letter!r} appears twice in layout {layout!r}: each loop is one block; "
                    "use another letter for a second loop"
                )
            seen_loops.add(letter)
            segments.append(Segment("loop", letter, n))
    return segments


def loop_names(layout: str) -> list[str]:
    return [s.name for s in parse_layout(layout) if s.kind == "loop"]


def split_segments(segments: list[Segment]) -> tuple[list[Segment], list[Segment], list[Segment]]:
    """(prelude, core, coda): the layers before the first loop, the first loop to the last (bridges included), and
    the layers after the last loop. A dense layout is all core (paper B's negative control rearranges its layers)."""
    loops = [i for i, s in enumerate(segments) if s.kind == "loop"]
    if not loops:
        return [], list(segments), []
    return segments[:loops[0]], segments[loops[0]:loops[-1] + 1], segments[loops[-1] + 1:]
