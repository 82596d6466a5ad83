"""The findings in words: a sentence per finding whose unit the ledger holds, with that unit's pooled numbers and
the entry's verdict; none for a missing unit; every generated text reads plainly (no paragraph over 180 words, no
sentence over 45), including the committed abstract and README blocks; and the readability check can fail."""

import json
from pathlib import Path

import pytest

from tiedlm_lib.paper import findings
from tiedlm_lib.paper.claims import read_ledger
from tiedlm_lib.paper.report import readability_problems, sentences

ROOT = Path(__file__).resolve().parents[1]


def _ledger(point=0.42, lo=0.3, hi=0.5, seeds=5):
    unit = {"s0": [point, lo, hi], "pooled": {"point": point, "interval": [lo, hi], "seeds": seeds, "sesoi": 0.05,
                                              "threshold": 0.0}}

    def entry(cid, protocol, verdict, key):
        return {"id": cid, "protocol": protocol, "verdict": verdict, "notebook": "nb", "evidence": {key: unit}}

    return {"claims": [entry("A1", "paper", "inconclusive", "depth scaling: v3"),
                       entry("A1", "corrected", "reproduced", "depth scaling: v3"),
                       entry("Q4", "corrected", "inconclusive", "tied - vanilla"),
                       entry("Q4", "corrected", "no", "tied - compute-matched vanilla")]}


def test_a_sentence_per_finding_the_ledger_holds_with_its_numbers_and_verdict():
    got = findings.finding_sentences(_ledger())
    assert len(got) == 2
    assert got[0].endswith("+0.42 [+0.30, +0.50] nats, pooled over 5 seeds (interval above 0; A1 reproduced).")
    assert got[1].endswith("+0.420 [+0.300, +0.500] nats (interval above 0; Q4 no).")  # the entry with the unit
    assert "pooled over 1 seed (" in findings.finding_sentences(_ledger(seeds=1))[0]
    inside = findings.finding_sentences(_ledger(point=0.01, lo=-0.02, hi=0.03))[0]
    assert "(interval inside ±0.05; A1 reproduced)" in inside  # where the interval lies, beside the verdict
    assert "(interval across 0 or its margin;" in findings.finding_sentences(_ledger(point=0.1, lo=-0.1, hi=0.3))[0]
    assert findings.finding_sentences({"claims": []}) == []
    # A1 opens the paragraph on depth and exit, Q4 the one on training and architecture
    assert findings.findings_text(_ledger()) == got[0] + "\n\n" + got[1]
    text = findings.abstract(_ledger())
    assert text.startswith(got[0] + "\n\n" + got[1] + "\n\nUnder the paper's protocol")  # findings, then counts
    block = findings.readme_block(_ledger())
    assert block.startswith(got[0] + "\n\n" + got[1] + "\n\n| id | claim |")


def test_a_finding_adds_its_scalar_sentence_only_where_the_evidence_has_it():
    unit = {"pooled": {"point": 0.12, "interval": [0.08, 0.16], "seeds": 10, "sesoi": 0.05, "threshold": 0.0}}
    share = {"exit penalty / depth gap (mean)": 0.2, "reported exit penalty / depth gap": 0.73}
    corrected = {"id": "A4", "protocol": "corrected", "verdict": "reproduced", "evidence": {"small/tau0.4": unit,
                                                                                            **share}}
    paper = {"id": "A4", "protocol": "paper", "verdict": "reproduced",
             "evidence": {"small/tau0.4": unit, "exit penalty / depth gap (mean)": 0.7}}
    [both] = findings.finding_sentences({"claims": [corrected, paper]})
    assert "+0.120 [+0.080, +0.160] nats, pooled over 10 seeds (interval above 0; A4 reproduced)." in both
    assert both.endswith("20% of the depth gap with the corrected fallback and 70% with the paper's (the paper "
                         "reports 73%).")
    [alone] = findings.finding_sentences({"claims": [corrected]})  # no paper-protocol entry: no share sentence
    assert alone.endswith("(interval above 0; A4 reproduced).")


def test_every_generated_text_reads_plainly():
    scalars = {"exit penalty / depth gap (mean)": -10.123, "reported exit penalty / depth gap": -10.123}
    long = {"claims": [{"id": f.claim, "protocol": p, "verdict": "not reproduced",
                        "evidence": {f.unit: {"pooled": {"point": -10.123, "interval": [-10.5, -9.75], "seeds": 12,
                                                         "sesoi": 0.05, "threshold": 0.0}},
                                     "other unit": {"pooled": {"point": 1.0, "interval": [0.5, 1.5]}}, **scalars}}
                       for f in findings.FINDINGS for p in dict.fromkeys([f.protocol, f.also or f.protocol])]}
    written = findings.finding_sentences(long)
    assert len(written) == len(findings.FINDINGS) and any("of the depth gap with" in t for t in written)
    assert readability_problems(findings.abstract(long)) == []
    assert readability_problems(findings.abstract(read_ledger(ROOT / "paper" / "cpu"))) == []
    readme = (ROOT / "README.md").read_text()
    block = readme.split(findings.FINDINGS_BEGIN, 1)[1].split(findings.FINDINGS_END, 1)[0]
    prose = "\n\n".join(p for p in block.split("\n\n") if not p.lstrip().startswith("|"))
    assert readability_problems(prose, "README findings") == []


COMMITTED_PROSE = [pytest.param(p, id=f"{p.parts[-3]}/{p.name}")
                   for p in sorted((ROOT / "paper").glob("*/tables/*-prose.json"))]


@pytest.mark.parametrize("prose", COMMITTED_PROSE)
def test_every_committed_section_paragraph_reads_plainly(prose):
    """The Report refuses long prose as it writes it; this checks what is committed, so that a section executed
    before the limits (or under other code) cannot ship a 673-word paragraph."""
    entries = json.loads(prose.read_text())
    assert entries, f"{prose} holds no prose"
    assert [x for e in entries for x in readability_problems(e["text"], e["heading"])] == []


@pytest.mark.parametrize("text, problem", [
    (" ".join(["word"] * 46) + ".", "a sentence of 46 words"),
    (" ".join(["word"] * 45) + ".", None),
    (". ".join(" ".join(["W"] + ["w"] * 39) for _ in range(5)) + ".", "a paragraph of 200 words"),
])
def test_the_readability_check_can_fail(text, problem):
    got = readability_problems(text, "x")
    assert (got == []) if problem is None else (len(got) == 1 and problem in got[0])


def test_sentences_split_where_a_reader_stops():
    assert sentences("NLL is 2.91 at p = 0.05. It falls (e.g. at k = 4). Then 16 of 16 agree.") == [
        "NLL is 2.91 at p = 0.05.", "It falls (e.g. at k = 4).", "Then 16 of 16 agree."]


def test_every_claim_with_only_a_corrected_row_says_why_there_is_no_paper_row():
    from tiedlm_lib.paper.claims import CLAIMS, NO_PAPER_ROW, no_paper_row

    rows = no_paper_row(read_ledger(ROOT / "paper" / "cpu"))  # the committed ledger: every such claim has a reason
    assert [r["id"] for r in rows][:2] == ["A5", "A6"] and all(r["why no paper-protocol row"] for r in rows)

    def ledger(*entries):
        return {"claims": [{"id": c, "protocol": p} for c, p in entries]}

    assert no_paper_row(ledger(("A6", "corrected"), ("Q2", "corrected"), ("A1", "paper"), ("A1", "corrected"))
                        ) == [{"id": "A6", "claim": CLAIMS["A6"], "why no paper-protocol row": NO_PAPER_ROW["A6"]}]
    with pytest.raises(ValueError, match=r"no reason for \['A1'\]"):
        no_paper_row(ledger(("A1", "corrected")))
    with pytest.raises(ValueError, match=r"a paper row exists for \['A6'\]"):
        no_paper_row(ledger(("A6", "paper"), ("A6", "corrected")))


def test_the_findings_table_gives_the_seeds_of_every_pooled_unit_as_a_range():
    """Q5's phantom-last unit rests on 3 seeds, its other on 5: the README's seeds column says 3–5, not 5."""
    from tiedlm_lib.paper.claims import findings_markdown

    def entry(cid, units, seeds):
        return {"id": cid, "protocol": "corrected", "verdict": "yes", "notebook": "02_backprop", "seeds": seeds,
                "evidence": {u: {"pooled": {"seeds": n, "interval": [0, 1]}} for u, n in units.items()}}

    ledger = {"claims": [entry("Q5", {"phantom-last - phantom": 3, "phantom - full": 5}, [0, 1, 2, 3, 4]),
                         entry("Q8", {"v3": 5}, [0, 1, 2, 3, 4]), entry("Q9", {}, [0, 1])]}
    rows = {r.split(" | ")[0].strip("| "): r.split(" | ")[5] for r in findings_markdown(ledger).splitlines()[2:]}
    assert rows == {"Q5": "3–5", "Q8": "5", "Q9": "2"}


def test_the_findings_figure_puts_every_finding_on_one_scale_of_sesois():
    """The index opens with each finding's interval as its distance from the threshold in SESOIs, coloured by the
    unit's own verdict (Q4's undecided compute-matched gap is not coloured by Q4's 'yes')."""
    from tiedlm_lib.paper.claims import read_ledger
    from tiedlm_lib.paper.html import findings_figure

    ledger = read_ledger(ROOT / "paper" / "cpu")
    rows = {r["claim"]: r for r in findings.finding_rows(ledger)}
    b1 = rows["B1"]
    assert b1["in SESOIs"] == pytest.approx((b1["point"] - 0.95) / 0.05)
    assert b1["lo in SESOIs"] < b1["in SESOIs"] < b1["hi in SESOIs"]
    assert rows["Q4"]["verdict"] == "inconclusive" and rows["Q4"]["claim verdict"] == "yes"
    html = findings_figure(ledger)
    assert html.startswith("<figure id='findings-figure'><svg role='img' aria-label='Each finding")
    assert findings_figure({"claims": []}) == ""


def test_amendment_18_sets_each_entry_beside_its_judgement_before_it():
    from tiedlm_lib.paper.claims import amendment_changes

    def entry(cid, verdict, recorded, sensitive=False):
        return {"id": cid, "protocol": "corrected", "notebook": "08_sft_generation", "verdict": verdict,
                "recorded": recorded, "evidence": {"u": {"pooled": {"seeds": 3, "seed-sensitive": sensitive}}}}

    before = {"claims": [entry("A20", "reproduced", "t0", True), entry("A12", "reproduced", "t0")]}
    now = {"claims": [entry("A20", "inconclusive", "t1"), entry("A12", "reproduced", "t0"), entry("Q9", "yes", "t1")]}
    rows = {r["id"]: r for r in amendment_changes(before, now)}
    assert rows["A20"]["changed"] and rows["A20"]["re-judged since"] and "at best inconclusive" in rows["A20"][
        "what of amendment 18 touches it"] and rows["A20"]["seed-sensitive units (before / now)"] == "1 / 0"
    assert not rows["A12"]["changed"] and not rows["A12"]["re-judged since"]
    assert rows["Q9"]["before amendment 18"] == "—" and rows["Q9"]["re-judged since"]


def test_the_abstract_says_what_holds_across_sizes_where_section_14_ran():
    trends = [{"claim": "A1", "effect": "A1 depth gap", "axis": "width", "read": "True", "points": "5",
               "direction": "holds at every size"},
              {"claim": "B1", "effect": "B1 application-count share", "axis": "width", "read": "True", "points": "5",
               "direction": "changes direction between sizes"},
              {"claim": "A6", "effect": "A6 exit cost", "axis": "depth", "read": "True", "points": "2",
               "direction": "holds at every size"}]
    text = findings.across_sizes_text(trends)
    assert text.startswith("Across the width ladder (block parameters), 5 sizes: direction holds for A1 depth gap; "
                           "changes direction for B1 application-count share")
    assert "depth ladder" not in text  # two sizes are not a trend
    assert text in findings.abstract(_ledger(), trends) and text in findings.readme_block(_ledger(), trends)
    assert findings.across_sizes_text(None) == "" and findings.abstract(_ledger()) == findings.abstract(_ledger(), [])
