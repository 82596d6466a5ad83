"""What a notebook needs to publish: where its outputs go, charts saved as offline svg, tables as CSV/Markdown,
and the claims it judged. Notebooks stay thin: prose, parameters, calls, and these."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from tiedlm_lib.paper import claims as _claims
from tiedlm_lib.paper.judging import Judgement, spread_lines
from tiedlm_lib.paths import project_root, runs_dir
from tiedlm_lib.runs import check_seeds, get_scale
from tiedlm_lib.runs import extended_seeds as extended_seeds_of
from tiedlm_lib.store.atomic import atomic_write, atomic_write_text
from tiedlm_lib.store.tables import markdown_table  # noqa: F401  (re-exported for the notebooks)

MAX_PARAGRAPH_WORDS = 180  # plain prose (issue 33): a generated paragraph a reader takes in at once
MAX_SENTENCE_WORDS = 45
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(*\"'`])|(?<=[.!?])\s+(?=[0-9])")


def listed(xs) -> str:
    """Items as prose: "a", "a and b", "a, b and c" ("none" for none)."""
    xs = [str(x) for x in xs]
    return "none" if not xs else xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def sentences(paragraph: str) -> list[str]:
    """A paragraph's sentences: split after ``. ! ?`` followed by a space and a capital, a digit, a bracket,
    emphasis or a quote — so "p = 0.05" and "e.g. the" stay whole."""
    return [x for x in _SENTENCE_END.split(" ".join(paragraph.split())) if x.strip()]


def readability_problems(text: str, where: str = "text") -> list[str]:
    """Paragraphs (separated by a blank line) over ``MAX_PARAGRAPH_WORDS`` words and sentences over
    ``MAX_SENTENCE_WORDS``, each named with its opening words; [] when the text reads plainly."""
    out = []
    for para in (p for p in re.split(r"\n\s*\n", text) if p.strip()):
        words = len(para.split())
        if words > MAX_PARAGRAPH_WORDS:
            out.append(f"{where}: a paragraph of {words} words (at most {MAX_PARAGRAPH_WORDS}): "
                       f"{' '.join(para.split()[:8])} ...")
        for sent in sentences(para):
            n = len(sent.split())
            if n > MAX_SENTENCE_WORDS:
                out.append(f"{where}: a sentence of {n} words (at most {MAX_SENTENCE_WORDS}): "
                           f"{' '.join(sent.split()[:8])} ...")
    return out


def shown_path(path: str | Path) -> str:
    """A path as a page may print it: relative to the project (``paper/cpu/claims.json``), or to the runs folder
    (``$TIEDLM_RUNS/...``) where that lies elsewhere; never the executing machine's absolute path (issue 54). A path
    outside both shows its name alone."""
    p = Path(path).resolve()
    for base, label in ((project_root().resolve(), ""), (Path(runs_dir()).resolve(), "$TIEDLM_RUNS/")):
        try:
            rel = p.relative_to(base)
        except ValueError:
            continue
        return label + (rel.as_posix() if str(rel) != "." else ".")
    return p.name


class Paragraph:
    """A generated paragraph (``Report.prose``), shown once: ``prose`` displays it as it is made, so every paragraph
    of a cell reaches the page (a cell shows only its last value, and the earlier paragraphs of a cell were lost;
    issue 54); as a cell's value it shows nothing more. ``data``: its Markdown."""

    def __init__(self, data: str):
        self.data = data
        self.shown = False

    def _ipython_display_(self) -> None:
        if self.shown:
            return
        self.shown = True
        from IPython.display import Markdown, display

        display(Markdown(self.data))

    def __str__(self) -> str:
        return self.data

    def __repr__(self) -> str:
        return f"Paragraph({self.data!r})"


def _in_ipython() -> bool:
    try:
        from IPython.core.interactiveshell import InteractiveShell
    except ImportError:
        return False
    return InteractiveShell.initialized()


def frame_html(df) -> str | None:
    """A DataFrame as a page shows it: without the integer row numbers pandas prints as a first column when the rows
    have no index of their own (an unnamed integer index); None (pandas' own rendering) for a meaningful index."""
    import pandas as pd

    idx = df.index
    if isinstance(idx, pd.MultiIndex) or idx.name is not None or not pd.api.types.is_integer_dtype(idx.dtype):
        return None
    max_rows = pd.get_option("display.max_rows")
    if max_rows and len(df) > max_rows:  # as pandas shows a long frame: its first and last min_rows / 2 rows
        max_rows = pd.get_option("display.min_rows") or max_rows
    return df.to_html(notebook=True, index=False, max_rows=max_rows, max_cols=pd.get_option("display.max_columns"),
                      show_dimensions=pd.get_option("display.show_dimensions"))


def setup_tables() -> None:
    """Tables shown in the notebook without pandas' row numbers (``frame_html``): registered on the running IPython
    shell, so a section's every DataFrame (its cells' values and ``display``) reads as a paper's table."""
    if not _in_ipython():
        return
    import pandas as pd
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        # a registered printer that returns None leaves the output without HTML: pandas' own for a meaningful index
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame,
                                                                 lambda df: frame_html(df) or df._repr_html_())


class Folded:
    """Rows a reader may open: a table inside a ``<details>`` element whose summary names it, shown beneath the
    table that pools it (``Report.fold``); shown once, like ``Paragraph``."""

    def __init__(self, df, summary: str):
        self.df, self.summary = df, summary
        self.shown = False

    def html(self) -> str:
        import html as _html

        table = frame_html(self.df) or self.df.to_html(notebook=True)
        return (f"<details class='tiedlm-rows'><summary>{_html.escape(self.summary)} ({len(self.df)} rows)</summary>"
                f"{table}</details>")

    def _ipython_display_(self) -> None:
        if self.shown:
            return
        self.shown = True
        from IPython.display import display

        display({"text/html": self.html(), "text/plain": repr(self)}, raw=True)

    def __repr__(self) -> str:
        return f"{self.summary} ({len(self.df)} rows)"


def setup_altair() -> None:
    """Render charts as inline svg (no CDN, stable in nbval) through vl-convert."""
    import altair as alt

    alt.renderers.enable("svg")
    alt.data_transformers.disable_max_rows()


DASHES = ([1, 0], [6, 3], [2, 2], [8, 3, 2, 3])  # solid, dashed, dotted, dash-dot


def stroke_dash(field: str, domain, title: str | None = None):
    """A strokeDash encoding whose legend draws each entry as its own dashed stroke (the default legend of a line
    with points draws identical dots) in the given order, the first value solid."""
    import altair as alt

    domain = list(domain)
    if len(domain) > len(DASHES):
        raise ValueError(f"stroke_dash distinguishes at most {len(DASHES)} values, got {len(domain)}: {domain}")
    return alt.StrokeDash(f"{field}:N", title=field if title is None else title,
                          scale=alt.Scale(domain=domain, range=list(DASHES[:len(domain)])),
                          legend=alt.Legend(symbolType="stroke", symbolStrokeColor="gray", symbolStrokeWidth=2,
                                            symbolSize=300))


def seed_color(seeds, **kw):
    """A colour per training seed, with a legend only when there is more than one seed to tell apart."""
    import altair as alt

    return alt.Color("seed:N", legend=None if len(seeds) < 2 else alt.Legend(title="training seed"), **kw)


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else str(v)


def _aggregate(df, column: str, where: dict[str, Any], agg: str, what: str):
    """``agg`` of ``column`` over the rows of ``df`` matching ``where`` (values compared as text, so a table read
    back from CSV matches the frame it was saved from)."""
    if column not in df.columns:
        raise ValueError(f"{what} has no column {column!r}: expected one of {list(df.columns)}")
    rows = df
    for k, v in where.items():
        if k not in df.columns:
            raise ValueError(f"{what} has no column {k!r} to select on")
        rows = rows[rows[k].astype(str) == str(v)]
    if rows.empty:
        raise ValueError(f"{what}: no row matches {where}")
    col = rows[column]
    if agg == "only":
        if len(col) != 1:
            raise ValueError(f"{what}: {len(col)} rows match {where}, expected exactly one")
        v = col.iloc[0]
    elif agg in ("mean", "min", "max", "sum", "count"):
        v = getattr(col, agg)()
    else:
        raise ValueError(f"agg must be one of mean, min, max, sum, count, only; got {agg!r}")
    return v.item() if hasattr(v, "item") else v


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (a != a and b != b)
    return str(a) == str(b)


class Report:
    """Outputs of one notebook at one scale: ``figures/<scale>/<nb>-<name>.svg``, ``paper/<scale>/tables/``,
    and the claims ledger ``paper/<scale>/claims.json``."""

    def __init__(self, notebook: str, scale: str, figures_dir: str | Path | None = None,
                 paper_dir: str | Path | None = None, seeds: Any = None, extended_seeds: Any = None):
        # The notebook's parameters, checked before any work: a clear error for an unknown scale or a bad seed list.
        # seeds=None: the scale's seeds (smoke: one; cpu: five), which every verdict of the section rests on;
        # extended_seeds=None: the scale's further seeds for the units of registry.EXTENDED (cpu: 5-9; none when the
        # caller chose its own seeds; docs/statistics.md amendment 14), which only those units read.
        default = get_scale(scale).seeds
        self.seeds = check_seeds(list(default) if seeds is None else seeds)
        self.extended = extended_seeds_of(scale, seeds, extended_seeds)
        root = project_root()
        self.notebook, self.scale = notebook, scale
        self.figures = Path(figures_dir) if figures_dir else root / "figures" / scale
        self.paper = Path(paper_dir) if paper_dir else root / "paper" / scale
        setup_altair()
        setup_tables()
        # This run records the section's whole set of verdicts, but its old entries are removed only when it records
        # its first one: a section computes for minutes to hours before it judges, and a run that fails (or is cut
        # off) before then leaves the ledger as it was instead of without the section's claims.
        self._cleared = False
        self._facts: dict[str, dict[str, Any]] = {}
        self._prose: list[dict[str, Any]] = []

    def chart(self, chart, name: str):
        """Save ``chart`` as svg and return it (it renders as svg inline)."""
        import vl_convert as vlc

        svg = vlc.vegalite_to_svg(chart.to_json())
        atomic_write_text(self.figures / f"{self.notebook}-{name}.svg", svg)
        return chart

    def table(self, df, name: str):
        """Save ``df`` as CSV and Markdown and return it for display."""
        base = self._table_path(name)
        atomic_write(base.with_suffix(".csv"), lambda tmp: df.to_csv(tmp, index=False))
        atomic_write_text(base.with_suffix(".md"), markdown_table(df))
        return df

    def fold(self, df, summary: str) -> Folded:
        """Show ``df`` folded (a ``<details>`` element whose summary is ``summary``, with its row count): the per-seed
        rows beneath the pooled table the verdicts read, so that a reader meets the pooled table first. Call it after
        displaying the pooled table; it is displayed at once (in IPython), and the ``Folded`` returned adds nothing
        as a cell's value."""
        folded = Folded(df, summary)
        if _in_ipython():
            from IPython.display import display

            display(folded)
        return folded

    def _table_path(self, name: str) -> Path:
        return self.paper / "tables" / f"{self.notebook}-{name}"

    def fact(self, name: str, table: str, column: str, where: dict[str, Any] | None = None, agg: str = "mean"):
        """A number the prose may state, read from a table this section saved (its CSV, exactly what a reader
        sees): ``agg`` ("mean", "min", "max", "sum", "count" or "only" for a single row) of ``column`` over the
        rows matching ``where``. Recorded with its source, so every number in a paragraph is traceable."""
        value = _aggregate(self._read(table), column, where or {}, agg, f"{self.notebook}-{table}")
        self._facts[name] = {"table": table, "column": column, "where": where or {}, "agg": agg, "value": value}
        return value

    def _read(self, table: str):
        import pandas as pd

        path = self._table_path(table).with_suffix(".csv")
        if not path.is_file():
            raise ValueError(f"fact from table {table!r}: save it with rep.table(df, {table!r}) first ({path})")
        return pd.read_csv(path)

    def prose(self, heading: str, template: str, **words: str):
        """A paragraph whose numbers are facts: ``template`` names them as {fact} or {fact:.2f}; ``words`` fill
        derived words ("larger", "reproduced"), which the notebook computes from the same facts. Before showing it,
        every fact is recomputed from its table on disk and must equal the value used. Saved with its facts to
        ``tables/<notebook>-prose.json`` and displayed at once (in IPython), so that every paragraph of a cell is on
        the page; returns the ``Paragraph`` (its ``data`` is the Markdown), which as a cell's value adds nothing."""
        import string

        names = {f for _, f, _, _ in string.Formatter().parse(template) if f}
        unknown = names - set(self._facts) - set(words)
        if unknown:
            raise ValueError(f"prose {heading!r} names {sorted(unknown)}, which are neither facts (rep.fact) nor words")
        for n in names & set(self._facts):
            f = self._facts[n]
            again = _aggregate(self._read(f["table"]), f["column"], f["where"], f["agg"], f["table"])
            if not _same(again, f["value"]):
                raise ValueError(f"fact {n!r} is {f['value']!r} but its table now gives {again!r}")
        text = template.format(**{n: f["value"] for n, f in self._facts.items()}, **words)
        problems = readability_problems(text, f"prose {heading!r}")
        if problems:  # plain prose: a long paragraph becomes short ones (a blank line, or another heading)
            raise ValueError("; ".join(problems))
        self._prose.append({"heading": heading, "template": template, "text": text, "words": words,
                            "facts": {n: self._facts[n] for n in sorted(names & set(self._facts))}})
        atomic_write_text(self._table_path("prose").with_suffix(".json"),
                          json.dumps(self._prose, indent=1, default=_plain))
        paragraph = Paragraph(f"**{heading}.** {text}")
        if _in_ipython():
            from IPython.display import display

            display(paragraph)
        return paragraph

    def claim(self, claim_id: str, verdict: str, criterion: str, evidence: dict[str, Any],
              protocol: str = "paper", seeds: Any = None, basis: str = "") -> dict[str, Any]:
        """Record a verdict; it rests on the notebook's training seeds unless ``seeds`` says otherwise (``[]``: a
        verdict that trained nothing). The first claim a run records removes every entry its section had before."""
        if not self._cleared:
            _claims.clear_notebook(self.paper, self.notebook)
            self._cleared = True
        e = _claims.record(self.paper, self.scale, self.notebook, claim_id, verdict, criterion, evidence, protocol,
                           self.seeds if seeds is None else list(seeds), basis)
        print(f"{claim_id} [{protocol}] {verdict}: {criterion}" + (f" — basis: {basis}" if basis else ""))
        return e

    def judge(self, j: Judgement, seeds: Any = None) -> dict[str, Any]:
        """Record a ``verdicts.Judgement`` (the one call a notebook makes per claim), then print each per-seed CI
        beside the between-seed spread it rests on. The seeds recorded are those its evidence names (default), which
        may be fewer than the notebook trained (the basis then says which of its seeds are missing) or include its
        extended seeds (the units of registry.EXTENDED)."""
        basis = j.basis
        if seeds is None:
            named = _claims.evidence_seeds(j.evidence) or list(j.seeds or [])
            seeds = named or self.seeds
            lacking = sorted(set(self.seeds) - set(named)) if named else []
            if lacking:
                basis += f"; rests on seeds {named} of {self.seeds} (no evidence from {lacking})"
            outside = sorted(set(named) - set(self.seeds) - set(self.extended))
            if outside:
                raise ValueError(f"{j.claim}'s evidence names seeds {outside}, which this notebook did not train "
                                 f"(its seeds: {self.seeds}" + (f", extended: {self.extended})" if self.extended
                                                                 else ")"))
        e = self.claim(j.claim, j.verdict, j.criterion, j.evidence, j.protocol, seeds, basis)
        for line in spread_lines(j.evidence):
            print(line)
        return e
