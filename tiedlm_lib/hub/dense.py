"""The dense negative control of section 13: a Llama-style Hugging Face model trained here, with the small tied
model's recipe, and run through the Depth Control Protocol as a user's own checkpoint would be.

Paper B applies its schedules to dense, non-weight-shared LMs (24-28 layers) to rule out protocol artefacts: a
dense model has no loop, so the part of a truncation gap that a readout probe removes there is what truncating any
stack costs the readout. The control here is ``transformers.LlamaForCausalLM`` (RMSNorm, rotary positions, a SwiGLU
MLP of 8/3·d so that a layer has the 12·d² parameters of the tied models' blocks, untied head) with the small size's
width and heads, **12 layers at the cpu scale** (4 at smoke): deep enough that paper B's grid k = round(f·L),
f ∈ {0.25, 0.5, 0.75, 0.86, 0.93, 1}, gives six distinct depths (3, 6, 9, 10, 11, 12), and within the 16 block
applications of the cpu scale's tied core, so that neither model is the deeper one by much. It trains on v3's data,
steps, batch, learning-rate schedule and seed (``experiment("v3", scale, seed)``) with the library's own training
step, on the library's token ids (``HFDepthModel(token_offset=0)``: its vocabulary is the corpus tokenizer's, 0 is
pad). Runs are cached like the tied ones, under ``runs/<scale>/dense-llama-s<seed>-<fingerprint>/``, as a
``save_pretrained`` folder (so ``python -m tiedlm_lib dcp --model`` reads it as it would any checkpoint) with
``recipe.json``, ``metrics.jsonl`` and ``result.json`` (written last: a folder without it is not a finished run).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import torch

from tiedlm_lib import devices
from tiedlm_lib.evaluation.analysis import cached_corpus
from tiedlm_lib.paths import runs_dir
from tiedlm_lib.runs import experiment, get_scale
from tiedlm_lib.store.atomic import atomic_write_text
from tiedlm_lib.training.loop import make_stream, train_step

# the dense control's depth per scale (see the module docstring); the paper scale's 24 is the depth of paper B's
# SmolLM2/Pythia controls, at the small size's width
LAYERS = {"smoke": 4, "cpu": 12, "paper": 24, "rehearsal": 24}


def llama_config(scale: str) -> dict[str, Any]:
    """The dense control's ``LlamaConfig`` arguments at ``scale``."""
    if scale not in LAYERS:
        raise ValueError(f"the dense control is defined at the scales {sorted(LAYERS)}, got {scale!r}")
    s = get_scale(scale)
    d = s.small.d_model
    return {"vocab_size": s.vocab_size, "hidden_size": d, "intermediate_size": round(8 * d / 3),
            "num_hidden_layers": LAYERS[scale], "num_attention_heads": s.small.n_heads,
            "num_key_value_heads": s.small.n_heads, "max_position_embeddings": s.seq_len,
            "tie_word_embeddings": False, "pad_token_id": 0, "bos_token_id": None, "eos_token_id": None}


def recipe(scale: str, seed: int = 0) -> dict[str, Any]:
    """Everything that identifies a dense run: the model config and v3's data and training recipe."""
    v3 = experiment("v3", scale, seed)
    return {"model": llama_config(scale), "data": v3.to_dict()["data"], "train": v3.to_dict()["train"]}


def run_dir(scale: str, seed: int = 0, root: str | Path | None = None) -> Path:
    fp = hashlib.sha256(json.dumps(recipe(scale, seed), sort_keys=True).encode()).hexdigest()[:12]
    return Path(root or runs_dir()) / scale / f"dense-llama-s{seed}-{fp}"


def get_dense(scale: str, seed: int = 0, root: str | Path | None = None, device: str | None = None,
              progress: bool | None = None, train_if_missing: bool = True):
    """(HFDepthModel, result dict) of the dense control at ``scale`` and ``seed``, trained first if it is not in the
    cache (``train_if_missing=False``: raise instead)."""
    import transformers

    from tiedlm_lib.hub.adapter import HFDepthModel

    transformers.utils.logging.disable_progress_bar()  # its per-shard bars would fill a notebook's output
    path = run_dir(scale, seed, root)
    device = devices.default_device(device, scale)
    if not (path / "result.json").is_file():
        if not train_if_missing:
            raise FileNotFoundError(f"the dense control at {scale}/seed {seed} is not in the cache: {path}")
        _train(scale, seed, path, device, progress)
    if not (path / "tokenizer.json").is_file():  # a run saved before the folder carried its tokenizer
        export(path, scale, seed)
    model = transformers.LlamaForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    return HFDepthModel(model.eval().to(device), token_offset=0), json.loads((path / "result.json").read_text())


def export(path: Path, scale: str, seed: int = 0) -> None:
    """Make a dense run's folder a checkpoint the ``dcp`` command reads: the corpus tokenizer beside the weights, and
    ``tiedlm_token_offset: 0`` in config.json (the model's ids are the library's, 0 is pad: ``protocol.load_hf``
    wraps it without the shift a Hugging Face vocabulary needs)."""
    import transformers

    tok = cached_corpus(experiment("v3", scale, seed).data).tokenizer
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>" if tok.token_to_id("<pad>") == 0
                                         else None).save_pretrained(path)
    cfg = json.loads((path / "config.json").read_text())
    atomic_write_text(path / "config.json", json.dumps({**cfg, "tiedlm_token_offset": 0}, indent=2))


def _train(scale: str, seed: int, path: Path, device: str, progress: bool | None) -> None:
    """v3's recipe on a fresh seeded Llama; the folder is written whole or not at all (result.json last)."""
    import transformers
    from tqdm.auto import tqdm

    from tiedlm_lib.hub.adapter import HFDepthModel

    run = experiment("v3", scale, seed)
    cfg = run.train
    corpus = cached_corpus(run.data)
    torch.manual_seed(cfg.seed)
    model = HFDepthModel(transformers.LlamaForCausalLM(transformers.LlamaConfig(**llama_config(scale))),
                         token_offset=0).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)
    stream = make_stream(run, corpus)
    model.train()
    rows, t0 = [], time.perf_counter()
    for step in tqdm(range(cfg.steps), desc=f"train dense-llama/{scale}", disable=None if progress is None else
                     not progress, leave=False, mininterval=1.0):
        x, y = stream.next()
        res = train_step(model, opt, x, y, cfg, step, torch.device(device))
        if step % cfg.log_every == 0 or step == cfg.steps - 1:
            rows.append({"step": step, "loss": res.loss, "grad_norm": res.grad_norm,
                         "time": time.perf_counter() - t0})
    seconds = time.perf_counter() - t0
    path.mkdir(parents=True, exist_ok=True)
    model.hf.save_pretrained(path)
    export(path, scale, seed)
    atomic_write_text(path / "recipe.json", json.dumps(recipe(scale, seed), indent=1))
    atomic_write_text(path / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    atomic_write_text(path / "result.json", json.dumps(
        {"final_loss": res.loss, "seconds": seconds, "steps": cfg.steps, "layers": LAYERS[scale],
         "params": sum(p.numel() for p in model.parameters()), "device": device,
         "torch_threads": torch.get_num_threads()}, indent=1))
