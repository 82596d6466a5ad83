"""Every function that feeds a model moves its inputs to the model's device (``tiedlm_lib.devices``), checked on a
CPU-only machine by ``devicecheck.OnDevice``: the model's tensors count as on an accelerator, and any operation that
meets one of them and a CPU tensor fails as CUDA would."""

import numpy as np
import pytest
import torch
from conftest import tiny_model
from devicecheck import DeviceMismatch, pretend_accelerator

from tiedlm_lib import analysis, benchmark, dcp, evaluation, exits, generate, lens, probes, schedules, speculative
from tiedlm_lib.data import EvalBatch


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


def _suffix():
    x = torch.randint(4, 37, (4, 12), generator=torch.Generator().manual_seed(1))
    return benchmark.suffix_nll(M, benchmark.SuffixBenchmark(x, np.arange(4), "heldout", 8), batch_size=2)


COLLECTORS = {
    "depth_stats": lambda: evaluation.depth_stats(M, _batches(), [1, 3]),
    "evaluate_nll": lambda: evaluation.evaluate_nll(M, _batches(), 2),
    "depth_sweep": lambda: evaluation.depth_sweep(M, _batches(), [1, 3]),
    "state_norms": lambda: analysis.state_norms(M, _batches(), 3),
    "collect_features": lambda: exits.collect_features(M, _batches()),
    "residual_probe": lambda: probes.residual_probe(M, _batches(), min_real=2),
    "collect_states, fit_probe, probe_nll": _lens_fit,
    "evaluate_schedules": lambda: dcp.evaluate_schedules(M, _batches, _batches, ["prefix", "frozen"], [1, 3],
                                                         probes=("head/temperature",), in_sample=True, iters=3),
    "generate": lambda: generate.generate(M, [5, 6, 7], generate.SamplingConfig(max_new=3)),
    "speculative": lambda: speculative.generate(M, [5, 6, 7], None, max_new=3, draft_depth=1, draft_len=2),
    "plain_greedy": lambda: speculative.plain_greedy(M, [5, 6, 7], 3),
    "suffix_nll": _suffix,
}


@pytest.mark.parametrize("name", list(COLLECTORS))
def test_every_collector_feeds_the_model_on_its_device(name, monkeypatch):
    with pretend_accelerator(M, monkeypatch) as mode:
        COLLECTORS[name]()
    assert mode.calls > 50  # the check ran over the whole forward


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
    with pytest.raises(RuntimeError, match=r"paper-scale run, 3,000 steps: about .* GPU hours on one GPU"):
        get_run("v3", "paper", root=tmp_path, device="cpu")
    assert not list(tmp_path.glob("paper/*/model.safetensors"))  # refused before anything was written
