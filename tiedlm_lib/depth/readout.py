"""Readout probes: a small map, fitted on calibration documents, that lets a truncated state read out as well as it
can. Paper B asks how much of a depth-truncation gap such a map recovers; the answer depends on *where* the map sits
and *how much* it can express, so every probe is named by both:

placement (where the map acts)
* ``head``  the head's input h = ln_f(coda(z)) — paper B's diagonal probe refits the final norm's gain and bias here;
* ``loop``  the core's output z (the last loop's state, before the layers after the loop): in a sandwich model those
            layers are part of the readout that was trained on full-depth states, so the map acts before them.

form (what the map can express)
* ``temperature``  logits / T (one scalar; the same at either placement, since it acts on the logits);
* ``diagonal``     a ⊙ x + b, ridge λ(‖a − 1‖² + ‖b‖²) toward the identity (paper B's affine probe);
* ``full``         x + A·x + b, ridge λ(‖A‖² + ‖b‖²) toward the identity;
* ``tuned``        x + A·x + b trained by KL(p_full ‖ p_probe) to the model's own full-depth distribution at the same
                   positions (the tuned-lens objective), with the same ridge.

Fitting (paper B's procedure where it is the reference): no temperature inside the maps; L-BFGS with a strong-Wolfe
line search for ``iters`` iterations on the whole calibration set; λ chosen on a holdout of whole calibration
documents from a grid that is widened by a decade whenever the best λ sits at its edge and then by its limits (λ = ∞:
the identity map, no probe; λ = 0: no ridge), then the map refit on all calibration documents. Calibration and
evaluation documents must be disjoint (``fit_probe`` only sees the former).
Differences from paper B: its diagonal fit ran 20 L-BFGS iterations and chose λ on the last 20% of calibration
*tokens*; its tuned lens acts on the pre-norm state and was trained with Adam on thousands of training documents.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tiedlm_lib import devices
from tiedlm_lib.data import PAD_ID, EvalBatch
from tiedlm_lib.model.schedules import Plan, budget, plan
from tiedlm_lib.model.tied import eval_mode
from tiedlm_lib.stats.bootstrap import Estimate, NLLStats, bootstrap_indices, percentile, replicates, value

PLACEMENTS = ("head", "loop")
FORMS = ("temperature", "diagonal", "full", "tuned")
LAMBDAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
FLAT = 1e-4  # nats: a limit (λ = 0 or ∞) within this of the grid's edge is as good as it, and is chosen


@dataclass(frozen=True)
class ProbeSpec:
    placement: str
    form: str

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ValueError(f"probe placement must be one of {PLACEMENTS}, got {self.placement!r}")
        if self.form not in FORMS:
            raise ValueError(f"probe form must be one of {FORMS}, got {self.form!r}")

    @property
    def name(self) -> str:
        return f"{self.placement}/{self.form}"

    @classmethod
    def parse(cls, name: str) -> ProbeSpec:
        """The probe named "placement/form" (its ``name``), e.g. "head/diagonal"."""
        parts = name.split("/")
        if len(parts) != 2:
            raise ValueError(f"a probe is named 'placement/form' (e.g. 'head/diagonal'), got {name!r}")
        return cls(*parts)


def all_probes() -> list[ProbeSpec]:
    return [ProbeSpec(p, f) for p in PLACEMENTS for f in FORMS]


# ---------------------------------------------------------------------------------------------------- data
@dataclass
class States:
    """Whole sequences as a probe sees them: the state at the placement (N, T, d), the next-token targets (N, T),
    each row's document, and for the tuned form the full-depth head input at the same positions (N, T, d)."""

    x: torch.Tensor
    y: torch.Tensor
    doc: np.ndarray
    target_h: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.y)

    @property
    def n_tokens(self) -> int:
        return int((self.y != PAD_ID).sum())

    def rows(self, idx: np.ndarray) -> States:
        t = torch.as_tensor(np.asarray(idx), dtype=torch.long)
        return States(self.x[t], self.y[t], self.doc[np.asarray(idx)],
                      None if self.target_h is None else self.target_h[t])

    def of_docs(self, docs: Iterable[int]) -> States:
        """The rows of these documents, in the given order, a document listed twice appearing twice (resampling)."""
        by_doc: dict[int, list[int]] = {}
        for i, d in enumerate(self.doc):
            by_doc.setdefault(int(d), []).append(i)
        return self.rows(np.array([i for d in docs for i in by_doc[int(d)]], dtype=np.int64))


class Readout(nn.Module):
    """The part of the model after a placement — the head, or for ``loop`` the model's own coda, final norm and head
    — run frozen: every call holds the model's parameters without gradients and the model in eval mode (both
    restored after it), so fitting a probe never touches the model's parameters or gradients. The model is shared,
    not copied (a Hugging Face checkpoint of billions of parameters is not duplicated per placement), and is not a
    submodule (moving or listing the readout's parameters never reaches it)."""

    def __init__(self, model, placement: str):
        super().__init__()
        ProbeSpec(placement, "temperature")  # validates the placement
        self.placement = placement
        self._ref = (model,)  # a tuple: nn.Module does not register it

    @property
    def model(self):
        return self._ref[0]

    @property
    def head(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The model's head, run frozen."""
        return lambda h: self._call(self.model.head, h)

    def _call(self, fn, x: torch.Tensor) -> torch.Tensor:
        params = [(p, p.requires_grad) for p in self.model.parameters()]
        for p, _ in params:
            p.requires_grad_(False)
        try:
            with eval_mode(self.model):
                return fn(x)
        finally:
            for p, flag in params:
                p.requires_grad_(flag)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.placement == "loop":
            return self._call(lambda z: self.model.head(self.model.finish(z)), x)
        return self._call(self.model.head, x)


@torch.no_grad()
def collect_states(model, batches: Iterable[EvalBatch], p: Plan, placement: str,
                   full: Plan | None = None) -> States:
    """Run plan ``p`` over the batches and keep the state at ``placement`` for whole sequences; with ``full`` (the
    full-depth plan) also keep its head input, the tuned form's target distribution."""
    ProbeSpec(placement, "temperature")
    xs, ys, docs, ts = [], [], [], []
    with eval_mode(model):
        for b in devices.on_model(batches, model):  # the states stay on the model's device, where probes fit
            z = model.core_state(b.inputs, p)
            xs.append(z if placement == "loop" else model.finish(z))
            if full is not None:
                ts.append(model.finish(model.core_state(b.inputs, full)))
            ys.append(b.targets)
            docs.append(b.doc_index.numpy())
    if not xs:
        raise ValueError("no evaluation batches were given")
    return States(torch.cat(xs).float(), torch.cat(ys), np.concatenate(docs),
                  torch.cat(ts).float() if ts else None)


# ---------------------------------------------------------------------------------------------------- probes
class Probe(nn.Module):
    """One fitted map (see the module docstring); the identity at initialisation, so an unfitted probe changes
    nothing."""

    def __init__(self, form: str, d: int, device: torch.device | str | None = None):
        super().__init__()
        ProbeSpec("head", form)
        self.form = form
        kw = {"device": device}  # where the states it maps are (the model's device)
        if form == "temperature":
            self.log_t = nn.Parameter(torch.zeros((), **kw))
        elif form == "diagonal":
            self.a, self.b = nn.Parameter(torch.ones(d, **kw)), nn.Parameter(torch.zeros(d, **kw))
        else:
            self.A, self.b = nn.Parameter(torch.zeros(d, d, **kw)), nn.Parameter(torch.zeros(d, **kw))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.form == "temperature":
            return x
        if self.form == "diagonal":
            return x * self.a + self.b
        return x + x @ self.A.T + self.b

    def logits(self, readout: Readout, x: torch.Tensor) -> torch.Tensor:
        out = readout(self(x))
        return out / self.log_t.exp() if self.form == "temperature" else out

    def penalty(self) -> torch.Tensor:
        """The ridge toward the identity (zero for the temperature)."""
        if self.form == "temperature":
            return torch.zeros(())
        if self.form == "diagonal":
            return ((self.a - 1) ** 2).sum() + (self.b ** 2).sum()
        return (self.A ** 2).sum() + (self.b ** 2).sum()

    @property
    def temperature(self) -> float:
        return float(self.log_t.detach().exp()) if self.form == "temperature" else 1.0


@torch.no_grad()
def _target(readout: Readout, s: States) -> torch.Tensor:
    """The tuned form's target: the full-depth log-distribution at the real targets (fixed while a probe is fitted)."""
    return F.log_softmax(readout.head(s.target_h)[s.y != PAD_ID].float(), -1)


MAX_LOGITS = 2 ** 24  # logits (elements) one chunk of a fit or a read-out holds: 64 MiB in float32


def row_chunk(states: States, vocab: int, most: int | None = None) -> int:
    """Rows of ``states`` per chunk so that one chunk's logits stay within ``MAX_LOGITS`` elements (at least one row;
    at most ``most``). A fit's or a read-out's memory then grows with the chunk, not with the calibration set: one
    logits copy of 100 documents of 256 positions at a 128k vocabulary is 12 GiB, and an L-BFGS closure holds about
    three."""
    rows = max(1, MAX_LOGITS // max(1, states.x.shape[1] * vocab))
    return rows if most is None else min(most, rows)


def _objective(probe: Probe, readout: Readout, s: States, target: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over real targets of the CE (or, for the tuned form, the KL to the full-depth distribution; ``target``:
    that distribution precomputed by ``_target``, which L-BFGS would otherwise recompute at every evaluation)."""
    real = s.y != PAD_ID
    logits = probe.logits(readout, s.x)[real].float()
    if probe.form != "tuned":
        return F.cross_entropy(logits, s.y[real])
    target = _target(readout, s) if target is None else target
    return F.kl_div(F.log_softmax(logits, -1), target, log_target=True, reduction="batchmean")


def _chunks(s: States, rows: int, target: torch.Tensor | None) -> Iterator[tuple[States, torch.Tensor | None]]:
    """``s`` in chunks of ``rows`` rows, each with its rows' share of the tuned form's ``target`` (real targets in
    row order)."""
    counts = (s.y != PAD_ID).sum(1).tolist()
    at = 0
    for i in range(0, len(s), rows):
        idx = np.arange(i, min(i + rows, len(s)))
        n = int(sum(counts[i:i + rows]))
        yield s.rows(idx), None if target is None else target[at:at + n]
        at += n


def _loss_backward(probe: Probe, readout: Readout, s: States, target: torch.Tensor | None, lam: float,
                   vocab: int) -> torch.Tensor:
    """The fit's loss, its gradient accumulated into the probe. In one pass where the logits fit ``MAX_LOGITS``;
    otherwise chunk by chunk, each chunk's sum over its real targets divided by the whole set's count and its
    gradient taken before the next chunk is read out, so memory holds one chunk's logits."""
    rows = row_chunk(s, vocab)
    if rows >= len(s):
        loss = _objective(probe, readout, s, target) + lam * probe.penalty()
        loss.backward()
        return loss
    n_real = float((s.y != PAD_ID).sum()) if probe.form != "tuned" else float(len(target))
    total = lam * probe.penalty()
    if total.requires_grad:
        total.backward()
    total = total.detach()
    for part, tgt in _chunks(s, rows, target):
        real = part.y != PAD_ID
        if not real.any():
            continue
        logits = probe.logits(readout, part.x)[real].float()
        if probe.form != "tuned":
            piece = F.cross_entropy(logits, part.y[real], reduction="sum") / n_real
        else:
            piece = F.kl_div(F.log_softmax(logits, -1), tgt, log_target=True, reduction="sum") / n_real
        piece.backward()
        total = total + piece.detach()
    return total


@torch.no_grad()
def _holdout_score(probe: Probe, readout: Readout, s: States, vocab: int) -> float:
    """The fit's objective on held-out states, in chunks where one pass would exceed ``MAX_LOGITS``."""
    rows = row_chunk(s, vocab)
    if rows >= len(s):
        return float(_objective(probe, readout, s))
    target = _target(readout, s) if probe.form == "tuned" else None
    total = 0.0
    n_real = float((s.y != PAD_ID).sum())
    for part, tgt in _chunks(s, rows, target):
        real = part.y != PAD_ID
        if real.any():
            logits = probe.logits(readout, part.x)[real].float()
            total += float(F.cross_entropy(logits, part.y[real], reduction="sum") if probe.form != "tuned" else
                           F.kl_div(F.log_softmax(logits, -1), tgt, log_target=True, reduction="sum"))
    return total / n_real


def _lbfgs_fit(probe: Probe, readout: Readout, s: States, lam: float, iters: int) -> Probe:
    opt = torch.optim.LBFGS(list(probe.parameters()), lr=1.0, max_iter=iters, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-9, tolerance_change=1e-12)
    target = _target(readout, s) if probe.form == "tuned" else None
    vocab = _vocab(readout, s)

    def closure():
        opt.zero_grad()
        return _loss_backward(probe, readout, s, target, lam, vocab)

    opt.step(closure)
    return probe


def _vocab(readout: Readout, s: States) -> int:
    """The readout's output width (the vocabulary), from the model's config where it has one, else from one row."""
    v = getattr(getattr(readout.model, "config", None), "vocab_size", None)
    if isinstance(v, int) and v > 0:
        return v + int(getattr(readout.model, "token_offset", 0) or 0)
    with torch.no_grad():
        return int(readout(s.x[:1, :1]).shape[-1])


@dataclass
class FittedProbe:
    spec: ProbeSpec
    probe: Probe
    lam: float | None  # the ridge chosen on the document holdout (None for the temperature)
    lam_grid: tuple[float, ...] = ()
    holdout_nll: dict[float, float] = field(default_factory=dict)
    iters: int = 0
    n_tokens: int = 0  # calibration tokens (real targets) it was fitted on

    @property
    def temperature(self) -> float:
        """The fitted temperature (1 for every form but ``temperature``)."""
        return self.probe.temperature

    @property
    def lam_at_edge(self) -> bool:
        """The chosen λ is the smallest or largest finite λ tried and the limit beyond it (0 or ∞) was worse: the
        optimum may lie between them. A λ of exactly 0 or ∞ is a limit the holdout chose, not an edge."""
        finite = [v for v in self.lam_grid if 0 < v < math.inf]
        return self.lam is not None and 0 < self.lam < math.inf and self.lam in (finite[0], finite[-1])


def _grid_search(spec: ProbeSpec, readout: Readout, fit: States, hold: States, lams: Sequence[float], iters: int,
                 max_widen: int) -> tuple[float, dict[float, float]]:
    """The λ with the lowest holdout objective. The grid widens by a decade while the best sits at its edge; if it
    still does, the limit beyond that edge is scored too — λ = ∞ (the identity map: no probe) above, λ = 0 (no
    ridge) below — and chosen when it is within FLAT nats of the edge (the objective is flat out to it), so a probe that
    wants no shrinkage or no change gets exactly that instead of a truncated grid."""
    d = fit.x.shape[-1]
    vocab = _vocab(readout, fit)
    scores: dict[float, float] = {}

    def score(lam: float) -> None:
        if lam not in scores:
            new = Probe(spec.form, d, fit.x.device)
            p = new if math.isinf(lam) else _lbfgs_fit(new, readout, fit, lam, iters)
            scores[lam] = _holdout_score(p, readout, hold, vocab)

    grid = sorted(lams)
    for widened in range(max_widen + 1):
        for lam in grid:
            score(lam)
        best = min(grid, key=lambda v: (scores[v], -v))  # ties: the stronger shrinkage
        if best not in (grid[0], grid[-1]):
            break
        if widened == max_widen:  # still at an edge: score the limit beyond it
            limit = 0.0 if best == grid[0] else math.inf
            score(limit)
            if scores[limit] <= scores[best] + FLAT:  # as good as the edge: the objective is flat out to the limit
                best = limit
            return best, dict(sorted(scores.items()))
        grid = [grid[0] / 10, *grid] if best == grid[0] else [*grid, grid[-1] * 10]
    best = min(scores, key=lambda v: (scores[v], -v))
    return best, dict(sorted(scores.items()))


def fit_probe(model_or_readout, cal: States, spec: ProbeSpec, lams: Sequence[float] = LAMBDAS,
              holdout: float = 0.2, iters: int = 100, seed: int = 0, max_widen: int = 3,
              lam: float | None = None) -> FittedProbe:
    """Fit ``spec`` on the calibration states (see the module docstring for the procedure). ``lam``: fit at this
    ridge on all calibration documents without a search (a refit of an already chosen λ; ``math.inf``: identity)."""
    readout = model_or_readout if isinstance(model_or_readout, Readout) else Readout(model_or_readout, spec.placement)
    if readout.placement != spec.placement:
        raise ValueError(f"readout placed at {readout.placement!r} cannot fit a {spec.name} probe")
    if spec.form == "tuned" and cal.target_h is None:
        raise ValueError("the tuned form needs the full-depth head input: collect_states(..., full=<full plan>)")
    d = cal.x.shape[-1]
    if spec.form == "temperature":
        fitted = _lbfgs_fit(Probe("temperature", d, cal.x.device), readout, cal, 0.0, iters)
        return FittedProbe(spec, fitted, None, (), {}, iters, cal.n_tokens)
    if lam is not None:
        if not lam >= 0:
            raise ValueError(f"lam must be >= 0 (math.inf for the identity), got {lam!r}")
        new = Probe(spec.form, d, cal.x.device)
        probe = new if math.isinf(lam) else _lbfgs_fit(new, readout, cal, lam, iters)
        return FittedProbe(spec, probe, lam, (lam,), {}, iters, cal.n_tokens)
    docs = np.unique(cal.doc)
    if len(docs) < 2:
        raise ValueError("λ is chosen on a holdout of whole documents: need >= 2 calibration documents, got "
                         f"{len(docs)}")
    perm = np.random.default_rng(seed).permutation(docs)
    n_hold = max(1, int(round(holdout * len(docs))))
    lam, scores = _grid_search(spec, readout, cal.of_docs(perm[n_hold:]), cal.of_docs(perm[:n_hold]), lams, iters,
                               max_widen)
    new = Probe(spec.form, d, cal.x.device)
    probe = new if math.isinf(lam) else _lbfgs_fit(new, readout, cal, lam, iters)
    return FittedProbe(spec, probe, lam, tuple(scores), scores, iters, cal.n_tokens)


@torch.no_grad()
def probe_nll(model_or_readout, states: States, fitted: FittedProbe | None = None, placement: str = "head",
              chunk: int | None = None) -> NLLStats:
    """Per-document NLL sums (real targets) of the readout, through the fitted probe if one is given; ``chunk`` rows
    at a time (default: 64, fewer where their logits would exceed ``MAX_LOGITS``)."""
    place = fitted.spec.placement if fitted is not None else placement
    readout = model_or_readout if isinstance(model_or_readout, Readout) else Readout(model_or_readout, place)
    probe = fitted.probe if fitted is not None else None
    chunk = chunk or row_chunk(states, _vocab(readout, states), most=64)
    ce = []
    for i in range(0, len(states), chunk):
        x = states.x[i:i + chunk]
        logits = probe.logits(readout, x) if probe is not None else readout(x)
        ce.append(F.cross_entropy(logits.float().transpose(1, 2), states.y[i:i + chunk], reduction="none"))
    ce_np = torch.cat(ce).double().cpu().numpy()
    real = (states.y != PAD_ID).cpu().numpy()
    docs = np.unique(states.doc)
    pos = np.searchsorted(docs, states.doc)
    s_real = np.bincount(pos, weights=(ce_np * real).sum(1), minlength=len(docs))
    n_real = np.bincount(pos, weights=real.sum(1), minlength=len(docs))
    return NLLStats(docs, s_real, n_real, s_real, n_real)  # pads excluded: "all" and "real" coincide


@torch.no_grad()
def readout_metrics(model_or_readout, states: States, fitted: FittedProbe | None = None, placement: str = "head",
                    bins: int = 15, chunk: int | None = None) -> dict[str, float]:
    """Calibration of the readout (through the fitted probe if one is given) over real targets, as paper B reports
    it: the expected calibration error of the top prediction (``bins`` equal-width confidence bins, |accuracy −
    confidence| weighted by the bin's share of tokens) and the multiclass Brier score Σ_v (p_v − 1[v = y])², ``chunk``
    rows at a time (default as ``probe_nll``)."""
    place = fitted.spec.placement if fitted is not None else placement
    readout = model_or_readout if isinstance(model_or_readout, Readout) else Readout(model_or_readout, place)
    chunk = chunk or row_chunk(states, _vocab(readout, states), most=64)
    conf, correct, brier = [], [], []
    for i in range(0, len(states), chunk):
        x, y = states.x[i:i + chunk], states.y[i:i + chunk]
        logits = fitted.probe.logits(readout, x) if fitted is not None else readout(x)
        p = logits.double().softmax(-1)[y != PAD_ID]
        t = y[y != PAD_ID]
        top, arg = p.max(-1)
        conf.append(top)
        correct.append((arg == t).double())
        p_y = p.gather(-1, t[:, None])[:, 0]
        brier.append(1 - 2 * p_y + (p ** 2).sum(-1))
    conf_, correct_ = torch.cat(conf).cpu().numpy(), torch.cat(correct).cpu().numpy()
    which = np.minimum((conf_ * bins).astype(int), bins - 1)
    ece = sum(abs(correct_[which == b].mean() - conf_[which == b].mean()) * (which == b).mean()
              for b in range(bins) if (which == b).any())
    return {"ece": float(ece), "brier": float(torch.cat(brier).mean()), "accuracy": float(correct_.mean())}


# ---------------------------------------------------------------------------------------------------- shares
def calibration_terms(total: np.ndarray, calibrated_gap: np.ndarray) -> dict[str, np.ndarray]:
    """The part of a naive gap that recalibrating the readout removes, and its share of the gap (elementwise: a
    point or one value per bootstrap replicate)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"total": total, "calibrated gap": calibrated_gap, "calibration": total - calibrated_gap,
                "calibration share": (total - calibrated_gap) / total}


def _share_terms(raw_min, raw_max, cal_min, cal_max):
    """The raw gap ("total"), the gap left after each depth's own probe, the part the probes recover, its share."""
    return calibration_terms(raw_min - raw_max, cal_min - cal_max)


@dataclass(frozen=True)
class ShareReplicates:
    """The bootstrap replicates behind a share's CI, kept so that two shares measured on the same evaluation
    documents with the same resample (same documents, ``n_boot`` and ``seed``) can be compared *paired*."""

    doc_index: np.ndarray  # the evaluation documents, in the order the resample indexes them
    seed: int
    share: np.ndarray  # (n_boot,) the share per replicate, centred as the CI is
    point: float
    centring: float = 0.0  # what was subtracted from every replicate (the refits' mean shift; 0 if uncentred)


def paired_share_difference(a: ShareReplicates, b: ShareReplicates, level: float = 0.95,
                            centred: bool = True) -> Estimate:
    """The share difference a − b with a paired bootstrap CI: replicate i of both resampled the same evaluation
    documents, so the documents both models find hard cancel (two separate CIs would count them twice). Refused
    unless both were measured on the same documents with the same resample. ``centred=False``: the raw refits'
    replicates (each side's centring added back), since two probes may be data-starved by different amounts."""
    if not np.array_equal(a.doc_index, b.doc_index):
        raise ValueError("a paired share difference needs the same evaluation documents for both shares")
    if a.seed != b.seed or a.share.shape != b.share.shape:
        raise ValueError(f"a paired share difference needs the same bootstrap resample: seeds {a.seed} and {b.seed}, "
                         f"{a.share.size} and {b.share.size} replicates")
    return percentile(a.point - b.point, a.share - b.share + (0.0 if centred else a.centring - b.centring), level)


def _refit_nll(readout: Readout, spec: ProbeSpec, cal: tuple[States, States], ev: tuple[States, States],
               fits: tuple[FittedProbe, FittedProbe], docs: np.ndarray, n_refit: int, seed: int,
               fit_kw: dict) -> list[list[NLLStats]]:
    """Per-document NLL on the evaluation states of probes refitted, at the λ each fit chose, on ``n_refit``
    bootstrap resamples of the calibration documents (the same resample at both depths)."""
    rng = np.random.default_rng(seed + 1)
    refits = []
    for _ in range(n_refit):
        sample = rng.choice(docs, len(docs), replace=True)
        refits.append([probe_nll(readout, e, fit_probe(readout, c.of_docs(sample), spec, seed=seed,
                                                       **(fit_kw | {"lam": f.lam} if f.lam is not None else fit_kw)))
                       for c, e, f in zip(cal, ev, fits)])
    return refits


def calibration_share(model, spec: ProbeSpec, cal: tuple[States, States], ev: tuple[States, States],
                      n_refit: int = 30, n_boot: int = 2000, seed: int = 0, level: float = 0.95, centre: bool = True,
                      **fit_kw) -> tuple[dict[str, Any], tuple[FittedProbe, FittedProbe]]:
    """The share of the gap NLL(k_min) − NLL(k_max) that ``spec`` recovers, each depth with its own probe (as paper
    B), from calibration and evaluation states at (k_min, k_max). The CI includes the fit's own uncertainty:
    replicate i resamples the evaluation documents and uses probes refitted on the i-th of ``n_refit`` bootstrap
    resamples of the calibration documents (``n_refit=0``: evaluation resampling only, the fit held fixed). A refit
    keeps the λ the full calibration set chose (the uncertainty of the map given its ridge, not of the λ search;
    this makes a refit one fit instead of a grid search).

    The interval is **centred**: a bootstrap resample of the calibration documents holds about 63% distinct
    documents, so a data-starved probe refitted on it recovers systematically less than the fit on all of them (the
    data curve shows how much), and an interval made of raw refits would sit below its own point. Each replicate
    therefore has the refits' *mean* shift removed (per term): the refits contribute their spread around each other —
    the fit's uncertainty — but not the bias of fitting on fewer distinct documents. ``"refit shift"`` reports that
    removed bias (the refitted shares minus the point on every evaluation document: mean [min, max]), so a reader
    sees it beside the interval (``centre=False``: the raw refits' interval, for comparison). Either way the other
    interval comes back too, as ``"calibration share uncentred"`` or ``"calibration share centred"``, so that a
    conclusion that depends on the centring shows it; ``"replicates"`` holds the share's replicates
    (``ShareReplicates``) for a paired comparison with another share on the same documents."""
    readout = Readout(model, spec.placement)
    fits = tuple(fit_probe(readout, c, spec, seed=seed, **fit_kw) for c in cal)
    raw = [probe_nll(readout, e) for e in ev]
    point = [probe_nll(readout, e, f) for e, f in zip(ev, fits)]
    docs = [np.unique(c.doc) for c in cal]
    if not np.array_equal(docs[0], docs[1]) or not np.array_equal(raw[0].doc_index, raw[1].doc_index):
        raise ValueError("both depths need the same calibration documents and the same evaluation documents")
    if np.intersect1d(docs[0], raw[0].doc_index).size:
        raise ValueError("calibration and evaluation documents overlap: fit on documents disjoint from the evaluation")
    if not isinstance(n_refit, int) or n_refit < 0:
        raise ValueError(f"n_refit must be a non-negative integer, got {n_refit!r}")
    refits = _refit_nll(readout, spec, cal, ev, fits, docs[0], n_refit, seed, fit_kw)
    return share_interval(tuple(raw), tuple(point), refits, n_boot, seed, level, centre), fits


def share_interval(raw: tuple[NLLStats, NLLStats], point: tuple[NLLStats, NLLStats],
                   refits: Sequence[Sequence[NLLStats]], n_boot: int = 2000, seed: int = 0, level: float = 0.95,
                   centre: bool = True) -> dict[str, Any]:
    """The share's terms with their intervals from per-document NLLs on the evaluation documents: ``raw`` (k_min,
    k_max) without a probe, ``point`` with the probes fitted on every calibration document, ``refits`` with probes
    refitted on bootstrap resamples of the calibration documents (``calibration_share``'s model-free part, so that
    its coverage can be simulated). Replicate i resamples the evaluation documents and uses refit i mod R, centred
    by the refits' mean shift (see ``calibration_share``)."""
    n_refit = len(refits)
    idx = bootstrap_indices(len(raw[0].doc_index), n_boot, seed)

    def on_every_document(cal_nll):
        return _share_terms(*(np.float64(value(s)) for s in (*raw, *cal_nll)))

    est = on_every_document(point)
    # each refit's terms on every evaluation document, relative to the point's: the bias the centring removes
    shifts = [{k: float(v - est[k]) for k, v in on_every_document(r).items()} for r in refits]
    mean_shift = {k: float(np.mean([sh[k] for sh in shifts])) if shifts else 0.0 for k in est}
    bias = mean_shift if centre else dict.fromkeys(est, 0.0)
    raw_reps = [replicates(s, idx) for s in raw]
    cal_reps = [[replicates(s, idx) for s in r] for r in refits] if n_refit else [[replicates(s, idx) for s in point]]
    pick = np.arange(n_boot) % len(cal_reps)  # replicate i uses refit i mod R
    cal_i = [np.stack([c[j] for c in cal_reps])[pick, np.arange(n_boot)] for j in range(2)]
    one = _share_terms(*raw_reps, *cal_i)
    reps = {k: np.asarray(one[k], dtype=np.float64) - bias[k] for k in est}

    def interval(k, r):
        return percentile(est[k], r, level)

    out = {k: interval(k, reps[k]) for k in est}
    other, back = ("uncentred", 1.0) if centre else ("centred", -1.0)  # the centring added back, or removed
    out[f"calibration share {other}"] = interval("calibration share", reps["calibration share"]
                                                 + back * mean_shift["calibration share"])
    out["replicates"] = ShareReplicates(raw[0].doc_index, seed, reps["calibration share"],
                                        float(est["calibration share"]), bias["calibration share"])
    if n_refit:
        sh = [x["calibration share"] for x in shifts]
        out["refit shift"] = Estimate(float(np.mean(sh)), min(sh), max(sh), 1.0)
    return out


def data_curve(model, spec: ProbeSpec, pool: tuple[States, States], ev: tuple[States, States],
               budgets: Sequence[int], seed: int = 0, n_boot: int = 1000, **fit_kw) -> list[dict]:
    """Calibration share against calibration tokens: for each budget, the fewest documents of a seeded order of the
    pool that hold at least that many real targets (the same documents at both depths). Evaluation resampling only
    (no refits); the λ each probe chose is reported with whether it sat at the grid's edge."""
    docs = np.random.default_rng(seed).permutation(np.unique(pool[0].doc))
    per_doc = np.array([int((pool[0].y[pool[0].doc == d] != PAD_ID).sum()) for d in docs])
    cum = np.cumsum(per_doc)
    rows = []
    for want in sorted(budgets):
        m = int(np.searchsorted(cum, want)) + 1
        if m > len(docs):
            raise ValueError(f"calibration budget {want} tokens exceeds the pool's {int(cum[-1])}")
        cal = tuple(p.of_docs(docs[:m]) for p in pool)
        est, fits = calibration_share(model, spec, cal, ev, n_refit=0, n_boot=n_boot, seed=seed, **fit_kw)
        share = est["calibration share"]
        rows.append({"probe": spec.name, "budget": want, "calibration tokens": int(cum[m - 1]), "documents": m,
                     "share": share.point, "lo": share.lo, "hi": share.hi,
                     "lambda k_min": fits[0].lam, "lambda k_max": fits[1].lam,
                     "lambda at edge": fits[0].lam_at_edge or fits[1].lam_at_edge})
    return rows


def share_by_probe(model, cal_batches, eval_batches, k_min: int, k_max: int | None = None,
                   probes: Sequence[ProbeSpec] | None = None, schedule: str = "prefix", n_refit: int = 30,
                   n_boot: int = 2000, seed: int = 0, replicates: dict[str, ShareReplicates] | None = None,
                   **fit_kw) -> list[dict]:
    """The calibration share of the gap NLL(k_min) − NLL(k_max) under ``schedule`` for every probe (placement ×
    form), one row each: the share with a CI that includes refits (centred: see ``calibration_share``; the removed
    refit shift is reported), the raw and remaining gaps, the λ each depth's
    probe chose (and whether at the grid's edge), the calibration tokens and the L-BFGS iteration count.
    ``cal_batches`` / ``eval_batches`` are factories of batches over disjoint documents. The uncentred interval is
    beside the centred one (``share lo uncentred`` / ``share hi uncentred``); ``replicates``, when given, receives
    each probe's share replicates by name, for ``paired_share_difference``."""
    layout = model.layout
    k_max = k_max or budget(layout)
    plans = (plan(layout, schedule, k_min), plan(layout, schedule, k_max))
    full = plan(layout, "prefix", budget(layout))
    rows = []
    states: dict[tuple[str, str], tuple[States, States]] = {}
    for spec in probes or all_probes():
        for part, batches in (("cal", cal_batches), ("ev", eval_batches)):
            if (spec.placement, part) not in states:
                states[spec.placement, part] = tuple(collect_states(model, batches(), p, spec.placement, full=full)
                                                     for p in plans)
        est, fits = calibration_share(model, spec, states[spec.placement, "cal"], states[spec.placement, "ev"],
                                      n_refit=n_refit, n_boot=n_boot, seed=seed, **fit_kw)
        sh, cal, unc = est["calibration share"], est["calibration"], est["calibration share uncentred"]
        if replicates is not None:
            replicates[spec.name] = est["replicates"]
        rows.append({"probe": spec.name, "placement": spec.placement, "form": spec.form, "schedule": schedule,
                     "k_min": k_min, "k_max": k_max, "share": sh.point, "share lo": sh.lo, "share hi": sh.hi,
                     "share lo uncentred": unc.lo, "share hi uncentred": unc.hi, "raw gap": est["total"].point,
                     "calibrated gap": est["calibrated gap"].point,
                     "calibration": cal.point, "calibration lo": cal.lo, "calibration hi": cal.hi,
                     "T k_min": fits[0].temperature, "T k_max": fits[1].temperature,
                     "lambda k_min": fits[0].lam, "lambda k_max": fits[1].lam,
                     "lambda at edge": fits[0].lam_at_edge or fits[1].lam_at_edge,
                     "calibration tokens": fits[0].n_tokens, "lbfgs iterations": fits[0].iters, "refits": n_refit,
                     **({"refit shift": est["refit shift"].point, "refit shift min": est["refit shift"].lo,
                         "refit shift max": est["refit shift"].hi} if n_refit else {})})
    return rows
