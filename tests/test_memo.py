import dataclasses
import hashlib
import io
import json
import math
import pickle
import struct
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

from tiedlm_lib.store import datafile, memo

REPO = Path(__file__).resolve().parent.parent


def test_memoised_computes_once_per_key_and_code_and_keeps_the_key_readable(tmp_path, monkeypatch):
    calls = []

    def compute(v):
        def f():
            calls.append(v)
            return {"rows": [v], "reps": np.arange(3) * v}
        return f

    key = {"seed": 1, "docs": np.array([3, 1, 2]), "probes": ("head/diagonal",)}
    a = memo.memoised(tmp_path, "shares", key, compute(2))
    b = memo.memoised(tmp_path, "shares", dict(key), compute(99))  # the same key: kept, not recomputed
    assert calls == [2] and b["rows"] == [2] and np.array_equal(b["reps"], a["reps"])
    memo.memoised(tmp_path, "shares", {**key, "seed": 2}, compute(3))  # another key: computed
    memo.memoised(tmp_path, "shares", {**key, "docs": np.array([3, 1, 4])}, compute(4))  # other documents too
    assert calls == [2, 3, 4]
    kept = sorted((tmp_path / "derived").glob("shares-*.json"))
    doc = json.loads(kept[0].read_text())
    assert len(kept) == 3 and doc["what"] == "shares" and doc["code"] == memo.code_fingerprint()
    assert json.loads(memo.memo_path(tmp_path, "shares", key).read_text())["key"] == {
        "docs": [3, 1, 2], "probes": ["head/diagonal"], "seed": 1}  # the key, readable beside the result
    (tmp_path / "model.safetensors").write_bytes(b"retrained")
    memo.memoised(tmp_path, "shares", key, compute(7))  # other weights in the run directory: recomputed
    assert calls == [2, 3, 4, 7]
    calls.remove(7)
    (tmp_path / "model.safetensors").unlink()
    monkeypatch.setattr(memo, "code_fingerprint", lambda modules=memo.CODE_MODULES: "changed")
    memo.memoised(tmp_path, "shares", key, compute(5))  # changed library code: recomputed
    assert calls == [2, 3, 4, 5]
    monkeypatch.setenv("TIEDLM_MEMO", "0")
    memo.memoised(tmp_path, "shares", key, compute(6))  # reuse off
    derived = tmp_path / "derived"
    assert calls[-1] == 6 and len(list(derived.glob("*.json"))) == len(list(derived.glob("*.npz"))) == 5
    assert not [p for p in derived.iterdir() if p.suffix not in (".json", ".npz")]  # no pickle, no temporary file


def test_a_failed_computation_keeps_nothing_and_bad_keys_are_refused(tmp_path):
    def boom():
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        memo.memoised(tmp_path, "shares", {"seed": 0}, boom)
    assert not (tmp_path / "derived").exists() or not list((tmp_path / "derived").iterdir())
    with pytest.raises(TypeError, match="a memo key holds only"):
        memo.memoised(tmp_path, "shares", {"model": object()}, lambda: 1)
    with pytest.raises(ValueError, match="what must be a name"):
        memo.memoised(tmp_path, "../x", {"seed": 0}, lambda: 1)
    assert memo.code_fingerprint() == memo.code_fingerprint() and len(memo.code_fingerprint()) == 16


def test_the_storage_code_is_not_part_of_the_fingerprint():
    """A change to how results are stored must not invalidate every kept result (issue 54)."""
    assert "tiedlm_lib.store.memo" not in memo.CODE_MODULES and "tiedlm_lib.store.datafile" not in memo.CODE_MODULES


def _probe(form, d=4, seed=0):
    from tiedlm_lib.depth.readout import Probe

    torch.manual_seed(seed)
    p = Probe(form, d)
    with torch.no_grad():
        for t in p.parameters():
            t.add_(torch.randn_like(t))
    return p


def _every_kept_type():
    from tiedlm_lib.depth.dcp import Condition
    from tiedlm_lib.depth.readout import FittedProbe, ProbeSpec, ShareReplicates
    from tiedlm_lib.evaluation.analysis import HorizonPoint
    from tiedlm_lib.stats.bootstrap import Estimate, NLLStats, Resample

    odd_nan = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000123))[0]  # a negative NaN with a payload
    f64 = np.array([0.1, -0.0, np.nan, np.inf, -np.inf, 5e-324, odd_nan, 1e308])
    shared = np.arange(6, dtype=np.int64)
    stats = NLLStats(shared, f64[:6].copy(), np.full(6, 12), f64[:6] * 2, np.arange(6, dtype=np.int32))
    fits = {"head/temperature": FittedProbe(ProbeSpec("head", "temperature"), _probe("temperature"), None, (), {},
                                            40, 99),
            "head/diagonal": FittedProbe(ProbeSpec("head", "diagonal"), _probe("diagonal", seed=1), 1e-3,
                                         (1e-4, 1e-3, math.inf), {0.0: 3.5, 1e-3: 3.25, math.inf: 4.0}, 40, 99)}
    return {
        "scalars": [None, True, False, 0, -7, 2 ** 80, "", "ünï\u2028code", 0.1, -0.0, 1e-310, math.nan, math.inf,
                    -math.inf, odd_nan, 1.0000000000000002],
        "tuples": ((), (1, (2, "x")), ([3], {"a": (4,)})),
        "keys": {("prefix", 1): "tuple", 3: "int", -1.5: "float", math.inf: "inf", None: "none", True: "bool",
                 "$dollar": "a string key that looks like a tag", "plain": {"nested": {"ok": 1}}},
        "numpy scalars": [np.float64(0.1), np.float32(1 / 3), np.float16(-0.0), np.int64(-2 ** 62), np.uint8(255),
                          np.bool_(True), np.float64("nan")],
        "arrays": [f64, f64[:-1].astype(np.float32), np.array(3.5, dtype=np.float32), np.zeros((0, 3)),
                   np.asfortranarray(np.arange(12.0).reshape(3, 4)), np.arange(10)[::3], np.array([True, False]),
                   np.array([2 ** 64 - 1], dtype=np.uint64), np.array([1 + 2j], dtype=np.complex64),
                   np.arange(4, dtype=">i4"), shared, shared],
        "dataclasses": [stats, Estimate(0.5, 0.25, math.nan), Resample(300, 1000, 2),
                        ShareReplicates(shared, 0, f64, 0.04, 1e-5),
                        HorizonPoint(100, {1: stats, 16: stats}, {"A": {"norm": [1.0, 2.5]}}, {"A": 0.09}, None),
                        Condition("prefix", 4, stats, {"head/diagonal": stats}, fits,
                                  {"raw": {"ece": 0.05}}, math.nan)],
        "lists": [[], [[], [[1]]]],
    }


def test_every_kept_type_round_trips_bit_for_bit(tmp_path):
    obj = _every_kept_type()
    path = datafile.write(tmp_path / "r.json", obj, {"what": "probe_shares"})
    meta, back = datafile.read(path)
    assert meta["what"] == "probe_shares" and (tmp_path / "r.npz").exists()
    assert datafile.same(obj, back) is None
    assert type(back["tuples"]) is tuple and type(back["keys"]) is dict and list(back["keys"]) == list(obj["keys"])
    assert math.isnan(back["scalars"][11]) and struct.pack("<d", back["scalars"][14]) == struct.pack("<d",
                                                                                                    obj["scalars"][14])
    a = back["arrays"]
    assert a[4].shape == (3, 4) and a[2].shape == () and a[9].dtype == np.dtype(">i4")
    assert np.array_equal(a[0], obj["arrays"][0], equal_nan=True) and np.signbit(a[0][1])
    a[10][0] = 99  # an array held twice comes back as two arrays: the kept data is not aliased
    assert a[11][0] == 0
    p = back["dataclasses"][-1].fits["head/diagonal"].probe
    q = obj["dataclasses"][-1].fits["head/diagonal"].probe
    x = torch.randn(3, 4)
    assert torch.equal(p(x), q(x)) and all(t.requires_grad for t in p.parameters()) and p.training == q.training
    assert back["dataclasses"][-1].fits["head/diagonal"].holdout_nll == {0.0: 3.5, 1e-3: 3.25, math.inf: 4.0}
    # the comparison itself sees a single changed bit, a tuple read as a list and another dict order
    assert datafile.same(obj, {**back, "tuples": list(back["tuples"])}) is not None
    assert datafile.same(np.array([math.nan]), np.array([-math.nan])) is not None
    assert datafile.same({1: 1, 2: 2}, {2: 2, 1: 1}) is not None
    # a result without arrays needs no npz
    datafile.write(tmp_path / "plain.json", {"a": (1, 2.5)})
    assert not (tmp_path / "plain.npz").exists() and datafile.read(tmp_path / "plain.json")[1] == {"a": (1, 2.5)}


@dataclasses.dataclass
class Unlisted:
    x: int


@pytest.mark.parametrize("bad, name", [(object(), "builtins.object"), ({1, 2}, "builtins.set"),
                                       (OrderedDict(a=1), "collections.OrderedDict"), (Unlisted(1), "Unlisted"),
                                       (torch.zeros(2), "torch.Tensor"), (np.array([None]), "numpy.ndarray"),
                                       (np.datetime64(1, "D"), "numpy.datetime64"), (print, "builtin_function")])
def test_a_type_off_the_allowlist_is_refused_when_written(tmp_path, bad, name):
    with pytest.raises(TypeError, match=f"probe_shares: .*{name}"):
        memo.memoised(tmp_path, "probe_shares", {"seed": 0}, lambda: {"rows": [1, (2, bad)]})
    assert not list((tmp_path / "derived").glob("*.json"))  # nothing kept, nothing half-written


def test_a_registered_dataclass_is_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(datafile, "DATACLASSES", dict(datafile.DATACLASSES))
    datafile.register_dataclass(Unlisted)
    assert memo.memoised(tmp_path, "x", {}, lambda: Unlisted(3)) == Unlisted(3)
    assert memo.memoised(tmp_path, "x", {}, lambda: 1 / 0) == Unlisted(3)  # read back, not recomputed


def test_reading_builds_only_allowlisted_types_and_never_unpickles(tmp_path):
    def doc(result):
        return json.dumps({"what": "x", "arrays": None, "result": result})

    for result, match in [({"$dataclass": ["os.system", {}]}, "not on the allowlist"),
                          ({"$object": ["subprocess.Popen", ["ls"]]}, "not on the allowlist"),
                          ({"$dataclass": ["tiedlm_lib.depth.readout.Probe", {}]}, "not on the allowlist"),
                          ({"$eval": "1"}, "unknown tag"), ({"$tuple": [], "b": 1}, "one key")]:
        (tmp_path / "r.json").write_text(doc(result))
        with pytest.raises(ValueError, match=match):
            datafile.read(tmp_path / "r.json")
    buf = io.BytesIO()  # an npz member that only unpickling could read
    np.savez(buf, a0=np.array([{"x": 1}], dtype=object), allow_pickle=True)
    blob = buf.getvalue()
    (tmp_path / "r.npz").write_bytes(blob)
    recorded = {"file": "r.npz", "sha256": hashlib.sha256(blob).hexdigest()}
    (tmp_path / "r.json").write_text(json.dumps({"what": "x", "result": {"$array": ["a0", "|O", [1]]},
                                                 "arrays": recorded}))
    with pytest.raises(ValueError, match="allow_pickle"):
        datafile.read(tmp_path / "r.json")


class _Planted:
    """What an attacker would put in a pickle: loading it creates a file (here, harmlessly)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (Path(self.marker),)


@pytest.mark.parametrize("where", ["memo_path", "elsewhere"])
def test_a_pickle_in_a_runs_cache_is_refused_and_never_loaded(tmp_path, where):
    key, marker = {"seed": 0}, tmp_path / "pwned"
    path = memo.memo_path(tmp_path, "probe_shares", key)
    planted = path.with_suffix(".pkl") if where == "memo_path" else tmp_path / "derived" / "old" / "x.pickle"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(pickle.dumps(_Planted(marker)))
    calls = []
    with pytest.raises(memo.PickleRefused, match=f"{planted.name}.*refused and never loaded") as e:
        memo.memoised(tmp_path, "probe_shares", key, lambda: calls.append(1))
    assert str(planted) in str(e.value) and not marker.exists() and not calls
    if where == "memo_path":  # a kept JSON beside it changes nothing: the pickle is refused first
        planted.unlink()
        memo.memoised(tmp_path, "probe_shares", key, lambda: 1)
        planted.write_bytes(pickle.dumps(_Planted(marker)))
        with pytest.raises(memo.PickleRefused):
            memo.memoised(tmp_path, "probe_shares", key, lambda: 2)
        assert not marker.exists()


def test_an_npz_that_is_not_the_recorded_one_is_recomputed(tmp_path):
    key = {"seed": 0}
    memo.memoised(tmp_path, "x", key, lambda: np.arange(3))
    npz = memo.memo_path(tmp_path, "x", key).with_suffix(".npz")
    npz.write_bytes(datafile._npz_bytes({"a0": np.arange(3) + 1}))
    with pytest.warns(UserWarning, match="SHA-256 differs"):
        assert memo.memoised(tmp_path, "x", key, lambda: np.arange(3) * 2).tolist() == [0, 2, 4]
    assert memo.memoised(tmp_path, "x", key, lambda: 1 / 0).tolist() == [0, 2, 4]


def test_kept_results_that_name_their_types_by_the_flat_module_paths_read_under_todays(tmp_path):
    """Results kept before issue 56 name ``tiedlm_lib.lens.Probe``, ``tiedlm_lib.evaluation.NLLStats`` ...: read as
    today's types (``datafile.RENAMED``); a name neither today's nor renamed is still refused."""
    from tiedlm_lib.stats.bootstrap import NLLStats

    obj = {"stats": NLLStats(np.arange(3), np.array([0.5, np.nan, 1.0]), np.full(3, 4), np.ones(3), np.full(3, 4)),
           "probe": _probe("diagonal")}
    path = datafile.write(tmp_path / "r.json", obj)
    text = path.read_text()
    for new, old in (("tiedlm_lib.stats.bootstrap.NLLStats", "tiedlm_lib.evaluation.NLLStats"),
                     ("tiedlm_lib.depth.readout.Probe", "tiedlm_lib.lens.Probe")):
        assert datafile.RENAMED[old] == new and f'"{new}"' in text
        text = text.replace(f'"{new}"', f'"{old}"')
    path.write_text(text)
    assert datafile.same(obj, datafile.read(path)[1]) is None
    path.write_text(text.replace('"tiedlm_lib.evaluation.NLLStats"', '"tiedlm_lib.elsewhere.NLLStats"'))
    with pytest.raises(ValueError, match="not on the allowlist"):
        datafile.read(path)
    assert all(n.startswith("tiedlm_lib.") and n.count(".") >= 3 for n in datafile.RENAMED.values())


def test_the_committed_kept_results_are_data_only():
    """Every kept result shipped under runs/ is JSON + npz (issue 54): no pickle, each npz the one its JSON records."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "runs"], cwd=REPO, capture_output=True, text=True).stdout.split()
    # what ships is what git tracks: a developer's local smoke runs (ignored) are not the repository's
    derived = sorted({(REPO / p).parent for p in tracked if "/derived/" in p and p.endswith(".json")})
    if not derived:
        pytest.skip("no runs shipped in this checkout")
    assert not [p for d in derived for p in d.rglob("*") if p.suffix in memo.PICKLE_SUFFIXES]

    for d in derived:
        for j in d.glob("*.json"):
            doc = datafile.read_meta(j)
            assert doc["format"] == memo.FORMAT and j.name.startswith(doc["what"] + "-")
            if doc["arrays"]:
                npz = d / doc["arrays"]["file"]
                assert hashlib.sha256(npz.read_bytes()).hexdigest() == doc["arrays"]["sha256"], npz


def _package(root: Path, name: str, files: dict[str, str]) -> tuple[str, ...]:
    pkg = root / name
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    for f, text in files.items():
        (pkg / f"{f}.py").write_text(text)
    return tuple(f"{name}.{f}" for f in files)


def test_the_code_key_follows_what_the_modules_define_not_where(tmp_path, monkeypatch):
    """Issue 56: moving a definition between the deciding modules, reordering them, or rewriting an import keeps the
    key (kept results survive a reorganised tree); changing a definition's text changes it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    a = '''"""Module a."""
from __future__ import annotations

import math

SCALE = 2.0  # a constant decides results too


@staticmethod
def double(x):
    return SCALE * x


# a comment between definitions
def root(x):
    """The square root."""
    from p1 import b  # noqa: F401  (a deferred import: rewritten by a move, not part of the key)
    if x < 0:
        raise ValueError(f"root of a negative number: {x} (see p1.a)")
    return math.sqrt(x) if "#" else 0.0  # '#' in a string stays
'''
    b = '''import numpy as np

__all__ = ["mean"]


def mean(x):
    return float(np.mean(x))
'''
    key = memo.code_fingerprint(_package(tmp_path, "p1", {"a": a, "b": b}))
    # root moves from a to b, b's imports and __all__ are rewritten, the comment between definitions goes
    a2 = a[:a.index("# a comment")].rstrip() + "\n"
    b2 = ("import math\n\nimport numpy as np\n\n__all__ = ['mean', 'root']\n\n\n"
          + a[a.index("def root"):].replace("from p1 import b", "from p2 import b as bb") + "\n\n"
          + b[b.index("def mean"):])
    assert memo.code_fingerprint(_package(tmp_path, "p2", {"a": a2, "b": b2})) == key
    assert memo.code_fingerprint(_package(tmp_path, "p3", {"b": b2, "a": a2})) == key  # the list's order neither
    # the same definitions in one module
    assert memo.code_fingerprint(_package(tmp_path, "p4", {"ab": a + "\n" + b})) == key
    changed = {"body": a.replace("math.sqrt(x)", "math.sqrt(abs(x))"), "constant": a.replace("2.0", "3.0"),
               "decorator": a.replace("@staticmethod\n", ""), "condition": a.replace("x < 0", "x <= 0"),
               "a string": a.replace('if "#"', 'if "##"')}
    for i, (what, text) in enumerate(changed.items()):
        assert memo.code_fingerprint(_package(tmp_path, f"q{i}", {"a": text, "b": b})) != key, what
    # what never decides a result: a docstring, a comment, a blank line, how a bad input fails
    same = {"docstring": a.replace("The square root", "Root"), "comment": a.replace("# '#' in", "# a '#' in"),
            "blank": a.replace("    if x < 0:", "\n    if x < 0:"),
            "raise": a.replace('ValueError(f"root of a negative number: {x} (see p1.a)")',
                               'ArithmeticError(\n            f"no real root of {x} (see p2.b)")')}
    for i, (what, text) in enumerate(same.items()):
        assert memo.code_fingerprint(_package(tmp_path, f"r{i}", {"a": text, "b": b})) == key, what
    # a definition that leaves the deciding modules changes it too
    assert memo.code_fingerprint(_package(tmp_path, "p5", {"a": a2, "b": b})) != key
    with pytest.raises(ModuleNotFoundError, match="no Python source"):
        memo.code_fingerprint(("p1.missing",))


def test_the_library_key_is_its_definitions():
    defs = memo.definitions()
    names = {n for n, _ in defs}
    deciding = {"Probe", "bootstrap_indices", "TiedLM"}
    assert (deciding | {"code_fingerprint"}) & names == deciding  # memo itself is not a deciding module
    assert not [t for _, t in defs if t.startswith(("import ", "from "))]
    assert len(memo.code_fingerprint()) == 16


def test_every_shipped_kept_result_is_found_by_todays_code():
    """The kept results that ship (section 10's probe shares: hours at cpu) are the ones today's code looks up: a change
    to a deciding module that leaves them stale makes `make paper` recompute them silently, so it fails here first."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "runs"], cwd=REPO, capture_output=True, text=True).stdout.split()
    # what ships is what git tracks: a developer's local smoke runs (ignored) are not the repository's
    derived = sorted({(REPO / p).parent for p in tracked if "/derived/" in p and p.endswith(".json")})
    if not derived:
        pytest.skip("no runs shipped in this checkout")
    stale = []
    for d in derived:
        for j in d.glob("*.json"):
            meta = datafile.read_meta(j)
            if memo.memo_path(d.parent, meta["what"], meta["key"]) != j:
                stale.append(f"{j.relative_to(REPO)} (computed under code {meta['code']})")
    assert not stale, f"{len(stale)} kept results are not found by today's code, e.g. {stale[:3]}"


def test_a_result_is_named_and_labelled_by_the_code_it_started_with(tmp_path, monkeypatch):
    """A module edited while a result computes (hours, for a probe family): the file is named by the fingerprint read
    before computing and labelled with the same one, never by two."""
    prints = iter(["aaaa", "bbbb", "cccc"])
    monkeypatch.setattr(memo, "code_fingerprint", lambda *a: next(prints))
    memo.memoised(tmp_path, "thing", {"k": 1}, lambda: {"x": 1.0})
    (kept,) = (tmp_path / "derived").glob("*.json")
    assert datafile.read_meta(kept)["code"] == "aaaa"
    assert kept == memo.memo_path(tmp_path, "thing", {"k": 1}, "aaaa")
