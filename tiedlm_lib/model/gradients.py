"""Gradient estimators for a tied loop: how the gradient reaches the block and the layers below the loop.

Every estimator is a function of (block, loop input h, depths, trace) that yields (k, z_k) for each requested depth in
increasing order. The forward value is always the exact k-fold application z_k = block^k(h); estimators differ
only in the graph attached to it. ``TiedLM`` calls ``loop_states`` and never looks inside, so a new estimator (an
implicit-function gradient, say) is one function here and one entry in ``ESTIMATORS``.

* ``full``        exact backpropagation through every iteration;
* ``checkpoint``  the same gradient, storing only each iteration's input and recomputing the block in backward;
* ``phantom``     the paper's phantom gradient (PROTOCOL §4.4, §7.7): the loop runs without gradient from h, one
                  step z₁ = block(h) is taken with gradient *at the loop input*, and z_k + (z₁ − stopgrad(z₁)) has the
                  forward value of z_k and the gradient of that first step; the bottom stack gets it through
                  (I + α·∂f/∂h);
* ``truncated:n`` the gradient through the last n iterations only, from the detached state z_{k−n};
                  ``phantom-last`` is truncated:1, the standard one-step phantom gradient at the last state. The
                  bottom stack gets its gradient by a straight-through identity in place of the truncated
                  iterations' Jacobian (dz_k/dh ≈ I). When n >= k nothing is truncated and the gradient is exact.

Without gradient (evaluation, ``torch.no_grad``) every mode is the plain forward loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.utils.checkpoint

States = Iterator[tuple[int, torch.Tensor]]
Estimator = Callable[[nn.Module, torch.Tensor, list[int], list | None], States]


@dataclass(frozen=True)
class Backprop:
    """A parsed backprop mode: ``kind`` in full / checkpoint / phantom / truncated, ``n`` the truncation length."""

    kind: str
    n: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ESTIMATORS or (self.kind == "truncated") != (self.n > 0):
            raise ValueError(f"no backprop mode {self!r}: kind one of {list(ESTIMATORS)}, n > 0 exactly for "
                             "'truncated'")

    @classmethod
    def parse(cls, spec: str | Backprop) -> Backprop:
        if isinstance(spec, Backprop):
            return spec
        if isinstance(spec, str):
            if spec in ESTIMATORS and spec != "truncated":
                return cls(spec)
            if spec == "phantom-last":
                return cls("truncated", 1)
            if spec.startswith("truncated:") and spec[10:].isdigit() and int(spec[10:]) > 0:
                return cls("truncated", int(spec[10:]))
        modes = (*(k for k in ESTIMATORS if k != "truncated"), "phantom-last", "truncated:<n>")
        raise ValueError(f"TrainConfig.backprop must be one of {modes} (n a positive integer), got {spec!r}")


def _record(trace: list | None, z: torch.Tensor) -> None:
    if trace is not None:
        trace.append(z.detach())


def full(block: nn.Module, h: torch.Tensor, wanted: list[int], trace: list | None) -> States:
    z = h
    for i in range(1, wanted[-1] + 1):
        z = block(z)
        _record(trace, z)
        if i in wanted:
            yield i, z


def checkpointed(block: nn.Module, h: torch.Tensor, wanted: list[int], trace: list | None) -> States:
    z = h
    for i in range(1, wanted[-1] + 1):
        z = torch.utils.checkpoint.checkpoint(block, z, use_reentrant=False)  # keeps only the iteration's input
        _record(trace, z)
        if i in wanted:
            yield i, z


def phantom(block: nn.Module, h: torch.Tensor, wanted: list[int], trace: list | None) -> States:
    st = (z1 := block(h)) - z1.detach()  # zero in value; carries the gradient of the one step taken at h
    z = h
    for i in range(1, wanted[-1] + 1):
        # no_grad per step, never around a yield: a suspended generator would leak the mode to the caller
        with torch.no_grad():
            z = block(z)
        _record(trace, z)
        if i in wanted:
            yield i, z + st


def truncated(n: int) -> Estimator:
    def truncated_n(block: nn.Module, h: torch.Tensor, wanted: list[int], trace: list | None) -> States:
        starts = {k - n for k in wanted if k > n}
        detached: dict[int, torch.Tensor] = {}
        with torch.no_grad():  # the trajectory without a graph, keeping the states the graphs start from
            z = h
            for i in range(1, wanted[-1] + 1):
                z = block(z)
                _record(trace, z)
                if i in starts:
                    detached[i] = z
        st = h - h.detach()  # zero in value; carries dL/dz_k straight to h
        for k in wanted:
            if k <= n:  # nothing to truncate: the exact graph from h
                yield k, _apply(block, h, k)
            else:
                yield k, _apply(block, detached[k - n], n) + st
    return truncated_n


def _apply(block: nn.Module, z: torch.Tensor, times: int) -> torch.Tensor:
    for _ in range(times):
        z = block(z)
    return z


ESTIMATORS: dict[str, Callable[[Backprop], Estimator]] = {
    "full": lambda b: full,
    "checkpoint": lambda b: checkpointed,
    "phantom": lambda b: phantom,
    "truncated": lambda b: truncated(b.n),
}


def estimator(spec: str | Backprop) -> Estimator:
    """The estimator of a backprop mode (parsed once; see the module docstring for what each one computes)."""
    b = Backprop.parse(spec)
    return ESTIMATORS[b.kind](b)


def loop_states(block: nn.Module, h: torch.Tensor, depths: Sequence[int], backprop: str | Backprop = "full",
                trace: list | None = None) -> States:
    """An iterator of (k, z_k) for each requested k in increasing order, applying ``block`` from h up to
    max(depths) with the gradient of ``backprop``. The mode is checked and the estimator chosen at the call (not at
    the first ``next``); ``trace``, if given, receives every state z_0 = h, z_1, ... (detached)."""
    est = estimator(backprop)  # parsed (and checked) even where no graph is built
    if not torch.is_grad_enabled():
        est = full  # no graph: every mode is the plain loop
    _record(trace, h)
    return est(block, h, sorted(set(depths)), trace)
