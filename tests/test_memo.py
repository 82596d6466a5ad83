import json

import numpy as np
import pytest

from tiedlm_lib import memo


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
    assert len(kept) == 3 and json.loads(kept[0].read_text())["what"] == "shares"
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
    assert calls[-1] == 6 and len(list((tmp_path / "derived").glob("*.pkl"))) == 5


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
