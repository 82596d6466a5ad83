"""Where a section's seconds go: one notebook executed as a script under cProfile, its time split by what the
library spends it on (issue 58, item 1).

``python benchmarks/section_profile.py 04_tradeoff [--scale cpu] [--param n_boot=200 ...] [--csv FILE]``

The section's py:percent source is run in this process (``display`` prints a table's shape), with its parameters
cell followed by ``--param`` values, writing its tables and figures into a scratch folder, never the committed
ones. The table lists, per activity, the cumulative seconds of the library calls that do it (``ACTIVITIES``:
forward passes over held-out documents, schedule conditions, probe fits, probe shares with refits, bootstrap
intervals, seed pooling, training or loading runs, the corpus and tokenizer, charts, tables and prose). Activities
nest (a probe share fits probes, a condition runs forwards), so the rows do not add up to the total; the total is the
section's wall time here, and ``--top`` prints the most expensive library functions beside.
"""

import argparse
import ast
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

from _common import write_csv

ROOT = Path(__file__).resolve().parent.parent
# (activity, [(module path fragment, function name)]): the calls whose cumulative time is the activity's
ACTIVITIES = [
    ("training or loading runs", [("runs/cache.py", "get_run"), ("hub/dense.py", "get_dense")]),
    ("corpus and tokenizer", [("data.py", "prepare_corpus")]),
    ("depth sweeps (forward passes)", [("evaluation/nll.py", "depth_stats"), ("evaluation/nll.py", "evaluate_nll")]),
    ("schedule conditions (forwards and paper B's probes)", [("depth/dcp.py", "evaluate_schedules")]),
    ("probe fits (L-BFGS)", [("depth/readout.py", "fit_probe")]),
    ("probe shares with refits", [("depth/readout.py", "share_by_probe"), ("depth/readout.py", "data_curve")]),
    ("states for probes (forwards)", [("depth/readout.py", "collect_states")]),
    ("exits and generation", [("depth/exits.py", "depth_features"), ("depth/generate.py", "generate"),
                              ("depth/speculative.py", "benchmark")]),
    ("paired bootstrap intervals", [("stats/bootstrap.py", "paired_diff"), ("stats/bootstrap.py", "percentile")]),
    ("pooling over seeds", [("stats/inference.py", "pool")]),
    ("kept results (read or write)", [("store/memo.py", "memoised")]),
    ("charts (altair, svg)", [("paper/report.py", "chart")]),
    ("tables and prose", [("paper/report.py", "table"), ("paper/report.py", "prose")]),
    ("verdicts", [("paper/report.py", "judge")]),
]


def script(nb: str, scale: str, params: list[str], out: Path) -> str:
    """The section's source as one script: its cells in order, the parameters cell followed by this run's values."""
    src = (ROOT / "notebooks" / f"{nb}.py").read_text()
    cells = src.split("\n# %%")
    code, injected = [], False
    for cell in cells:
        head, _, body = cell.partition("\n")
        if "[markdown]" in head:
            continue
        code.append(body if cell is not cells[0] else cell)
        if 'tags=["parameters"]' in head and not injected:
            values = [f"scale = {scale!r}", f"paper_dir = {str(out / 'paper')!r}",
                      f"figures_dir = {str(out / 'figures')!r}", *params]
            for v in values:
                ast.parse(v)  # a --param must be an assignment
            code.append("\n".join(values))
            injected = True
    if not injected:
        raise SystemExit(f"{nb}: no parameters cell")
    return "\n".join(code)


def activity_rows(stats: pstats.Stats) -> list[dict]:
    rows = []
    for name, calls in ACTIVITIES:
        total, n = 0.0, 0
        for (path, _, fn), (_cc, nc, _tt, ct, callers) in stats.stats.items():
            if any(path.endswith(frag) and fn == f for frag, f in calls):
                # a recursive or nested call of the same entry point is counted once: its outermost calls only
                outer = {k: v for k, v in callers.items()
                         if not any(k[0].endswith(frag) and k[2] == f for frag, f in calls)}
                total += sum(v[3] for v in outer.values()) if outer else ct
                n += nc
        rows.append({"activity": name, "seconds": round(total, 1), "calls": n})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", help="a section, e.g. 04_tradeoff")
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--param", action="append", default=[], help="a parameter assignment, e.g. n_boot=200")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--top", type=int, default=15, help="also print the N most expensive library functions")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        code = compile(script(args.notebook, args.scale, args.param, Path(tmp)), args.notebook, "exec")
        import builtins

        builtins.display = lambda x, *a, **k: print(f"[display] {type(x).__name__} {getattr(x, 'shape', '')}")
        sys.path.insert(0, str(ROOT / "notebooks"))
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        exec(code, {"__name__": "__main__"})
        prof.disable()
        wall = time.perf_counter() - t0
    stats = pstats.Stats(prof)
    rows = activity_rows(stats) + [{"activity": "the section (wall)", "seconds": round(wall, 1), "calls": 1}]
    for r in rows:
        r = {"section": args.notebook, "scale": args.scale, **r}
        print(f"{r['activity']:55s} {r['seconds']:9.1f} s  ({r['calls']} calls)")
    write_csv([{"section": args.notebook, "scale": args.scale, **r} for r in rows], args.csv)
    if args.top:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats("tiedlm_lib|torch", args.top)
        print(buf.getvalue())


if __name__ == "__main__":
    main()
