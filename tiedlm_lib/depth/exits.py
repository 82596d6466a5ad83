"""Per-token adaptive depth: exit criteria against the oracle, and exit thresholds with a statistical guarantee.

One pass per evaluation sequence reads out every depth 1..K (prefix(k): the first k core applications, for any
``schedules.DepthModel``; in a single tied loop, k iterations) and keeps, for each real target and depth,
what an exit rule may look at — the max-softmax probability (paper A's rule), the entropy, the KL divergence from the
previous depth's distribution, the relative change of the loop state, how many depths in a row the top token has
not changed — and what it is judged by: the target's NLL at that depth and whether its top token equals the
full-depth one. Every rule is a *confidence* that grows as the model settles; a token exits at the first depth whose
confidence reaches the threshold τ (else at K). The **oracle** exits at the earliest depth whose top token equals the
full-depth top token: no rule that looks only at depths up to its exit can agree with full depth more cheaply.

Sequences are read out with full causal passes, one sequence's positions never seeing another's (batch rows are
independent), so the depth-k readout of a position is what batch-size-1 decoding gives when *every* position runs at
depth k (the loop's and the coda's attention read earlier positions' depth-k states) — the usual analysis of exit
rules, not a simulation of a KV cache in which earlier positions exited at other depths.

**Exits with a guarantee** (``ltt_threshold``): Learn-then-Test (Angelopoulos et al., 2021) over a threshold grid on
calibration documents. For a user's ε and δ it returns the last τ certified before the first failure, testing from
the most conservative τ down (fixed-sequence testing, valid in any fixed order, so risk need not be monotone in τ),
such that with probability ≥ 1 − δ over the calibration documents the long-run share of tokens whose exit token
differs from the full-depth token is at most ε. Documents are the independent unit: for document i with n_i ≤ n_max
real targets and d_i disagreements, the loss ℓ_i = (d_i − ε·n_i) / n_max lies in a range of width 1 and E[ℓ] ≤ 0
exactly when E[d] / E[n] ≤ ε (the token-level rate); Hoeffding's inequality gives each τ a p-value for H0: E[ℓ] > 0.
``n_max`` must bound every document's real targets *a priori* (the sequence length, since a document is one row), not
be read from the calibration data. Hoeffding is conservative: with few calibration documents even the latest exit
may not be certified.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import torch
import torch.nn.functional as F

from tiedlm_lib import devices
from tiedlm_lib.data import PAD_ID, EvalBatch
from tiedlm_lib.model.schedules import DepthModel, budget, prefix_states
from tiedlm_lib.model.tied import eval_mode
from tiedlm_lib.stats.bootstrap import Estimate, bootstrap_indices, percentile

CRITERIA = ("maxprob", "entropy", "kl", "state change", "stability")


@dataclass
class DepthFeatures:
    """Per real target (n rows) and depth 1..K (columns): what exit rules see and what they are judged by."""

    nll: np.ndarray  # (n, K) the target's NLL at each depth
    agree: np.ndarray  # (n, K) bool: top token at depth k == top token at depth K
    maxprob: np.ndarray  # (n, K)
    entropy: np.ndarray  # (n, K) nats
    kl: np.ndarray  # (n, K) KL(p_k || p_{k-1}); +inf at k = 1 (nothing to compare with)
    change: np.ndarray  # (n, K) ‖z_k − z_{k−1}‖ / ‖z_{k−1}‖ of the loop state; +inf at k = 1
    stable: np.ndarray  # (n, K) how many depths up to k in a row have had the same top token (1 at k = 1)
    doc: np.ndarray  # (n,) document of each row

    @property
    def K(self) -> int:
        return self.nll.shape[1]

    def select(self, docs: Sequence[int]) -> DepthFeatures:
        """The rows of these documents (each once, in the original order)."""
        m = np.isin(self.doc, np.asarray(docs))
        return DepthFeatures(*(getattr(self, f)[m] for f in ("nll", "agree", "maxprob", "entropy", "kl", "change",
                                                              "stable", "doc")))


@torch.no_grad()
def collect_features(model: DepthModel, batches: Iterable[EvalBatch]) -> DepthFeatures:
    """Read out every depth k = 1..K for every real target: the state after prefix(k), K = N the core's length, so
    depth K is the trained model that exits are judged against (``schedules.prefix_states``; any ``DepthModel``).
    For a single tied loop and no bridge prefix(k) is k iterations, paper A's depth; on other layouts a depth
    counts core applications (a layer-wise exit), whatever the loops' iteration counts."""
    K = budget(model.layout)
    cols: dict[str, list] = {k: [] for k in ("nll", "top", "maxprob", "entropy", "kl", "change")}
    docs = []
    with eval_mode(model):
        for cpu_b in batches:
            b = devices.to_model(cpu_b, model)
            real = b.targets != PAD_ID
            per: dict[str, list] = {k: [] for k in cols}
            prev_logp, prev_z = None, None
            for _, z in prefix_states(model, b.inputs, range(1, K + 1)):
                logp = F.log_softmax(model.head(model.finish(z)).double(), -1)  # (B, T, V)
                p = logp.exp()
                per["nll"].append(-logp.gather(-1, b.targets.clamp_min(0)[..., None])[..., 0])
                per["top"].append(logp.argmax(-1))
                per["maxprob"].append(p.amax(-1))
                per["entropy"].append(-(p * logp).sum(-1))
                inf = torch.full(real.shape, math.inf, dtype=torch.float64, device=real.device)
                per["kl"].append(inf if prev_logp is None else (p * (logp - prev_logp)).sum(-1))
                per["change"].append(inf if prev_z is None else
                                     ((z - prev_z).norm(dim=-1) / prev_z.norm(dim=-1).clamp_min(1e-12)).double())
                prev_logp, prev_z = logp, z
            for k in cols:
                cols[k].append(torch.stack(per[k], -1)[real].cpu())  # (n_b, K)
            docs.append(cpu_b.doc_index[:, None].expand_as(real.cpu())[real.cpu()])
    if not docs:
        raise ValueError("no evaluation batches were given")
    c = {k: torch.cat(v).numpy() for k, v in cols.items()}
    top = c["top"]
    stable = np.ones_like(top, dtype=np.int64)
    for k in range(1, K):
        stable[:, k] = np.where(top[:, k] == top[:, k - 1], stable[:, k - 1] + 1, 1)
    return DepthFeatures(c["nll"].astype(np.float64), top == top[:, -1:], c["maxprob"].astype(np.float64),
                         c["entropy"].astype(np.float64), c["kl"].astype(np.float64), c["change"].astype(np.float64),
                         stable, torch.cat(docs).numpy())


def confidence(f: DepthFeatures, criterion: str) -> np.ndarray:
    """(n, K) confidence of a rule, higher = more settled: max-prob; minus the entropy; minus the KL from the previous
    depth; minus the relative state change; the top token's run length."""
    if criterion == "maxprob":
        return f.maxprob
    if criterion == "entropy":
        return -f.entropy
    if criterion == "kl":
        return -f.kl
    if criterion == "state change":
        return -f.change
    if criterion == "stability":
        return f.stable.astype(np.float64)
    raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")


def exit_depths(conf: np.ndarray, tau: float) -> np.ndarray:
    """0-based exit depth index per row: the first depth whose confidence reaches ``tau``, else the last."""
    hit = conf >= tau
    first = hit.argmax(1)
    return np.where(hit.any(1), first, conf.shape[1] - 1)


def oracle_depths(f: DepthFeatures) -> np.ndarray:
    """0-based earliest depth whose top token equals the full-depth top token."""
    return f.agree.argmax(1)  # the last column always agrees


def outcome(f: DepthFeatures, depth_idx: np.ndarray) -> dict[str, float]:
    """Average depth (1-based), NLL and agreement with full depth of exiting each row at ``depth_idx``."""
    rows = np.arange(len(depth_idx))
    return {"avg depth": float(depth_idx.mean() + 1), "nll": float(f.nll[rows, depth_idx].mean()),
            "agreement": float(f.agree[rows, depth_idx].mean())}


def _doc_sums(f: DepthFeatures, depth_idx: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    docs, pos = np.unique(f.doc, return_inverse=True)
    rows = np.arange(len(depth_idx))
    sums = {"n": np.bincount(pos, minlength=len(docs)).astype(float),
            "depth": np.bincount(pos, weights=depth_idx + 1.0, minlength=len(docs)),
            "nll": np.bincount(pos, weights=f.nll[rows, depth_idx], minlength=len(docs)),
            "agreement": np.bincount(pos, weights=f.agree[rows, depth_idx].astype(float), minlength=len(docs))}
    return docs, sums


def curve(f: DepthFeatures, conf: np.ndarray, taus: Sequence[float], n_boot: int = 500, seed: int = 0,
          level: float = 0.95) -> list[dict]:
    """Quality against average depth for each threshold, with document-bootstrap percentile CIs on each."""
    idx = None
    rows = []
    for tau in taus:
        d = exit_depths(conf, tau)
        docs, s = _doc_sums(f, d)
        if idx is None:
            idx = bootstrap_indices(len(docs), n_boot, seed)
        row = {"tau": float(tau), **outcome(f, d)}
        n_rep, *sums = idx.sums(s["n"], s["depth"], s["nll"], s["agreement"])
        for name, total in zip(("avg depth", "nll", "agreement"), sums):
            e = percentile(row[name], total / n_rep, level)
            row[f"{name} lo"], row[f"{name} hi"] = e.lo, e.hi
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------------- learned rule
@dataclass
class ExitProbe:
    """Logistic regression from a depth's readout features to P(top token at this depth == full-depth top token),
    fitted on calibration documents; its predicted probability is the rule's confidence."""

    w: np.ndarray
    b: float
    mean: np.ndarray
    scale: np.ndarray

    FEATURES = 7

    @staticmethod
    def design(f: DepthFeatures) -> np.ndarray:
        """(n, K, 7): max-prob, entropy, KL and state change (log1p; undefined at k = 1, set to 0 there), a
        first-depth flag (so that 0 at k = 1 is not read as "settled"), run length / K, k / K."""
        K = f.K
        kl = np.where(np.isfinite(f.kl), np.log1p(np.maximum(f.kl, 0)), 0.0)
        ch = np.where(np.isfinite(f.change), np.log1p(f.change), 0.0)
        k = np.broadcast_to(np.arange(1, K + 1) / K, f.nll.shape)
        first = np.broadcast_to((np.arange(K) == 0).astype(np.float64), f.nll.shape)
        return np.stack([f.maxprob, f.entropy, kl, ch, first, f.stable / K, k], -1)

    @classmethod
    def fit(cls, f: DepthFeatures, iters: int = 200, l2: float = 1e-3) -> ExitProbe:
        X = cls.design(f).reshape(-1, cls.FEATURES)
        y = f.agree.reshape(-1).astype(np.float64)
        mean, scale = X.mean(0), X.std(0) + 1e-9
        Xt = torch.tensor((X - mean) / scale)
        yt = torch.tensor(y)
        w = torch.zeros(cls.FEATURES, dtype=torch.float64, requires_grad=True)
        b = torch.zeros((), dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([w, b], max_iter=iters, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = F.binary_cross_entropy_with_logits(Xt @ w + b, yt) + l2 * (w ** 2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        return cls(w.detach().numpy(), float(b.detach()), mean, scale)

    def confidence(self, f: DepthFeatures) -> np.ndarray:
        z = ((self.design(f) - self.mean) / self.scale) @ self.w + self.b
        return 1 / (1 + np.exp(-z))


# ---------------------------------------------------------------------------------------------------- guarantee
def hoeffding_pvalue(losses: np.ndarray) -> float:
    """p-value of H0: E[loss] > 0 for i.i.d. losses in a range of width 1 (Hoeffding's inequality)."""
    m = len(losses)
    mean = float(np.mean(losses))
    return 1.0 if mean >= 0 else float(math.exp(-2 * m * mean ** 2))


def ltt_threshold(f: DepthFeatures, conf: np.ndarray, taus: Sequence[float], eps: float, delta: float,
                  n_max: int) -> tuple[float | None, list[dict]]:
    """The last τ of ``taus`` (tested from the most conservative down) whose token disagreement rate is certified
    ≤ ε with probability ≥ 1 − δ (see the module docstring), and the test of every τ tried; None if not even the most
    conservative τ passes. ``n_max``: an a-priori bound on a document's real targets (the sequence length)."""
    if not 0 < eps < 1 or not 0 < delta < 1:
        raise ValueError(f"eps and delta must lie in (0, 1), got eps={eps!r}, delta={delta!r}")
    docs, pos = np.unique(f.doc, return_inverse=True)
    n = np.bincount(pos, minlength=len(docs)).astype(float)
    if n.max() > n_max:
        raise ValueError(f"a document has {int(n.max())} real targets, more than n_max = {n_max}: n_max must bound "
                         "every document a priori (the sequence length)")
    chosen, tests = None, []
    for tau in sorted(taus, reverse=True):  # from the most conservative (latest exits) down
        d = exit_depths(conf, tau)
        dis = np.bincount(pos, weights=(~f.agree[np.arange(len(d)), d]).astype(float), minlength=len(docs))
        p = hoeffding_pvalue((dis - eps * n) / n_max)
        tests.append({"tau": float(tau), "disagreement": float(dis.sum() / n.sum()), "p": p, "rejected": p <= delta})
        if p > delta:
            break  # fixed-sequence testing stops at the first null it cannot reject
        chosen = float(tau)
    return chosen, tests


def disagreement_rate(f: DepthFeatures, depth_idx: np.ndarray) -> tuple[float, float]:
    """The token-level share of rows whose exit at ``depth_idx`` disagrees with full depth, and its standard error
    with documents as the independent unit (the ratio estimator's linearisation: u_i = d_i − rate·n_i per document,
    SE² = m/(m−1)·Σu_i² / (Σn_i)² over m documents)."""
    docs, sums = _doc_sums(f, depth_idx)
    m = len(docs)
    if m < 2:
        raise ValueError(f"a disagreement rate's standard error needs at least 2 documents, got {m}")
    n, d = sums["n"], sums["n"] - sums["agreement"]  # rows per document, and those that disagree
    rate = float(d.sum() / n.sum())
    u = d - rate * n
    return rate, float(math.sqrt(m / (m - 1) * (u ** 2).sum()) / n.sum())


def guarantee_splits(f: DepthFeatures, conf: np.ndarray, taus: Sequence[float], eps: float, delta: float, n_max: int,
                     n_splits: int, rng: np.random.Generator) -> list[dict]:
    """``n_splits`` random halvings of ``f``'s documents into calibration and test documents: Learn-then-Test
    (``ltt_threshold``) on the calibration half; on the test half the exit's disagreement rate with its
    document-clustered SE (``disagreement_rate``), whether it exceeds ε, and the average depth. A split whose ε cannot
    be certified runs at full depth (rate 0)."""
    if n_splits < 1:
        raise ValueError(f"n_splits must be a positive integer, got {n_splits!r}")
    if conf.shape != f.nll.shape:
        raise ValueError(f"conf must hold one confidence per row and depth, shape {f.nll.shape}, got {conf.shape}")
    docs = np.unique(f.doc)
    rows = []
    for split in range(n_splits):
        perm = rng.permutation(docs)
        cal_docs, test_docs = perm[:len(docs) // 2], perm[len(docs) // 2:]
        cal_m, test_m = np.isin(f.doc, cal_docs), np.isin(f.doc, test_docs)
        tau, _ = ltt_threshold(f.select(cal_docs), conf[cal_m], taus, eps, delta, n_max)
        ft = f.select(test_docs)
        d = exit_depths(conf[test_m], tau) if tau is not None else np.full(len(ft.doc), f.K - 1)
        rate, se = disagreement_rate(ft, d)
        rows.append({"split": split, "certified": tau is not None, "tau": tau, "test disagreement": rate,
                     "test disagreement se": se, "violated": rate > eps, "avg depth": float(d.mean() + 1)})
    return rows


def rate_minus_eps(rows: Sequence[dict], eps: float, level: float = 0.95) -> Estimate | None:
    """The test-half disagreement rate minus ε, averaged over the calibration splits whose ε was certified, with an
    interval that is conservative for the splits' dependence: the mean of the rates ± z·(the mean of their SEs),
    which bounds the SE of a mean of correlated estimates from above (the SD of a mean is at most the mean of the
    SDs). None when no split was certified: an uncertified split runs at full depth, rate 0 by construction, so it
    says nothing about the guarantee (counting it would make "the rate is below ε" vacuous)."""
    if not rows:
        raise ValueError("rate_minus_eps needs at least one split")
    rows = [r for r in rows if r["certified"]]
    if not rows:
        return None
    pt = float(np.mean([r["test disagreement"] for r in rows])) - eps
    half = float(NormalDist().inv_cdf(0.5 + level / 2) * np.mean([r["test disagreement se"] for r in rows]))
    return Estimate(pt, pt - half, pt + half, level)
