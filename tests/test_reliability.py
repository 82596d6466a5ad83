"""Faults and bad input: SIGKILL mid-training (in a real subprocess), a kill in the middle of a checkpoint write,
two processes asking for one run at once, another tokenizer behind a checkpoint, and a table of bad inputs that must
each fail with one clear line and leave nothing half-written."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from tiedlm_lib import experiment
from tiedlm_lib.model.checkpoint import CheckpointError, load_checkpoint, load_model
from tiedlm_lib.runs import get_run, is_complete, run_dir
from tiedlm_lib.training.loop import CKPT, FINAL, train

OVERRIDES = {"train.steps": 14, "train.checkpoint_every": 3, "train.log_every": 1}

# A child process that trains one smoke run through the runs cache. KILL_AT=n sends SIGKILL to itself inside the n-th
# training step (after its forward pass, before the update); TERM_AT=n sends SIGTERM there instead; KILL_IN_SAVE=n kills
# it while the n-th checkpoint is being written (the temporary file is half on disk, the rename has not happened). SLOW
# adds a pause per step.
CHILD = textwrap.dedent("""
    import json, os, signal, sys, time
    import torch
    import tiedlm_lib.model.checkpoint as ck
    import tiedlm_lib.training.loop as tr
    from tiedlm_lib.runs import get_run

    torch.set_num_threads(1)
    kill_at, kill_in_save = int(os.environ.get("KILL_AT", 0)), int(os.environ.get("KILL_IN_SAVE", 0))
    term_at = int(os.environ.get("TERM_AT", 0))
    slow = float(os.environ.get("SLOW", 0))
    calls = {"step": 0, "save": 0}
    real_loss, real_save = tr.supervised_loss, ck.save_file

    def loss(*a, **k):
        calls["step"] += 1
        if calls["step"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if calls["step"] == term_at:
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(slow)
        return real_loss(*a, **k)

    def save(tensors, path, metadata=None):
        calls["save"] += 1
        if calls["save"] == kill_in_save:
            real_save(tensors, path, metadata=metadata)
            with open(path, "r+b") as fh:
                fh.truncate(os.path.getsize(path) // 2)
            os.kill(os.getpid(), signal.SIGKILL)
        real_save(tensors, path, metadata=metadata)

    tr.supervised_loss, ck.save_file = loss, save
    while not os.path.exists(os.environ.get("GO", "/")):
        time.sleep(0.01)
    r = get_run("v3", "smoke", 0, json.loads(os.environ["OVERRIDES"]), progress=False)
    digest = sum(float(p.double().sum()) for p in r.model.state_dict().values())
    print(json.dumps({"fresh": r.fresh, "digest": digest, "final_loss": r.result["final_loss"]}))
""")


def _child(env_extra: dict[str, str], wait: bool = True):
    env = {**os.environ, "OVERRIDES": json.dumps(OVERRIDES), "OMP_NUM_THREADS": "1", **env_extra}
    p = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if not wait:
        return p
    out, err = p.communicate(timeout=300)
    return p.returncode, out, err


@pytest.fixture()
def runs_root(tmp_path, monkeypatch):
    monkeypatch.setenv("TIEDLM_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


def _reference(tmp_path, smoke_corpus):
    """The same run trained without interruption, in this process."""
    torch.set_num_threads(1)
    try:
        return train(experiment("v3", "smoke", 0, OVERRIDES), tmp_path / "ref", smoke_corpus, progress=False)
    finally:
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


def _assert_same_weights(path: Path, ref) -> None:
    got = load_model(path / FINAL)
    for (name, a), b in zip(ref.model.state_dict().items(), got.state_dict().values()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)


def test_sigkill_mid_training_then_restart_ends_where_an_uninterrupted_run_ends(runs_root, tmp_path, smoke_corpus):
    cfg = experiment("v3", "smoke", 0, OVERRIDES)
    path = run_dir(cfg)
    rc, out, err = _child({"KILL_AT": "8"})  # step index 7: checkpoints exist after steps 3 and 6
    assert rc == -signal.SIGKILL, err
    assert not is_complete(path), "a killed run must not look complete"
    assert load_checkpoint(path / CKPT)[1]["step"] == 6
    with pytest.raises(FileNotFoundError, match="not in the cache"):
        get_run(cfg, train_if_missing=False)
    rc, out, err = _child({})
    assert rc == 0, err
    res = json.loads(out)
    assert res["fresh"] is True and is_complete(path)
    ref = _reference(tmp_path, smoke_corpus)
    _assert_same_weights(path, ref)
    assert res["final_loss"] == pytest.approx(ref.final_loss, rel=1e-6)
    steps = [json.loads(line)["step"] for line in (path / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(14)), "the restart neither repeats nor loses log lines"


def test_sigterm_checkpoints_the_finished_step_and_a_restart_ends_as_an_uninterrupted_run(runs_root, tmp_path,
                                                                                         smoke_corpus):
    """SIGTERM (or SIGINT) inside step 5 lets the step finish, checkpoints after it and stops with a clear error,
    with no periodic checkpoint configured (checkpoint_every is a label: the same cache entry)."""
    cfg = experiment("v3", "smoke", 0, OVERRIDES)
    path = run_dir(cfg)
    rc, out, err = _child({"TERM_AT": "5", "OVERRIDES": json.dumps({**OVERRIDES, "train.checkpoint_every": 0})})
    assert rc == 1 and "TrainingInterrupted: training stopped by signal SIGTERM after step 5 of 14" in err, err
    assert not is_complete(path) and load_checkpoint(path / CKPT)[1]["step"] == 5
    rc, out, err = _child({})
    assert rc == 0, err
    _assert_same_weights(path, _reference(tmp_path, smoke_corpus))
    steps = [json.loads(line)["step"] for line in (path / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(14))


def test_sigkill_while_writing_a_checkpoint_keeps_the_previous_one(runs_root, tmp_path, smoke_corpus):
    path = run_dir(experiment("v3", "smoke", 0, OVERRIDES))
    rc, _, err = _child({"KILL_IN_SAVE": "2"})  # dies half-way through writing the step-6 checkpoint
    assert rc == -signal.SIGKILL, err
    assert load_checkpoint(path / CKPT)[1]["step"] == 3, "the step-3 checkpoint is intact"
    assert list(path.glob(f".{CKPT}.*.tmp")), "the half-written file stayed a temporary file"
    rc, out, err = _child({})
    assert rc == 0, err
    _assert_same_weights(path, _reference(tmp_path, smoke_corpus))


def test_two_processes_asking_for_one_run_train_it_once(runs_root, tmp_path):
    go = tmp_path / "go"
    procs = [_child({"GO": str(go), "SLOW": "0.05"}, wait=False) for _ in range(2)]
    time.sleep(1.0)
    go.touch()  # both start together; the run takes ≥ 0.7 s to train, so the second one must wait on the lock
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    assert sorted(r["fresh"] for r in results) == [False, True]
    assert results[0]["digest"] == results[1]["digest"]
    path = run_dir(experiment("v3", "smoke", 0, OVERRIDES))
    steps = [json.loads(line)["step"] for line in (path / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(14)), "trained exactly once"


def test_a_checkpoint_from_another_tokenizer_is_refused(tmp_path, smoke_corpus):
    import dataclasses

    from tiedlm_lib.data import train_tokenizer

    run = experiment("v3", "smoke", 0, {"train.steps": 6})
    train(run, tmp_path, smoke_corpus, progress=False, stop_after=2)
    other_tok = train_tokenizer(smoke_corpus.train_text["text"][:200], 320)
    other = dataclasses.replace(smoke_corpus, tokenizer=other_tok)
    before = (tmp_path / CKPT).read_bytes()
    with pytest.raises(CheckpointError, match="another tokenizer"):
        train(run, tmp_path, other, progress=False)
    assert (tmp_path / CKPT).read_bytes() == before, "the refused checkpoint is left untouched"


# ---------------------------------------------------------------------------------------------------- bad input
def _write(tmp: Path, name: str, data: bytes) -> str:
    p = tmp / name
    p.write_bytes(data)
    return str(p)


def _corpus(path: str):
    from tiedlm_lib.data import prepare_corpus
    from tiedlm_lib.model.config import DataConfig

    return prepare_corpus(DataConfig(corpus=path, vocab_size=320, seq_len=64))


def _cli(*argv: str):
    from tiedlm_lib.__main__ import main

    rc = main(list(argv))
    if rc != 0:
        raise SystemExit(rc)


def _model(**kw):
    from tiedlm_lib import ModelConfig

    return ModelConfig(**{"vocab_size": 64, "d_model": 32, "n_heads": 2, "layout": "S A*2 S", **kw})


def _train_cfg(**kw):
    from tiedlm_lib import TrainConfig

    return TrainConfig(**kw)


def _report(scale="smoke", seeds=(0,)):
    from tiedlm_lib.paper.report import Report

    return Report("00_test", scale, seeds=seeds)


def _tokenizer(path: str):
    from tiedlm_lib.data import load_tokenizer

    return load_tokenizer(path, 320)


# (id, thunk(tmp) -> None, exception, message pattern). Every case is one clear line naming the input.
BAD = [
    ("model heads", lambda t: _model(d_model=30, n_heads=4), ValueError, "d_model.*n_heads|n_heads.*d_model"),
    ("layout token", lambda t: _model(layout="S x*3 S"), ValueError, "unknown layout token 'x\\*3'"),
    ("layout count", lambda t: _model(layout="S A*0 S"), ValueError, "'A\\*0'.*count must be >= 1"),
    ("layout loop twice", lambda t: _model(layout="S A*2 S A*2"), ValueError, "tied loop 'A' appears twice"),
    ("backprop mode", lambda t: _train_cfg(backprop="phantom2"), ValueError, "backprop must be one of.*'phantom2'"),
    ("depth set", lambda t: _train_cfg(depths=(0, 2)), ValueError, "depths must be positive integers"),
    ("experiment name", lambda t: experiment("v99"), ValueError, "unknown experiment 'v99'"),
    ("override key", lambda t: experiment("v3", "smoke", 0, {"train.nope": 1}), ValueError,
     "unknown override 'train.nope'"),
    ("papermill scale", lambda t: _report(scale="huge"), ValueError, "unknown scale 'huge'"),
    ("papermill negative seed", lambda t: _report(seeds=[0, -1]), ValueError, "seed must be an integer >= 0, got -1"),
    ("papermill seeds not a list", lambda t: _report(seeds="0"), ValueError, "seeds must be a non-empty list"),
    ("papermill duplicate seeds", lambda t: _report(seeds=[1, 1]), ValueError, "seeds must be distinct"),
    ("corpus missing", lambda t: _corpus(str(t / "nope.jsonl")), FileNotFoundError, "corpus file not found"),
    ("corpus empty", lambda t: _corpus(_write(t, "empty.txt", b"\n\n  \n")), ValueError, "is empty"),
    ("corpus not UTF-8", lambda t: _corpus(_write(t, "latin.txt", "caf\xe9\n".encode("latin-1"))), ValueError,
     "latin.txt: not valid UTF-8"),
    ("corpus malformed JSONL", lambda t: _corpus(_write(t, "bad.jsonl", b'{"text": "a"}\n{"text": "b"}\n{"text": \n')),
     ValueError, "bad.jsonl:3: malformed JSON line"),
    ("corpus JSONL without text", lambda t: _corpus(_write(t, "f.jsonl", b'{"text": "a"}\n{"body": "b"}\n')),
     ValueError, "f.jsonl:2: expected a JSON object with a string field 'text'"),
    ("corpus extension", lambda t: _corpus(_write(t, "c.csv", b"a,b\n")), ValueError, "unsupported extension '.csv'"),
    ("tokenizer missing", lambda t: _tokenizer(str(t / "tok.json")), FileNotFoundError, "tokenizer file not found"),
    ("tokenizer garbage", lambda t: _tokenizer(_write(t, "tok.json", b"{not json")), ValueError,
     "tok.json: not a valid tokenizer.json"),
    ("checkpoint garbage", lambda t: load_model(_write(t, "m.safetensors", b"\x00" * 40)), CheckpointError,
     "not a readable tiedlm checkpoint"),
    ("cli experiment", lambda t: _cli("train", "v99", "--scale", "smoke"), SystemExit, None),
    ("cli scale", lambda t: _cli("train", "v3", "--scale", "huge"), SystemExit, None),
    ("cli --set", lambda t: _cli("train", "v3", "--scale", "smoke", "--set", "train.steps"), SystemExit, None),
    ("cli --set value", lambda t: _cli("train", "v3", "--scale", "smoke", "--set", "train.steps=-3"), SystemExit,
     None),
    ("cli --depths", lambda t: _cli("eval", "v3", "--scale", "smoke", "--depths", "1,two"), SystemExit, None),
    ("cli --taus", lambda t: _cli("eval", "v3", "--scale", "smoke", "--taus", "0.5,2"), SystemExit, None),
    ("cli negative seed", lambda t: _cli("train", "v3", "--scale", "smoke", "--seed", "-1"), SystemExit, None),
]

CLI_MESSAGES = {
    "cli experiment": "error: unknown experiment 'v99'",
    "cli scale": "error: unknown scale 'huge'",
    "cli --set": "error: --set expects KEY=VALUE",
    "cli --set value": "error: .*steps",
    "cli --depths": "error: --depths must be comma-separated integers, got '1,two'",
    "cli --taus": "error: --taus must be comma-separated thresholds in \\[0, 1\\]",
    "cli negative seed": "error: seed must be an integer >= 0, got -1",
}


def _files(*roots: str) -> set[str]:
    return {str(p) for r in roots if r and Path(r).exists() for p in Path(r).rglob("*")}


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_fails_with_one_clear_line_and_writes_nothing(case, tmp_path, capsys):
    name, thunk, exc, pattern = case
    (tmp_path / "in").mkdir()
    roots = (os.environ["TIEDLM_RUNS"], os.environ["TIEDLM_CACHE"])
    before = _files(*roots)
    with pytest.raises(exc) as info:
        thunk(tmp_path / "in")
    if exc is SystemExit:
        assert info.value.code == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "Traceback" not in err, err
        assert re.search(CLI_MESSAGES[name], err), err
    else:
        msg = str(info.value)
        assert "\n" not in msg, msg
        assert re.search(pattern, msg), msg
    assert _files(*roots) == before, "nothing may be written on bad input"
    assert {p.name for p in (tmp_path / "in").iterdir()} <= {"empty.txt", "latin.txt", "bad.jsonl", "f.jsonl",
                                                              "c.csv", "tok.json", "m.safetensors"}


def test_the_cli_exits_non_zero_as_a_process(tmp_path):
    env = {**os.environ, "TIEDLM_RUNS": str(tmp_path / "runs")}
    p = subprocess.run([sys.executable, "-m", "tiedlm_lib", "train", "v99"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and "unknown experiment 'v99'" in p.stderr
    assert not (tmp_path / "runs").exists()


def test_a_notebook_with_a_bad_parameter_stops_in_its_first_cell(tmp_path):
    """papermill injects the parameters; an unknown scale fails at the first code cell, before any training."""
    import papermill as pm

    root = Path(__file__).resolve().parents[1]
    with pytest.raises(pm.PapermillExecutionError) as info:
        pm.execute_notebook(str(root / "notebooks" / "01_architecture.ipynb"), str(tmp_path / "out.ipynb"),
                            parameters={"scale": "huge", "figures_dir": str(tmp_path / "f"),
                                        "paper_dir": str(tmp_path / "p")},
                            kernel_name="python3", progress_bar=False, cwd=str(root / "notebooks"))
    assert "unknown scale 'huge'" in str(info.value)
    assert not (tmp_path / "f").exists() and not (tmp_path / "p").exists()
