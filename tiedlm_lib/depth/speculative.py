"""Exact self-speculative decoding for looped models: draft at a shallow depth, verify at full depth, and reuse every
block application the two share.

A looped model truncated to d iterations per loop is a draft model that costs nothing to keep: it *is* the full model
for everything up to the first loop's d-th iteration. So with one KV cache per block application (``TiedLM.apply``):

    prelude ─ first loop, iterations 0..d−1 ─┬─ [draft]  rest of the core at depth d ─ coda ─ head   (draft caches)
       (shared: computed once, by the draft)  └─ [full]   first loop d..K−1 ─ rest of the core ─ coda ─ head

The draft proposes ``draft_len`` tokens one at a time; the full model then verifies the whole block in one parallel
pass that *continues from iteration d* on the states the draft left (the layers before the loop and the first d
iterations are never recomputed). In a layout with several loops the shared part is the longest common prefix of the
two application sequences — the prelude and the first loop's first d iterations; later loops start from a different
state and run in full, and the layers after the last loop read z_d in the draft and z_K in the full model, so their
caches are never shared. The longest agreeing prefix is accepted plus the full model's next token, and every cache is
rolled back to the accepted length.

Greedy mode returns exactly the tokens of plain greedy decoding at full depth. Sampling mode uses the speculative
rejection rule (accept a drafted token t with probability min(1, p(t)/q(t)), else draw from max(0, p − q)), so its
output distribution equals the full model's sampling distribution (the same temperature, top-k, top-p and repetition
penalty applied to both p and q, see ``tiedlm_lib.depth.generate``).

``z, info = deq(f, z0)`` style: ``tokens, info = generate(...)``; ``info`` counts rounds, drafted and accepted tokens,
block *calls* (sequential steps, each over any number of positions) and block *applications* (one block on one
position), each against what plain cached decoding at full depth does. Speculation never computes fewer applications
than plain decoding — the draft's own layers and rejected positions are extra work; reusing the shared prefix only
keeps verification from doing the draft's work twice. What it saves is sequential calls: at batch size 1 a block call
over L + 1 positions costs about what a call over one position costs, so the time per token follows the calls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from tiedlm_lib import devices
from tiedlm_lib.depth.generate import GenerationInfo, SamplingConfig, check_request, distribution
from tiedlm_lib.model.tied import eval_mode
from tiedlm_lib.stats.bootstrap import percentile


@dataclass
class SpeculativeInfo(GenerationInfo):
    """What one call did (``GenerationInfo``'s counts) plus draft/verify rounds and tokens drafted and accepted;
    plain cached decoding at full depth computes ``plain_applications`` in ``plain_calls`` for the same tokens."""

    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    plain_applications: int = 0
    plain_calls: int = 0

    @property
    def acceptance(self) -> float:
        """Share of drafted tokens the full model accepted."""
        return self.accepted / self.drafted if self.drafted else float("nan")

    @property
    def tokens_per_round(self) -> float:
        return self.new_tokens / self.rounds if self.rounds else float("nan")


def _truncate(cache: dict, n: int) -> None:
    """Roll every KV slot of ``cache`` back to its first n positions."""
    for slot in cache.values():
        if slot:
            slot[:] = [slot[0][:, :, :n], slot[1][:, :, :n]]


class _Stack:
    """The model split at the draft depth: the shared part, the full model's rest and the draft's rest, each one
    call, each counting the block applications it computes."""

    def __init__(self, model, d: int, probe=None):
        core = model.core_segments
        if not model.loop_names:
            raise ValueError(f"layout {model.config.layout!r} has no tied loop: there is no shallow draft to take")
        first = core[0]
        if not isinstance(d, int) or isinstance(d, bool) or not 1 <= d < first.iters:
            raise ValueError(f"draft_depth must be an integer in 1..{first.iters - 1} (the first loop, "
                             f"{first.name}, runs {first.iters} iterations), got {d!r}")
        if probe is not None and getattr(probe, "spec", None) is None:
            raise ValueError("probe must be a lens.FittedProbe (fitted for the draft depth), got "
                             f"{type(probe).__name__}")
        self.model, self.d, self.first, self.rest, self.probe = model, d, first, core[1:], probe
        self.dev = devices.model_device(model)  # tokens go to the model, logits come back to be sampled
        self.applications = 0
        self.calls = 0
        self.n_prelude, self.n_coda = len(model.prelude_segments), len(model.coda_segments)
        self.per_token_full = model.applications_per_token()

    def shared(self, tokens: torch.Tensor, start: int, cache: dict) -> torch.Tensor:
        """Embedding, prelude and the first loop's iterations 0..d−1: identical in the draft and the full model."""
        m = self.model
        z = m.loop(self.first.name, m.prelude(m.embed(tokens, start), cache), self.d, 0, cache)
        self._count(tokens.shape[1], self.n_prelude + self.d)
        return z

    def _count(self, positions: int, calls: int) -> None:
        self.calls += calls
        self.applications += positions * calls

    def _rest(self, z: torch.Tensor, depth: int | None, cache: dict) -> torch.Tensor:
        m = self.model
        for s in self.rest:
            k = 1 if s.kind == "std" else (s.iters if depth is None else depth)
            z = m.apply(z, s.name, 0, cache) if s.kind == "std" else m.loop(s.name, z, k, 0, cache)
            self._count(z.shape[1], k)
        return z

    def full(self, z_d: torch.Tensor, cache: dict) -> torch.Tensor:
        """Logits of the full model from the shared states z_d: the first loop from iteration d on, the rest of the
        core at its trained depths, the coda."""
        m = self.model
        z = m.loop(self.first.name, z_d, self.first.iters, self.d, cache)
        self._count(z_d.shape[1], self.first.iters - self.d)
        z = m.coda(self._rest(z, None, cache), cache)
        self._count(z_d.shape[1], self.n_coda)
        return m.readout(z)

    def draft(self, z_d: torch.Tensor, cache: dict) -> torch.Tensor:
        """Logits of the draft from the shared states z_d: the rest of the core at depth d, the coda, the head (and
        the probe, if one was given, where it was fitted)."""
        m, p = self.model, self.probe
        z = self._rest(z_d, self.d, cache)
        if p is not None and p.spec.placement == "loop":
            z = p.probe(z)
        x = m.head_input(m.coda(z, cache))
        self._count(z_d.shape[1], self.n_coda)
        if p is not None and p.spec.placement == "head":
            x = p.probe(x)
        logits = m.head(x)
        return logits / p.temperature if p is not None and p.spec.form == "temperature" else logits


def _check(model, prompt: Sequence[int], sampling: SamplingConfig | None, max_new: int | None, draft_len: int
           ) -> tuple[list[int], int]:
    prompt, max_new = check_request(model, prompt, sampling, max_new)
    if not isinstance(draft_len, int) or isinstance(draft_len, bool) or draft_len < 1:
        raise ValueError(f"draft_len must be a positive integer, got {draft_len!r}")
    return prompt, max_new


@dataclass
class _Decoder:
    """One generation's state: the two cache dicts, the draft's lag, and the tokens so far."""

    stack: _Stack
    sampling: SamplingConfig | None
    g: torch.Generator
    window: list[int]
    full_cache: dict = field(default_factory=dict)  # shared part + the full model's rest, one slot per application
    draft_cache: dict = field(default_factory=dict)  # the draft's rest
    lag: list = field(default_factory=list)  # z_d of the positions after those the draft's rest has seen, in order

    def draft(self, seq: list[int], new: list[int], L: int) -> tuple[list[int], list[torch.Tensor], list]:
        """L tokens from the draft after ``seq``, their draft distributions (sampling) and the shared states z_d of
        the L + 1 positions the full model will verify (the pending token's and each drafted token's)."""
        drafted: list[int] = []
        qs: list[torch.Tensor] = []
        states: list[torch.Tensor] = []
        tok, pos = seq[-1], len(seq) - 1
        for _ in range(L):
            z_d = self.stack.shared(torch.tensor([[tok]], device=self.stack.dev), pos, self.full_cache)
            states.append(z_d)
            logits = self.stack.draft(torch.cat([*self.lag, z_d], 1), self.draft_cache)[0, -1].cpu()
            self.lag = []
            if self.sampling is None:
                t = int(logits.argmax())
            else:
                q = distribution(logits, self.window + new + drafted, self.sampling)
                t = int(torch.multinomial(q, 1, generator=self.g))
                qs.append(q)
            drafted.append(t)
            tok, pos = t, pos + 1
        states.append(self.stack.shared(torch.tensor([[tok]], device=self.stack.dev), pos, self.full_cache))
        if not drafted:  # nothing drafted: this position's draft state still lags behind
            self.lag.append(states[-1])
        return drafted, qs, states

    def rollback(self, n: int, drafted: list[int], m: int, last_state: torch.Tensor) -> None:
        """Keep positions 0..n+m-1 (accepted) in every cache; n+m is the next pending position."""
        _truncate(self.full_cache, n + m)
        if drafted and m == len(drafted):  # the last drafted token's shared state is valid; the draft never saw it
            self.lag = [last_state]
        elif drafted:  # the draft saw positions up to n+L-2; keep what was accepted
            _truncate(self.draft_cache, n + m)
            self.lag = []


@torch.no_grad()
def generate(model, prompt: Sequence[int], sampling: SamplingConfig | None = None, *, max_new: int | None = None,
             seed: int = 42, stop: Sequence[int] = (), draft_depth: int, draft_len: int, probe=None
             ) -> tuple[list[int], SpeculativeInfo]:
    """Up to ``max_new`` new tokens after ``prompt`` (None: ``sampling.max_new``), drafted ``draft_len`` at a time at
    ``draft_depth`` and verified at full depth (see the module docstring); the signature and return type of
    ``tiedlm_lib.depth.generate.generate``. ``sampling=None``: greedy, exactly plain greedy decoding's tokens; otherwise
    the speculative rejection rule, the full model's sampling distribution. ``probe``: a ``lens.FittedProbe``
    fitted for the draft depth, applied to the draft's readout only. Stops early after a ``stop`` id (included)."""
    prompt, max_new = _check(model, prompt, sampling, max_new, draft_len)
    stack = _Stack(model, draft_depth, probe)
    window = prompt[-sampling.penalty_window:] if sampling is not None and sampling.penalty_window else []
    dec = _Decoder(stack, sampling, torch.Generator().manual_seed(seed), window)
    info = SpeculativeInfo()
    with eval_mode(model):
        if len(prompt) > 1:  # prefill: every prompt token but the last, through both paths
            z_d = stack.shared(torch.tensor([prompt[:-1]], device=stack.dev), 0, dec.full_cache)
            stack.full(z_d, dec.full_cache)
            stack.draft(z_d, dec.draft_cache)
        seq, new = list(prompt), []
        while len(new) < max_new:
            n = len(seq)
            drafted, qs, states = dec.draft(seq, new, min(draft_len, max_new - len(new) - 1))
            p_logits = stack.full(torch.cat(states, 1), dec.full_cache)[0].cpu()  # (L + 1, V): positions n-1..n+L-1
            m, bonus = _accept(p_logits, drafted, qs, window + new, sampling, dec.g)
            out = drafted[:m] + [bonus]
            cut = next((i + 1 for i, t in enumerate(out) if t in stop), None)
            info.rounds, info.drafted = info.rounds + 1, info.drafted + len(drafted)
            info.accepted += m if cut is None else min(m, cut)  # tokens after a stop are not output
            seq += out[:cut]
            new += out[:cut]
            if cut is not None:
                info.stopped = True
                break
            dec.rollback(n, drafted, m, states[-1])
    info.new_tokens = len(new)
    info.applications, info.calls = stack.applications, stack.calls
    info.plain_applications = (len(prompt) + len(new) - 1) * stack.per_token_full
    info.plain_calls = len(new) * stack.per_token_full  # the prompt in one pass, then one pass per token
    return new, info


def _accept(p_logits: torch.Tensor, drafted: list[int], qs: list[torch.Tensor], history: list[int],
            sampling: SamplingConfig | None, g: torch.Generator) -> tuple[int, int]:
    """How many drafted tokens the full model accepts, and the token it adds after them."""
    if sampling is None:
        full = p_logits.argmax(-1).tolist()
        m = next((i for i, t in enumerate(drafted) if full[i] != t), len(drafted))
        return m, int(full[m])
    for i, t in enumerate(drafted):
        p = distribution(p_logits[i], history + drafted[:i], sampling)
        q = qs[i]
        if float(torch.rand((), generator=g)) * float(q[t]) < float(p[t]):  # accept with prob min(1, p(t)/q(t))
            continue
        residual = (p - q).clamp_min(0)
        total = float(residual.sum())
        r = residual / total if total > 0 else p
        return i, int(torch.multinomial(r, 1, generator=g))
    p = distribution(p_logits[len(drafted)], history + drafted, sampling)
    return len(drafted), int(torch.multinomial(p, 1, generator=g))


# ---------------------------------------------------------------------------------------------------- benchmark
@torch.no_grad()
def plain_greedy(model, prompt: Sequence[int], max_new: int) -> list[int]:
    """The baseline: cached decoding at full depth with an argmax per token (the same per-token work as the
    speculative path's greedy choice, without ``generate.generate``'s bookkeeping; ``generate.generate(model, prompt,
    None, max_new=...)`` gives the same tokens)."""
    prompt, max_new = _check(model, prompt, None, max_new, 1)
    cache: dict = {}
    dev = devices.model_device(model)
    with eval_mode(model):
        logits = model.forward_cached(torch.tensor([prompt], device=dev), cache, 0)[0, -1]
        out = [int(logits.argmax())]
        for _ in range(max_new - 1):
            logits = model.forward_cached(torch.tensor([[out[-1]]], device=dev), cache, len(prompt) + len(out) - 1
                                          )[0, -1]
            out.append(int(logits.argmax()))
    return out


NEAR_TIE = 1e-3
"""A divergence between speculative and plain greedy decoding is a *near-tie* when the full model's two largest
logits at the first differing position (given the common prefix) lie within NEAR_TIE of each other: the two paths
compute the same function in a different order (a cached verify pass of several positions against one position at a
time), which moves a float32 logit by about 5e-6 on a CPU and far more under bf16 or TF32 on a GPU, and that flips an
argmax only where two tokens are that close. Exactness is the claim; a near-tie is recorded, a wider gap raises."""


@torch.no_grad()
def divergence(model, prompt: Sequence[int], want: Sequence[int], got: Sequence[int]) -> dict:
    """Where two greedy continuations of ``prompt`` first differ and the full model's top-2 logit margin there,
    from one uncached full-depth forward over the common prefix."""
    j = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    with eval_mode(model):
        logits = model(torch.tensor([list(prompt) + list(want[:j])], device=devices.model_device(model)))[0, -1]
    top = logits.float().topk(2).values
    return {"position": j, "top-2 margin": float(top[0] - top[1])}


def benchmark(model, prompts: Sequence[Sequence[int]], max_new: int, configs: Sequence[tuple[int, int]],
              repeats: int = 1, probe=None, n_boot: int = 2000, seed: int = 0, progress: bool = False,
              near_tie: float = NEAR_TIE) -> tuple[list[dict], list[dict]]:
    """Greedy tokens/s of self-speculative decoding against plain cached decoding at full depth, at batch size 1.

    For each prompt and each (draft_depth, draft_len) of ``configs``, plain decoding and speculative decoding run
    ``repeats`` times *alternately* (plain, speculative, plain, ...; the fastest of each kept, after one warm-up
    call), so that a burst of load from elsewhere on a shared machine lands on both sides of the ratio rather than on
    a baseline that every configuration of the prompt reuses; their outputs must be identical, except at a near-tie
    (``NEAR_TIE``; ``near_tie`` sets it), which is recorded in the prompt's row (its position and the top-2 margin) and
    counted in the summary ("near ties"); any other difference raises a RuntimeError with the margin.
    Returns per-prompt rows and one summary row per configuration: tokens/s of both, the speed-up as the geometric
    mean of the per-prompt time ratios with a bootstrap CI over prompts (paired: the same prompt under both),
    acceptance and tokens per round. Timing is the caller's measurement: run nothing else meanwhile."""
    import time

    from tqdm.auto import tqdm

    if not prompts:
        raise ValueError("benchmark needs at least one prompt")

    def alternate(plain, spec):
        """The fastest of ``repeats`` calls of each, the two interleaved, and each one's last output."""
        best, out = [math.inf, math.inf], [None, None]
        for _ in range(repeats):
            for j, fn in enumerate((plain, spec)):
                t = time.perf_counter()
                out[j] = fn()
                best[j] = min(best[j], time.perf_counter() - t)
        return best, out

    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    plain_greedy(model, prompts[0], max_new)  # warm-up
    rows = []
    for i, prompt in enumerate(tqdm(prompts, desc="prompts", disable=not progress, leave=False)):
        for d, L in configs:
            (t_plain, t_spec), (want, (got, info)) = alternate(
                lambda p=prompt: plain_greedy(model, p, max_new),
                lambda p=prompt, d=d, L=L: generate(model, p, max_new=max_new, draft_depth=d, draft_len=L,
                                                      probe=probe))
            tie = {}
            if got != want:
                div = divergence(model, prompt, want, got)
                if div["top-2 margin"] > near_tie:
                    raise RuntimeError(f"prompt {i}, draft depth {d}, draft length {L}: speculative output differs "
                                       f"from plain greedy decoding at new token {div['position']}, where the full "
                                       f"model's top-2 logit margin is {div['top-2 margin']:.3g} (> the near-tie "
                                       f"tolerance {near_tie:g}): a real mismatch")
                tie = {"near tie at": div["position"], "top-2 margin": div["top-2 margin"]}
            rows.append({"prompt": i, "draft depth": d, "draft length": L, "tokens": len(got),
                         "plain s": t_plain, "speculative s": t_spec, "drafted": info.drafted,
                         "accepted": info.accepted, "rounds": info.rounds, "calls": info.calls,
                         "plain calls": info.plain_calls, **tie})
    return rows, _summarise(rows, configs, n_boot, seed)


def _summarise(rows: list[dict], configs: Sequence[tuple[int, int]], n_boot: int, seed: int) -> list[dict]:
    """One summary row per configuration from ``benchmark``'s per-prompt rows (see there)."""
    summary = []
    g = np.random.default_rng(seed)
    for d, L in configs:
        sub = [r for r in rows if (r["draft depth"], r["draft length"]) == (d, L)]
        log_ratio = np.log([r["plain s"] / r["speculative s"] for r in sub])
        boot = log_ratio[g.integers(0, len(sub), (n_boot, len(sub)))].mean(1)
        tok = sum(r["tokens"] for r in sub)
        summary.append({"draft depth": d, "draft length": L, "prompts": len(sub),
                        "plain tokens/s": tok / sum(r["plain s"] for r in sub),
                        "speculative tokens/s": tok / sum(r["speculative s"] for r in sub),
                        "speed-up": float(np.exp(log_ratio.mean())),
                        "speed-up lo": float(np.exp(percentile(log_ratio.mean(), boot).lo)),
                        "speed-up hi": float(np.exp(percentile(log_ratio.mean(), boot).hi)),
                        "acceptance": sum(r["accepted"] for r in sub) / max(1, sum(r["drafted"] for r in sub)),
                        "tokens per round": tok / sum(r["rounds"] for r in sub),
                        "calls / plain calls": sum(r["calls"] for r in sub) / sum(r["plain calls"] for r in sub),
                        "identical outputs": not any("near tie at" in r for r in sub)})
        ties = sum("near tie at" in r for r in sub)
        if ties:  # the column appears only where one happened: a run without any keeps its table as it was
            summary[-1]["near ties"] = ties
    return summary


README_BEGIN = ("<!-- speculative: generated from benchmarks/results/speculative_cpu.csv by benchmarks/speculative.py "
                "--readme docs/library.md -->")
README_END = "<!-- speculative: end -->"
README_MODEL = "multi-depth (v4)"  # the model the goal is stated for, as the benchmark script labels it
SPEED_GOAL = 1.5  # the goal tokens/s ratio over plain cached decoding, on the multi-depth model (issue 18)


def _direction(lo: float, hi: float, level: float, above: str, below: str, between: str) -> str:
    return above if lo >= level else below if hi < level else between


def call_bound_phrase(lo: float, hi: float, calls_ratio: float) -> str:
    """How a measured speed-up (its CI ``lo``..``hi``) compares with ``1 / calls_ratio``, the speed-up it would be if
    sequential block calls were all that cost: the direction comes from the measurement, never assumed."""
    if calls_ratio <= 0:
        raise ValueError(f"calls_ratio must be positive (speculative calls / plain calls), got {calls_ratio}")
    return _direction(lo, hi, 1 / calls_ratio, "exceeds it",
                      "falls short of it, so a call over L + 1 positions costs more than a call over one",
                      "is consistent with it")


def _noise_sentence(rows: Sequence[dict]) -> str:
    """Plain decoding is the same computation under every configuration: its spread across them is the timing noise
    of the machine, which the CIs over prompts do not include (and which a best-of-configurations pick rides on)."""
    plain = [r["plain tokens/s"] for r in rows]
    if len(plain) < 2:
        return ""
    lo, hi = min(plain), max(plain)
    return (f" Plain decoding, the same computation under every configuration, measured {lo:.0f}–{hi:.0f} tok/s "
            f"across {rows[0]['model']}'s configurations: timing noise of up to {hi / lo - 1:.0%} between "
            "measurements, which the CIs over prompts do not include and which the pick of a best configuration rides "
            "on.")


def readme_markdown(summary: Sequence[dict], goal_model: str, goal: float = SPEED_GOAL) -> str:
    """The speculative-decoding block of docs/library.md from ``benchmark`` summary rows that carry a ``model``
    column: the best configuration per model (highest speed-up) as a table, then sentences whose every number and
    direction word comes from those rows — whether ``goal_model`` reaches ``goal`` (its CI's lower end at or above
    it: "reached"; the upper end below: "not reached"; else "not settled"), and how the speed-up compares with the
    bound the block calls alone would give."""
    if not summary:
        raise ValueError("readme_markdown needs benchmark summary rows, got none")
    best: dict[str, dict] = {}
    for r in summary:
        if "model" not in r:
            raise ValueError(f"summary rows need a 'model' column (the benchmark script adds it), got {sorted(r)}")
        if r["model"] not in best or r["speed-up"] > best[r["model"]]["speed-up"]:
            best[r["model"]] = r
    if goal_model not in best:
        raise ValueError(f"goal model {goal_model!r} is not among the benchmarked models {sorted(best)}")
    lines = ["| model | draft depth | draft length | plain tok/s | speculative tok/s | speed-up [95% CI over prompts] "
             "| acceptance | block calls / plain |", "|---|---|---|---|---|---|---|---|"]
    for m, r in best.items():
        lines.append(f"| {m} | {r['draft depth']} | {r['draft length']} | {r['plain tokens/s']:.0f} | "
                     f"{r['speculative tokens/s']:.0f} | {r['speed-up']:.2f}× [{r['speed-up lo']:.2f}, "
                     f"{r['speed-up hi']:.2f}] | {r['acceptance']:.2f} | {r['calls / plain calls']:.2f} |")
    g = best[goal_model]
    verdict = _direction(g["speed-up lo"], g["speed-up hi"], goal, "reached", "not reached", "not settled")
    bound = 1 / g["calls / plain calls"]
    short = call_bound_phrase(g["speed-up lo"], g["speed-up hi"], g["calls / plain calls"])
    others = "; ".join(
        f"{m}: {_direction(r['speed-up lo'], r['speed-up hi'], 1.0, 'faster', 'slower', 'no clear change')} at its "
        f"best ({r['speed-up']:.2f}×, acceptance {r['acceptance']:.2f})" for m, r in best.items() if m != goal_model)
    text = (f"The {goal:g}× goal is **{verdict}** in this measurement of {goal_model}: its best configuration "
            f"(d = {g['draft depth']}, "
            f"L = {g['draft length']}) runs at {g['speed-up']:.2f}× [{g['speed-up lo']:.2f}, {g['speed-up hi']:.2f}] "
            f"plain decoding's tokens/s, accepting {g['acceptance']:.2f} of drafted tokens, with "
            f"{g['calls / plain calls']:.2f}× plain decoding's sequential block calls per token: {bound:.2f}× would "
            f"be the speed-up if calls were all that cost, and the measured one {short}."
            + (f" The other models — {others}." if others else "")
            + _noise_sentence([r for r in summary if r["model"] == goal_model]))
    return "\n".join(lines) + "\n\n" + text
