"""Derived results kept beside a run, so that long analyses resume instead of starting over.

Section 10's probe shares with 30 refits take hours at the cpu scale: more than one working session. ``memoised``
computes a result once per (run, what, key, code) and keeps it in ``<run dir>/derived/<what>-<hash>.json`` with its
arrays in ``<what>-<hash>.npz`` beside it (``tiedlm_lib.datafile``: data only, written atomically; the JSON starts
with the key and the code fingerprint, for a reader); a notebook interrupted halfway resumes at the first result it
has not kept. The hash covers the key (every argument that changes the result: documents, depths, probes, refits,
resamples, seeds), the run's weights and the code of the library modules that compute it (what they define, not
where: ``code_fingerprint``), so a changed estimator never reuses an old result and a moved one keeps its
results. ``TIEDLM_MEMO=0`` turns the reuse off (results are recomputed, nothing is read or written).

Kept results are data, never code: reading one parses JSON and an npz (``allow_pickle=False``) and builds only the
allowlisted types of ``tiedlm_lib.datafile``. A pickle in a run's ``derived/`` (where results were kept as pickles
before) is refused, never loaded, since unpickling runs whatever its writer chose. ``python -m tiedlm_lib.memo
migrate runs/cpu`` converted this project's own kept pickles once (``migrate``).
"""

from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import importlib.util
import io
import json
import os
import pickle
import subprocess
import sys
import tokenize
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from . import datafile

T = TypeVar("T")
# The modules whose code decides a derived result (a change to any of them recomputes every kept result). memo and
# datafile are not among them: how a result is stored does not change the result, and a change to the storage code
# must not silently invalidate every kept result (a format change is a migration, like ``migrate``).
CODE_MODULES = tuple(f"tiedlm_lib.{m}" for m in ("lens", "stats", "schedules", "model", "layout", "config",
                                                  "evaluation", "data", "dcp", "backprop", "exits", "paths",
                                                  "analysis"))
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
    """The source file of an importable module name (``tiedlm_lib.lens``), found without importing it."""
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


def memo_path(run_dir: str | Path, what: str, key: Mapping[str, Any]) -> Path:
    """Where ``memoised`` keeps the result: ``<run dir>/derived/<what>-<hash>.json`` (its arrays in the ``.npz`` of the
    same name)."""
    if not what or not what.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"what must be a name of letters, digits, '-' and '_', got {what!r}")
    h = _key_hash(key, code_fingerprint(), weights_fingerprint(run_dir))
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
            "JSON + npz (tiedlm_lib.datafile). Delete it (the result is recomputed), or, for a pickle this library "
            f"wrote under the code of issue 54's conversion, convert it: python -m tiedlm_lib.memo migrate "
            f"{Path(run_dir).parent}")


def memoised(run_dir: str | Path, what: str, key: Mapping[str, Any], compute: Callable[[], T]) -> T:
    """``compute()``, or what an earlier call with the same run, ``what``, key and library code kept. The result may
    hold the types ``tiedlm_lib.datafile`` keeps; another is refused with a TypeError when it is written."""
    path = memo_path(run_dir, what, key)
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
        datafile.write(path, out, _meta(what, key, code_fingerprint(), CODE_MODULES), what=what)
    return out


def _meta(what: str, key: Any, code: str, modules: tuple[str, ...], **extra: Any) -> dict[str, Any]:
    return {"format": FORMAT, "what": what, "key": _plain(key), "code": code, "code_modules": list(modules), **extra}


# ------------------------------------------------------------------------------------------ the one-off migration
# Until issue 54 kept results were pickles, ``<what>-<hash>.pkl`` beside a JSON of their key, hashed with a code
# fingerprint that also covered memo.py. LEGACY_MEMO is the last memo.py that wrote them: with it in memo's place,
# the fingerprint of the legacy module list over today's files equals the one the pickles were computed under exactly
# when no module that decides a result has changed since, which ``migrate`` checks before it converts anything.
LEGACY_CODE_MODULES = ("lens", "stats", "schedules", "model", "layout", "config", "evaluation", "data", "dcp",
                       "backprop", "exits", "paths", "memo", "analysis")
LEGACY_MEMO = "7f35d64148770fde6fe75f8a4bdbcba4ea2420c4:tiedlm_lib/memo.py"


def legacy_fingerprint(legacy_memo: bytes) -> str:
    """``code_fingerprint`` as the pickle-writing memo.py computed it: LEGACY_CODE_MODULES over today's files, with
    ``legacy_memo`` (that memo.py's source) in memo's place."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for m in LEGACY_CODE_MODULES:
        h.update(m.encode() + b"\0" + (legacy_memo if m == "memo" else (here / f"{m}.py").read_bytes()))
    return h.hexdigest()[:16]


def read_legacy_memo(spec: str = LEGACY_MEMO) -> bytes:
    """The legacy memo.py's source: ``REV:PATH`` from git (read only), or a file path."""
    if Path(spec).is_file():
        return Path(spec).read_bytes()
    root = Path(__file__).resolve().parent.parent
    return subprocess.run(["git", "show", spec], cwd=root, check=True, capture_output=True).stdout


class _TrustedPickle(pickle.Unpickler):
    """For ``migrate`` only, on pickles this library wrote: the globals those pickles name (numpy arrays, torch
    parameters, the allowlisted types) and nothing else; a torch storage is read by torch's weights-only loader."""

    ALLOWED = {("collections", "OrderedDict"), ("numpy", "dtype"), ("numpy", "ndarray"),
               ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
               ("numpy._core.multiarray", "scalar"), ("numpy.core.multiarray", "scalar"),
               ("torch._utils", "_rebuild_parameter"), ("torch._utils", "_rebuild_tensor_v2")}

    def find_class(self, module: str, name: str) -> Any:
        import torch

        if (module, name) == ("torch.storage", "_load_from_bytes"):
            return lambda b: torch.load(io.BytesIO(b), weights_only=True)
        full = f"{module}.{name}"
        if (module, name) in self.ALLOWED or full in datafile.DATACLASSES or full in datafile.CODECS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{full} is not a global a kept result may name")


def migrate(root: str | Path, legacy_memo: bytes, dry_run: bool = False) -> list[dict[str, Any]]:
    """Convert the kept pickles under ``root`` (a runs directory or one run) to ``datafile``'s JSON + npz, once.

    For each ``derived/<what>-<hash>.pkl``: its key JSON must name the same ``what``, the key with the code fingerprint
    it records and the run's weights must hash to ``<hash>`` (the name is the key's), and that fingerprint must be
    ``legacy_fingerprint(legacy_memo)``, i.e. no module that decides a result has changed since it was computed; a
    pickle that fails any of these is left where it is and reported (a stale result: delete it). A passing one is
    loaded (``_TrustedPickle``), written at ``memo_path`` for the same key (the JSON records the fingerprint it was
    computed under, its module list and the pickle's name), read back and compared with the pickle bit for bit
    (``datafile.same``); only then are the pickle and its key JSON deleted. Re-running it converts what is left.
    Returns one record per pickle (``status``: migrated, already, or skipped with ``why``)."""
    legacy = legacy_fingerprint(legacy_memo)
    out = []
    for pkl in sorted(p for p in Path(root).rglob("*.pkl") if p.parent.name == "derived"):
        rec: dict[str, Any] = {"pickle": str(pkl), "bytes_before": pkl.stat().st_size}
        out.append(rec)
        side = pkl.with_suffix(".json")
        what, _, old_hash = pkl.stem.rpartition("-")
        meta = json.loads(side.read_text()) if side.is_file() else {}
        run_dir = pkl.parent.parent
        why = ("no key JSON beside it" if not meta else
               f"its key JSON names {meta.get('what')!r}, its name {what!r}" if meta.get("what") != what else
               f"computed under code {meta.get('code')}, not {legacy} (today's code)" if meta.get("code") != legacy
               else "its key does not hash to its name" if _key_hash(meta["key"], legacy,
                                                                     weights_fingerprint(run_dir)) != old_hash
               else None)
        if why:
            rec.update(status="skipped", why=why)
            continue
        new = memo_path(run_dir, what, meta["key"])
        rec["json"] = str(new)
        if dry_run:
            rec["status"] = "would migrate"
            continue
        with open(pkl, "rb") as fh:
            obj = _TrustedPickle(fh).load()
        rec["status"] = "already" if new.exists() else "migrated"
        if not new.exists():
            datafile.write(new, obj, _meta(what, meta["key"], legacy, LEGACY_CODE_MODULES, migrated_from=pkl.name),
                           what=what)
        kept_meta, back = datafile.read(new)
        diff = datafile.same(obj, back) or ("the kept key differs" if kept_meta["key"] != meta["key"] else None)
        if diff:
            raise ValueError(f"{new} does not read back as {pkl}: {diff}; the pickle is kept")
        pkl.unlink()
        side.unlink()
        npz = new.with_suffix(".npz")
        rec["bytes_after"] = new.stat().st_size + (npz.stat().st_size if npz.exists() else 0)
    return out


# ---------------------------------------------------------------------------------------- the one-off re-keying
# Until issue 56 the code's key hashed the bytes of each file of FILE_SCHEME_MODULES (``file_fingerprint``), so moving
# or re-importing anything invalidated every kept result. ``rekey`` gives each kept result that today's files would
# find (its name hashes under today's file fingerprint) the name it has under today's definitions: the same code,
# named another way. It must run before any file is moved (the file scheme reads the old flat paths).
FILE_SCHEME_MODULES = ("lens", "stats", "schedules", "model", "layout", "config", "evaluation", "data", "dcp",
                       "backprop", "exits", "paths", "analysis")


def file_fingerprint(modules: tuple[str, ...] = FILE_SCHEME_MODULES) -> str:
    """The code's key before issue 56: the bytes of each module file under the package's folder."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for m in modules:
        h.update(m.encode() + b"\0" + (here / f"{m}.py").read_bytes())
    return h.hexdigest()[:16]


def rekey(root: str | Path, dry_run: bool = False) -> list[dict[str, Any]]:
    """Move each kept result under ``root`` (a runs directory or one run) from its name under the file scheme to its
    name under the definitions scheme, once.

    A result is moved when its JSON names the same ``what`` as its file and its key, with today's
    ``file_fingerprint()`` and the run's weights, hashes to its name (today's memo would have found it). It is read,
    written at ``memo_path`` (the JSON records ``rekeyed_from``: the old name and the code it recorded), read back and
    compared with the original (``datafile.same``); only then are the old JSON and npz deleted. A result that fails a
    check stays where it is and is reported (a stale result: delete it). Returns one record per kept JSON (``status``:
    rekeyed, current, would rekey, or skipped with ``why``)."""
    old, new = file_fingerprint(), code_fingerprint()
    out = []
    for js in sorted(p for p in Path(root).rglob("*.json") if p.parent.name == "derived"):
        meta = datafile.read_meta(js)
        what, _, h = js.stem.rpartition("-")
        run_dir = js.parent.parent
        rec: dict[str, Any] = {"json": str(js)}
        out.append(rec)
        if "key" in meta and memo_path(run_dir, what, meta["key"]) == js:
            rec["status"] = "current"
            continue
        why = ("not a kept result (no key)" if "key" not in meta else
               f"its JSON names {meta.get('what')!r}, its file {what!r}" if meta.get("what") != what else
               f"its key does not hash to its name under today's files ({old}): computed under other code"
               if _key_hash(meta["key"], old, weights_fingerprint(run_dir)) != h else None)
        if why:
            rec.update(status="skipped", why=why)
            continue
        target = memo_path(run_dir, what, meta["key"])
        rec["to"] = str(target)
        if dry_run:
            rec["status"] = "would rekey"
            continue
        _, obj = datafile.read(js)
        extra = {k: meta[k] for k in ("migrated_from",) if k in meta}
        datafile.write(target, obj, _meta(what, meta["key"], new, CODE_MODULES, **extra,
                                          rekeyed_from={"file": js.name, "code": meta.get("code")}), what=what)
        diff = datafile.same(obj, datafile.read(target)[1])
        if diff:
            raise ValueError(f"{target} does not read back as {js}: {diff}; the original is kept")
        npz = js.with_suffix(".npz")
        if npz.exists():
            npz.unlink()
        js.unlink()
        rec["status"] = "rekeyed"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiedlm_lib.memo", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("migrate", help=migrate.__doc__.split("\n\n")[0])
    m.add_argument("root", help="a runs directory (runs/cpu) or one run's directory")
    m.add_argument("--legacy-memo", default=LEGACY_MEMO,
                   help="the pickle-writing memo.py: git REV:PATH or a file (default %(default)s)")
    m.add_argument("--dry-run", action="store_true", help="check and list, convert nothing")
    r = sub.add_parser("rekey", help=rekey.__doc__.split("\n\n")[0])
    r.add_argument("root", help="a runs directory (runs/cpu) or one run's directory")
    r.add_argument("--dry-run", action="store_true", help="check and list, move nothing")
    a = ap.parse_args(argv)
    if a.cmd == "rekey":
        recs = rekey(a.root, dry_run=a.dry_run)
        for rec in recs:
            print(f"{rec['status']:>11}  {rec['json']}" + (f"  ({rec['why']})" if "why" in rec else ""))
        counts = {s: sum(rec["status"] == s for rec in recs) for s in ("rekeyed", "would rekey", "current", "skipped")}
        print(", ".join(f"{n} {s}" for s, n in counts.items()))
        return 0 if not counts["skipped"] else 1
    recs = migrate(a.root, read_legacy_memo(a.legacy_memo), dry_run=a.dry_run)
    for r in recs:
        print(f"{r['status']:>13}  {r['pickle']}" + (f"  ({r['why']})" if "why" in r else f"  -> {r.get('json')}"))
    done = [r for r in recs if "bytes_after" in r]
    print(f"{len(done)} of {len(recs)} pickles converted: {sum(r['bytes_before'] for r in done):,} bytes of pickle, "
          f"{sum(r['bytes_after'] for r in done):,} of JSON + npz")
    return 0 if all(r["status"] != "skipped" for r in recs) else 1


if __name__ == "__main__":
    sys.exit(main())
