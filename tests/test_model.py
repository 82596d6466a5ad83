import math

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_model

from tiedlm_lib import ModelConfig, TiedLM, paper_config, parse_layout
from tiedlm_lib.model.tied import Attention

PAPER_COUNTS = {"v3": 7_267_302, "v5": 23_048_934, "v9": 23_048_935, "v12": 23_048_933, "v13": 23_048_932,
                "v14": 23_048_931}


@pytest.mark.parametrize("name", list(PAPER_COUNTS))
def test_paper_parameter_counts_are_exact(name):
    assert TiedLM(paper_config(name)).num_params() == PAPER_COUNTS[name]


def test_paper_layouts_and_sizes():
    assert paper_config("v3").layout == "S S A*30 S S" and paper_config("v3").d_model == 128
    assert paper_config("v5").d_model == 320 and paper_config("v5").n_heads == 10
    assert paper_config("v14").layout == "S A*8 B*8 C*7 D*7"
    assert paper_config("v13").layout == "S A*10 B*10 C*10 S"
    assert paper_config("v12").layout == "S A*15 S B*15 S"
    assert paper_config("v9").layout == "S*5"


def test_block_parameter_split_matches_protocol():
    m = TiedLM(paper_config("v5"))
    n = lambda mod: sum(p.numel() for p in mod.parameters())  # noqa: E731
    assert n(m.blocks["S0"]) == 1_643_842 and n(m.blocks["A"]) == 1_643_841
    assert n(m.tok_emb) == 7_361_600 and n(m.pos_emb) == 82_240 and n(m.head) == 7_384_605


def test_alpha_starts_at_exactly_one_tenth_through_the_logit():
    m = tiny_model()
    blk = m.blocks["A"]
    assert blk.alpha.item() == pytest.approx(0.1, abs=1e-7)
    assert blk.alpha_logit.item() == pytest.approx(math.log(0.1 / 0.9), abs=1e-6)
    assert float(torch.sigmoid(torch.tensor(0.1))) == pytest.approx(0.525, abs=1e-3)  # the bug the logit avoids
    with torch.no_grad():
        blk.alpha_logit.fill_(10.0)
    assert blk.alpha.item() == pytest.approx(0.9)
    with torch.no_grad():
        blk.alpha_logit.fill_(-10.0)
    assert blk.alpha.item() == pytest.approx(0.01)


def test_std_gates_are_raw_scalars_at_0_1():
    m = tiny_model()
    assert m.blocks["S0"].s_attn.item() == pytest.approx(0.1) and m.blocks["S0"].s_ffn.item() == pytest.approx(0.1)


def test_head_is_untied_and_zero_initialised():
    from tiedlm_lib import ModelConfig

    m = TiedLM(ModelConfig(vocab_size=50, d_model=16, n_heads=2, layout="S A*2 S", max_seq_len=8))
    assert m.head.weight.abs().sum() == 0 and m.head.bias.abs().sum() == 0
    assert m.head.weight.data_ptr() != m.tok_emb.weight.data_ptr()
    logits = m(torch.randint(0, 50, (2, 8)))
    assert torch.allclose(F.log_softmax(logits, -1), torch.full_like(logits, -math.log(50)))


def _count_calls(module):
    calls = []
    module.register_forward_hook(lambda *a: calls.append(1))
    return calls


@pytest.mark.parametrize("k", [1, 3, 7])
def test_depth_k_applies_the_tied_block_exactly_k_times(k):
    m = tiny_model("S S A*5 S S")
    calls = _count_calls(m.blocks["A"])
    m(torch.randint(0, 37, (2, 12)), depth=k)
    assert len(calls) == k


def test_default_depth_is_the_trained_depth_and_multi_loop_depth_is_per_loop():
    m = tiny_model("S A*4 B*2 S")
    ca, cb = _count_calls(m.blocks["A"]), _count_calls(m.blocks["B"])
    x = torch.randint(0, 37, (2, 12))
    m(x)
    assert (len(ca), len(cb)) == (4, 2)
    ca.clear(), cb.clear()
    m(x, depth=3)
    assert (len(ca), len(cb)) == (3, 3)


def test_different_depths_give_different_logits_and_the_loop_is_not_bypassed():
    m = tiny_model("S S A*4 S S")
    x = torch.randint(0, 37, (2, 12))
    outs = [m(x, depth=k) for k in (1, 2, 4)]
    assert not torch.allclose(outs[0], outs[1]) and not torch.allclose(outs[1], outs[2])
    before = m(x)
    with torch.no_grad():  # changing only the loop's weights must change the output (v1's bug discarded the loop)
        m.blocks["A"].mlp.up.weight.mul_(3.0)
    assert not torch.allclose(before, m(x))


@pytest.mark.parametrize("layout", ["S S A*5 S S", "S A*3 S B*3 S", "A*4"])
def test_depths_in_one_pass_equal_separate_passes(layout):
    m = tiny_model(layout)
    x = torch.randint(0, 37, (3, 12))
    many = m(x, depths=[4, 1, 2])
    assert sorted(many) == [1, 2, 4]
    for k, logits in many.items():
        assert torch.allclose(logits, m(x, depth=k), atol=1e-6)


def test_one_pass_shares_iterations_for_a_single_loop():
    m = tiny_model("S S A*5 S S")
    calls = _count_calls(m.blocks["A"])
    m(torch.randint(0, 37, (2, 12)), depths=[1, 2, 4, 8])
    assert len(calls) == 8


def test_attention_matches_an_explicit_float64_reference():
    torch.manual_seed(0)
    att = Attention(16, 4).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    q, k, v = att.qkv(x).split(16, -1)
    q, k, v = (t.view(2, 7, 4, 4).transpose(1, 2) for t in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(4)
    s = s.masked_fill(torch.triu(torch.ones(7, 7, dtype=torch.bool), 1), float("-inf"))
    ref = att.out((s.softmax(-1) @ v).transpose(1, 2).reshape(2, 7, 16))
    assert torch.allclose(att(x), ref, atol=1e-12)


@pytest.mark.parametrize("form", ["paper", "residual"])
def test_tied_block_forms_against_hand_computation(form):
    m = tiny_model("A*1", block=form, dtype=torch.float64)
    b = m.blocks["A"]
    z = torch.randn(2, 5, 16, dtype=torch.float64)
    a = b.attn.out(F.scaled_dot_product_attention(
        *(t.view(2, 5, 2, 8).transpose(1, 2) for t in b.attn.qkv(F.layer_norm(z, (16,), b.ln1.weight, b.ln1.bias,
                                                                               1e-5)).split(16, -1)),
        is_causal=True).transpose(1, 2).reshape(2, 5, 16))
    v = F.layer_norm(z + a, (16,), b.ln2.weight, b.ln2.bias, 1e-5)
    mlp = b.mlp.down(F.silu(b.mlp.gate(v)) * b.mlp.up(v))
    f = (v + mlp) if form == "paper" else (a + mlp)
    assert torch.allclose(b(z), z + 0.1 * f, atol=1e-12)


def test_paper_form_state_norm_grows_and_residual_form_does_not_readd_state():
    x = torch.randint(0, 37, (2, 12))
    _, tp = tiny_model("S A*8 S", "paper").run(x)
    norms = tp.loops["A"].state_norm.mean((1, 2))
    assert norms[-1] > norms[0] * 1.2  # each step adds α·LN2(·), of norm ≈ α·√d, never zero
    assert tp.loops["A"].rel_residual.shape == (8, 2, 12)
    assert tp.loops["A"].paper_residual().shape == (8,)


def test_layout_grammar():
    segs = parse_layout("S A*10 B*10 C*10 S")
    assert [(s.kind, s.name, s.iters) for s in segs] == [
        ("std", "S0", 1), ("loop", "A", 10), ("loop", "B", 10), ("loop", "C", 10), ("std", "S1", 1)]
    assert [s.name for s in parse_layout("S*5")] == ["S0", "S1", "S2", "S3", "S4"]
    assert parse_layout("B")[0].iters == 1


@pytest.mark.parametrize("layout,match", [
    ("S X-3 S", "unknown layout token 'X-3'"),
    ("S a*3", "unknown layout token 'a\\*3'"),
    ("S A*0 S", "count must be >= 1"),
    ("S A*3 S A*3", "appears twice"),
    ("", "non-empty"),
])
def test_bad_layouts_are_rejected_by_name(layout, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(layout=layout)


def test_bad_model_configs():
    with pytest.raises(ValueError, match=r"d_model \(100\) must be divisible by n_heads \(3\)"):
        ModelConfig(d_model=100, n_heads=3)
    with pytest.raises(ValueError, match="block must be one of"):
        ModelConfig(block="prenorm")
    with pytest.raises(ValueError, match="vocab_size must be a positive integer"):
        ModelConfig(vocab_size=0)


@pytest.mark.parametrize("depth", [0, -2, 1.5])
def test_bad_depths_are_rejected(depth):
    m = tiny_model()
    with pytest.raises(ValueError, match="depth must be a positive integer"):
        m(torch.randint(0, 37, (1, 4)), depth=depth)
    with pytest.raises(ValueError, match="depth must be a positive integer"):
        m(torch.randint(0, 37, (1, 4)), depths=[1, depth])


def test_depth_on_a_model_without_loops_and_bad_token_shapes():
    m = tiny_model("S*3")
    x = torch.randint(0, 37, (1, 4))
    assert m(x).shape == (1, 4, 37)
    with pytest.raises(ValueError, match="has no tied loop"):
        m(x, depth=2)
    with pytest.raises(ValueError, match=r"shape \(batch, seq_len\)"):
        m(torch.randint(0, 37, (4,)))
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        m(torch.randint(0, 37, (1, 13)))


def test_param_breakdown_matches_protocol_3_6():
    b = TiedLM(paper_config("v5")).param_breakdown()
    assert b == {"embedding": 7_361_600, "positions": 82_240, "outer LayerNorms": 1_280, "head": 7_384_605,
                 "standard blocks": 4 * 1_643_842, "tied blocks": 1_643_841}
    assert sum(b.values()) == 23_048_934
