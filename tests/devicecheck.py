"""A CPU-only stand-in for an accelerator, to catch code that feeds a model tensors left on the CPU.

A CPU-only torch cannot make CUDA tensors, and its FakeTensorMode aborts the process on the first CUDA device guard
(torch 2.13: "not linked with support for cuda devices"). So the model stays on the CPU, and ``OnDevice`` *tracks*
which tensors would be on its device, named ``cpu:0`` (``DEVICE``; plain ``cpu`` is the host). A tracked tensor
reports ``cpu:0`` as its ``.device``, so code that follows a tensor's device (``device=x.device``, ``.to(t.device)``,
``devices.model_device``) lands on the pretend accelerator, and code that names the host (``device="cpu"``) does not.
Tracked: the model's parameters and buffers, every tensor moved to ``cpu:0`` (``.to``), every factory call given
``device=cpu:0`` (a ``*_like`` of a tracked tensor without ``device=``), every parameter made from a tracked tensor,
and every result of an operation on a tracked tensor. An operation that meets a tracked tensor and an untracked one
raises ``DeviceMismatch``, as CUDA would ("Expected all tensors to be on the same device"), with CUDA's exceptions:
0-dimensional CPU tensors mix freely in elementwise operations (not in ``cat``/``stack``, which CUDA refuses), CPU
integer or boolean tensors may index, and ``copy_`` copies across devices. ``.numpy()`` and ``np.asarray`` of a
tracked tensor raise (on CUDA they need ``.cpu()`` first), ``.cpu()`` / ``.to("cpu")`` results are untracked, and a
``torch.Generator`` used with a tracked tensor or a ``cpu:0`` factory raises: this build has only CPU generators, and
the library's policy is to sample on the host (``generate``), so a generator meeting the device is a bug here.
"""

from __future__ import annotations

import contextlib
import weakref

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

DEVICE = torch.device("cpu", 0)  # the pretend accelerator
FACTORIES = {torch.arange, torch.zeros, torch.ones, torch.empty, torch.full, torch.tensor, torch.as_tensor,
             torch.zeros_like, torch.ones_like, torch.empty_like, torch.full_like, torch.rand, torch.randn,
             torch.randint, torch.linspace, torch.eye, torch.randperm}
LIKE = {torch.zeros_like, torch.ones_like, torch.empty_like, torch.full_like}
TO_CPU = {torch.Tensor.cpu, torch.Tensor.numpy, torch.Tensor.tolist, torch.Tensor.item, torch.Tensor.__bool__,
          torch.Tensor.__float__, torch.Tensor.__int__, torch.Tensor.__index__, torch.Tensor.__len__,
          torch.Tensor.__repr__, torch.Tensor.__format__}
TO_NUMPY = {torch.Tensor.numpy, torch.Tensor.__array__}
LISTS = {torch.cat, torch.concat, torch.concatenate, torch.stack, torch.hstack, torch.vstack, torch.dstack}
CROSS_DEVICE = {torch.Tensor.copy_}  # legal between devices on CUDA


class DeviceMismatch(RuntimeError):
    pass


def _on_device(dev) -> bool:
    return dev is not None and not isinstance(dev, torch.dtype) and torch.device(dev) == DEVICE


def _is_device_getter(func) -> bool:
    return getattr(func, "__self__", None) is torch.Tensor.device


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

    def _to_target(self, args, kwargs):
        """Where ``Tensor.to`` sends its tensor: True (the device), False (the host) or None (where it is)."""
        for a in (*args[1:], kwargs.get("device"), kwargs.get("other")):
            if isinstance(a, torch.Tensor):
                return self.on(a)
            if isinstance(a, (str, torch.device)):
                return _on_device(a)
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _is_device_getter(func):
            return DEVICE if self.on(args[0]) else func(*args, **kwargs)
        leaves = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        on = [self.on(t) for t in leaves]
        if func in TO_NUMPY and any(on):
            raise DeviceMismatch("numpy() of a tensor on the model's device (call .cpu() first)")
        generator = kwargs.get("generator")
        if generator is not None and (any(on) or _on_device(kwargs.get("device"))):
            raise DeviceMismatch(f"{getattr(func, '__name__', func)}: a CPU generator meets the model's device "
                                 "(sample on the host, as generate does)")
        if func in FACTORIES:  # made where the caller said (a *_like where its model tensor is)
            out = func(*args, **kwargs)
            like = func in LIKE and "device" not in kwargs and self.on(args[0])
            return tree_map(self.track, out) if _on_device(kwargs.get("device")) or like else out
        if func is torch.Tensor.to:
            target = self._to_target(args, kwargs)
            self.calls += 1
            out = func(*args, **kwargs)
            if target is None:
                target = on[0]
            if out is args[0] and target != on[0]:
                out = out.view_as(out)  # on a CPU the move returns the same object: a new one stands for the copy
            return self.track(out) if target else out
        if any(on) and not all(on) and func not in TO_CPU and func not in CROSS_DEVICE:
            plain = [t for t, o in zip(leaves, on) if not o and (t.dim() > 0 or func in LISTS)]
            if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__):  # CUDA accepts CPU integer/bool indices
                plain = [t for t in plain if t is args[0] or t.is_floating_point()]
            if plain:
                raise DeviceMismatch(f"{getattr(func, '__name__', func)}: a CPU tensor of shape {tuple(plain[0].shape)}"
                                     " meets a tensor on the model's device")
        self.calls += 1
        out = func(*args, **kwargs)
        moving_to_cpu = func in TO_CPU
        if moving_to_cpu and isinstance(out, torch.Tensor) and leaves and out is leaves[0]:
            out = out.view_as(out)  # on a CPU, .cpu() returns the same object: a new one stands for the CPU copy
        if any(on) and not moving_to_cpu and func not in CROSS_DEVICE:
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
