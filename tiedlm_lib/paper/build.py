"""The executable paper in one command: execute every notebook at a scale, in order, then render it as HTML.

    python -m tiedlm_lib.paper --scale cpu            # what `make paper` runs
    python -m tiedlm_lib.paper --scale smoke --only 01_architecture,11_claims
    python -m tiedlm_lib.paper --scale cpu --html-only

Notebooks run in the order of their numbers (a section may reuse the cached runs of an earlier one; 11_claims reads
the ledger the others wrote, so it runs last). Each prints one progress line with its elapsed time; a failing
notebook stops the run, naming the notebook and the failing cell (``tiedlm_lib.paper.execute``). The HTML paper
(``paper/<scale>/html/``, ``tiedlm_lib.paper.html``) is one page per section and an index with the abstract, the
sections, the claims ledger and the run times.
"""

from __future__ import annotations

import argparse
import sys

from tiedlm_lib.paper.claims import read_ledger
from tiedlm_lib.paper.execute import NotebookFailed, execute, output_name
from tiedlm_lib.paper.findings import update_readme
from tiedlm_lib.paper.html import render_html
from tiedlm_lib.paper.scale_card import CARD_BEGIN, CARD_END, card_markdown
from tiedlm_lib.paper.testability import read_trends
from tiedlm_lib.paths import project_root
from tiedlm_lib.store.atomic import replace_block


def print_plan(scale: str, seeds: list[int] | None = None) -> int:
    """The budget before spending: every run ``make paper`` at ``scale`` trains, with estimated GPU hours and disk."""
    from tiedlm_lib.runs.registry import plan_rows

    try:
        rows = plan_rows(scale, seeds)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    w = max(len(r["run"]) for r in rows)
    print(f"{'run':{w}s} seed {'steps':>7s} {'params':>11s} {'ms/step':>8s} {'GPU h':>7s} {'MB':>6s}  basis")
    for r in rows:
        print(f"{r['run']:{w}s} {r['seed']:4d} {r['steps']:7d} {r['params']:11,d} {r['ms/step']:8.1f} "
              f"{r['GPU hours']:7.2f} {r['disk MB']:6.0f}  {r['basis']}")
    hours, disk = sum(r["GPU hours"] for r in rows), sum(r["disk MB"] for r in rows)
    print(f"{len(rows)} runs: {hours:.1f} GPU hours of training on one GPU of the paper's kind (step times: "
          f"PROTOCOL §4.8 where logged, else scaled from v5), {disk / 1024:.2f} GiB of final weights; evaluation "
          "(the notebooks) comes on top")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tiedlm_lib.paper", description="execute the notebooks and render "
                                "the HTML paper")
    p.add_argument("--scale", default="cpu", help="smoke | cpu | paper (default cpu)")
    p.add_argument("--rehearse", action="store_true", help="with --scale paper: rehearse it on this machine — the "
                   "paper's exact models on a generated minimind-format fixture, a few steps each, every notebook, "
                   "into runs/rehearsal, paper/rehearsal and figures/rehearsal (never mixed with paper results)")
    p.add_argument("--only", default="", help="comma-separated notebook names (default: all, in order)")
    p.add_argument("--html-only", action="store_true", help="render the HTML from already executed notebooks")
    p.add_argument("--jobs", type=int, default=1, help="sections executed at once, each single-threaded (default 1; "
                   "2 on a 2-core machine is ~1.3x faster)")
    p.add_argument("--seeds", default="", help="comma-separated training seeds for every section (default: the "
                   "scale's; e.g. --seeds 0 for a quick single-seed first look)")
    p.add_argument("--plan", action="store_true", help="print every run the scale trains, its estimated GPU hours and "
                   "disk, and exit (nothing is trained)")
    a = p.parse_args(argv)
    if a.rehearse:
        if a.scale != "paper":
            print(f"error: --rehearse rehearses the paper scale: use it with --scale paper, not {a.scale!r}",
                  file=sys.stderr)
            return 1
        a.scale = "rehearsal"
    only = [s.strip() for s in a.only.split(",") if s.strip()] or None
    try:
        seeds = [int(s) for s in a.seeds.split(",") if s.strip()] or None
    except ValueError:
        print(f"error: --seeds must be comma-separated integers such as 0,1,2, got {a.seeds!r}", file=sys.stderr)
        return 1
    if a.plan:
        return print_plan(a.scale, seeds)
    try:
        name = output_name(a.scale, seeds)
        if not a.html_only:
            execute(a.scale, only, log=lambda m: print(m, flush=True), seeds=seeds, jobs=a.jobs)
        index = render_html(a.scale, name=name)
        if name == "cpu":  # the README's findings are the cpu ledger's, its scale card the cpu scale's
            cpu = project_root() / "paper" / "cpu"
            update_readme(project_root() / "README.md", read_ledger(cpu), read_trends(cpu))
            replace_block(project_root() / "README.md", CARD_BEGIN, CARD_END, card_markdown("cpu"))
    except (ValueError, FileNotFoundError, NotebookFailed) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"HTML paper: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
