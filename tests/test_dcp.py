"""The Depth Control Protocol: schedule call orders, recalibration fits, the shared-resample bootstrap, the
decomposition, the sampled-depth intervention, and the residual probe."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import tiny_model

from tiedlm_lib import experiment
from tiedlm_lib.data import EvalBatch, shift_targets
from tiedlm_lib.depth.dcp import Condition, bootstrap_terms, decompose, evaluate_schedules, split_documents
from tiedlm_lib.evaluation.residual_probe import pearson_ci, residual_probe
from tiedlm_lib.model.schedules import REUSE, plan, plan_logits, run_plan, split_layout
from tiedlm_lib.stats.bootstrap import NLLStats
from tiedlm_lib.training.loop import sampled_depth, train


def _calls(model, p):
    seen = []
    hooks = [b.register_forward_hook(lambda m, i, o, n=n: seen.append(n)) for n, b in model.blocks.items()]
    try:
        run_plan(model, torch.randint(4, 37, (2, 8)), p)
    finally:
        for h in hooks:
            h.remove()
    return seen


@pytest.mark.parametrize("schedule,k,core", [
    ("prefix", 2, ["A", "A"]),
    ("prefix", 5, ["A", "A", "A", "B", "B"]),
    ("repeat", 2, ["A", "A", "A", "A", "A"]),
    ("repeat", 4, ["A", "A", "A", "B", "B"]),
    ("suffix", 2, ["B", "B"]),
    ("suffix", 3, ["A", "B", "B"]),
    ("frozen", 2, ["A", "A"]),
    ("frozen", 4, ["A", "A", "A", "B"]),
])
def test_schedule_call_order_on_a_looped_layout(schedule, k, core):
    m = tiny_model("S A*3 B*2 S")
    p = plan(m.config.layout, schedule, k)
    assert p.budget == 5
    assert _calls(m, p) == ["S0", *core, "S1"]
    assert p.writes == (k if schedule in ("prefix", "suffix") else 5)


@pytest.mark.parametrize("schedule,k,calls", [
    ("prefix", 2, ["S0", "S1"]),
    ("repeat", 2, ["S0", "S1", "S1", "S1"]),
    ("repeat", 1, ["S0", "S0", "S0", "S0"]),
    ("suffix", 3, ["S1", "S2", "S3"]),
    ("frozen", 3, ["S0", "S1", "S2"]),
])
def test_schedule_call_order_on_a_dense_layout(schedule, k, calls):
    m = tiny_model("S*4")
    assert split_layout("S*4")[1] == ["S0", "S1", "S2", "S3"]
    assert _calls(m, plan("S*4", schedule, k)) == calls


def test_a_bridge_layer_is_part_of_the_core():
    pre, core, coda = split_layout("S A*2 S B*2 S")
    assert [s.name for s in pre] == ["S0"] and core == ["A", "A", "S1", "B", "B"] and [s.name for s in coda] == ["S2"]


def test_prefix_equals_depth_truncation_and_repeat_is_full_depth_in_one_loop():
    m = tiny_model("S A*4 S")
    x = torch.randint(4, 37, (2, 8))
    with torch.no_grad():
        for k in range(1, 5):
            torch.testing.assert_close(plan_logits(m, x, plan("S A*4 S", "prefix", k)), m(x, depth=k))
            torch.testing.assert_close(plan_logits(m, x, plan("S A*4 S", "repeat", k)), m(x))


def test_frozen_re_adds_the_kth_update():
    m = tiny_model("S A*5 S")
    x = torch.randint(4, 37, (2, 8))
    with torch.no_grad():
        z = m.blocks["S0"](m.embed(x))
        z1 = m.blocks["A"](z)
        z2 = m.blocks["A"](z1)
        want = m.head(m.ln_f(m.blocks["S1"](z2 + 3 * (z2 - z1))))  # two computed, three re-added
        torch.testing.assert_close(plan_logits(m, x, plan("S A*5 S", "frozen", 2)), want)
    assert plan("S A*5 S", "frozen", 2).core == ("A", "A", REUSE, REUSE, REUSE)


def test_bad_schedules():
    with pytest.raises(ValueError, match="schedule must be one of"):
        plan("S A*3 S", "middle", 1)
    with pytest.raises(ValueError, match="applications must be an integer in 1..3"):
        plan("S A*3 S", "prefix", 4)


# ---------------------------------------------------------------------------------------------------- bootstrap
def _stats(sums, n=None):
    sums = np.asarray(sums, float)
    n = np.full(len(sums), 10.0) if n is None else np.asarray(n, float)
    return NLLStats(np.arange(len(sums)), sums, n, sums, n)


def test_one_shared_resample_gives_a_constant_shift_a_zero_width_ci():
    rng = np.random.default_rng(0)
    a = _stats(rng.uniform(10, 40, 50), rng.integers(5, 20, 50))
    b = NLLStats(a.doc_index, a.sum_all + 0.3 * a.n_all, a.n_all, a.sum_real + 0.3 * a.n_real, a.n_real)
    est = bootstrap_terms({"a": a, "b": b}, lambda v: {"diff": v["b"] - v["a"], "a": v["a"]}, n_boot=500)
    assert est["diff"].point == pytest.approx(0.3)
    assert est["diff"].hi - est["diff"].lo < 1e-9
    assert est["a"].hi - est["a"].lo > 0.1  # while each condition alone varies


def test_decomposition_telescopes_and_reports_the_calibration_share():
    rng = np.random.default_rng(1)
    base = rng.uniform(20, 30, 40)

    def cond(shift, cal_shift=None):
        raw = _stats(base + 10 * shift)
        cal = {"head/diagonal": _stats(base + 10 * (shift if cal_shift is None else cal_shift))}
        return Condition("", 0, raw, cal, {})

    conds = {("prefix", 1): cond(1.0, 0.6), ("prefix", 8): cond(0.0, 0.0), ("repeat", 1): cond(0.7),
             ("repeat", 4): cond(0.2)}
    d = decompose(conds, 1, 4, 8, n_boot=300)
    assert d["total"].point == pytest.approx(1.0)
    parts = d["application count"].point + d["distinct depth"].point + d["block composition"].point
    assert parts == pytest.approx(d["total"].point)
    assert d["application count"].point == pytest.approx(0.3) and d["distinct depth"].point == pytest.approx(0.5)
    assert d["calibration"].point == pytest.approx(0.4) and d["calibration share"].point == pytest.approx(0.4)
    # the calibration terms come from lens.share_interval: the same intervals as a shared-resample bootstrap of the
    # share computed directly from the four NLLs (on documents whose gaps vary, so that the interval has width)
    noisy = {key: Condition("", 0, _stats(base + 10 * sh + rng.normal(0, 2, 40)),
                            {"head/diagonal": _stats(base + 10 * csh + rng.normal(0, 2, 40))}, {})
             for key, sh, csh in [(("prefix", 1), 1.0, 0.6), (("prefix", 8), 0.0, 0.0), (("repeat", 1), 0.7, 0.7),
                                  (("repeat", 4), 0.2, 0.2)]}
    got = decompose(noisy, 1, 4, 8, n_boot=300)
    a, b = noisy["prefix", 1], noisy["prefix", 8]
    direct = bootstrap_terms({"a": a.raw, "b": b.raw, "ca": a.calibrated["head/diagonal"],
                              "cb": b.calibrated["head/diagonal"]},
                             lambda v: {"share": (v["a"] - v["b"] - (v["ca"] - v["cb"])) / (v["a"] - v["b"]),
                                        "total": v["a"] - v["b"]}, n_boot=300)
    for term, name in (("calibration share", "share"), ("total", "total")):
        assert (got[term].point, got[term].lo, got[term].hi) == pytest.approx(
            (direct[name].point, direct[name].lo, direct[name].hi), abs=1e-12)
    assert got["calibration share"].hi - got["calibration share"].lo > 0.05  # a real interval, not a point
    assert list(d)[:4] == ["total", "calibrated gap", "calibration", "calibration share"]
    with pytest.raises(ValueError, match="needs conditions"):
        decompose(conds, 1, 2, 8)


# ---------------------------------------------------------------------------------------------------- end to end
def _batches(docs, seq=8, vocab=37):
    def make():
        for i in range(0, len(docs), 4):
            idx = torch.tensor(docs[i:i + 4])
            x = torch.stack([torch.randint(4, vocab, (seq,), generator=torch.Generator().manual_seed(int(d)))
                             for d in idx])
            x[:, -2:] = 0  # right padding
            yield EvalBatch(x, shift_targets(x), idx)
    return make


def test_evaluate_schedules_fits_on_disjoint_documents_and_refuses_overlap():
    m = tiny_model("S A*3 S")
    cal, ev = split_documents(40, 16, seed=0)
    assert not np.intersect1d(cal, ev).size and len(cal) + len(ev) == 40
    out = evaluate_schedules(m, _batches(cal.tolist()), _batches(ev.tolist()), ["prefix", "frozen"], [1, 3],
                             probes=("head/temperature", "head/diagonal", "loop/diagonal"), iters=10)
    c = out["prefix", 1]
    assert c.raw.masked > 0 and c.calibrated["head/temperature"].doc_index.tolist() == sorted(ev.tolist())
    assert c.raw.n_real.sum() == len(ev) * 5  # 8 positions, the last 3 targets pad (two pads + the shifted end)
    assert c.fits["head/diagonal"].lam in c.fits["head/diagonal"].lam_grid
    assert abs(c.fits["head/temperature"].temperature - 1) > 1e-3  # a random head is not calibrated
    assert c.calibrated["head/temperature"].masked < c.raw.masked  # and the fitted temperature helps on new documents
    assert set(c.metrics) == {"raw", "head/temperature", "head/diagonal", "loop/diagonal"} and c.seconds_per_token > 0
    # the raw NLL is the model's own at that plan, independently computed
    x = torch.cat([b.inputs for b in _batches(ev.tolist())()])
    with torch.no_grad():
        lg = plan_logits(m, x, plan("S A*3 S", "prefix", 1))
    y = shift_targets(x)
    want = torch.nn.functional.cross_entropy(lg.transpose(1, 2), y, reduction="none")[y != 0].double().mean()
    assert c.raw.masked == pytest.approx(float(want), rel=1e-5)
    with pytest.raises(ValueError, match="overlap"):
        evaluate_schedules(m, _batches(ev.tolist()), _batches(ev.tolist()), ["prefix"], [1],
                           probes=("head/temperature",))
    with pytest.raises(ValueError, match="placement/form"):
        evaluate_schedules(m, _batches(cal.tolist()), _batches(ev.tolist()), ["prefix"], [1], probes=("diagonal",))
    same = evaluate_schedules(m, None, _batches(ev.tolist()), ["prefix"], [1], probes=("head/temperature",),
                              in_sample=True)
    assert same["prefix", 1].calibrated["head/temperature"].masked <= same["prefix", 1].raw.masked + 1e-9


def test_sampled_depth_training_draws_depths_reproducibly_and_starts_from_given_weights(tmp_path, smoke_corpus):
    base = train(experiment("v3", "smoke", 0, {"train.steps": 5}), tmp_path / "base", smoke_corpus, progress=False)
    cfg = experiment("v3", "smoke", 0, {"train.steps": 12, "train.depth_sampling": "uniform", "train.log_every": 1,
                                        "train.init_from": str(tmp_path / "base" / "model.safetensors"),
                                        "train.schedule": "constant", "train.warmup": 0})
    ks = [sampled_depth(cfg.train, s, 4) for s in range(200)]
    assert set(ks) == {1, 2, 3, 4} and ks == [sampled_depth(cfg.train, s, 4) for s in range(200)]
    res = train(cfg, tmp_path / "sampled", smoke_corpus, progress=False)
    assert [m["depth"] for m in res.metrics] == [sampled_depth(cfg.train, s, 4) for s in range(12)]
    # from scratch the zero-initialised head gives exactly ln V at step 0; from the base it is lower
    assert res.metrics[0]["loss"] < np.log(320) - 0.05
    with pytest.raises(ValueError, match="depth_sampling='uniform'"):
        experiment("v3", "smoke", 0, {"train.depth_sampling": "uniform", "train.backprop": "phantom"})
    assert base.final_loss > 0


# ---------------------------------------------------------------------------------------------------- probe
def test_pearson_ci_matches_numpy_and_resamples_groups():
    rng = np.random.default_rng(0)
    x = rng.normal(size=300)
    y = 0.5 * x + rng.normal(size=300)
    est = pearson_ci(x, y, np.repeat(np.arange(60), 5), n_boot=500)
    assert est.point == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert est.lo < est.point < est.hi and 0.2 < est.lo


def test_residual_probe_follows_the_paper_and_the_masked_definition():
    m = tiny_model("S A*3 S", seq=8)
    batches = list(_batches(list(range(12)))())
    pd_ = residual_probe(m, batches, min_real=1)
    _, trace = m.run(batches[0].inputs)
    r = trace.loops["A"].rel_residual[-1]
    np.testing.assert_allclose(pd_.seq_residual_paper[:4], r.amax(1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(pd_.seq_residual_real[:4], r[:, :5].amax(1).numpy(), rtol=1e-6)
    assert len(pd_.tok_ce) == 12 * 5
    assert len(residual_probe(m, batches, min_real=6).seq_nll) == 0
