"""One training loop for every run of the paper (PROTOCOL §4.1): AdamW on all parameters, lr set by hand each step,
bf16 autocast on CUDA, fp32 cross-entropy, non-finite losses skipped, global grad-norm clipped, resumable."""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from . import distributed
from .atomic import atomic_write_text
from .checkpoint import CheckpointError, config_diff, load_checkpoint, save_checkpoint, save_model
from .config import RunConfig, TrainConfig
from .data import PAD_ID, BatchStream, Corpus, prepare_corpus, tokenizer_hash
from .model import TiedLM


class NonFiniteLossError(RuntimeError):
    pass


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup from 0 over ``warmup`` steps, then cosine from lr to lr_min over the remaining steps
    (with warmup = 0 this is CosineAnnealingLR(T_max=steps, eta_min=lr_min) stepped every step); or constant."""
    if cfg.schedule == "constant":
        return cfg.lr
    if step < cfg.warmup:
        return cfg.lr * step / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr_min + (cfg.lr - cfg.lr_min) * 0.5 * (1 + math.cos(math.pi * t))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, pad_targets: str = "ignore",
            normalizer: float | None = None) -> torch.Tensor:
    """Token-mean cross-entropy in fp32; pad targets ignored (pre-training) or counted (the paper's SFT).

    ``normalizer`` divides the summed CE by a given target count instead (data parallelism: the global count)."""
    ignore = PAD_ID if pad_targets == "ignore" else -100
    if normalizer is None:
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=ignore)
    total = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=ignore, reduction="sum")
    return total / normalizer


def count_targets(targets: torch.Tensor, pad_targets: str = "ignore") -> int:
    return int((targets != PAD_ID).sum()) if pad_targets == "ignore" else int((targets != -100).sum())


def sampled_depth(cfg: TrainConfig, step: int, budget: int) -> int:
    """The depth of a sampled-depth step: Uniform{1..budget}, a function of (seed, step) so resumption repeats it."""
    return random.Random(cfg.seed * 1_000_003 + step).randint(1, budget)


def supervised_loss(model: TiedLM, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig,
                    normalizer: float | None = None, step: int = 0) -> tuple[torch.Tensor, dict[int, float]]:
    """Single-depth: CE at the trained depth. Multi-depth: the weighted mean of the CE at each supervised depth,
    read out from one forward pass that shares the loop iterations (PROTOCOL §4.3). Sampled depth: CE of the
    prefix plan at a depth drawn for this step."""
    if cfg.depth_sampling == "uniform":
        from .schedules import budget, plan, plan_logits

        k = sampled_depth(cfg, step, budget(model.config.layout))
        logits = plan_logits(model, x, plan(model.config.layout, "prefix", k))
        return lm_loss(logits, y, cfg.pad_targets, normalizer), {k: torch.zeros(())}
    if cfg.depths is None:
        return lm_loss(model(x, backprop=cfg.backprop), y, cfg.pad_targets, normalizer), {}
    weights = cfg.depth_weights or (1.0,) * len(cfg.depths)
    w = dict(zip(cfg.depths, weights))
    total, per_depth = 0.0, {}
    for k, logits in model.iter_depths(x, cfg.depths, cfg.backprop):
        ce = lm_loss(logits, y, cfg.pad_targets, normalizer)
        per_depth[k] = ce.detach()
        total = total + w[k] * ce
    return total / sum(weights), per_depth


@dataclass
class TrainResult:
    run: RunConfig
    model: TiedLM
    out_dir: Path | None
    final_loss: float
    skipped_steps: int
    seconds: float
    metrics: list[dict[str, Any]] = field(default_factory=list)


def _autocast(device: torch.device, amp: str):
    use = amp == "bf16" or (amp == "auto" and device.type == "cuda")
    return torch.autocast(device.type, dtype=torch.bfloat16) if use else contextlib.nullcontext()


def _optim_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], list[dict]]:
    sd = opt.state_dict()
    tensors = {f"optim.{pid}.{k}": v for pid, st in sd["state"].items() for k, v in st.items()}
    return tensors, sd["param_groups"]


def _restore_optim(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], groups: list[dict]) -> None:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, v in tensors.items():
        if key.startswith("optim."):
            _, pid, name = key.split(".", 2)
            state.setdefault(int(pid), {})[name] = v
    for g in groups:
        g["betas"] = tuple(g["betas"])
    opt.load_state_dict({"state": state, "param_groups": groups})


def init_weights(model: TiedLM, source: str | Path) -> None:
    """Load a saved model's weights into ``model`` (same model configuration required)."""
    from .checkpoint import load_model
    from .paths import runs_dir

    path = Path(source)
    if not path.is_absolute():
        path = runs_dir() / path
    model.load_state_dict(load_model(path, model.config).state_dict())


CKPT = "checkpoint.safetensors"
FINAL = "model.safetensors"


def train(run: RunConfig, out_dir: str | Path | None = None, corpus: Corpus | None = None, *,
          device: str | torch.device = "cpu", resume: bool = True, progress: bool | None = None,
          stop_after: int | None = None) -> TrainResult:
    """Train ``run`` from scratch, or resume it from ``out_dir/checkpoint.safetensors``.

    ``stop_after`` ends the call after that many steps of this call (a checkpoint is written), to test resumption.
    Resumed training ends with the same weights as uninterrupted training: the model, the optimiser moments and the
    batch stream's state are all restored."""
    cfg = run.train
    device = torch.device(device)
    distributed.init_from_env(device)
    rank, world = distributed.rank_world()
    device = distributed.local_device(device)
    if cfg.batch_size % world:
        raise ValueError(f"batch_size {cfg.batch_size} is not divisible by the number of processes {world}")
    out = Path(out_dir) if out_dir is not None else None
    writer = out if rank == 0 else None  # only rank 0 writes logs and checkpoints
    corpus = corpus if corpus is not None else prepare_corpus(run.data)
    vocab = corpus.tokenizer.get_vocab_size()
    tok_hash = tokenizer_hash(corpus.tokenizer)
    if vocab > run.model.vocab_size:
        raise ValueError(f"tokenizer has {vocab} tokens but the model's vocab_size is {run.model.vocab_size}")

    torch.manual_seed(cfg.seed)
    model = TiedLM(run.model).to(device)
    if cfg.init_from:
        init_weights(model, cfg.init_from)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay,
                            fused=device.type == "cuda")
    if cfg.compile:
        for block in model.blocks.values():  # compile the blocks: every path (depths, phantom, exits) uses them
            block.compile()
    if run.data.task == "sft":
        from .sft import SFTStream, sft_data

        if cfg.pad_targets != "include":
            raise ValueError("an SFT run marks the positions without loss by target -100 and, under the paper "
                             "protocol, trains pad targets: set train.pad_targets='include'")
        stream = SFTStream(sft_data(run, corpus), cfg.batch_size, cfg.data_seed, run.data.sft_loss)
    else:
        stream = BatchStream(corpus.train, run.data.seq_len, cfg.batch_size, cfg.data_seed, run.data.batch_mode)
    start, skipped, elapsed = 0, 0, 0.0
    metrics: list[dict[str, Any]] = []

    ckpt = out / CKPT if out else None
    if out is not None and resume and ckpt.is_file():
        tensors, meta = load_checkpoint(ckpt)
        diffs = config_diff(meta.get("run", {}), run.to_dict(),
                            ignore=("name", "scale", "train.log_every", "train.checkpoint_every"))
        if diffs:
            raise CheckpointError(f"{ckpt}: checkpoint is from another run configuration: " + "; ".join(diffs))
        if meta.get("tokenizer") != tok_hash:  # same config, yet the token ids would mean other strings
            raise CheckpointError(f"{ckpt}: checkpoint was trained with another tokenizer (hash "
                                  f"{meta.get('tokenizer')} vs {tok_hash} now); delete it or restore the tokenizer")
        model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        _restore_optim(opt, tensors, meta["param_groups"])
        stream.set_state(meta["stream_state"])
        start, skipped, elapsed = meta["step"], meta["skipped"], meta["elapsed"]
    if writer is not None:
        out.mkdir(parents=True, exist_ok=True)
        mpath = out / "metrics.jsonl"
        if mpath.is_file():  # keep only lines from before the resumed step (a crash may have logged past it)
            metrics = [m for m in map(json.loads, mpath.read_text().splitlines()) if m["step"] < start]
        atomic_write_text(mpath, "".join(json.dumps(m) + "\n" for m in metrics))
        atomic_write_text(out / "config.json", json.dumps(run.to_dict(), indent=1))

    def checkpoint(step: int) -> None:
        if writer is None:
            return
        tensors, groups = _optim_tensors(opt)
        tensors.update({f"model.{k}": v for k, v in model.state_dict().items()})
        save_checkpoint(ckpt, tensors, {"run": run.to_dict(), "fingerprint": run.fingerprint(), "step": step,
                                        "skipped": skipped, "elapsed": elapsed, "param_groups": groups,
                                        "stream_state": stream.get_state(), "model": run.to_dict()["model"],
                                        "tokenizer": tok_hash})

    def log(m: dict[str, Any]) -> None:
        metrics.append(m)
        if writer is not None:
            with open(out / "metrics.jsonl", "a") as fh:
                fh.write(json.dumps(m) + "\n")

    model.train()
    end = cfg.steps if stop_after is None else min(cfg.steps, start + stop_after)
    bar = tqdm(range(start, end), initial=start, total=cfg.steps, desc=f"train {run.name}/{run.scale}",
               disable=rank > 0 or (None if progress is None else not progress),  # None: off when not a TTY
               leave=False, mininterval=1.0)
    loss_val = float("nan")
    t0 = time.perf_counter()
    for step in bar:
        lr = lr_at(step, cfg)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = stream.next()  # the global batch, identical on every rank
        n_targets = count_targets(y, cfg.pad_targets)
        x, y = x[rank::world].to(device), y[rank::world].to(device)  # this rank's rows
        with _autocast(device, cfg.amp):
            loss, per_depth = supervised_loss(model, x, y, cfg, normalizer=n_targets if world > 1 else None,
                                              step=step)
        loss_val = distributed.all_reduce_sum(loss.detach()).item()  # every rank sees the global loss
        if not math.isfinite(loss_val):
            skipped += 1
            log({"step": step, "event": "nonfinite_loss_skipped", "skipped": skipped})
            if skipped > cfg.max_nonfinite:
                elapsed += time.perf_counter() - t0
                checkpoint(step)
                raise NonFiniteLossError(
                    f"{skipped} non-finite losses (more than max_nonfinite={cfg.max_nonfinite}) by step {step}; "
                    f"the last good state is in {ckpt}")
            continue
        opt.zero_grad(set_to_none=True)
        loss.backward()
        distributed.all_reduce_grads(model.parameters())
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        if step % cfg.log_every == 0 or step == cfg.steps - 1:
            m = {"step": step, "loss": loss_val, "lr": lr, "grad_norm": float(gnorm),
                 "alpha": model.alphas(), "time": elapsed + time.perf_counter() - t0}
            if cfg.depth_sampling == "uniform":
                m["depth"] = next(iter(per_depth))
            elif per_depth:
                m["loss_by_depth"] = {str(k): float(distributed.all_reduce_sum(v)) for k, v in per_depth.items()}
            log(m)
            bar.set_postfix(loss=f"{loss_val:.3f}")
        if writer is not None and cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 and step + 1 < end:
            elapsed += time.perf_counter() - t0
            t0 = time.perf_counter()
            checkpoint(step + 1)
    bar.close()
    elapsed += time.perf_counter() - t0
    if writer is not None:
        checkpoint(end)
        if end == cfg.steps:
            save_model(out / FINAL, model, run, step=end, skipped=skipped, elapsed=elapsed, tokenizer=tok_hash)
    distributed.barrier()  # the other ranks return once rank 0's files are complete
    return TrainResult(run, model, out, loss_val, skipped, elapsed, metrics)
