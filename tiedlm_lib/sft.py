"""Supervised fine-tuning as paper A did it ("grid SFT", PROTOCOL §4.6), and as it should be done.

A conversation is rendered into one fixed-length sequence: the prompt left-aligned in positions 0..P−1 (truncated,
then right-padded with pad 0), the response from position P on (``<|im_start|>`` response ``<|im_end|>``, then
pads), P = 3/4 of the length (192 of 256). Loss protocols:

* ``"paper"``: the CE of logits P..L−2 against targets x[P+1..L−1] — the whole suffix, **pad targets included**
  (the original ignored the response mask it had);
* ``"masked"``: the CE on response tokens only (targets that are real response tokens or its ``<|im_end|>``).

Positions without loss carry the target −100 (ignored). Conversations come from minimind's JSONL at paper scale, or
at smoke/cpu scale from a task derived from the embedded corpus: the assistant completes a training passage with its
last words (half of them, at most ten) and the user turn is the rest — a continuation task in chat format, so the
response has the corpus's own statistics, SFT changes the *format* the model is trained on as the paper's grid SFT
did, and short replies leave pad targets in the suffix as the paper's grids did.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .benchmark import suffix_start
from .data import PAD_ID, SeededStream, load_conversations

IM_START, IM_END = 2, 3
IGNORE = -100
SFT_LOSSES = ("paper", "masked")


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


def render(user_ids: Sequence[int], reply_ids: Sequence[int], seq_len: int) -> torch.Tensor:
    """One (L,) sequence from token ids: prompt in 0..P−1, response from P."""
    P = suffix_start(seq_len)
    prompt = ([IM_START] + list(user_ids) + [IM_END])[:P]
    reply = ([IM_START] + list(reply_ids) + [IM_END])[:seq_len - P]
    x = torch.full((seq_len,), PAD_ID, dtype=torch.long)
    x[:len(prompt)] = torch.tensor(prompt)
    x[P:P + len(reply)] = torch.tensor(reply)
    return x


def sft_targets(x: torch.Tensor, loss: str) -> torch.Tensor:
    """Targets (B, L) for rendered sequences x (B, L): x shifted left, −100 wherever the protocol takes no loss."""
    if loss not in SFT_LOSSES:
        raise ValueError(f"SFT loss must be one of {SFT_LOSSES}, got {loss!r}")
    L = x.shape[1]
    P = suffix_start(L)
    y = torch.full_like(x, IGNORE)
    y[:, :-1] = x[:, 1:]
    keep = torch.zeros_like(x, dtype=torch.bool)
    keep[:, P:L - 1] = True  # logits P..L−2 predict x[P+1..L−1]
    if loss == "masked":
        keep &= y != PAD_ID
    return y.masked_fill(~keep, IGNORE)


@dataclass
class SFTData:
    inputs: torch.Tensor  # (n, L) rendered conversations

    def __len__(self) -> int:
        return len(self.inputs)


def build(tok, pairs: Sequence[tuple[str, str]], seq_len: int) -> SFTData:
    users = tok.encode_batch([u for u, _ in pairs])
    replies = tok.encode_batch([a for _, a in pairs])
    return SFTData(torch.stack([render(u.ids, a.ids, seq_len) for u, a in zip(users, replies)]))


def sft_data(run, corpus, split: str = "train") -> SFTData:
    """The run's conversations rendered: minimind JSONL (``data.conversations``) or the corpus-derived task on the
    given split of the corpus."""
    if run.data.conversations:
        convs = load_conversations(run.data.conversations)["conversations"]
        pairs = conversation_pairs(convs)
    else:
        pairs = continuation_pairs((corpus.train_text if split == "train" else corpus.val_text)["text"])
    return build(corpus.tokenizer, pairs, run.data.seq_len)


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
        x = self.data.inputs[idx]
        return x, sft_targets(x, self.loss)


def pad_rate(ids: Sequence[int]) -> float:
    return float(np.mean([t == PAD_ID for t in ids])) if len(ids) else float("nan")
