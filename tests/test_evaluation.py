import math

import numpy as np
import pytest
import torch
from conftest import tiny_model

from tiedlm_lib import depth_stats, depth_sweep, evaluate_nll, maxprob_exit
from tiedlm_lib.data import EvalBatch, TokenDocs, eval_batches
from tiedlm_lib.evaluation.nll import DepthStats


def _eval_set(seq=12):
    g = np.random.default_rng(0)
    docs = TokenDocs.from_lists([g.integers(1, 37, size=n).tolist() for n in (3, 12, 7, 20, 1, 9, 5)])
    return lambda: eval_batches(docs, seq, 3)


def test_masked_and_with_pad_nll_against_hand_computation():
    m = tiny_model("S A*3 S")
    batches = list(_eval_set()())
    stats = evaluate_nll(m, batches, depth=2)
    tot_all = n_all = tot_real = n_real = 0.0
    for b in batches:
        logp = torch.log_softmax(m(b.inputs, depth=2).detach().double(), -1)
        for i in range(b.inputs.shape[0]):
            for t in range(b.inputs.shape[1]):
                y = int(b.targets[i, t])
                nll = -float(logp[i, t, y])
                tot_all += nll
                n_all += 1
                if y != 0:
                    tot_real += nll
                    n_real += 1
    assert stats.with_pad == pytest.approx(tot_all / n_all, rel=1e-5)
    assert stats.masked == pytest.approx(tot_real / n_real, rel=1e-5)
    assert stats.pad_fraction == pytest.approx(1 - n_real / n_all)
    assert stats.with_pad != pytest.approx(stats.masked, rel=1e-3)
    assert len(stats.doc_index) == 7


def test_depth_sweep_equals_single_depth_evaluations():
    m = tiny_model("S A*3 S")
    rows = depth_sweep(m, _eval_set()(), [1, 3, 6])
    for r in rows:
        s = evaluate_nll(m, _eval_set()(), depth=r["k"])
        assert r["nll_masked"] == pytest.approx(s.masked, rel=1e-6)
        assert r["nll_with_pad"] == pytest.approx(s.with_pad, rel=1e-6)


def test_exit_fallbacks_at_the_extremes_equal_fixed_depth_nll():
    m = tiny_model("S A*4 S")
    st = depth_stats(m, _eval_set()(), [1, 2, 3, 4])
    k1, k4 = st.nll(1), st.nll(4)
    [never_final] = maxprob_exit(st, [1.01], "final")  # tau > 1: nothing ever locks
    [never_paper] = maxprob_exit(st, [1.01], "paper")
    assert never_final.nll_with_pad == pytest.approx(k4.with_pad) and never_final.nll_masked == pytest.approx(k4.masked)
    assert never_paper.nll_with_pad == pytest.approx(k1.with_pad) and never_paper.nll_masked == pytest.approx(k1.masked)
    assert never_paper.avg_k_all == never_final.avg_k_all == 4.0  # counted at full depth, scored at k = 1 (paper)
    assert never_paper.never_locked == 1.0
    [all_paper] = maxprob_exit(st, [0.0], "paper")  # tau = 0: every position locks at k = 1
    assert all_paper.nll_with_pad == pytest.approx(k1.with_pad) and all_paper.avg_k_all == 1.0


def test_exit_against_a_hand_computation_on_synthetic_stats():
    ce = np.array([[[1.0, 2.0, 3.0]], [[0.5, 1.5, 2.5]], [[0.1, 0.2, 0.3]]])  # depths 1, 2, 4; 1 row of 3 positions
    mp = np.array([[[0.9, 0.1, 0.1]], [[0.95, 0.6, 0.1]], [[0.99, 0.7, 0.2]]])
    st = DepthStats([1, 2, 4], ce, mp, np.array([[True, True, False]]), np.array([0]), np.array([0]))
    [paper, final] = [maxprob_exit(st, [0.5], fb)[0] for fb in ("paper", "final")]
    # position 0 locks at k=1 (ce 1.0); position 1 at k=2 (ce 1.5); position 2 never (paper: ce 3.0 at k=1; final 0.3)
    assert paper.nll_with_pad == pytest.approx((1.0 + 1.5 + 3.0) / 3)
    assert final.nll_with_pad == pytest.approx((1.0 + 1.5 + 0.3) / 3)
    assert paper.nll_masked == pytest.approx((1.0 + 1.5) / 2)
    assert paper.avg_k_all == pytest.approx((1 + 2 + 4) / 3) and paper.avg_k_real == pytest.approx(1.5)
    assert paper.realised_k == 4.0  # the batch iterates until its last position (here: none) locks
    [stair] = maxprob_exit(st, [0.5], "final", allowed=[1, 4])  # staircase: exits only at 1 and 4
    assert stair.nll_with_pad == pytest.approx((1.0 + 0.2 + 0.3) / 3)
    with pytest.raises(ValueError, match="were not evaluated"):
        maxprob_exit(st, [0.5], allowed=[1, 8])
    with pytest.raises(ValueError, match="fallback must be one of"):
        maxprob_exit(st, [0.5], fallback="k1")


def test_uniform_model_scores_ln_v():
    from tiedlm_lib import ModelConfig, TiedLM

    m = TiedLM(ModelConfig(vocab_size=37, d_model=16, n_heads=2, layout="S A*2 S", max_seq_len=12))
    s = evaluate_nll(m, _eval_set()())
    assert s.masked == pytest.approx(math.log(37), rel=1e-5) and s.with_pad == pytest.approx(math.log(37), rel=1e-5)


def test_evaluation_keeps_train_mode_and_rejects_empty_input():
    m = tiny_model()
    m.train()
    evaluate_nll(m, _eval_set()())
    assert m.training
    with pytest.raises(ValueError, match="no evaluation batches"):
        evaluate_nll(m, [])
    empty: list[EvalBatch] = []
    with pytest.raises(ValueError, match="no evaluation batches"):
        depth_stats(m, empty, [1])
