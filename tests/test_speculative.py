"""Self-speculative decoding: greedy output identical to plain greedy decoding for every layout of the paper, the
sampling distribution equal to the full model's (and a draft-only sampler caught by the same test), the block
applications it reports equal to the ones it ran, and clear errors on bad input."""

import numpy as np
import pytest
import torch
from conftest import tiny_model

from tiedlm_lib.depth.generate import SamplingConfig, distribution, generate
from tiedlm_lib.depth.readout import ProbeSpec, collect_states, fit_probe
from tiedlm_lib.depth.speculative import generate as spec_generate
from tiedlm_lib.model.schedules import plan

GREEDY = SamplingConfig(top_k=1, top_p=None, repetition_penalty=1.0)
LAYOUTS = ["S A*6 S", "S S A*8 S S", "S A*4 S B*4 S", "S A*3 B*3 C*3 S", "S A*4 B*4"]


def _prompt(n, vocab=37, seed=0):
    return torch.randint(4, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("block", ["paper", "residual"])
def test_greedy_is_exactly_plain_greedy_decoding(layout, block):
    m = tiny_model(layout, block=block, seq=48, dtype=torch.float64)
    first = m.core_segments[0].iters
    for n_prompt, d, L in [(1, 1, 3), (5, first - 1, 4), (7, max(1, first // 2), 1), (3, 2, 9)]:
        prompt = _prompt(n_prompt, seed=n_prompt)
        want = generate(m, prompt, SamplingConfig(**{**GREEDY.__dict__, "max_new": 20}))[0]
        got, info = spec_generate(m, prompt, max_new=20, draft_depth=d, draft_len=L)
        assert got == want, (layout, d, L)
        assert info.new_tokens == 20 and 0 <= info.accepted <= info.drafted
        assert info.rounds == 20 - info.accepted  # each round adds its accepted tokens plus one


def test_greedy_is_exact_in_float32_and_a_shallow_draft_is_accepted_often_on_a_model_that_barely_uses_depth():
    m = tiny_model("S A*6 S", seq=64)
    with torch.no_grad():  # a loop that barely moves the state: the draft and the full model agree
        m.blocks["A"].alpha_logit.fill_(-20.0)
    prompt = _prompt(6)
    want = generate(m, prompt, SamplingConfig(**{**GREEDY.__dict__, "max_new": 40}))[0]
    got, info = spec_generate(m, prompt, max_new=40, draft_depth=1, draft_len=8)
    assert got == want and info.acceptance > 0.7
    # fewer sequential block calls than plain decoding, though more position-applications (the draft's own work)
    assert info.calls < 0.6 * info.plain_calls and info.applications > info.plain_applications


def test_the_applications_it_reports_are_the_ones_it_ran():
    m = tiny_model("S A*4 S B*4 S", seq=48)
    calls = []
    hooks = [b.register_forward_hook(lambda mod, i, o: calls.append(o.shape[1])) for b in m.blocks.values()]
    try:
        _, info = spec_generate(m, _prompt(5), max_new=17, draft_depth=2, draft_len=3)
        plain_calls = len(calls)
        generate(m, _prompt(5), SamplingConfig(**{**GREEDY.__dict__, "max_new": 17}))[0]
        plain = calls[plain_calls:]
        calls = calls[:plain_calls]
    finally:
        for h in hooks:
            h.remove()
    assert info.applications == sum(calls) and info.calls == len(calls)  # a call over T positions: T applications
    assert info.plain_applications == sum(plain) == (5 + 17 - 1) * (1 + 4 + 1 + 4 + 1)
    assert info.plain_calls == len(plain)


def test_stop_tokens_end_generation_and_are_included():
    m = tiny_model("S A*6 S", seq=48, dtype=torch.float64)
    prompt = _prompt(4)
    full = generate(m, prompt, SamplingConfig(**{**GREEDY.__dict__, "max_new": 30}))[0]
    stop = full[7]
    want = full[:full.index(stop) + 1]
    got, _ = spec_generate(m, prompt, max_new=30, draft_depth=2, draft_len=5, stop=[stop])
    assert got == want


@pytest.mark.parametrize("placement,form", [("head", "diagonal"), ("loop", "full"), ("head", "temperature")])
def test_a_draft_probe_changes_acceptance_never_the_output(placement, form):
    m = tiny_model("S A*6 S", seq=48, dtype=torch.float32)
    x = torch.randint(4, 37, (16, 12), generator=torch.Generator().manual_seed(1))
    from tiedlm_lib.data import EvalBatch
    batches = [EvalBatch(x[i:i + 4], torch.roll(x[i:i + 4], -1, 1), torch.arange(i, i + 4)) for i in range(0, 16, 4)]
    full = plan(m.config.layout, "prefix", 6)
    states = collect_states(m, batches, plan(m.config.layout, "prefix", 2), placement, full=full)
    fitted = fit_probe(m, states, ProbeSpec(placement, form), iters=5)
    prompt = _prompt(5)
    want = generate(m, prompt, SamplingConfig(**{**GREEDY.__dict__, "max_new": 25}))[0]
    got, info = spec_generate(m, prompt, max_new=25, draft_depth=2, draft_len=4, probe=fitted)
    plain, info0 = spec_generate(m, prompt, max_new=25, draft_depth=2, draft_len=4)
    assert got == want == plain
    assert info.drafted > 0 and info0.drafted > 0
    # the draft reads out through the probe, exactly as the probe's own readout does
    from tiedlm_lib.depth.readout import Readout
    from tiedlm_lib.depth.speculative import _Stack

    stack = _Stack(m, 2, fitted)
    x = torch.tensor([prompt])
    with torch.no_grad():
        z_d = stack.shared(x, 0, {})
        got_logits = stack.draft(z_d, {})
        state = z_d if placement == "loop" else m.head_input(m.coda(z_d))
        want_logits = fitted.probe.logits(Readout(m, placement), state)
    torch.testing.assert_close(got_logits, want_logits)


def _joint(model, prompt, cfg, depth=None, n=3, prefix=(), p=1.0):
    """The exact distribution of the first n sampled tokens, {(t1, .., tn): p}, from the model's logits (the penalty
    history: the prompt window and the tokens sampled so far)."""
    if len(prefix) == n:
        return {tuple(prefix): p}
    with torch.no_grad():
        logits = model(torch.tensor([prompt + list(prefix)]), depth=depth)[0, -1]
    q = distribution(logits, prompt[-cfg.penalty_window:] + list(prefix), cfg)
    out = {}
    for t in range(model.config.vocab_size):
        if q[t] > 0:
            out |= _joint(model, prompt, cfg, depth, n, (*prefix, t), p * float(q[t]))
    return out


def _chi2(counts, probs, n):
    """Pearson's statistic over cells with expected count >= 5 (the rest pooled), and its degrees of freedom."""
    cells = sorted(probs, key=probs.get, reverse=True)
    big = [c for c in cells if probs[c] * n >= 5]
    rest = [c for c in cells if probs[c] * n < 5]
    obs = [counts.get(c, 0) for c in big] + [sum(counts.get(c, 0) for c in rest)]
    exp = [probs[c] * n for c in big] + [sum(probs[c] for c in rest) * n]
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp) if e > 0)
    return stat, len(obs) - 1


@pytest.mark.parametrize("cfg,seed,std", [
    (SamplingConfig(top_k=None, top_p=None, repetition_penalty=1.0), 2, 2.0),
    (SamplingConfig(top_k=4, top_p=0.95, temperature=0.8, repetition_penalty=1.5), 5, 3.0)])
def test_sampling_follows_the_full_models_distribution(cfg, seed, std):
    m = tiny_model("S A*4 S", vocab=6, seq=16, seed=seed)  # models whose depth-1 draft is far from the full model
    with torch.no_grad():
        torch.nn.init.normal_(m.head.weight, std=std, generator=torch.Generator().manual_seed(3))
    prompt = [1, 4, 2]
    target = _joint(m, prompt, cfg)
    draft = _joint(m, prompt, cfg, depth=1)
    tv = 0.5 * sum(abs(target.get(c, 0.0) - draft.get(c, 0.0)) for c in set(target) | set(draft))
    assert tv > 0.1, "the draft must differ from the full model for this test to mean anything"
    n = 1200
    counts: dict = {}
    for s in range(n):  # three tokens: two drafted in the first round, so both acceptance paths and rollback run
        toks, _ = spec_generate(m, prompt, max_new=3, draft_depth=1, draft_len=2, sampling=cfg, seed=s)
        counts[tuple(toks)] = counts.get(tuple(toks), 0) + 1
    stat, df = _chi2(counts, target, n)
    crit = df + 4.0 * np.sqrt(2 * df)  # far in the tail (chi2 sd = sqrt(2 df)): a correct sampler fails ~never
    assert stat < crit, (stat, df)
    # the same test rejects a sampler that skips the correction: the draft's own distribution
    g = np.random.default_rng(0)
    cells = list(draft)
    idx = g.choice(len(cells), n, p=np.array([draft[c] for c in cells]) / sum(draft.values()))
    draft_counts = {c: int(k) for c, k in zip(*np.unique(idx, return_counts=True))}
    draft_counts = {cells[i]: k for i, k in draft_counts.items()}
    assert _chi2(draft_counts, target, n)[0] > crit


def test_the_benchmark_baseline_is_plain_greedy_decoding():
    from tiedlm_lib.depth.speculative import benchmark, plain_greedy

    m = tiny_model("S A*4 S", seq=40, dtype=torch.float64)
    prompts = [_prompt(5, seed=s) for s in range(3)]
    for p in prompts:
        assert plain_greedy(m, p, 12) == generate(m, p, SamplingConfig(**{**GREEDY.__dict__, "max_new": 12}))[0]
    rows, summary = benchmark(m, prompts, 12, [(1, 2), (2, 3)], n_boot=100)
    assert len(rows) == 6 and [(s["draft depth"], s["draft length"]) for s in summary] == [(1, 2), (2, 3)]
    assert all(s["speed-up lo"] <= s["speed-up"] <= s["speed-up hi"] and s["identical outputs"] for s in summary)


def test_the_benchmark_alternates_plain_and_speculative_calls_and_keeps_the_fastest(monkeypatch):
    """A load burst on a shared machine must land on both sides of a ratio: the calls interleave per configuration,
    and the fastest of each side is kept (a slow first call does not count)."""
    import time as _time

    from tiedlm_lib.depth import speculative
    from tiedlm_lib.depth.speculative import SpeculativeInfo

    calls = []

    def fake_plain(model, prompt, max_new):
        calls.append("plain")
        _time.sleep(0.04 if len(calls) == 2 else 0.02)  # the first timed plain call is slowed by a "burst"
        return [1, 2]

    def fake_generate(model, prompt, max_new, draft_depth, draft_len, probe=None):
        calls.append(f"spec{draft_depth}")
        _time.sleep(0.01)
        return [1, 2], SpeculativeInfo(rounds=1, drafted=2, accepted=1, calls=3, plain_calls=4)

    monkeypatch.setattr(speculative, "plain_greedy", fake_plain)
    monkeypatch.setattr(speculative, "generate", fake_generate)
    rows, summary = speculative.benchmark(None, [[0]], 2, [(1, 2), (2, 2)], repeats=2, n_boot=10)
    assert calls == ["plain"] + ["plain", "spec1", "plain", "spec1", "plain", "spec2", "plain", "spec2"]
    assert 1.6 < summary[0]["speed-up"] < 2.5 and 1.6 < summary[1]["speed-up"] < 2.5  # 0.02 s / 0.01 s
    with pytest.raises(ValueError, match="repeats must be an integer >= 1"):
        speculative.benchmark(None, [[0]], 2, [(1, 2)], repeats=0)


def test_bad_input_is_refused_with_a_clear_error():
    m = tiny_model("S A*4 S", seq=16)
    with pytest.raises(ValueError, match="draft_depth must be an integer in 1..3"):
        spec_generate(m, [5, 6], max_new=4, draft_depth=4, draft_len=2)
    with pytest.raises(ValueError, match="draft_len must be a positive integer"):
        spec_generate(m, [5, 6], max_new=4, draft_depth=2, draft_len=0)
    with pytest.raises(ValueError, match="exceeds max_seq_len 16"):
        spec_generate(m, [5] * 10, max_new=7, draft_depth=2, draft_len=2)
    with pytest.raises(ValueError, match="at least one token"):
        spec_generate(m, [], max_new=4, draft_depth=2, draft_len=2)
    with pytest.raises(ValueError, match="no tied loop"):
        spec_generate(tiny_model("S*3", seq=16), [5], max_new=4, draft_depth=1, draft_len=2)
    with pytest.raises(ValueError, match="lens.FittedProbe"):
        spec_generate(m, [5], max_new=4, draft_depth=1, draft_len=2, probe=object())


@pytest.mark.parametrize("name", ["v3", "v12", "v13", "v14"])
def test_twenty_prompts_per_paper_layout_at_smoke_size(name):
    """The paper's layouts (one loop; two loops with a bridge; three loops; four loops without a closing layer) at
    smoke width with the cpu scale's loop counts (at smoke, v14's first loop runs once: nothing to draft from), random
    weights: 20 prompts each, greedy speculative output identical to plain greedy decoding."""
    import dataclasses

    from tiedlm_lib import TiedLM, experiment

    cfg = dataclasses.replace(experiment(name, "smoke", 0).model, layout=experiment(name, "cpu", 0).model.layout)
    torch.manual_seed(0)
    m = TiedLM(cfg).double()
    torch.nn.init.normal_(m.head.weight, std=0.5)
    first = m.core_segments[0].iters
    for i in range(20):
        prompt = _prompt(1 + i % 7, vocab=cfg.vocab_size, seed=100 + i)
        want = generate(m, prompt, SamplingConfig(**{**GREEDY.__dict__, "max_new": 8}))[0]
        d, L = 1 + i % (first - 1), 1 + i % 5
        assert spec_generate(m, prompt, max_new=8, draft_depth=d, draft_len=L)[0] == want, (name, i, d, L)


def test_cache_rollback_is_the_cache_of_the_shorter_sequence():
    """Rolled back to n positions, every per-application KV slot continues exactly as if only n had been seen."""
    from tiedlm_lib.depth.speculative import _truncate

    m = tiny_model("S A*3 S B*2 S", seq=24, dtype=torch.float64)
    x = torch.tensor([_prompt(14)])
    cache: dict = {}
    with torch.no_grad():
        m.forward_cached(x, cache, 0)  # 14 positions seen
        _truncate(cache, 9)
        assert all(slot[0].shape[2] == 9 for slot in cache.values())
        cont = m.forward_cached(x[:, 9:12], cache, 9)  # continue from position 9 with other positions' tokens
        fresh = m(x[:, :12])[:, 9:12]
    torch.testing.assert_close(cont, fresh)


def _row(model, d, L, s, lo, hi, acc=0.5, calls=0.7):
    return {"model": model, "draft depth": d, "draft length": L, "plain tokens/s": 100.0,
            "speculative tokens/s": 100.0 * s, "speed-up": s, "speed-up lo": lo, "speed-up hi": hi,
            "acceptance": acc, "calls / plain calls": calls}


def test_the_readme_block_takes_each_models_best_configuration_and_words_from_its_numbers():
    from tiedlm_lib.depth.speculative import readme_markdown

    rows = [_row("multi", 1, 2, 1.10, 1.05, 1.15), _row("multi", 1, 4, 1.20, 1.10, 1.30, acc=0.51, calls=0.68),
            _row("single", 8, 2, 0.90, 0.85, 0.95)]
    md = readme_markdown(rows, "multi")
    assert "| multi | 1 | 4 | 100 | 120 | 1.20× [1.10, 1.30] | 0.51 | 0.68 |" in md  # the best, not the first
    assert "| multi | 1 | 2 |" not in md and "| single | 8 | 2 |" in md
    assert "**not reached**" in md and "1.47× would be the speed-up" in md and "falls short of it" in md
    assert "single: slower at its best (0.90×" in md
    assert "measured 100–100 tok/s across multi's configurations: timing noise of up to 0%" in md
    noisy = [_row("m", 1, 2, 1.2, 1.1, 1.3), {**_row("m", 2, 2, 1.1, 1.0, 1.2), "plain tokens/s": 125.0}]
    assert "measured 100–125 tok/s across m's configurations: timing noise of up to 25%" in readme_markdown(noisy, "m")
    reached = readme_markdown([_row("multi", 1, 4, 1.7, 1.55, 1.9, calls=0.55)], "multi")
    assert "**reached**" in reached and "is consistent with it" in reached and "other models" not in reached
    assert "Plain decoding" not in reached  # one configuration: no spread to report
    assert "**not settled**" in readme_markdown([_row("multi", 1, 4, 1.5, 1.4, 1.6, calls=0.5)], "multi")
    assert "faster at its best" in readme_markdown([_row("m", 1, 2, 1.2, 1.1, 1.3), _row("s", 1, 2, 1.3, 1.2, 1.4)],
                                                   "m")
    assert "no clear change" in readme_markdown([_row("m", 1, 2, 1.2, 1.1, 1.3), _row("s", 1, 2, 1, 0.9, 1.1)], "m")
    with pytest.raises(ValueError, match="goal model 'v4'"):
        readme_markdown(rows, "v4")
    with pytest.raises(ValueError, match="got none"):
        readme_markdown([], "multi")
    with pytest.raises(ValueError, match="'model' column"):
        readme_markdown([{k: v for k, v in rows[0].items() if k != "model"}], "multi")


def test_the_call_bound_direction_comes_from_the_measured_interval():
    from tiedlm_lib.depth.speculative import call_bound_phrase

    # calls 0.5 of plain's: the bound is 2×
    assert call_bound_phrase(1.2, 1.4, 0.5).startswith("falls short of it")
    assert call_bound_phrase(2.1, 2.3, 0.5) == "exceeds it"
    assert call_bound_phrase(1.9, 2.1, 0.5) == "is consistent with it"
    with pytest.raises(ValueError, match="calls_ratio must be positive"):
        call_bound_phrase(1.0, 1.1, 0.0)


def test_a_divergence_at_a_near_tie_is_recorded_and_any_other_raises_with_its_margin(monkeypatch):
    """Exactness holds up to near-ties (a cached verify pass and one-at-a-time decoding round differently): a
    divergence where the full model's top-2 logits lie within the tolerance is recorded with its position and
    margin; a wider one is a real mismatch and raises."""
    from tiedlm_lib.depth import speculative
    from tiedlm_lib.depth.speculative import SpeculativeInfo, divergence, plain_greedy

    m = tiny_model("S A*4 S", seq=40)
    p = _prompt(5, seed=1)
    want = plain_greedy(m, p, 6)
    got = want[:3] + [(want[3] + 1) % 37] + want[4:]
    d = divergence(m, p, want, got)
    with torch.no_grad():
        top = m(torch.tensor([p + want[:3]]))[0, -1].topk(2).values
    assert d["position"] == 3 and d["top-2 margin"] == pytest.approx(float(top[0] - top[1]))

    def flipped(model, prompt, max_new, draft_depth, draft_len, probe=None):
        return got, SpeculativeInfo(rounds=1, drafted=2, accepted=1, calls=3, plain_calls=4)

    monkeypatch.setattr(speculative, "generate", flipped)
    rows, summary = speculative.benchmark(m, [p], 6, [(1, 2)], n_boot=10, near_tie=d["top-2 margin"] + 1e-6)
    assert rows[0]["near tie at"] == 3 and rows[0]["top-2 margin"] == d["top-2 margin"]
    assert summary[0]["near ties"] == 1 and summary[0]["identical outputs"] is False
    with pytest.raises(RuntimeError, match=r"at new token 3, where the full model's top-2 logit margin is .* a real"):
        speculative.benchmark(m, [p], 6, [(1, 2)], n_boot=10, near_tie=d["top-2 margin"] / 2)
