"""Pieces of the HTML paper's index that need no browser: a figure's caption says what it shows (from the chart's
own axis titles, entities decoded once), linked to its section; the run times are those of the executions shown."""

import json

from tiedlm_lib.paper import figure_caption, run_times


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
