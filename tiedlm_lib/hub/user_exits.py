"""Certified exit thresholds for a user's looped model (the ``exits`` command): Learn-then-Test on calibration
documents, checked on held-out ones.

For each exit rule and each ε, ``depth.exits.ltt_threshold`` certifies, with probability ≥ 1 − δ over the calibration
documents, a threshold whose long-run share of tokens leaving the loop with another top token than the full model's
is at most ε (documents the independent unit; ``depth.exits`` explains the test). The threshold is then applied to
the held-out documents, which the certificate never saw: their disagreement rate with its document-clustered
standard error, whether it exceeds ε, the average depth and the NLL cost against full depth. Only rules whose
confidence has a scale known before the data are offered (``GRIDS``): max-prob (paper A's rule) on 0 … 1 and the top
token's run length on 1 … K; a grid read off the calibration data would break the test's fixed order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tiedlm_lib.data import TokenDocs, eval_batches
from tiedlm_lib.depth import exits

GRIDS = {"maxprob": lambda K: np.linspace(0.0, 1.0, 41), "stability": lambda K: np.arange(1, K + 1, dtype=float)}


def split_documents(n: int, n_cal: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded split of ``n`` documents into ``n_cal`` calibration and the rest held out."""
    if not 2 <= n_cal <= n - 2:
        raise ValueError(f"--n-cal must leave at least two documents on each side: got {n_cal} of {n} documents")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[:n_cal]), np.sort(perm[n_cal:])


def certify(model, docs: TokenDocs, *, eps: Sequence[float], delta: float, n_cal: int, seq_len: int,
            criteria: Sequence[str] = ("maxprob",), batch_size: int = 8, seed: int = 0, progress: bool = False
            ) -> list[dict]:
    """One row per (rule, ε): the certified τ on the calibration documents (None: not even the latest exit is
    certified, the model runs at full depth), then on the held-out documents the disagreement rate with full depth,
    its standard error, whether it exceeds ε, the average depth and its saving, and the mean NLL cost of exiting."""
    unknown = [c for c in criteria if c not in GRIDS]
    if unknown:
        raise ValueError(f"--criteria must be among {', '.join(GRIDS)} (rules with a threshold scale fixed before "
                         f"the data), got {', '.join(unknown)}")
    bad = [e for e in eps if not 0 < e < 1]
    if bad or not eps:
        raise ValueError(f"--eps must be one or more rates in (0, 1), got {list(eps)}")
    if not 0 < delta < 1:
        raise ValueError(f"--delta must lie in (0, 1), got {delta}")
    from tqdm.auto import tqdm

    cal, held = split_documents(len(docs), n_cal, seed)

    def read(idx, what):
        batches = eval_batches(docs, seq_len, batch_size, indices=idx)
        return exits.collect_features(model, tqdm(batches, desc=f"{what} documents, every depth", disable=not progress,
                                                  total=math.ceil(len(idx) / batch_size), leave=False))

    f_cal, f_held = read(cal, "calibration"), read(held, "held-out")
    K = f_cal.K
    rows = []
    for c in criteria:
        for e in eps:
            tau, tests = exits.ltt_threshold(f_cal, exits.confidence(f_cal, c), GRIDS[c](K), e, delta, seq_len)
            d = (exits.exit_depths(exits.confidence(f_held, c), tau) if tau is not None
                 else np.full(len(f_held.doc), K - 1))
            rate, se = exits.disagreement_rate(f_held, d)
            rows_ = np.arange(len(d))
            avg = float(d.mean() + 1)
            rows.append({"rule": c, "eps": e, "delta": delta, "certified": tau is not None,
                         "tau": math.nan if tau is None else tau, "thresholds tested": len(tests),
                         "calibration documents": len(cal), "held-out documents": len(held),
                         "held-out tokens": len(d), "held-out disagreement": rate, "disagreement se": se,
                         "exceeds eps": rate > e, "avg depth": avg, "K": K, "depth saved": 1 - avg / K,
                         "NLL cost": float((f_held.nll[rows_, d] - f_held.nll[:, -1]).mean())})
    return rows
