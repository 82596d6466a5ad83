"""Every reference in the repository's sources resolves inside the repository: "PROTOCOL §n" to a heading of
docs/protocol.md, file names such as docs/claims.md to files, Markdown links to files; nothing points at folders
outside the clone. The generated outputs under paper/ and figures/ are records of a run (they are rebuilt from these
sources) and are not scanned."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = {".py", ".md", ".csv", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ipynb"}
GENERATED = ("paper/", "figures/", "benchmarks/results/")
SECTION = r"\d+(?:\.\d+)?"
PROTOCOL_REF = re.compile(rf"PROTOCOL\s*§\s*({SECTION}(?:\s*[-–]\s*{SECTION})?(?:\s*(?:,|and)\s*§\s*{SECTION}"
                          rf"(?:\s*[-–]\s*{SECTION})?)*)")
MD_FILE = re.compile(r"(?<![\w/.-])(?<!href=\")((?:\.\./|\./)?[\w./-]*[\w-]\.md)\b")  # not links the HTML writer makes
MD_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
OUTSIDE = re.compile(r"\.\./shared|shared/paper|/work/|/root/|/home/")
# Bare file names are usually another code base's files (the original repository's reports); these are the names of
# the specification outside this repository, which docs/ replaces.
EXTERNAL_SPEC = {"CLAIMS.md", "PROTOCOL.md", "DESIGN.md"}


def source_files() -> list[Path]:
    try:
        names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but the usual build folders
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()
                 and not any(part.startswith(".") or part in ("build", "runs") for part in p.relative_to(ROOT).parts)]
    own = str(Path(__file__).resolve().relative_to(ROOT))  # this file's examples are meant to dangle
    return [ROOT / n for n in names if not n.startswith(GENERATED) and n != own and (
        Path(n).suffix in SUFFIXES or n in ("Makefile", ".ci/run"))]


def protocol_sections(text: str) -> set[str]:
    return set(re.findall(rf"^#+\s*§({SECTION})\s", text, flags=re.M))


def inside(p: Path) -> bool:
    """An existing path inside the repository (a file next to the clone does not count)."""
    return p.exists() and p.resolve().is_relative_to(ROOT)


def dangling(path: Path, text: str, sections: set[str]) -> list[str]:
    """The references in ``text`` (of file ``path``) that do not resolve."""
    bad = []
    for m in PROTOCOL_REF.finditer(text):
        for ref in re.findall(SECTION, m.group(1)):
            if ref not in sections:
                bad.append(f"PROTOCOL §{ref} (no such heading in docs/protocol.md)")
    for name in MD_FILE.findall(text):
        if "/" not in name and name not in EXTERNAL_SPEC:
            continue
        if not any(inside(base / name) for base in (path.parent, ROOT, ROOT / "docs")):
            bad.append(f"{name} (no such file)")
    if path.suffix == ".md":
        for target in MD_LINK.findall(text):
            if not re.match(r"[a-z]+:", target) and not inside(path.parent / target):
                bad.append(f"link ({target}) (no such file)")
    bad += [f"{m.group(0)!r} (outside the repository)" for m in OUTSIDE.finditer(text)]
    return bad


def test_protocol_document_has_every_section_the_code_cites():
    sections = protocol_sections((ROOT / "docs/protocol.md").read_text())
    assert {"1", "3.3", "4.4", "6.5", "7.1", "7.14", "8"} <= sections


def test_no_reference_in_the_sources_dangles():
    sections = protocol_sections((ROOT / "docs/protocol.md").read_text())
    files = source_files()
    assert len(files) > 50
    problems = {str(p.relative_to(ROOT)): d for p in files if (d := dangling(p, p.read_text(errors="replace"),
                                                                              sections))}
    assert not problems, problems


@pytest.mark.parametrize("text, expect", [
    ("see PROTOCOL §3.3", []),
    ("see PROTOCOL §9.9", ["PROTOCOL §9.9"]),
    ("PROTOCOL §4.4-4.9", ["PROTOCOL §4.9"]),
    ("PROTOCOL §3.4, §12", ["PROTOCOL §12"]),
    ("claims in ../shared/paper/CLAIMS.md", ["CLAIMS.md", "../shared"]),
    ("see CLAIMS.md for the IDs", ["CLAIMS.md"]),
    ("the original DEQLM_PHASE1_REPORT.md says", []),
    ("see docs/gone.md", ["docs/gone.md"]),
    ("the list in docs/claims.md", []),
    ("[the protocol](protocol.md) and [gone](nowhere.md)", ["nowhere.md"]),
])
def test_the_reference_check_can_fail(text, expect):
    sections = {"3.3", "3.4", "4.4"}
    got = dangling(ROOT / "docs" / "x.md", text, sections)
    assert len(got) >= len(expect) and all(any(e in g for g in got) for e in expect), got
    assert expect or not got, got


def test_the_library_pages_speculative_block_is_the_committed_benchmark():
    import pandas as pd

    from tiedlm_lib.depth.speculative import README_BEGIN, README_END, README_MODEL, readme_markdown

    readme = (ROOT / "docs" / "library.md").read_text()
    block = readme.split(README_BEGIN, 1)[1].split(README_END, 1)[0].strip()
    rows = pd.read_csv(ROOT / "benchmarks" / "results" / "speculative_cpu.csv").to_dict("records")
    assert block == readme_markdown(rows, README_MODEL)


def test_a_generated_block_is_rewritten_in_place_and_a_missing_marker_is_an_error(tmp_path):
    from tiedlm_lib.store.atomic import replace_block

    f = tmp_path / "R.md"
    f.write_text("intro\n<!-- b -->\nold\n<!-- e -->\nrest\n")
    assert replace_block(f, "<!-- b -->", "<!-- e -->", "new\n") is True
    assert f.read_text() == "intro\n<!-- b -->\nnew\n<!-- e -->\nrest\n"
    assert replace_block(f, "<!-- b -->", "<!-- e -->", "new") is False
    for begin, end in (("<!-- x -->", "<!-- e -->"), ("<!-- e -->", "<!-- b -->")):
        with pytest.raises(ValueError, match="no generated block"):
            replace_block(f, begin, end, "x")
    assert f.read_text() == "intro\n<!-- b -->\nnew\n<!-- e -->\nrest\n"


def test_the_readme_opens_with_what_it_is_and_its_findings_table_is_the_committed_ledger():
    from tiedlm_lib.paper.claims import read_ledger
    from tiedlm_lib.paper.findings import FINDINGS_BEGIN, FINDINGS_END, readme_block

    readme = (ROOT / "README.md").read_text()
    assert readme.startswith("# tiedlm\n\n**tiedlm** is the executable companion")
    block = readme.split(FINDINGS_BEGIN, 1)[1].split(FINDINGS_END, 1)[0].strip()
    from tiedlm_lib.paper.testability import read_trends

    assert block == readme_block(read_ledger(ROOT / "paper" / "cpu"), read_trends(ROOT / "paper" / "cpu")).strip()
    assert readme.index("## What it found") < readme.index("## The scale card") < readme.index("## Two commands")
    assert len(readme.splitlines()) <= 150  # a newcomer's page: the rest lives under docs/ (linked, checked)
    for page in ("running", "library", "faithful", "reproducibility"):
        assert f"](docs/{page}.md)" in readme
