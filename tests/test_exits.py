"""Exit criteria: the per-depth features equal an independent recomputation, rules exit where their thresholds say,
no rule beats the oracle at agreeing with full depth, and Learn-then-Test thresholds keep their guarantee over many
calibration draws (and refuse an ε they cannot certify)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_model

from tiedlm_lib.data import EvalBatch, shift_targets
from tiedlm_lib.depth.exits import (
    CRITERIA,
    DepthFeatures,
    ExitProbe,
    collect_features,
    confidence,
    curve,
    exit_depths,
    ltt_threshold,
    oracle_depths,
    outcome,
)


def _batches(n_docs=12, T=10, vocab=37, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(4, vocab, (n_docs, T), generator=g)
    x[::3, -3:] = 0  # some right padding
    return [EvalBatch(x[i:i + 4], shift_targets(x[i:i + 4]), torch.arange(i, i + 4)) for i in range(0, n_docs, 4)]


@pytest.mark.parametrize("layout", ["S A*4 S", "S A*3 S B*3 S", "S A*3 B*2 S"])
def test_features_equal_an_independent_recomputation(layout):
    """Depth k is the first k core applications (hand-built here from the model's blocks; in a single loop, also the
    model's own depth-k forward), so depth K = N is the trained model on every layout, unequal loops included."""
    m = tiny_model(layout, seq=10, dtype=torch.float64)
    batches = _batches()
    f = collect_features(m, batches)
    core = {"S A*4 S": "AAAA", "S A*3 S B*3 S": ["A", "A", "A", "S1", "B", "B", "B"], "S A*3 B*2 S": "AAABB"}[layout]
    K = len(core)
    assert f.K == K
    x = torch.cat([b.inputs for b in batches])
    y = torch.cat([b.targets for b in batches])
    real = y != 0
    with torch.no_grad():
        zs, z = {}, m.prelude(m.embed(x))
        for k, name in enumerate(core, 1):
            z = zs[k] = m.apply(z, name)
        logits = {k: m.readout(m.coda(zs[k])) for k in zs}
        torch.testing.assert_close(logits[K], m(x), rtol=0, atol=1e-12)
        if layout == "S A*4 S":
            for k in zs:
                torch.testing.assert_close(logits[k], m(x, depth=k), rtol=0, atol=1e-12)
    for k in range(1, K + 1):
        logp = F.log_softmax(logits[k], -1)
        np.testing.assert_allclose(f.nll[:, k - 1], -logp.gather(-1, y[..., None])[..., 0][real].numpy(), rtol=1e-9)
        np.testing.assert_allclose(f.maxprob[:, k - 1], logp.exp().amax(-1)[real].numpy(), rtol=1e-9)
        top_full = logits[K].argmax(-1)[real].numpy()
        assert (f.agree[:, k - 1] == (logits[k].argmax(-1)[real].numpy() == top_full)).all()
        if k > 1:
            prev = F.log_softmax(logits[k - 1], -1)
            kl = (logp.exp() * (logp - prev)).sum(-1)[real].numpy()
            np.testing.assert_allclose(f.kl[:, k - 1], kl, rtol=1e-7, atol=1e-12)
            ch = ((zs[k] - zs[k - 1]).norm(dim=-1) / zs[k - 1].norm(dim=-1))[real].numpy()
            np.testing.assert_allclose(f.change[:, k - 1], ch, rtol=1e-9)
    assert np.isinf(f.kl[:, 0]).all() and (f.stable[:, 0] == 1).all()
    assert len(f.doc) == int(real.sum())


def test_rules_exit_at_their_first_confident_depth_and_never_beat_the_oracle():
    m = tiny_model("S A*6 S", seq=10)
    f = collect_features(m, _batches(n_docs=24))
    orc = oracle_depths(f)
    assert f.agree[np.arange(len(orc)), orc].all()
    for c in CRITERIA:
        conf = confidence(f, c)
        for tau in np.quantile(conf[np.isfinite(conf)], [0.2, 0.5, 0.9]):
            d = exit_depths(conf, tau)
            hit = conf >= tau
            for i in range(0, len(d), 7):
                want = np.flatnonzero(hit[i])[0] if hit[i].any() else f.K - 1
                assert d[i] == want
            agreed = f.agree[np.arange(len(d)), d]
            assert (d[agreed] >= orc[agreed]).all()  # whenever a rule agrees with full depth, it is not earlier
    with pytest.raises(ValueError, match="criterion must be one of"):
        confidence(f, "luck")


def test_the_curve_has_cis_around_its_points_and_ends_at_full_depth():
    m = tiny_model("S A*6 S", seq=10)
    f = collect_features(m, _batches(n_docs=24))
    rows = curve(f, confidence(f, "maxprob"), [0.0, 0.5, 2.0], n_boot=200)
    assert rows[0]["avg depth"] == 1.0 and rows[-1]["avg depth"] == 6.0 and rows[-1]["agreement"] == 1.0
    for r in rows:
        for key in ("avg depth", "nll", "agreement"):
            assert r[f"{key} lo"] - 1e-12 <= r[key] <= r[f"{key} hi"] + 1e-12
    assert outcome(f, oracle_depths(f))["agreement"] == 1.0


def _synthetic(n_docs, rng, K=8, per_doc=30):
    """Tokens whose top token settles at a random depth; max-prob rises with depth and settles with it. Documents of
    unequal length (per_doc // 2 .. per_doc real targets)."""
    lengths = rng.integers(per_doc // 2, per_doc + 1, size=n_docs)
    settle = rng.integers(0, K, size=int(lengths.sum()))
    k = np.arange(K)
    agree = k[None, :] >= settle[:, None]
    noise = rng.normal(0, 0.1, size=(len(settle), K))
    maxprob = np.clip(0.3 + 0.5 * agree + noise, 0, 1)
    z = np.zeros((len(settle), K))
    inf_first = z.copy()
    inf_first[:, 0] = np.inf  # KL and state change are undefined at the first depth
    return DepthFeatures(z, agree, maxprob, z, inf_first, inf_first, np.ones_like(z, dtype=np.int64),
                         np.repeat(np.arange(n_docs), lengths))


def test_learn_then_test_keeps_its_guarantee_over_calibration_draws():
    rng = np.random.default_rng(0)
    taus = np.linspace(0.2, 1.0, 17)
    eps, delta = 0.15, 0.1
    violations, depths = [], []
    for _ in range(60):
        cal, test = _synthetic(100, rng), _synthetic(400, rng)
        tau, tests = ltt_threshold(cal, confidence(cal, "maxprob"), taus, eps, delta, n_max=30)
        assert tests[0]["tau"] == max(taus)  # tested from the most conservative threshold down
        if tau is None:
            continue
        d = exit_depths(confidence(test, "maxprob"), tau)
        rate = 1 - test.agree[np.arange(len(d)), d].mean()
        violations.append(rate > eps)
        depths.append(d.mean() + 1)
    assert len(violations) > 40  # the guarantee buys something here
    assert np.mean(violations) <= delta
    assert np.mean(depths) < 8  # and it exits early on average
    # an ε below what any threshold achieves is refused, not certified
    cal = _synthetic(100, rng)
    assert ltt_threshold(cal, confidence(cal, "maxprob"), [0.1, 0.2], 0.01, 0.1, n_max=30)[0] is None
    with pytest.raises(ValueError, match="eps and delta"):
        ltt_threshold(cal, confidence(cal, "maxprob"), taus, 0.0, 0.1, n_max=30)
    with pytest.raises(ValueError, match="n_max must bound every document"):
        ltt_threshold(cal, confidence(cal, "maxprob"), taus, 0.1, 0.1, n_max=10)


def test_the_learned_exit_probe_ranks_agreeing_depths_higher():
    rng = np.random.default_rng(1)
    f = _synthetic(60, rng)
    probe = ExitProbe.fit(f)
    assert ExitProbe.design(f).shape[-1] == ExitProbe.FEATURES and np.isfinite(ExitProbe.design(f)).all()
    g = _synthetic(60, rng)  # fresh documents
    conf = probe.confidence(g)
    pos, neg = conf[g.agree], conf[~g.agree]
    auc = (pos[:, None] > neg[None, :1000]).mean()
    assert auc > 0.9 and math.isfinite(float(conf.sum()))


def test_disagreement_rate_se_and_the_split_average_against_hand_computations():
    from tiedlm_lib.depth.exits import disagreement_rate, guarantee_splits, rate_minus_eps

    rng = np.random.default_rng(3)
    n_rows, K = 300, 4
    doc = np.sort(rng.integers(0, 30, n_rows))
    agree = rng.random((n_rows, K)) < np.array([0.6, 0.8, 0.9, 1.0])
    z = np.zeros((n_rows, K))
    f = DepthFeatures(z, agree, z, z, z, z, np.ones((n_rows, K), dtype=np.int64), doc)
    depth_idx = rng.integers(0, K, n_rows)
    rate, se = disagreement_rate(f, depth_idx)
    dis = ~agree[np.arange(n_rows), depth_idx]
    assert rate == pytest.approx(dis.mean())
    # by hand: the delta-method SE of a ratio of per-document sums
    docs = np.unique(doc)
    d = np.array([dis[doc == i].sum() for i in docs])
    n = np.array([(doc == i).sum() for i in docs])
    m = len(docs)
    assert se == pytest.approx(np.sqrt(m / (m - 1) * ((d - rate * n) ** 2).sum()) / n.sum())
    # ... and close to a document bootstrap's SD
    boot = [dis[np.concatenate([np.flatnonzero(doc == i) for i in rng.choice(docs, m)])].mean() for _ in range(2000)]
    assert se == pytest.approx(np.std(boot), rel=0.15)
    rows = guarantee_splits(f, np.tile(np.linspace(0, 1, K), (n_rows, 1)), np.linspace(0, 1, 5), 0.2, 0.1, 64, 4,
                            np.random.default_rng(0))
    assert len(rows) == 4 and all(r["test disagreement"] == 0.0 for r in rows if not r["certified"])
    cert = [r for r in rows if r["certified"]]
    e = rate_minus_eps(rows, 0.2)
    if cert:  # only certified splits enter
        assert e.point == pytest.approx(np.mean([r["test disagreement"] for r in cert]) - 0.2)
        assert e.hi - e.point == pytest.approx(1.959964 * np.mean([r["test disagreement se"] for r in cert]),
                                               rel=1e-5)
    assert rate_minus_eps([{**r, "certified": False} for r in rows], 0.2) is None
    with pytest.raises(ValueError, match="at least 2 documents"):
        disagreement_rate(f.select([docs[0]]), depth_idx[doc == docs[0]])


def test_ltt_certifies_a_risk_just_under_eps_at_level_delta_where_an_uncertified_rule_does_not():
    """Many calibration draws from a population whose exit disagreement rates are known exactly: thresholds τ
    (here: exits 0..3) with true rates 0.30, 0.105, 0.08 and 0.02 against ε = 0.10. Learn-then-Test may pick an exit
    whose true rate exceeds ε in at most δ of the draws; "pick the earliest exit whose calibration rate is below ε"
    (no guarantee) picks exit 1 (true rate 0.105, just above ε) in about a third of them."""
    from tiedlm_lib.depth.exits import exit_depths, ltt_threshold

    rates = np.array([0.30, 0.105, 0.08, 0.02])  # exit at depth index 0..3 (the last is full depth here: 0.02)
    eps, delta, n_docs, per_doc = 0.10, 0.1, 40, 10
    taus = [0.9, 0.6, 0.3, 0.0]  # confidence per depth index j is j / 3: τ 0.9 exits at 3, 0.6 at 2, 0.3 at 1, 0 at 0
    rng = np.random.default_rng(0)
    ltt_bad = naive_bad = 0
    draws = 300
    for _ in range(draws):
        n = n_docs * per_doc
        doc = np.repeat(np.arange(n_docs), per_doc)
        agree = rng.random((n, 4)) >= rates  # row disagrees at exit j with probability rates[j]
        z = np.zeros((n, 4))
        f = DepthFeatures(z, agree, z, z, z, z, np.ones((n, 4), dtype=np.int64), doc)
        conf = np.tile(np.arange(4) / 3.0, (n, 1))
        tau, _ = ltt_threshold(f, conf, taus, eps, delta, per_doc)
        chosen = None if tau is None else int(exit_depths(conf[:1], tau)[0])
        ltt_bad += chosen is not None and rates[chosen] > eps
        naive = [t for t in sorted(taus) if 1 - agree[np.arange(n), exit_depths(conf, t)].mean() <= eps]
        naive_bad += bool(naive) and rates[int(exit_depths(conf[:1], naive[0])[0])] > eps
    assert ltt_bad / draws <= delta
    assert naive_bad / draws > 2 * delta
