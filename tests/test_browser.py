"""The HTML paper in a real browser: build it at smoke scale (two sections plus the claims ledger) and load the index
in headless Chromium; the figures and the claims table must be in the rendered page, and nothing may be fetched
from the network. Every page, the smoke build's and the committed cpu paper's, must fit a 1280 px window: no table,
figure or printed line running off its column or scrolling sideways in its box."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from tiedlm_lib.paper.execute import execute
from tiedlm_lib.paper.html import render_html

ROOT = Path(__file__).resolve().parents[1]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium found: `make browser` installs Debian's chromium package (as root, with apt); "
                "the browser check needs it")


@pytest.fixture(scope="module")
def smoke_paper():
    logs = []
    timings = execute("smoke", ["01_architecture", "11_claims"], log=logs.append)
    assert [t["notebook"] for t in timings] == ["01_architecture", "11_claims"]
    assert any("[1/2] 01_architecture at smoke" in m for m in logs) and any(" done in " in m for m in logs)
    return render_html("smoke")


def test_the_html_paper_renders_in_headless_chromium(smoke_paper, tmp_path):
    browser = _chromium()
    url = smoke_paper.as_uri()
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", url],
                         capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    assert "<table id=\"claims\"" in page or "<table id='claims'" in page
    rows = re.findall(r"<tr class=", page)
    assert len(rows) >= 1, "the claims table has rows"
    assert "A21" in page and "not testable" in page
    assert page.count("<svg") >= 1, "figures are inline svg"
    assert "01_architecture.html" in page and "11_claims.html" in page
    for table in ("scale-card", "testability", "timings"):  # the scale, what it can test, the run times
        assert f'<table id="{table}"' in page or f"<table id='{table}'" in page, table
    assert "glossary.html" in page and (smoke_paper.parent / "glossary.html").is_file()
    shot = tmp_path / "index.png"
    r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1280,1600", f"--screenshot={shot}", url], capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0 and shot.is_file() and shot.stat().st_size > 10_000, r.stderr[-2000:]


def test_section_pages_load_nothing_from_the_network(smoke_paper):
    for page in smoke_paper.parent.glob("*.html"):
        text = page.read_text()
        assert not re.search(r"<script[^>]*src=[\"']https?://", text), page.name
        assert not re.search(r"<link[^>]*href=[\"']https?://", text), page.name
    section = (smoke_paper.parent / "01_architecture.html").read_text()
    assert "<svg" in section or "data:image/png" in section, "the section's figures are inline"


def test_a_failing_notebook_names_itself_and_its_cell(tmp_path):
    """A notebook that raises stops the run with its name and the failing cell."""
    from tiedlm_lib.paper.execute import NotebookFailed

    (tmp_path / "notebooks").mkdir()
    src = ROOT / "notebooks" / "11_claims.ipynb"
    text = src.read_text().replace("rep = Report(", "raise RuntimeError('boom')\\nrep = Report(", 1)
    (tmp_path / "notebooks" / "99_broken.ipynb").write_text(text)
    ok = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("scale = 'cpu'", metadata={"tags": ["parameters"]}),
                                         nbformat.v4.new_code_cell("assert scale == 'smoke'")])
    ok.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(ok, tmp_path / "notebooks" / "98_fine.ipynb")
    out = tmp_path / "paper" / "smoke"
    out.mkdir(parents=True)
    (out / "99_broken.ipynb").write_text("the last good execution")
    with pytest.raises(NotebookFailed, match=r"99_broken failed in cell \d+ .*RuntimeError: boom.*\.partial"):
        execute("smoke", root=tmp_path, log=lambda m: None)
    # the failed section's last good execution is untouched, its partial kept aside for reading; the finished one
    # moved into place
    assert (out / "99_broken.ipynb").read_text() == "the last good execution"
    assert "boom" in (out / ".partial" / "99_broken.ipynb").read_text()
    assert (out / "98_fine.ipynb").is_file() and not (out / ".partial" / "98_fine.ipynb").exists()
    # the notebook that finished keeps its wall time although the run failed after it
    timings = json.loads((tmp_path / "paper" / "smoke" / "timings.json").read_text())
    assert [t["notebook"] for t in timings] == ["98_fine"] and timings[0]["seconds"] > 0


def test_sections_run_in_parallel_single_threaded_and_the_claims_section_last(tmp_path):
    from tiedlm_lib.paper.execute import NotebookFailed

    (tmp_path / "notebooks").mkdir()

    def notebook(name, body):
        nb = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell("scale = 'cpu'\nseeds = None", metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell(body)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, tmp_path / "notebooks" / f"{name}.ipynb")

    stamp = ("import os, time, pathlib\nassert os.environ['OMP_NUM_THREADS'] == '1' and seeds is None\n"
             "time.sleep(1.0)\npathlib.Path('{n}.done').write_text(str(time.time()))")
    for name in ("01_a", "02_b"):
        notebook(name, stamp.format(n=name))
    notebook("11_claims", "import pathlib\nassert pathlib.Path('01_a.done').exists() and "
             "pathlib.Path('02_b.done').exists()")
    t0 = time.perf_counter()
    # smoke's own seeds ([0]) reach the notebooks as None: the scale's paper, with its extended seeds
    timings = execute("smoke", root=tmp_path, log=lambda m: None, jobs=2, seeds=[0])
    assert [t["notebook"] for t in timings][-1] == "11_claims"
    done = [float((tmp_path / "notebooks" / f"{n}.done").read_text()) for n in ("01_a", "02_b")]
    assert abs(done[0] - done[1]) < 0.9  # the two sections slept at the same time
    assert time.perf_counter() - t0 > 1.0
    notebook("03_c", "raise RuntimeError('boom')")
    with pytest.raises(NotebookFailed, match="03_c failed"):
        execute("smoke", ["01_a", "03_c"], root=tmp_path, log=lambda m: None, jobs=2, seeds=[0])
    with pytest.raises(ValueError, match="jobs must be"):
        execute("smoke", root=tmp_path, log=lambda m: None, jobs=0)


def test_a_section_that_reads_another_starts_after_it_in_a_parallel_run(tmp_path, monkeypatch):
    """Section 13 reads section 10's tables: with two jobs it must not start while 10 is still writing them, and a
    section that depends on nothing in the run still runs beside the others."""
    from tiedlm_lib.paper import execute as paper

    (tmp_path / "notebooks").mkdir()
    for name, sleep in (("01_a", 1.5), ("02_b", 0.0), ("03_c", 0.0)):
        nb = nbformat.v4.new_notebook(cells=[
            nbformat.v4.new_code_cell("scale = 'cpu'\nseeds = None", metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell(f"import time, pathlib\npathlib.Path('{name}.start').write_text(str(time.time()))"
                                      f"\ntime.sleep({sleep})\npathlib.Path('{name}.end').write_text(str(time.time()))")])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, tmp_path / "notebooks" / f"{name}.ipynb")
    monkeypatch.setattr(paper, "AFTER", {"02_b": ("01_a",), "03_c": ("99_absent",)})
    execute("smoke", root=tmp_path, log=lambda m: None, jobs=2, seeds=[0])
    t = {f"{n}.{w}": float((tmp_path / "notebooks" / f"{n}.{w}").read_text())
         for n in ("01_a", "02_b", "03_c") for w in ("start", "end")}
    assert t["02_b.start"] >= t["01_a.end"]  # waited for the section it reads
    assert t["03_c.start"] < t["01_a.end"]  # a dependency outside the run does not hold a section back


def test_parallel_sections_all_start_in_the_notebooks_folder(tmp_path, monkeypatch):
    """Regression (a CI run failed on it): papermill's cwd= is an os.chdir per call, process-wide, so with two
    threads one section's exit restored the old directory while the other's kernel was still starting, and that
    kernel wrote its files elsewhere. The stand-in below enters papermill's own chdir as papermill does, with the
    timing that loses the race; every section must still start in notebooks/, and the caller's directory survive."""
    import papermill as pm
    from papermill.utils import chdir

    (tmp_path / "notebooks").mkdir()
    for name in ("01_a", "02_b"):
        nbformat.write(nbformat.v4.new_notebook(), tmp_path / "notebooks" / f"{name}.ipynb")
    timing = {"01_a": (0.0, 0.0, 0.2), "02_b": (0.1, 0.3, 0.0)}  # (before chdir, kernel start, run)
    started_in = {}

    def stand_in(input_path, output_path, parameters=None, cwd=None, **kw):
        before, start, run = timing[Path(input_path).stem]
        time.sleep(before)
        with chdir(cwd):
            time.sleep(start)
            started_in[Path(input_path).stem] = os.getcwd()
            time.sleep(run)
        nbformat.write(nbformat.v4.new_notebook(), output_path)

    monkeypatch.setattr(pm, "execute_notebook", stand_in)
    here = os.getcwd()
    execute("smoke", root=tmp_path, log=lambda m: None, jobs=2, seeds=[0])
    assert started_in == {n: str(tmp_path / "notebooks") for n in timing}
    assert os.getcwd() == here


def test_a_first_look_with_other_seeds_never_writes_over_the_scales_paper(tmp_path):
    from tiedlm_lib.paper.execute import output_name

    assert output_name("cpu") == output_name("cpu", [4, 2, 0, 1, 3]) == "cpu"
    assert output_name("cpu", [2, 0, 1]) == "cpu-seeds0_1_2"
    assert output_name("cpu", [0]) == "cpu-seeds0" and output_name("smoke", [0]) == "smoke"
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("scale = 'cpu'\nseeds = None\npaper_dir = None\nfigures_dir = None",
                                  metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("import json, pathlib\npathlib.Path('got.json').write_text(json.dumps("
                                  "[seeds, paper_dir, figures_dir]))")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "notebooks" / "01_a.ipynb")
    execute("cpu", root=tmp_path, log=lambda m: None, seeds=[0])
    seeds, paper_dir, figures_dir = json.loads((tmp_path / "notebooks" / "got.json").read_text())
    assert seeds == [0] and paper_dir == str(tmp_path / "paper" / "cpu-seeds0")
    assert figures_dir == str(tmp_path / "figures" / "cpu-seeds0")
    assert (tmp_path / "paper" / "cpu-seeds0" / "01_a.ipynb").is_file() and not (tmp_path / "paper" / "cpu").exists()


# Measured in the browser after layout, written into the page for --dump-dom to return (test copies only).
SELF_CHECK = """<script>window.addEventListener('load', () => {
  const el = document.documentElement;
  const figs = [...document.querySelectorAll('.jp-OutputArea-output svg, .jp-OutputArea-output img, figure svg')]
    .filter(e => !e.parentElement.closest('svg'));
  const r = {overflow: el.scrollWidth > el.clientWidth + 1, figures: figs.length,
             empty: figs.filter(e => { const b = e.getBoundingClientRect(); return b.width < 1 || b.height < 1; })
               .length,
             errors: document.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"],' +
                                               '[data-mime-type="application/vnd.jupyter.error"]').length};
  // a table or figure must fit the page's column unless it sits in a box that scrolls (overflow-x auto/scroll)
  const scrolls = e => { for (let a = e; a && a !== document.body; a = a.parentElement) {
    if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX) && a.scrollWidth > 0) return true; } return false; };
  const col = document.body.getBoundingClientRect();
  r.spill = [...document.querySelectorAll('table'), ...figs].filter(e => { const b = e.getBoundingClientRect();
    return !scrolls(e.parentElement) && (b.right > col.right + 1 || b.left < col.left - 1); }).length;
  // content wider than its own box, whether the box clips it or scrolls it: a printed line or a table that runs off
  // the right edge of the page's column at this width (issue 54)
  r.clipped = [...document.querySelectorAll('body *')].filter(e => !e.closest('svg') && e.clientWidth > 0 &&
    getComputedStyle(e).overflowX !== 'visible' && e.scrollWidth > e.clientWidth + 1).length;
  // a code block showing an escaped entity (&quot; as text) was escaped twice
  r.entities = [...document.querySelectorAll('pre, code')].filter(e => /&(quot|lt|gt|amp|#[0-9]+|#x[0-9a-f]+);/i
    .test(e.textContent)).length;
  const p = document.createElement('pre'); p.id = 'selfcheck'; p.textContent = JSON.stringify(r);
  document.body.appendChild(p);
});</script>"""


def _links(page: Path) -> list[str]:
    return re.findall(r"<a [^>]*href=['\"]([^'\"]+)['\"]", page.read_text())


def _self_check(browser: str, text: str, probe: Path) -> dict:
    probe.write_text(text.replace("</body>", SELF_CHECK + "</body>", 1))
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000",
                          "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()], capture_output=True, text=True,
                         timeout=180)
    m = re.search(r'<pre id="selfcheck">(.*?)</pre>', dom.stdout)
    assert m, f"{probe.name}: the self-check did not run: {dom.stderr[-500:]}"
    return json.loads(m.group(1).replace("&quot;", '"'))


def test_the_page_checks_catch_what_they_look_for(tmp_path):
    bad = ("<html><body style='width:600px'><div style='width:3000px'>wide</div><div class='jp-OutputArea-output'>"
           "<svg width='0' height='0'></svg></div><div data-mime-type='application/vnd.jupyter.stderr'>x</div>"
           "<div style='overflow:hidden'><table style='width:900px'><tr><td>clipped</td></tr></table></div>"
           "<div style='overflow-x:auto'><table style='width:900px'><tr><td>scrolls</td></tr></table></div>"
           f"<pre style='overflow-x:auto'>{'a printed line that runs off the page ' * 10}</pre>"
           "<pre><code>f&amp;quot;{x}&amp;quot;</code></pre><pre><code>a &lt; b</code></pre></body></html>")
    r = _self_check(_chromium(), bad, tmp_path / "bad.html")
    # clipped: the hidden table, the table that scrolls in its box and the printed line that scrolls in its block
    assert r == {"overflow": True, "figures": 1, "empty": 1, "errors": 1, "spill": 1, "clipped": 3, "entities": 2}
    good = ("<html><body style='width:600px'><div style='overflow-x:auto'><table style='width:500px'><tr><td>x"
            "</td></tr></table></div><pre><code>a &lt; b and f\"{x}\"</code></pre>"
            f"<pre style='white-space:pre-wrap;overflow-x:auto'>{'a printed line that wraps ' * 10}</pre>"
            "</body></html>")
    assert _self_check(_chromium(), good, tmp_path / "good.html") == {
        "overflow": False, "figures": 0, "empty": 0, "errors": 0, "spill": 0, "clipped": 0, "entities": 0}


def test_every_page_reads_cleanly_in_the_browser(smoke_paper, tmp_path):
    """No horizontal overflow of the body, every figure with a rendered size, no stderr or error box, every
    navigation link resolving (with its anchor); screenshots of the index and a section page in paper/smoke/."""
    browser = _chromium()
    html_dir = smoke_paper.parent
    pages = sorted(html_dir.glob("*.html"))
    assert len(pages) >= 3
    for page in pages:
        for href in _links(page):
            if href.startswith(("http://", "https://", "#")):
                continue
            target, _, anchor = href.partition("#")
            assert (html_dir / target).is_file(), f"{page.name}: link to missing {href}"
            if anchor:
                assert f'id="{anchor}"' in (html_dir / target).read_text(), f"{page.name}: no anchor {href}"
        if page.name != "index.html":
            assert "tiedlm-nav" in page.read_text() and "index.html" in _links(page), page.name
        r = _self_check(browser, page.read_text(), tmp_path / page.name)
        assert not r["overflow"], f"{page.name}: the body overflows horizontally"
        assert r["empty"] == 0, f"{page.name}: {r['empty']} of {r['figures']} figures have no rendered size"
        assert r["errors"] == 0, f"{page.name}: {r['errors']} stderr or error boxes"
        assert r["spill"] == 0, f"{page.name}: {r['spill']} tables or figures overflow their box"
        assert r["clipped"] == 0, f"{page.name}: {r['clipped']} boxes hold content wider than they are"
        assert r["entities"] == 0, f"{page.name}: {r['entities']} code blocks show an escaped entity"
    section = next(p for p in pages if p.name != "index.html")
    for page, name in ((html_dir / "index.html", "index.png"), (section, "section.png")):
        shot = ROOT / "paper" / "smoke" / name
        r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--window-size=1280,1600", f"--screenshot={shot}", page.as_uri()], capture_output=True,
                           text=True, timeout=180)
        assert r.returncode == 0 and shot.is_file() and shot.stat().st_size > 10_000, r.stderr[-2000:]


def test_the_committed_pages_fit_a_1280_px_window(tmp_path):
    """The committed cpu paper as a reader opens it: no page wider than the window, no table, figure or printed line
    running off its column or hidden in a box that scrolls sideways, no stderr box, no figure without a size."""
    browser = _chromium()
    pages = sorted((ROOT / "paper" / "cpu" / "html").glob("*.html"))
    assert len(pages) >= 3
    bad = {}
    for page in pages:
        r = _self_check(browser, page.read_text(), tmp_path / page.name)
        problems = {k: r[k] for k in ("overflow", "spill", "clipped", "empty", "errors", "entities") if r[k]}
        if problems:
            bad[page.name] = problems
    assert not bad, f"pages that do not read cleanly at 1280 px: {bad}"


def test_the_smoke_sections_show_every_paragraph_of_their_prose(smoke_paper):
    """The sections this suite executes show every paragraph their prose.json holds (a cell's earlier rep.prose
    calls included), and name no path of the machine that executed them."""
    from tiedlm_lib.paper.execute import machine_paths
    from tiedlm_lib.paper.html import missing_paragraphs

    tables = ROOT / "paper" / "smoke" / "tables"
    executed = ("01_architecture", "11_claims")  # by the smoke_paper fixture, in this run
    prose = {s: tables / f"{s}-prose.json" for s in executed if (tables / f"{s}-prose.json").is_file()}
    assert prose, "no executed section with prose"
    for section, path in prose.items():
        page = (smoke_paper.parent / f"{section}.html").read_text()
        assert missing_paragraphs(page, json.loads(path.read_text())) == [], section
    for section in executed:
        assert not machine_paths((smoke_paper.parent / f"{section}.html").read_text()), section
        assert not machine_paths((ROOT / "paper" / "smoke" / f"{section}.ipynb").read_text()), section


def test_sections_run_on_ipc_kernels_without_the_tcp_warning(tmp_path, capfd):
    """The kernels talk over IPC sockets in Jupyter's runtime folder: no port, no per-section warning that TCP
    without encryption is readable by others, and no socket file left beside the notebooks."""
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("scale = 'cpu'", metadata={"tags": ["parameters"]}),
                                         nbformat.v4.new_code_cell("import os; print(os.getcwd())")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "notebooks" / "97_quiet.ipynb")
    execute("smoke", root=tmp_path, log=lambda m: None)
    err = capfd.readouterr().err
    assert "without encryption" not in err and "TCP" not in err, err[-500:]
    assert sorted(p.name for p in (tmp_path / "notebooks").iterdir()) == ["97_quiet.ipynb"]
    assert (tmp_path / "paper" / "smoke" / "97_quiet.ipynb").is_file()
