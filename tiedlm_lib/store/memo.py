"""Derived results kept beside a run, so that long analyses resume instead of starting over.

Section 10's probe shares with 30 refits take hours at the cpu scale: more than one working session. ``memoised``
computes a result once per (run, what, key, code) and keeps it in ``<run dir>/derived/<what>-<hash>.json`` with its
arrays in ``<what>-<hash>.npz`` beside it (``tiedlm_lib.store.datafile``: data only, written atomically; the JSON starts
with the key and the code fingerprint, for a reader); a notebook interrupted halfway resumes at the first result it
has not kept. The hash covers the key (every argument that changes the result: documents, depths, probes, refits,
resamples, seeds), the run's weights and the code of the library modules that compute it (what they define, not
where: ``code_fingerprint``), so a changed estimator never reuses an old result and a moved one keeps its
results. ``TIEDLM_MEMO=0`` turns the reuse off (results are recomputed, nothing is read or written).

Kept results are data, never code: reading one parses JSON and an npz (``allow_pickle=False``) and builds only the
allowlisted types of ``tiedlm_lib.store.datafile``. A pickle in a run's ``derived/`` (where results were kept as pickles
before) is refused, never loaded, since unpickling runs whatever its writer chose. This project's own kept pickles
were converted once (issue 54), and its kept results re-keyed from the bytes of the module files to their definitions
once (issue 56), by one-off commands that the move of the modules retired (in the history: ``memo.migrate`` and
``memo.rekey`` before the commit that made ``tiedlm_lib.store``).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import io
import json
import os
import tokenize
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from tiedlm_lib.store import datafile

T = TypeVar("T")
# The modules whose code decides a derived result (a change to any of them recomputes every kept result). memo and
# datafile are not among them: how a result is stored does not change the result, and a change to the storage code
# must not silently invalidate every kept result (a format change is a migration of the kept files).
CODE_MODULES = tuple(f"tiedlm_lib.{m}" for m in (
    "depth.readout", "stats.bootstrap", "model.schedules", "model.tied", "model.layout", "model.config",
    "evaluation.nll", "data", "depth.dcp", "model.gradients", "depth.exits", "paths", "evaluation.analysis"))
FORMAT = "tiedlm_lib.datafile/1"
PICKLE_SUFFIXES = (".pkl", ".pickle")


# ------------------------------------------------------------------------------------------------ the code's key
# A kept result's key holds the code that computed it as what that code *defines*, not where it lies: each top-level
# function, class and constant of CODE_MODULES, by name, as its source text. Moving a definition from one of these
# modules to another, reordering them, or rewriting an import keeps every kept result (issue 56: the tree can be
# reorganised without recomputing hours of probe shares); a change to any definition's code recomputes them. Left out,
# since a move rewrites them or they never decide a result: imports (at the top or deferred inside a function),
# docstrings, comments, blank lines and ``raise`` statements (``_left_out``). The text is the statements' source
# lines, which ast and the tokenizer locate, so the key is the same under every Python version (an ``ast.dump``
# differs between versions).
Definition = tuple[str, str]  # (name, source text); the name is "" for a statement that binds none


def _binds(node: ast.stmt) -> str | None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AnnAssign, ast.AugAssign)) else []
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    return ",".join(names) if names else None


def _is_import(node: ast.stmt) -> bool:
    """An import, or an ``if``/``try`` block of nothing but imports (``if TYPE_CHECKING:``, optional imports)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.If) or isinstance(node, ast.Try):
        inner = node.body + node.orelse + [s for h in getattr(node, "handlers", []) for s in h.body]
        return all(_is_import(s) or isinstance(s, ast.Pass) for s in inner)
    return False


def _left_out(node: ast.stmt, lines: list[str]) -> set[int]:
    """The line numbers inside a definition that do not decide what it computes: deferred imports (a move rewrites
    them), docstrings, and ``raise`` statements (how a bad input fails, its message included, not what a good one
    gives: a changed condition before a raise still changes the key). A line is left out only when the statement
    starts it."""
    out = set()
    for sub in ast.walk(node):
        doc = (isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub.body
               and isinstance(sub.body[0], ast.Expr) and isinstance(sub.body[0].value, ast.Constant)
               and isinstance(sub.body[0].value.value, str))
        for s in ([sub.body[0]] if doc else []) + ([sub] if isinstance(sub, (ast.Import, ast.ImportFrom, ast.Raise))
                                                   else []):
            if lines[s.lineno - 1][:s.col_offset].strip() == "":  # the statement starts its line
                out.update(range(s.lineno, s.end_lineno + 1))
    return out


def _without_comments(text: str) -> str:
    """The text without its comments and blank lines (comments found by the tokenizer, so a '#' in a string stays)."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):  # a fragment the tokenizer cannot end (never a whole statement)
        return text
    lines = text.split("\n")
    for t in reversed([t for t in toks if t.type == tokenize.COMMENT]):
        row, col = t.start
        lines[row - 1] = lines[row - 1][:col].rstrip()
    return "\n".join(ln for ln in lines if ln.strip())


@functools.lru_cache(maxsize=256)
def _file_definitions(path: str, mtime_ns: int, size: int) -> tuple[Definition, ...]:
    source = Path(path).read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source, filename=path)
    out = []
    for i, node in enumerate(tree.body):
        docstring = i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(
            node.value.value, str)
        name = _binds(node)
        if docstring or _is_import(node) or name == "__all__":
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        drop = _left_out(node, lines)
        text = "\n".join(line for n, line in enumerate(lines[first - 1:node.end_lineno], first) if n not in drop)
        out.append((name or "", _without_comments(text)))
    return tuple(out)


def module_path(module: str) -> Path:
    """The source file of an importable module name (``tiedlm_lib.depth.readout``), found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ModuleNotFoundError(f"{module!r}: no Python source file for this module")
    return Path(spec.origin)


def definitions(modules: tuple[str, ...] = CODE_MODULES) -> list[Definition]:
    """Every top-level definition of ``modules`` (imports, the module docstring and ``__all__`` left out), sorted:
    the same list wherever in ``modules`` each definition lies."""
    out: list[Definition] = []
    for m in modules:
        st = module_path(m).stat()
        out.extend(_file_definitions(str(module_path(m)), st.st_mtime_ns, st.st_size))
    return sorted(out)


def code_fingerprint(modules: tuple[str, ...] = CODE_MODULES) -> str:
    h = hashlib.sha256()
    for name, text in definitions(modules):
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()[:16]


def _plain(x: Any) -> Any:
    """A JSON-able form of a key: arrays as lists, mappings with sorted string keys."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    raise TypeError(f"a memo key holds only numbers, strings, arrays, lists and mappings; got {type(x).__name__}")


def weights_fingerprint(run_dir: str | Path) -> str | None:
    """A hash of the run's trained weights (``model.safetensors``), so that a retrained or replaced run never reuses
    what was derived from the old weights; None where the directory holds none."""
    w = Path(run_dir) / "model.safetensors"
    return hashlib.sha256(w.read_bytes()).hexdigest()[:16] if w.is_file() else None


def _key_hash(key: Any, code: str, weights: str | None) -> str:
    blob = json.dumps({"key": _plain(key), "code": code, "weights": weights}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def memo_path(run_dir: str | Path, what: str, key: Mapping[str, Any], code: str | None = None) -> Path:
    """Where ``memoised`` keeps the result: ``<run dir>/derived/<what>-<hash>.json`` (its arrays in the ``.npz`` of the
    same name); ``code``: the code fingerprint (default: today's)."""
    if not what or not what.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"what must be a name of letters, digits, '-' and '_', got {what!r}")
    h = _key_hash(key, code or code_fingerprint(), weights_fingerprint(run_dir))
    return Path(run_dir) / "derived" / f"{what}-{h}.json"


class PickleRefused(RuntimeError):
    """A pickle where kept results are looked for: refused, never loaded."""


def refuse_pickles(run_dir: str | Path) -> None:
    """Raise ``PickleRefused`` naming the first pickle anywhere under the run's ``derived/``."""
    derived = Path(run_dir) / "derived"
    if not derived.is_dir():
        return
    found = sorted(p for p in derived.rglob("*") if p.suffix in PICKLE_SUFFIXES)
    if found:
        raise PickleRefused(
            f"{found[0]}{f' (and {len(found) - 1} more)' if len(found) > 1 else ''}: a pickle in a runs cache is "
            "refused and never loaded: unpickling runs whatever code its writer put in the file. Kept results are "
            "JSON + npz (tiedlm_lib.store.datafile). Delete it: the result is recomputed.")


def memoised(run_dir: str | Path, what: str, key: Mapping[str, Any], compute: Callable[[], T]) -> T:
    """``compute()``, or what an earlier call with the same run, ``what``, key and library code kept. The result may
    hold the types ``tiedlm_lib.store.datafile`` keeps; another is refused with a TypeError when it is written."""
    # the code read once: a result computed while a module is edited is filed and labelled under the code it started
    # with (reading it again at the write named the file by one fingerprint and labelled it with another)
    code = code_fingerprint()
    path = memo_path(run_dir, what, key, code)
    use = os.environ.get("TIEDLM_MEMO", "1") != "0"
    if use:
        refuse_pickles(run_dir)
        if path.exists():
            try:
                return datafile.read(path)[1]
            except datafile.Inconsistent as e:  # e.g. a write interrupted between the npz and the JSON
                warnings.warn(f"{e}: {what} is recomputed", stacklevel=2)
    out = compute()
    if use:
        datafile.write(path, out, _meta(what, key, code, CODE_MODULES), what=what)
    return out


def _meta(what: str, key: Any, code: str, modules: tuple[str, ...], **extra: Any) -> dict[str, Any]:
    return {"format": FORMAT, "what": what, "key": _plain(key), "code": code, "code_modules": list(modules), **extra}
