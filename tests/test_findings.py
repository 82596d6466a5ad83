"""The findings in words: a sentence per finding whose unit the ledger holds, with that unit's pooled numbers and
the entry's verdict; none for a missing unit; every generated text reads plainly (no paragraph over 180 words, no
sentence over 45), including the committed abstract and README blocks; and the readability check can fail."""

from pathlib import Path

import pytest

from tiedlm_lib import findings
from tiedlm_lib.claims import read_ledger
from tiedlm_lib.report import readability_problems, sentences

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
    text = findings.abstract(_ledger())
    assert text.startswith(" ".join(got) + "\n\nUnder the paper's protocol")  # findings, then the counts
    block = findings.readme_block(_ledger())
    assert block.startswith(" ".join(got) + "\n\n| id | claim |")


def test_every_generated_text_reads_plainly():
    long = {"claims": [{"id": f.claim, "protocol": f.protocol, "verdict": "not reproduced",
                        "evidence": {f.unit: {"pooled": {"point": -10.123, "interval": [-10.5, -9.75], "seeds": 12,
                                                         "sesoi": 0.05, "threshold": 0.0}},
                                     "other unit": {"pooled": {"point": 1.0, "interval": [0.5, 1.5]}}}}
                       for f in findings.FINDINGS]}
    assert len(findings.finding_sentences(long)) == len(findings.FINDINGS)
    assert readability_problems(findings.abstract(long)) == []
    assert readability_problems(findings.abstract(read_ledger(ROOT / "paper" / "cpu"))) == []
    readme = (ROOT / "README.md").read_text()
    block = readme.split(findings.FINDINGS_BEGIN, 1)[1].split(findings.FINDINGS_END, 1)[0]
    prose = "\n\n".join(p for p in block.split("\n\n") if not p.lstrip().startswith("|"))
    assert readability_problems(prose, "README findings") == []


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
