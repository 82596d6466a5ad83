"""Derived results kept beside a run, so that long analyses resume instead of starting over.

Section 10's probe shares with 30 refits take hours at the cpu scale: more than one working session. ``memoised``
computes a result once per (run, what, key, code) and keeps it in ``<run dir>/derived/<what>-<hash>.pkl`` (written
atomically, with the key beside it as JSON for a reader); a notebook interrupted halfway resumes at the first result
it has not kept. The hash covers the key (every argument that changes the result: documents, depths, probes,
refits, resamples, seeds), the run's weights and the source of the library modules that compute it, so a changed
estimator never reuses an old result. ``TIEDLM_MEMO=0`` turns the reuse off (results are recomputed, nothing is
read or written).

The files are pickles written by this code into the user's own runs cache; load only caches you made or trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from .atomic import atomic_write, atomic_write_text

T = TypeVar("T")
# the modules whose code decides a derived result (a change to any of them recomputes every kept result)
CODE_MODULES = ("lens", "stats", "schedules", "model", "layout", "config", "evaluation", "data", "dcp", "backprop",
                "exits", "paths", "memo", "analysis")


def code_fingerprint(modules: tuple[str, ...] = CODE_MODULES) -> str:
    here = Path(__file__).parent
    h = hashlib.sha256()
    for m in modules:
        h.update(m.encode() + b"\0" + (here / f"{m}.py").read_bytes())
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


def memo_path(run_dir: str | Path, what: str, key: Mapping[str, Any]) -> Path:
    if not what or not what.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"what must be a name of letters, digits, '-' and '_', got {what!r}")
    blob = json.dumps({"key": _plain(key), "code": code_fingerprint(), "weights": weights_fingerprint(run_dir)},
                      sort_keys=True)
    return Path(run_dir) / "derived" / f"{what}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}.pkl"


def memoised(run_dir: str | Path, what: str, key: Mapping[str, Any], compute: Callable[[], T]) -> T:
    """``compute()``, or what an earlier call with the same run, ``what``, key and library code kept."""
    path = memo_path(run_dir, what, key)
    use = os.environ.get("TIEDLM_MEMO", "1") != "0"
    if use and path.exists():
        with open(path, "rb") as fh:
            return pickle.load(fh)
    out = compute()
    if use:
        atomic_write(path, lambda tmp: Path(tmp).write_bytes(pickle.dumps(out)))
        atomic_write_text(path.with_suffix(".json"), json.dumps({"what": what, "key": _plain(key),
                                                                 "code": code_fingerprint()}, indent=1))
    return out
