"""A CPU-only stand-in for an accelerator, to catch code that feeds a model tensors left on the CPU.

A CPU-only torch cannot make CUDA tensors, and its FakeTensorMode aborts the process on the first CUDA device guard
(torch 2.13: "not linked with support for cuda devices"). So the model stays on the CPU, and ``OnDevice`` *tracks*
which tensors would be on its device: the model's parameters and buffers, every tensor moved there through
``tiedlm_lib.devices`` (the one place the library moves data), every factory call given an explicit ``device=``, every
parameter made from a tracked tensor, and every result of an operation on a tracked tensor. An operation that meets
a tracked tensor and an untracked one with more than zero dimensions raises ``DeviceMismatch``, as CUDA would
("Expected all tensors to be on the same device"); 0-dimensional CPU tensors mix freely, and CPU integer or boolean
tensors may index, as on CUDA. ``.numpy()`` of a tracked tensor raises too (on CUDA it needs ``.cpu()`` first), and
``.cpu()`` / ``.to("cpu")`` results are untracked.
"""

from __future__ import annotations

import contextlib
import weakref

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

FACTORIES = {torch.arange, torch.zeros, torch.ones, torch.empty, torch.full, torch.tensor, torch.as_tensor,
             torch.zeros_like, torch.ones_like, torch.empty_like, torch.full_like, torch.rand, torch.randn,
             torch.randint, torch.linspace, torch.eye}
LIKE = {torch.zeros_like, torch.ones_like, torch.empty_like, torch.full_like}
TO_CPU = {torch.Tensor.cpu, torch.Tensor.numpy, torch.Tensor.tolist, torch.Tensor.item, torch.Tensor.__bool__,
          torch.Tensor.__float__, torch.Tensor.__int__, torch.Tensor.__index__, torch.Tensor.__len__,
          torch.Tensor.__repr__, torch.Tensor.__format__}


class DeviceMismatch(RuntimeError):
    pass


class OnDevice(TorchFunctionMode):
    """Track tensors on a pretend accelerator; see the module docstring. ``calls`` counts checked operations."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.tracked: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # by identity, not by value
        for t in (*model.parameters(), *model.buffers()):
            self.track(t)
        self.calls = 0

    def track(self, t):
        if isinstance(t, torch.Tensor):
            self.tracked[id(t)] = t
        return t

    def on(self, t) -> bool:
        return self.tracked.get(id(t)) is t

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        on = [self.on(t) for t in leaves]
        if func is torch.Tensor.numpy and any(on):
            raise DeviceMismatch("numpy() of a tensor on the model's device (call .cpu() first)")
        if func in FACTORIES:  # made where the caller said (a *_like where its model tensor is)
            out = func(*args, **kwargs)
            like = func in LIKE and "device" not in kwargs and self.on(args[0])
            return tree_map(self.track, out) if kwargs.get("device") is not None or like else out
        if any(on) and not all(on) and func not in TO_CPU:
            plain = [t for t, o in zip(leaves, on) if not o and t.dim() > 0]
            if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__):  # CUDA accepts CPU integer/bool indices
                plain = [t for t in plain if t is args[0] or t.is_floating_point()]
            if plain:
                raise DeviceMismatch(f"{getattr(func, '__name__', func)}: a CPU tensor of shape {tuple(plain[0].shape)}"
                                     " meets a tensor on the model's device")
        self.calls += 1
        out = func(*args, **kwargs)
        moving_to_cpu = func in TO_CPU or (func is torch.Tensor.to and "cpu" in str(args[1:] or kwargs.get("device")))
        if moving_to_cpu and isinstance(out, torch.Tensor) and leaves and out is leaves[0]:
            out = out.view_as(out)  # on a CPU, .cpu() returns the same object: a new one stands for the CPU copy
        if any(on) and not moving_to_cpu:
            tree_map(self.track, out)
        return out


@contextlib.contextmanager
def pretend_accelerator(model: torch.nn.Module, monkeypatch):
    """Inside: the model's tensors count as on an accelerator, and ``tiedlm_lib.devices.to_model`` tracks what it
    moves. Yields the mode (its ``calls`` shows that checks ran)."""
    import tiedlm_lib.devices as devices

    mode = OnDevice(model)
    real = devices.to_model

    def to_model(x, m):
        out = real(x, m)
        if isinstance(out, torch.Tensor):
            mode.track(out)
        elif hasattr(out, "inputs"):
            for t in (out.inputs, out.targets):
                mode.track(t)
        return out

    monkeypatch.setattr(devices, "to_model", to_model)
    new = torch.nn.Parameter.__new__

    def parameter(cls, data=None, requires_grad=True):  # a parameter made from a tensor on the device is there too
        p = new(cls, data, requires_grad)
        if data is not None and mode.on(data):
            mode.track(p)
        return p

    monkeypatch.setattr(torch.nn.Parameter, "__new__", parameter)
    with mode:
        yield mode
