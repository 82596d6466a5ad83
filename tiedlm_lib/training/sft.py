"""Supervised fine-tuning as paper A did it ("grid SFT", PROTOCOL §4.6), and as it should be done.

A conversation is rendered into one fixed-length sequence, in one of two layouts:

* ``"grid"`` (the paper's): the prompt left-aligned in positions 0..P−1 (truncated, then right-padded with pad 0),
  the response from position P on (``<|im_start|>`` response ``<|im_end|>``, then pads), P = 3/4 of the length
  (192 of 256). The pads between the prompt and the response are *keys* every response token attends to (the model
  has no key-padding mask), so the response's logits depend on the pad embedding;
* ``"packed"`` (the corrected protocol's): the same prompt and response tokens (each truncated as in the grid), the
  response right after the prompt, pads only at the end. Causality alone then keeps every real token from attending
  to a pad — in training, evaluation, exits, probes and generation alike, with no mask to thread through each of
  them — and the layout is the one a chat model meets at inference (the reply follows the prompt).

The response starts at ``SFTData.starts`` (P in the grid; the prompt's length when packed). Loss protocols:

* ``"paper"``: the CE of logits start..L−2 against targets x[start+1..L−1] — the whole suffix, **pad targets
  included** (the original ignored the response mask it had);
* ``"masked"``: the CE on response tokens only (targets that are real response tokens or its ``<|im_end|>``).

The corrected protocol is ``"masked"`` loss on the ``"packed"`` layout (``registry.sft_run``); the paper's is
``"paper"`` on ``"grid"``. Positions without loss carry the target −100 (ignored). Conversations come from
minimind's JSONL at paper scale, or at smoke/cpu scale from a task derived from the embedded corpus: the assistant
completes a training passage with its last words (half of them, at most ten) and the user turn is the rest — a
continuation task in chat format, so the response has the corpus's own statistics, SFT changes the *format* the
model is trained on as the paper's grid SFT did, and short replies leave pad targets in the suffix as the paper's
grids did.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tiedlm_lib import devices
from tiedlm_lib.data import PAD_ID, SeededStream, load_conversations
from tiedlm_lib.evaluation.nll import token_ce
from tiedlm_lib.evaluation.suffix_benchmark import suffix_start
from tiedlm_lib.model.tied import eval_mode
from tiedlm_lib.stats.bootstrap import NLLStats

IM_START, IM_END = 2, 3
IGNORE = -100
SFT_LOSSES = ("paper", "masked")
SFT_LAYOUTS = ("grid", "packed")


def continuation_pairs(texts: Sequence[str], min_words: int = 6, max_reply_words: int = 10
                       ) -> list[tuple[str, str]]:
    """(user, assistant) pairs from passages: the assistant completes the passage with its last words (half of
    them, at most ``max_reply_words``, so that short replies leave pads in the suffix as the paper's data did); the
    user turn is the rest."""
    pairs = []
    for t in texts:
        w = t.split()
        if len(w) >= min_words:
            h = len(w) - min(len(w) // 2, max_reply_words)
            pairs.append((" ".join(w[:h]), " ".join(w[h:])))
    if not pairs:
        raise ValueError(f"no passage has at least {min_words} words to split into a prompt and a response")
    return pairs


def conversation_pairs(convs) -> list[tuple[str, str]]:
    """(first user turn, first assistant turn after it) from minimind-format conversations."""
    pairs = []
    for turns in convs:
        user = next((t["content"] for t in turns if t["role"] == "user"), None)
        after = turns[[t["role"] for t in turns].index("user") + 1:] if user is not None else []
        reply = next((t["content"] for t in after if t["role"] == "assistant"), None)
        if user is not None and reply is not None:
            pairs.append((user, reply))
    if not pairs:
        raise ValueError("no conversation holds a user turn followed by an assistant turn")
    return pairs


def _parts(user_ids: Sequence[int], reply_ids: Sequence[int], seq_len: int) -> tuple[list[int], list[int]]:
    """The prompt and response tokens both layouts hold: the prompt cut at P, the response at L − P."""
    P = suffix_start(seq_len)
    return ([IM_START] + list(user_ids) + [IM_END])[:P], ([IM_START] + list(reply_ids) + [IM_END])[:seq_len - P]


def response_start(user_ids: Sequence[int], seq_len: int, layout: str = "grid") -> int:
    """The position of the response's ``<|im_start|>`` in a rendered sequence."""
    _check_layout(layout)
    return suffix_start(seq_len) if layout == "grid" else len(_parts(user_ids, [], seq_len)[0])


def render(user_ids: Sequence[int], reply_ids: Sequence[int], seq_len: int, layout: str = "grid") -> torch.Tensor:
    """One (L,) sequence from token ids: the prompt from 0, the response from ``response_start`` (P in the grid,
    right after the prompt when packed), pads elsewhere."""
    prompt, reply = _parts(user_ids, reply_ids, seq_len)
    start = response_start(user_ids, seq_len, layout)
    x = torch.full((seq_len,), PAD_ID, dtype=torch.long)
    x[:len(prompt)] = torch.tensor(prompt)
    x[start:start + len(reply)] = torch.tensor(reply)
    return x


def _check_layout(layout: str) -> None:
    if layout not in SFT_LAYOUTS:
        raise ValueError(f"SFT layout must be one of {SFT_LAYOUTS}, got {layout!r}")


def sft_targets(x: torch.Tensor, loss: str, starts: torch.Tensor | None = None) -> torch.Tensor:
    """Targets (B, L) for rendered sequences x (B, L): x shifted left, −100 wherever the protocol takes no loss.
    ``starts`` (B,): each row's response start (``SFTData.starts``); None: the grid's P for every row."""
    if loss not in SFT_LOSSES:
        raise ValueError(f"SFT loss must be one of {SFT_LOSSES}, got {loss!r}")
    B, L = x.shape
    if starts is None:
        starts = torch.full((B,), suffix_start(L), dtype=torch.long)
    if starts.shape != (B,):
        raise ValueError(f"starts must hold one response start per row, shape ({B},), got {tuple(starts.shape)}")
    y = torch.full_like(x, IGNORE)
    y[:, :-1] = x[:, 1:]
    pos = torch.arange(L)
    keep = (pos[None, :] >= starts[:, None]) & (pos[None, :] < L - 1)  # logits start..L−2 predict x[start+1..L−1]
    if loss == "masked":
        keep &= y != PAD_ID
    return y.masked_fill(~keep, IGNORE)


@dataclass
class SFTData:
    inputs: torch.Tensor  # (n, L) rendered conversations
    starts: torch.Tensor  # (n,) where each response starts
    layout: str = "grid"

    def targets(self, loss: str, idx=slice(None)) -> torch.Tensor:
        """The loss protocol's targets for rows ``idx``."""
        return sft_targets(self.inputs[idx], loss, self.starts[idx])

    def __len__(self) -> int:
        return len(self.inputs)


def build(tok, pairs: Sequence[tuple[str, str]], seq_len: int, layout: str = "grid") -> SFTData:
    _check_layout(layout)
    users = tok.encode_batch([u for u, _ in pairs])
    replies = tok.encode_batch([a for _, a in pairs])
    inputs = torch.stack([render(u.ids, a.ids, seq_len, layout) for u, a in zip(users, replies)])
    starts = torch.tensor([response_start(u.ids, seq_len, layout) for u in users], dtype=torch.long)
    return SFTData(inputs, starts, layout)


def sft_data(run, corpus, split: str = "train", layout: str | None = None) -> SFTData:
    """The run's conversations rendered in its layout (or ``layout``): minimind JSONL (``data.conversations``) or the
    corpus-derived task on the given split of the corpus."""
    if run.data.conversations:
        convs = load_conversations(run.data.conversations)["conversations"]
        pairs = conversation_pairs(convs)
    else:
        pairs = continuation_pairs((corpus.train_text if split == "train" else corpus.val_text)["text"])
    return build(corpus.tokenizer, pairs, run.data.seq_len, layout or run.data.sft_layout)


class SFTStream(SeededStream):
    """Batches of rendered conversations drawn with replacement by a seeded ``random.Random`` (resumable)."""

    def __init__(self, data: SFTData, batch_size: int, seed: int, loss: str):
        if len(data) == 0:
            raise ValueError("cannot draw SFT batches from an empty set of conversations")
        sft_targets(data.inputs[:1], loss)  # validates the protocol name
        self.data, self.batch_size, self.loss = data, batch_size, loss
        self.rng = random.Random(seed)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        idx = [self.rng.randrange(len(self.data)) for _ in range(self.batch_size)]
        return self.data.inputs[idx], self.data.targets(self.loss, idx)


def pad_rate(ids: Sequence[int]) -> float:
    return float(np.mean([t == PAD_ID for t in ids])) if len(ids) else float("nan")


@torch.no_grad()
def response_nll(model, data: SFTData, batch_size: int = 32) -> NLLStats:
    """Per-conversation CE sums over the response targets (the masked protocol's: response tokens and its
    ``<|im_end|>``) of rendered conversations, as ``NLLStats`` (conversation i is document i, so two models scored
    on one ``SFTData`` are paired; ``stats.mean_ci`` gives the interval). Scored in ``data``'s own layout, on the
    model's device."""
    sums, counts = [], []
    with eval_mode(model):
        for i in range(0, len(data), batch_size):
            idx = slice(i, i + batch_size)
            x, y = devices.to_model(data.inputs[idx], model), devices.to_model(data.targets("masked", idx), model)
            m = y != IGNORE
            ce = token_ce(model(x), y.clamp_min(0)) * m
            sums.append(ce.sum(1).cpu().numpy())
            counts.append(m.sum(1).cpu().numpy())
    s, n = np.concatenate(sums).astype(np.float64), np.concatenate(counts)
    return NLLStats(np.arange(len(s)), s, n, s, n)
