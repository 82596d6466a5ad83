"""Results kept as data, never as code: a JSON tree and an ``.npz`` of its arrays.

A pickle names callables that unpickling runs, so whoever can change a kept file can run code on the reader's
machine. What a clone of this project loads is JSON, CSV, npz or safetensors instead; this module is the JSON (+ npz)
codec of kept results (``tiedlm_lib.store.memo``). It writes

* ``None``, ``bool``, ``int``, ``str`` and finite ``float`` as themselves (a float as its shortest repr, which parses
  back to the same double); a list as a JSON array;
* everything else as a one-key object whose key starts with ``$``: ``{"$tuple": [...]}``; ``{"$dict": [[k, v],
  ...]}`` for a dict with a key that is not a string or starts with ``$`` (tuple, int and float keys stay what they
  were; a dict of plain string keys is a JSON object); ``{"$float": "nan" | "inf" | "-inf" | "bits:<16 hex>"}`` (a
  NaN other than the canonical one keeps its bits); ``{"$np": [dtype, value]}`` for a numpy scalar;
  ``{"$array": [name, dtype, shape]}`` for a numpy array, whose bytes are member ``name`` of the ``.npz`` beside the
  JSON (read with ``allow_pickle=False``: dtype, shape and every bit come back, NaNs included); ``{"$dataclass":
  [type, {field: value}]}`` and ``{"$object": [type, state]}`` for the types on the allowlist below.

Only types on the allowlist are written, by module-qualified name; any other is refused at write time with a
TypeError naming it. Reading looks the name up in the same allowlist (a name it does not hold is refused: the file
cannot make the reader import anything) and builds a dataclass by calling the class with its fields, so reading
runs only this library's own constructors on plain values. Dicts keep their order; the arrays of a result are
stored once per distinct content, and each place that held one gets its own copy back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import io
import json
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tiedlm_lib.store.atomic import atomic_write

ARRAY_KINDS = "biufc"  # bool, signed and unsigned integers, floats, complex: what np.load reads without pickle
CANONICAL_NAN = 0x7FF8000000000000

# The dataclasses a kept result may hold, by module-qualified name (the class is imported from the library only when
# a file names it). A notebook's own dataclass is registered with ``register_dataclass`` before its results are kept.
DATACLASSES: dict[str, type | None] = dict.fromkeys([
    "tiedlm_lib.evaluation.analysis.HorizonPoint",  # horizon_curve
    "tiedlm_lib.depth.dcp.Condition",  # conditions
    "tiedlm_lib.stats.bootstrap.NLLStats",
    "tiedlm_lib.evaluation.nll.DepthStats",
    "tiedlm_lib.depth.readout.ProbeSpec",
    "tiedlm_lib.depth.readout.FittedProbe",
    "tiedlm_lib.depth.readout.ShareReplicates",  # probe_shares
    "tiedlm_lib.stats.bootstrap.Estimate",
    "tiedlm_lib.stats.bootstrap.Resample",
])


@dataclasses.dataclass(frozen=True)
class Codec:
    """How a type that is not a dataclass is written as data: ``encode(obj)`` gives a tree of the types above,
    ``decode(tree)`` builds the object again."""

    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


def _probe_encode(p) -> dict[str, Any]:
    """A ``lens.Probe`` (a torch module) as its form, training flag and parameters; a probe that carries anything
    else (buffers, submodules, hooks, other attributes) is refused rather than kept in part."""
    extra = [k for k, v in vars(p).items() if not k.startswith("_") and k not in ("form", "training")]
    hooks = [k for k, v in vars(p).items() if k.endswith("hooks") and v]
    if extra or hooks or p._buffers or p._modules:
        raise TypeError(f"a lens.Probe is kept as its form and parameters only; this one also has "
                        f"{extra + hooks + list(p._buffers) + list(p._modules)}")
    return {"form": p.form, "training": p.training,
            "params": {n: [t.detach().cpu().numpy().copy(), t.requires_grad] for n, t in p._parameters.items()}}


def _probe_decode(state: dict[str, Any]):
    import torch

    Probe = _named_class(PROBE)  # by name, like the dataclasses: storage does not import the library above it
    params = state["params"]
    d = next((int(a.shape[0]) for a, _ in params.values() if a.ndim), 1)  # the temperature form has no width
    p = Probe(state["form"], d)
    if set(params) != set(p._parameters):
        raise ValueError(f"a {state['form']} probe has parameters {sorted(p._parameters)}, the file {sorted(params)}")
    for name, (a, grad) in params.items():
        setattr(p, name, torch.nn.Parameter(torch.from_numpy(a), requires_grad=bool(grad)))
    return p.train(bool(state["training"]))


# Types kept through their own codec, by module-qualified name (imported only when a file names one)
PROBE = "tiedlm_lib.depth.readout.Probe"
CODECS: dict[str, Codec] = {PROBE: Codec(_probe_encode, _probe_decode)}

# Kept results written before issue 56 name their types by the flat module paths they had then: read under today's.
RENAMED = {
    "tiedlm_lib.analysis.HorizonPoint": "tiedlm_lib.evaluation.analysis.HorizonPoint",
    "tiedlm_lib.dcp.Condition": "tiedlm_lib.depth.dcp.Condition",
    "tiedlm_lib.evaluation.NLLStats": "tiedlm_lib.stats.bootstrap.NLLStats",
    "tiedlm_lib.evaluation.DepthStats": "tiedlm_lib.evaluation.nll.DepthStats",
    "tiedlm_lib.lens.ProbeSpec": "tiedlm_lib.depth.readout.ProbeSpec",
    "tiedlm_lib.lens.FittedProbe": "tiedlm_lib.depth.readout.FittedProbe",
    "tiedlm_lib.lens.ShareReplicates": "tiedlm_lib.depth.readout.ShareReplicates",
    "tiedlm_lib.lens.Probe": PROBE,
    "tiedlm_lib.stats.Estimate": "tiedlm_lib.stats.bootstrap.Estimate",
    "tiedlm_lib.stats.Resample": "tiedlm_lib.stats.bootstrap.Resample",
}


def _named_class(name: str) -> type:
    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def qualname(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def register_dataclass(cls: type) -> type:
    """Allow the dataclass ``cls`` in kept results (usable as a decorator). Every field must be an ``__init__``
    argument, since reading calls the class with the fields."""
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
        raise TypeError(f"{cls!r} is not a dataclass")
    if any(not f.init for f in dataclasses.fields(cls)):
        raise TypeError(f"{qualname(cls)} has a field that is not an __init__ argument: it cannot be rebuilt from data")
    DATACLASSES[qualname(cls)] = cls
    return cls


def register_codec(cls: type, encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> None:
    """Allow ``cls`` (not a dataclass) in kept results, written as ``encode(obj)`` and read as ``decode(tree)``."""
    CODECS[qualname(cls)] = Codec(encode, decode)


def _allowed_class(name: str) -> type:
    """The class an allowlisted name stands for: its module imported, the class looked up (never a name the
    allowlist does not hold)."""
    if name not in DATACLASSES:
        raise ValueError(f"the file names the type {name!r}, which is not on the allowlist of kept dataclasses")
    cls = DATACLASSES[name]
    if cls is None:
        cls = _named_class(name)
        if not dataclasses.is_dataclass(cls) or qualname(cls) != name:
            raise TypeError(f"{name} is not the dataclass the allowlist names")
        DATACLASSES[name] = cls
    return cls


def _float_tag(x: float) -> str:
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    return "nan" if bits == CANONICAL_NAN else f"bits:{bits:016x}"


def _float_from_tag(s: str) -> float:
    if s in ("nan", "inf", "-inf"):
        return float(s)
    if s.startswith("bits:"):
        return struct.unpack("<d", struct.pack("<Q", int(s[5:], 16)))[0]
    raise ValueError(f"not a float tag: {s!r}")


class Encoder:
    """One result's tree and its arrays (``arrays``: npz member name -> array)."""

    def __init__(self, what: str = "result"):
        self.what = what
        self.arrays: dict[str, np.ndarray] = {}
        self._by_content: dict[tuple, str] = {}

    def _refuse(self, x: Any, why: str = "") -> TypeError:
        return TypeError(f"{self.what}: a kept result holds only None, bool, int, float, str, list, tuple, dict, "
                         f"numpy scalars and arrays, and the allowlisted types of tiedlm_lib.store.datafile "
                         f"(DATACLASSES, CODECS); got {qualname(type(x))}{why}")

    def array(self, a: np.ndarray) -> dict[str, Any]:
        if a.dtype.kind not in ARRAY_KINDS or a.dtype.fields is not None:
            raise self._refuse(a, f" of dtype {a.dtype} (kept arrays are bool, integer, float or complex)")
        c = np.array(a, order="C", copy=True)  # its bytes now: a later change to the caller's array is not kept
        content = (c.dtype.str, c.shape, hashlib.sha256(c.tobytes()).hexdigest())
        name = self._by_content.get(content)
        if name is None:
            name = self._by_content[content] = f"a{len(self.arrays)}"
            self.arrays[name] = c
        return {"$array": [name, c.dtype.str, list(c.shape)]}

    def __call__(self, x: Any) -> Any:
        t = type(x)
        if x is None or t in (bool, int, str):
            return x
        if t is float:
            return x if math.isfinite(x) else {"$float": _float_tag(x)}
        if t is list:
            return [self(v) for v in x]
        if t is tuple:
            return {"$tuple": [self(v) for v in x]}
        if t is dict:
            if all(type(k) is str and not k.startswith("$") for k in x):
                return {k: self(v) for k, v in x.items()}
            return {"$dict": [[self(k), self(v)] for k, v in x.items()]}
        if t is np.ndarray:
            return self.array(x)
        if isinstance(x, np.generic):
            if x.dtype.kind not in ARRAY_KINDS or x.dtype.kind == "c" or x.dtype.itemsize > 8:
                raise self._refuse(x, " (numpy scalars kept are bool, integer and float up to 64 bits)")
            return {"$np": [x.dtype.str, self(x.item())]}
        name = qualname(t)
        if dataclasses.is_dataclass(x) and name in DATACLASSES and _allowed_class(name) is t:
            return {"$dataclass": [name, {f.name: self(getattr(x, f.name)) for f in dataclasses.fields(x)}]}
        if name in CODECS:
            return {"$object": [name, self(CODECS[name].encode(x))]}
        raise self._refuse(x, " (a dataclass is kept once it is registered: datafile.register_dataclass)"
                           if dataclasses.is_dataclass(x) else "")


def decode(tree: Any, arrays: Any) -> Any:
    """The object a tree of ``Encoder`` stands for; ``arrays``: its npz (a mapping of member name -> array)."""
    if tree is None or type(tree) in (bool, int, float, str):
        return tree
    if type(tree) is list:
        return [decode(v, arrays) for v in tree]
    if type(tree) is not dict:
        raise ValueError(f"not a kept-result tree: {type(tree).__name__}")
    tags = [k for k in tree if k.startswith("$")]
    if not tags:
        return {k: decode(v, arrays) for k, v in tree.items()}
    if len(tree) != 1:
        raise ValueError(f"a tagged node has one key, got {sorted(tree)}")
    tag, body = next(iter(tree.items()))
    if tag == "$tuple":
        return tuple(decode(v, arrays) for v in body)
    if tag == "$dict":
        return {decode(k, arrays): decode(v, arrays) for k, v in body}
    if tag == "$float":
        return _float_from_tag(body)
    if tag == "$np":
        dtype, value = np.dtype(body[0]), decode(body[1], arrays)
        if dtype.kind not in ARRAY_KINDS:
            raise ValueError(f"not a kept numpy scalar type: {dtype}")
        return dtype.type(value)
    if tag == "$array":
        name, dtype, shape = body
        a = np.array(arrays[name])  # a copy per place that holds it
        if a.dtype.str != dtype or list(a.shape) != list(shape):
            raise ValueError(f"array {name} is {a.dtype.str} {list(a.shape)} in the npz, {dtype} {shape} in the JSON")
        return a
    if tag == "$dataclass":
        name, fields = body
        return _allowed_class(RENAMED.get(name, name))(**{k: decode(v, arrays) for k, v in fields.items()})
    if tag == "$object":
        name, state = body
        name = RENAMED.get(name, name)
        if name not in CODECS:
            raise ValueError(f"the file names the type {name!r}, which is not on the allowlist of kept types")
        return CODECS[name].decode(decode(state, arrays))
    raise ValueError(f"unknown tag {tag!r}")


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, allow_pickle=False, **arrays)
    return buf.getvalue()


def write(path: str | Path, obj: Any, meta: dict[str, Any] | None = None, what: str = "result") -> Path:
    """Keep ``obj`` at ``path`` (a ``.json``), with its arrays in ``path.with_suffix(".npz")`` when it holds any, and
    ``meta`` (plain JSON: the key, the code fingerprint) before it in the same JSON. Both files are written
    atomically, the npz first: the JSON, which records the npz's SHA-256, is what marks the result as kept. A type
    not on the allowlist is refused here, before anything is written."""
    path = Path(path)
    enc = Encoder(what)
    tree = enc(obj)
    doc = dict(meta or {})
    doc["arrays"] = None
    if enc.arrays:
        blob = _npz_bytes(enc.arrays)
        npz = path.with_suffix(".npz")
        atomic_write(npz, lambda tmp: Path(tmp).write_bytes(blob))
        doc["arrays"] = {"file": npz.name, "sha256": hashlib.sha256(blob).hexdigest()}
    doc["result"] = tree
    text = json.dumps(doc, indent=1, allow_nan=False)

    def w(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    atomic_write(path, w)
    return path


def read_meta(path: str | Path) -> dict[str, Any]:
    """The JSON of a kept result as written (its ``result`` still a tree)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


class Inconsistent(ValueError):
    """The npz beside a kept result is missing or is not the one its JSON records."""


def read(path: str | Path) -> tuple[dict[str, Any], Any]:
    """(meta, result) of a file ``write`` made. Nothing in the files is executed: the JSON is parsed, the npz is
    read with ``allow_pickle=False`` after its SHA-256 is checked against the JSON's record."""
    path = Path(path)
    doc = read_meta(path)
    if "result" not in doc or "arrays" not in doc:
        raise ValueError(f"{path} is not a kept result of tiedlm_lib.store.datafile (no 'result' and 'arrays')")
    arrays: dict[str, np.ndarray] = {}
    if doc["arrays"]:
        npz = path.parent / Path(doc["arrays"]["file"]).name
        try:
            blob = npz.read_bytes()
        except FileNotFoundError:
            raise Inconsistent(f"{npz}, the arrays of {path.name}, is missing") from None
        if hashlib.sha256(blob).hexdigest() != doc["arrays"]["sha256"]:
            raise Inconsistent(f"{npz} is not the npz {path.name} was written with (its SHA-256 differs)")
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    return {k: v for k, v in doc.items() if k != "result"}, decode(doc["result"], arrays)


def same(a: Any, b: Any, where: str = "result") -> str | None:
    """None if ``a`` and ``b`` are the same data, bit for bit (same types, dict order, float bits, array dtype, shape
    and bytes, NaN positions and payloads included); otherwise where they first differ."""
    if type(a) is not type(b):
        return f"{where}: {qualname(type(a))} vs {qualname(type(b))}"
    if a is None or type(a) in (bool, int, str):
        return None if a == b else f"{where}: {a!r} vs {b!r}"
    if type(a) is float:
        return None if struct.pack("<d", a) == struct.pack("<d", b) else f"{where}: {a!r} vs {b!r}"
    if type(a) in (list, tuple):
        if len(a) != len(b):
            return f"{where}: length {len(a)} vs {len(b)}"
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := same(x, y, f"{where}[{i}]"))), None)
    if type(a) is dict:
        if len(a) != len(b):
            return f"{where}: {len(a)} vs {len(b)} keys"
        for i, ((ka, va), (kb, vb)) in enumerate(zip(a.items(), b.items())):
            if d := same(ka, kb, f"{where}.keys()[{i}]") or same(va, vb, f"{where}[{ka!r}]"):
                return d
        return None
    if isinstance(a, np.ndarray | np.generic):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{where}: {a.dtype} {a.shape} vs {b.dtype} {b.shape}"
        ok = a.tobytes() == b.tobytes()  # C order, whatever either's layout
        if ok and a.dtype.kind in "fc":
            ok = np.array_equal(a, b, equal_nan=True)
        return None if ok else f"{where}: the arrays differ"
    if dataclasses.is_dataclass(a):
        return next((d for f in dataclasses.fields(a)
                     if (d := same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}"))), None)
    name = qualname(type(a))
    if name in CODECS:
        return same(CODECS[name].encode(a), CODECS[name].encode(b), f"{where}<{name}>")
    return f"{where}: cannot compare {name}"
