"""The notebook machinery: pairing, parameters, output-free sources, the reported-numbers file and the claims
ledger's schema. (The notebooks themselves run at smoke scale through nbval in the same test command.)"""

import ast
import csv
import json
from pathlib import Path

import jupytext
import pytest
from jupytext.compare import compare_notebooks

from tiedlm_lib.paper import claims
from tiedlm_lib.paper.reported import COLUMNS, FILE, reported, reported_k_sweep, reported_value

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks").glob("*.py"))


def test_there_are_notebooks_and_each_has_both_forms():
    assert {p.stem for p in SOURCES} >= {"01_architecture", "02_backprop", "03_depth_scaling", "04_tradeoff",
                                         "05_padding_benchmark", "06_iso_param_2x2", "07_multi_loop",
                                         "08_sft_generation", "09_negative_results", "10_depth_control_protocol",
                                         "11_claims", "12_depth_at_inference"}
    ipynbs = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert ipynbs == {p.stem for p in SOURCES}


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_pair_is_in_sync(src):
    """jupytext's own comparison of the .py source and the .ipynb pair (cells, types, sources, tags)."""
    compare_notebooks(jupytext.read(src.with_suffix(".ipynb")), jupytext.read(src), fmt="py:percent")


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_ipynb_is_output_free_and_names_its_kernel(src):
    nb = json.loads(src.with_suffix(".ipynb").read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"  # papermill needs it
    assert all(not c.get("outputs") and not c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_parameters_cell(src):
    nb = jupytext.read(src)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "exactly one cell tagged 'parameters'"
    values = {t.id: ast.literal_eval(n.value) for n in ast.parse(cells[0].source).body if isinstance(n, ast.Assign)
              for t in n.targets}
    assert values["scale"] == "cpu" and values["seeds"] is None  # None: the scale's seeds (Scale.seeds)
    assert "figures_dir" in values and "paper_dir" in values


def test_reported_numbers_file_is_well_formed():
    with open(FILE, newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == COLUMNS
        rows = list(reader)
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate ids"
    for r in rows:
        float(r["value"])
        assert r["unit"] and r["metric"] and r["source"], r
        assert "PROTOCOL" in r["source"] or "paper" in r["source"], r
    assert reported_k_sweep("v3") == {1: 6.271, 2: 5.997, 4: 5.496, 8: 4.858, 16: 4.434, 30: 4.3599}
    assert reported_value("bench.pad_fraction") == 0.616
    assert len(reported("v6.staircase.")) == 12
    with pytest.raises(KeyError, match="no reported number"):
        reported_value("v99.nothing")


def test_claims_ledger_schema(tmp_path):
    e = claims.record(tmp_path, "smoke", "04_tradeoff", "A4", "inconclusive", "a stated criterion", {"x": 1.0})
    claims.record(tmp_path, "smoke", "04_tradeoff", "A4", "reproduced", "again", {"x": 2.0})  # replaces
    claims.record(tmp_path, "smoke", "04_tradeoff", "A4", "not reproduced", "c", {}, protocol="corrected")
    claims.record(tmp_path, "smoke", "03_depth_scaling", "A1", "reproduced", "c", {})
    led = claims.read_ledger(tmp_path)
    assert [(c["id"], c["protocol"], c["verdict"]) for c in led["claims"]] == [
        ("A1", "paper", "reproduced"), ("A4", "corrected", "not reproduced"), ("A4", "paper", "reproduced")]
    assert e["claim"].startswith("Post-hoc max-prob exit")
    for bad, match in [({"id": "A99"}, "unknown claim id"), ({"verdict": "yes"}, "verdict must be one of"),
                       ({"protocol": "mine"}, "protocol must be one of"), ({"criterion": " "}, "criterion must be")]:
        with pytest.raises(ValueError, match=match):
            claims.validate_entry({**e, **bad})
    with pytest.raises(ValueError, match="verdict must be one of"):
        claims.record(tmp_path, "smoke", "x", "Q2", "reproduced", "c", {})
    seeded = claims.record(tmp_path, "smoke", "06_iso_param_2x2", "A13", "reproduced", "c", {}, seeds=[0, 1, 2])
    assert seeded["seeds"] == [0, 1, 2] and "seeds" not in e
    with pytest.raises(ValueError, match="seeds must be a list of distinct integers"):
        claims.validate_entry({**seeded, "seeds": [1, 1]})
    assert claims.verdict(True, False) == "reproduced" and claims.verdict(False, False) == "inconclusive"
    assert claims.answer(False, True) == "no"


@pytest.mark.parametrize("ledger", sorted(ROOT.glob("paper/*/claims.json")), ids=lambda p: p.parent.name)
def test_committed_ledgers_are_valid(ledger):
    led = json.loads(ledger.read_text())
    # paper/<scale>/ or a first look with other seeds, paper/<scale>-seeds<...>/ (paper.output_name)
    assert ledger.parent.name == led["scale"] or ledger.parent.name.startswith(f"{led['scale']}-seeds")
    for e in led["claims"]:
        claims.validate_entry(e)


def test_executed_parameters_reads_the_parameters_then_the_injected_ones(tmp_path):
    import json

    from tiedlm_lib.paper.execute import executed_parameters

    cell = lambda src, tag: {"cell_type": "code", "metadata": {"tags": [tag]}, "source": src}  # noqa: E731
    nb = {"cells": [cell("scale = 'cpu'\nseeds = [0, 1, 2]\nfigures_dir = None\n", "parameters"),
                    cell("scale = 'smoke'\n", "injected-parameters"),
                    {"cell_type": "code", "metadata": {}, "source": "seeds = [9]"}]}
    (tmp_path / "n.ipynb").write_text(json.dumps(nb))
    assert executed_parameters(tmp_path / "n.ipynb") == {"scale": "smoke", "seeds": [0, 1, 2], "figures_dir": None}


def test_a_notebooks_verdicts_record_the_seeds_they_rest_on(tmp_path):
    from tiedlm_lib.paper.report import Report

    rep = Report("04_tradeoff", "smoke", tmp_path / "f", tmp_path / "p", seeds=[0, 2])
    assert rep.claim("A4", "inconclusive", "c", {"x": 1.0})["seeds"] == [0, 2]
    assert rep.claim("A21", "not testable", "c", {}, seeds=[])["seeds"] == []
    assert [c.get("seeds") for c in claims.read_ledger(tmp_path / "p")["claims"]] == [[0, 2], []]
    # without a seeds parameter a section runs the scale's seeds: five at cpu (and its extended seeds for the units
    # of registry.EXTENDED), one at smoke; a caller's own seeds come without extended ones unless it asks
    cpu = Report("04_tradeoff", "cpu", tmp_path / "f", tmp_path / "p")
    assert cpu.seeds == [0, 1, 2, 3, 4] and cpu.extended == [5, 6, 7, 8, 9]
    assert Report("04_tradeoff", "cpu", tmp_path / "f", tmp_path / "p", seeds=[0]).extended == []
    assert Report("04_tradeoff", "cpu", tmp_path / "f", tmp_path / "p", seeds=[0], extended_seeds=[7]).extended == [7]
    assert Report("04_tradeoff", "smoke", tmp_path / "f", tmp_path / "p").seeds == [0]
    with pytest.raises(ValueError, match="seeds must be"):
        Report("04_tradeoff", "smoke", tmp_path / "f", tmp_path / "p", seeds=[0, 0])


def test_a_sections_run_replaces_its_whole_set_of_verdicts(tmp_path):
    from tiedlm_lib.paper.report import Report

    rep = Report("02_backprop", "smoke", tmp_path / "f", tmp_path / "p")
    rep.claim("A9", "reproduced", "c", {}, "paper")
    rep.claim("A10", "inconclusive", "c", {}, "paper")  # a run's own claims never remove each other
    Report("03_depth_scaling", "smoke", tmp_path / "f", tmp_path / "p").claim("A1", "reproduced", "c", {})
    ledger = lambda: [(c["id"], c["protocol"]) for c in claims.read_ledger(tmp_path / "p")["claims"]]  # noqa: E731
    assert ledger() == [("A1", "paper"), ("A9", "paper"), ("A10", "paper")]
    again = Report("02_backprop", "smoke", tmp_path / "f", tmp_path / "p")
    assert ledger() == [("A1", "paper"), ("A9", "paper"), ("A10", "paper")]  # a run that fails before it judges
    again.claim("A9", "reproduced", "c", {}, "corrected")                      # loses nothing
    again.claim("A3", "inconclusive", "c", {}, "corrected")
    assert ledger() == [("A1", "paper"), ("A3", "corrected"), ("A9", "corrected")]  # the relabelled row replaced
    # the old ones, A10 (no longer judged) is gone, other sections untouched


def test_a_judgement_is_recorded_with_its_basis(tmp_path):
    from tiedlm_lib.paper import verdicts
    from tiedlm_lib.paper.report import Report
    from tiedlm_lib.stats.bootstrap import Estimate

    rep = Report("06_iso_param_2x2", "smoke", tmp_path / "f", tmp_path / "p", seeds=[0, 1, 2])
    e = rep.judge(verdicts.q4({"tied - vanilla": {0: Estimate(-0.3, -0.5, -0.1), 1: Estimate(0.3, 0.1, 0.5),
                                                  2: Estimate(-0.2, -0.4, 0.0)}}, "tied - vanilla"))
    assert e["verdict"] == "inconclusive" and "pooled over 3 seeds" in e["basis"] and e["seeds"] == [0, 1, 2]
    assert "seed-sensitive" in e["basis"]  # seeds on both sides: a new seed could land on either
    two = Report("06_iso_param_2x2", "smoke", tmp_path / "f2", tmp_path / "p2", seeds=[0, 1]).judge(verdicts.q4(
        {"tied - vanilla": {0: Estimate(-0.3, -0.5, -0.1), 1: Estimate(0.3, 0.1, 0.5)}}, "tied - vanilla"))
    assert "seed-sensitive" not in two["basis"]  # with two seeds a new seed's interval is undefined (t with n - 2 df)
    with pytest.raises(ValueError, match="basis must be"):
        claims.validate_entry({**e, "basis": 3})


def test_a_judgement_records_the_seeds_its_evidence_rests_on(tmp_path):
    from tiedlm_lib.paper import verdicts
    from tiedlm_lib.paper.report import Report
    from tiedlm_lib.stats.bootstrap import Estimate

    up = Estimate(0.3, 0.1, 0.5)
    rep = Report("06_iso_param_2x2", "smoke", tmp_path / "f", tmp_path / "p", seeds=[0, 1, 2])
    full = rep.judge(verdicts.q4({"g": {0: up, 1: up, 2: up}, "h": {0: up, 1: up, 2: up}}, "g"))
    assert full["seeds"] == [0, 1, 2] and "rests on seeds" not in full["basis"]
    part = rep.judge(verdicts.q4({"g": {0: up, 1: up}}, "g"))  # seed 2 gave no evidence
    assert part["seeds"] == [0, 1] and "no evidence from [2]" in part["basis"]
    assert claims.evidence_seeds({"u": {"s3": [1, 0, 2], "x": [{"s10": True}]}, "s": 1}) == [3, 10]
    assert claims.evidence_seeds({"small/s0": True, "v3/s2/maxprob/eps0.1": [1], "small/tau0.4": 1}) == [0, 2]
    with pytest.raises(ValueError, match=r"names seeds \[5\], which this notebook did not train"):
        rep.judge(verdicts.q4({"g": {5: up}}, "g"))
    # a unit of registry.EXTENDED pools over the extended seeds too; "missing" counts only the notebook's own seeds
    ext = Report("06_iso_param_2x2", "smoke", tmp_path / "f", tmp_path / "p", seeds=[0, 1], extended_seeds=[5])
    wide = ext.judge(verdicts.q4({"g": {0: up, 1: up, 5: up}}, "g"))
    assert wide["seeds"] == [0, 1, 5] and "rests on seeds" not in wide["basis"]
    assert "no evidence from [1]" in ext.judge(verdicts.q4({"g": {0: up, 5: up}}, "g"))["basis"]
    with pytest.raises(ValueError, match=r"names seeds \[6\].*extended: \[5\]"):
        ext.judge(verdicts.q4({"g": {6: up}}, "g"))
    # a derived answer (Q2 from A4) rests on the seeds of what it derives from
    a4 = verdicts.a4({"small/tau0.4": {0: up, 1: up}}, 0.1, 0.2, "corrected", "masked", "final")
    q2 = rep.judge(verdicts.q2(a4, a4))
    assert q2["seeds"] == [0, 1] and "no evidence from [2]" in q2["basis"]


def test_seed_shortfalls_list_entries_on_fewer_seeds_than_required():
    led = {"claims": [{"id": "A1", "protocol": "paper", "notebook": "03", "seeds": [0, 1, 2]},
                      {"id": "A2", "protocol": "paper", "notebook": "03", "seeds": [0]},
                      {"id": "A21", "protocol": "paper", "notebook": "11", "seeds": []},
                      {"id": "A3", "protocol": "paper", "notebook": "02"}]}
    assert claims.seed_shortfalls(led, 3) == ["A2/paper/03 (1 seeds)", "A3/paper/02 (unrecorded seeds)"]
    assert claims.seed_shortfalls(led, 1) == ["A3/paper/02 (unrecorded seeds)"]


def test_the_committed_cpu_ledger_rests_on_five_seeds_per_verdict():
    """Issue 30's acceptance, checked on what is committed: every cpu verdict on >= 5 training seeds (issue 16 asked
    for three)."""
    led = claims.read_ledger(ROOT / "paper" / "cpu")
    assert led["claims"], "the committed cpu ledger is empty"
    # every entry records its seeds and has five (a not-testable entry, seeds == [], trained nothing)
    assert not claims.seed_shortfalls(led, 5)


def test_paper_seeds_option_is_checked_before_any_work(capsys):
    from tiedlm_lib.paper.build import main

    assert main(["--scale", "smoke", "--seeds", "0,x", "--only", "11_claims"]) == 1
    assert "--seeds must be comma-separated integers" in capsys.readouterr().err


def test_the_abstract_states_findings_from_the_ledger(tmp_path):
    from tiedlm_lib.paper.claims import abstract_findings

    def rec(cid, verdict, protocol, nb="04_tradeoff", ev=None, seeds=(0, 1, 2)):
        claims.record(tmp_path, "cpu", nb, cid, verdict, "c", ev or {}, protocol, list(seeds))

    assert abstract_findings(claims.read_ledger(tmp_path)) == "No section has recorded a verdict at this scale yet."
    rec("A4", "reproduced", "paper")
    rec("A4", "not reproduced", "corrected")
    rec("A10", "reproduced", "corrected", "02_backprop")
    rec("A10", "inconclusive", "corrected", "06_iso_param_2x2")
    rec("A21", "not testable", "paper", "11_claims", seeds=())
    q1 = {"head/diagonal": {"m": {"s0": [0.1, 0.0, 0.2], "s1": [0.2, 0.1, 0.3]}, "answer": "no"},
          "loop/tuned": {"m": {"s0": [0.6, 0.5, 0.7]}, "answer": "yes"}, "headline probe": "loop/tuned"}
    rec("Q1", "yes", "corrected", "10_depth_control_protocol", q1)
    text = abstract_findings(claims.read_ledger(tmp_path))
    assert "Under the paper's protocol, 1 claim reproduced (A4), 0 did not" in text
    assert "1 did not (A4)" in text and "differ on A10" in text and "changes the verdict of A4" in text
    assert "rest on 3 training seeds" in text
    assert "from 15% (head/diagonal) to 60% (loop/tuned)" in text and "(Q1: yes by loop/tuned)" in text
    # an extension (a control this project added) is its own protocol, in the abstract and the findings table
    rec("B1", "reproduced", "extension", "10_depth_control_protocol")
    text = abstract_findings(claims.read_ledger(tmp_path))
    assert "Under this project's own controls (extensions), 1 claim reproduced (B1)" in text
    table = claims.findings_markdown(claims.read_ledger(tmp_path)).splitlines()
    assert table[0].split(" | ")[4] == "extension"
    assert next(r for r in table if r.startswith("| B1 ")).split(" | ")[2:5] == ["—", "—", "reproduced"]
    # a ledger judged before the seed-level rule named Q1's probe; one judged under it names none
    q1["headline probe"] = "head/diagonal"
    rec("Q1", "no", "corrected", "10_depth_control_protocol", q1)
    assert "(Q1: no by head/diagonal)" in abstract_findings(claims.read_ledger(tmp_path))
    del q1["headline probe"]
    rec("Q1", "yes", "corrected", "10_depth_control_protocol", q1)
    assert "(Q1: yes, the largest share answering at the Bonferroni level" in abstract_findings(
        claims.read_ledger(tmp_path))
    # checks (parts that hold by construction) are counted apart from reproductions
    rec("B6", "check passed", "extension", "10_depth_control_protocol")
    text = abstract_findings(claims.read_ledger(tmp_path))
    assert "checks, not reproductions (B6 (extension)): every check passed." in text.replace("1 part that hold", "")


def test_rule_changes_set_the_old_verdict_beside_the_new_with_a_computed_reason():
    from tiedlm_lib.paper import verdicts as V
    from tiedlm_lib.stats.bootstrap import Estimate as E

    split = V.a13({0: E(0.3, 0.29, 0.31), 1: E(-0.3, -0.31, -0.29), 2: E(0.3, 0.29, 0.31)}, {0: 3, 1: 3, 2: 3}, -0.01)
    nil = V.a14({"real": {s: E(0.0, -0.005, 0.005) for s in range(3)}})
    new = {"claims": [{"id": j.claim, "protocol": j.protocol, "notebook": "06", "verdict": j.verdict,
                       "evidence": j.evidence} for j in (split, nil)]
           + [{"id": "A7", "protocol": "corrected", "notebook": "04", "verdict": "reproduced", "evidence": {}}]}
    old = {"claims": [{"id": "A13", "protocol": "corrected", "notebook": "06", "verdict": "reproduced"},
                      {"id": "A14", "protocol": "corrected", "notebook": "06", "verdict": "inconclusive"}]}
    rows = {r["id"]: r for r in claims.rule_changes(old, new)}
    assert rows["A13"]["changed"] and "holds the threshold" in rows["A13"]["why"]
    assert "seeds significant on both sides" in rows["A13"]["why"]
    assert rows["A14"]["seed-level rule"] == "not reproduced" and "inside +/-SESOI" in rows["A14"]["why"]
    assert rows["A7"]["old rule (every seed must agree)"] == "—" and not rows["A7"]["changed"]
    assert "new entry" in rows["A7"]["why"]


def test_prose_numbers_are_facts_read_from_the_sections_tables(tmp_path):
    import json as _json

    import pandas as pd

    from tiedlm_lib.paper.report import Report

    rep = Report("03_depth_scaling", "smoke", tmp_path / "f", tmp_path / "p")
    rep.table(pd.DataFrame({"size": ["small", "small", "large"], "seed": [0, 1, 0], "gap": [0.5, 0.7, 0.9]}), "gaps")
    assert rep.fact("small_gap", "gaps", "gap", {"size": "small"}) == pytest.approx(0.6)
    assert rep.fact("large_gap", "gaps", "gap", {"size": "large", "seed": 0}, "only") == 0.9
    md = rep.prose("Results", "The small gap is {small_gap:.2f} nats, the large {large_gap:.1f}: {word}.",
                   word="larger at the larger size")
    assert md.data == "**Results.** The small gap is 0.60 nats, the large 0.9: larger at the larger size."
    saved = _json.loads((tmp_path / "p" / "tables" / "03_depth_scaling-prose.json").read_text())
    assert saved[0]["facts"]["small_gap"]["where"] == {"size": "small"} and saved[0]["text"].endswith("size.")
    with pytest.raises(ValueError, match="neither facts"):
        rep.prose("Results", "{missing:.2f}")
    with pytest.raises(ValueError, match="no row matches"):
        rep.fact("x", "gaps", "gap", {"size": "huge"})
    with pytest.raises(ValueError, match="exactly one"):
        rep.fact("x", "gaps", "gap", {"size": "small"}, "only")
    with pytest.raises(ValueError, match="save it with rep.table"):
        rep.fact("x", "nope", "gap")
    # a table re-saved after the fact was read: the paragraph would contradict it, so it is refused
    rep.table(pd.DataFrame({"size": ["small"], "seed": [0], "gap": [0.1]}), "gaps")
    with pytest.raises(ValueError, match="its table now gives"):
        rep.prose("Results", "{small_gap:.2f}")


def test_every_section_ends_with_results_and_what_they_mean():
    for src in SOURCES:
        if src.stem == "11_claims":
            continue
        text = src.read_text()
        assert 'rep.prose("Results"' in text and 'rep.prose("What this means' in text, src.name  # or "...: <topic>"


def test_every_committed_table_and_figure_is_one_its_notebook_still_writes():
    """A table or figure a notebook no longer writes stays behind when its section is re-executed (06's and 07's
    three-seed gap_verdicts did, contradicting the five-seed ledger): every committed output must be named, quoted,
    in its notebook's source (``rep.table(df, "name")``, ``rep.chart(c, "name")``)."""
    stale = []
    for scale in ("cpu",):
        tables = ROOT / "paper" / scale / "tables"
        outputs = [*tables.glob("*.csv"), *tables.glob("*.md"), *(ROOT / "figures" / scale).glob("*.svg")]
        assert outputs, f"no committed {scale} outputs found"
        for f in outputs:
            nb, _, name = f.stem.partition("-")
            src = ROOT / "notebooks" / f"{nb}.py"
            if name != "prose" and (not src.is_file() or f'"{name}"' not in src.read_text()):
                stale.append(str(f.relative_to(ROOT)))
    assert not stale, f"committed outputs no notebook writes: {stale}"
