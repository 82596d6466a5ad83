"""Exact self-speculative decoding on a user's looped model (the ``speculate`` command): tokens/s against plain
greedy decoding, the equality check and the acceptance rate.

A folder written by ``export-hf`` runs the library's cached path (``depth.speculative``: the draft is the first
``d`` iterations of the first loop, the rest of the model's depth applied to the draft's states only where the full
model verifies them; divergences at near-ties recorded, any other raises). A looped Hugging Face model runs without a
KV cache (a shared layer keeps one cache slot, ``hub.adapter``): the draft is prefix(d), the first d core
applications, read out by the model's own coda and head; ``draft_len`` draft tokens are checked by one full forward,
the longest agreeing run kept and the full model's next token added. Both sides recompute the sequence each step, so
the speed-up compares like with like; the output is plain greedy decoding's by construction (checked, per prompt).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import torch

from tiedlm_lib.model.schedules import budget, plan, plan_logits
from tiedlm_lib.model.tied import eval_mode


def read_prompts(path: str | Path, text_field: str = "text") -> list[str]:
    """Prompts from a JSONL file (one object per line with a ``text_field`` string) or a text file (one non-empty
    line each); an empty file is refused by name."""
    from tiedlm_lib.hub.protocol import read_documents

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--prompts {str(path)!r} does not exist: expected a text file, one prompt a line, "
                                "or a JSONL file")
    if path.suffix == ".jsonl":
        return read_documents(path, text_field)
    out = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    if not out:
        raise ValueError(f"--prompts {str(path)!r} holds no prompt: expected one non-empty line per prompt")
    return out


@torch.no_grad()
def _argmax(model, seq: list[int], k: int | None) -> torch.Tensor:
    """Greedy tokens at every position of ``seq`` from prefix(k) (None: the full model), uncached."""
    x = torch.tensor([seq], device=next(model.parameters()).device)
    p = plan(model.layout, "prefix", k or budget(model.layout))
    return plan_logits(model, x, p)[0].argmax(-1).cpu()


def greedy_uncached(model, prompt: Sequence[int], max_new: int) -> list[int]:
    """Plain greedy decoding at full depth, the whole sequence each step."""
    seq = list(prompt)
    for _ in range(max_new):
        seq.append(int(_argmax(model, seq, None)[-1]))
    return seq[len(prompt):]


def speculate_uncached(model, prompt: Sequence[int], max_new: int, draft_depth: int, draft_len: int
                       ) -> tuple[list[int], dict]:
    """Greedy self-speculative decoding without a cache: ``draft_len`` tokens from prefix(``draft_depth``), one full
    forward to verify them; returns the new tokens (plain greedy decoding's) and the counts."""
    seq, drafted_n, accepted, rounds = list(prompt), 0, 0, 0
    while len(seq) - len(prompt) < max_new:
        n, L = len(seq), min(draft_len, max_new - (len(seq) - len(prompt)) - 1)
        draft = []
        for _ in range(L):
            draft.append(int(_argmax(model, seq + draft, draft_depth)[-1]))
        full = _argmax(model, seq + draft, None)[n - 1:]  # the full model's token after each drafted prefix
        m = next((i for i, t in enumerate(draft) if int(full[i]) != t), len(draft))
        seq += draft[:m] + [int(full[m])]
        drafted_n, accepted, rounds = drafted_n + len(draft), accepted + m, rounds + 1
    return seq[len(prompt):][:max_new], {"drafted": drafted_n, "accepted": accepted, "rounds": rounds}


def check_draft_depth(model, d: int) -> None:
    """A looped model and a draft depth inside its first loop (exported) or its core (a Hugging Face model)."""
    if "*" not in model.layout:
        raise ValueError(f"--model has no looped block (layout {model.layout!r}): self-speculative decoding drafts "
                         "with fewer applications of a shared block; a dense model has none (save a looped model "
                         "with save_untied, or pass --retie if its loop's copies are unmarked)")
    hi = (model.hf.model.core_segments[0].iters if hasattr(model.hf, "model") and hasattr(model.hf.model,
                                                                                            "core_segments")
          else budget(model.layout)) - 1
    if not isinstance(d, int) or not 1 <= d <= hi:
        raise ValueError(f"--draft-depth must be an integer in 1..{hi} for layout {model.layout!r}, got {d!r}")


def run(model, prompts: Sequence[Sequence[int]], max_new: int, draft_depth: int, draft_len: int,
        progress: bool = False) -> list[dict]:
    """One row per prompt: tokens, plain and speculative seconds, the speed-up, drafted and accepted tokens, and
    whether the outputs are identical (a divergence that is not a near-tie raises)."""
    from tqdm.auto import tqdm

    check_draft_depth(model, draft_depth)
    if not prompts:
        raise ValueError("no prompts to decode")
    exported = hasattr(model.hf, "model") and hasattr(model.hf.model, "forward_cached")
    rows = []
    if exported:  # the library's cached path on the folder's own TiedLM
        from tiedlm_lib.depth.speculative import benchmark

        per, _ = benchmark(model.hf.model, prompts, max_new, [(draft_depth, draft_len)], n_boot=10,
                           progress=progress)
        for r in per:
            rows.append({"prompt": r["prompt"], "path": "cached (export-hf)", "tokens": r["tokens"],
                         "plain s": r["plain s"], "speculative s": r["speculative s"],
                         "speed-up": r["plain s"] / r["speculative s"], "drafted": r["drafted"],
                         "accepted": r["accepted"], "identical": "near tie at" not in r})
        return rows
    with eval_mode(model):
        for i, p in enumerate(tqdm(prompts, desc="prompts", disable=not progress, leave=False)):
            t = time.perf_counter()
            want = greedy_uncached(model, p, max_new)
            t_plain = time.perf_counter() - t
            t = time.perf_counter()
            got, c = speculate_uncached(model, p, max_new, draft_depth, draft_len)
            t_spec = time.perf_counter() - t
            if got != want:
                raise RuntimeError(f"prompt {i}: speculative output differs from plain greedy decoding")
            rows.append({"prompt": i, "path": "uncached (Hugging Face)", "tokens": len(got), "plain s": t_plain,
                         "speculative s": t_spec, "speed-up": t_plain / t_spec, "drafted": c["drafted"],
                         "accepted": c["accepted"], "identical": True})
    return rows


def summary(rows: Sequence[dict]) -> dict:
    """Tokens/s of both, their ratio, the acceptance rate and how many prompts gave identical outputs."""
    tok = sum(r["tokens"] for r in rows)
    plain, spec = sum(r["plain s"] for r in rows), sum(r["speculative s"] for r in rows)
    return {"prompts": len(rows), "tokens": tok, "plain tokens/s": tok / plain, "speculative tokens/s": tok / spec,
            "speed-up": plain / spec, "acceptance": sum(r["accepted"] for r in rows) / max(1, sum(r["drafted"]
                                                                                                for r in rows)),
            "identical outputs": sum(bool(r["identical"]) for r in rows)}
