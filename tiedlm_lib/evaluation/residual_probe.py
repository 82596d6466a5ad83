"""Probes of the loop's dynamics: does the last iteration's relative residual ‖z_K − z_{K−1}‖/‖z_0‖ say how hard a
sequence (or a token) is? Paper A's "uncertainty probe" (PROTOCOL §5.3) correlates it with NLL per sequence, taking
the max over every position *including pads*; here it is computed that way and per token with pads excluded, with
document-bootstrap CIs on Pearson r."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from tiedlm_lib import devices
from tiedlm_lib.data import PAD_ID, EvalBatch
from tiedlm_lib.evaluation.nll import token_ce
from tiedlm_lib.model.tied import eval_mode
from tiedlm_lib.stats.bootstrap import Estimate, bootstrap_indices, percentile


@dataclass
class ProbeData:
    seq_doc: np.ndarray  # (n,) document of each kept sequence
    seq_residual_paper: np.ndarray  # max over all positions, pads included (the paper's)
    seq_residual_real: np.ndarray  # max over real positions
    seq_nll: np.ndarray  # mean CE over real targets
    tok_doc: np.ndarray  # (m,)
    tok_residual: np.ndarray  # last-iteration relative residual at each real position
    tok_ce: np.ndarray


@torch.no_grad()
def residual_probe(model, batches: Iterable[EvalBatch], loop: str | None = None, min_real: int = 8) -> ProbeData:
    """Run each batch at the trained depth and collect the last-iteration relative residual of ``loop`` (the first
    loop by default) with the NLL, per sequence (sequences with fewer than ``min_real`` real targets dropped, as in
    the original) and per real token."""
    with eval_mode(model):
        loop = loop or model.loop_names[0]
        cols: dict[str, list] = {k: [] for k in ProbeData.__dataclass_fields__}
        for cpu_b in batches:
            b = devices.to_model(cpu_b, model)
            logits, trace = model.run(b.inputs)
            r = trace.loops[loop].rel_residual[-1].cpu()  # (B, T)
            ce = token_ce(logits, b.targets).cpu()
            real = cpu_b.targets != PAD_ID
            n_real = real.sum(1)
            keep = n_real >= min_real
            cols["seq_doc"].append(b.doc_index[keep].numpy())
            cols["seq_residual_paper"].append(r.amax(1)[keep].numpy())
            cols["seq_residual_real"].append(r.masked_fill(~real, -1).amax(1)[keep].numpy())
            cols["seq_nll"].append(((ce * real).sum(1) / n_real.clamp_min(1))[keep].numpy())
            cols["tok_doc"].append(b.doc_index[:, None].expand_as(real)[real].numpy())
            cols["tok_residual"].append(r[real].numpy())
            cols["tok_ce"].append(ce[real].numpy())
    return ProbeData(**{k: np.concatenate(v) for k, v in cols.items()})


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r along the last axis."""
    x = x - x.mean(-1, keepdims=True)
    y = y - y.mean(-1, keepdims=True)
    return (x * y).sum(-1) / np.sqrt((x * x).sum(-1) * (y * y).sum(-1))


def pearson_ci(x: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None, n_boot: int = 2000, seed: int = 0,
               level: float = 0.95) -> Estimate:
    """Pearson r with a bootstrap CI that resamples whole groups (documents), so tokens of one document move
    together; without groups, each pair is its own group."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) != len(y) or len(x) < 3:
        raise ValueError(f"pearson_ci needs two equal-length arrays of at least 3 values, got {len(x)}, {len(y)}")
    groups = np.arange(len(x)) if groups is None else np.asarray(groups)
    uniq, inv = np.unique(groups, return_inverse=True)
    idx = bootstrap_indices(len(uniq), n_boot, seed)
    # sufficient statistics per group, so a replicate is a weighted sum over groups (no per-token resampling)
    stats = np.stack([np.bincount(inv, weights=w, minlength=len(uniq))
                      for w in (np.ones_like(x), x, y, x * x, y * y, x * y)])
    n, sx, sy, sxx, syy, sxy = idx.sums(*stats)  # each statistic summed over every replicate's groups
    r = (n * sxy - sx * sy) / np.sqrt((n * sxx - sx ** 2) * (n * syy - sy ** 2))
    return percentile(_pearson(x, y), r, level)
