"""The Depth Control Protocol (paper B; PROTOCOL §8): schedules × readout recalibration, the gap decomposition with a
paired document bootstrap, and the sampled-depth training intervention.

The question it answers: when a model truncated to k applications does worse than at full depth N, how much of the
gap is fewer writes into the residual stream, how much is less distinct computation, and how much is only a readout
that was trained on depth-N states and now reads an out-of-distribution one? The last part is what a per-depth
recalibration of the readout (a temperature, or an affine map on the readout input) recovers.

Everything is measured on real (non-pad) target tokens and kept per document, so one bootstrap resample of documents
is shared by every condition and every term.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .data import PAD_ID, EvalBatch
from .evaluation import NLLStats
from .model import eval_mode
from .schedules import Plan, plan, run_plan
from .stats import Estimate, bootstrap_indices, replicates, value


# ---------------------------------------------------------------------------------------------------- readouts
@dataclass
class Readout:
    """The readout inputs h = ln_f(z) at real-target positions, their targets, and each token's document."""

    h: torch.Tensor  # (n, d) float32
    y: torch.Tensor  # (n,)
    doc: np.ndarray  # (n,) document index
    docs: np.ndarray  # the evaluation documents in order (for per-document sums)

    def select(self, keep_docs: np.ndarray) -> Readout:
        m = np.isin(self.doc, keep_docs)
        t = torch.from_numpy(m)
        return Readout(self.h[t], self.y[t], self.doc[m], np.asarray(keep_docs))

    def nll(self, head: torch.nn.Module, calibration: Calibration | None = None) -> NLLStats:
        """Per-document NLL sums of the (optionally recalibrated) readout."""
        ce = token_nll(head, self.h, self.y, calibration)
        pos = np.searchsorted(self.docs, self.doc)
        s = np.bincount(pos, weights=ce, minlength=len(self.docs))
        n = np.bincount(pos, minlength=len(self.docs)).astype(float)
        return NLLStats(self.docs, s, n, s, n)  # pads excluded: "all" and "real" coincide


@torch.no_grad()
def collect(model, batches: Iterable[EvalBatch], p: Plan, device: str | torch.device = "cpu") -> Readout:
    """Run plan ``p`` over the batches and keep the readout input at every real target."""
    with eval_mode(model):
        hs, ys, docs = [], [], []
        for b in batches:
            h = run_plan(model, b.inputs.to(device), p).float().cpu()
            real = b.targets != PAD_ID
            hs.append(h[real])
            ys.append(b.targets[real])
            docs.append(b.doc_index[:, None].expand_as(real)[real].numpy())
    if not hs:
        raise ValueError("no evaluation batches were given")
    doc = np.concatenate(docs)
    return Readout(torch.cat(hs), torch.cat(ys), doc, np.unique(doc))


def split_documents(n_docs: int, n_cal: int, n_eval: int | None = None, seed: int = 0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint calibration and evaluation document indices drawn from ``n_docs`` held-out documents."""
    if n_cal < 1 or n_cal >= n_docs:
        raise ValueError(f"n_cal must be in 1..{n_docs - 1} (there are {n_docs} held-out documents), got {n_cal}")
    perm = np.random.default_rng(seed).permutation(n_docs)
    cal, ev = perm[:n_cal], perm[n_cal:]
    if n_eval is not None:
        ev = ev[:n_eval]
    return np.sort(cal), np.sort(ev)


# ---------------------------------------------------------------------------------------------------- calibration
@dataclass
class Calibration:
    """logits = head(a ⊙ h + b) / T. ``kind`` "temperature" keeps a = 1, b = 0."""

    kind: str
    temperature: float
    a: torch.Tensor | None = None
    b: torch.Tensor | None = None
    lam: float | None = None  # the ridge strength chosen on the holdout (affine only)

    def logits(self, head: torch.nn.Module, h: torch.Tensor) -> torch.Tensor:
        if self.a is not None:
            h = h * self.a + self.b
        return head(h) / self.temperature


def token_nll(head: torch.nn.Module, h: torch.Tensor, y: torch.Tensor, cal: Calibration | None = None,
              chunk: int = 8192) -> np.ndarray:
    out = []
    with torch.no_grad():
        for i in range(0, len(y), chunk):
            lg = cal.logits(head, h[i:i + chunk]) if cal else head(h[i:i + chunk])
            out.append(F.cross_entropy(lg.float(), y[i:i + chunk], reduction="none"))
    return torch.cat(out).double().numpy()


def _lbfgs(params: list[torch.Tensor], loss_fn: Callable[[], torch.Tensor], iters: int = 100) -> None:
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=iters, line_search_fn="strong_wolfe", tolerance_grad=1e-9,
                            tolerance_change=1e-12)

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    opt.step(closure)


def fit_temperature(logits: torch.Tensor, y: torch.Tensor, iters: int = 100) -> float:
    """The scalar T minimising the mean NLL of logits / T, by L-BFGS (strong Wolfe) on log T."""
    logits = logits.detach().double()
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    _lbfgs([log_t], lambda: F.cross_entropy(logits / log_t.exp(), y), iters)
    return float(log_t.detach().exp())


def _fit_affine(head, h, y, lam, iters) -> Calibration:
    d = h.shape[1]
    a = torch.ones(d, requires_grad=True)
    b = torch.zeros(d, requires_grad=True)
    log_t = torch.zeros((), requires_grad=True)

    def loss():
        lg = head(h * a + b) / log_t.exp()
        return F.cross_entropy(lg, y) + lam * (((a - 1) ** 2).sum() + (b ** 2).sum())

    _lbfgs([a, b, log_t], loss, iters)
    return Calibration("affine", float(log_t.detach().exp()), a.detach(), b.detach(), lam)


def fit_calibration(head: torch.nn.Module, cal: Readout, kind: str = "temperature",
                    lams: Sequence[float] = (1e-1, 1e-2, 1e-3), holdout: float = 0.2, max_tokens: int = 20_000,
                    seed: int = 0, iters: int = 100) -> Calibration:
    """Fit a readout recalibration on calibration tokens (paper B's public-model procedure).

    ``temperature``: one scalar T. ``affine``: z' = a ⊙ h + b (and T) with a ridge penalty λ(‖a − 1‖² + ‖b‖²)
    shrinking the map toward the identity; λ is chosen from ``lams`` on a ``holdout`` fraction of the calibration
    tokens, then the map is refit on all of them. At most ``max_tokens`` tokens are used (a seeded subsample)."""
    if kind not in ("temperature", "affine"):
        raise ValueError(f"calibration kind must be 'temperature' or 'affine', got {kind!r}")
    head = _frozen(head)
    g = np.random.default_rng(seed)
    idx = np.arange(len(cal.y))
    if len(idx) > max_tokens:
        idx = np.sort(g.choice(idx, max_tokens, replace=False))
    h, y = cal.h[idx], cal.y[idx]
    if kind == "temperature":
        with torch.no_grad():
            logits = head(h)
        return Calibration("temperature", fit_temperature(logits, y, iters))
    perm = g.permutation(len(y))
    n_hold = max(1, int(holdout * len(y)))
    hold, fit = perm[:n_hold], perm[n_hold:]
    best = None
    for lam in lams:
        c = _fit_affine(head, h[fit], y[fit], lam, iters)
        with torch.no_grad():
            nll = float(F.cross_entropy(c.logits(head, h[hold]), y[hold]))
        if best is None or nll < best[0]:
            best = (nll, lam)
    return _fit_affine(head, h, y, best[1], iters)


def _frozen(head: torch.nn.Module) -> torch.nn.Module:
    """A copy of the head that no fit can change (the model's own head keeps requires_grad)."""
    head = copy.deepcopy(head)
    for p in head.parameters():
        p.requires_grad_(False)
    return head


# ---------------------------------------------------------------------------------------------------- conditions
@dataclass
class Condition:
    schedule: str
    k: int
    raw: NLLStats
    calibrated: dict[str, NLLStats]  # kind -> NLL after that recalibration
    fits: dict[str, Calibration]


def evaluate_schedules(model, cal_batches: Callable[[], Iterable[EvalBatch]],
                       eval_batches: Callable[[], Iterable[EvalBatch]], schedules: Sequence[str], ks: Sequence[int],
                       kinds: Sequence[str] = ("temperature", "affine"), in_sample: bool = False,
                       device: str | torch.device = "cpu", progress: bool = False, **fit_kw) -> dict[tuple, Condition]:
    """Raw and recalibrated NLL for each (schedule, k), with each recalibration fitted per condition on the
    calibration documents (disjoint from the evaluation documents unless ``in_sample=True``, which fits on the
    evaluation documents themselves, as paper B's recurrent script did)."""
    head = model.head
    out = {}
    todo = [(s, k) for s in schedules for k in ks]
    for s, k in tqdm(todo, desc="DCP conditions", disable=not progress, leave=False):
        p = plan(model.config.layout, s, k)
        ev = collect(model, eval_batches(), p, device)
        cal = ev if in_sample else collect(model, cal_batches(), p, device)
        if not in_sample and np.intersect1d(cal.docs, ev.docs).size:
            raise ValueError("calibration and evaluation documents overlap: pass disjoint document sets (see "
                             "split_documents), or in_sample=True to fit on the evaluation documents on purpose")
        fits = {kind: fit_calibration(head, cal, kind, **fit_kw) for kind in kinds}
        out[s, k] = Condition(s, k, ev.nll(head), {kind: ev.nll(head, c) for kind, c in fits.items()}, fits)
    return out


# ---------------------------------------------------------------------------------------------------- bootstrap
def bootstrap_terms(conds: dict[str, NLLStats], terms: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
                    n_boot: int = 5000, seed: int = 0, level: float = 0.95) -> dict[str, Estimate]:
    """Point estimates and percentile CIs of quantities computed from several conditions' NLLs, with one document
    resample shared by every condition in each replicate (paired). ``terms`` maps {condition: NLL} to {term: value}
    and must work elementwise on arrays (one entry per replicate)."""
    names = list(conds)
    ref = conds[names[0]].doc_index
    for n in names[1:]:
        if not np.array_equal(conds[n].doc_index, ref):
            raise ValueError(f"condition {n!r} is not on the same documents in the same order as {names[0]!r}")
    idx = bootstrap_indices(len(ref), n_boot, seed)
    point = terms({n: np.float64(value(conds[n])) for n in names})
    reps = terms({n: replicates(conds[n], idx) for n in names})
    q = (1 - level) / 2
    return {t: Estimate(float(point[t]), float(np.nanquantile(reps[t], q)), float(np.nanquantile(reps[t], 1 - q)),
                        level) for t in point}


def calibration_terms(total: np.ndarray, calibrated_gap: np.ndarray) -> dict[str, np.ndarray]:
    """The part of a naive gap that recalibrating the readout removes, and its share of the gap (elementwise: a
    point or one value per bootstrap replicate)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"total": total, "calibrated gap": calibrated_gap, "calibration": total - calibrated_gap,
                "calibration share": (total - calibrated_gap) / total}


def decomposition_terms(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The DCP decomposition of the naive gap prefix(k_min) − prefix(k_max) (PROTOCOL §8). Condition keys:
    prefix_min, prefix_max, control_min, control_mid (the same-application-count schedule: paper B's repeat, or
    frozen for a single tied loop), cal_prefix_min, cal_prefix_max. The first three terms telescope to the total;
    calibration is the part of the total that recalibrating the readout removes."""
    out = {"application count": v["prefix_min"] - v["control_min"],
           "distinct depth": v["control_min"] - v["control_mid"],
           "block composition": v["control_mid"] - v["prefix_max"]}
    return {**calibration_terms(v["prefix_min"] - v["prefix_max"], v["cal_prefix_min"] - v["cal_prefix_max"]),
            **out}


def readout_share(conditions: dict[tuple, Condition], k_min: int, k_max: int, kind: str = "affine",
                  n_boot: int = 5000, seed: int = 0) -> dict[str, Estimate]:
    """The naive prefix gap, the gap after recalibration, their difference and its share of the gap."""
    c_min, c_max = conditions["prefix", k_min], conditions["prefix", k_max]
    return bootstrap_terms({"min": c_min.raw, "max": c_max.raw, "cal_min": c_min.calibrated[kind],
                            "cal_max": c_max.calibrated[kind]},
                           lambda v: calibration_terms(v["min"] - v["max"], v["cal_min"] - v["cal_max"]),
                           n_boot, seed)


def decompose(conditions: dict[tuple, Condition], k_min: int, k_mid: int, k_max: int, control: str = "repeat",
              kind: str = "affine", n_boot: int = 5000, seed: int = 0) -> dict[str, Estimate]:
    """The decomposition from ``evaluate_schedules`` output (which must hold prefix and ``control`` at the ks)."""
    need = [("prefix", k_min), ("prefix", k_max), (control, k_min), (control, k_mid)]
    missing = [c for c in need if c not in conditions]
    if missing:
        raise ValueError(f"the decomposition needs conditions {missing}, which were not evaluated")
    conds = {"prefix_min": conditions["prefix", k_min].raw, "prefix_max": conditions["prefix", k_max].raw,
             "control_min": conditions[control, k_min].raw, "control_mid": conditions[control, k_mid].raw,
             "cal_prefix_min": conditions["prefix", k_min].calibrated[kind],
             "cal_prefix_max": conditions["prefix", k_max].calibrated[kind]}
    return bootstrap_terms(conds, decomposition_terms, n_boot, seed)
