"""The Hugging Face adapter on tiny randomly initialised models of each supported family (no download): the
adapter's logits against the model's own forward, truncations against a hand-built forward of the layers they name,
a looped model built by sharing one layer, and clear refusals."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tiedlm_lib.hf import FAMILIES, HFDepthModel  # noqa: E402
from tiedlm_lib.schedules import plan  # noqa: E402

V, T, L = 50, 10, 4


def _tiny(family: str):
    torch.manual_seed(0)
    common = dict(vocab_size=V, max_position_embeddings=32)
    if family == "gpt2":
        m = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=V, n_positions=32, n_embd=16, n_layer=L,
                                                                 n_head=2, bos_token_id=0, eos_token_id=0))
    elif family == "neox":
        m = transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(hidden_size=16, intermediate_size=32,
                                                                       num_hidden_layers=L, num_attention_heads=2,
                                                                       **common))
    else:
        cls = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
               "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
               "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
               "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM)}[family]
        m = cls[1](cls[0](hidden_size=16, intermediate_size=32, num_hidden_layers=L, num_attention_heads=2,
                          num_key_value_heads=1, **common))
    return m.eval()


def _hand_built(m, x: torch.Tensor, layers) -> tuple[torch.Tensor, torch.Tensor]:
    """Embedding, the given layers in order, final norm, head — written out per family, independently of the
    adapter (the family's modules called one by one)."""
    pos = torch.arange(x.shape[1])[None]
    with torch.no_grad():
        if isinstance(m, transformers.GPT2LMHeadModel):
            h = m.transformer.wte(x) + m.transformer.wpe(pos)
            for layer in layers:
                out = layer(h)
                h = out[0] if isinstance(out, tuple) else out
            return h, m.lm_head(m.transformer.ln_f(h))
        base = m.gpt_neox if isinstance(m, transformers.GPTNeoXForCausalLM) else m.model
        h = (base.embed_in if hasattr(base, "embed_in") else base.embed_tokens)(x)
        pe = base.rotary_emb(h, position_ids=pos)
        for layer in layers:  # no mask given: scaled-dot-product attention is causal for a full sequence
            out = layer(h, attention_mask=None, position_ids=pos, position_embeddings=pe)
            h = out[0] if isinstance(out, tuple) else out
        norm = base.final_layer_norm if hasattr(base, "final_layer_norm") else base.norm
        head = m.embed_out if hasattr(m, "embed_out") else m.lm_head
        return h, head(norm(h))


FAMILY_NAMES = ["gpt2", "neox", "llama", "qwen2", "mistral", "qwen3"]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_full_depth_is_the_model_and_truncations_are_the_layers_they_name(family):
    m = _tiny(family)
    a = HFDepthModel(m)
    x = torch.randint(0, V, (2, T), generator=torch.Generator().manual_seed(1))
    assert a.layout == "S S S S" and type(m).__name__ in FAMILIES
    with torch.no_grad():
        own = m(x).logits
    assert torch.equal(a.logits(x), own)
    assert torch.allclose(a.logits(x, plan(a.layout, "prefix", L)), own, atol=1e-6, rtol=0)  # fp32 tolerance
    assert torch.allclose(_hand_built(m, x, a.layers)[1], own, atol=1e-5, rtol=0)  # the reference is the model
    layers = a.layers
    for sched, k, used in (("prefix", 1, layers[:1]), ("prefix", 3, layers[:3]), ("suffix", 2, layers[2:]),
                           ("repeat", 2, [layers[0], layers[1], layers[1], layers[1]])):
        got = a.logits(x, plan(a.layout, sched, k))
        assert torch.allclose(got, _hand_built(m, x, used)[1], atol=1e-5, rtol=0), (family, sched, k)
        assert not torch.allclose(got, own, atol=1e-3), (family, sched, k)  # truncation changes the output
    z, h = a.states(x, plan(a.layout, "prefix", 2))
    ref_z, _ = _hand_built(m, x, layers[:2])
    assert torch.allclose(z, ref_z, atol=1e-5, rtol=0) and torch.allclose(h, a.norm()(z), atol=1e-6, rtol=0)
    # the model is left as it was: the same layer modules, the same count
    from tiedlm_lib.hf import _get

    assert list(_get(m, a.family.layers)) == layers and getattr(m.config, a.family.count) == L
    assert torch.equal(a.logits(x), own)


def test_a_looped_model_built_by_sharing_a_layer():
    """Layers 1-3 one shared module: the layout names the loop, and repeat/prefix plans call it as many times."""
    m = _tiny("llama")
    layers = m.model.layers
    shared = layers[1]
    m.model.layers = torch.nn.ModuleList([layers[0], shared, shared, shared, layers[3]])
    m.config.num_hidden_layers = 5
    a = HFDepthModel(m)
    assert a.layout == "S A*3 S"
    x = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():  # without a KV cache: a shared layer keeps one layer_idx, so a cache would mix its calls
        own = m(x, use_cache=False).logits
        cached = m(x).logits
    assert torch.allclose(a.logits(x, plan(a.layout, "prefix", 3)), own, atol=1e-6, rtol=0)
    assert not torch.allclose(cached, own, atol=1e-4)  # why the adapter never asks for the cache
    p = plan(a.layout, "prefix", 1)  # S0, one application of A, the closing S
    assert p.calls == ["S0", "A", "S1"]
    want = _hand_built(m, x, [layers[0], shared, layers[3]])[1]
    assert torch.allclose(a.logits(x, p), want, atol=1e-5, rtol=0)


def test_unknown_families_and_unsupported_schedules_are_refused_by_name():
    assert {type(_tiny(f)).__name__ for f in FAMILY_NAMES} == set(FAMILIES)  # every listed family is tested

    class MyLM(torch.nn.Module):
        pass

    with pytest.raises(ValueError, match=r"MyLM is not a supported family .*add a Family\(layers=\.\.\."):
        HFDepthModel(MyLM())
    a = HFDepthModel(_tiny("gpt2"))
    with pytest.raises(ValueError, match="schedule 'frozen' re-adds an update"):
        a.logits(torch.zeros(1, 4, dtype=torch.long), plan("S A*3 S", "frozen", 1))
    with pytest.raises(ValueError, match="does not have"):
        a.logits(torch.zeros(1, 4, dtype=torch.long), plan("S A*3 S", "prefix", 1))
    m = _tiny("gpt2")
    h = m.transformer.h
    m.transformer.h = torch.nn.ModuleList([h[0], h[1], h[0], h[2]])  # one module in two separate places
    with pytest.raises(ValueError, match="two separate places"):
        HFDepthModel(m)
