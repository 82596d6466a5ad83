"""Where a model's inputs go: the one place the library moves data to the model's device.

Every function that feeds a model (the collectors of ``evaluation``, ``analysis``, ``lens``, ``exits``, ``probes``;
``generate``; ``speculative``) moves its inputs with ``to_model`` and builds new tensors on ``model_device``, so a
model on a GPU gets GPU inputs without each caller knowing. ``tests/devicecheck.py`` checks it on a CPU-only machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TypeVar

import torch

T = TypeVar("T")


def default_device(requested: str | torch.device | None = None, scale: str | None = None) -> str:
    """The device runs train and evaluate on: ``requested``, else the ``TIEDLM_DEVICE`` environment variable, else
    CUDA for the paper scale when it is available, else the CPU. The smoke and cpu scales stay on the CPU unless
    asked: their committed runs were trained there in float32, and a GPU would train (or resume) them in bf16 under
    the same fingerprint (every notebook's ``device`` parameter and ``runs.get_run`` use this)."""
    if requested is not None:
        return str(requested)
    env = os.environ.get("TIEDLM_DEVICE")
    if env:
        return env
    return "cuda" if scale == "paper" and torch.cuda.is_available() else "cpu"


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's parameters (CPU for a model without any)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def to_model(x: T, model: torch.nn.Module) -> T:
    """``x`` (a tensor, or a batch with ``inputs`` and ``targets``) on the model's device."""
    device = model_device(model)
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if hasattr(x, "inputs") and hasattr(x, "targets"):
        import dataclasses

        return dataclasses.replace(x, inputs=x.inputs.to(device), targets=x.targets.to(device))
    raise TypeError(f"to_model moves a tensor or a batch with inputs and targets, got {type(x).__name__}")


def on_model(batches: Iterable[T], model: torch.nn.Module) -> Iterator[T]:
    """Each batch of ``batches`` on the model's device, lazily."""
    for b in batches:
        yield to_model(b, model)


def synchronize(model: torch.nn.Module) -> None:
    """Wait for the model's device to finish its queued work (CUDA runs kernels asynchronously: a wall-clock timing
    that does not wait measures the launches, not the work); nothing on a CPU."""
    device = model_device(model)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
