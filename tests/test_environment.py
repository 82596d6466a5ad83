"""The three descriptions of the environment stay consistent: requirements.txt (pinned), environment.yml (conda),
pyproject.toml (floors); the code stays lint-clean and its functions short."""

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _requirements() -> list[str]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def test_requirements_are_pinned_with_torch_first():
    reqs = _requirements()
    assert reqs[0] == "torch==2.13.0"
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][A-Za-z0-9.+\-]*", r) for r in reqs), reqs


def test_environment_yml_matches_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert pip == _requirements()
    assert "python=3.11" in env["dependencies"]


def test_pyproject_uses_floors_that_the_pins_satisfy():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {r.split("==")[0].lower(): r.split("==")[1] for r in _requirements()}

    def version(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v)[:3])

    for dep in deps:
        name, floor = re.fullmatch(r"([A-Za-z0-9_.\-]+)>=([0-9.]+)", dep).groups()
        assert name.lower() in pins, f"{name} is a dependency but not pinned in requirements.txt"
        assert version(pins[name.lower()]) >= version(floor), dep
    assert not any("==" in d for d in deps), "the library keeps floors; pins belong in requirements.txt"


def test_ruff_is_clean_on_the_library_tests_benchmarks_and_notebook_sources():
    """The notebooks' py:percent sources are linted too, with the two rules that do not suit notebooks relaxed
    (pyproject.toml: imports after prose, a bare expression to display a value)."""
    sources = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.py"))
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "tiedlm_lib", "tests", "benchmarks", *sources],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_no_library_function_is_longer_than_60_lines():
    long = []
    for path in sorted((ROOT / "tiedlm_lib").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, long
