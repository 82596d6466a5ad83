"""The Depth Control Protocol on the user's own model: a local Hugging Face checkpoint (dense or looped) and a JSONL
of documents in, paper B's condition table, decomposition and calibration shares out (``python -m tiedlm_lib dcp``).

    python -m tiedlm_lib dcp --model ./my-llama --data docs.jsonl --out dcp-my-llama
    python -m tiedlm_lib dcp --model ./ckpt-seed0,./ckpt-seed1,./ckpt-seed2 --data docs.jsonl   # pooled over seeds

What runs, per checkpoint: the documents are tokenised by the checkpoint's own tokenizer (truncated to
``seq_len``), split into calibration and evaluation documents (disjoint, ``dcp.split_documents``), and every
(schedule, k) is evaluated with each readout probe fitted on the calibration documents (``dcp.evaluate_schedules``).
A dense model gets paper B's negative-control grid, k = round(f·L) for f in 0.25, 0.5, 0.75, 0.86, 0.93, 1, with
prefix and suffix (paper B also ran repeat there; it is refused here, for the reason paper B itself gives:
``hf.HFDepthModel``); a looped model gets prefix, repeat, suffix and frozen at k = 1, 2, 4, ... N. A looped model
is found from its weights: ``save_pretrained`` cannot write layers that share one module, so a looped checkpoint
(written by ``hf.save_untied``, or any stack whose loop is stored once per position) loads as consecutive layers
with exactly equal weights, which ``hf.tie_repeated_layers`` makes one shared module again (``retie=False``, the
command's ``--no-retie``, keeps them separate: the model as a dense stack). Tables:

* ``conditions``: raw and recalibrated NLL per schedule and k, with ECE and the forward's seconds per token;
* ``shares``: for each probe and each k < N, the share of the gap prefix(k) − prefix(N) that the probe removes,
  with its paired document-bootstrap interval (the probes held fixed: evaluation resampling only, as in
  ``dcp.decompose``);
* ``decomposition`` (looped models): paper B's terms at k_min, k_mid = N/2, k_max = N (``dcp.decompose``; the
  control is repeat, or frozen for a single tied loop, where repeat(k) is the trained model; the probe is
  head/diagonal when fitted);
* ``pooled_shares`` (several checkpoints): each share pooled over checkpoints by the project's seed-level rule
  (``inference.pool``: a random-effects mean whose interval carries both the spread between checkpoints and the
  shared document error), the checkpoint being the unit. That interval is about "the model" only when the
  checkpoints are independent trainings (seeds); checkpoints along one run are not independent, and their pooled
  interval describes those checkpoints.

Written as CSV and Markdown, with one svg figure (NLL against k per schedule, raw and recalibrated), under
``out``. Calibration and evaluation documents are the same for every checkpoint (one seeded split), so checkpoints
are compared on identical tokens.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tiedlm_lib.data import TokenDocs, _jsonl_objects, eval_batches
from tiedlm_lib.depth import dcp
from tiedlm_lib.depth.readout import share_interval
from tiedlm_lib.hub.export import is_export
from tiedlm_lib.model.schedules import REPEAT_ON_DENSE, SCHEDULE_NAMES, budget
from tiedlm_lib.stats import inference
from tiedlm_lib.stats.bootstrap import Estimate, value
from tiedlm_lib.store.atomic import atomic_write_text
from tiedlm_lib.store.tables import markdown_table

DENSE_FRACTIONS = (0.25, 0.5, 0.75, 0.86, 0.93, 1.0)  # paper B's negative control (PROTOCOL §8)


def load_hf(folder: str | Path, allow_network: bool = False, device: str = "cpu", retie: bool | None = None,
            dtype: str = "float32"):
    """(HFDepthModel, tokenizer) of a ``save_pretrained`` folder, in eval mode on ``device``, in ``dtype``
    ("float32", "bfloat16", "float16", or "auto": the checkpoint's own). ``retie``: consecutive layers of exactly
    equal weights become one shared module (a looped model, see the adapter's docstring); None (the default) does it
    only for a checkpoint marked looped (``adapter.LOOPED_MARK``, written by ``save_untied``), so a dense model with
    equal layers (a depth-upscaled one) stays dense. A folder written by ``export-hf`` loads as the looped model it
    is. Its family is checked from config.json before any weight loads. A hub id instead of a folder is loaded only
    with ``allow_network=True`` (the machine may have no network; the default never tries it)."""
    try:
        import transformers
    except ImportError:
        raise ImportError("the dcp command needs transformers: pip install 'tiedlm[hf]'") from None
    import torch

    from tiedlm_lib.hub.adapter import LOOPED_MARK, HFDepthModel, tie_repeated_layers
    from tiedlm_lib.hub.export import load_export

    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}
    if dtype not in dtypes:
        raise ValueError(f"dtype must be one of {sorted(dtypes)}, got {dtype!r}")
    check_checkpoints([str(folder)], allow_network)
    if is_export(folder):  # a tied model exported by this library: its own looped code, its own token ids
        return load_export(folder, device, dtypes[dtype])
    check_family(folder)
    local = not allow_network
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=local,
                                                                  dtype=dtypes[dtype])
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"--model {folder!r}: transformers could not load a causal LM from it (a "
                                f"save_pretrained folder has config.json and its weights): {e}") from None
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=local)
    except (OSError, ValueError) as e:
        raise FileNotFoundError(f"--model {folder!r} has no tokenizer transformers can load (save it beside the "
                                f"weights with tokenizer.save_pretrained): {e}") from None
    # a model trained on the library's own ids (tiedlm_lib.hub.dense) says so in its config: no shift
    offset = getattr(model.config, "tiedlm_token_offset", 1)
    if retie if retie is not None else getattr(model.config, LOOPED_MARK, False):
        tie_repeated_layers(model)
    return HFDepthModel(model.eval().to(device), token_offset=offset), tok


def check_family(folder: str | Path) -> None:
    """Refuse a checkpoint of a family the adapter does not know from its config.json's ``architectures``, before
    any of its weights load (a model class not named there is checked after loading, along its MRO)."""
    from tiedlm_lib.hub.adapter import FAMILIES, HOW_TO_ADD, refused_reason

    path = Path(folder) / "config.json"
    if not path.is_file():
        return  # a hub id (--allow-network): checked after loading
    archs = json.loads(path.read_text()).get("architectures") or []
    why = next((refused_reason(a) for a in archs if refused_reason(a)), None)
    if why:
        raise ValueError(f"--model {str(folder)!r}: {why}")
    if archs and not any(a in FAMILIES for a in archs):
        raise ValueError(f"--model {str(folder)!r} is a {', '.join(archs)}, not a supported family (supported: "
                         f"{', '.join(sorted(FAMILIES))}; nothing was loaded); to add it, {HOW_TO_ADD}")


def check_checkpoints(folders: Sequence[str], allow_network: bool = False) -> None:
    """Before any model loads: every folder a ``save_pretrained`` directory, and, when several are pooled, all of
    one architecture (class, vocabulary, layer count), so that their shares are the same quantities."""
    try:
        import transformers
    except ImportError:
        raise ImportError("the dcp command needs transformers: pip install 'tiedlm[hf]'") from None

    keys = {}
    for f in folders:
        path = Path(f)
        if not path.is_dir():
            if allow_network:
                continue
            raise FileNotFoundError(f"--model {f!r} is not a folder (a save_pretrained directory with config.json); "
                                    "to download a hub id pass --allow-network")
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"--model {f!r} has no config.json: expected a save_pretrained folder")
        c = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True,
                                                   trust_remote_code=is_export(path))
        keys[f] = (type(c).__name__, c.vocab_size, getattr(c, "num_hidden_layers", None))
    if len(set(keys.values())) > 1:
        raise ValueError("the checkpoints to pool differ in architecture (class, vocabulary, layers): "
                         + "; ".join(f"{f}: {k}" for f, k in keys.items()))


def check_same_tokens(folders: Sequence[str], texts: Sequence[str], allow_network: bool = False) -> None:
    """Before any model loads, when several checkpoints are pooled: each folder's tokenizer (and its token offset)
    gives the documents the same ids as the first folder's, since the checkpoints are compared on identical tokens.
    A checkpoint with another tokenizer is refused by name, before the first one has run."""
    if len(folders) < 2:
        return
    import transformers

    def ids(folder: str) -> list[list[int]]:
        local = not allow_network
        tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=local,
                                                        trust_remote_code=is_export(folder))
        cfg = transformers.AutoConfig.from_pretrained(str(folder), local_files_only=local,
                                                     trust_remote_code=is_export(folder))
        offset = getattr(cfg, "tiedlm_token_offset", 1)
        return [[x + offset for x in tok(t)["input_ids"]] for t in texts]

    first = ids(folders[0])
    for f in folders[1:]:
        other = ids(f)
        bad = next((i for i, (a, b) in enumerate(zip(first, other)) if a != b), None)
        if bad is not None:
            raise ValueError(f"--model {f!r} tokenizes the documents differently from {folders[0]!r} (first at "
                             f"document {bad}): checkpoints pooled together are compared on identical tokens, so "
                             "they must share one tokenizer")


def read_documents(path: str | Path, text_field: str = "text", max_docs: int | None = None) -> list[str]:
    """The ``text_field`` string of each JSON object line of ``path`` (the first ``max_docs``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--data {str(path)!r} does not exist: expected a JSONL file, one object per line "
                                f"with a {text_field!r} string")
    out = []
    for line_no, obj in _jsonl_objects(path):
        if not isinstance(obj, dict) or not isinstance(obj.get(text_field), str):
            raise ValueError(f"{path}:{line_no}: expected an object with a {text_field!r} string")
        out.append(obj[text_field])
        if max_docs is not None and len(out) >= max_docs:
            break
    if not out:
        raise ValueError(f"{path} holds no documents")
    return out


def tokenize(tok, texts: Sequence[str], seq_len: int, token_offset: int = 1) -> TokenDocs:
    """Each text tokenised by the model's tokenizer with its default special tokens (paper B's rule: a BOS token
    exactly when the tokenizer adds one by default), truncated to ``seq_len`` tokens, in the library's ids (the
    model's id + ``token_offset``: id 0 stays padding, ``hf.HFDepthModel``). Texts of fewer than two tokens (no
    next-token target) are refused by name."""
    ids = []
    for i, text in enumerate(texts):
        t = tok(text)["input_ids"][:seq_len]
        if len(t) < 2:
            raise ValueError(f"document {i} has {len(t)} token(s): every document needs at least two (a next-token "
                             "target); drop it from the data")
        ids.append([x + token_offset for x in t])
    return TokenDocs.from_lists(ids)


DEFAULT_SEQ_LEN = 256


def context(model) -> int | None:
    """The positions the model reads (its config's max_position_embeddings or n_positions), or None if unstated."""
    cfg = getattr(model, "config", None)
    return getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)


def default_seq_len(model) -> int:
    """DEFAULT_SEQ_LEN tokens per document, or the model's context where that is shorter."""
    ctx = context(model)
    return min(DEFAULT_SEQ_LEN, ctx) if ctx else DEFAULT_SEQ_LEN


def default_ks(model) -> list[int]:
    N = budget(model.layout)
    if getattr(model, "dense", False):
        return sorted({max(1, round(f * N)) for f in DENSE_FRACTIONS})
    return sorted({2 ** i for i in range(N.bit_length()) if 2 ** i <= N} | {N})


def default_schedules(model) -> list[str]:
    return ["prefix", "suffix"] if getattr(model, "dense", False) else ["prefix", "repeat", "suffix", "frozen"]


@dataclass
class Result:
    """One checkpoint's tables (rows of dicts) and its share estimates keyed (probe, k) for pooling."""

    conditions: list[dict]
    shares: list[dict]
    decomposition: list[dict]
    estimates: dict[tuple[str, int], Estimate]


def _batches(docs: TokenDocs, idx: np.ndarray, seq_len: int, batch_size: int) -> Callable[[], Iterator]:
    return lambda: eval_batches(docs, seq_len, batch_size, indices=idx)


def _checked(model, ks, schedules, probes, n_eval, seq_len) -> tuple[list[int], list[str], bool]:
    """``run``'s arguments checked, with the defaults filled in: (ks, schedules, looped)."""
    N = budget(model.layout)
    ks = sorted(set(ks or default_ks(model)))
    if not all(isinstance(k, int) and 1 <= k <= N for k in ks):
        raise ValueError(f"ks must be integers in 1..{N} (the model's {N} core applications), got {ks}")
    if not [k for k in ks if k < N]:
        raise ValueError(f"ks must include a truncation k < {N} (N = {N} is the trained model, always evaluated)")
    looped = not getattr(model, "dense", False)
    if looped and N // 2 >= 1:
        ks = sorted(set(ks) | {max(1, N // 2)})  # k_mid of the decomposition, as in paper B (4 of 8) and section 10
    ks = sorted(set(ks) | {N})  # the trained model: the reference every gap is measured from
    schedules = list(schedules or default_schedules(model))
    if "prefix" not in schedules:
        raise ValueError(f"schedules must include 'prefix' (every gap is prefix(k) - prefix(N)), got {schedules}")
    unknown = [s for s in schedules if s not in SCHEDULE_NAMES]
    if unknown:
        raise ValueError(f"schedules must be among {', '.join(SCHEDULE_NAMES)}, got {unknown}")
    if "repeat" in schedules and getattr(model, "dense", False):
        raise ValueError(REPEAT_ON_DENSE)
    if not probes:
        raise ValueError("probes is empty: name at least one, e.g. head/diagonal")
    if n_eval is not None and n_eval < 1:
        raise ValueError(f"n_eval must be a positive number of documents (or None: all the others), got {n_eval}")
    ctx = context(model)
    if ctx is not None and seq_len > ctx:
        raise ValueError(f"seq_len {seq_len} exceeds the model's context of {ctx} positions")
    return ks, schedules, looped


def run(model, docs: TokenDocs, *, n_cal: int, n_eval: int | None = None, ks: Sequence[int] | None = None,
        schedules: Sequence[str] | None = None, probes: Sequence[str] = ("head/temperature", "head/diagonal"),
        seq_len: int = 256, batch_size: int = 8, n_boot: int = 2000, seed: int = 0, progress: bool = False,
        **fit_kw) -> Result:
    """The protocol on one depth model (see the module docstring); ``fit_kw`` goes to ``lens.fit_probe``. Every
    argument is checked before any evaluation."""
    N = budget(model.layout)
    ks, schedules, looped = _checked(model, ks, schedules, probes, n_eval, seq_len)
    cal, ev = dcp.split_documents(len(docs), n_cal, n_eval, seed)
    conds = dcp.evaluate_schedules(model, _batches(docs, cal, seq_len, batch_size),
                                   _batches(docs, ev, seq_len, batch_size), schedules, ks, probes=probes, seed=seed,
                                   progress=progress, **fit_kw)
    rows = []
    for (s, k), c in conds.items():
        row = {"schedule": s, "k": k, "raw NLL": value(c.raw), "raw ECE": c.metrics["raw"]["ece"],
               "tokens": int(c.raw.n_real.sum()), "ms per 1k tokens": 1e6 * c.seconds_per_token}
        for p in probes:
            row[f"{p} NLL"] = value(c.calibrated[p])
            row[f"{p} ECE"] = c.metrics[p]["ece"]
        rows.append(row)
    shares, estimates = [], {}
    full = conds["prefix", N]
    for p in probes:
        for k in ks:
            if k == N:
                continue
            low = conds["prefix", k]
            est = share_interval((low.raw, full.raw), (low.calibrated[p], full.calibrated[p]), [], n_boot, seed,
                                 centre=False)
            sh = est["calibration share"]
            estimates[p, k] = sh
            shares.append({"probe": p, "k": k, "N": N, "raw gap": est["total"].point,
                           "calibrated gap": est["calibrated gap"].point, "share": sh.point, "share lo": sh.lo,
                           "share hi": sh.hi})
    decomposition = _decomposition(model, conds, ks, schedules, probes, n_boot, seed) if looped else []
    return Result(rows, shares, decomposition, estimates)


def _decomposition(model, conds, ks, schedules, probes, n_boot, seed) -> list[dict]:
    """Paper B's decomposition rows of a looped model's conditions (none when its control was not evaluated)."""
    N = budget(model.layout)
    # the same-application-count control: repeat, or frozen for a single tied loop (repeat(k) is the trained
    # model there); the probe: paper B's affine map when it was fitted
    control = "frozen" if len([t for t in model.layout.split() if "*" in t]) == 1 else "repeat"
    probe = "head/diagonal" if "head/diagonal" in probes else probes[-1]
    k_min, k_mid = ks[0], max(1, N // 2)
    if control not in schedules:
        print(f"no decomposition: it needs the {control} schedule, which was not evaluated")
    elif k_min < k_mid < N:
        d = dcp.decompose(conds, k_min, k_mid, N, control=control, probe=probe, n_boot=n_boot, seed=seed)
        return [{"term": t, "estimate": e.point, "lo": e.lo, "hi": e.hi, "control": control, "k_min": k_min,
                 "k_mid": k_mid, "k_max": N, "probe": probe} for t, e in d.items()]
    return []


def pooled_shares(results: Sequence[Result]) -> list[dict]:
    """Each (probe, k) share pooled over checkpoints (``inference.pool``; the checkpoint is the unit)."""
    rows = []
    for key in results[0].estimates:
        ests = [r.estimates[key] for r in results]
        finite = [e for e in ests if math.isfinite(e.point)]
        if len(finite) < len(ests):
            rows.append({"probe": key[0], "k": key[1], "checkpoints": len(ests), "pooled share": float("nan"),
                         "note": "undefined in a checkpoint (a zero gap)"})
            continue
        p = inference.pool(finite)
        rows.append({"probe": key[0], "k": key[1], "checkpoints": p.n, "pooled share": p.point, "lo": p.lo,
                     "hi": p.hi, "between-checkpoint sd": p.between_sd, "document sd": p.doc_sd})
    return rows


def figure(conditions: Sequence[dict], probes: Sequence[str]):
    """NLL against k per schedule: raw, and after each probe (an altair chart)."""
    import altair as alt

    long = [{"schedule": r["schedule"], "k": r["k"], "readout": readout, "NLL": r[col]}
            for r in conditions for readout, col in [("raw", "raw NLL"), *((p, f"{p} NLL") for p in probes)]]
    return alt.Chart(pd.DataFrame(long)).mark_line(point=True).encode(
        x=alt.X("k:Q", title="k (core applications)"), y=alt.Y("NLL:Q", scale=alt.Scale(zero=False)),
        color="schedule:N", strokeDash="readout:N").properties(width=360, height=240)


def write(out: str | Path, tables: dict[str, list[dict]], chart=None, meta: dict | None = None) -> list[Path]:
    """Each table as ``<name>.csv`` and ``<name>.md``, the chart as ``nll_by_k.svg``, ``meta`` as ``run.json``;
    returns the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rows in tables.items():
        if not rows:
            continue
        df = pd.DataFrame(rows)
        atomic_write_text(out / f"{name}.csv", df.to_csv(index=False))
        atomic_write_text(out / f"{name}.md", markdown_table(df))
        paths += [out / f"{name}.csv", out / f"{name}.md"]
    if chart is not None:
        import vl_convert as vlc

        atomic_write_text(out / "nll_by_k.svg", vlc.vegalite_to_svg(chart.to_json()))
        paths.append(out / "nll_by_k.svg")
    if meta is not None:
        atomic_write_text(out / "run.json", json.dumps(meta, indent=1))
        paths.append(out / "run.json")
    return paths
