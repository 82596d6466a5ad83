"""A Hugging Face causal LM as a depth-addressable model: the user's own checkpoint under paper B's schedules.

The Depth Control Protocol asks a model for the logits of a *schedule* — its layers run in another order, fewer of
them, or one of them again (``tiedlm_lib.schedules``). ``HFDepthModel`` gets them from the model's own forward: for
one call it replaces the stack of decoder layers with the schedule's sequence of the *same* modules and sets the
config's layer count to match, so the family's own code still builds the attention mask, the rotary or learned
positions, the final norm and the head. Nothing of the model is re-implemented, which is why a family needs only
four facts to be supported (``Family``: where its layers, their count, its final norm and its head are).

A looped model is a stack in which the same layer module appears several times in a row (weights shared by
identity): ``layout`` names each run of one module a loop (``"S S A*8 S"``), every other layer a standard layer,
exactly as ``TiedLM`` layouts do, so ``schedules.plan(model.layout, schedule, k)`` applies unchanged. Schedules that
re-add an update (``frozen``) need the state between two layers and are refused here by name. Every forward runs
without a KV cache: a shared layer keeps one ``layer_idx``, so a cache would let its later calls attend to the keys
of its earlier ones (a looped model's own cached forward is wrong for that reason; a test shows it).

``transformers`` is an optional dependency (``pip install tiedlm[hf]``); this module imports it only to check a
model's class.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .schedules import REUSE, Plan


@dataclass(frozen=True)
class Family:
    """Where a family keeps what a schedule rearranges: dotted attribute paths from the ``*ForCausalLM`` model."""

    layers: str  # the nn.ModuleList of decoder layers, iterated by the family's forward
    count: str  # the config attribute the forward may slice the layers by
    norm: str  # the final norm, applied to the last layer's output
    head: str  # the output projection to the vocabulary


FAMILIES: dict[str, Family] = {
    "GPT2LMHeadModel": Family("transformer.h", "n_layer", "transformer.ln_f", "lm_head"),
    "GPTNeoXForCausalLM": Family("gpt_neox.layers", "num_hidden_layers", "gpt_neox.final_layer_norm", "embed_out"),
    **{name: Family("model.layers", "num_hidden_layers", "model.norm", "lm_head")
       for name in ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")},
}
HOW_TO_ADD = ("add a Family(layers=..., count=..., norm=..., head=...) to tiedlm_lib.hf.FAMILIES under the model's "
              "class name: the dotted paths of its nn.ModuleList of decoder layers, the config attribute its forward "
              "slices them by, its final norm and its output head (see the entries for GPT-2, GPT-NeoX and Llama)")


def _get(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _set(obj, path: str, value) -> None:
    *head, last = path.split(".")
    for part in head:
        obj = getattr(obj, part)
    setattr(obj, last, value)


def _layout(layers: Sequence[nn.Module]) -> tuple[str, list[str]]:
    """The TiedLM-style layout of a stack (runs of one module are loops) and each position's block name."""
    tokens, names, letters, std = [], [], iter("ABCDEFGHIJKLMNOPQRUVWXYZ"), 0
    i = 0
    while i < len(layers):
        j = i
        while j + 1 < len(layers) and layers[j + 1] is layers[i]:
            j += 1
        if j > i:
            letter = next(letters)
            tokens.append(f"{letter}*{j - i + 1}")
            names += [letter] * (j - i + 1)
        else:
            tokens.append("S")
            names.append(f"S{std}")
            std += 1
        i = j + 1
    if len({id(m) for m in layers}) != len(set(names)):
        raise ValueError("a layer module appears in two separate places of the stack: only consecutive repeats (a "
                         "loop) have a layout")
    return " ".join(tokens), names


class HFDepthModel:
    """A Hugging Face causal LM of a known family, addressed by block application (see the module docstring)."""

    def __init__(self, model: nn.Module):
        name = type(model).__name__
        if name not in FAMILIES:
            raise ValueError(f"{name} is not a supported family (supported: {', '.join(sorted(FAMILIES))}); to add it, "
                             f"{HOW_TO_ADD}")
        self.model, self.family = model, FAMILIES[name]
        self.layers = list(_get(model, self.family.layers))
        self.layout, self.names = _layout(self.layers)
        self.blocks = {n: m for n, m in zip(self.names, self.layers)}

    @property
    def config(self):
        return self.model.config

    def norm(self) -> nn.Module:
        return _get(self.model, self.family.norm)

    @contextlib.contextmanager
    def _stack(self, order: Sequence[nn.Module]) -> Iterator[None]:
        """The model's forward runs ``order`` in place of its layers for the duration (restored on exit)."""
        fam, cfg = self.family, self.model.config
        old_layers, old_count = _get(self.model, fam.layers), getattr(cfg, fam.count)
        _set(self.model, fam.layers, nn.ModuleList(order))  # the same modules: no copy of any weight
        setattr(cfg, fam.count, len(order))
        try:
            yield
        finally:
            _set(self.model, fam.layers, old_layers)
            setattr(cfg, fam.count, old_count)

    def order(self, plan: Plan) -> list[nn.Module]:
        """The layer modules a plan calls, in order."""
        if REUSE in plan.core:
            raise ValueError(f"schedule {plan.schedule!r} re-adds an update between two layers, which needs the state "
                             "between them; Hugging Face models support the schedules that only call layers (prefix, "
                             "suffix, repeat)")
        unknown = [n for n in plan.calls if n not in self.blocks]
        if unknown:
            raise ValueError(f"plan names blocks {unknown} that layout {self.layout!r} does not have")
        return [self.blocks[n] for n in plan.calls]

    @torch.no_grad()
    def logits(self, tokens: torch.Tensor, plan: Plan | None = None) -> torch.Tensor:
        """(B, T, V) logits of the schedule ``plan`` (None: the model as trained), from the model's own forward."""
        if plan is None:
            return self.model(tokens, use_cache=False).logits
        with self._stack(self.order(plan)):
            return self.model(tokens, use_cache=False).logits

    @torch.no_grad()
    def states(self, tokens: torch.Tensor, plan: Plan | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The last layer's output (what a probe at the loop's output reads) and the final norm's output (the head's
        input) under ``plan``, caught at the final norm in the model's own forward."""
        seen: dict[str, torch.Tensor] = {}

        def hook(module, args, out):
            seen["z"], seen["x"] = args[0], out

        handle = self.norm().register_forward_hook(hook)
        try:
            self.logits(tokens, plan)
        finally:
            handle.remove()
        return seen["z"], seen["x"]
