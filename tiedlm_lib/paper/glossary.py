"""The glossary of the executable paper: one definition per term, and the pattern that finds its uses.

One source for three places: ``docs/glossary.md`` (generated, ``markdown``; a test keeps it current), the HTML
paper's ``glossary.html`` and, on every other page, a link from the first use of each term to its entry
(``link_first_uses``, applied to prose paragraphs and list items only: never inside code, headings or links).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    slug: str  # the entry's anchor
    term: str
    pattern: str  # a regular expression for the term's uses in prose
    definition: str


TERMS: tuple[Term, ...] = (
    Term("prelude", "prelude", r"\bpreludes?\b",
         "The standard (untied) layers before the first loop. With the coda they always run, whatever the schedule."),
    Term("loop", "loop, tied block", r"\btied block\b|\bloops?\b(?!/)",
         "One block whose weights are shared across its applications: the state is updated k times as z ← z + "
         "α·f(z). A layout such as `S A*16 S` names its loops by letter (here A, applied 16 times)."),
    Term("coda", "coda", r"\bcodas?\b",
         "The standard layers after the last loop, before the final norm and the head."),
    Term("alpha", "α (alpha)", r"α",
         "A loop's learned step size in z ← z + α·f(z); one scalar per loop."),
    Term("k", "k, K and N", r"\b[kKN] = (?:\d+|K|N)\b",
         "Two counts share the letter. A model's depth k (paper A) runs every loop k times; K is the depth it was "
         "trained at. A schedule's k (paper B) counts core applications: every loop iteration and every bridge "
         "layer between loops. N is the core's length in the trained model. In a single loop both agree and N = K."),
    Term("schedules", "schedules: prefix, repeat, suffix, frozen", r"\b(?:prefix|repeat|suffix|frozen)(?=\()",
         "Paper B's ways to run a model with less distinct computation. prefix(k): the first k core applications. "
         "repeat(k): the first k, then the k-th re-applied until N have run. suffix(k): the last k. frozen(k): the "
         "first k, then the k-th update re-added without recomputing the block (this project's control)."),
    Term("probes", "probe placements and forms", r"\b(?:head|loop)/(?:temperature|diagonal|full|tuned)\b",
         "A readout probe is a small map fitted on calibration documents so that a truncated state reads out "
         "better. Its placement is where it acts: `head` (the head's input) or `loop` (the loop's output, before "
         "the coda). Its form is what it can express: `temperature` (one scalar), `diagonal` (a per-feature scale "
         "and shift, paper B's affine map), `full` (a full-rank affine map) or `tuned` (the tuned lens: the full form "
         "fitted to the full-depth model's distribution instead of the targets). A probe is named placement/form, as "
         "head/diagonal."),
    Term("tuned-lens", "tuned lens", r"\btuned lens\b",
         "A full-rank affine probe trained to match the full-depth model's distribution (a KL objective) rather "
         "than the targets; named after Belrose et al. (2023)."),
    Term("share", "calibration share", r"\b(?:calibration|readout) share\b",
         "The fraction of a truncation gap, NLL(truncated) − NLL(full), that a probe removes; a lower bound on what "
         "is correctable at the readout."),
    Term("refits", "refits", r"\brefits?\b",
         "Probes fitted again on resampled calibration documents, so that a share's interval carries the probe's "
         "own fitting noise. Their mean shift from the point is removed, so the interval is centred on the point "
         "(an uncentred interval can exclude it)."),
    Term("pooled", "pooled interval", r"\bpooled (?:95% )?intervals?\b",
         "The interval of an effect pooled over training seeds: a random-effects mean with the "
         "Hartung–Knapp–Sidik–Jonkman interval, widened by the document error every seed shares. The training "
         "seed is the unit of inference (docs/statistics.md)."),
    Term("sesoi", "SESOI", r"\bSESOI\b",
         "The smallest effect size of interest: the pre-registered effect below which a difference counts as "
         "negligible. A claim that something costs nothing is an equivalence test against it."),
    Term("tost", "TOST", r"\bTOST\b",
         "Two one-sided tests: an equivalence test. The effect is negligible when its interval lies wholly inside "
         "± the SESOI."),
    Term("mde", "MDE", r"\bMDE\b",
         "The minimum detectable effect: the smallest distance from the threshold that the seeds a unit has would "
         "detect with 80% power, computed with an upper bound on the between-seed SD."),
    Term("bonferroni", "Bonferroni level", r"\bBonferroni\b",
         "A claim over several units (sizes, depths, probes) is reproduced only if every unit is, each at the plain "
         "95% level (an intersection-union test needs no correction). It is not reproduced if some unit contradicts "
         "it at the Bonferroni level 1 − 0.05/m for m units, its interval recomputed at that level."),
    Term("prediction", "prediction interval", r"\bprediction intervals?\b",
         "Where a new seed's estimate would fall with 95% probability: wider than the pooled interval, it shows "
         "whether a claim is seed-sensitive."),
    Term("nll", "masked and with-pad NLL", r"\bwith-pad\b|\breal-token\b",
         "Masked (real-token) NLL averages over real targets only; with-pad NLL averages over every position, pads "
         "included, as the original code did. The pads' share can dominate the latter."),
    Term("phantom", "phantom gradient", r"\bphantom(?: gradient)?\b",
         "An approximate gradient through the loop: no gradient through the iterations, then one step with one. "
         "The paper's form takes that step at the loop's input; `phantom-last` at its last state."),
    Term("multi-depth", "single- and multi-depth supervision", r"\bmulti-depth\b|\bsingle-depth\b",
         "Single-depth training supervises the output at depth K only; multi-depth supervision adds the loss at "
         "several depths (1, 2, 4, ... K), which makes early exit cheap."),
    Term("protocols", "paper, corrected and extension protocols", r"\b(?:paper-faithful|corrected) protocol\b",
         "Each claim is judged under the paper's protocol (its code's choices, quirks included) and, where a quirk "
         "touches it, under the corrected protocol. An extension verdict rests on a control this project added."),
    Term("versions", "v3-v14 and the c-controls", r"\bv(?:3|4|5|6|7|9|10|12|13|14)(?:c|u)?\b",
         "Paper A's model versions: v3/v4 small single-/multi-depth, v5/v6 large, v7 long phantom run, v9 "
         "iso-parameter vanilla, v10 full-backprop counterpart of v7, v12-v14 two to four loops (at the small "
         "scales v9-v14 train at the small size for 0.8x the short run; the scale card says so). This project "
         "adds v9c (a compute-matched vanilla model), v14c (v14 with its closing layer restored) and v14u (v14 with an "
         "under-iterated last loop)."),
    Term("ltt", "Learn-then-Test", r"\bLearn-then-Test\b",
         "A way to choose an exit threshold with a guarantee: thresholds are tested in a fixed order on calibration "
         "documents, so that the disagreement rate with full depth stays below ε with probability 1 − δ."),
)


def markdown() -> str:
    """docs/glossary.md: every term with its definition."""
    out = ["# Glossary", "", "The terms of the executable paper, each defined once. The HTML paper links each term's "
           "first use on a page to its entry here (`tiedlm_lib.paper.glossary`, which generates this page).", ""]
    for t in TERMS:
        out += [f"## {t.term}", "", t.definition, ""]
    return "\n".join(out)


def page_html(style: str) -> str:
    """glossary.html of the HTML paper."""
    entries = "".join(f'<dt id="{t.slug}"><b>{html.escape(t.term)}</b></dt><dd>{_inline(t.definition)}</dd>'
                      for t in TERMS)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>tiedlm — glossary</title><style>{style}"
            "dd{margin:0 0 .8em 1.5em}</style></head><body><nav class='tiedlm-nav'><a href='index.html'>index</a></nav>"
            "<h1>Glossary</h1>"
            f"<dl>{entries}</dl></body></html>")


def _inline(text: str) -> str:
    """A definition as HTML: escaped, with `code` spans."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


_TAG = re.compile(r"(<[^>]+>)")
_SKIP = {"a", "code", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "script", "style", "svg", "summary", "title"}
_PROSE = {"p", "li"}


def link_first_uses(page: str, href: str = "glossary.html") -> str:
    """The page with the first use of each term in a prose paragraph or list item linked to its entry; text inside
    links, code, headings, figures and scripts is never touched."""
    patterns = [(t, re.compile(t.pattern)) for t in TERMS]
    done: set[str] = set()
    stack: list[str] = []
    out = []
    for part in _TAG.split(page):
        if part.startswith("<"):
            m = re.match(r"<(/?)([a-zA-Z0-9]+)", part)
            if m and not part.endswith("/>"):
                name = m.group(2).lower()
                if m.group(1):
                    if name in stack:
                        while stack and stack.pop() != name:
                            pass
                elif name in _SKIP | _PROSE:
                    stack.append(name)
            out.append(part)
            continue
        if part and any(s in _PROSE for s in stack) and not any(s in _SKIP for s in stack):
            part = _link_text(part, patterns, done, href)
        out.append(part)
    return "".join(out)


def _link_text(text: str, patterns, done: set[str], href: str) -> str:
    """Link the first match of every not yet linked term in one text node (matches never overlap)."""
    hits = []
    for t, rx in patterns:
        if t.slug in done:
            continue
        m = rx.search(text)
        if m and not any(a < m.end() and m.start() < b for a, b, _ in hits):
            hits.append((m.start(), m.end(), t.slug))
            done.add(t.slug)
    for a, b, slug in sorted(hits, reverse=True):
        text = f"{text[:a]}<a class='gloss' href='{href}#{slug}'>{text[a:b]}</a>{text[b:]}"
    return text
