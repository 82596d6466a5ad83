"""Execution schedules (paper B's Depth Control Protocol): which block runs at each application step.

A layout splits into a *prelude* and a *coda* that always run, and a *core* of N block applications that a schedule
rearranges. For a looped layout the core runs from the first loop to the last (``"S S A*16 S S"``: 16 applications
of A; ``"S A*8 S B*8 S"``: A×8, the bridge S, B×8, N = 17); for a dense layout (``"S*5"``) every layer is the core,
as in paper B's negative control on dense transformers.

* ``prefix(k)``  the first k applications (naive truncation);
* ``repeat(k)``  the first k applications, then the k-th re-applied until N have run: the application count stays N
  with k distinct applications (in a single tied loop the k-th application *is* the block, so repeat(k) = prefix(N));
* ``suffix(k)``  the last k applications;
* ``frozen(k)``  the first k applications, then the k-th *update* z_k − z_{k−1} re-added (without recomputing the
  block) until N: N writes into the residual stream with k distinct computations. frozen(1) is the single-loop
  analogue of paper B's linchpin control, which repeat cannot express without an iteration embedding.

A schedule's k counts **core applications** (paper B's k: block calls from the first loop on, bridges included),
not iterations of a loop; the model's own ``depth`` (``TiedLM.forward``) runs every loop that many iterations. The two
agree only for one loop and no bridge (prefix(k) = depth k there); the parameter is named ``applications`` so that the
letters are not confused. A plan is data (block names, with ``REUSE`` for a re-added update), so tests can check the
exact call order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from tiedlm_lib.model.layout import Segment, parse_layout, split_segments

SCHEDULE_NAMES = ("prefix", "repeat", "suffix", "frozen")
REPEAT_ON_DENSE = ("schedule 'repeat' is refused on a dense model: as paper B notes, its linchpin control is "
                   "realisable only with depth-wise weight sharing; in a dense network, repeating a layer creates a "
                   "different model (paper B's negative control ran it anyway; here a dense model gets prefix and "
                   "suffix)")
REUSE = "="  # re-add the last update instead of calling a block


@dataclass(frozen=True)
class Plan:
    prelude: tuple[str, ...]
    core: tuple[str, ...]  # block names in application order; REUSE re-adds the previous update
    coda: tuple[str, ...]
    schedule: str
    applications: int  # paper B's k: the schedule's core applications (distinct ones, for repeat and frozen)
    budget: int  # N: the core's length at full depth (the trained model)

    @property
    def k(self) -> int:
        """Paper B's name for ``applications``."""
        return self.applications

    @property
    def calls(self) -> list[str]:
        """Every block call in order (re-added updates are not calls)."""
        return [n for n in (*self.prelude, *self.core, *self.coda) if n != REUSE]

    @property
    def writes(self) -> int:
        """Writes into the residual stream by the core: calls plus re-added updates."""
        return len(self.core)

    @property
    def distinct(self) -> int:
        """Distinct computations in the core: each call at a distinct step of the full-depth sequence counts once."""
        return len([n for n in self.core if n != REUSE]) - (self.budget - self.applications
                                                             if self.schedule == "repeat" else 0)


def split_layout(layout: str) -> tuple[list[Segment], list[str], list[Segment]]:
    """(prelude segments, core application sequence, coda segments): the model's own partition (``split_segments``),
    with the core expanded into one block name per application."""
    pre, core, coda = split_segments(parse_layout(layout))
    return pre, [s.name for s in core for _ in range(s.iters)], coda


def plan(layout: str, schedule: str, applications: int) -> Plan:
    """The plan of ``schedule`` at k = ``applications`` distinct core applications (1 <= k <= N, the core's length
    in the trained model: ``plan(layout, "prefix", N)`` is the trained model)."""
    if schedule not in SCHEDULE_NAMES:
        raise ValueError(f"schedule must be one of {SCHEDULE_NAMES}, got {schedule!r}")
    pre, core, coda = split_layout(layout)
    N, k = len(core), applications
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= N:
        raise ValueError(f"applications must be an integer in 1..{N} (the core of {layout!r} has {N} "
                         f"applications), got {k!r}")
    if schedule == "prefix":
        seq = core[:k]
    elif schedule == "repeat":
        seq = core[:k] + [core[k - 1]] * (N - k)
    elif schedule == "suffix":
        seq = core[N - k:]
    else:
        seq = core[:k] + [REUSE] * (N - k)
    return Plan(tuple(s.name for s in pre), tuple(seq), tuple(s.name for s in coda), schedule, k, N)


def budget(layout: str) -> int:
    return len(split_layout(layout)[1])


@runtime_checkable
class DepthModel(Protocol):
    """What the schedules, the readout probes (``lens``) and the Depth Control Protocol (``dcp``) ask of a model: an
    ``nn.Module`` (for its device, its parameters and eval mode) with four members. ``TiedLM`` implements them, and
    ``tiedlm_lib.hub.adapter.HFDepthModel`` for a Hugging Face causal LM, dense or looped.

    * ``layout``  the stack as a layout string (``tiedlm_lib.model.layout``): which applications a plan may rearrange;
    * ``core_state(tokens, plan)``  (B, T) token ids -> (B, T, d): the state after the plan's prelude and core, before
      the coda (what a probe at the loop's output reads);
    * ``finish(z)``  (B, T, d) -> (B, T, d): the coda and the final norm, i.e. the head's input;
    * ``head(h)``  (B, T, d) -> (B, T, V) logits.

    So a plan's logits are ``head(finish(core_state(tokens, plan)))`` (``plan_logits``). A model may also offer
    ``iter_prefix(tokens, applications)``, the prefix states of several k from one pass (``prefix_states``); without
    it each k is its own ``core_state`` call."""

    layout: str

    def core_state(self, tokens: torch.Tensor, p: Plan) -> torch.Tensor: ...

    def finish(self, z: torch.Tensor) -> torch.Tensor: ...

    def head(self, h: torch.Tensor) -> torch.Tensor: ...


def check_plan(layout: str, p: Plan) -> None:
    """Refuse a plan made for another layout than ``layout`` (other prelude, coda, budget or block names)."""
    pre, core, coda = split_layout(layout)
    if (p.prelude != tuple(s.name for s in pre) or p.coda != tuple(s.name for s in coda) or p.budget != len(core)
            or not set(p.core) <= {*core, REUSE}):
        raise ValueError(f"plan {p.schedule}({p.applications}) was made for another layout than the model's "
                         f"{layout!r}")


def run_core(model, tokens: torch.Tensor, p: Plan) -> torch.Tensor:
    """``TiedLM.core_state``: the state after plan ``p``'s core (B, T, d), before the coda, the model's own prelude
    first."""
    check_plan(model.config.layout, p)
    z = model.prelude(model.embed(tokens))
    prev = z
    for name in p.core:
        if name == REUSE:
            z, prev = z + (z - prev), z  # z_{i+1} = z_i + (z_k − z_{k−1}), the frozen update
        else:
            z, prev = model.apply(z, name), z
    return z


def run_plan(model: DepthModel, tokens: torch.Tensor, p: Plan) -> torch.Tensor:
    """The head's input (B, T, d) after running plan ``p``: the model's own coda and final norm after the plan's
    core; ``plan_logits`` applies the head."""
    return model.finish(model.core_state(tokens, p))


def plan_logits(model: DepthModel, tokens: torch.Tensor, p: Plan) -> torch.Tensor:
    return model.head(run_plan(model, tokens, p))


def prefix_states(model: DepthModel, tokens: torch.Tensor, applications: Sequence[int]
                  ) -> Iterator[tuple[int, torch.Tensor]]:
    """(k, the state after prefix(k)'s core) for each k in sorted(applications): a layer-wise early exit's ladder
    (``exits``). One pass when the model has ``iter_prefix`` (``TiedLM``, ``HFDepthModel``: the states of a prefix
    are those of the longer prefix, on the way), else one ``core_state`` per k."""
    N = budget(model.layout)
    ks = sorted(set(applications))
    if not ks or any(not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= N for k in ks):
        raise ValueError(f"applications must be integers in 1..{N} (the core of {model.layout!r}), got "
                         f"{list(applications)!r}")
    fast = getattr(model, "iter_prefix", None)
    if fast is not None:
        yield from fast(tokens, ks)
        return
    for k in ks:
        yield k, model.core_state(tokens, plan(model.layout, "prefix", k))
