"""One walk through the stack: every path (forward, iter_depths, forward_cached, paper B's plans) uses the model's
public pieces, and they agree on every layout of the paper; estimators live in one module; bad token ids are named;
evaluation helpers restore the caller's training mode."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_model

from tiedlm_lib.data import EvalBatch, shift_targets
from tiedlm_lib.evaluation.analysis import state_norms
from tiedlm_lib.evaluation.nll import depth_stats, evaluate_nll
from tiedlm_lib.model import gradients as backprop
from tiedlm_lib.model.config import TrainConfig
from tiedlm_lib.model.schedules import budget, plan, plan_logits
from tiedlm_lib.model.tied import eval_mode
from tiedlm_lib.runs import EXPERIMENTS, experiment
from tiedlm_lib.training.loop import lm_loss, supervised_loss

PAPER_LAYOUTS = sorted({experiment(name, "smoke").model.layout for name in EXPERIMENTS})


def _by_hand(m, x, depth):
    """The stack walked without the model's pieces: every segment in layout order, each loop ``depth`` times."""
    z = m.embed(x)
    for seg in m.segments:
        for _ in range(1 if seg.kind == "std" else (seg.iters if depth is None else depth)):
            z = m.blocks[seg.name](z)
    return m.head(m.ln_f(z))


def _cached(m, x, depth):
    """Logits from the generation path: the prompt's first half at once, then one position at a time."""
    cache: dict = {}
    h = x.shape[1] // 2
    out = [m.forward_cached(x[:, :h], cache, 0, depth)]
    out += [m.forward_cached(x[:, t:t + 1], cache, t, depth) for t in range(h, x.shape[1])]
    return torch.cat(out, 1)


@pytest.mark.parametrize("block", ["paper", "residual"])
@pytest.mark.parametrize("layout", PAPER_LAYOUTS)
def test_every_path_agrees_on_every_paper_layout(layout, block):
    m = tiny_model(layout, block, dtype=torch.float64)
    x = torch.randint(1, 37, (2, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = m(x)
        torch.testing.assert_close(full, _by_hand(m, x, None), rtol=0, atol=1e-12)
        torch.testing.assert_close(plan_logits(m, x, plan(layout, "prefix", budget(layout))), full, rtol=0, atol=1e-12)
        torch.testing.assert_close(_cached(m, x, None), full, rtol=0, atol=1e-10)
        if not m.loop_names:
            return
        by_k = m(x, depths=[1, 2, 3])
        for k in (1, 2, 3):
            want = m(x, depth=k)
            torch.testing.assert_close(want, _by_hand(m, x, k), rtol=0, atol=1e-12)
            torch.testing.assert_close(by_k[k], want, rtol=0, atol=1e-12)
            torch.testing.assert_close(_cached(m, x, k), want, rtol=0, atol=1e-10)
            if len(m.core_segments) == 1:  # one loop, no bridge: prefix(k) is the loop at depth k
                torch.testing.assert_close(plan_logits(m, x, plan(layout, "prefix", k)), want, rtol=0, atol=1e-12)


def test_the_pieces_compose_to_the_forward_pass_and_loops_continue_where_they_stopped():
    m = tiny_model("S A*4 S B*2 S", dtype=torch.float64)
    x = torch.randint(1, 37, (2, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        z = m.prelude(m.embed(x))
        a2 = m.loop("A", z, 2)
        a4 = m.loop("A", a2, 4, start=2)  # stop at depth 2, continue from iteration 2
        torch.testing.assert_close(a4, m.loop("A", z, 4), rtol=0, atol=0)
        z = m.loop("B", m.apply(a4, "S1"), 2)
        torch.testing.assert_close(m.readout(m.coda(z)), m(x), rtol=0, atol=0)
        assert [s.name for s in m.prelude_segments] == ["S0"] and [s.name for s in m.coda_segments] == ["S2"]



@pytest.mark.parametrize("layout", ["S A*4 S", "S S A*4 S S", "S A*4 S B*2 S"])
def test_cached_positions_can_stop_a_loop_and_continue_it_several_at_a_time(layout):
    """The decoding pattern that later work needs: after a cached prompt, three new positions run the first loop to
    depth 2, stop, and continue it from iteration 2 together; every iteration attends to the KV slot it filled at
    earlier positions. The logits equal the full forward pass."""
    m = tiny_model(layout, dtype=torch.float64)
    x = torch.randint(1, 37, (2, 9), generator=torch.Generator().manual_seed(2))
    first, rest = m.core_segments[0], m.core_segments[1:]
    with torch.no_grad():
        cache: dict = {}
        m.forward_cached(x[:, :6], cache, 0)
        z = m.prelude(m.embed(x[:, 6:], start=6), cache)
        z_d = m.loop(first.name, z, 2, cache=cache)  # stopped at depth 2 (a draft would read out here)
        z = m.loop(first.name, z_d, first.iters, start=2, cache=cache)  # continued, three positions at once
        for seg in rest:
            z = m.loop(seg.name, z, seg.iters, cache=cache) if seg.kind == "loop" else m.apply(z, seg.name, 0, cache)
        torch.testing.assert_close(m.readout(m.coda(z, cache)), m(x)[:, 6:], rtol=0, atol=1e-10)
        assert all(v[0].shape[2] == 9 for v in cache.values())  # every application's slot holds all 9 positions


def test_a_plan_for_another_layout_is_refused():
    m = tiny_model("S A*3 S")
    with pytest.raises(ValueError, match="made for another layout"):
        plan_logits(m, torch.ones(1, 4, dtype=torch.long), plan("S S A*3 S S", "prefix", 2))


@pytest.mark.parametrize("bad", [37, 1000, -1])
def test_token_ids_outside_the_vocabulary_are_named(bad):
    m = tiny_model("S A*3 S")
    x = torch.tensor([[1, 2, bad, 3]])
    with pytest.raises(ValueError, match=rf"token id {bad} is outside the vocabulary \[0, 37\) \(vocab_size 37"):
        m(x)
    with pytest.raises(ValueError, match=rf"token id {bad} is outside"):
        m.forward_cached(x, {}, 0)
    m(torch.tensor([[0, 36]]))  # the edges are fine


def test_eval_mode_restores_the_mode_even_when_the_block_raises():
    m = tiny_model("S A*3 S")
    m.train()
    with pytest.raises(RuntimeError, match="boom"), eval_mode(m):
        assert not m.training
        raise RuntimeError("boom")
    assert m.training
    m.eval()
    with eval_mode(m):
        pass
    assert not m.training


def test_evaluation_helpers_leave_a_training_model_training():
    m = tiny_model("S A*3 S")
    x = torch.randint(1, 37, (2, 8))
    batches = [EvalBatch(x, torch.roll(x, -1, 1), torch.arange(2))]
    m.train()
    depth_stats(m, batches, [1, 3])
    evaluate_nll(m, batches)
    state_norms(m, batches, 3)
    assert m.training


def test_backprop_modes_parse_once_into_a_typed_value():
    assert backprop.Backprop.parse("phantom-last") == backprop.Backprop("truncated", 1)
    assert backprop.Backprop.parse("truncated:4") == backprop.Backprop("truncated", 4)
    assert backprop.Backprop.parse(backprop.Backprop("full")) == backprop.Backprop("full")
    for bad in ("truncated:0", "truncated:x", "phantom-first", 3, ["full"]):
        with pytest.raises(ValueError, match="TrainConfig.backprop must be one of"):
            backprop.Backprop.parse(bad)
    for kind, n in (("truncated", 0), ("full", 2), ("implicit", 0)):
        with pytest.raises(ValueError, match="no backprop mode"):
            backprop.Backprop(kind, n)
    m = tiny_model("S A*3 S")
    with torch.no_grad(), pytest.raises(ValueError, match="got 'bogus'"):
        m(torch.ones(1, 4, dtype=torch.long), backprop="bogus")  # checked even where no graph is built


def test_a_new_estimator_is_one_entry_in_the_backprop_module(monkeypatch):
    """An estimator that stops the gradient at the loop (the block learns nothing, the bottom gets the identity):
    registered in one place, it works through the model, the config and the training loss."""

    def detached(block, h, wanted, trace):
        st = h - h.detach()
        with torch.no_grad():
            states = list(backprop.full(block, h, wanted, trace))
        for k, z in states:
            yield k, z + st

    monkeypatch.setitem(backprop.ESTIMATORS, "detached", lambda b: detached)
    m = tiny_model("S A*3 S")
    x = torch.randint(1, 37, (2, 8))
    y = torch.roll(x, -1, 1)
    loss, _ = supervised_loss(m, x, y, TrainConfig(backprop="detached"))
    loss.backward()
    assert all(p.grad is None for p in m.blocks["A"].parameters())
    assert m.blocks["S0"].attn.qkv.weight.grad.abs().sum() > 0
    torch.testing.assert_close(loss, lm_loss(m(x), y))


def test_full_depth_is_the_trained_model_everywhere_on_an_unequal_loop_layout():
    """On loops of unequal iteration counts, model(x) (the trained model), prefix(N) and speculative decoding agree;
    model(x, depth=k) runs every loop k times, which prefix(k) (k core applications) is not; exits' last depth is the
    trained model."""
    from tiedlm_lib.depth.exits import collect_features
    from tiedlm_lib.depth.speculative import generate, plain_greedy

    layout = "S A*3 B*3 C*2 D*2 S"
    m = tiny_model(layout, dtype=torch.float64)
    x = torch.randint(1, 37, (2, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = m(x)
        torch.testing.assert_close(plan_logits(m, x, plan(layout, "prefix", budget(layout))), full, rtol=0, atol=1e-12)
        assert budget(layout) == 10
        assert (m(x, depth=3) - full).abs().max() > 1e-3  # every loop at 3 is not the trained 3/3/2/2
        assert (m(x, depth=2) - plan_logits(m, x, plan(layout, "prefix", 2))).abs().max() > 1e-3
        torch.testing.assert_close(plan_logits(m, x, plan(layout, "prefix", 2)), m.readout(m.coda(
            m.apply(m.apply(m.prelude(m.embed(x)), "A", 0), "A", 1))), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"unequal iteration counts \(A 3, B 3, C 2, D 2\)"):
        _ = m.full_depth
    f = collect_features(m, [EvalBatch(x, shift_targets(x), torch.arange(2))])  # exits' depth K is the trained model
    real = shift_targets(x) != 0
    np.testing.assert_allclose(f.nll[:, -1], -F.log_softmax(full, -1).gather(-1, shift_targets(x).clamp_min(0)[
        ..., None])[..., 0][real].numpy(), rtol=1e-9)
    prompt = x[0, :4].tolist()
    # verified against the trained model
    assert generate(m, prompt, max_new=5, draft_depth=1, draft_len=2)[0] == plain_greedy(m, prompt, 5)
    with torch.no_grad():  # plain greedy is the trained model's argmax
        seq = list(prompt)
        for _ in range(5):
            seq.append(int(m(torch.tensor([seq]))[0, -1].argmax()))
    assert plain_greedy(m, prompt, 5) == seq[len(prompt):]
    equal = tiny_model("S A*3 S B*3 S", dtype=torch.float64)
    assert equal.full_depth == 3
    with torch.no_grad():
        torch.testing.assert_close(equal(x, depth=equal.full_depth), equal(x), rtol=0, atol=1e-12)


def test_forward_cached_refuses_a_start_other_than_the_cache_length():
    m = tiny_model("S A*3 S", dtype=torch.float64)
    x = torch.randint(1, 37, (1, 8), generator=torch.Generator().manual_seed(3))
    cache: dict = {}
    with pytest.raises(ValueError, match=r"already in the cache \(0\), got 2"):
        m.forward_cached(x[:, :4], cache, 2)
    m.forward_cached(x[:, :4], cache, 0)
    with pytest.raises(ValueError, match=r"already in the cache \(4\), got 3"):
        m.forward_cached(x[:, 4:5], cache, 3)
    m.forward_cached(x[:, 4:5], cache, 4)
