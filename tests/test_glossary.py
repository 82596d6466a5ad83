"""The glossary: docs/glossary.md is generated from tiedlm_lib.paper.glossary; every term's pattern finds the term; a
page links each term's first use in prose only (never in code, links, headings or tables), once per page."""

from pathlib import Path

from tiedlm_lib.paper import glossary

ROOT = Path(__file__).resolve().parents[1]


def test_the_glossary_page_is_generated_from_the_terms():
    assert (ROOT / "docs" / "glossary.md").read_text() == glossary.markdown()
    slugs = [t.slug for t in glossary.TERMS]
    assert len(slugs) == len(set(slugs))
    page = glossary.page_html("")
    assert all(f'id="{s}"' in page for s in slugs)  # the quoting the browser test's anchor check reads
    assert "<code>S A*16 S</code>" in page


def test_every_pattern_finds_its_term():
    import re

    for t in glossary.TERMS:
        assert re.search(t.pattern, t.term) or re.search(t.pattern, t.definition), t.slug


def test_first_uses_in_prose_are_linked_once_and_nothing_else_is():
    page = ("<h2>The coda</h2><p>Code: <code>coda</code> and <a href='x'>coda</a>.</p>"
            "<table><tr><td>the coda</td></tr></table><p>The prelude feeds the coda; the coda again.</p>"
            "<ul><li>a SESOI, then a SESOI</li></ul><pre>prelude</pre><svg><text>MDE</text></svg><p>MDE</p>")
    out = glossary.link_first_uses(page)
    link = "<a class='gloss' href='glossary.html#{}'>{}</a>"
    assert out.count("glossary.html#coda") == 1 and link.format("coda", "coda") + "; the coda again" in out
    assert out.count("glossary.html#prelude") == 1 and "<pre>prelude</pre>" in out
    assert "<h2>The coda</h2>" in out and "<td>the coda</td>" in out and "<code>coda</code>" in out
    assert link.format("sesoi", "SESOI") + ", then a SESOI" in out
    assert "<text>MDE</text>" in out and "<p>" + link.format("mde", "MDE") + "</p>" in out
    assert glossary.link_first_uses("<p>loop/tuned and the loop</p>").count("#loop'") == 1  # not the probe's name
