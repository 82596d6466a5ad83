import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_model

from tiedlm_lib import RunConfig, TrainConfig, experiment, train
from tiedlm_lib.model.checkpoint import CheckpointError, load_model
from tiedlm_lib.training.loop import NonFiniteLossError, lm_loss, lr_at, supervised_loss


def _batch(vocab=37, B=3, T=12, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(1, vocab, (B, T), generator=g)
    x[0, 8:] = 0  # right padding in one row
    y = torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], 1)
    return x, y


def _grads(model, loss):
    model.zero_grad()
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_phantom_gradient_matches_a_hand_written_vjp_of_protocol_4_4():
    """Paper phantom: forward value z*_K, gradient of the first step taken at the loop input h. Reference: the
    gradient of the loss at z* (w.r.t. z*) pulled back through one step from h, by an explicit vector-Jacobian
    product — a different code path from the straight-through trick in the library."""
    K = 4
    m = tiny_model(f"S A*{K} S", dtype=torch.float64)
    x, y = _batch()
    got = _grads(m, lm_loss(m(x, backprop="phantom"), y))

    params = dict(m.named_parameters())
    h = m.blocks["S0"](m.embed(x))
    blk = m.blocks["A"]
    with torch.no_grad():
        z = h.detach()
        for _ in range(K):
            z = z + blk.alpha * blk.f(z)
    z_star = z.clone().requires_grad_(True)
    loss = lm_loss(m.readout(m.blocks["S1"](z_star)), y)
    top_names = [n for n in params if n.startswith(("blocks.S1.", "ln_f.", "head."))]
    g_top = torch.autograd.grad(loss, [params[n] for n in top_names] + [z_star])
    g_z = g_top[-1]
    z1 = h + blk.alpha * blk.f(h)  # one step from the loop INPUT, with gradient
    rest = [n for n in params if n not in top_names and params[n].requires_grad]
    g_rest = torch.autograd.grad(z1, [params[n] for n in rest], grad_outputs=g_z, allow_unused=True)
    ref = dict(zip(top_names, g_top[:-1]))
    ref.update({n: g for n, g in zip(rest, g_rest) if g is not None})
    assert set(ref) == set(got)
    for n in ref:
        assert torch.allclose(got[n], ref[n], atol=1e-10), n
    # the forward value is the full-depth value
    assert torch.allclose(m(x, backprop="phantom"), m(x), atol=1e-12)


def test_full_and_phantom_gradients_differ():
    m = tiny_model("S A*4 S", dtype=torch.float64)
    x, y = _batch()
    full = _grads(m, lm_loss(m(x, backprop="full"), y))
    ph = _grads(m, lm_loss(m(x, backprop="phantom"), y))
    assert torch.allclose(full["head.weight"], ph["head.weight"])  # the top sees the same z*
    assert not torch.allclose(full["blocks.A.mlp.up.weight"], ph["blocks.A.mlp.up.weight"], atol=1e-6)
    assert not torch.allclose(full["blocks.A.alpha_logit"], ph["blocks.A.alpha_logit"], atol=1e-8)
    assert not torch.allclose(full["tok_emb.weight"], ph["tok_emb.weight"], atol=1e-8)


def test_phantom_stores_one_step_and_runs_k_plus_one_applications():
    m = tiny_model("S A*5 S")
    calls = []
    m.blocks["A"].register_forward_hook(lambda *a: calls.append(torch.is_grad_enabled()))
    m(_batch()[0], backprop="phantom")
    assert len(calls) == 6 and calls.count(True) == 1


def test_multi_depth_loss_is_the_mean_of_single_depth_losses():
    m = tiny_model("S S A*4 S S")
    x, y = _batch()
    cfg = TrainConfig(steps=10, depths=(1, 2, 4))
    loss, per = supervised_loss(m, x, y, cfg)
    singles = [lm_loss(m(x, depth=k), y) for k in (1, 2, 4)]
    assert torch.allclose(loss, torch.stack(singles).mean(), atol=1e-6)
    assert sorted(per) == [1, 2, 4]
    wcfg = TrainConfig(steps=10, depths=(1, 2, 4), depth_weights=(1.0, 0.0, 3.0))
    wloss, _ = supervised_loss(m, x, y, wcfg)
    assert torch.allclose(wloss, (singles[0] + 3 * singles[2]) / 4, atol=1e-6)


def test_loss_ignores_or_includes_pad_targets():
    logits = torch.randn(2, 5, 7)
    y = torch.tensor([[3, 4, 0, 0, 0], [1, 2, 3, 4, 0]])
    ce = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")
    real = y != 0
    assert torch.allclose(lm_loss(logits, y, "ignore"), ce[real].mean())
    assert torch.allclose(lm_loss(logits, y, "include"), ce.mean())


def test_lr_schedule():
    c = TrainConfig(steps=100, lr=1e-3, lr_min=1e-4)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100, eta_min=1e-4)
    for s in range(100):  # no warmup: the paper's CosineAnnealingLR stepped every step
        assert lr_at(s, c) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-9)
        opt.step()
        sched.step()
    w = TrainConfig(steps=100, lr=4e-4, lr_min=4e-5, warmup=10)
    assert lr_at(0, w) == 0.0 and lr_at(5, w) == pytest.approx(2e-4) and lr_at(10, w) == pytest.approx(4e-4)
    assert lr_at(100, w) == pytest.approx(4e-5)
    assert lr_at(57, TrainConfig(steps=100, lr=1e-4, schedule="constant")) == 1e-4
    warm = TrainConfig(steps=100, lr=1e-4, lr_min=1e-4, warmup=10, schedule="constant")  # paper B's intervention
    assert lr_at(0, warm) == 0.0 and lr_at(5, warm) == pytest.approx(5e-5)
    assert lr_at(10, warm) == lr_at(99, warm) == 1e-4


def _smoke(steps=8, **train_kw):
    run = experiment("v3", "smoke", overrides={"train.steps": steps, "train.log_every": 1})
    return dataclasses.replace(run, train=dataclasses.replace(run.train, **train_kw)) if train_kw else run


def test_initial_loss_is_ln_v_and_training_lowers_it(smoke_corpus):
    res = train(_smoke(steps=12), None, smoke_corpus, progress=False)
    losses = [m["loss"] for m in res.metrics if "loss" in m]
    assert losses[0] == pytest.approx(math.log(320), abs=1e-4)  # zero-initialised head: uniform predictions
    assert losses[-1] < losses[0] - 0.3


def test_resume_equals_uninterrupted_training(tmp_path, smoke_corpus):
    run = _smoke(steps=10, checkpoint_every=3)
    full = train(run, tmp_path / "a", smoke_corpus, progress=False)
    part = train(run, tmp_path / "b", smoke_corpus, progress=False, stop_after=4)
    assert not (tmp_path / "b" / "model.safetensors").exists()
    resumed = train(run, tmp_path / "b", smoke_corpus, progress=False)
    assert part.model is not resumed.model
    for (n, a), (_, b) in zip(full.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), n
    assert resumed.final_loss == full.final_loss
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in lines]
    assert steps == list(range(10))  # no duplicated or missing log lines across the restart
    loaded = load_model(tmp_path / "b" / "model.safetensors", run.model)
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), full.model.state_dict().values()))


def test_kept_weights_are_the_weights_of_a_run_stopped_there_and_survive_a_resume(tmp_path, smoke_corpus):
    """keep_weights_at: the weights after step 4 equal those of the same run interrupted after 4 steps (same
    schedule, same batches), a resume across a kept step keeps it once, and the kept steps are part of the run's
    identity (the fingerprint) while bad steps are refused by name."""
    from tiedlm_lib.training.loop import kept_weights_name

    run = _smoke(steps=10, checkpoint_every=3, keep_weights_at=(4, 7))
    full = train(run, tmp_path / "a", smoke_corpus, progress=False)
    assert sorted(p.name for p in (tmp_path / "a").glob("weights-step*")) == [kept_weights_name(4),
                                                                              kept_weights_name(7)]
    stopped = train(run, tmp_path / "b", smoke_corpus, progress=False, stop_after=4)
    kept = load_model(tmp_path / "a" / kept_weights_name(4), run.model)
    for (n, a), (_, b) in zip(kept.state_dict().items(), stopped.model.state_dict().items()):
        assert torch.equal(a, b), n
    train(run, tmp_path / "b", smoke_corpus, progress=False)  # resumed from step 4, through the kept step 7
    for k in (4, 7):
        a = load_model(tmp_path / "a" / kept_weights_name(k), run.model).state_dict()
        b = load_model(tmp_path / "b" / kept_weights_name(k), run.model).state_dict()
        assert all(torch.equal(a[n], b[n]) for n in a), k
    assert not torch.equal(kept.state_dict()["head.weight"], full.model.state_dict()["head.weight"])
    assert run.fingerprint() != _smoke(steps=10, checkpoint_every=3).fingerprint()
    assert _smoke(steps=10).fingerprint() == _smoke(steps=10, keep_weights_at=()).fingerprint()
    for bad in ((0,), (10,), (7, 4), (4, 4)):
        with pytest.raises(ValueError, match="keep_weights_at must be increasing integers in"):
            _smoke(steps=10, keep_weights_at=bad)


def test_a_checkpoint_from_another_config_is_refused(tmp_path, smoke_corpus):
    run = _smoke(steps=6)
    train(run, tmp_path, smoke_corpus, progress=False, stop_after=2)
    other = _smoke(steps=6, lr=1e-2)
    with pytest.raises(CheckpointError, match="another run configuration.*train.lr"):
        train(other, tmp_path, smoke_corpus, progress=False)
    other_model = dataclasses.replace(run.model, block="residual")
    with pytest.raises(CheckpointError, match="block"):
        load_model(tmp_path / "checkpoint.safetensors", other_model)


def test_a_corrupted_checkpoint_is_refused(tmp_path, smoke_corpus):
    run = _smoke(steps=6)
    train(run, tmp_path, smoke_corpus, progress=False, stop_after=2)
    p = tmp_path / "checkpoint.safetensors"
    p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])
    with pytest.raises(CheckpointError, match="checkpoint"):
        train(run, tmp_path, smoke_corpus, progress=False)
    p.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable tiedlm checkpoint"):
        load_model(p)


def test_nonfinite_losses_are_skipped_then_stop_the_run(tmp_path, smoke_corpus, monkeypatch):
    import tiedlm_lib.training.loop as tr

    real = tr.supervised_loss
    calls = {"n": 0}

    def flaky(model, x, y, cfg, normalizer=None, **kw):
        calls["n"] += 1
        loss, per = real(model, x, y, cfg, normalizer)
        return (loss * float("nan") if calls["n"] in (2, 3) else loss), per

    monkeypatch.setattr(tr, "supervised_loss", flaky)
    res = train(_smoke(steps=6), None, smoke_corpus, progress=False)
    assert res.skipped_steps == 2 and math.isfinite(res.final_loss)
    assert all(torch.isfinite(p).all() for p in res.model.parameters())

    def always_inf(model, x, y, cfg, normalizer=None, **kw):
        return real(model, x, y, cfg)[0] * float("inf"), {}

    monkeypatch.setattr(tr, "supervised_loss", always_inf)
    with pytest.raises(NonFiniteLossError, match="max_nonfinite=2"):
        train(_smoke(steps=6, max_nonfinite=2), tmp_path, smoke_corpus, progress=False)
    assert (tmp_path / "checkpoint.safetensors").is_file() and not (tmp_path / "model.safetensors").exists()


def test_train_config_validation():
    with pytest.raises(ValueError, match="TrainConfig.backprop must be one of"):
        TrainConfig(backprop="phantom2")
    with pytest.raises(ValueError, match="depths must be positive integers"):
        TrainConfig(depths=(0, 2))
    with pytest.raises(ValueError, match="warmup must be an integer in"):
        TrainConfig(steps=10, warmup=10)
    with pytest.raises(ValueError, match="vocab_size"):
        run = _smoke()
        RunConfig("x", "smoke", dataclasses.replace(run.model, vocab_size=999), run.train, run.data)


@pytest.mark.parametrize("depths", [None, (1, 2, 4)])
def test_checkpoint_backprop_gives_the_exact_full_gradient(depths):
    m = tiny_model("S A*4 S", dtype=torch.float64)
    x, y = _batch()
    full = _grads(m, supervised_loss(m, x, y, TrainConfig(steps=2, depths=depths))[0])
    ck = _grads(m, supervised_loss(m, x, y, TrainConfig(steps=2, depths=depths, backprop="checkpoint"))[0])
    assert set(full) == set(ck)
    for n in full:
        assert torch.allclose(full[n], ck[n], atol=1e-12), n


def test_truncated_through_every_iteration_is_the_full_gradient():
    m = tiny_model("S A*4 S", dtype=torch.float64)
    x, y = _batch()
    for depths in (None, (1, 2, 4)):
        full = _grads(m, supervised_loss(m, x, y, TrainConfig(steps=2, depths=depths))[0])
        tr = _grads(m, supervised_loss(m, x, y, TrainConfig(steps=2, depths=depths, backprop="truncated:4"))[0])
        for n in full:
            assert torch.allclose(full[n], tr[n], atol=1e-12), n


def test_phantom_last_is_truncated_1_and_matches_a_hand_written_vjp():
    """The standard one-step phantom: the tied block's gradient is that of the last step, from the detached
    z_{K-1}; the bottom stack receives dL/dz_K through an identity in place of the loop."""
    K = 4
    m = tiny_model(f"S A*{K} S", dtype=torch.float64)
    x, y = _batch()
    got = _grads(m, lm_loss(m(x, backprop="phantom-last"), y))
    same = _grads(m, lm_loss(m(x, backprop="truncated:1"), y))
    assert all(torch.equal(got[n], same[n]) for n in got)
    assert torch.allclose(m(x, backprop="phantom-last"), m(x), atol=1e-12)  # forward value unchanged

    params = dict(m.named_parameters())
    h = m.blocks["S0"](m.embed(x))
    blk = m.blocks["A"]
    with torch.no_grad():
        z = h.detach()
        for _ in range(K - 1):
            z = blk(z)
    zK = blk(z)  # the last step, with gradient to the block's parameters only
    zK_leaf = zK.detach().requires_grad_(True)
    loss = lm_loss(m.readout(m.blocks["S1"](zK_leaf)), y)
    top = [n for n in params if n.startswith(("blocks.S1.", "ln_f.", "head."))]
    g = torch.autograd.grad(loss, [params[n] for n in top] + [zK_leaf])
    g_z = g[-1]
    ref = dict(zip(top, g[:-1]))
    loop = [n for n in params if n.startswith("blocks.A.")]
    ref.update(zip(loop, torch.autograd.grad(zK, [params[n] for n in loop], grad_outputs=g_z)))
    bottom = [n for n in params if n not in ref]
    ref.update(zip(bottom, torch.autograd.grad(h, [params[n] for n in bottom], grad_outputs=g_z)))  # identity
    for n in ref:
        assert torch.allclose(got[n], ref[n], atol=1e-10), n


def test_truncation_changes_the_gradient():
    m = tiny_model("S A*4 S", dtype=torch.float64)
    x, y = _batch()
    g = {mode: _grads(m, lm_loss(m(x, backprop=mode), y)) for mode in ("full", "truncated:2", "phantom-last")}
    w = "blocks.A.mlp.up.weight"
    assert not torch.allclose(g["full"][w], g["truncated:2"][w], atol=1e-8)
    assert not torch.allclose(g["truncated:2"][w], g["phantom-last"][w], atol=1e-8)


@pytest.mark.parametrize("spec", ["truncated:0", "truncated:x", "truncated", "phantom_last"])
def test_bad_backprop_specs(spec):
    with pytest.raises(ValueError, match="backprop must be one of"):
        TrainConfig(backprop=spec)
    with pytest.raises(ValueError, match="backprop must be one of"):
        tiny_model()(_batch()[0], backprop=spec)


def test_train_step_applies_the_schedule_clipping_and_weight_decay_as_a_hand_stepped_adamw(smoke_corpus):
    """Four steps of ``train_step`` (warm-up 2, cosine after it, clipping active, weight decay 0.1) against AdamW
    stepped by hand from the same gradients: the learning rate written from the schedule's formula (not ``lr_at``),
    the gradients clipped by their global norm, the decay decoupled (p ← p − lr·wd·p)."""
    import copy

    from tiedlm_lib.training.loop import build, make_stream, train_step

    run = _smoke(steps=10, warmup=2, clip=0.05, weight_decay=0.1, lr=3e-3, lr_min=3e-4)
    cfg = run.train
    model, opt = build(run, torch.device("cpu"))
    assert opt.param_groups[0]["weight_decay"] == 0.1 and opt.param_groups[0]["betas"] == cfg.betas
    ref = copy.deepcopy(model)
    params = [p for p in ref.parameters()]
    m = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    v = [torch.zeros_like(p, dtype=torch.float64) for p in params]
    w = [p.detach().double().clone() for p in params]
    w0 = [wi.clone() for wi in w]
    stream = make_stream(run, smoke_corpus)
    b1, b2 = cfg.betas
    clipped = 0
    uw, um, uv = [wi.clone() for wi in w], [mi.clone() for mi in m], [vi.clone() for vi in v]  # an unclipped twin
    for step in range(4):
        x, y = stream.next()
        res = train_step(model, opt, x, y, cfg, step, torch.device("cpu"))
        lr = cfg.lr * step / 2 if step < 2 else (
            cfg.lr_min + (cfg.lr - cfg.lr_min) * 0.5 * (1 + math.cos(math.pi * (step - 2) / (cfg.steps - 2))))
        assert opt.param_groups[0]["lr"] == pytest.approx(lr, rel=1e-12)
        ref.zero_grad(set_to_none=True)
        with torch.no_grad():
            for p, wi in zip(params, w):
                p.copy_(wi)
        loss, _ = supervised_loss(ref, x, y, cfg)
        loss.backward()
        g = [p.grad.double() for p in params]
        norm = math.sqrt(sum(float((gi ** 2).sum()) for gi in g))
        assert res.grad_norm == pytest.approx(norm, rel=1e-4)
        scale = min(1.0, cfg.clip / (norm + 1e-6))
        clipped += scale < 1
        for i, gi in enumerate(g):
            # the twin uses the clipped path's gradients unscaled (Adam's update is nearly scale-free, so only the
            # per-step changes of the clip factor show: the smallest difference removing the clip could make)
            for ws, ms, vs, gs in ((w, m, v, gi * scale), (uw, um, uv, gi)):
                ws[i] = ws[i] * (1 - lr * cfg.weight_decay)
                ms[i] = b1 * ms[i] + (1 - b1) * gs
                vs[i] = b2 * vs[i] + (1 - b2) * gs ** 2
                mh, vh = ms[i] / (1 - b1 ** (step + 1)), vs[i] / (1 - b2 ** (step + 1))
                ws[i] = ws[i] - lr * mh / (vh.sqrt() + 1e-8)
    assert clipped >= 3  # the clip was active
    # ... and visible at the tolerance below: the unclipped twin is farther from the clipped reference than that
    gap = max(float(((wi - ui).abs() - (1e-6 + 1e-4 * wi.abs())).max()) for wi, ui in zip(w, uw))
    assert gap > 0, "clipping changes the weights by less than the comparison's tolerance: the test could not see it"
    for p, wi in zip(model.parameters(), w):
        torch.testing.assert_close(p.detach().double(), wi, rtol=1e-4, atol=1e-6)
    assert max(float((wi - w0i).abs().max()) for wi, w0i in zip(w, w0)) > 1e-3  # the steps moved the weights


def test_a_finite_loss_with_non_finite_gradients_is_skipped(smoke_corpus):
    from tiedlm_lib.training.loop import build, make_stream, train_step

    run = _smoke(steps=4)
    model, opt = build(run, torch.device("cpu"))
    before = [p.detach().clone() for p in model.parameters()]
    hook = model.head.weight.register_hook(lambda g: g * float("inf"))
    x, y = make_stream(run, smoke_corpus).next()
    res = train_step(model, opt, x, y, run.train, 1, torch.device("cpu"))
    hook.remove()
    assert math.isfinite(res.loss) and res.grad_norm is None
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_compiled_blocks_train_like_eager_within_float32_rounding():
    """train.compile=True really compiles (dynamo captures graphs) and two training steps of the compiled model (the
    inductor backend on this CPU: forward and backward) leave the loss and every parameter within 1e-5 of eager."""
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    eager = train(experiment("v3", "smoke", overrides={"train.steps": 2}), None, progress=False)
    compiled = train(experiment("v3", "smoke", overrides={"train.steps": 2, "train.compile": True}), None,
                     progress=False)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # a graph was compiled, not run eagerly
    assert all(b._compiled_call_impl is not None for b in compiled.model.blocks.values())
    assert abs(compiled.final_loss - eager.final_loss) < 1e-5
    ref = dict(eager.model.named_parameters())
    assert max((p - ref[n]).abs().max().item() for n, p in compiled.model.named_parameters()) < 1e-5
    torch._dynamo.reset()


def test_bf16_autocast_path_matches_float32_within_bf16_rounding():
    """The CUDA recipe's bf16 autocast (train.amp='bf16'), executed on this CPU: the loss is within 0.02 nats of
    float32 (bf16 keeps 8 bits of mantissa: ~0.4% a rounding, on a loss near 4.8), yet not equal to it (the
    autocast path ran), and its gradient points the same way (cosine > 0.99). The model is trained first: at
    initialisation the logits are so near uniform that both losses are ln V to float32 precision."""
    from tiedlm_lib.training.loop import _autocast

    cfg = experiment("v3", "smoke")
    model = train(cfg, None, progress=False).model
    torch.manual_seed(0)
    x = torch.randint(1, cfg.model.vocab_size, (4, cfg.model.max_seq_len))
    y = torch.roll(x, -1, 1)
    grads, losses = {}, {}
    for amp in ("none", "bf16"):
        model.zero_grad(set_to_none=True)
        with _autocast(torch.device("cpu"), amp):
            loss, _ = supervised_loss(model, x, y, cfg.train)
        assert loss.dtype == torch.float32  # the cross-entropy stays in float32 either way
        loss.backward()
        losses[amp] = loss.item()
        grads[amp] = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    assert 0 < abs(losses["bf16"] - losses["none"]) < 0.02
    assert F.cosine_similarity(grads["bf16"], grads["none"], dim=0).item() > 0.99


@pytest.mark.parametrize("result, want", [
    (None, "stopped"),  # training raised on too many non-finite steps: no result, no final weights
    ({"final_loss": float("nan"), "skipped_steps": 0}, "diverged"),
    ({"final_loss": math.log(512), "skipped_steps": 0}, "diverged"),  # no better than uniform guessing
    ({"final_loss": math.log(512) - 1e-6, "skipped_steps": 0}, "complete"),
    ({"final_loss": 2.0, "skipped_steps": 3}, "complete"),  # recovered skipped steps do not change the status
])
def test_training_status_reads_the_log_as_statistics_amendment_15_says(result, want):
    from tiedlm_lib.runs.cache import training_status

    assert training_status(result, 512) == want
    assert training_status(result, 512, max_nonfinite=3) == want  # within the config's tolerance: the same


def test_a_run_resumed_past_its_stop_stays_stopped():
    """More skipped steps than the config tolerates means training raised once; resuming it from the checkpoint to
    the end does not make it complete (amendment 15)."""
    from tiedlm_lib.runs.cache import training_status

    resumed = {"final_loss": 2.0, "skipped_steps": 101}
    assert training_status(resumed, 512, max_nonfinite=100) == "stopped"
    assert training_status(resumed, 512, max_nonfinite=101) == "complete"
    assert training_status(resumed, 512) == "complete"  # without the config's tolerance only the loss is read


def test_training_status_refuses_bad_input():
    from tiedlm_lib.runs.cache import training_status

    with pytest.raises(ValueError, match="final_loss"):
        training_status({"steps": 10}, 512)
    with pytest.raises(ValueError, match="vocab_size"):
        training_status({"final_loss": 1.0}, 1)
    with pytest.raises(ValueError, match="max_nonfinite"):
        training_status({"final_loss": 1.0}, 512, max_nonfinite=-1)
