"""Generation (KV cache per loop iteration, sampling, the penalty's sign handling), the suffix benchmark's targets,
and the SFT rendering and loss masks of both protocols."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from conftest import tiny_model

from tiedlm_lib import experiment
from tiedlm_lib.data import PAD_ID, TokenDocs
from tiedlm_lib.depth.generate import (
    SamplingConfig,
    apply_penalty,
    distinct_n,
    filter_logits,
    generate,
    repetition_rate,
)
from tiedlm_lib.evaluation.suffix_benchmark import (
    draw,
    implied_pad_nll,
    kendall_tau,
    seen_in_training,
    suffix_nll,
    suffix_start,
)
from tiedlm_lib.training.loop import train
from tiedlm_lib.training.sft import (
    IGNORE,
    IM_END,
    IM_START,
    SFTStream,
    build,
    continuation_pairs,
    render,
    response_start,
    sft_targets,
)


# ---------------------------------------------------------------------------------------------------- generation
@pytest.mark.parametrize("layout", ["S A*3 S", "S A*2 B*2 S", "S*3"])
def test_kv_cache_logits_equal_a_full_recompute(layout):
    m = tiny_model(layout, seq=24, dtype=torch.float64)
    x = torch.randint(4, 37, (1, 20))
    full = m(x)
    cache: dict = {}
    got = [m.forward_cached(x[:, :12], cache, 0)]
    for t in range(12, 20):
        got.append(m.forward_cached(x[:, t:t + 1], cache, t))
    torch.testing.assert_close(torch.cat(got, 1), full, rtol=1e-10, atol=1e-10)
    if "A" in layout:
        assert ("A", 0) in cache and ("A", 1) in cache  # one cache per loop iteration
        assert not torch.equal(cache["A", 0][0], cache["A", 1][0])


def test_forward_cached_refuses_a_wrong_start_and_a_cache_whose_slots_disagree():
    m = tiny_model("S A*2 S", seq=24)
    x = torch.randint(4, 37, (1, 10))
    cache: dict = {}
    m.forward_cached(x[:, :6], cache, 0)
    with pytest.raises(ValueError, match=r"start must equal .*\(6\), got 5"):
        m.forward_cached(x[:, 6:7], cache, 5)
    k, v = cache["A", 1]
    cache["A", 1] = (k[:, :, :5], v[:, :, :5])  # a later slot cut short: the first slot alone would look fine
    with pytest.raises(ValueError, match="slots hold different numbers of positions"):
        m.forward_cached(x[:, 6:7], cache, 6)


@pytest.mark.parametrize("penalty", ["paper", "ctrl"])
def test_cached_generation_equals_recompute_token_for_token(penalty):
    m = tiny_model("S A*3 S", seq=40, dtype=torch.float64)
    cfg = SamplingConfig(max_new=24, penalty=penalty)
    prompt = [5, 9, 11, 7, 30, 12]
    a, info_a = generate(m, prompt, cfg, seed=3, use_cache=True)
    b, info_b = generate(m, prompt, cfg, seed=3, use_cache=False)
    assert a == b and len(a) == 24
    assert generate(m, prompt, cfg, seed=3)[0] == a  # seeded
    assert generate(m, prompt, cfg, seed=4)[0] != a
    # what each computed: 5 applications per position (S, A*3, S); the cache computes every position once, the
    # recompute every prefix again: 6, 7, ..., 29 positions
    assert (info_a.new_tokens, info_a.applications, info_a.calls) == (24, 5 * (6 + 23), 5 * 24)
    assert (info_b.applications, info_b.calls) == (5 * sum(range(6, 30)), 5 * 24) and not info_a.stopped


def test_greedy_generation_and_the_shared_signature():
    """sampling=None is greedy: the trained model's argmax, recomputed by hand; a stop id ends it (included) and is
    reported; the plain and speculative generate take the same leading parameters and both return (tokens, info)."""
    import inspect

    from tiedlm_lib.depth import speculative

    m = tiny_model("S A*3 S", seq=64, dtype=torch.float64)
    torch.nn.init.normal_(m.head.weight, std=0.5)
    prompt = [5, 9, 11]
    out, info = generate(m, prompt, None, max_new=10)
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(10):
            seq.append(int(m(torch.tensor([seq]))[0, -1].argmax()))
    assert out == seq[3:] and info.new_tokens == 10 and not info.stopped
    assert generate(m, prompt, None, max_new=10, depth=1)[1].applications == 3 * (3 + 9)  # S, A once, S
    stop = out[4]
    cut, info = generate(m, prompt, None, max_new=10, stop=[stop])
    assert cut == out[:out.index(stop) + 1] and info.stopped and info.new_tokens == len(cut)
    spec, sinfo = speculative.generate(m, prompt, None, max_new=10, stop=[stop], draft_depth=1, draft_len=3)
    assert spec == cut and sinfo.stopped and sinfo.new_tokens == info.new_tokens
    assert len(generate(m, prompt)[0]) == SamplingConfig.max_new  # greedy by default, SamplingConfig's length
    plain = list(inspect.signature(generate).parameters)
    assert list(inspect.signature(speculative.generate).parameters)[:6] == plain[:6] == [
        "model", "prompt", "sampling", "max_new", "seed", "stop"]
    with pytest.raises(ValueError, match="sampling must be a SamplingConfig or None"):
        generate(m, prompt, 10)
    with pytest.raises(ValueError, match="max_new must be a positive integer"):
        generate(m, prompt, None, max_new=0)


def test_penalty_sign_handling():
    logits = torch.tensor([2.0, -2.0, 1.0, -1.0])
    paper = apply_penalty(logits, [0, 1], 2.0, "paper")
    ctrl = apply_penalty(logits, [0, 1], 2.0, "ctrl")
    assert paper.tolist() == [1.0, -1.0, 1.0, -1.0]  # the negative logit was *raised*: a repeat got likelier
    assert ctrl.tolist() == [1.0, -4.0, 1.0, -1.0]  # always a penalty
    assert apply_penalty(logits, [0, 0, 0], 2.0, "paper")[0] == 1.0  # once per token, however often it occurred
    with pytest.raises(ValueError, match="penalty must be one of"):
        apply_penalty(logits, [0], 2.0, "hf")


def test_top_k_and_top_p():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    assert torch.isinf(filter_logits(logits, 2, None)).tolist() == [False, False, True, True]
    # top-p 0.9 drops tokens whose preceding mass is already >= 0.9: 0.5, 0.8 < 0.9 keep; 0.95 >= 0.9 drops the last
    assert torch.isinf(filter_logits(logits, None, 0.9)).tolist() == [False, False, False, True]
    assert torch.isinf(filter_logits(logits, None, 0.5)).tolist() == [False, True, True, True]


def test_sampling_config_and_prompt_errors():
    with pytest.raises(ValueError, match="top_p must be in"):
        SamplingConfig(top_p=1.5)
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        generate(tiny_model(seq=12), list(range(4, 10)), SamplingConfig(max_new=10))


def test_sample_metrics():
    assert distinct_n([1, 2, 1, 2], 2) == pytest.approx(2 / 3)
    assert repetition_rate([1, 2, 1, 2]) == 0.5


# ---------------------------------------------------------------------------------------------------- benchmark
def test_suffix_benchmark_targets_and_masks_by_hand():
    docs = TokenDocs.from_lists([list(range(5, 5 + n)) for n in (10, 14, 3, 16)])
    b = draw(docs, 16, n_batches=2, batch_size=3, seed=777)
    assert suffix_start(256) == 192 and b.start == 12
    assert b.targets.shape == (6, 3)  # logits 12..14 predict x[13..15]
    for row, d in zip(b.targets, b.doc):
        n = len(docs[d])
        want = [5 + t if t < n else PAD_ID for t in (13, 14, 15)]
        assert row.tolist() == want
    m = tiny_model("S A*2 S", vocab=40, seq=16)
    s = suffix_nll(m, b, batch_size=4)
    with torch.no_grad():
        logits = m(b.inputs)[:, 12:15]
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), b.targets, reduction="none")
    real = b.targets != PAD_ID
    assert s.with_pad == pytest.approx(float(ce.mean()), rel=1e-5)
    assert s.masked == pytest.approx(float(ce[real].mean()), rel=1e-5)
    assert s.pad_fraction == pytest.approx(b.pad_fraction)


def test_overlap_replay_matches_the_training_stream(smoke_corpus):
    """The replayed draws are the documents the training stream's batches hold (compared by content)."""
    from tiedlm_lib.data import BatchStream, pad_batch

    run = experiment("v3", "smoke")
    docs = smoke_corpus.train
    seen = np.flatnonzero(seen_in_training(run, len(docs), steps=5))
    stream = BatchStream(docs, run.data.seq_len, run.train.batch_size, run.train.data_seed)
    rows = {tuple(r.tolist()) for _ in range(5) for r in stream.next()[0]}
    assert rows == {tuple(r.tolist()) for r in pad_batch(docs, seen.tolist(), run.data.seq_len)}


def test_implied_pad_nll_and_kendall():
    assert implied_pad_nll(0.4 * 2.0 + 0.6 * 10.0, 2.0, 0.6) == pytest.approx(10.0)
    assert kendall_tau([1, 2, 3], [1, 2, 3]) == 1.0
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0


# ---------------------------------------------------------------------------------------------------- SFT
def test_render_places_the_response_in_the_suffix():
    x = render([10, 11, 12], [20, 21], 16)
    P = suffix_start(16)
    assert P == 12
    assert x[:5].tolist() == [IM_START, 10, 11, 12, IM_END] and (x[5:P] == PAD_ID).all()
    assert x[P:P + 4].tolist() == [IM_START, 20, 21, IM_END] and (x[P + 4:] == PAD_ID).all()
    long = render(list(range(4, 30)), [20], 16)
    assert len(long) == 16 and long[P] == IM_START  # a long prompt is cut at P


def test_sft_loss_masks_of_both_protocols():
    x = render([10, 11], [20, 21], 16)[None]  # response 12..15: IM_START 20 21 IM_END
    paper, masked = sft_targets(x, "paper"), sft_targets(x, "masked")
    assert (paper[0, :12] == IGNORE).all() and (masked[0, :12] == IGNORE).all()
    assert paper[0, 12:15].tolist() == [20, 21, IM_END] and paper[0, 15] == IGNORE
    x2 = render([10], [20], 16)[None]  # response IM_START 20 IM_END then a pad target at position 14
    assert sft_targets(x2, "paper")[0, 12:15].tolist() == [20, IM_END, PAD_ID]  # pad target trained
    assert sft_targets(x2, "masked")[0, 12:15].tolist() == [20, IM_END, IGNORE]  # pad target ignored
    with pytest.raises(ValueError, match="SFT loss must be one of"):
        sft_targets(x, "response")


def test_sft_training_runs_from_a_checkpoint_with_both_losses(tmp_path, smoke_corpus):
    from tiedlm_lib.runs import get_run, intervention_arm, sft_run

    base = get_run("v3", "smoke", 0, {"train.steps": 6}, root=None, progress=False)
    for loss in ("paper", "masked"):
        cfg = sft_run(base.config, f"sft-{loss}", loss, steps=4)
        assert cfg.train.schedule == "constant" and cfg.train.pad_targets == "include" and cfg.data.task == "sft"
        r = get_run(cfg, progress=False)
        losses = [m["loss"] for m in r.metrics if "loss" in m]
        assert losses and all(math.isfinite(v) for v in losses)
    pairs = continuation_pairs(smoke_corpus.train_text["text"][:50])
    data = build(smoke_corpus.tokenizer, pairs, 64)
    x, y = SFTStream(data, 4, 0, "masked").next()
    assert x.shape == (4, 64) and (y[:, :48] == IGNORE).all()
    c = sft_run(base.config, "x", "paper", steps=2)
    arm = intervention_arm(base.config, "sampled", 1000)  # paper B's intervention as section 10 runs it
    assert (arm.train.steps, arm.train.warmup, arm.train.schedule, arm.train.depth_sampling) == (250, 62, "constant",
                                                                                                   "uniform")
    assert arm.train.lr == base.config.train.lr / 4 and arm.train.data_seed == base.config.train.data_seed + 1000
    assert intervention_arm(base.config, "fixed", 1000, steps=40).train.warmup == 10
    with pytest.raises(ValueError, match="arm must be one of"):
        intervention_arm(base.config, "random", 1000)
    with pytest.raises(ValueError, match="pad_targets='include'"):
        train(dataclasses.replace(c, train=dataclasses.replace(c.train, pad_targets="ignore")), None, smoke_corpus,
              progress=False)


def test_packed_layout_holds_the_grid_tokens_with_the_response_after_the_prompt():
    g, p = render([10, 11, 12], [20, 21], 16), render([10, 11, 12], [20, 21], 16, "packed")
    assert p.tolist() == [IM_START, 10, 11, 12, IM_END, IM_START, 20, 21, IM_END] + [PAD_ID] * 7
    assert sorted(g[g != PAD_ID].tolist()) == sorted(p[p != PAD_ID].tolist())  # the same tokens, other positions
    assert response_start([10, 11, 12], 16, "packed") == 5 and response_start([10, 11, 12], 16) == suffix_start(16)
    long = render(list(range(4, 30)), list(range(40, 60)), 16, "packed")  # cut as the grid cuts: 12 + 4
    assert long.tolist() == render(list(range(4, 30)), list(range(40, 60)), 16).tolist()
    x = torch.stack([p, render([10], [20], 16, "packed")])
    y = sft_targets(x, "masked", torch.tensor([5, 3]))
    assert y[0].tolist() == [IGNORE] * 5 + [20, 21, IM_END] + [IGNORE] * 8
    assert y[1].tolist() == [IGNORE] * 3 + [20, IM_END] + [IGNORE] * 11
    assert sft_targets(x, "paper", torch.tensor([5, 3]))[1, 3:6].tolist() == [20, IM_END, PAD_ID]
    with pytest.raises(ValueError, match="SFT layout must be one of"):
        render([10], [20], 16, "left")
    with pytest.raises(ValueError, match="one response start per row"):
        sft_targets(x, "masked", torch.tensor([5]))


def test_corrected_sft_response_logits_do_not_depend_on_the_pad_embedding_and_the_papers_do():
    """The corrected protocol's packed layout keeps the response from attending to pads; the paper's grid does not
    (the model has no key-padding mask)."""
    from tiedlm_lib.model.config import ModelConfig
    from tiedlm_lib.model.tied import TiedLM

    torch.manual_seed(0)
    model = TiedLM(ModelConfig(vocab_size=64, d_model=32, n_heads=4, layout="S A*3 S", max_seq_len=32)).eval()
    with torch.no_grad():  # away from the initialisation (zeroed output projections would hide any attention)
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    user, reply = [10, 11, 12], [20, 21, 22, 23]
    moved = {}
    for layout in ("grid", "packed"):
        x = render(user, reply, 32, layout)[None]
        s = response_start(user, 32, layout)
        resp = slice(s, s + len(reply) + 2)  # <|im_start|> reply <|im_end|>
        with torch.no_grad():
            before = model(x)[0, resp].clone()
            saved = model.tok_emb.weight[PAD_ID].clone()
            model.tok_emb.weight[PAD_ID].add_(torch.randn(32))
            after = model(x)[0, resp]
            model.tok_emb.weight[PAD_ID].copy_(saved)
        moved[layout] = float((after - before).abs().max())
    assert moved["packed"] == 0.0
    assert moved["grid"] > 1e-2


def test_response_nll_sums_the_masked_targets_of_each_conversation(smoke_corpus):
    from tiedlm_lib.evaluation.nll import token_ce
    from tiedlm_lib.training.sft import response_nll

    model = tiny_model(vocab=smoke_corpus.tokenizer.get_vocab_size(), seq=64)
    pairs = continuation_pairs(smoke_corpus.val_text["text"][:7])
    for layout in ("grid", "packed"):
        data = build(smoke_corpus.tokenizer, pairs, 64, layout)
        s = response_nll(model, data, batch_size=3)
        with torch.no_grad():  # by hand, one conversation at a time
            for i in range(len(data)):
                y = sft_targets(data.inputs[i:i + 1], "masked", data.starts[i:i + 1])[0]
                ce = token_ce(model.eval()(data.inputs[i:i + 1]), y.clamp_min(0)[None])[0]
                m = y != IGNORE
                assert s.n_real[i] == int(m.sum()) > 0
                assert s.sum_real[i] == pytest.approx(float(ce[m].sum()), rel=1e-5)
        assert s.masked == pytest.approx(s.sum_real.sum() / s.n_real.sum())


def test_sampling_defaults_to_the_corrected_penalty_with_the_papers_as_a_switch():
    assert SamplingConfig().penalty == "ctrl" and SamplingConfig(penalty="paper").penalty == "paper"
    logits = torch.tensor([2.0, -2.0, 1.0])
    assert apply_penalty(logits, [1], 2.0, SamplingConfig().penalty)[1] == -4.0  # a penalty whatever the sign
    assert apply_penalty(logits, [1], 2.0, "paper")[1] == -1.0  # the paper's form raises a negative logit
