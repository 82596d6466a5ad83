"""What a notebook needs to publish: where its outputs go, charts saved as offline svg, tables as CSV/Markdown,
and the claims it judged. Notebooks stay thin: prose, parameters, calls, and these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import claims as _claims
from .atomic import atomic_write, atomic_write_text
from .experiments import check_seeds, get_scale
from .paths import project_root
from .verdicts import Judgement, spread_lines


def markdown_table(df) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4f}"
        return str(v)

    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def setup_altair() -> None:
    """Render charts as inline svg (no CDN, stable in nbval) through vl-convert."""
    import altair as alt

    alt.renderers.enable("svg")
    alt.data_transformers.disable_max_rows()


class Report:
    """Outputs of one notebook at one scale: ``figures/<scale>/<nb>-<name>.svg``, ``paper/<scale>/tables/``,
    and the claims ledger ``paper/<scale>/claims.json``."""

    def __init__(self, notebook: str, scale: str, figures_dir: str | Path | None = None,
                 paper_dir: str | Path | None = None, seeds: Any = None):
        # The notebook's parameters, checked before any work: a clear error for an unknown scale or a bad seed list.
        # seeds=None: the scale's seeds (smoke: one; cpu: three), which every verdict of the section rests on.
        default = get_scale(scale).seeds
        self.seeds = check_seeds(list(default) if seeds is None else seeds)
        root = project_root()
        self.notebook, self.scale = notebook, scale
        self.figures = Path(figures_dir) if figures_dir else root / "figures" / scale
        self.paper = Path(paper_dir) if paper_dir else root / "paper" / scale
        setup_altair()
        _claims.clear_notebook(self.paper, notebook)  # this run records the section's whole set of verdicts

    def chart(self, chart, name: str):
        """Save ``chart`` as svg and return it (it renders as svg inline)."""
        import vl_convert as vlc

        svg = vlc.vegalite_to_svg(chart.to_json())
        atomic_write_text(self.figures / f"{self.notebook}-{name}.svg", svg)
        return chart

    def table(self, df, name: str):
        """Save ``df`` as CSV and Markdown and return it for display."""
        base = self.paper / "tables" / f"{self.notebook}-{name}"
        atomic_write(base.with_suffix(".csv"), lambda tmp: df.to_csv(tmp, index=False))
        atomic_write_text(base.with_suffix(".md"), markdown_table(df))
        return df

    def claim(self, claim_id: str, verdict: str, criterion: str, evidence: dict[str, Any],
              protocol: str = "paper", seeds: Any = None, basis: str = "") -> dict[str, Any]:
        """Record a verdict; it rests on the notebook's training seeds unless ``seeds`` says otherwise (``[]``: a
        verdict that trained nothing)."""
        e = _claims.record(self.paper, self.scale, self.notebook, claim_id, verdict, criterion, evidence, protocol,
                           self.seeds if seeds is None else list(seeds), basis)
        print(f"{claim_id} [{protocol}] {verdict}: {criterion}" + (f" — basis: {basis}" if basis else ""))
        return e

    def judge(self, j: Judgement, seeds: Any = None) -> dict[str, Any]:
        """Record a ``verdicts.Judgement`` (the one call a notebook makes per claim), then print each per-seed CI
        beside the between-seed spread it rests on."""
        e = self.claim(j.claim, j.verdict, j.criterion, j.evidence, j.protocol, seeds, j.basis)
        for line in spread_lines(j.evidence):
            print(line)
        return e
