"""Tied-depth ("looped") Transformer LMs, built exactly as the original code built them (PROTOCOL §3).

    tokens ─ E[x] + P[t] ─ LN_emb ─ [layout: standard layers S and tied loops A*k, B*k, ...] ─ LN_f ─ head ─ logits

A tied loop applies one block k times, z ← z + α·f(z), with α = clamp(sigmoid(a), 0.01, 0.9). The block function f
comes in two forms (``ModelConfig.block``):

* ``"paper"``    f(z) = LN2(u) + MLP(LN2(u)),  u = z + attn(LN1(z))   — what produced the paper's numbers; it re-adds a
  normalised copy of the state each step, so the state norm grows with k and no fixed point f(z*) = 0 exists;
* ``"residual"`` f(z) = a + MLP(LN2(z + a)),  a = attn(LN1(z))        — a plain pre-norm residual update.

Both have the same parameters, so parameter counts do not depend on the form.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from tiedlm_lib.model.config import ModelConfig
from tiedlm_lib.model.gradients import loop_states as backprop_states
from tiedlm_lib.model.layout import Segment, parse_layout, split_segments


class Attention(nn.Module):
    """Causal multi-head attention with one fused qkv projection (biases on), no key-padding mask.

    Where pads sit only on the right — pre-training documents, the corrected SFT protocol's packed layout — real
    tokens never attend to them; pad positions attend to everything before them (as in the original). The paper's
    grid SFT layout puts pads between the prompt and the response, and the response attends to those
    (``tiedlm_lib.training.sft``; pinned by a test)."""

    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, cache: list | None = None) -> torch.Tensor:
        """``cache`` (generation): a list holding this application's past [k, v]; it is extended in place. With an
        empty cache the positions are processed causally; with a filled one (P positions), the T new positions
        attend to every cached position and causally among themselves."""
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)  # 3 × (B, T, d)
        q, k, v = (t.view(B, T, self.n_heads, d // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, H, T, dh)
        causal, mask = True, None
        if cache is not None:
            if cache:
                P = cache[0].shape[2]
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
                causal = False  # one new query may see every cached position
                if T > 1:  # new position i (absolute P + i) sees keys 0..P + i
                    mask = torch.ones(T, P + T, dtype=torch.bool, device=x.device).tril(P)
            cache[:] = [k, v]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)  # softmax(q·kᵀ/√dh + mask)·v
        return self.out(y.transpose(1, 2).reshape(B, T, d))


class SwiGLU(nn.Module):
    """W_down(SiLU(W_gate·u) ⊙ W_up·u) with hidden width ratio·d (4d in the paper, not 8d/3) and biases."""

    def __init__(self, d: int, ratio: int):
        super().__init__()
        self.gate = nn.Linear(d, ratio * d)
        self.up = nn.Linear(d, ratio * d)
        self.down = nn.Linear(ratio * d, d)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(u)) * self.up(u))


class StdBlock(nn.Module):
    """Pre-norm layer with a raw scalar gate per sublayer (init 0.1, unconstrained, no sigmoid)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        self.ln_a = nn.LayerNorm(d, eps=cfg.ln_eps)
        self.attn = Attention(d, cfg.n_heads)
        self.s_attn = nn.Parameter(torch.tensor(cfg.gate_init))
        self.ln_f = nn.LayerNorm(d, eps=cfg.ln_eps)
        self.mlp = SwiGLU(d, cfg.mlp_ratio)
        self.s_ffn = nn.Parameter(torch.tensor(cfg.gate_init))

    def forward(self, x: torch.Tensor, cache: list | None = None) -> torch.Tensor:
        x = x + self.s_attn * self.attn(self.ln_a(x), cache)
        return x + self.s_ffn * self.mlp(self.ln_f(x))


class TiedBlock(nn.Module):
    """One application of a tied loop: z ← z + α·f(z). The same parameter shapes as StdBlock, with one scalar α
    instead of two gates."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        self.form = cfg.block
        self.ln1 = nn.LayerNorm(d, eps=cfg.ln_eps)
        self.attn = Attention(d, cfg.n_heads)
        self.ln2 = nn.LayerNorm(d, eps=cfg.ln_eps)
        self.mlp = SwiGLU(d, cfg.mlp_ratio)
        # α is parametrised through its logit so that it starts at exactly alpha_init (sigmoid(0.1) would be 0.525).
        self.alpha_logit = nn.Parameter(torch.tensor(math.log(cfg.alpha_init / (1 - cfg.alpha_init))))
        self.alpha_min, self.alpha_max = cfg.alpha_min, cfg.alpha_max

    @property
    def alpha(self) -> torch.Tensor:
        return torch.sigmoid(self.alpha_logit).clamp(self.alpha_min, self.alpha_max)

    def f(self, z: torch.Tensor, cache: list | None = None) -> torch.Tensor:
        a = self.attn(self.ln1(z), cache)
        v = self.ln2(z + a)  # no gate on the attention residual
        if self.form == "paper":
            return v + self.mlp(v)  # the normalised state itself, plus the MLP output
        return a + self.mlp(v)

    def forward(self, z: torch.Tensor, cache: list | None = None) -> torch.Tensor:
        return z + self.alpha * self.f(z, cache)


@dataclass
class LoopTrace:
    """Per-iteration diagnostics of one tied loop, as tensors (no host syncs while the loop runs).

    ``state_norm[i]`` is ‖z_i‖ per position (i = 0 is the loop input); ``rel_residual[i]`` is ‖z_{i+1} − z_i‖ / ‖z_0‖
    per position, the original code's normalisation (by the loop input, not by ‖z_i‖). Shapes (iters+1, B, T) and
    (iters, B, T)."""

    name: str
    state_norm: torch.Tensor
    rel_residual: torch.Tensor

    def paper_residual(self, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The original bookkeeping: max over batch and positions (pads included unless a mask is given)."""
        r = self.rel_residual
        if mask is not None:
            r = r.masked_fill(~mask.bool(), float("-inf"))
        return r.flatten(1).amax(dim=1)


@dataclass
class Trace:
    loops: dict[str, LoopTrace] = field(default_factory=dict)


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Evaluation mode inside the block, the caller's mode restored afterwards, also when the block raises."""
    was = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was)


class StackShape:
    """What a layout makes of the stack (``TiedLM`` holds it): its loops, the depth that runs the trained model, what
    a position costs, where the parameters sit. Reads ``self.config``, ``self.segments`` and ``self.blocks``."""

    @property
    def layout(self) -> str:
        return self.config.layout

    @property
    def loop_names(self) -> list[str]:
        return [s.name for s in self.segments if s.kind == "loop"]

    @property
    def full_depth(self) -> int:
        """The one ``depth`` at which ``model(x, depth=k)`` is the trained model ``model(x)``: the loops' common
        iteration count. ``depth`` counts iterations of *every* loop, so a layout whose loops run unequal counts
        (v14: A*8 B*8 C*7 D*7) has none; asking for it is refused by name. A schedule's k counts core applications
        instead (``schedules.plan``; prefix(N) is the trained model for every layout)."""
        counts = {s.name: s.iters for s in self.segments if s.kind == "loop"}
        if not counts:
            raise ValueError(f"layout {self.config.layout!r} has no tied loop, so it has no depth")
        if len(set(counts.values())) > 1:
            raise ValueError(f"layout {self.config.layout!r} has loops of unequal iteration counts "
                             f"({', '.join(f'{n} {k}' for n, k in counts.items())}): no single depth k runs the "
                             "trained model (depth k runs every loop k times); use model(x) for the trained model, "
                             "or a schedule (tiedlm_lib.model.schedules) whose k counts core applications")
        return next(iter(counts.values()))

    def applications_per_token(self, depth: int | None = None) -> int:
        """Block applications one position costs in ``model(x, depth=depth)``: each standard layer once, each loop
        at ``depth`` iterations (None: its trained count)."""
        if depth is not None:
            self._check_depth(depth)
        return sum(1 if s.kind == "std" else (s.iters if depth is None else depth) for s in self.segments)

    def alphas(self) -> dict[str, float]:
        return {n: float(self.blocks[n].alpha.detach()) for n in self.loop_names}

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def param_breakdown(self) -> dict[str, int]:
        """Where the parameters sit: embeddings, positions, the two outer LayerNorms, head, standard and tied blocks."""
        n = lambda mods: sum(p.numel() for m in mods for p in m.parameters())  # noqa: E731
        std = [self.blocks[s.name] for s in self.segments if s.kind == "std"]
        tied = [self.blocks[s.name] for s in self.segments if s.kind == "loop"]
        return {"embedding": n([self.tok_emb]), "positions": n([self.pos_emb]),
                "outer LayerNorms": n([self.ln_emb, self.ln_f]), "head": n([self.head]),
                "standard blocks": n(std), "tied blocks": n(tied)}

    def _check_depth(self, k: int) -> None:
        if not self.loop_names:
            raise ValueError(f"layout {self.config.layout!r} has no tied loop, so 'depth' does not apply; pass None")
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            raise ValueError(f"depth must be a positive integer (number of loop applications), got {k!r}")


class DepthReads:
    """Reading the stack at other depths than the trained one, from ``TiedLM``'s pieces: every depth of a sweep
    from one pass (``iter_core``, ``iter_depths``), paper B's schedules (the depth-model interface of
    ``tiedlm_lib.model.schedules``: ``core_state``, ``finish``, ``iter_prefix``) and a traced forward (``run``)."""

    def iter_core(self, tokens: torch.Tensor, depths: Sequence[int], backprop: str = "full"
                  ) -> Iterator[tuple[int, torch.Tensor]]:
        """Yield (k, z) for each k in sorted(depths): the core's output (the last loop's state, before the coda)
        with every loop at depth k. With one loop the depths share its iterations; otherwise each depth is its own
        pass after the shared prelude."""
        depths = list(depths)
        if not depths:
            raise ValueError("depths must name at least one depth")
        for k in depths:
            self._check_depth(k)
        h = self.prelude(self.embed(tokens))
        if len(self.core_segments) == 1:  # one loop, no bridge: the depths share the loop's iterations
            yield from self.loop_states(self.core_segments[0].name, h, depths, backprop)
        else:
            for k in sorted(set(depths)):
                yield k, self.core(h, k, backprop)

    def iter_depths(self, tokens: torch.Tensor, depths: Sequence[int], backprop: str = "full"
                    ) -> Iterator[tuple[int, torch.Tensor]]:
        """Yield (k, logits) for each k in sorted(depths) without holding all logits at once."""
        for k, z in self.iter_core(tokens, depths, backprop):
            yield k, self.readout(self.coda(z))

    def core_state(self, tokens: torch.Tensor, p) -> torch.Tensor:
        """The state after schedule plan ``p``'s prelude and core (B, T, d), before the coda."""
        from tiedlm_lib.model.schedules import (  # schedules imports nothing of the model: no cycle at import time
            run_core,
        )

        return run_core(self, tokens, p)

    def finish(self, z: torch.Tensor) -> torch.Tensor:
        """The coda and the final norm: a core state's head input (B, T, d)."""
        return self.head_input(self.coda(z))

    def iter_prefix(self, tokens: torch.Tensor, applications: Sequence[int]) -> Iterator[tuple[int, torch.Tensor]]:
        """(k, the state after prefix(k)'s core) for each k in sorted(applications), from one pass through the core
        (``schedules.prefix_states`` checks the k)."""
        want = set(applications)
        core = [s.name for s in self.core_segments for _ in range(s.iters)]
        z = self.prelude(self.embed(tokens))
        for i, name in enumerate(core[:max(want)]):
            z = self.apply(z, name)
            if i + 1 in want:
                yield i + 1, z

    def run(self, tokens: torch.Tensor, depth: int | None = None, backprop: str = "full"
            ) -> tuple[torch.Tensor, Trace]:
        """Like ``forward``, also returning a Trace of every loop's per-iteration state norms and residuals."""
        if depth is not None:
            self._check_depth(depth)
        states: dict[str, list] = {}
        z = self.core(self.prelude(self.embed(tokens)), depth, backprop, traces=states)
        logits = self.readout(self.coda(z))
        trace = Trace()
        for name, zs in states.items():
            z = torch.stack(zs)  # (iters+1, B, T, d)
            z0n = z[0].norm(dim=-1)
            trace.loops[name] = LoopTrace(
                name, z.norm(dim=-1), (z[1:] - z[:-1]).norm(dim=-1) / z0n.clamp_min(1e-12)
            )
        return logits, trace


class TiedLM(StackShape, DepthReads, nn.Module):
    """A language model whose stack is given by a layout string (see ``tiedlm_lib.model.layout``).

    ``model(tokens)`` runs every loop at its trained depth; ``model(tokens, depth=k)`` runs every loop exactly k
    times; ``model(tokens, depths=[...])`` returns ``{k: logits}``. With one loop, the depths share one pass (the
    bottom runs once, the loop runs to max(depths), the top stack reads out each requested depth); with several
    loops each depth is its own pass after the shared bottom.

    Every path (training, depth sweeps, cached generation, paper B's schedules) walks the stack through the same
    public pieces, so the block order and the readout live in one place:

        embed(tokens, start) ─ prelude ─ core (loops, bridges) ─ coda ─ readout = head(head_input)

    ``core`` ends with the last loop, so its output is the state a probe placed at the loop's output reads, and
    ``head_input(coda(z))`` is the head's input. ``apply`` is one block application with its KV-cache slot
    (block, iteration); ``loop`` runs a loop's iterations start..stop−1, so a caller can stop a loop at depth d and
    later continue the same positions (several at once) from iteration d, each iteration attending to what it wrote
    at earlier positions. A read-out at another depth passes the coda its own cache dict: the coda's slots hold the
    states of one depth. How the gradient flows through a loop (full, checkpointed, phantom, truncated) is the
    ``backprop`` module's business; the model only names the mode. What the layout makes of the stack (loops,
    depth, cost, parameters) is ``StackShape``; reading it at other depths (sweeps, schedules, a trace) is
    ``DepthReads``: both walk these pieces and hold no weights of their own.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        self.segments: list[Segment] = parse_layout(config.layout)
        self.prelude_segments, self.core_segments, self.coda_segments = split_segments(self.segments)
        self.tok_emb = nn.Embedding(config.vocab_size, d)
        self.pos_emb = nn.Embedding(config.max_seq_len + config.extra_pos_rows, d)
        self.ln_emb = nn.LayerNorm(d, eps=config.ln_eps)
        self.blocks = nn.ModuleDict(
            {s.name: (StdBlock(config) if s.kind == "std" else TiedBlock(config)) for s in self.segments}
        )
        self.ln_f = nn.LayerNorm(d, eps=config.ln_eps)
        self.head = nn.Linear(d, config.vocab_size)  # untied from the embedding
        nn.init.normal_(self.tok_emb.weight, std=0.02)
        nn.init.normal_(self.pos_emb.weight, std=0.02)
        nn.init.zeros_(self.head.weight)  # every model starts at exactly uniform predictions (loss = ln V)
        nn.init.zeros_(self.head.bias)

    # ------------------------------------------------------------------ pieces
    def embed(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """E[x] + P[start + t], normalised: (B, T) token ids at positions start.. → (B, T, d)."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (batch, seq_len), got {tuple(tokens.shape)}")
        T, V = tokens.shape[1], self.config.vocab_size
        if start + T > self.config.max_seq_len:
            what = f"sequence length {T}" if start == 0 else f"positions {start}..{start + T - 1}"
            raise ValueError(f"{what} exceeds max_seq_len {self.config.max_seq_len}")
        bad = (tokens < 0) | (tokens >= V)
        if bad.any():  # caught here: on a GPU the embedding lookup would fail as a device-side assert
            raise ValueError(f"token id {int(tokens[bad][0])} is outside the vocabulary [0, {V}) "
                             f"(vocab_size {V}; {int(bad.sum())} such ids in the batch)")
        pos = torch.arange(start, start + T, device=tokens.device)
        return self.ln_emb(self.tok_emb(tokens) + self.pos_emb(pos))

    def apply(self, z: torch.Tensor, name: str, i: int = 0, cache: dict | None = None) -> torch.Tensor:
        """One application of block ``name`` (iteration i of a loop; 0 for a standard layer). A generation cache
        holds one KV slot per application, keyed (name, i): iteration i attends to what iteration i wrote before."""
        return self.blocks[name](z, None if cache is None else cache.setdefault((name, i), []))

    def prelude(self, z: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        """The layers before the first loop."""
        for s in self.prelude_segments:
            z = self.apply(z, s.name, 0, cache)
        return z

    def loop(self, name: str, z: torch.Tensor, stop: int, start: int = 0, cache: dict | None = None) -> torch.Tensor:
        """Iterations start..stop−1 of loop ``name`` from the state z_start (no gradient estimator: plain calls)."""
        for i in range(start, stop):
            z = self.apply(z, name, i, cache)
        return z

    def loop_states(self, name: str, h: torch.Tensor, depths: Sequence[int], backprop: str = "full",
                    trace: list | None = None) -> Iterator[tuple[int, torch.Tensor]]:
        """(k, z_k) of loop ``name`` from input h at each requested depth, with the gradient of ``backprop``
        (see ``tiedlm_lib.model.gradients``); ``trace`` receives every state, detached."""
        return backprop_states(self.blocks[name], h, depths, backprop, trace)

    def core(self, z: torch.Tensor, depth: int | None = None, backprop: str = "full", cache: dict | None = None,
             traces: dict[str, list] | None = None) -> torch.Tensor:
        """The first loop to the last, bridges included, every loop at ``depth`` (None: its trained depth). With a
        ``cache`` the loops are plain cached calls (generation); otherwise each loop's gradient follows
        ``backprop``, and ``traces`` (if given) receives each loop's states."""
        for s in self.core_segments:
            if s.kind == "std":
                z = self.apply(z, s.name, 0, cache)
                continue
            k = s.iters if depth is None else depth
            if cache is not None:
                z = self.loop(s.name, z, k, cache=cache)
                continue
            states: list | None = [] if traces is not None else None
            [(_, z)] = list(self.loop_states(s.name, z, [k], backprop, states))
            if traces is not None:
                traces[s.name] = states
        return z

    def coda(self, z: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        """The layers after the last loop: in a sandwich model, the first part of the readout of a loop state."""
        for s in self.coda_segments:
            z = self.apply(z, s.name, 0, cache)
        return z

    def head_input(self, z: torch.Tensor) -> torch.Tensor:
        return self.ln_f(z)  # (B, T, d): what the head reads

    def readout(self, z: torch.Tensor) -> torch.Tensor:
        return self.head(self.head_input(z))  # (B, T, V)

    # ------------------------------------------------------------------ forward
    def forward(self, tokens: torch.Tensor, depth: int | None = None, depths: Sequence[int] | None = None,
                backprop: str = "full") -> torch.Tensor | dict[int, torch.Tensor]:
        if depths is not None:
            if depth is not None:
                raise ValueError("pass either depth or depths, not both")
            return dict(self.iter_depths(tokens, depths, backprop))
        if depth is not None:
            self._check_depth(depth)
        return self.readout(self.coda(self.core(self.prelude(self.embed(tokens)), depth, backprop)))

    @torch.no_grad()
    def forward_cached(self, tokens: torch.Tensor, cache: dict, start: int, depth: int | None = None) -> torch.Tensor:
        """Logits of ``tokens`` placed at positions start.. , reusing and extending ``cache`` (generation): one KV
        slot per block application, keyed (block, iteration). ``start`` must equal the number of cached positions
        (a wrong one would place the tokens at other positions than the keys they attend to)."""
        lengths = {kv[0].shape[2] for kv in cache.values() if kv}
        if len(lengths) > 1:
            raise ValueError(f"the cache's slots hold different numbers of positions ({sorted(lengths)}): it was "
                             "extended by more than one forward_cached sequence or edited")
        cached = lengths.pop() if lengths else 0
        if start != cached:
            raise ValueError(f"start must equal the number of positions already in the cache ({cached}), got {start}")
        if depth is not None:
            self._check_depth(depth)
        z = self.prelude(self.embed(tokens, start), cache)
        return self.readout(self.coda(self.core(z, depth, cache=cache), cache))
