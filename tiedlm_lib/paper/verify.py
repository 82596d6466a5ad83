"""Does this machine reproduce the paper? ``make verify`` re-executes sections from the shipped runs into a scratch
folder and compares every number of every committed table with what it computed.

    python -m tiedlm_lib.paper.verify --scale cpu                         # every section (what `make verify` runs)
    python -m tiedlm_lib.paper.verify --scale cpu --sections 04_tradeoff  # one section
    python -m tiedlm_lib.paper.verify --scale cpu --compare-only          # compare an earlier scratch run again

What is compared, per section: each committed table ``paper/<scale>/tables/<section>-<name>.csv`` cell by cell; the
section's ``-prose.json`` (every number a paragraph states, through the table cell it came from, and the words and
text); and the section's entries of the claims ledger ``claims.json`` (every leaf: verdicts, criteria, evidence).
Integers and strings must be equal; floats may differ by ``rtol`` relative to the larger magnitude (or ``atol`` near
zero). Values that measure the machine rather than the model (wall-clock seconds, step times, tokens per second,
speed-ups, peak memory, thread counts: ``MACHINE``, matched by column or key name) are left out and counted, since a
faster or slower machine is not a different result. A table the section no longer writes, or a new one, is a
difference.

The scratch folder starts with the committed outputs that the re-executed sections read but do not write: the tables
of the sections they depend on (section 13 reads section 10's) and the ledger's entries of the other sections (section
11 reads the whole ledger); the re-executed sections' own tables and entries are removed first, so a section that no
longer writes one shows as a difference, not as the committed copy. Kept derived results (``runs/<scale>/*/derived``,
``tiedlm_lib.store.memo``) are reused as ``make paper`` reuses them; ``TIEDLM_MEMO=0`` recomputes them too (hours at
cpu).

Every kernel runs single-threaded (``paper.execute``), the thread count every committed cpu number was computed with,
so on the same library versions the digits are the same however the run is started.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiedlm_lib.paths import project_root

# Column and key names that measure the machine, not the model: left out of the comparison and counted.
# The ledger's "recorded" is the clock time an entry was written: a re-execution writes a later one.
MACHINE = re.compile(r"seconds|\bs/step|s_per_step|\btime\b|time_ratio|ms per|tokens/s|speed-?up|peak_MiB|\bmemory\b|"
                     r"memory_ratio|\bthreads\b|wall|^recorded$", re.IGNORECASE)
RTOL = 1e-6
MARK = ".tiedlm-verify"
ATOL = 1e-9


@dataclass
class Difference:
    where: str  # table, column and row (or the ledger path)
    committed: Any
    fresh: Any


@dataclass
class SectionReport:
    section: str
    compared: int = 0  # values compared
    machine: int = 0  # values left out as measurements of the machine
    largest: float = 0.0  # the largest relative difference among floats within tolerance
    within: int = 0  # floats that differ, within tolerance
    differences: list[Difference] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "differs" if self.differences else "within tolerance" if self.within else "identical"

    def line(self, shown: int = 3) -> str:
        head = (f"{self.section}: {self.status} ({self.compared:,} values compared, {self.machine:,} machine "
                f"measurements left out")
        if self.within:
            head += f"; {self.within:,} floats within tolerance, the largest relative difference {self.largest:.1e}"
        head += ")"
        for d in self.differences[:shown]:
            head += f"\n    {d.where}: committed {d.committed!r}, now {d.fresh!r}"
        if len(self.differences) > shown:
            head += f"\n    ... and {len(self.differences) - shown:,} more"
        return head


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _is_integer_text(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) or isinstance(v, str) and re.fullmatch(r"[+-]?\d+", v.strip())


class _Comparer:
    def __init__(self, report: SectionReport, rtol: float, atol: float):
        self.r, self.rtol, self.atol = report, rtol, atol

    def value(self, where: str, a: Any, b: Any) -> None:
        self.r.compared += 1
        x, y = _number(a), _number(b)
        if x is None or y is None or _is_integer_text(a) and _is_integer_text(b):
            if not (a == b or x is not None and y is not None and x == y):
                self.r.differences.append(Difference(where, a, b))
            return
        if x == y or math.isnan(x) and math.isnan(y):
            return
        gap = abs(x - y)
        rel = gap / max(abs(x), abs(y))
        if gap <= self.atol or rel <= self.rtol:
            self.r.within += 1
            self.r.largest = max(self.r.largest, rel)
        else:
            self.r.differences.append(Difference(where, a, b))

    def tree(self, where: str, a: Any, b: Any) -> None:
        """Two JSON trees, leaf by leaf; keys named as machine measurements are counted and skipped."""
        if isinstance(a, dict) and isinstance(b, dict):
            for k in list(a) + [k for k in b if k not in a]:
                w = f"{where}/{k}"
                if MACHINE.search(str(k)):
                    self.r.machine += 1
                elif k not in a or k not in b:
                    self.r.differences.append(Difference(w, a.get(k, "<absent>"), b.get(k, "<absent>")))
                else:
                    self.tree(w, a[k], b[k])
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                self.r.differences.append(Difference(f"{where} (length)", len(a), len(b)))
            for i, (x, y) in enumerate(zip(a, b)):
                self.tree(f"{where}[{i}]", x, y)
        else:
            self.value(where, a, b)


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return (rows[0], rows[1:]) if rows else ([], [])


def compare_table(c: _Comparer, name: str, committed: Path, fresh: Path) -> None:
    cols, rows = _read_csv(committed)
    cols2, rows2 = _read_csv(fresh)
    if cols != cols2:
        c.r.differences.append(Difference(f"{name} (columns)", cols, cols2))
        return
    if len(rows) != len(rows2):
        c.r.differences.append(Difference(f"{name} (rows)", len(rows), len(rows2)))
    for i, (a, b) in enumerate(zip(rows, rows2)):
        for col, x, y in zip(cols, a, b):
            if MACHINE.search(col):
                c.r.machine += 1
            else:
                c.value(f"{name} row {i + 1} '{col}'", x, y)


def compare_prose(c: _Comparer, name: str, committed: Path, fresh: Path) -> None:
    """Paragraph by paragraph: each number through the fact (table cell) it came from, a fact of a machine column
    left out; the words exactly; the text exactly where no fact measures the machine (and no number differed)."""
    a, b = json.loads(committed.read_text()), json.loads(fresh.read_text())
    if len(a) != len(b):
        c.r.differences.append(Difference(f"{name} (paragraphs)", len(a), len(b)))
    for i, (p, q) in enumerate(zip(a, b)):
        where = f"{name} paragraph {i + 1} ({p.get('heading')})"
        before = len(c.r.differences) + c.r.within
        machine = False
        for k in list(p.get("facts", {})) + [k for k in q.get("facts", {}) if k not in p.get("facts", {})]:
            f, g = p.get("facts", {}).get(k), q.get("facts", {}).get(k)
            if f is None or g is None:
                c.r.differences.append(Difference(f"{where} fact {k}", f, g))
            elif MACHINE.search(str(f.get("column", ""))):
                c.r.machine += 1
                machine = True
            else:
                c.tree(f"{where} fact {k}", {kk: v for kk, v in f.items()}, {kk: v for kk, v in g.items()})
        c.tree(f"{where} words", p.get("words", {}), q.get("words", {}))
        c.value(f"{where} template", p.get("template"), q.get("template"))
        if not machine and len(c.r.differences) + c.r.within == before:
            c.value(f"{where} text", p.get("text"), q.get("text"))


def _section_entries(ledger: dict, section: str) -> list[dict]:
    return [e for e in ledger.get("claims", []) if e.get("notebook") == section]


def compare_section(section: str, committed: Path, fresh: Path, rtol: float = RTOL,
                    atol: float = ATOL) -> SectionReport:
    """``committed`` and ``fresh``: two ``paper/<scale>`` folders (tables/ and claims.json)."""
    r = SectionReport(section)
    c = _Comparer(r, rtol, atol)
    ours = sorted(p.name for p in (committed / "tables").glob(f"{section}-*") if p.suffix in (".csv", ".json"))
    theirs = sorted(p.name for p in (fresh / "tables").glob(f"{section}-*") if p.suffix in (".csv", ".json"))
    for n in sorted(set(ours) ^ set(theirs)):
        r.differences.append(Difference(n, "written" if n in ours else "<absent>",
                                        "written" if n in theirs else "<absent>"))
    for n in sorted(set(ours) & set(theirs)):
        if n.endswith("-prose.json"):
            compare_prose(c, n, committed / "tables" / n, fresh / "tables" / n)
        elif n.endswith(".csv"):
            compare_table(c, n, committed / "tables" / n, fresh / "tables" / n)
    ledgers = [json.loads(p.read_text()) if p.is_file() else {} for p in (committed / "claims.json",
                                                                              fresh / "claims.json")]
    a, b = (_section_entries(x, section) for x in ledgers)
    key = lambda e: (e.get("id"), e.get("protocol"))  # noqa: E731
    ka, kb = {key(e): e for e in a}, {key(e): e for e in b}
    for k in sorted(set(ka) | set(kb), key=str):
        if k not in ka or k not in kb:
            r.differences.append(Difference(f"claims.json {k}", "present" if k in ka else "<absent>",
                                            "present" if k in kb else "<absent>"))
        else:
            c.tree(f"claims.json {k[0]} ({k[1]})", ka[k], kb[k])
    return r


def prepare_scratch(src: Path, sections: list[str], scratch: Path) -> None:
    """The scratch ``paper/`` with the committed outputs (in ``src``) that the sections read but do not write (see the
    module's doc)."""
    from tiedlm_lib.paper.execute import AFTER

    dst = scratch / "paper"
    if scratch.exists():
        if not (scratch / MARK).is_file():  # never delete a folder this command did not make
            raise FileExistsError(f"{scratch} exists and is not a scratch folder of make verify (no {MARK} in it): "
                                  "name a new or empty folder")
        shutil.rmtree(scratch)
    (dst / "tables").mkdir(parents=True)
    (scratch / "figures").mkdir()
    (scratch / MARK).write_text("made by python -m tiedlm_lib.paper.verify; deleted and remade by its next run\n")
    for p in (src / "tables").glob("*"):
        if p.name.split("-")[0] not in sections:
            shutil.copy2(p, dst / "tables" / p.name)
    for p in src.glob("*.json"):  # the ledger and the frozen ledgers section 11 reads
        shutil.copy2(p, dst / p.name)
    ledger = dst / "claims.json"
    if ledger.is_file():
        doc = json.loads(ledger.read_text())
        doc["claims"] = [e for e in doc.get("claims", []) if e.get("notebook") not in sections]
        ledger.write_text(json.dumps(doc, indent=1))
    missing = [d for s in sections for d in AFTER.get(s, ()) if d not in sections
               and not list((src / "tables").glob(f"{d}-*"))]
    if missing:
        raise FileNotFoundError(f"the committed tables of {', '.join(sorted(set(missing)))} (which the sections to "
                                f"verify read) are not in {src / 'tables'}")


def verify(scale: str = "cpu", sections: list[str] | None = None, scratch: str | Path | None = None,
           jobs: int = 1, rtol: float = RTOL, atol: float = ATOL, execute: bool = True,
           committed: str | Path | None = None, log=print) -> list[SectionReport]:
    """Re-execute ``sections`` (default: every section with committed tables at ``scale``) into ``scratch`` (default
    ``build/verify/<scale>``) and compare each with ``committed`` (default ``paper/<scale>``); ``execute=False``
    compares an earlier scratch run again. Returns one report per section, in order."""
    from tiedlm_lib.paper import execute as paper

    root = project_root().resolve()
    committed = Path(committed) if committed else root / "paper" / scale
    if not (committed / "tables").is_dir():
        raise FileNotFoundError(f"no committed tables to verify against: {committed / 'tables'} does not exist "
                                f"(execute the paper at {scale} first: make paper SCALE={scale})")
    known = [nb.stem for nb in paper.notebooks(root)]
    sections = sections or [s for s in known if list((committed / "tables").glob(f"{s}-*"))]
    unknown = [s for s in sections if s not in known]
    if unknown:
        raise ValueError(f"unknown section(s) {unknown}: expected names from {known}")
    scratch = Path(scratch) if scratch else root / "build" / "verify" / scale
    if execute:
        prepare_scratch(committed, sections, scratch)
        t0 = time.perf_counter()
        paper.execute(scale, only=sections, root=root, log=log, jobs=jobs, into=scratch)
        log(f"executed {len(sections)} section(s) in {time.perf_counter() - t0:.0f} s into {scratch}")
    elif not (scratch / "paper").is_dir():
        raise FileNotFoundError(f"no earlier run to compare: {scratch / 'paper'} does not exist (run without "
                                "--compare-only first)")
    return [compare_section(s, committed, scratch / "paper", rtol, atol) for s in sections]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiedlm_lib.paper.verify", description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", default="cpu", help="the committed paper to verify (default cpu)")
    ap.add_argument("--sections", default="", help="comma-separated section names (default: every section)")
    ap.add_argument("--scratch", default="", help="where the re-executed outputs go (default build/verify/<scale>)")
    ap.add_argument("--jobs", type=int, default=1, help="sections executed at once (default 1)")
    ap.add_argument("--rtol", type=float, default=RTOL, help="relative tolerance for floats (default %(default)s)")
    ap.add_argument("--compare-only", action="store_true", help="compare an earlier scratch run, execute nothing")
    a = ap.parse_args(argv)
    reports = verify(a.scale, [s for s in a.sections.split(",") if s] or None, a.scratch or None, a.jobs, a.rtol,
                     execute=not a.compare_only)
    for r in reports:
        print(r.line())
    bad = [r.section for r in reports if r.differences]
    print(f"{len(reports) - len(bad)} of {len(reports)} section(s) reproduced (identical or within rtol {a.rtol:g})"
          + (f"; differs: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
