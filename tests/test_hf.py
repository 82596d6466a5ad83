"""The Hugging Face adapter on tiny randomly initialised models of each supported family (no download): the
adapter's logits against the model's own forward, every schedule against a hand-built forward of the layers it
names (the family's modules called one by one, the final norm and head applied by the test), a looped model built
by sharing one layer, the library's probes and DCP on it, and clear refusals."""

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tiedlm_lib.data import EvalBatch  # noqa: E402
from tiedlm_lib.depth import dcp  # noqa: E402
from tiedlm_lib.depth import readout as lens  # noqa: E402
from tiedlm_lib.hub.adapter import FAMILIES, PAD_LOGIT, HFDepthModel  # noqa: E402
from tiedlm_lib.model.schedules import REUSE, DepthModel, plan, plan_logits  # noqa: E402
from tiedlm_lib.stats.bootstrap import value  # noqa: E402

V, T, L = 50, 10, 4
TOL = 1e-5  # float32: the adapter and the hand-built forward call the same modules in the same order


def _config(family: str, **kw):
    common = dict(vocab_size=V, max_position_embeddings=32)
    if family == "gpt2":
        return transformers.GPT2Config(vocab_size=V, n_positions=32, n_embd=16, n_layer=L, n_head=2, bos_token_id=0,
                                       eos_token_id=0, **kw)
    if family == "neox":
        return transformers.GPTNeoXConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=L,
                                          num_attention_heads=2, **common, **kw)
    cfg = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config, "mistral": transformers.MistralConfig,
           "qwen3": transformers.Qwen3Config}[family]
    return cfg(**{**dict(hidden_size=16, intermediate_size=32, num_hidden_layers=L, num_attention_heads=2,
                          num_key_value_heads=1), **common, **kw})


CLASSES = {"gpt2": "GPT2LMHeadModel", "neox": "GPTNeoXForCausalLM", "llama": "LlamaForCausalLM",
           "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM", "qwen3": "Qwen3ForCausalLM"}


def _tiny(family: str, **kw):
    torch.manual_seed(0)
    return getattr(transformers, CLASSES[family])(_config(family, **kw)).eval()


def _hand_built(m, x: torch.Tensor, layers) -> dict[str, torch.Tensor]:
    """Embedding, the given layers in order (REUSE: re-add the last update), then the final norm and head — written
    out per family, independently of the adapter. Returns the state after the layers, the head input and logits."""
    pos = torch.arange(x.shape[1])[None]
    gpt2 = isinstance(m, transformers.GPT2LMHeadModel)
    with torch.no_grad():
        if gpt2:
            h = m.transformer.wte(x) + m.transformer.wpe(pos)
            call = lambda layer, h: layer(h)  # noqa: E731
            norm, head = m.transformer.ln_f, m.lm_head
        else:
            base = m.gpt_neox if isinstance(m, transformers.GPTNeoXForCausalLM) else m.model
            h = (base.embed_in if hasattr(base, "embed_in") else base.embed_tokens)(x)
            pe = base.rotary_emb(h, position_ids=pos)
            # no mask given: scaled-dot-product attention is causal for a full sequence
            call = lambda layer, h: layer(h, attention_mask=None, position_ids=pos, position_embeddings=pe)  # noqa
            norm = base.final_layer_norm if hasattr(base, "final_layer_norm") else base.norm
            head = m.lm_head
        prev = None
        for layer in layers:
            if layer == REUSE:
                h, prev = h + (h - prev), h
                continue
            out = call(layer, h)
            h, prev = (out[0] if isinstance(out, tuple) else out), h
        return {"z": h, "h": norm(h), "logits": head(norm(h))}


FAMILY_NAMES = list(CLASSES)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_full_depth_is_the_model_and_truncations_are_the_layers_they_name(family):
    m = _tiny(family)
    a = HFDepthModel(m, token_offset=0)
    assert isinstance(a, DepthModel) and isinstance(a, torch.nn.Module)
    x = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(1))
    assert a.layout == "S S S S" and a.dense
    with torch.no_grad():
        own = m(x).logits
    assert torch.equal(a.logits(x), own)
    assert torch.allclose(a.logits(x, plan(a.layout, "prefix", L)), own, atol=1e-6, rtol=0)
    assert torch.allclose(_hand_built(m, x, a.layers)["logits"], own, atol=TOL, rtol=0)  # the reference is the model
    layers = a.layers
    for sched, k, used in (("prefix", 1, layers[:1]), ("prefix", 3, layers[:3]), ("suffix", 2, layers[2:]),
                           ("frozen", 2, [layers[0], layers[1], REUSE, REUSE])):
        p = plan(a.layout, sched, k)
        ref = _hand_built(m, x, used)
        with torch.no_grad():
            z = a.core_state(x, p)
            assert torch.allclose(z, ref["z"], atol=TOL, rtol=0), (family, sched, k)  # the state before the coda
            assert torch.allclose(a.finish(z), ref["h"], atol=TOL, rtol=0), (family, sched, k)
        got = a.logits(x, p)
        assert torch.allclose(got, ref["logits"], atol=TOL, rtol=0), (family, sched, k)
        assert not torch.allclose(got, own, atol=1e-3), (family, sched, k)  # truncation changes the output
    # the model is left as it was: the same layer modules, the same count
    from tiedlm_lib.hub.adapter import _get

    assert list(_get(m, a.family.layers)) == layers and getattr(m.config, a.family.count) == L
    assert torch.equal(a.logits(x), own)


def test_the_token_offset_keeps_id_zero_for_padding():
    """Library id t is the model's t - 1; the pad column is never predicted, and a real token 0 of the model's
    vocabulary (GPT-2's "!") is library id 1, so it is scored, not dropped as padding."""
    m = _tiny("gpt2")
    a = HFDepthModel(m)
    x = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(1))
    x[0, 3] = 0
    with torch.no_grad():
        own = m(x).logits
    got = a.logits(x + 1)
    assert got.shape == (2, T, V + 1) and torch.equal(got[..., 1:], own) and (got[..., 0] == PAD_LOGIT).all()
    assert torch.allclose(plan_logits(a, x + 1, plan(a.layout, "prefix", L))[..., 1:], own, atol=1e-6, rtol=0)
    assert got.log_softmax(-1)[..., 0].max() < -1e8 and torch.isfinite(got.log_softmax(-1)).all()
    with pytest.raises(ValueError, match=r"token id 51 is outside the vocabulary \[0, 51\)"):
        a.logits(torch.full((1, 3), V + 1))


def test_qwen_layers_keep_their_own_attention_kind_when_rearranged():
    """Qwen2/3 pick each layer's mask by position from config.layer_types: with sliding-window layers, a suffix
    must give each layer its own kind. The reference is a model built of only those layers (its own forward)."""
    m = _tiny("qwen3", use_sliding_window=True, sliding_window=2, max_window_layers=2)
    types = list(m.config.layer_types)
    assert types == ["full_attention", "full_attention", "sliding_attention", "sliding_attention"]
    a = HFDepthModel(m, token_offset=0)
    x = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(3))
    for sched, idx in (("suffix", [2, 3]), ("prefix", [0, 1, 2])):
        cfg = copy.deepcopy(m.config)
        cfg.num_hidden_layers, cfg.layer_types = len(idx), [types[i] for i in idx]
        ref = transformers.Qwen3ForCausalLM(cfg).eval()
        ref.model.embed_tokens, ref.model.norm, ref.lm_head = m.model.embed_tokens, m.model.norm, m.lm_head
        ref.model.rotary_emb, ref.model.layers = m.model.rotary_emb, torch.nn.ModuleList(m.model.layers[i] for i in idx)
        with torch.no_grad():
            want = ref(x, use_cache=False).logits
        got = a.logits(x, plan(a.layout, sched, len(idx)))
        assert torch.allclose(got, want, atol=TOL, rtol=0), sched
    assert m.config.layer_types == types  # restored
    # and the sliding layers did see a window: the same suffix read with full attention differs
    full = copy.deepcopy(m)
    full.config.layer_types = ["full_attention"] * L
    with torch.no_grad():
        assert not torch.allclose(HFDepthModel(full, token_offset=0).logits(x, plan(a.layout, "suffix", 2)), got,
                                  atol=1e-4)


def _looped(family: str = "llama"):
    """A model of the family whose layers 1-3 are one shared module: layout S A*3 S."""
    from tiedlm_lib.hub.adapter import _get, _set

    m = _tiny(family)
    fam = FAMILIES[type(m).__name__]
    layers = list(_get(m, fam.layers))
    shared = layers[1]
    _set(m, fam.layers, torch.nn.ModuleList([layers[0], shared, shared, shared, layers[3]]))
    setattr(m.config, fam.count, 5)
    if getattr(m.config, "layer_types", None) is not None:
        m.config.layer_types = ["full_attention"] * 5
    return m, layers[0], shared, layers[3]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_looped_model_built_by_sharing_a_layer(family):
    """The layout names the loop; prefix, repeat and frozen plans match hand-built loops in every family, and the
    coda after the loop is part of finish (the state a loop-placed probe reads is before it)."""
    m, first, shared, last = _looped(family)
    a = HFDepthModel(m, token_offset=0)
    assert a.layout == "S A*3 S" and not a.dense
    x = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():  # without a KV cache: a shared layer keeps one layer_idx, so a cache would mix its calls
        own = m(x, use_cache=False).logits
        cached = m(x).logits
    assert torch.allclose(a.logits(x, plan(a.layout, "prefix", 3)), own, atol=1e-6, rtol=0)
    if family == "llama":
        assert not torch.allclose(cached, own, atol=1e-4)  # why the adapter never asks for the cache
    cases = {("prefix", 1): [first, shared], ("repeat", 1): [first, shared, shared, shared],
             ("repeat", 2): [first, shared, shared, shared], ("frozen", 1): [first, shared, REUSE, REUSE],
             ("frozen", 2): [first, shared, shared, REUSE], ("suffix", 2): [first, shared, shared]}
    for (sched, k), used in cases.items():
        p = plan(a.layout, sched, k)
        assert p.coda == ("S1",)
        ref = _hand_built(m, x, used)
        with torch.no_grad():
            z = a.core_state(x, p)
            assert torch.allclose(z, ref["z"], atol=TOL, rtol=0), (sched, k)  # before the coda
            want = _hand_built(m, x, [*used, last])
            assert torch.allclose(a.finish(z), want["h"], atol=TOL, rtol=0), (sched, k)
        assert torch.allclose(a.logits(x, p), want["logits"], atol=TOL, rtol=0), (sched, k)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_document_reads_the_same_alone_and_right_padded_in_a_batch(family):
    """The library's batches are right-padded: a document's real positions see only its own tokens, so its logits
    under any plan are those it has alone (pad id 0 is shifted to a real id at positions nothing reads)."""
    a = HFDepthModel(_tiny(family))
    g = torch.Generator().manual_seed(6)
    short, other = torch.randint(1, V + 1, (1, 6), generator=g), torch.randint(1, V + 1, (1, T), generator=g)
    batch = torch.cat([torch.cat([short, torch.zeros(1, T - 6, dtype=torch.long)], 1), other])
    for p in (plan(a.layout, "prefix", 2), plan(a.layout, "suffix", 3), None):
        alone, padded = a.logits(short, p), a.logits(batch, p)
        assert torch.allclose(padded[:1, :6], alone, atol=TOL, rtol=0), (family, p)
        assert torch.allclose(padded[1:], a.logits(other, p), atol=TOL, rtol=0), (family, p)


def test_a_stack_the_forward_would_not_run_as_listed_is_refused():
    """A layer count other than the stack's (Llama's forward slices by it), and a shared layer at positions of two
    attention kinds (Qwen picks the kind by position), are refused by name."""
    m, *_ = _looped("llama")
    m.config.num_hidden_layers = 4
    with pytest.raises(ValueError, match=r"config.num_hidden_layers = 4 but model.layers holds 5 layers"):
        HFDepthModel(m)
    q, *_ = _looped("qwen3")
    q.config.layer_types = ["full_attention", "full_attention", "sliding_attention", "full_attention",
                            "full_attention"]
    with pytest.raises(ValueError, match=r"shared layer sits at positions of different attention kinds"):
        HFDepthModel(q)
    q.config.layer_types = ["full_attention"] * 4
    with pytest.raises(ValueError, match=r"config.layer_types names 4 layers, the stack holds 5"):
        HFDepthModel(q)


def test_two_loops_and_a_sliding_layer_after_the_loop_in_a_frozen_copy():
    """Repeat on two loops re-applies the k-th application (not the last loop); and the adapter read through a loop
    placement (lens.Readout) keeps each layer's attention kind, as a deep copy of it does."""
    m, first, shared, last = _looped()
    second = copy.deepcopy(shared)
    m.model.layers = torch.nn.ModuleList([first, shared, shared, second, second, last])
    m.config.num_hidden_layers = 6
    a = HFDepthModel(m, token_offset=0)
    assert a.layout == "S A*2 B*2 S"
    x = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(5))
    for sched, k, used in (("repeat", 1, [first, shared, shared, shared, shared]),
                           ("repeat", 3, [first, shared, shared, second, second]),
                           ("suffix", 2, [first, second, second]),
                           ("frozen", 3, [first, shared, shared, second, REUSE])):
        with torch.no_grad():
            assert torch.allclose(a.core_state(x, plan(a.layout, sched, k)), _hand_built(m, x, used)["z"], atol=TOL,
                                  rtol=0), (sched, k)
    q = _tiny("qwen3", use_sliding_window=True, sliding_window=2, max_window_layers=3)
    ql = q.model.layers
    q.model.layers = torch.nn.ModuleList([ql[0], ql[1], ql[1], ql[3]])
    q.config.layer_types = ["full_attention", "full_attention", "full_attention", "sliding_attention"]
    aq = HFDepthModel(q, token_offset=0)
    with torch.no_grad():
        z = aq.core_state(x, plan(aq.layout, "prefix", 1))
        assert torch.allclose(lens.Readout(aq, "loop")(z), aq.head(aq.finish(z)), atol=1e-6, rtol=0)
        twin = copy.deepcopy(aq)  # other module ids: the kinds are keyed at call time
        assert torch.allclose(twin.head(twin.finish(z)), aq.head(aq.finish(z)), atol=1e-6, rtol=0)


def test_the_protocol_on_a_looped_model_and_its_checks(capsys):
    """protocol.run on a looped model: the decomposition at k_min, N/2, N with frozen for a single loop; bad
    arguments are refused before any evaluation."""
    from tiedlm_lib.data import TokenDocs
    from tiedlm_lib.hub import protocol

    m, *_ = _looped()
    a = HFDepthModel(m)
    g = torch.Generator().manual_seed(6)
    docs = TokenDocs.from_lists([torch.randint(1, V + 1, (T,), generator=g).tolist() for _ in range(12)])
    res = protocol.run(a, docs, n_cal=4, ks=[1], schedules=["prefix", "frozen"], probes=["head/diagonal"],
                       seq_len=T, batch_size=4, n_boot=20, iters=2, lams=(1e-2,))
    assert res.decomposition == []  # N = 3: k_mid = 1 = k_min, nothing to decompose
    for bad, msg in (({"ks": [3]}, "must include a truncation k < 3"), ({"schedules": ["suffix"]}, "include 'prefix'"),
                     ({"probes": []}, "probes is empty"), ({"seq_len": 64}, "exceeds the model's context of 32")):
        kw = {"n_cal": 4, "ks": [1], "schedules": ["prefix"], "probes": ["head/diagonal"], "seq_len": T} | bad
        with pytest.raises(ValueError, match=msg):
            protocol.run(a, docs, **kw)
    m4, first, shared, last = _looped()
    m4.model.layers = torch.nn.ModuleList([first, *[shared] * 4, last])
    m4.config.num_hidden_layers = 6
    res = protocol.run(HFDepthModel(m4), docs, n_cal=4, ks=[1], schedules=["prefix", "frozen"],
                       probes=["head/diagonal"], seq_len=T, batch_size=4, n_boot=20, iters=2, lams=(1e-2,))
    d = {r["term"]: r for r in res.decomposition}
    assert d["total"]["k_mid"] == 2 and d["total"]["k_max"] == 4 and d["total"]["control"] == "frozen"
    parts = sum(d[t]["estimate"] for t in ("application count", "distinct depth", "block composition"))
    assert abs(parts - d["total"]["estimate"]) < 1e-9
    assert sorted({r["k"] for r in res.conditions}) == [1, 2, 4]  # k_mid joined the grid


def test_the_library_probes_and_dcp_run_on_an_hf_model():
    """lens and dcp use only the DepthModel interface: a loop-placed probe fits through finish (gradients through
    the family's forward), and the decomposition's terms telescope."""
    m, *_ = _looped()
    a = HFDepthModel(m)
    g = torch.Generator().manual_seed(4)

    def batches(offset):
        x = torch.randint(1, V + 1, (4, T), generator=g)
        x[:, -2:] = 0  # right padding
        return [EvalBatch(x, torch.roll(x, -1, 1) * (torch.roll(x, -1, 1) > 0), torch.arange(4) + offset)]

    cal, ev = batches(0), batches(10)
    conds = dcp.evaluate_schedules(a, lambda: cal, lambda: ev, ["prefix", "repeat"], [1, 2, 3],
                                   probes=("head/diagonal", "loop/temperature"), iters=3, lams=(1e-2,))
    assert {c.raw.n_real.sum() for c in conds.values()} == {int((ev[0].targets > 0).sum())}
    d = dcp.decompose(conds, 1, 2, 3, probe="head/diagonal", n_boot=50)
    parts = d["application count"].point + d["distinct depth"].point + d["block composition"].point
    assert abs(parts - d["total"].point) < 1e-9
    st = lens.collect_states(a, cal, plan(a.layout, "prefix", 1), "loop")
    fit = lens.fit_probe(a, st, lens.ProbeSpec("loop", "diagonal"), lam=0.0, iters=5)
    moved = max((p - 1).abs().max().item() if n.endswith("a") else p.abs().max().item()
                for n, p in fit.probe.named_parameters())
    assert moved > 1e-3  # the gradient reached the loop-placed map through finish (the family's own forward)
    assert value(lens.probe_nll(a, st, fit)) < value(lens.probe_nll(a, st, placement="loop")) - 1e-4


@pytest.mark.parametrize("family", ["gpt2", "qwen2", "looped"])
def test_the_exit_ladder_of_one_pass_is_each_prefix_and_exits_run_on_it(family):
    """iter_prefix (one forward, a tap after each requested layer) gives each prefix(k)'s own core state, as the
    generic path of one core_state per k does; exits' features read depth k through it, and depth N is the model."""
    from tiedlm_lib.data import shift_targets
    from tiedlm_lib.depth.exits import collect_features
    from tiedlm_lib.model.schedules import budget, prefix_states

    m = _looped()[0] if family == "looped" else _tiny(family)
    a = HFDepthModel(m, token_offset=0)
    N = budget(a.layout)
    x = torch.randint(1, V, (3, T), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        one_pass = dict(prefix_states(a, x, [N, 1, 2, 1]))
        assert list(one_pass) == [1, 2, N] and N > 2
        for k, z in one_pass.items():
            assert torch.equal(z, a.core_state(x, plan(a.layout, "prefix", k))), (family, k)

    class Plain(torch.nn.Module):  # a DepthModel without iter_prefix: the generic path
        layout = a.layout
        core_state, finish, head = a.core_state, a.finish, a.head

    with torch.no_grad():
        assert all(torch.equal(z, one_pass[k]) for k, z in prefix_states(Plain(), x, [1, 2, N]))
    with pytest.raises(ValueError, match=rf"applications must be integers in 1..{N}"):
        list(prefix_states(a, x, [0]))
    y = shift_targets(x)
    f = collect_features(a, [EvalBatch(x, y, torch.arange(3))])
    real = y != 0
    assert f.K == N
    with torch.no_grad():
        for k in (1, N):
            logp = torch.log_softmax(a.logits(x, plan(a.layout, "prefix", k)).double(), -1)
            want = -logp.gather(-1, y.clamp_min(0)[..., None])[..., 0][real]
            assert torch.allclose(torch.from_numpy(f.nll[:, k - 1]), want, atol=1e-5, rtol=0), (family, k)
    assert f.agree[:, -1].all()


def test_the_default_grids_are_paper_bs():
    from tiedlm_lib.hub import protocol

    dense = HFDepthModel(_tiny("llama"))
    assert protocol.default_ks(dense) == [1, 2, 3, 4] and protocol.default_schedules(dense) == ["prefix", "suffix"]
    m, *_ = _looped()
    looped = HFDepthModel(m)
    assert protocol.default_ks(looped) == [1, 2, 3] and "repeat" in protocol.default_schedules(looped)
    # 28 layers: round(f * 28) for f in 0.25 .. 1, paper B's negative control (26/28 among them)
    assert protocol.default_ks(HFDepthModel(_tiny("llama", num_hidden_layers=28))) == [7, 14, 21, 24, 26, 28]


def test_unknown_families_and_unsupported_schedules_are_refused_by_name():
    assert {type(_tiny(f)).__name__ for f in FAMILY_NAMES} == set(FAMILIES)  # every listed family is tested

    class MyLM(torch.nn.Module):
        pass

    class MyLlama(transformers.LlamaForCausalLM):  # a user's subclass keeps its family
        pass

    assert HFDepthModel(MyLlama(_config("llama"))).layout == "S S S S"
    with pytest.raises(ValueError, match=r"MyLM is not a supported family .*add a Family\(layers=\.\.\..*DepthModel"):
        HFDepthModel(MyLM())
    for attr, what in (("norm", "final norm at 'model.norm'"), ("layers", "layer stack at 'model.layers'")):
        renamed = MyLlama(_config("llama"))  # a subclass that keeps a part under another name
        setattr(renamed.model, f"my_{attr}", getattr(renamed.model, attr))
        delattr(renamed.model, attr)
        with pytest.raises(ValueError, match=f"MyLlama has no {what}, where its family entry"):
            HFDepthModel(renamed)
    a = HFDepthModel(_tiny("gpt2"))
    x = torch.ones(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="'repeat' is refused on a dense model: .*repeating a layer creates a diff"):
        a.logits(x, plan(a.layout, "repeat", 2))
    for wrong in (plan("S A*3 S", "prefix", 1), plan("S S S S S", "prefix", 1), plan("S S S", "prefix", 1)):
        with pytest.raises(ValueError, match="was made for another layout than the model's 'S S S S'"):
            a.logits(x, wrong)
    with pytest.raises(ValueError, match="token_offset must be 1"):
        HFDepthModel(_tiny("gpt2"), token_offset=2)
    m = _tiny("gpt2")
    h = m.transformer.h
    m.transformer.h = torch.nn.ModuleList([h[0], h[1], h[0], h[2]])  # one module in two separate places
    with pytest.raises(ValueError, match="two separate places"):
        HFDepthModel(m)


def _save_checkpoint(folder, seed: int, texts):
    """A tiny Llama and a byte-level BPE tokenizer of its vocabulary, saved by save_pretrained (what a user has)."""
    from tiedlm_lib.data import train_tokenizer

    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=train_tokenizer(texts, 300))
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=16, intermediate_size=32, num_hidden_layers=6,
                                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)


def test_the_dcp_command_runs_end_to_end_on_saved_checkpoints(tmp_path, capsys):
    """python -m tiedlm_lib dcp on two local save_pretrained folders (two seeds of one model): the dense grid's
    conditions, the shares with intervals, the shares pooled over checkpoints, the figure; bad input is refused."""
    import json

    import pandas as pd

    from tiedlm_lib.__main__ import main
    from tiedlm_lib.data import kjv_documents

    texts = kjv_documents()[:40]
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    folders = [tmp_path / f"ckpt{s}" for s in (0, 1)]
    for s, f in enumerate(folders):
        _save_checkpoint(f, s, texts)
    out = tmp_path / "out"
    args = ["dcp", "--model", ",".join(map(str, folders)), "--data", str(data), "--n-cal", "12", "--n-boot", "50",
            "--seq-len", "32", "--ks", "3", "--out", str(out), "--device", "cpu"]
    assert main(args) == 0
    cond = pd.read_csv(out / "conditions.csv")
    assert set(cond.schedule) == {"prefix", "suffix"} and sorted(set(cond.k)) == [3, 6]  # N = 6 always joins
    assert len(cond) == 2 * 2 * 2 and (cond["raw NLL"] > 0).all() and cond["head/diagonal NLL"].notna().all()
    assert cond.groupby("checkpoint").tokens.nunique().eq(1).all()  # every condition on the same tokens
    full = cond[(cond.schedule == "prefix") & (cond.k == 6)]
    shares = pd.read_csv(out / "shares.csv")  # an untrained model: gaps near 0, so the shares are wild but defined
    assert len(shares) == 2 * 2 and (shares["share lo"] <= shares["share hi"]).all()
    pooled = pd.read_csv(out / "pooled_shares.csv")
    assert len(pooled) == 2 and (pooled.checkpoints == 2).all() and (pooled.lo <= pooled.hi).all()
    assert (out / "nll_by_k.svg").read_text().startswith("<svg") and (out / "conditions.md").is_file()
    assert json.loads((out / "run.json").read_text())["n_cal"] == 12
    assert len(full) == 2 and "written" in capsys.readouterr().out
    # bad input: named, nothing loaded
    assert main([*args[:2], str(tmp_path / "nowhere"), *args[3:]]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main([*args, "--probes", "head/sideways"]) == 2
    assert "probe form must be one of" in capsys.readouterr().err
    assert main([*args[:4], str(tmp_path / "missing.jsonl"), *args[5:]]) == 2
    assert "does not exist: expected a JSONL file" in capsys.readouterr().err
    for extra, msg in ((["--schedules", "prefix,sideways"], "--schedules must be among prefix, repeat"),
                       (["--seq-len", "1"], "--seq-len must be at least 2"),
                       (["--batch-size", "0"], "--batch-size must be at least 1"),
                       (["--schedules", "prefix,repeat"], "'repeat' is refused on a dense model")):
        assert main([*args, *extra]) == 2, extra
        assert msg in capsys.readouterr().err, extra
    (tmp_path / "no-weights").mkdir()
    (tmp_path / "no-weights" / "config.json").write_text((folders[0] / "config.json").read_text())
    assert main([*args[:2], str(tmp_path / "no-weights"), *args[3:]]) == 2
    assert "transformers could not load a causal LM from it" in capsys.readouterr().err
    _save_checkpoint(tmp_path / "wide", 0, texts)
    import transformers as tf

    cfg = tf.AutoConfig.from_pretrained(tmp_path / "wide")
    cfg.num_hidden_layers = 5
    cfg.save_pretrained(tmp_path / "wide")
    assert main([*args[:2], f"{folders[0]},{tmp_path / 'wide'}", *args[3:]]) == 2
    assert "differ in architecture" in capsys.readouterr().err
    # the same architecture with another tokenizer: refused before the first checkpoint runs, by name
    other = tmp_path / "othertok"
    _save_checkpoint(other, 1, kjv_documents()[2000:2040])
    assert main([*args[:2], f"{folders[0]},{other}", *args[3:]]) == 2
    captured = capsys.readouterr()
    assert f"--model '{other}' tokenizes the documents differently" in captured.err
    assert "conditions" not in captured.out and str(folders[0]) + ":" not in captured.out


def test_a_looped_checkpoint_written_untied_loads_looped_again(tmp_path, capsys):
    """save_pretrained refuses shared layers; save_untied writes one copy per position, and the loader ties runs of
    exactly equal consecutive layers again: the model in memory's layout, shared module and logits. --no-retie reads
    it as a dense stack; a dense checkpoint is never tied; the command gives the looped model every schedule."""
    import json

    import pandas as pd

    from tiedlm_lib.__main__ import main
    from tiedlm_lib.data import kjv_documents
    from tiedlm_lib.hub import protocol
    from tiedlm_lib.hub.adapter import save_untied, tie_repeated_layers

    texts = kjv_documents()[:30]
    _save_checkpoint(tmp_path / "dense", 0, texts)
    m = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "dense").eval()
    layers = m.model.layers
    m.model.layers = torch.nn.ModuleList([layers[0], layers[1], layers[1], layers[1], layers[4], layers[5]])
    with pytest.raises(RuntimeError, match="shared tensors"):
        m.save_pretrained(tmp_path / "refused")
    save_untied(m, tmp_path / "looped")
    transformers.AutoTokenizer.from_pretrained(tmp_path / "dense").save_pretrained(tmp_path / "looped")
    assert m.model.layers[1] is m.model.layers[3]  # the model saved is left looped
    a, _ = protocol.load_hf(tmp_path / "looped")
    assert a.layout == "S A*3 S S" and a.layers[1] is a.layers[2] is a.layers[3] is a.blocks["A"]
    x = torch.randint(1, 301, (2, T), generator=torch.Generator().manual_seed(5))
    assert torch.allclose(a.logits(x, plan(a.layout, "repeat", 1)), HFDepthModel(m).logits(x, plan(
        a.layout, "repeat", 1)), atol=1e-6, rtol=0)
    assert protocol.load_hf(tmp_path / "looped", retie=False)[0].layout == "S S S S S S"
    dense, _ = protocol.load_hf(tmp_path / "dense")
    assert dense.dense and tie_repeated_layers(dense.hf) == []
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    args = ["dcp", "--model", str(tmp_path / "looped"), "--data", str(data), "--n-cal", "10", "--n-boot", "20",
            "--seq-len", "24", "--ks", "1", "--probes", "head/temperature", "--out", str(tmp_path / "out"),
            "--device", "cpu"]
    assert main(args) == 0
    assert "layout 'S A*3 S S'" in capsys.readouterr().out
    cond = pd.read_csv(tmp_path / "out" / "conditions.csv")
    assert set(cond.schedule) == {"prefix", "repeat", "suffix", "frozen"}
    assert main([*args, "--no-retie"]) == 0
    assert set(pd.read_csv(tmp_path / "out" / "conditions.csv").schedule) == {"prefix", "suffix"}


def test_the_dense_control_folder_is_a_checkpoint_the_command_reads(tmp_path, monkeypatch, capsys):
    """Section 13's dense run (tiedlm_lib.hub.dense) carries its tokenizer and says its ids are the library's: the
    command loads it without the token shift and scores the corpus."""
    import json

    import pandas as pd

    from tiedlm_lib.__main__ import main
    from tiedlm_lib.data import kjv_documents
    from tiedlm_lib.hub import dense, protocol

    model, result = dense.get_dense("smoke", 0, root=tmp_path, progress=False)
    folder = dense.run_dir("smoke", 0, tmp_path)
    assert model.token_offset == 0 and result["layers"] == 4 and (folder / "tokenizer.json").is_file()
    loaded, tok = protocol.load_hf(folder)
    assert loaded.token_offset == 0 and loaded.layout == "S S S S"
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in kjv_documents()[:30]))
    out = tmp_path / "out"
    assert main(["dcp", "--model", str(folder), "--data", str(data), "--n-cal", "10", "--n-boot", "20", "--seq-len",
                 "32", "--ks", "2", "--probes", "head/temperature", "--out", str(out), "--device", "cpu"]) == 0
    cond = pd.read_csv(out / "conditions.csv")
    assert (cond["raw NLL"] < 6.5).all()  # trained on this corpus's ids (ln 320 = 5.77 is uniform; shifted ids: worse)


def test_a_depth_upscaled_dense_model_stays_dense_unless_asked_and_an_unknown_family_is_refused_unloaded(tmp_path):
    """Re-tying equal consecutive layers only for a checkpoint marked looped (save_untied, export-hf) or with
    --retie: a dense model whose layer was duplicated (depth up-scaling) is read as the dense model it is."""
    import json

    from tiedlm_lib.data import kjv_documents
    from tiedlm_lib.hub import protocol

    _save_checkpoint(tmp_path / "dense", 0, kjv_documents()[:30])
    m = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "dense")
    layers = m.model.layers
    m.model.layers = torch.nn.ModuleList([layers[0], layers[1], copy.deepcopy(layers[1]), *layers[2:]])
    m.config.num_hidden_layers = 7
    m.save_pretrained(tmp_path / "upscaled")  # equal weights, separate modules: what depth up-scaling writes
    transformers.AutoTokenizer.from_pretrained(tmp_path / "dense").save_pretrained(tmp_path / "upscaled")
    assert protocol.load_hf(tmp_path / "upscaled")[0].layout == "S S S S S S S"
    assert protocol.load_hf(tmp_path / "upscaled", retie=True)[0].layout == "S A*2 S S S S"
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"architectures": ["BertForMaskedLM"], "model_type": "bert"}))
    with pytest.raises(ValueError, match="is a BertForMaskedLM, not a supported family .*nothing was loaded"):
        protocol.load_hf(bert)  # there are no weights to load: the refusal comes from config.json alone


def test_a_bf16_llama_goes_through_the_command_in_bf16_one_checkpoint_in_memory_at_a_time(tmp_path, monkeypatch,
                                                                                          capsys):
    """--dtype bfloat16 keeps the weights in bf16 (the probes are fitted on float32 states and logits); the command
    frees each checkpoint before it loads the next; --seq-len defaults to the model's context (64) where that is
    shorter than 256; a left-padded batch is refused by name."""
    import gc
    import json
    import weakref

    import pandas as pd

    from tiedlm_lib.__main__ import main
    from tiedlm_lib.data import kjv_documents
    from tiedlm_lib.hub import protocol

    texts = kjv_documents()[:20]
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    folders = [tmp_path / f"ckpt{s}" for s in (0, 1)]
    for s, f in enumerate(folders):
        _save_checkpoint(f, s, texts)
    live, real = [], protocol.load_hf

    def load(*a, **k):
        gc.collect()
        assert all(r() is None for r in live), "the previous checkpoint is still in memory"
        model, tok = real(*a, **k)
        assert model.dtype == torch.bfloat16
        live.append(weakref.ref(model))
        return model, tok

    monkeypatch.setattr(protocol, "load_hf", load)
    out = tmp_path / "out"
    assert main(["dcp", "--model", ",".join(map(str, folders)), "--data", str(data), "--n-cal", "8", "--n-boot",
                 "10", "--ks", "3", "--schedules", "prefix", "--probes", "head/diagonal", "--dtype", "bfloat16",
                 "--out", str(out), "--device", "cpu"]) == 0
    assert len(live) == 2 and "64 tokens each, bfloat16" in capsys.readouterr().out
    cond = pd.read_csv(out / "conditions.csv")
    assert cond["head/diagonal NLL"].notna().all() and (cond["raw NLL"] > 0).all()
    assert json.loads((out / "run.json").read_text())["seq_len"] == [64]
    model, _ = real(folders[0], dtype="bfloat16")
    x = torch.tensor([[0, 0, 5, 6, 7], [5, 6, 7, 0, 0]])
    with pytest.raises(ValueError, match="row 0 of the batch has padding .id 0. before a real token"):
        model.logits(x)
    assert model.logits(x[1:]).dtype == torch.float32  # right padding is read; logits come back in float32


def test_inkling2loop_is_refused_with_its_reason_before_and_after_loading(tmp_path):
    """transformers 5.24's looped family restarts every pass from the pre-loop state and passes the previous pass
    on only through gated messages: not z <- z + f(z), so the protocol's controls have no defined input. A tiny random
    configuration is refused by name, from config.json before loading and from the class after."""
    import json

    from tiedlm_lib.hub import protocol

    cfg = transformers.Inkling2LoopTextConfig(vocab_size=64, hidden_size=32, num_hidden_layers=4,
                                              num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
                                              loop_num_passes=2)
    assert cfg.loop_num_passes == 2
    folder = tmp_path / "inkling"
    cfg.architectures = ["Inkling2LoopForCausalLM"]
    cfg.save_pretrained(folder)  # a config and no weights: the refusal cannot come from loading them
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["Inkling2LoopForCausalLM"]
    with pytest.raises(ValueError, match="restarts from the pre-loop state"):
        protocol.load_hf(folder)
    with pytest.raises(ValueError, match="Inkling2Loop .* is looped, but not as the protocol needs"):
        HFDepthModel(transformers.Inkling2LoopForCausalLM(cfg))
