"""Every function that feeds a model moves its inputs to the model's device (``tiedlm_lib.devices``), checked on a
CPU-only machine by ``devicecheck.OnDevice``: the model's tensors count as on an accelerator, and any operation that
meets one of them and a CPU tensor fails as CUDA would."""

import copy
import importlib
import inspect

import numpy as np
import pytest
import torch
from conftest import tiny_model
from devicecheck import DeviceMismatch, pretend_accelerator

from tiedlm_lib.data import EvalBatch
from tiedlm_lib.depth import dcp, exits, generate, speculative
from tiedlm_lib.depth import readout as lens
from tiedlm_lib.evaluation import analysis
from tiedlm_lib.evaluation import nll as evaluation
from tiedlm_lib.evaluation import residual_probe as probes
from tiedlm_lib.evaluation import suffix_benchmark as benchmark
from tiedlm_lib.hub import user_speculate
from tiedlm_lib.model import schedules
from tiedlm_lib.training import loop as training
from tiedlm_lib.training import sft


def _batches():
    x = torch.randint(4, 37, (3, 12), generator=torch.Generator().manual_seed(0))
    return [EvalBatch(x, torch.roll(x, -1, 1), torch.arange(3))]


M = tiny_model("S A*3 S")
P2 = schedules.plan(M.config.layout, "prefix", 2)


def _lens_fit():
    for placement, form in (("head", "diagonal"), ("loop", "temperature")):
        st = lens.collect_states(M, _batches(), P2, placement)
        r = lens.Readout(M, placement)
        lens.probe_nll(r, st, lens.fit_probe(r, st, lens.ProbeSpec(placement, form), lams=(1e-3,), iters=3))


def _shares():
    cal, ev = (lambda: _batches()[:1]), (lambda: [EvalBatch(b.inputs, b.targets, b.doc_index + 3) for b in _batches()])
    lens.share_by_probe(M, cal, ev, 1, 3, probes=[lens.ProbeSpec("head", "temperature")], n_refit=1, n_boot=5,
                        lams=(1e-3,), iters=2)
    pool, held = (tuple(lens.collect_states(M, b(), schedules.plan(M.config.layout, "prefix", k), "head")
                        for k in (1, 3)) for b in (cal, ev))
    lens.data_curve(M, lens.ProbeSpec("head", "temperature"), pool, held, [10], n_boot=5, lams=(1e-3,), iters=2)


def _train_step():
    from tiedlm_lib import TrainConfig

    model = copy.deepcopy(M)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    b = _batches()[0]
    with pretend_accelerator(model, _train_step.monkeypatch) as mode:
        res = training.train_step(model, opt, b.inputs, b.targets, TrainConfig(steps=2, batch_size=3, warmup=1), 0,
                                  torch.device("cpu", 0))
        training.step_metrics(model, TrainConfig(steps=2, batch_size=3, warmup=1), 0, res, 0.0)
    return mode


def _suffix():
    x = torch.randint(4, 37, (4, 12), generator=torch.Generator().manual_seed(1))
    return benchmark.suffix_nll(M, benchmark.SuffixBenchmark(x, np.arange(4), "heldout", 8), batch_size=2)


COLLECTORS = {
    "depth_stats": lambda: evaluation.depth_stats(M, _batches(), [1, 3]),
    "evaluate_nll": lambda: evaluation.evaluate_nll(M, _batches(), 2),
    "depth_sweep": lambda: evaluation.depth_sweep(M, _batches(), [1, 3]),
    "state_norms": lambda: analysis.state_norms(M, _batches(), 3),
    "collect_features, prefix_states": lambda: exits.collect_features(M, _batches()),  # exits reads prefix_states
    "residual_probe": lambda: probes.residual_probe(M, _batches(), min_real=2),
    "collect_states, fit_probe, probe_nll": _lens_fit,
    "evaluate_schedules, readout_metrics": lambda: dcp.evaluate_schedules(
        M, _batches, _batches, ["prefix", "frozen"], [1, 3], probes=("head/temperature",), in_sample=True, iters=3),
    "generate": lambda: generate.generate(M, [5, 6, 7], generate.SamplingConfig(max_new=3)),
    "speculative": lambda: speculative.generate(M, [5, 6, 7], None, max_new=3, draft_depth=1, draft_len=2),
    "plain_greedy": lambda: speculative.plain_greedy(M, [5, 6, 7], 3),
    "suffix_nll": _suffix,
    "share_by_probe, calibration_share, data_curve": _shares,
    "plan_logits, run_plan, run_core": lambda: schedules.plan_logits(M, _batches()[0].inputs.to(torch.device("cpu", 0)),
                                                                     P2),
    "benchmark": lambda: speculative.benchmark(M, [[5, 6, 7]], 2, [(1, 2)], n_boot=5),
    "divergence": lambda: speculative.divergence(M, [5, 6, 7], [8, 9], [8, 10]),
    "greedy_uncached": lambda: user_speculate.greedy_uncached(M, [5, 6, 7], 2),
    "speculate_uncached": lambda: user_speculate.speculate_uncached(M, [5, 6, 7], 3, 1, 2),
    "response_nll": lambda: sft.response_nll(M, sft.SFTData(_batches()[0].inputs, torch.tensor([4, 5, 6])), 2),
}
# Public functions that take a model and feed it nothing of their own (each reason says why); every other one must be
# exercised by a collector above (test_every_function_that_feeds_a_model_is_checked).
NOT_COLLECTORS = {
    "check_request": "checks a prompt's length against the model's context; runs nothing",
    "eval_mode": "a context manager that sets and restores train/eval",
    "init_weights": "loads saved weights into the model",
    "supervised_loss": "called by train_step on batches train_step has moved (checked through it)",
    "train_step": "checked under its own pretend accelerator (test_a_training_step_runs_on_the_models_device)",
    "step_metrics": "checked with train_step",
    "run": "protocol.run feeds the model only through dcp.evaluate_schedules (checked above)",
    "default_ks": "reads the model's layout", "default_schedules": "reads the model's layout",
    "context": "reads the model's config", "default_seq_len": "reads the model's config",
    "check_draft_depth": "reads the model's layout",
    "certify": "user_exits.certify feeds the model only through exits.collect_features (checked above)",
}
MODULES = ("evaluation.analysis", "evaluation.suffix_benchmark", "depth.dcp", "evaluation.nll", "depth.exits",
           "depth.generate", "depth.readout", "evaluation.residual_probe", "model.schedules", "training.sft",
           "depth.speculative", "training.loop", "model.tied", "stats.inference", "hub.protocol", "hub.user_exits",
           "hub.user_speculate")


@pytest.mark.parametrize("name", list(COLLECTORS))
def test_every_collector_feeds_the_model_on_its_device(name, monkeypatch):
    with pretend_accelerator(M, monkeypatch) as mode:
        COLLECTORS[name]()
    assert mode.calls > 50  # the check ran over the whole forward


def test_every_function_that_feeds_a_model_is_checked():
    """A new public function taking a model must join COLLECTORS (or NOT_COLLECTORS, with its reason)."""
    covered = {n.strip() for key in COLLECTORS for n in key.split(",")} | set(NOT_COLLECTORS)
    takes_model = set()
    for name in MODULES:
        mod = importlib.import_module(f"tiedlm_lib.{name}")
        for fname, f in inspect.getmembers(mod, inspect.isfunction):
            params = list(inspect.signature(f).parameters)
            if not fname.startswith("_") and f.__module__ == mod.__name__ and params[:1] in (["model"],
                                                                                             ["model_or_readout"]):
                takes_model.add(fname)
    assert len(takes_model) > 20  # the scan found the library's functions
    assert takes_model <= covered, f"not checked on a pretend accelerator: {sorted(takes_model - covered)}"


def test_a_training_step_runs_on_the_models_device(monkeypatch):
    _train_step.monkeypatch = monkeypatch
    mode = _train_step()
    assert mode.calls > 100  # forward, backward, clipping and AdamW all ran under the check


def test_the_checker_flags_what_cuda_would_and_only_that(monkeypatch):
    """Each rule of devicecheck.OnDevice on a hand-made case: the mismatches CUDA raises are raised, the mixes CUDA
    allows pass."""
    with pretend_accelerator(M, monkeypatch):
        on = next(M.parameters()).detach()
        assert on.device == torch.device("cpu", 0)
        with pytest.raises(DeviceMismatch, match="numpy"):
            np.asarray(on)
        with pytest.raises(DeviceMismatch, match="stack: a CPU tensor of shape \\(\\)"):
            torch.stack([on[0, 0], torch.tensor(1.0)])  # 0-dim tensors do not mix in cat/stack on CUDA
        assert (on[0, 0] + torch.tensor(1.0)).device == torch.device("cpu", 0)  # they do elementwise
        with pytest.raises(DeviceMismatch, match="CPU generator"):
            torch.multinomial(on[0].softmax(-1), 1, generator=torch.Generator().manual_seed(0))
        with pytest.raises(DeviceMismatch, match="CPU generator"):
            torch.randint(0, 3, (2,), generator=torch.Generator(), device=on.device)
        with pytest.raises(DeviceMismatch, match="add"):
            on[0] + torch.zeros(on.shape[1], device="cpu")  # the host, named: not the model's device
        moved = torch.ones(on.shape[1]).to(on.device)  # following a tensor's device is fine
        assert (on[0] + moved).device == torch.device("cpu", 0)
        assert (on[0] + torch.ones(on.shape[1], device=on.device)).device == torch.device("cpu", 0)
        host = torch.empty(on.shape[1])
        host.copy_(on[0])  # copies cross devices on CUDA
        on.clone().copy_(torch.ones_like(host))
        with pytest.raises(DeviceMismatch, match="add"):
            on[0] + on[0].cpu()


def test_the_check_fails_on_a_collector_that_leaves_its_inputs_on_the_cpu(monkeypatch):
    """A deliberately broken copy: the batches bypass tiedlm_lib.devices, as every collector did before."""
    import tiedlm_lib.devices as devices

    with pretend_accelerator(M, monkeypatch):
        monkeypatch.setattr(devices, "to_model", lambda x, m: x)  # forgets to move
        with pytest.raises(DeviceMismatch, match="embedding: a CPU tensor of shape \\(3, 12\\)"):
            evaluation.depth_stats(M, _batches(), [1, 3])
    with pretend_accelerator(M, monkeypatch):
        with pytest.raises(DeviceMismatch, match="numpy\\(\\) of a tensor on the model's device"):
            next(M.parameters()).detach().numpy()


def test_a_device_argument_must_be_the_models():
    with pytest.raises(ValueError, match="is not the model's \\(cpu\\)"):
        evaluation.depth_stats(M, _batches(), [1], device="cuda")
    assert evaluation.evaluate_nll(M, _batches(), 1, device="cpu").n_real.sum() > 0


def test_the_default_device_and_the_refusal_to_train_the_paper_scale_on_a_cpu(monkeypatch, tmp_path):
    from tiedlm_lib import devices, get_run

    monkeypatch.delenv("TIEDLM_DEVICE", raising=False)
    assert devices.default_device(None, "paper") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert devices.default_device(None, "cpu") == devices.default_device() == "cpu"  # the cpu scale stays there
    monkeypatch.setenv("TIEDLM_DEVICE", "cuda:1")
    assert devices.default_device() == "cuda:1" and devices.default_device("cpu") == "cpu"
    monkeypatch.setenv("TIEDLM_MINIMIND", str(tmp_path / "minimind.jsonl"))
    monkeypatch.delenv("TIEDLM_ALLOW_CPU_PAPER", raising=False)
    with pytest.raises(ValueError, match=r"paper-scale run, 3,000 steps: about \d+ GPU minutes? on one GPU"):
        get_run("v3", "paper", root=tmp_path, device="cpu")  # v3's 3,000 steps: minutes, not "about 0.0 GPU hours"
    assert not list(tmp_path.glob("paper/*/model.safetensors"))  # refused before anything was written


def test_the_gpu_time_reads_in_minutes_under_an_hour_and_the_command_line_refuses_in_one_line(
        monkeypatch, tmp_path, capsys):
    from tiedlm_lib.__main__ import main
    from tiedlm_lib.runs.cache import gpu_time_words

    assert gpu_time_words(0.004) == "about 1 GPU minute" and gpu_time_words(0.5) == "about 30 GPU minutes"
    assert gpu_time_words(2.25) == "about 2.2 GPU hours"
    monkeypatch.setenv("TIEDLM_MINIMIND", str(tmp_path / "minimind.jsonl"))
    monkeypatch.delenv("TIEDLM_ALLOW_CPU_PAPER", raising=False)
    assert main(["train", "v3", "--scale", "paper", "--runs", str(tmp_path), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run v3 (seed 0) is a paper-scale run") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
