import dataclasses
import json
import time
from pathlib import Path

import pytest

from tiedlm_lib import EXPERIMENTS, SCALES, DataConfig, ModelConfig, TiedLM, TrainConfig, experiment, get_run, train
from tiedlm_lib.__main__ import main
from tiedlm_lib.model.checkpoint import CheckpointError, load_model, save_checkpoint, save_model
from tiedlm_lib.runs import StaleRunError, run_dir, split_iters


@pytest.mark.parametrize("scale", ["smoke", "cpu"])
@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_builds_at_every_local_scale(name, scale):
    run = experiment(name, scale)
    s = SCALES[scale]
    total = sum(run.model.trained_depth.values())
    assert total == (0 if name in ("v9", "v9c") else s.K)  # the vanilla stacks have no loop
    assert run.model.vocab_size == run.data.vocab_size == s.vocab_size
    assert TiedLM(run.model).num_params() > 0


def test_paper_scale_needs_the_minimind_path(monkeypatch, tmp_path):
    monkeypatch.delenv("TIEDLM_MINIMIND", raising=False)
    with pytest.raises(ValueError, match="set TIEDLM_MINIMIND"):
        experiment("v5", "paper")
    monkeypatch.setenv("TIEDLM_MINIMIND", str(tmp_path / "pretrain_hq.jsonl"))
    v5, v7, v10 = (experiment(n, "paper") for n in ("v5", "v7", "v10"))
    assert (v5.train.steps, v5.train.lr, v5.train.lr_min, v5.train.warmup, v5.train.betas) == (
        3000, 4e-4, 4e-5, 0, (0.9, 0.999))
    assert (v10.train.steps, v10.train.warmup, v10.train.betas, v10.train.backprop) == (
        39695, 1000, (0.9, 0.95), "full")
    assert v7.train.backprop == "phantom"
    v4 = experiment("v4", "paper")
    assert v4.train.depths == (1, 2, 4, 8, 16, 30) and v4.train.lr == 6e-4 and v4.model.d_model == 128


def test_multi_loop_layouts_scale_with_k():
    assert split_iters(30, 4) == [8, 8, 7, 7] and split_iters(30, 3) == [10, 10, 10]
    assert experiment("v13", "cpu").model.layout == "S A*6 B*5 C*5 S"
    assert experiment("v12", "cpu").model.layout == "S A*8 S B*8 S"
    assert experiment("v14", "cpu").model.layout == "S A*4 B*4 C*4 D*4"
    # A16's under-iterated layout: v14 with its last loop given an eighth of K (2 of 16 at cpu)
    assert experiment("v14u", "cpu").model.layout == "S A*5 B*5 C*4 D*2"


def test_seed_and_overrides_change_the_identity():
    a, b = experiment("v3", "smoke"), experiment("v3", "smoke", seed=1)
    assert (b.train.seed, b.train.data_seed) == (1, 43) and a.fingerprint() != b.fingerprint()
    c = experiment("v3", "smoke", overrides={"model.block": "residual"})
    assert c.model.block == "residual" and c.fingerprint() != a.fingerprint()
    assert experiment("v3", "smoke", overrides={"train.log_every": 99}).fingerprint() == a.fingerprint()
    with pytest.raises(ValueError, match="unknown override 'train.stepz'"):
        experiment("v3", "smoke", overrides={"train.stepz": 5})
    with pytest.raises(ValueError, match="unknown experiment 'v99'"):
        experiment("v99", "smoke")
    with pytest.raises(ValueError, match="unknown scale 'laptop'"):
        experiment("v3", "laptop")
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        experiment("v3", "smoke", seed=-1)


def test_runs_cache_trains_once_and_reuses(tmp_path):
    ov = {"train.steps": 4}
    r1 = get_run("v4", "smoke", overrides=ov, root=tmp_path, progress=False)
    assert r1.dir == run_dir(r1.config, tmp_path) and r1.result["steps"] == 4
    assert not (r1.dir / "checkpoint.safetensors").exists()
    stamp = (r1.dir / "model.safetensors").stat().st_mtime_ns
    t = time.perf_counter()
    r2 = get_run("v4", "smoke", overrides=ov, root=tmp_path, progress=False)
    assert time.perf_counter() - t < 5 and (r2.dir / "model.safetensors").stat().st_mtime_ns == stamp
    assert all((a == b).all() for a, b in zip(r1.model.state_dict().values(), r2.model.state_dict().values()))
    assert "loss_by_depth" in r1.metrics[0]
    with pytest.raises(FileNotFoundError, match="not in the cache"):
        get_run("v4", "smoke", seed=3, overrides=ov, root=tmp_path, train_if_missing=False)


def test_an_incomplete_run_is_resumed_not_reused(tmp_path):
    from tiedlm_lib.training.loop import train

    cfg = experiment("v3", "smoke", overrides={"train.steps": 6, "train.checkpoint_every": 2})
    train(cfg, run_dir(cfg, tmp_path), progress=False, stop_after=3)  # as if the process had died
    r = get_run(cfg, root=tmp_path, progress=False)
    assert r.result["steps"] == 6 and [m["step"] for m in r.metrics if "loss" in m] == [0, 5]


def test_a_horizon_run_serves_its_kept_weights_and_is_refused_without_them(tmp_path):
    from tiedlm_lib.training.loop import kept_weights_name

    cfg = experiment("horizon-phantom", "smoke", overrides={"train.steps": 9, "train.keep_weights_at": (3, 6)})
    r = get_run(cfg, root=tmp_path, progress=False)
    assert r.kept_steps == [3, 6, 9] and r.model_at(9) is r.model
    at3 = r.model_at(3)
    saved = load_model(r.dir / kept_weights_name(3), cfg.model)
    assert all((a == b).all() for a, b in zip(at3.state_dict().values(), saved.state_dict().values()))
    assert not (at3.state_dict()["head.weight"] == r.model.state_dict()["head.weight"]).all()
    with pytest.raises(ValueError, match=r"kept its weights at steps \[3, 6, 9\], not at 4"):
        r.model_at(4)
    (r.dir / kept_weights_name(6)).unlink()
    with pytest.raises(StaleRunError, match="lacks the weights it was to keep at steps \\[6\\]"):
        get_run(cfg, root=tmp_path, progress=False)


def test_horizon_curve_evaluates_each_kept_point_and_keeps_the_result(tmp_path, monkeypatch):
    from tiedlm_lib.evaluation.analysis import heldout, horizon_curve, log_slope
    from tiedlm_lib.evaluation.nll import evaluate_nll

    cfg = experiment("horizon-full", "smoke", overrides={"train.steps": 9, "train.keep_weights_at": (3, 6)})
    r = get_run(cfg, root=tmp_path, progress=False)
    curve = horizon_curve(r, [4, 1, 2], n_docs=24)
    assert [p.step for p in curve] == [3, 6, 9] and sorted(curve[0].nll) == [1, 2, 4]
    for p in (curve[0], curve[-1]):  # another code path: evaluate_nll of the model at that step, one depth
        direct = evaluate_nll(r.model_at(p.step), heldout(cfg, 24)(), depth=2)
        assert p.nll[2].masked == pytest.approx(direct.masked, rel=1e-6)
        assert p.alpha == pytest.approx(r.model_at(p.step).alphas())
    assert curve[0].nll[4].masked != pytest.approx(curve[-1].nll[4].masked)  # the points differ
    assert len(curve[-1].norms["A"]["norm"]) == 5  # z_0..z_K at the trained depth K = 4
    from tiedlm_lib.evaluation.analysis import train_sample

    on_train = evaluate_nll(r.model, train_sample(r.config)())
    assert curve[-1].train_nll.masked == pytest.approx(on_train.masked, rel=1e-6)
    assert len(curve[-1].train_nll.doc_index) == 512 and curve[-1].train_nll.masked != curve[-1].nll[4].masked
    assert list(r.dir.glob("derived/horizon_curve-*.json"))  # kept beside the run (JSON + npz: store.datafile)
    again = horizon_curve(r, [1, 2, 4], n_docs=24)  # read back: the same numbers
    assert [p.nll[4].masked for p in again] == [p.nll[4].masked for p in curve]
    assert log_slope([1000, 2000, 4000], [0.5, 0.7, 0.9]) == pytest.approx(0.2)  # per doubling
    with pytest.raises(ValueError, match="at least two distinct steps"):
        log_slope([1000], [0.5])


def test_cli_train_eval_and_errors(tmp_path, capsys):
    args = ["--scale", "smoke", "--set", "train.steps=3", "--runs", str(tmp_path)]
    assert main(["train", "v3", *args]) == 0
    assert "final loss" in capsys.readouterr().out
    assert main(["eval", "v3", *args, "--no-train", "--docs", "20"]) == 0
    out = capsys.readouterr().out
    assert "k sweep" in out and "fallback" in out
    report = json.loads(next(tmp_path.glob("smoke/v3-*/eval.json")).read_text())
    assert [r["k"] for r in report["k_sweep"]] == [1, 2, 4, 8] and len(report["exit"]) == 12
    assert main(["eval", "v9", *args, "--set", "train.warmup=0", "--docs", "10"]) == 0  # loopless: one NLL
    capsys.readouterr()
    assert main(["eval", "v3", *args, "--set", "model.layout=S A*2 B*1 S", "--docs", "10"]) == 0  # unequal loops
    out = capsys.readouterr().out
    assert "the trained model (loops {'A': 2, 'B': 1})" in out and "exits not run" in out
    report = json.loads(next(p for p in tmp_path.glob("smoke/v3-*/eval.json") if "k_sweep_every_loop" in
                             p.read_text()).read_text())
    assert [r["k"] for r in report["k_sweep_every_loop"]] == [1, 2] and "exit" not in report
    assert main(["info", "v5", "--scale", "paper"]) == 0 and "23,048,934" in capsys.readouterr().out
    assert main(["list"]) == 0

    assert main(["train", "v3", "--scale", "laptop"]) == 2
    assert "unknown scale 'laptop'" in capsys.readouterr().err
    assert main(["train", "v3", "--scale", "smoke", "--set", "train.steps"]) == 2
    assert "--set expects KEY=VALUE" in capsys.readouterr().err
    assert main(["train", "v3", "--scale", "smoke", "--set", "model.layout=S Q-1"]) == 2
    assert "unknown layout token 'Q-1'" in capsys.readouterr().err
    assert main(["eval", "v3", *args, "--depths", "1,x"]) == 2
    assert "--depths must be comma-separated integers" in capsys.readouterr().err
    assert main(["eval", "v3", *args, "--depths", "0,2"]) == 2
    assert "--depths must be positive integers" in capsys.readouterr().err


def test_cache_keys_are_stable():
    """The runs cache is keyed by a config hash. A change here invalidates every cached run — make it deliberately
    (and say so), never by accident. (Changed once, deliberately, when the hash became the non-default fields.)"""
    assert experiment("v3", "cpu").fingerprint() == "0d88ba255076"
    assert experiment("v3", "cpu", overrides={"model.block": "residual"}).fingerprint() == "f4b9b20e4ab9"
    assert experiment("v6", "cpu").fingerprint() == "b28017627668"
    assert experiment("v3", "cpu", overrides={"data.split": "paper"}).fingerprint() != "0d88ba255076"


def _with_new_field(cfg, section: str, value=None):
    """``cfg`` as if its ``section`` dataclass had gained a field ``new_option`` (default 0) since it was cached."""
    old = getattr(cfg, section)
    grown = dataclasses.make_dataclass(type(old).__name__, [("new_option", int, 0)], bases=(type(old),), frozen=True)
    kw = {f.name: getattr(old, f.name) for f in dataclasses.fields(old)}
    return dataclasses.replace(cfg, **{section: grown(**kw, **({} if value is None else {"new_option": value}))})


@pytest.mark.parametrize("section", ["model", "train", "data"])
def test_a_new_field_with_a_default_keeps_every_key_and_a_set_one_changes_it(section):
    for name in ("v3", "v4", "v9", "v13"):
        cfg = experiment(name, "cpu")
        assert _with_new_field(cfg, section).fingerprint() == cfg.fingerprint()  # no silent invalidation
        assert _with_new_field(cfg, section, 0).fingerprint() == cfg.fingerprint()  # the default, set explicitly
        assert _with_new_field(cfg, section, 3).fingerprint() != cfg.fingerprint()  # no wrong reuse


def test_a_changed_default_is_caught_instead_of_reusing_the_old_entry(tmp_path):
    """An entry trained when train.clip defaulted to 0.5 hashes like today's default config (clip 1.0 is left out of
    the hash as a default); its stored config.json gives it away, and the cache refuses it by name."""
    cfg = experiment("v3", "smoke")
    path = run_dir(cfg, tmp_path)
    path.mkdir(parents=True)
    stored = cfg.to_dict()
    stored["train"]["clip"] = 0.5
    del stored["data"]["conversations"]  # a field the entry predates is no difference (it holds its default)
    (path / "config.json").write_text(json.dumps(stored))
    (path / "result.json").write_text("{}")
    save_model(path / "model.safetensors", TiedLM(cfg.model), cfg)
    with pytest.raises(StaleRunError, match=r"train.clip: checkpoint 0.5 vs requested 1.0.*a default changed"):
        get_run(cfg, root=tmp_path, train_if_missing=False)
    stored["train"]["clip"] = 1.0
    (path / "config.json").write_text(json.dumps(stored))
    assert not get_run(cfg, root=tmp_path, train_if_missing=False).fresh


def test_size_override_and_the_added_controls():
    small = experiment("v10", "cpu", 0, {"size": "small"})
    assert small.model.d_model == 64 and small.train.lr == 2e-3 and small.model.layout == "S S A*16 S S"
    assert experiment("v14c", "cpu").model.layout == "S A*4 B*4 C*4 D*4 S"
    assert experiment("v9c", "cpu").model.layout == "S*20"  # one layer per layer application of S S A*16 S S
    with pytest.raises(ValueError, match="size must be 'small' or 'large'"):
        experiment("v10", "cpu", 0, {"size": "huge"})
    assert experiment("v10", "cpu", 0, {"size": "large"}).fingerprint() == experiment("v10", "cpu").fingerprint()


def test_every_config_default_is_locked():
    """The runs cache hashes only non-default fields, so a default is part of what a cached run means. A new field's
    default must reproduce the behaviour from before it existed, and a changed default makes old cache entries that
    predate the field hash like new ones. Changing tests/data/config_defaults.json is how such a change is made
    deliberately (say so in the commit)."""
    locked = json.loads((Path(__file__).parent / "data" / "config_defaults.json").read_text())
    now = {cls.__name__: {f.name: json.loads(json.dumps(
        f.default if f.default is not dataclasses.MISSING else f.default_factory())) for f in dataclasses.fields(cls)}
        for cls in (ModelConfig, TrainConfig, DataConfig)}
    assert now == locked


def test_a_model_file_that_predates_a_field_loads_and_a_checkpoint_without_its_run_is_refused(tmp_path, smoke_corpus):
    cfg = experiment("v3", "smoke", overrides={"train.steps": 2})
    model = TiedLM(cfg.model)
    meta = {"model": {k: v for k, v in dataclasses.asdict(cfg.model).items() if k != "extra_pos_rows"}}
    save_checkpoint(tmp_path / "old.safetensors", model.state_dict(), meta)  # written before extra_pos_rows existed
    assert load_model(tmp_path / "old.safetensors", cfg.model).config == cfg.model
    with pytest.raises(CheckpointError, match="another model configuration"):
        load_model(tmp_path / "old.safetensors", dataclasses.replace(cfg.model, extra_pos_rows=0))
    meta["model"]["removed_option"] = 3  # a field this version no longer has
    save_checkpoint(tmp_path / "gone.safetensors", model.state_dict(), meta)
    with pytest.raises(CheckpointError, match="cannot be read by this version"):
        load_model(tmp_path / "gone.safetensors", cfg.model)
    save_checkpoint(tmp_path / "checkpoint.safetensors", model.state_dict(), {"model": meta["model"], "step": 1})
    with pytest.raises(CheckpointError, match="records no run configuration"):
        train(cfg, tmp_path, smoke_corpus, progress=False)


def test_scale_changes_list_what_differs_from_the_paper_and_each_scale_says_how_it_was_chosen():
    from tiedlm_lib.runs.registry import scale_changes

    rows = {r["quantity"]: r for r in scale_changes("cpu")}
    assert rows["loop depth K"]["paper"] == "30" and rows["loop depth K"]["cpu"] == "16" and rows["loop depth K"][
        "changed"]
    assert not any(r["changed"] for r in scale_changes("paper"))
    # each run family's real steps (the sections' v9-v14 at cpu are the small size for 0.8 x the short run)
    assert rows["v7 (section 06), v9-v14, v9c: steps and size"]["cpu"] == "800, small"
    assert rows["long-run steps (section 02's v7 and long runs)"]["cpu"] == "1500"
    assert rows["horizon study steps (section 02)"]["cpu"] == "13000"
    assert all(s.chosen for s in SCALES.values())
    assert "favours A1" in SCALES["cpu"].chosen  # the choice and whom it favours are disclosed
