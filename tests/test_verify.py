"""make verify: the comparison of a re-executed section with its committed tables, prose and ledger entries."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from tiedlm_lib.paper import verify as V

SEC = "04_tradeoff"


def _paper(root: Path, rows=None, prose=None, claims=None) -> Path:
    d = root / "paper"
    (d / "tables").mkdir(parents=True)
    rows = rows or [["v3", "1", "0.123456789", "yes", "41.5"], ["v4", "2", "nan", "no", "39.0"]]
    (d / "tables" / f"{SEC}-law.csv").write_text(
        "model,k,nll,reproduced,training seconds\n" + "".join(",".join(r) + "\n" for r in rows))
    (d / "tables" / f"{SEC}-law.md").write_text("| not compared: the CSV is |\n")
    (d / "tables" / "10_depth_control_protocol-shares.csv").write_text("a\n1\n")  # another section's table
    prose = prose or [{"heading": "Results", "template": "NLL {nll:.2f} in {t:.0f} s.", "text": "NLL 0.12 in 42 s.",
                       "words": {"k": "16"},
                       "facts": {"nll": {"table": "law", "column": "nll", "where": {"model": "v3"}, "agg": "only",
                                         "value": 0.123456789},
                                 "t": {"table": "law", "column": "training seconds", "where": {"model": "v3"},
                                       "agg": "only", "value": 41.5}}}]
    (d / "tables" / f"{SEC}-prose.json").write_text(json.dumps(prose))
    claims = claims or [{"id": "A4", "protocol": "corrected", "notebook": SEC, "verdict": "reproduced",
                         "evidence": {"gap": {"pooled": {"point": 0.25, "interval": [0.1, 0.4]}},
                                      "time_ratio": 0.42}, "recorded": "2026-12-07T16:27:03"},
                        {"id": "B1", "protocol": "paper", "notebook": "10_depth_control_protocol", "verdict": "no"}]
    (d / "claims.json").write_text(json.dumps({"scale": "cpu", "claims": claims}))
    return d


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_identical_and_within_tolerance(tmp_path):
    a = _paper(tmp_path / "a")
    b = _copy(a, tmp_path / "b")
    r = V.compare_section(SEC, a, b)
    assert r.status == "identical" and not r.differences
    # 2 rows x 4 compared columns, prose (2 fact trees less the machine one, words, template, text), the ledger entry
    # (its time ratio and the time it was recorded left out)
    assert r.machine == 2 + 1 + 2 and r.compared > 10
    _edit(b / "tables" / f"{SEC}-law.csv", "0.123456789", "0.1234567891")
    _edit(b / "tables" / f"{SEC}-law.csv", "41.5", "77.0")  # a slower machine: not a difference
    r = V.compare_section(SEC, a, b)
    assert r.status == "within tolerance" and r.within == 1 and 0 < r.largest < 1e-9
    assert "within tolerance" in r.line() and "1 floats within tolerance" in r.line()


@pytest.mark.parametrize("change, where", [
    (("tables", f"{SEC}-law.csv", "0.123456789", "0.1235"), f"{SEC}-law.csv row 1 'nll'"),
    (("tables", f"{SEC}-law.csv", "yes", "no"), f"{SEC}-law.csv row 1 'reproduced'"),
    (("tables", f"{SEC}-law.csv", "v4,2,", "v4,3,"), f"{SEC}-law.csv row 2 'k'"),
    (("tables", f"{SEC}-law.csv", "nan", "0.5"), f"{SEC}-law.csv row 2 'nll'"),
    (("tables", f"{SEC}-law.csv", "model,k", "model,depth"), f"{SEC}-law.csv (columns)"),
    (("tables", f"{SEC}-prose.json", "\"16\"", "\"30\""), "words/k"),
    ((None, "claims.json", "\"reproduced\"", "\"inconclusive\""), "claims.json A4 (corrected)/verdict"),
    ((None, "claims.json", "0.25", "0.26"), "claims.json A4 (corrected)/evidence/gap/pooled/point"),
])
def test_each_kind_of_difference_is_named(tmp_path, change, where):
    a = _paper(tmp_path / "a")
    b = _copy(a, tmp_path / "b")
    sub, name, old, new = change
    _edit(b / (sub or "") / name, old, new)
    r = V.compare_section(SEC, a, b)
    assert r.status == "differs" and any(where in d.where for d in r.differences), r.differences
    assert where in r.line()


def test_machine_measurements_are_left_out_by_name(tmp_path):
    a = _paper(tmp_path / "a")
    b = _copy(a, tmp_path / "b")
    _edit(b / "claims.json", "0.42", "0.61")  # the time ratio: measured on the machine
    _edit(b / "claims.json", "2026-12-07T16:27:03", "2026-12-07T21:41:22")  # when the entry was written
    prose = json.loads((b / "tables" / f"{SEC}-prose.json").read_text())
    prose[0]["facts"]["t"]["value"] = 77.0
    prose[0]["text"] = "NLL 0.12 in 77 s."  # the text states a machine number: not compared
    (b / "tables" / f"{SEC}-prose.json").write_text(json.dumps(prose))
    assert V.compare_section(SEC, a, b).status == "identical"
    assert all(V.MACHINE.search(c) for c in ("training seconds", "train s/step", "ms per 1k tokens", "speed-up lo",
                                             "peak_MiB", "phantom/full time", "time_ratio", "threads"))
    assert not any(V.MACHINE.search(c) for c in ("nll_masked", "pooled lo", "timestep", "steps", "k", "verdict",
                                                 "verdict before the cap", "recorded margin"))


def test_missing_and_new_tables_and_entries_are_differences(tmp_path):
    a = _paper(tmp_path / "a")
    b = _copy(a, tmp_path / "b")
    (b / "tables" / f"{SEC}-law.csv").unlink()
    (b / "tables" / f"{SEC}-new.csv").write_text("x\n1\n")
    doc = json.loads((b / "claims.json").read_text())
    doc["claims"] = [e for e in doc["claims"] if e["id"] != "A4"]
    (b / "claims.json").write_text(json.dumps(doc))
    diffs = {d.where: (d.committed, d.fresh) for d in V.compare_section(SEC, a, b).differences}
    assert diffs[f"{SEC}-law.csv"] == ("written", "<absent>") and diffs[f"{SEC}-new.csv"] == ("<absent>", "written")
    assert diffs["claims.json ('A4', 'corrected')"] == ("present", "<absent>")


def test_the_scratch_starts_with_what_the_sections_read_not_what_they_write(tmp_path):
    a = _paper(tmp_path / "a")
    (a / "claims-before-amendment-18.json").write_text("{}")
    scratch = tmp_path / "scratch"
    V.prepare_scratch(a, [SEC], scratch)
    tables = {p.name for p in (scratch / "paper" / "tables").iterdir()}
    assert tables == {"10_depth_control_protocol-shares.csv"}  # the section's own tables removed
    ledger = json.loads((scratch / "paper" / "claims.json").read_text())
    assert [e["id"] for e in ledger["claims"]] == ["B1"] and (scratch / "paper" / "claims-before-amendment-18.json"
                                                              ).is_file()
    V.prepare_scratch(a, [SEC], scratch)  # its own folder: remade
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a scratch folder"):
        V.prepare_scratch(a, [SEC], tmp_path / "mine")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "keep me"


def test_bad_requests_get_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown section"):
        V.verify("smoke", ["99_nothing"], scratch=tmp_path / "s", committed=_paper(tmp_path / "a"))
    with pytest.raises(FileNotFoundError, match="no committed tables"):
        V.verify("smoke", [SEC], scratch=tmp_path / "s", committed=tmp_path / "none")
    with pytest.raises(FileNotFoundError, match="no earlier run"):
        V.verify("smoke", [SEC], scratch=tmp_path / "s", committed=tmp_path / "a" / "paper", execute=False)


def test_a_smoke_section_executed_twice_verifies(tmp_path):
    """The whole path at smoke: a section executed into one folder as 'committed', then verified from a second
    execution; a number changed in the committed copy is then reported by name."""
    from tiedlm_lib.paper import execute as paper

    sec = "01_architecture"
    paper.execute("smoke", only=[sec], into=tmp_path / "first", log=lambda *a: None)
    committed = tmp_path / "first" / "paper"
    reports = V.verify("smoke", [sec], scratch=tmp_path / "second", committed=committed, log=lambda *a: None)
    assert [r.status for r in reports] in (["identical"], ["within tolerance"]), reports[0].line()
    assert reports[0].compared > 50
    table = sorted((committed / "tables").glob(f"{sec}-*.csv"))[0]
    cols, rows = V._read_csv(table)
    rows[0][0] = rows[0][0] + "x"
    with open(table, "w", newline="") as fh:
        csv.writer(fh).writerows([cols, *rows])
    again = V.verify("smoke", [sec], scratch=tmp_path / "second", committed=committed, execute=False)
    assert again[0].status == "differs" and f"{table.name} row 1" in again[0].line()


def test_execute_into_a_scratch_folder_single_threaded_at_one_job(tmp_path):
    """make verify's execution: every output under the scratch folder, and the kernel single-threaded even with one
    section at a time (the thread count every committed cpu number was computed with)."""
    import nbformat

    from tiedlm_lib.paper.execute import execute

    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("scale = 'cpu'\nseeds = None\npaper_dir = None\nfigures_dir = None",
                                  metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("import json, os, pathlib\npathlib.Path('got.json').write_text(json.dumps("
                                  "[paper_dir, figures_dir, os.environ.get('OMP_NUM_THREADS')]))")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "notebooks" / "01_a.ipynb")
    execute("cpu", root=tmp_path, log=lambda m: None, jobs=1, into=tmp_path / "scratch")
    paper_dir, figures_dir, threads = json.loads((tmp_path / "notebooks" / "got.json").read_text())
    assert (paper_dir, figures_dir) == (str(tmp_path / "scratch" / "paper"), str(tmp_path / "scratch" / "figures"))
    assert threads == "1" and (tmp_path / "scratch" / "paper" / "01_a.ipynb").is_file()
    assert not (tmp_path / "paper" / "cpu" / "01_a.ipynb").exists()
