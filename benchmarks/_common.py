"""Pieces the benchmark scripts share: the library's training step on a given batch, and CSV output."""

from __future__ import annotations

import csv

import torch

from tiedlm_lib import TrainConfig
from tiedlm_lib.training.loop import supervised_loss


def train_step(model, opt, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig, amp: bool = False) -> torch.Tensor:
    """Forward (bf16 autocast if amp), fp32 CE, backward, clip at 1.0, AdamW step; returns the loss."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
        loss, _ = supervised_loss(model, x, y, cfg)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
    opt.step()
    return loss


def write_csv(rows: list[dict], path: str | None) -> None:
    if not path:
        return
    with open(path, "w", newline="") as fh:
        fields = list(dict.fromkeys(k for r in rows for k in r))  # rows may carry different columns
        w = csv.DictWriter(fh, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)
