"""The claims as data (issue 56, item 2): every claim of the book is backed by the pre-registration, its criterion is
rendered from the CSV's rules, and the one engine judges the pooled kinds."""

import pytest

from tiedlm_lib.paper import judging as J
from tiedlm_lib.paper import verdicts as V
from tiedlm_lib.paper.claimbook import CLAIMS, claim
from tiedlm_lib.stats import inference as inf
from tiedlm_lib.stats.bootstrap import Estimate as E


def same(e, n=3):
    return dict.fromkeys(range(n), e)


def test_every_judged_claim_of_the_preregistration_is_in_the_book_and_the_reverse():
    rows = [r for r in inf.read_spec() if r["protocol"] != "ladder"]  # the ladder's trends are described, not judged
    judged = {r["claim"] for r in rows if r["rule"] != "not testable"}
    book = {c.id for c in CLAIMS.values()}
    assert book == judged, (sorted(judged - book), sorted(book - judged))
    # every deciding part the book names is a row of the CSV (checked when the book is built) and every kind is used
    assert {c.kind for c in CLAIMS.values()} == set(J.KINDS)
    assert {V.judgement_names()[i].upper() for i in range(len(V.judgement_names()))} == book


def test_a_part_the_csv_does_not_have_or_an_unknown_kind_is_refused_when_the_claim_is_written():
    with pytest.raises(KeyError, match="A1 has no pre-registered part 'depth scalin'"):
        J.Claim("A1", "x", ("depth scalin",))
    with pytest.raises(ValueError, match="kind 'majority' is not one of"):
        J.Claim("A1", "x", ("depth scaling",), kind="majority")


def test_the_criterion_is_rendered_from_the_rules_and_the_context():
    c = J.Claim("B1", "{who}: [[words:both factors present|the share]]; below [[percent:neither is the whole]]; "
                "SESOI [[sesoi:both factors present]]; [[negligible:neither is the whole|has a nil route|none]]"
                "{tail}, {rule_text}", ("both factors present",), clauses={"tail": (" (and more)", "")})
    text = J.render(c, who="v3", tail=True)
    assert text == ("v3: the share above 0; not reproduced also inside 0 +/- 0.05; below 95%; SESOI 0.05; none "
                    "(and more), pooled over seeds (docs/statistics.md)")
    assert J.render(c, who="v3").endswith("none, pooled over seeds (docs/statistics.md)")  # the clause's other text
    with pytest.raises(KeyError, match="B1's criterion names 'who'"):
        J.render(c)


def test_a_sesoi_changed_in_the_csv_changes_the_text_of_every_claim_that_names_it(monkeypatch):
    rows = [dict(r) for r in inf.read_spec()]
    for r in rows:
        if r["claim"] == "A1" and r["part"] == "monotone":
            r["sesoi"] = "0.03"
    monkeypatch.setattr(inf, "read_spec", lambda: rows)
    J._spec.cache_clear()
    try:
        assert "below +0.03 (non-inferiority)" in J.render(claim("A1"), metric="masked")
    finally:
        monkeypatch.undo()
        J._spec.cache_clear()
    assert "below +0.01 (non-inferiority)" in J.render(claim("A1"), metric="masked")


def test_judge_takes_the_pooled_kinds_and_refuses_the_rest_and_other_claims_evidence():
    parts = J.Parts("A13").add("tied beats vanilla", {"tied - vanilla": same(E(-0.3, -0.31, -0.29))})
    j = J.judge(claim("A13"), parts, shown={"note": 1})
    assert (j.verdict, j.protocol, j.evidence["note"]) == ("reproduced", "corrected", 1)
    assert j.criterion.startswith("tied(v10) - vanilla(v9) real-token NLL on the held-out suffix benchmark below 0")
    q = J.judge(claim("Q9"), J.Parts("Q9").add("guarantee holds", {"m": same(E(-0.3, -0.31, -0.29))}), delta=0.1)
    assert q.verdict == "yes"  # kind "answer": the same pooling read as a question
    with pytest.raises(ValueError, match="the evidence is A13's, not A1's"):
        J.judge(claim("A1"), parts, metric="masked")
    with pytest.raises(ValueError, match="judged by its kind 'law'"):
        J.judge(claim("A7"), J.Parts("A7"))
    with pytest.raises(KeyError, match="no claim 'A99' in the claim book"):
        claim("A99")
