"""Pieces of the HTML paper's index that need no browser: a figure's caption says what it shows (from the chart's
own axis titles, entities decoded once), linked to its section."""

from tiedlm_lib.paper import figure_caption


def test_a_caption_says_what_the_figure_shows_and_where_it_comes_from():
    svg = ("<svg><g aria-label=\"X-axis titled 'loop applications k' for a linear scale\"></g>"
           "<g aria-label=\"Y-axis titled 'NLL &lt; ln V' for a linear scale\"></g>"
           "<g aria-label=\"X-axis titled 'loop applications k' for a linear scale\"></g></svg>")
    cap = figure_caption(svg, "04_tradeoff-single_vs_multi")
    assert cap == ("<a href='04_tradeoff.html' title='04_tradeoff-single_vs_multi'>§04</a> · NLL &lt; ln V against "
                   "loop applications k")
    assert figure_caption("<svg></svg>", "01_a-b").endswith("· 01_a-b")  # no axes: the file's name
