"""The paper scale on a CPU: minimind-format data, the exact configs for one step, data parallelism under torchrun,
and the GPU check script (run here on a tiny model)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tiedlm_lib import DataConfig, TiedLM, experiment, load_corpus, prepare_corpus, train
from tiedlm_lib.data import MINIMIND_HUB, load_conversations, rehearsal_corpus
from tiedlm_lib.model.checkpoint import load_model

ROOT = Path(__file__).resolve().parents[1]
PT_VERSIONS = ["v3", "v4", "v5", "v6", "v7", "v9", "v10", "v12", "v13", "v14"]
COUNTS = {"v3": 7_267_302, "v4": 7_267_302, "v5": 23_048_934, "v6": 23_048_934, "v7": 23_048_934,
          "v9": 23_048_935, "v10": 23_048_934, "v12": 23_048_933, "v13": 23_048_932, "v14": 23_048_931}


@pytest.fixture(scope="module")
def minimind(tmp_path_factory):
    """40 documents in minimind's pretraining format ({"text": ...}), Chinese-like and English, varying lengths: the
    rehearsal's generator at a tenth of its size."""
    return rehearsal_corpus(tmp_path_factory.mktemp("minimind") / "pretrain_hq.jsonl", n_docs=40)


@pytest.mark.parametrize("name", PT_VERSIONS)
def test_paper_config_trains_one_step_on_a_minimind_slice(name, minimind, monkeypatch):
    monkeypatch.setenv("TIEDLM_MINIMIND", str(minimind))
    run = experiment(name, "paper", overrides={"train.batch_size": 2})
    assert (run.data.vocab_size, run.data.seq_len, run.data.split) == (23005, 256, "paper")
    corpus = prepare_corpus(run.data)
    assert len(corpus.train) == 38 and len(corpus.val) == 2  # the original positional 95% / 5% split
    res = train(run, None, corpus, progress=False, stop_after=1)
    assert res.model.num_params() == COUNTS[name]
    assert res.metrics[0]["loss"] == pytest.approx(math.log(23005), abs=1e-3)  # 10.0435, the logs' step-0 loss


def test_paper_schedules_are_protocol_section_4(minimind, monkeypatch):
    monkeypatch.setenv("TIEDLM_MINIMIND", str(minimind))
    short = {n: experiment(n, "paper").train for n in ("v3", "v4", "v5", "v6")}
    assert {n: (t.steps, t.lr, t.lr_min, t.warmup, t.betas, t.batch_size) for n, t in short.items()} == {
        "v3": (3000, 6e-4, 6e-5, 0, (0.9, 0.999), 32), "v4": (3000, 6e-4, 6e-5, 0, (0.9, 0.999), 32),
        "v5": (3000, 4e-4, 4e-5, 0, (0.9, 0.999), 32), "v6": (3000, 4e-4, 4e-5, 0, (0.9, 0.999), 32)}
    for n in ("v7", "v9", "v10", "v12", "v13", "v14"):
        t = experiment(n, "paper").train
        assert (t.steps, t.lr, t.lr_min, t.warmup, t.betas, t.weight_decay, t.clip) == (
            39695, 4e-4, 4e-5, 1000, (0.9, 0.95), 0.01, 1.0)
        assert t.amp == "auto" and t.seed == 0 and t.data_seed == 42
    assert experiment("v7", "paper").train.backprop == "phantom"
    assert experiment("v4", "paper").train.depths == (1, 2, 4, 8, 16, 30)


def test_tokenised_cache_is_memory_mapped(minimind):
    cfg = DataConfig(corpus=str(minimind), vocab_size=400, seq_len=256, split="paper")
    first = prepare_corpus(cfg)
    again = prepare_corpus(cfg)
    assert isinstance(again.train.flat, np.memmap) and isinstance(again.train.offsets, np.memmap)
    assert np.array_equal(np.asarray(first.train.flat), np.asarray(again.train.flat))
    assert first.tokenizer.get_vocab_size() <= 400


def test_hub_loading_is_opt_in_and_fails_clearly_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="could not download 'pretrain_hq.jsonl'.*local path"):
        load_corpus(DataConfig(corpus=MINIMIND_HUB))
    with pytest.raises(ValueError, match="hub corpus must look like"):
        load_corpus(DataConfig(corpus="hf://only-one-part"))
    monkeypatch.delenv("TIEDLM_MINIMIND", raising=False)
    with pytest.raises(ValueError, match="TIEDLM_MINIMIND.*hf://jingyaogong/minimind_dataset"):
        experiment("v5", "paper")


def test_sft_conversations_load_and_validate(tmp_path):
    good = tmp_path / "sft_mini_512.jsonl"
    good.write_text(json.dumps({"conversations": [{"role": "user", "content": "你好"},
                                                  {"role": "assistant", "content": "你好！"}]},
                               ensure_ascii=False) + "\n", encoding="utf-8")
    ds = load_conversations(good)
    assert ds[0]["conversations"][1] == {"role": "assistant", "content": "你好！"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + '{"conversations": [{"role": "user"}]}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: expected"):
        load_conversations(bad)
    with pytest.raises(FileNotFoundError):
        load_conversations(tmp_path / "missing.jsonl")


def test_torchrun_two_processes_equal_one_process(tmp_path):
    """Data parallelism: 2 gloo processes, each on half the global batch, end with the weights of one process on
    the whole batch; only rank 0 logs and writes."""
    ov = ["--set", "train.steps=4", "--set", "train.log_every=1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TIEDLM_RUNS": str(tmp_path)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "tiedlm_lib",
           "train", "v4", "--scale", "smoke", *ov, "--runs", str(tmp_path)]
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count("trained now") == 1  # rank 0 reports
    [run_dir] = list((tmp_path / "smoke").glob("v4-s0-*"))
    assert json.loads((run_dir / "result.json").read_text())["processes"] == 2
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2, 3]
    cfg = experiment("v4", "smoke", overrides={"train.steps": 4, "train.log_every": 1})
    single = train(cfg, None, progress=False)
    ddp = load_model(run_dir / "model.safetensors", cfg.model)
    for (n, a), b in zip(single.model.state_dict().items(), ddp.state_dict().values()):
        assert torch.allclose(a, b, atol=2e-5, rtol=1e-4), n
    ddp_loss = json.loads((run_dir / "result.json").read_text())["final_loss"]
    assert ddp_loss == pytest.approx(single.final_loss, abs=1e-5)


def test_batch_not_divisible_by_processes_is_refused(monkeypatch):
    import tiedlm_lib.training.distributed as d

    monkeypatch.setattr(d, "rank_world", lambda: (0, 3))
    with pytest.raises(ValueError, match="batch_size 8 is not divisible by the number of processes 3"):
        train(experiment("v3", "smoke"), None, progress=False)


def test_gpu_check_script_runs_on_cpu(tmp_path):
    out = tmp_path / "check.csv"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu", "--scale",
                        "smoke", "--batch", "4", "--steps", "3", "--warmup", "1", "--csv", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "phantom" in p.stdout and "checkpoint" in p.stdout and "x1.00 of full" in p.stdout
    assert len(out.read_text().splitlines()) == 4


def test_compile_option_is_part_of_the_config():
    cfg = experiment("v3", "smoke", overrides={"train.compile": True})
    assert cfg.train.compile and cfg.fingerprint() != experiment("v3", "smoke").fingerprint()
    assert TiedLM(cfg.model).num_params() > 0


def test_notebook_runs_list_every_run_once_with_bases_before_continuations():
    from tiedlm_lib.runs.registry import notebook_runs

    runs = notebook_runs("cpu")
    keys = [(c.train.seed, c.cache_name()) for c in runs]
    assert len(keys) == len(set(keys)) and {c.train.seed for c in runs} == set(range(10))
    names = {c.name for c in runs}
    assert {"v3", "v4", "v5", "v6", "v7", "v9", "v9c", "v10", "v12", "v13", "v14", "v14c", "v14u", "v3-sft-paper",
            "v3-sft-masked", "dcp-fixed", "dcp-sampled"} <= names
    position = {f"{c.train.seed}/{c.cache_name()}": i for i, c in enumerate(runs)}
    for i, c in enumerate(runs):  # a continuation starts from a run trained earlier in the list
        if c.train.init_from:
            base = c.train.init_from.split("/")[1]
            assert position[f"{c.train.seed}/{base}"] < i, c.name
    per_seed = lambda scale, **kw: [c for c in notebook_runs(scale, **kw)  # noqa: E731
                                    if not c.name.startswith(("horizon-", "ladder-"))]
    assert len(per_seed("smoke")) == len(per_seed("cpu", extended=[])) // 5  # the horizon study and the ladder have
    # their own seeds; the ladder's v3-v6 points are the sections' runs, so nothing else it trains is per seed
    with pytest.raises(ValueError, match="seeds must be"):
        notebook_runs("cpu", [])


def test_extended_seeds_train_only_the_preregistered_small_model_runs():
    from tiedlm_lib.runs.registry import EXTENDED, extended_seeds, notebook_runs, section_runs

    runs = notebook_runs("cpu")
    extra = [c for c in runs if c.train.seed >= 5]  # docs/statistics.md amendment 14
    assert sorted({c.name for c in extra}) == ["dcp-sampled", "v14", "v14u", "v3", "v4"]
    assert len(extra) == 5 * 5 and {c.train.seed for c in extra} == {5, 6, 7, 8, 9}
    v14 = {c.train.steps for c in extra if c.name.startswith("v14")}
    assert v14 == {c.train.steps for c in runs if c.name == "v14" and c.train.seed == 0} == {800}  # as 07 runs them
    arm = next(c for c in extra if c.name == "dcp-sampled" and c.train.seed == 7)
    assert arm.train.init_from.split("/")[1] in {c.cache_name() for c in extra if c.name == "v3"}
    assert extended_seeds("cpu") == [5, 6, 7, 8, 9] and extended_seeds("cpu", [0]) == []  # own seeds: none
    assert extended_seeds("cpu", [0, 5], [5, 6]) == [6] and extended_seeds("smoke") == []
    assert {c.train.seed for c in notebook_runs("cpu", [0])} == {0}
    assert {c.train.seed for c in notebook_runs("cpu", [0], [6])} == {0, 6}
    by = section_runs("cpu")
    for sec, cfgs in by.items():  # only the sections EXTENDED names read seeds 5-9
        names = {("sampled" if c.name == "dcp-sampled" else c.name) for c in cfgs if c.train.seed >= 5}
        assert all(sec in EXTENDED[n] for n in names), (sec, names)
        assert bool(names) == (sec in {"04", "07", "12"}), sec
    with pytest.raises(ValueError, match="extended seeds must be"):
        extended_seeds("cpu", None, 5)


def test_section_runs_split_notebook_runs_by_the_sections_that_ask_for_them():
    from tiedlm_lib.runs.registry import notebook_runs, section_runs

    runs = notebook_runs("cpu")
    key = lambda c: f"{c.train.seed}/{c.cache_name()}"  # noqa: E731
    order = {key(c): i for i, c in enumerate(runs)}
    by = section_runs("cpu")
    assert sorted(by) == ["01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "12", "14"]  # 11 trains nothing
    assert {key(c) for cfgs in by.values() for c in cfgs} == set(order)  # every run belongs to some section
    for sec, cfgs in by.items():
        keys = [key(c) for c in cfgs]
        assert keys == sorted(keys, key=order.get) and len(keys) == len(set(keys)), sec  # notebook_runs' order
        for c in cfgs:  # a section's continuation comes with its base: the section can run on these alone
            if c.train.init_from:
                assert f"{c.train.seed}/{c.train.init_from.split('/')[1]}" in keys, (sec, c.name)
        if sec == "14":  # the size ladder trains ahead of its section (issue 55); tests/test_ladder.py checks its runs
            continue
        src = next((ROOT / "notebooks").glob(f"{sec}_*.py")).read_text()
        for c in cfgs:  # each run is one the section's source asks for
            asks = ("sft_run(" if "-sft-" in c.name else "intervention_arm(" if c.name.startswith("dcp-")
                    else 'get_run(f"horizon-{' if c.name.startswith("horizon-") else f'"{c.name}"')
            assert asks in src, (sec, c.name)
    assert {c.name for c in by["12"]} == {"v3", "v4", "dcp-sampled"} and len(by["12"]) == 3 * 5 + 5  # v4 also at 5-9
    assert {c.name for c in by["08"]} == {"v3", "v3-sft-paper", "v3-sft-masked"}
    assert {c.train.backprop for c in by["02"] if c.name == "v3"} >= {"full", "phantom", "phantom-last"}


def test_train_all_trains_and_reports_by_section(tmp_path, capsys):
    from tiedlm_lib.__main__ import main

    assert main(["train-all", "--scale", "smoke", "--sections", "99", "--runs", str(tmp_path)]) == 2
    assert "--sections '99': ['99'] train no runs; expected section numbers among ['01'" in capsys.readouterr().err
    assert main(["train-all", "--scale", "smoke", "--sections", "08_sft_generation", "--status",
                 "--runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "0 of 3 runs done" in out and "sections with every run done: none; waiting: 08 (3 of 3 runs left" in out
    assert "v4" not in out  # only section 08's runs


def test_the_plan_prices_every_run_from_logged_or_scaled_step_times(capsys):
    from tiedlm_lib.paper.build import main
    from tiedlm_lib.runs.registry import plan_rows

    rows = plan_rows("paper")
    v5 = next(r for r in rows if r["run"] == "v5" and r["basis"] == "logged")
    assert v5["ms/step"] == 143 and v5["GPU hours"] == pytest.approx(3000 * 0.143 / 3600)
    assert v5["params"] == 23_048_934 and v5["disk MB"] == pytest.approx(23_048_934 * 4 / 2 ** 20)
    # the paper scale trains the paper's own runs in every section (23M, 39,695 steps), priced at their logged times
    v10 = next(r for r in rows if r["run"] == "v10")
    assert (v10["params"], v10["steps"], v10["basis"]) == (23_048_934, 39_695, "logged")
    assert next(r for r in rows if r["run"] == "v7")["basis"] == "logged"  # the phantom run's own time
    # a variant of a logged run (another block form) is not priced at the logged time
    assert [r["basis"] for r in rows if r["run"] == "v5"] == ["logged", "scaled from v5"]
    mine = plan_rows("paper", step_ms={"v5": 100.0})
    assert next(r for r in mine if r["run"] == "v5")["basis"] == "measured"
    assert main(["--scale", "paper", "--plan"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == len(rows) + 2 and "GPU hours" in out


def test_train_all_under_torchrun_trains_once_then_reads_the_cache(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TIEDLM_RUNS": str(tmp_path)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "tiedlm_lib",
           "train-all", "--scale", "smoke", "--only", "v4", "--runs", str(tmp_path)]
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "1 runs at scale smoke, 0 already in the cache" in p.stdout and p.stdout.count("trained now") == 1
    [run_dir] = list((tmp_path / "smoke").glob("v4-s0-*"))
    assert json.loads((run_dir / "result.json").read_text())["processes"] == 2
    again = subprocess.run([sys.executable, "-m", "tiedlm_lib", "train-all", "--scale", "smoke", "--only", "v4",
                            "--runs", str(tmp_path)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "from the cache" in again.stdout
    bad = subprocess.run([sys.executable, "-m", "tiedlm_lib", "train-all", "--scale", "smoke", "--only", "v99"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--only names ['v99']" in bad.stderr


def test_train_all_reverse_trains_each_base_before_its_continuation(tmp_path):
    """A continuation (here paper B's intervention arm, listed alone; --reverse meets every continuation before its
    base) gets its base trained first, in the --runs root the user
    named, not in the default runs directory (here an empty folder of its own, so a lookup there would fail)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TIEDLM_RUNS": str(tmp_path / "default")}
    runs = tmp_path / "mine"
    p = subprocess.run([sys.executable, "-m", "tiedlm_lib", "train-all", "--scale", "smoke", "--only",
                        "dcp-sampled", "--reverse", "--runs", str(runs)], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("1 runs at scale smoke") and "[1/1] dcp-sampled seed 0" in p.stdout, p.stdout
    sft = json.loads(next((runs / "smoke").glob("dcp-sampled-s0-*/config.json")).read_text())
    base = runs / sft["train"]["init_from"]  # relative to the --runs root
    assert base.is_file() and (base.parent / "result.json").is_file()
    assert not (tmp_path / "default").exists() or not any((tmp_path / "default").rglob("*.safetensors"))


def test_cache_status_reports_done_partial_and_missing_runs_with_estimates(tmp_path, capsys):
    from tiedlm_lib.__main__ import main
    from tiedlm_lib.runs.cache import cache_status, get_run, run_dir

    v3, v4, v5 = (experiment(n, "smoke") for n in ("v3", "v4", "v5"))
    fresh = cache_status([v3, v4], tmp_path)
    assert [r["status"] for r in fresh] == ["missing", "missing"] and fresh[0]["estimate s"] is None
    done = get_run(v3, root=tmp_path, progress=False)
    partial = run_dir(v4, tmp_path)
    partial.mkdir(parents=True)
    (partial / "metrics.jsonl").write_text('{"step": 10, "loss": 5.0}\n{"step": 20, "loss": 4.0}\n')
    rows = {r["run"]: r for r in cache_status([v3, v4, v5], tmp_path)}
    secs = done.result["seconds"]
    assert rows["v3"]["status"] == "done" and rows["v3"]["seconds"] == pytest.approx(secs)
    assert rows["v4"]["status"] == "partial" and rows["v4"]["done steps"] == 20
    # v4 supervises several depths (another cost key): v3's seconds per step, scaled by applications x width^2
    assert rows["v4"]["estimate s"] == pytest.approx((v4.train.steps - 20) * secs / v3.train.steps)
    assert rows["v5"]["estimate s"] == pytest.approx(v5.train.steps * secs / v3.train.steps * (48 / 32) ** 2)
    assert main(["train-all", "--scale", "smoke", "--only", "v3,v4", "--status", "--runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "done" in out and "partial" in out and "runs done" in out and "left, about" in out


def test_paper_scale_sft_uses_the_original_recipe(monkeypatch):
    from tiedlm_lib.runs import sft_run
    from tiedlm_lib.runs.registry import SFT_LR, SFT_STEPS, notebook_runs

    monkeypatch.setenv("TIEDLM_MINIMIND", "minimind.jsonl")
    cfg = sft_run(experiment("v13", "paper"), "v13-sft-paper")
    assert (cfg.train.steps, cfg.train.lr, cfg.train.lr_min, cfg.train.schedule) == (SFT_STEPS, SFT_LR, SFT_LR,
                                                                                     "constant") == (
        28_304, 1e-4, 1e-4, "constant")
    assert cfg.train.init_from.startswith("paper/v13-s0-")  # from the base run's final weights, a fresh optimiser
    assert all(c.train.steps == SFT_STEPS for c in notebook_runs("paper") if "-sft-" in c.name)
    small = sft_run(experiment("v3", "cpu"), "v3-sft-paper")
    assert small.train.steps == 250 and small.train.lr == experiment("v3", "cpu").train.lr / 4


def test_rehearsal_trains_exactly_the_paper_scale_models(monkeypatch):
    """The rehearsal differs from the paper scale in budgets and data only: the same runs by name and seed, each with
    the paper's exact model, sequence length, vocabulary, split, depth set and backprop, and the original SFT lr."""
    from tiedlm_lib.runs.registry import SCALES, SFT_LR, notebook_runs

    monkeypatch.setenv("TIEDLM_MINIMIND", "minimind.jsonl")
    monkeypatch.setattr("tiedlm_lib.data.rehearsal_corpus", lambda: Path("/fixture.jsonl"))  # configs only
    paper, rehearsal = notebook_runs("paper"), notebook_runs("rehearsal")  # one code path: the same runs in order
    assert len(rehearsal) == len(paper) == 32  # v14u (A16's under-iterated layout), then the three horizon runs
    for p, c in zip(paper, rehearsal):
        k = (p.name, p.train.seed, p.model.block, p.train.backprop)
        assert (c.name, c.train.seed, c.data.task, c.data.sft_loss) == (p.name, p.train.seed, p.data.task,
                                                                        p.data.sft_loss), k
        assert (c.train.steps == SCALES["rehearsal"].long_steps) == (p.train.steps == SCALES["paper"].long_steps), k
        assert c.model == p.model, k
        assert (c.data.seq_len, c.data.vocab_size, c.data.split) == (p.data.seq_len, p.data.vocab_size, p.data.split)
        assert (c.train.depths, c.train.backprop, c.train.depth_sampling, c.train.pad_targets, c.train.betas) == (
            p.train.depths, p.train.backprop, p.train.depth_sampling, p.train.pad_targets, p.train.betas), k
        assert c.train.steps <= 6 and c.train.batch_size == 2 and c.scale == "rehearsal"
        assert c.data.corpus == "/fixture.jsonl"
        if "-sft-" in c.name:
            assert c.train.lr == SFT_LR
    assert SCALES["rehearsal"].K == 30 and SCALES["rehearsal"].vocab_size == 23005


def test_rehearsal_budgets_name_real_notebook_parameters():
    """A budget the rehearsal passes must be a parameter the notebook declares, as papermill itself parses the
    parameters cell (it injects an unknown name with only a warning), and --rehearse refuses any scale but paper."""
    import nbformat
    from papermill.translators import PythonTranslator

    from tiedlm_lib.paper.build import main
    from tiedlm_lib.paper.execute import REHEARSAL_PARAMS, _cell_parameters

    for stem, budget in REHEARSAL_PARAMS.items():
        path = ROOT / "notebooks" / f"{stem}.ipynb"
        assert path.is_file(), stem
        declared = _cell_parameters(json.loads(path.read_text())["cells"], ("parameters",))
        cell = next(c for c in nbformat.read(path, 4).cells if "parameters" in c.metadata.get("tags", []))
        parsed = {p.name for p in PythonTranslator.inspect(cell)}
        assert parsed == set(declared), (stem, set(declared) ^ parsed)  # papermill parses every parameter line
        assert set(budget) <= parsed, (stem, set(budget) - parsed)
        for name, value in budget.items():
            assert type(value) is type(declared[name]) or declared[name] is None, (stem, name)
    assert main(["--scale", "cpu", "--rehearse"]) == 1


def test_rehearsal_fixture_is_minimind_format_and_deterministic(tmp_path):
    from tiedlm_lib.data import _read_jsonl, rehearsal_corpus, train_tokenizer

    a = rehearsal_corpus(tmp_path / "a.jsonl", n_docs=40)
    b = rehearsal_corpus(tmp_path / "b.jsonl", n_docs=40)
    assert a.read_bytes() == b.read_bytes()
    texts = _read_jsonl(a, "text")
    assert len(texts) == 40 and all(t.startswith("<|im_start|>") and t.endswith("<|im_end|>") for t in texts)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in texts[0]) and texts[1].isascii()
    assert train_tokenizer(texts, 23005).get_vocab_size() > 2000  # the full 240-document fixture reaches 23005
    with pytest.raises(ValueError, match="n_docs must be an integer >= 20"):
        rehearsal_corpus(tmp_path / "c.jsonl", n_docs=5)


def test_the_horizon_study_uses_the_paper_long_run_recipe_over_the_scale_horizon(monkeypatch):
    """cpu: 13,000 steps (13x the short run), warm-up the paper's fraction (1,000 of 39,695 -> 327), cosine to a
    tenth, betas (0.9, 0.95), the small sandwich; weights kept at 1k, 2k, 4k, 8k; at the paper scale the paper's own
    39,695 steps with its 1,000-step warm-up."""
    for mode in ("full", "phantom", "phantom-last"):
        c = experiment(f"horizon-{mode}", "cpu", 3)
        assert (c.train.steps, c.train.warmup, c.train.betas) == (13_000, 327, (0.9, 0.95))
        assert c.train.keep_weights_at == (1000, 2000, 4000, 8000) and c.train.backprop == mode
        assert c.train.lr_min == pytest.approx(c.train.lr / 10) and c.train.schedule == "cosine"
        assert c.model == experiment("v3", "cpu", 3).model  # d64, K = 16: the short run's model
    monkeypatch.setenv("TIEDLM_MINIMIND", "minimind (a config reads no data)")
    paper = experiment("horizon-full", "paper")
    assert (paper.train.steps, paper.train.warmup, paper.train.keep_weights_at) == (39_695, 1000,
                                                                                    (3000, 6000, 12000, 24000))
    smoke = experiment("horizon-phantom", "smoke")
    assert smoke.train.steps == 120 and smoke.train.keep_weights_at == (30, 60)


def test_gpu_first_run_script_runs_at_smoke_on_cpu(tmp_path):
    """The prepared first GPU run (benchmarks/gpu_first_run.py) end to end at smoke size: every step writes its
    report rows, the trained run lands in the script's own runs folder and section 03 executes into its folder."""
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_first_run.py"), "--smoke", "--device", "cpu",
                        "--steps", "2", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600, cwd=ROOT,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    rows = pd.read_csv(tmp_path / "report.csv")
    assert list(rows.step.unique()) == ["modes", "train", "section", "total"]
    # two models x (three modes x (time, memory) + the phantom/full time and memory ratios A9 judges)
    assert len(rows[rows.step == "modes"]) == 2 * (3 * 2 + 2)
    assert (rows.value > 0).all() and rows.value.notna().all()
    ratio = rows[rows.what == "v3 phantom / full memory"].value.iloc[0]
    v3 = rows.set_index("what").value
    assert ratio == pytest.approx(v3[[w for w in v3.index if "phantom peak_GiB" in w][0]]
                                  / v3[[w for w in v3.index if "full peak_GiB" in w][0]])
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from gpu_first_run import tf32
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    before = torch.backends.cuda.matmul.allow_tf32
    with tf32(not before):
        assert torch.backends.cuda.matmul.allow_tf32 is (not before)
    assert torch.backends.cuda.matmul.allow_tf32 is before  # TF32 is scoped to a measurement, then restored
    assert "| modes | v3" in (tmp_path / "report.md").read_text()
    assert any((tmp_path / "runs" / "smoke").glob("v3-s0-*/model.safetensors"))
    assert (tmp_path / "tables" / "03_depth_scaling-k_sweep.csv").is_file()
    assert not (ROOT / "runs" / "first-run").exists()  # nothing written into the project's runs


def test_first_run_scale_is_the_paper_scale_cut_to_a_few_hundred_steps_on_the_fixture(monkeypatch, tmp_path):
    monkeypatch.setenv("TIEDLM_MINIMIND", str(tmp_path / "pretrain_hq.jsonl"))  # the paper's corpus, by path only
    for name in ("v3", "v5"):
        first, paper = experiment(name, "first-run"), experiment(name, "paper")
        assert first.model == paper.model and first.train.batch_size == paper.train.batch_size == 32
        assert first.train.steps == 300 and "rehearsal" in first.data.corpus
        assert paper.data.corpus.endswith("pretrain_hq.jsonl")
        assert first.fingerprint() != paper.fingerprint()
