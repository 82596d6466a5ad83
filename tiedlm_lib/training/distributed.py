"""Data parallelism under ``torchrun``: every rank draws the same global batch from the same seeded stream and
trains on its own rows (rank::world); gradients are summed across ranks, with the loss normalised by the *global*
number of targets, so a run on W processes computes the same update as one process on the whole batch."""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist


def init_from_env(device: torch.device) -> None:
    """Join the process group that torchrun describes in the environment (no-op for a single process)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")


def rank_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def local_device(device: torch.device) -> torch.device:
    if device.type == "cuda" and device.index is None and rank_world()[1] > 1:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    if rank_world()[1] > 1:
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_reduce_grads(params) -> None:
    """Sum every gradient across ranks, in one flat buffer (one collective instead of one per parameter)."""
    if rank_world()[1] == 1:
        return
    grads = [p.grad for p in params if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    i = 0
    for g in grads:
        g.copy_(flat[i: i + g.numel()].view_as(g))
        i += g.numel()


def broadcast_object(obj: Any) -> Any:
    """Rank 0's value of ``obj`` on every rank."""
    if rank_world()[1] == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if rank_world()[1] > 1:
        dist.barrier()
