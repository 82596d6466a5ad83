"""The HTML paper without a browser: a figure's caption says what it shows (from the chart's own axis titles,
entities decoded once), linked to its section; the run times are those of the executions shown; and what the reader
sees (issue 54): every generated paragraph on its page, no path of the executing machine in a page, table or the
ledger, every figure with the alt text of its caption, tables without pandas' row numbers and the per-seed rows
folded beneath the pooled table they feed. The committed cpu pages are checked as committed; the mechanism on a
small notebook executed and rendered here."""

import json
import re
from pathlib import Path

import nbformat
import pytest

from tiedlm_lib.paper.execute import execute, machine_paths, relative_paths, run_times
from tiedlm_lib.paper.html import (
    NBCONVERT_ALT,
    drop_row_numbers,
    figure_caption,
    fold_per_seed,
    missing_paragraphs,
    page_text,
    render_html,
)


def test_a_caption_says_what_the_figure_shows_and_where_it_comes_from():
    svg = ("<svg><g aria-label=\"X-axis titled 'loop applications k' for a linear scale\"></g>"
           "<g aria-label=\"Y-axis titled 'NLL &lt; ln V' for a linear scale\"></g>"
           "<g aria-label=\"X-axis titled 'loop applications k' for a linear scale\"></g></svg>")
    cap = figure_caption(svg, "04_tradeoff-single_vs_multi")
    assert cap == ("<a href='04_tradeoff.html' title='04_tradeoff-single_vs_multi'>§04</a> · NLL &lt; ln V against "
                   "loop applications k")
    assert figure_caption("<svg></svg>", "01_a-b").endswith("· 01_a-b")  # no axes: the file's name


def test_run_times_are_read_from_each_executed_notebook_not_from_the_runners_log(tmp_path):
    """A section re-executed alone (make nb) must show its own time: the index reads papermill's record in each
    executed notebook, and timings.json (make paper's log) is not consulted."""
    def nb(name, meta):
        (tmp_path / f"{name}.ipynb").write_text(json.dumps({"cells": [], "metadata": meta}))
    nb("02_backprop", {"papermill": {"duration": 1673.9, "start_time": "2026-12-06T20:27:23.495471+00:00"}})
    nb("01_architecture", {"papermill": {"duration": 29.1, "start_time": "2026-12-05T00:01:08+00:00"}})
    nb("03_depth_scaling", {})  # executed without papermill: no time to show
    (tmp_path / "timings.json").write_text(json.dumps([{"notebook": "02_backprop", "seconds": 214.5}]))
    assert run_times(tmp_path) == [
        {"notebook": "01_architecture", "seconds": 29.1, "executed": "2026-12-05 00:01"},
        {"notebook": "02_backprop", "seconds": 1673.9, "executed": "2026-12-06 20:27"}]


ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "paper" / "cpu"
PAGES = sorted((CPU / "html").glob("*.html"))
PROSE = sorted((CPU / "tables").glob("*-prose.json"))
# Absolute paths of an executing machine, built here so that this file names none (tests/test_references.py)
WORK, HOME = "/" + "work/main", "/" + "home/someone"


def _section(prose_json: Path) -> str:
    return prose_json.name[: -len("-prose.json")]


@pytest.mark.parametrize("prose_json", [pytest.param(p, id=_section(p)) for p in PROSE])
def test_every_paragraph_of_a_sections_prose_is_on_its_committed_page(prose_json):
    page = CPU / "html" / f"{_section(prose_json)}.html"
    assert page.is_file(), f"no page for {prose_json.name}"
    missing = missing_paragraphs(page.read_text(), json.loads(prose_json.read_text()))
    assert not missing, f"{page.name} lacks paragraphs of its prose: {missing}"


def test_the_committed_paper_names_no_path_of_the_executing_machine():
    """Pages, tables (CSV, JSON, Markdown) and the ledger: no path under the home, root, work, tmp or Users folders
    of the filesystem's root, nor under a drive letter (``paper.ABSOLUTE_PATH``)."""
    files = [*PAGES, *sorted((CPU / "tables").glob("*")), *sorted(CPU.glob("*.json")), *sorted(CPU.glob("*.md"))]
    assert PAGES and any(f.suffix == ".csv" for f in files) and (CPU / "claims.json") in files
    found = {f.relative_to(ROOT).as_posix(): machine_paths(f.read_text(errors="replace")) for f in files}
    assert not {f: p for f, p in found.items() if p}


def test_absolute_paths_are_found_and_made_relative_to_the_project():
    assert machine_paths(f"read from {WORK}/paper/cpu/tables and {HOME}/x, C:\\Users\\me") == [
        f"{WORK}/paper/cpu/tables", f"{HOME}/x", "C:\\Users\\me"]
    assert machine_paths("https://example.org" + WORK + "/x ./tmp/y paper/cpu/tables data:abc/tmp/xyz") == []
    text = (f"written {WORK}/paper/cpu/claims.json\n{WORK}/.venv/lib/python3.11/site-packages/tqdm/auto.py:21: W"
            f"\n/tmp/ipykernel_19814/82885591.py:69: PerformanceWarning\nthe root: {WORK}\n{WORK}ly/x")
    assert relative_paths(text, [WORK]) == (
        "written paper/cpu/claims.json\n.venv/lib/python3.11/site-packages/tqdm/auto.py:21: W\n<cell>:69: "
        f"PerformanceWarning\nthe root: .\n{WORK}ly/x")


def test_every_committed_figure_has_the_alt_text_of_its_caption():
    for page in PAGES:
        text = page.read_text()
        assert NBCONVERT_ALT not in text, page.name
        for tag in re.findall(r"<img\b[^>]*>", text):
            alt = re.search(r'\balt="([^"]*)"', tag)
            assert alt and alt.group(1).strip(), f"{page.name}: an image without alt text"


def _row_numbered_tables(page: str) -> int:
    from bs4 import BeautifulSoup

    n = 0
    for table in BeautifulSoup(page, "html.parser").find_all("table"):
        head, body = table.find("thead"), table.find("tbody")
        if not head or not body or not body.find_all("tr"):
            continue
        heads = [r.find_all(["th", "td"], recursive=False) for r in head.find_all("tr")]
        if any(h and h[0].get_text(strip=True) and not any(x.get_text(strip=True) for x in h[1:]) for h in heads):
            continue  # a named index: row labels that mean something
        firsts = [r.find(["th", "td"]) for r in body.find_all("tr")]
        if all(f is not None and f.name == "th" and re.fullmatch(r"-?\d+", f.get_text(strip=True)) for f in firsts):
            n += 1
    return n


def test_no_committed_table_shows_pandas_row_numbers():
    for page in PAGES:
        assert _row_numbered_tables(page.read_text()) == 0, page.name


def test_per_seed_tables_are_folded_beneath_the_pooled_table_in_the_committed_pages():
    """The per-seed rows (named by a column only they have) first appear inside the details element that follows
    the pooled table."""
    for name, table, column in (("02_backprop", "gaps", "NLL - full"), ("03_depth_scaling", "depth_gaps", "ci_lo"),
                                ("08_sft_generation", "sft_cost", "SFT - PT")):
        text = (CPU / "html" / f"{name}.html").read_text()
        # folded by the build (a page executed before rep.fold) or by the section itself (rep.fold's own summary)
        at = text.find(f"<summary>Per seed: table {table}, the rows pooled above")
        if at < 0:
            at = text.find("<summary>Per seed:", text.find(">pooled hi<"))
        assert at > 0, (name, table)
        opened = text.rfind("<details", 0, at)
        assert 0 < opened and "tiedlm-rows" in text[opened:at], (name, table)
        assert 0 < text.find(">pooled hi<") < opened, f"{name}: the pooled table is not above the folded rows"
        assert text.find(f">{column}<") > at, f"{name}: {table}'s rows are also shown unfolded above"


def test_row_numbers_are_dropped_and_a_meaningful_index_kept():
    import pandas as pd

    df = pd.DataFrame({"seed": [0, 1], "gap": [0.5, 0.7]})
    assert _row_numbered_tables(df.to_html()) == 1 and _row_numbered_tables(drop_row_numbers(df.to_html())) == 0
    assert ">seed<" in drop_row_numbers(df.to_html())
    named = df.set_index("seed").to_html()
    assert drop_row_numbers(named) == named  # "seed" as the index: its labels mean something
    text = df.rename(index={0: "paper", 1: "trained"}).to_html()
    assert drop_row_numbers(text) == text


def test_a_per_seed_table_above_its_pooled_table_is_folded_beneath_it():
    import pandas as pd

    def out(df, kind="display_data"):
        o = nbformat.v4.new_output(kind, data={"text/html": df.to_html(), "text/plain": str(df)})
        if kind == "execute_result":
            o.execution_count = 1
        return o

    per = pd.DataFrame({"mode": ["a", "a"], "seed": [0, 1], "gap": [0.1, 0.2]})
    pooled = pd.DataFrame({"mode": ["a"], "pooled": [0.15]})
    text = nbformat.v4.new_output("stream", name="stdout", text="judged\n")
    got = fold_per_seed([out(per), text, out(pooled, "execute_result")], {("mode", "seed", "gap"): "gaps"})
    assert [o.output_type for o in got] == ["stream", "execute_result", "display_data"]
    assert got[2]["data"]["text/html"].startswith("<details class='tiedlm-rows'><summary>Per seed: table gaps, the "
                                                  "rows pooled above (2 rows)</summary>")
    unnamed = fold_per_seed([out(per), out(pooled)])
    assert "<summary>Per seed: the rows pooled above (2 rows)</summary>" in unnamed[1]["data"]["text/html"]
    alone = [out(per)]  # no pooled table after it: left where it is
    assert fold_per_seed(alone) == alone
    after = [out(pooled), out(per)]
    assert fold_per_seed(after) == after


def _notebook(path: Path, *cells: str) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("scale = 'smoke'",
                                                                   metadata={"tags": ["parameters"]}),
                                         *(nbformat.v4.new_code_cell(c) for c in cells)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_a_section_executed_and_rendered_shows_what_the_reader_needs(tmp_path):
    """Two paragraphs in one cell (and one inside an if) all reach the page, each once; tables without row numbers;
    the per-seed rows folded; a printed absolute path made relative in the executed notebook; a chart's alt text."""
    (tmp_path / "notebooks").mkdir()
    _notebook(tmp_path / "notebooks" / "01_a.ipynb",
              "import altair as alt\nimport pandas as pd\nfrom tiedlm_lib.paper.report import Report\n"
              f"rep = Report('01_a', scale, {str(tmp_path / 'figures' / 'smoke')!r}, "
              f"{str(tmp_path / 'paper' / 'smoke')!r})\n"
              "per = rep.table(pd.DataFrame({'mode': ['a'] * 3, 'seed': [0, 1, 2], 'gap': [0.1, 0.2, 0.3]}), 'gaps')\n"
              "pooled = rep.table(pd.DataFrame({'mode': ['a'], 'pooled': [0.2]}), 'gap_pooled')\n"
              "rep.fact('g', 'gap_pooled', 'pooled', agg='only')\n"
              "rep.chart(alt.Chart(per).mark_point().encode(x=alt.X('seed:Q', title='training seed'), "
              "y=alt.Y('gap:Q', title='gap (nats)')), 'gaps')",
              "display(pooled)\nrep.fold(per, 'Per seed: each gap')\nprint('tables in', rep.paper / 'tables')",
              "rep.prose('Results', 'The pooled gap is {g:.2f} nats.')\n"
              "rep.prose('What this means', 'A first paragraph.\\n\\nA second paragraph.')\nx = 1",
              "if x == 1:\n    rep.prose('What this means: a branch', 'Said inside an if block.')")
    execute("smoke", root=tmp_path, log=lambda m: None)
    executed = (tmp_path / "paper" / "smoke" / "01_a.ipynb").read_text()
    assert str(tmp_path) not in executed and "tables in paper/smoke/tables" in executed
    assert json.loads(executed)["metadata"]["papermill"]["input_path"] == "notebooks/01_a.ipynb"
    render_html("smoke", root=tmp_path)
    page = (tmp_path / "paper" / "smoke" / "html" / "01_a.html").read_text()
    prose = json.loads((tmp_path / "paper" / "smoke" / "tables" / "01_a-prose.json").read_text())
    assert len(prose) == 3 and missing_paragraphs(page, prose) == []
    shown = page_text(page)  # the page without its folded code
    assert shown.count("A second paragraph.") == 1 and shown.count("The pooled gap is 0.20 nats.") == 1
    assert _row_numbered_tables(page) == 0
    assert re.search(r"<details class=[\"']tiedlm-rows[\"']><summary>Per seed: each gap \(3 rows\)</summary>", page)
    assert NBCONVERT_ALT not in page and 'alt="gap (nats) against training seed"' in page
    assert not machine_paths(page)


def test_the_html_build_refuses_a_path_of_the_executing_machine(tmp_path):
    pdir = tmp_path / "paper" / "smoke"
    (pdir / "tables").mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A section"),
                                         nbformat.v4.new_code_cell("print(path)", outputs=[nbformat.v4.new_output(
                                             "stream", name="stdout", text=f"read from {HOME}/data\n")])])
    nbformat.write(nb, pdir / "01_a.ipynb")
    with pytest.raises(ValueError, match=rf"01_a\.html would show an absolute path .*{HOME}/data"):
        render_html("smoke", root=tmp_path)
    (pdir / "tables" / "01_a-runs.csv").write_text("run,dir\nv3,/tmp/runs/v3\n")
    with pytest.raises(ValueError, match=r"01_a-runs\.csv names an absolute path .*/tmp/runs/v3"):
        render_html("smoke", root=tmp_path)
