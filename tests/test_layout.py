"""The package's layers: each subpackage is one concept, and imports only point down (issue 56)."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "tiedlm_lib"
# lowest first; a module may import its own layer and the ones before it
LAYERS = ["base", "store", "model", "data", "stats", "evaluation", "training", "depth", "runs", "hub", "paper", "api"]
TOP = {"paths": "base", "devices": "base", "data": "data", "__init__": "api", "__main__": "api"}


def layer(module: str) -> str:
    """The layer of a module of the package, by its dotted name under ``tiedlm_lib``."""
    first = module.split(".")[0]
    return TOP.get(first, first)


def rank(name: str) -> int:
    # store and base are one floor: the storage code imports nothing above it and the base modules nothing at all
    return 0 if name in ("base", "store") else LAYERS.index(name) - 1


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module under tiedlm_lib) of every import in a file, deferred ones included."""
    rel = path.relative_to(PKG).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("tiedlm_lib"):
                mod = node.module.removeprefix("tiedlm_lib").lstrip(".")
            else:
                continue
            names = [a.name for a in node.names]
            targets = [f"{mod}.{n}" if mod else n for n in names] if (PKG / mod.replace(".", "/")).is_dir() or not mod \
                else [mod]
            out += [(node.lineno, t) for t in targets]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name.removeprefix("tiedlm_lib.")) for a in node.names
                    if a.name.startswith("tiedlm_lib.")]
    return out


def test_the_package_is_layered_and_imports_only_point_down():
    wrong = []
    for path in sorted(PKG.rglob("*.py")):
        me = layer(".".join(path.relative_to(PKG).with_suffix("").parts))
        for line, target in imports(path):
            where = PKG / target.replace(".", "/")
            if not where.with_suffix(".py").is_file() and not where.is_dir():
                continue  # a name imported from a package's __init__ (from tiedlm_lib.runs import get_run)
            them = layer(target)
            if rank(them) > rank(me):
                wrong.append(f"{path.relative_to(PKG)}:{line} ({me}) imports tiedlm_lib.{target} ({them})")
    assert not wrong, "imports that point up:\n" + "\n".join(wrong)


def test_every_subpackage_is_a_layer_and_every_top_module_is_placed():
    subpackages = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").is_file())
    top = sorted(p.stem for p in PKG.glob("*.py"))
    assert set(subpackages) <= set(LAYERS) and len(subpackages) >= 6
    assert set(top) <= set(TOP) and len(top) <= 8


def test_the_layer_check_sees_an_upward_import(tmp_path):
    """A test that cannot fail is a defect: the check finds a deferred import from the model of the paper."""
    fake = PKG / "model" / "_layering_probe.py"
    fake.write_text("def f():\n    from tiedlm_lib.paper import verdicts\n    return verdicts\n")
    try:
        found = [t for _, t in imports(fake)]
        assert found == ["paper.verdicts"] and rank(layer(found[0])) > rank(layer("model._layering_probe"))
    finally:
        fake.unlink()


def test_no_library_source_is_ignored_by_git():
    """A .gitignore pattern that matches a package folder (``runs/`` once matched ``tiedlm_lib/runs/``) leaves a new
    module out of every commit while the developer's tree still imports it: CI's clone then fails."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("git") is None or not (PKG.parent / ".git").exists():
        pytest.skip("not a git checkout")
    files = [str(p.relative_to(PKG.parent)) for p in PKG.rglob("*.py")] + ["tiedlm_lib/newmodule_probe.py",
                                                                          "tiedlm_lib/runs/newmodule_probe.py"]
    r = subprocess.run(["git", "check-ignore", "--no-index", *files], cwd=PKG.parent, capture_output=True, text=True)
    assert r.stdout.strip() == "", f"ignored by .gitignore: {r.stdout.split()}"
