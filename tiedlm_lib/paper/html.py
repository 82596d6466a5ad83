"""The HTML paper: one page per executed section (nbconvert, figures inline as svg, nothing loaded from the network,
per-seed tables folded beneath the pooled table they feed) and an index with the abstract, the findings figure, the
sections, the claims ledger, the scale card and the run times."""

from __future__ import annotations

import contextlib
import html
import json
import re
from pathlib import Path

from tiedlm_lib.paper.execute import (
    _cell_parameters,
    _map_strings,
    check_no_machine_paths,
    executing_roots,
    machine_paths,
    relative_paths,
    run_times,
)
from tiedlm_lib.paper.findings import abstract as findings_abstract
from tiedlm_lib.paper.glossary import link_first_uses
from tiedlm_lib.paper.glossary import page_html as glossary_page
from tiedlm_lib.paper.scale_card import scale_card
from tiedlm_lib.paper.testability import read_trends, testability
from tiedlm_lib.paths import project_root
from tiedlm_lib.store.atomic import atomic_write_text

ABSTRACT = """\
Weight-tied ("looped") language models apply one Transformer block k times, z ← z + α·f(z), between a few ordinary
layers. Paper A trains small such models and reports depth scaling under single-depth training, free early exit
under multi-depth supervision but not both (a "trade-off law"), a memory-saving phantom gradient that underfits over
long training, a padding-dominated benchmark that reverses model rankings, and an advantage of tied over
iso-parameter vanilla models. Paper B argues that truncating depth confounds the number of block applications, the
amount of distinct computation and an out-of-distribution readout, and gives controls to separate them. This
executable companion rebuilds both papers' procedures in one library, re-runs every section at the chosen scale,
reproduces each quirk of the original code beside the corrected protocol, and records a verdict with confidence
intervals for every claim."""


_REMOTE = re.compile(r"<script[^>]*\bsrc=[\"']https?://[^>]*>\s*</script>|<link[^>]*\bhref=[\"']https?://[^>]*>",
                     re.I)


def _offline(page: str) -> str:
    """Drop every script or stylesheet the page would load from the network (MathJax, require.js)."""
    return _REMOTE.sub("", page)


def _title(nb) -> str:
    for c in nb.cells:
        if c.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", c.source, re.M)
            if m:
                return m.group(1).strip()
    return "untitled"


def _esc(v) -> str:
    return html.escape(str(v))


def claims_table(ledger: dict, anchored: set[str] = frozenset()) -> str:
    """The ledger as a table; each section cell links to the section page, each claim to the section's "The claims"
    heading where the page has one (``anchored``: those sections)."""
    rows = []
    for c in ledger.get("claims", []):
        sec = _esc(c["notebook"])
        to = f"{sec}.html" + ("#The-claims" if c["notebook"] in anchored else "")
        rows.append(f"<tr class='{_esc(c['verdict']).replace(' ', '-')}'><td><a href='{to}'>"
                    f"{_esc(c['id'])}</a></td><td>{_esc(c['claim'])}</td><td>{_esc(c['protocol'])}</td>"
                    f"<td><b>{_esc(c['verdict'])}</b></td><td>{_esc(c.get('basis', ''))}</td>"
                    f"<td>{_esc(c['criterion'])}</td><td><a href='{sec}.html'>{sec}</a></td></tr>")
    return ("<div class='scroll'><table id='claims'><thead><tr><th>id</th><th>claim</th><th>protocol</th>"
            "<th>verdict</th><th>basis</th><th>criterion</th><th>section</th></tr></thead><tbody>" + "\n".join(rows)
            + "</tbody></table></div>")


def card_html(scale: str) -> str:
    """The scale card (``scale_card.scale_card``) as an HTML table in its own scrolling box."""
    return rows_html(scale_card(scale), "scale-card")


def rows_html(rows: list[dict], table_id: str) -> str:
    """Rows of one shape as an HTML table in its own scrolling box."""
    if not rows:
        return "<p>None yet.</p>"
    cols = list(rows[0])
    head = "".join(f"<th>{_esc(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_esc(r[c])}</td>" for c in cols) + "</tr>" for r in rows)
    return (f"<div class='scroll'><table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
            "</table></div>")


def figure_description(svg: str, fallback: str) -> str:
    """What a chart shows, from the chart itself: its axes' titles (``Y against X``, as vega writes them into the
    svg's aria labels), entities decoded; ``fallback`` for a chart without axis titles. A figure's caption on the
    index and its alt text on the section's page."""
    def unique(xs):  # the svg's attribute text, entities decoded (escaped once, for the page)
        return list(dict.fromkeys(html.unescape(x) for x in xs if x))

    ys = unique(re.findall(r"Y-axis titled '([^']*)'", svg))
    xs = unique(re.findall(r"X-axis titled '([^']*)'", svg))
    return f"{' / '.join(ys)} against {' / '.join(xs)}" if ys and xs else " / ".join(ys or xs) or fallback


def figure_caption(svg: str, stem: str) -> str:
    """What a figure shows (``figure_description``), after the section it belongs to, linked. The file name stays in
    the link's title."""
    what = figure_description(svg, stem)
    section = stem.split("-", 1)[0]
    return (f"<a href='{_esc(section)}.html' title='{_esc(stem)}'>§{_esc(section[:2])}</a> · "
            f"{_esc(what)}")


def _inline_svg(path: Path) -> str:
    svg = re.sub(r"^<\?xml[^>]*>\s*", "", path.read_text())
    label = _esc(figure_description(svg, path.stem))
    return re.sub(r"<svg\b", f"<svg role='img' aria-label='{label}' style='max-width:100%;height:auto'", svg, count=1)


NBCONVERT_ALT = "No description has been provided for this image"  # nbconvert's alt for an image without one
_IMG = re.compile(r"<img\b[^>]*>")


def describe_figures(page: str, fallback: str) -> str:
    """Every figure of a section's page with the alt text of its caption (``figure_description``: the chart's
    axis titles) instead of nbconvert's default; an image that is not a chart gets ``fallback``."""
    import base64

    def alt(m: re.Match) -> str:
        tag = m.group(0)
        if f'alt="{NBCONVERT_ALT}"' not in tag:
            return tag
        src = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', tag)
        what = fallback
        if src:
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                what = figure_description(base64.b64decode(src.group(1)).decode("utf-8"), fallback)
        return tag.replace(f'alt="{NBCONVERT_ALT}"', f'alt="{html.escape(what, quote=True)}"')

    return _IMG.sub(alt, page)


STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;line-height:1.45}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:.3em .5em;vertical-align:top}
tr.reproduced td:nth-child(4),tr.yes td:nth-child(4){color:#1a7f37}tr.not-reproduced td:nth-child(4),
tr.no td:nth-child(4){color:#b42318}tr.inconclusive td:nth-child(4){color:#9a6700}
figure{display:inline-block;margin:.5em;max-width:48%;vertical-align:top}figcaption{font-size:.8em;color:#555}
.scroll{overflow-x:auto;max-width:100%}td{overflow-wrap:break-word;hyphens:none}"""


SECTION_STYLE = """<style>
.tiedlm-nav{display:flex;gap:1.5em;justify-content:space-between;margin:.6em 0;padding:.4em .8em;
  border:1px solid #ddd;border-radius:4px;font:14px system-ui,sans-serif;background:#fafafa}
details.tiedlm-code{margin:.3em 0 .3em 0}details.tiedlm-code summary{cursor:pointer;color:#555;font-size:.85em}
details.tiedlm-code pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:.8em}
.jp-RenderedHTMLCommon table,.jp-OutputArea-output table{display:block;overflow-x:auto;max-width:100%}
.jp-OutputArea-output td,.jp-OutputArea-output th{padding:.3em .45em}.jp-OutputArea-output th{overflow-wrap:anywhere}
.jp-OutputArea-output pre{white-space:pre-wrap;overflow-wrap:anywhere}
details.tiedlm-rows{margin:.3em 0 .8em 0}details.tiedlm-rows summary{cursor:pointer;color:#555;font-size:.9em}
.jp-OutputArea-output svg,.jp-OutputArea-output img{max-width:100%;height:auto}
a.gloss{color:inherit;text-decoration:underline dotted}
</style>"""


def _nav(sections: list[tuple[str, str]], i: int) -> str:
    """Previous / index / next links of section i."""
    prev = f"<a href='{_esc(sections[i - 1][0])}.html'>← {_esc(sections[i - 1][1])}</a>" if i > 0 else "<span></span>"
    nxt = (f"<a href='{_esc(sections[i + 1][0])}.html'>{_esc(sections[i + 1][1])} →</a>" if i + 1 < len(sections)
           else "<span></span>")
    return f"<nav class='tiedlm-nav'>{prev}<a href='index.html'>index</a>{nxt}</nav>"


def drop_row_numbers(table_html: str) -> str:
    """A pandas table's HTML without the integer row numbers pandas prints as its first column when the rows have
    no index of their own (an unnamed, single-level integer index); a table with a meaningful index is unchanged.
    For outputs executed before ``report.setup_tables`` hid them."""
    if 'class="dataframe"' not in table_html:
        return table_html
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(table_html, "html.parser")
    changed = False
    for table in soup.find_all("table", class_="dataframe"):
        head = table.find("thead")
        body = table.find("tbody")
        if head is None or body is None:
            continue
        head_rows, body_rows = head.find_all("tr"), body.find_all("tr")
        heads = [r.find_all(["th", "td"], recursive=False) for r in head_rows]
        # a header row naming the index (its first cell alone not empty) says the row labels mean something; a
        # first cell beside column headers is the columns' own name, which goes with the row numbers' column
        if not body_rows or any(not h or h[0].name != "th" for h in heads) or any(
                h[0].get_text(strip=True) and not any(x.get_text(strip=True) for x in h[1:]) for h in heads):
            continue
        firsts = [h[0] for h in heads]
        cells = [r.find_all(["th", "td"], recursive=False) for r in body_rows]
        if not all(c and c[0].name == "th" and sum(x.name == "th" for x in c) == 1
                   and re.fullmatch(r"-?\d+|\.\.\.", c[0].get_text(strip=True)) for c in cells):
            continue
        for f in firsts:
            f.decompose()
        for c in cells:
            c[0].decompose()
        changed = True
    return str(soup) if changed else table_html


def _table_shape(output) -> tuple[list[str], int] | None:
    """The column headers (all header rows' cells) and row count of the table an output shows; None if it shows
    none."""
    page = output.get("data", {}).get("text/html") if output.get("output_type") in ("display_data",
                                                                                     "execute_result") else None
    if not page or "<table" not in page:
        return None
    from bs4 import BeautifulSoup

    table = BeautifulSoup(page if isinstance(page, str) else "".join(page), "html.parser").find("table")
    if table is None or table.find_parent("details") is not None:
        return None
    head, body = table.find("thead"), table.find("tbody")
    cols = [c.get_text(strip=True) for c in head.find_all(["th", "td"])] if head else []
    return cols, len(body.find_all("tr")) if body else 0


def fold_per_seed(outputs: list, names: dict | None = None) -> list:
    """A cell's outputs with its per-seed tables (a ``seed`` column) that stand above the pooled table the verdicts
    read (a table of the same cell without one) moved beneath it, each folded in a details element whose summary
    names it (``names``: its columns, as a tuple, to the table's saved name). For outputs executed before the
    sections folded them (``Report.fold``)."""
    import nbformat

    shapes = [_table_shape(o) for o in outputs]
    seeded = [i for i, sh in enumerate(shapes) if sh and "seed" in sh[0]]
    if not seeded:
        return outputs
    pooled = [i for i, sh in enumerate(shapes) if sh and "seed" not in sh[0] and i > seeded[0]]
    if not pooled:
        return outputs
    beneath = pooled[-1]
    moving = [i for i in seeded if i < beneath]
    folded = []
    for i in moving:
        cols, n = shapes[i]
        name = (names or {}).get(tuple(c for c in cols if c))
        what = f"table {html.escape(name)}, the rows pooled above" if name else "the rows pooled above"
        page = outputs[i]["data"]["text/html"]
        page = page if isinstance(page, str) else "".join(page)
        folded.append(nbformat.v4.new_output("display_data", data={
            "text/html": f"<details class='tiedlm-rows'><summary>Per seed: {what} ({n} rows)</summary>{page}"
                         "</details>"}))
    out = []
    for i, o in enumerate(outputs):
        if i not in moving:
            out.append(o)
        if i == beneath:
            out += folded
    return out


def saved_tables(pdir: Path, stem: str) -> dict:
    """A section's saved tables by their columns: {(column, ...): name} for ``tables/<stem>-<name>.csv`` (a shape
    two tables share names neither)."""
    import csv

    found: dict = {}
    for f in sorted((pdir / "tables").glob(f"{stem}-*.csv")):
        with f.open(newline="") as fh:
            cols = tuple(next(csv.reader(fh), []))
        name = f.stem.split("-", 1)[1]
        found[cols] = None if cols in found else name
    return {k: v for k, v in found.items() if v}


def prepare_for_reading(nb, executed_with: dict, tables: dict | None = None) -> None:
    """A section as a reader wants it (in place): each code cell's source folded into a details element above its
    outputs, the papermill-injected parameters cell dropped (its values annotated on the parameters cell, so the
    parameters appear once), stderr streams (progress bars, library warnings) removed, pandas' row numbers dropped
    from its tables (``drop_row_numbers``), and per-seed tables that stand above their pooled table folded beneath it
    (``fold_per_seed``; ``tables``: the section's saved tables by their columns, to name them)."""
    import nbformat

    cells = []
    for c in nb.cells:
        tags = c.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:
            continue
        if c.cell_type == "code":
            src = c.source
            if "parameters" in tags and executed_with:
                src += "\n# executed with: " + "; ".join(f"{k} = {v!r}" for k, v in executed_with.items())
            c.outputs = [o for o in c.get("outputs", []) if not (o.get("output_type") == "stream"
                                                                   and o.get("name") == "stderr")]
            for o in c.outputs:
                data = o.get("data", {})
                if "text/html" in data:
                    page = data["text/html"]
                    data["text/html"] = drop_row_numbers(page if isinstance(page, str) else "".join(page))
            c.outputs = fold_per_seed(c.outputs, tables)
            if src.strip():
                label = "parameters" if "parameters" in tags else "code"
                # one line: a blank line inside a Markdown HTML block ends it, and the rest would be parsed as
                # Markdown (nested code blocks, escaped entities, lost indentation); &#10; is a newline in <pre>
                code = html.escape(src).replace("\n", "&#10;")
                cells.append(nbformat.v4.new_markdown_cell(
                    f"<details class='tiedlm-code'><summary>{label}</summary><pre><code>{code}</code></pre></details>"))
        cells.append(c)
    nb.cells = cells


def render_html(scale: str, root: Path | None = None, name: str | None = None) -> Path:
    """paper/<name>/html/ (``name``: default the scale, see ``output_name``): one page per executed notebook and
    index.html. Returns the index path."""
    import nbformat
    from nbconvert import HTMLExporter

    root = root or project_root()
    name = name or scale
    pdir = root / "paper" / name
    out = pdir / "html"
    out.mkdir(parents=True, exist_ok=True)
    executed = [p for p in sorted(pdir.glob("[0-9][0-9]_*.ipynb"))]
    if not executed:
        raise FileNotFoundError(f"no executed notebooks in {pdir}: run `make paper SCALE={scale}` first")
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    check_no_machine_paths(pdir)
    books = [(p, nbformat.read(p, as_version=4)) for p in executed]
    sections = [(p.stem, _title(nb)) for p, nb in books]
    anchored = set()
    here = str(root.resolve())
    for i, (p, nb) in enumerate(books):
        # outputs printed before the notebooks wrote project-relative paths: made relative here (issue 54)
        roots = [here, *executing_roots(nb)]
        nb = nbformat.from_dict(_map_strings(nb, lambda t, roots=roots: relative_paths(t, roots)))
        prepare_for_reading(nb, _cell_parameters(nb.cells, ("injected-parameters",)), saved_tables(pdir, p.stem))
        body, _ = exporter.from_notebook_node(nb)
        body = describe_figures(body, f"a figure of {sections[i][1]}")
        nav = _nav(sections, i)
        body = body.replace("</head>", SECTION_STYLE + "</head>", 1)
        body = re.sub(r"(<body[^>]*>)", lambda m, nav=nav: m.group(1) + nav, body, count=1)
        body = body.replace("</body>", nav + "</body>", 1)
        if 'id="The-claims"' in body:
            anchored.add(p.stem)
        atomic_write_text(out / f"{p.stem}.html", _checked(_offline(link_first_uses(body)), out / f"{p.stem}.html"))
    atomic_write_text(out / "glossary.html", _checked(glossary_page(STYLE), out / "glossary.html"))
    index = link_first_uses(_index(scale, root, name, sections, anchored))
    return atomic_write_text(out / "index.html", _checked(index, out / "index.html"))


def _plain(text: str) -> str:
    return " ".join(html.unescape(text).split())


def page_text(page: str) -> str:
    """What a reader reads on a section's page: its text without tags, code (the folded sources) or styles, entities
    decoded, whitespace collapsed."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    for e in soup.select("details.tiedlm-code, script, style"):
        e.decompose()
    return _plain(soup.get_text(""))


def missing_paragraphs(page: str, prose: list[dict]) -> list[str]:
    """The paragraphs of a section's generated prose (its ``tables/<section>-prose.json``) that its page does not
    show, each as its heading and opening words; [] when every one is on the page."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    text = page_text(page)
    out = []
    for entry in prose:
        for i, para in enumerate(p for p in re.split(r"\n\s*\n", entry["text"]) if p.strip()):
            md = f"**{entry['heading']}.** {para}" if i == 0 else para
            if page_text(markdown2html_mistune(md)) not in text:
                out.append(f"{entry['heading']}: {' '.join(para.split()[:8])} ...")
    return out


def _checked(page: str, where: Path) -> str:
    """The page, refused (ValueError naming it and the path) if it still names a path of the executing machine."""
    found = machine_paths(page)
    if found:
        raise ValueError(f"{where} would show an absolute path of the executing machine ({found[0]}): print it "
                         "relative to the project (report.shown_path)")
    return page


VERDICT_COLOURS = {"reproduced": "#1b7837", "yes": "#1b7837", "not reproduced": "#b2182b", "no": "#b2182b",
                   "inconclusive": "#8c8c8c"}


def findings_figure(ledger: dict) -> str:
    """The findings at a glance: each finding's pooled effect and 95% interval as its distance from the claim's
    threshold in SESOIs (0 the threshold, the grey band ±1 SESOI), coloured by its entry's verdict; inline svg with
    its caption, or "" when the ledger holds no finding."""
    import altair as alt
    import pandas as pd
    import vl_convert as vlc

    from tiedlm_lib.paper.findings import finding_rows

    rows = finding_rows(ledger)
    if not rows:
        return ""
    df = pd.DataFrame(rows)
    order = list(df["finding"])
    y = alt.Y("finding:N", sort=order, title=None, axis=alt.Axis(labelLimit=420))
    colour = alt.Color("verdict:N", scale=alt.Scale(domain=list(VERDICT_COLOURS), range=list(VERDICT_COLOURS.values())),
                       legend=alt.Legend(title="verdict", orient="bottom"))
    x_title = "pooled effect minus its threshold, in SESOIs (band: ±1 SESOI)"
    band = alt.Chart(pd.DataFrame({"a": [-1.0], "b": [1.0]})).mark_rect(color="#dddddd").encode(x="a:Q", x2="b:Q")
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="black").encode(x="x:Q")
    bars = alt.Chart(df).mark_rule(strokeWidth=2).encode(
        x=alt.X("lo in SESOIs:Q", title=x_title), x2="hi in SESOIs:Q", y=y, color=colour)
    dots = alt.Chart(df).mark_point(filled=True, size=60).encode(
        x="in SESOIs:Q", y=y, color=colour,
        tooltip=["finding", alt.Tooltip("point:Q", format="+.3f"), alt.Tooltip("lo:Q", format="+.3f"),
                 alt.Tooltip("hi:Q", format="+.3f"), "threshold", "sesoi", "verdict", "claim verdict"])
    chart = (band + zero + bars + dots).properties(width=560, height=22 * len(df))
    svg = re.sub(r"^<\?xml[^>]*>\s*", "", vlc.vegalite_to_svg(chart.to_json()))
    caption = ("Each finding of the paragraphs below: its pooled 95% interval and point as the distance from its "
               "threshold, in units of its smallest effect of interest (SESOI), so effects in nats and in shares "
               "share one axis; colour: the unit's own verdict under its claim's rule")
    svg = re.sub(r"<svg\b", f"<svg role='img' aria-label='{_esc(caption)}' style='max-width:100%;height:auto'", svg,
                 count=1)
    return f"<figure id='findings-figure'>{svg}<figcaption>{_esc(caption)}.</figcaption></figure>"


def _index(scale: str, root: Path, name: str, sections: list[tuple[str, str]], anchored: set[str]) -> str:
    """index.html: the abstract with the findings, the scale card, the sections, what the scale can test, the
    claims ledger, the figures with their captions and the run times."""
    pdir = root / "paper" / name
    ledger = json.loads((pdir / "claims.json").read_text()) if (pdir / "claims.json").is_file() else {"claims": []}
    timings = run_times(pdir)
    figs = sorted((root / "figures" / name).glob("*.svg"))
    fig_html = "".join(f"<figure>{_inline_svg(f)}<figcaption>{figure_caption(f.read_text(), f.stem)}</figcaption>"
                       "</figure>" for f in figs)
    secs = "".join(f"<li><a href='{_esc(s)}.html'>{_esc(t)}</a></li>" for s, t in sections)
    tim = "".join(f"<tr><td>{_esc(t['notebook'])}</td><td>{_esc(t['executed'])}</td><td>{t['seconds']:.0f}</td></tr>"
                  for t in timings)
    total = sum(t["seconds"] for t in timings)
    times_html = ("<p>Each section's wall time as its executed notebook records it (papermill): the times of the "
                  "executions these pages show, whether by <code>make paper</code> or one section at a time by "
                  "<code>make nb</code>. Sections executed on different days ran under different loads.</p>"
                  "<table id='timings'><tr><th>notebook</th><th>executed (UTC)</th><th>seconds</th></tr>"
                  f"{tim}<tr><td><b>total</b></td><td></td><td><b>{total:.0f}</b></td></tr></table>" if timings else
                  "<p>No section has been executed at this scale yet.</p>")
    claims_md = pdir / "claims.md"
    return f"""<!doctype html><html><head><meta charset='utf-8'><title>tiedlm — executable paper ({_esc(scale)})</title>
<style>{STYLE}</style></head><body>
<h1>Tied-depth language models, executed</h1>
<p><i>The executable companion to paper A ("Tied-Depth Language Models: Depth Scaling, Free Early Exit, and a
Fundamental Trade-off") and paper B ("Beyond Depth Truncation", the Depth Control Protocol), at the
<b>{_esc(scale)}</b> scale.</i></p>
<h2>Abstract</h2><p>{_esc(ABSTRACT)}</p><div id='findings'>{findings_figure(ledger)}<p><b>Findings at this scale.</b>
{"</p><p>".join(_esc(p) for p in findings_abstract(ledger, read_trends(pdir)).split(chr(10) * 2))}</p></div>
<h2>The scale</h2><p>Paper A's configuration against this scale's, generated from the registry, with the reason
for every change:</p>{card_html(scale)}
<h2>Sections</h2><ol>{secs}</ol><p>Terms are defined in the <a href='glossary.html'>glossary</a>; each
page links a term's first use to it.</p>
<h2>What this scale can test</h2><p>Per verdict: for a decided one, what would change it (a new seed, where a
unit is seed-sensitive); for an undecided one, whether every unit it rests on could detect the claim's smallest
effect of interest at the seeds it has (its MDE at most its SESOI) and the seeds of the cheapest route that would
decide it; and what this scale cannot reach (<code>tiedlm_lib.paper.testability</code>, from the ledger;
docs/statistics.md amendment 18). <i>Across sizes</i>, where section 14 ran: whether the claim's effect keeps its
side of the threshold over the size ladder, on each axis measured at three or more sizes (a description beside the
verdict, never a change to it).</p>{rows_html(testability(ledger, read_trends(pdir)), "testability")}
<h2>Claims ledger</h2><p>{len(ledger.get('claims', []))} verdicts from the sections
{'(also as <a href="../claims.md">claims.md</a>)' if claims_md.is_file() else ''}.</p>
{claims_table(ledger, anchored)}
<h2>Figures</h2><div id='figures'>{fig_html}</div>
<h2>Run times</h2>{times_html}
</body></html>"""


