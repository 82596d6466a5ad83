"""One training loop for every run of the paper (PROTOCOL §4.1): AdamW on all parameters, lr set by hand each step,
bf16 autocast on CUDA, fp32 cross-entropy, non-finite losses skipped, global grad-norm clipped, resumable."""

from __future__ import annotations

import contextlib
import json
import math
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from tiedlm_lib.data import PAD_ID, BatchStream, Corpus, SeededStream, prepare_corpus, tokenizer_hash
from tiedlm_lib.model.checkpoint import (
    CheckpointError,
    config_diff,
    load_checkpoint,
    load_model,
    save_checkpoint,
    save_model,
    saved_run,
)
from tiedlm_lib.model.config import LABELS, RunConfig, TrainConfig
from tiedlm_lib.model.schedules import budget, plan, plan_logits
from tiedlm_lib.model.tied import TiedLM
from tiedlm_lib.paths import runs_dir
from tiedlm_lib.store.atomic import atomic_write_text
from tiedlm_lib.training import distributed
from tiedlm_lib.training.sft import IGNORE, SFTStream, sft_data


class TrainingInterrupted(RuntimeError):
    """Training stopped on SIGTERM or SIGINT after a checkpoint of the last finished step: run it again to resume."""


class _StopOnSignal:
    """While active, SIGTERM and SIGINT only ask the loop to stop after the current step (it then checkpoints and
    raises TrainingInterrupted). Installed only where a checkpoint can be written, in the main thread of a single
    process (under torchrun the ranks would stop at different steps and wait on each other)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, active: bool):
        self.active = active and threading.current_thread() is threading.main_thread()
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _StopOnSignal:
        if self.active:
            for s in self.SIGNALS:
                self._old[s] = signal.signal(s, self._ask)
        return self

    def _ask(self, signum, frame) -> None:
        self.signum = signum

    def __exit__(self, *exc) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)


class NonFiniteLossError(RuntimeError):
    pass


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup from 0 over ``warmup`` steps, then cosine from lr to lr_min over the remaining steps
    (with warmup = 0 this is CosineAnnealingLR(T_max=steps, eta_min=lr_min) stepped every step); or, for the
    constant schedule, the same warmup and then lr (paper B's intervention: warmup 100, constant lr)."""
    if step < cfg.warmup:
        return cfg.lr * step / cfg.warmup
    if cfg.schedule == "constant":
        return cfg.lr
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr_min + (cfg.lr - cfg.lr_min) * 0.5 * (1 + math.cos(math.pi * t))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, pad_targets: str = "ignore",
            normalizer: float | None = None) -> torch.Tensor:
    """Token-mean cross-entropy in fp32; pad targets ignored (pre-training) or counted (the paper's SFT).

    ``normalizer`` divides the summed CE by a given target count instead (data parallelism: the global count)."""
    ignore = PAD_ID if pad_targets == "ignore" else IGNORE
    if normalizer is None:
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=ignore)
    total = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=ignore, reduction="sum")
    return total / normalizer


def count_targets(targets: torch.Tensor, pad_targets: str = "ignore") -> int:
    return int((targets != PAD_ID).sum()) if pad_targets == "ignore" else int((targets != IGNORE).sum())


def sampled_depth(cfg: TrainConfig, step: int, budget: int) -> int:
    """The depth of a sampled-depth step: Uniform{1..budget}, a function of (seed, step) so resumption repeats it."""
    return random.Random(cfg.seed * 1_000_003 + step).randint(1, budget)


def supervised_loss(model: TiedLM, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig,
                    normalizer: float | None = None, step: int = 0) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    """(loss, {depth: CE}) of one batch. Single-depth: CE at the trained depth ({} per depth). Multi-depth: the
    weighted mean of the CE at each supervised depth, read out from one forward pass that shares the loop iterations
    (PROTOCOL §4.3). Sampled depth: the CE of the prefix plan at the depth ``sampled_depth`` draws for this step."""
    if cfg.depth_sampling == "uniform":
        k = sampled_depth(cfg, step, budget(model.config.layout))
        loss = lm_loss(plan_logits(model, x, plan(model.config.layout, "prefix", k)), y, cfg.pad_targets, normalizer)
        return loss, {k: loss.detach()}
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


def init_weights(model: TiedLM, source: str | Path, runs_root: str | Path | None = None) -> None:
    """Load a saved model's weights into ``model`` (same model configuration required). A relative ``source`` is
    relative to ``runs_root`` (default: the runs directory, ``paths.runs_dir``)."""
    path = Path(source)
    if not path.is_absolute():
        path = Path(runs_root if runs_root is not None else runs_dir()) / path
        if not path.is_file():
            raise FileNotFoundError(f"init_from {source!r}: no weights at {path}; train the base run first (a "
                                    "continuation starts from its base run's final weights)")
    model.load_state_dict(load_model(path, model.config).state_dict())


CKPT = "checkpoint.safetensors"
FINAL = "model.safetensors"


def kept_weights_name(step: int) -> str:
    """The file of the weights kept after ``step`` steps (``TrainConfig.keep_weights_at``)."""
    return f"weights-step{step:06d}.safetensors"


# ---------------------------------------------------------------------------------------------------- named steps
@dataclass
class Progress:
    """Where a run stands: the next step to train, non-finite steps skipped so far, seconds trained over all calls."""

    step: int = 0
    skipped: int = 0
    elapsed: float = 0.0


@dataclass
class StepResult:
    """One optimiser step: the global loss, and (None when the loss or the gradients were non-finite and the step
    skipped) the gradient norm before clipping and the per-depth CE."""

    loss: float
    grad_norm: float | None
    per_depth: dict[int, torch.Tensor]


def build(run: RunConfig, device: torch.device, runs_root: str | Path | None = None
          ) -> tuple[TiedLM, torch.optim.Optimizer]:
    """The seeded model (or the weights it starts from, ``init_from`` relative to ``runs_root``) and AdamW on every
    parameter."""
    cfg = run.train
    torch.manual_seed(cfg.seed)
    model = TiedLM(run.model).to(device)
    if cfg.init_from:
        init_weights(model, cfg.init_from, runs_root)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay,
                            fused=device.type == "cuda")
    if cfg.compile:
        for block in model.blocks.values():  # compile the blocks: every path (depths, phantom, exits) uses them
            block.compile()
    return model, opt


def make_stream(run: RunConfig, corpus: Corpus) -> SeededStream:
    """The seeded training batch stream: documents (pre-training) or rendered conversations (SFT)."""
    cfg = run.train
    if run.data.task == "sft":
        if cfg.pad_targets != "include":
            raise ValueError(f"an SFT run marks the positions without loss by target {IGNORE} and, under the paper "
                             "protocol, trains pad targets: set train.pad_targets='include'")
        return SFTStream(sft_data(run, corpus), cfg.batch_size, cfg.data_seed, run.data.sft_loss)
    return BatchStream(corpus.train, run.data.seq_len, cfg.batch_size, cfg.data_seed, run.data.batch_mode)


def resume_from(ckpt: Path, run: RunConfig, tok_hash: str, model: TiedLM, opt: torch.optim.Optimizer,
                stream: SeededStream) -> Progress:
    """Restore model, optimiser moments and stream state from ``ckpt``; refuse one from another config or
    tokenizer, leaving it untouched."""
    tensors, meta = load_checkpoint(ckpt)
    if not isinstance(meta.get("run"), dict):
        raise CheckpointError(f"{ckpt}: checkpoint records no run configuration; it cannot be resumed safely")
    diffs = config_diff(saved_run(meta["run"], ckpt).to_dict(), run.to_dict(), ignore=LABELS)
    if diffs:
        raise CheckpointError(f"{ckpt}: checkpoint is from another run configuration: " + "; ".join(diffs))
    if meta.get("tokenizer") != tok_hash:  # same config, yet the token ids would mean other strings
        raise CheckpointError(f"{ckpt}: checkpoint was trained with another tokenizer (hash "
                              f"{meta.get('tokenizer')} vs {tok_hash} now); delete it or restore the tokenizer")
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    _restore_optim(opt, tensors, meta["param_groups"])
    stream.set_state(meta["stream_state"])
    return Progress(meta["step"], meta["skipped"], meta["elapsed"])


def save_state(ckpt: Path, run: RunConfig, tok_hash: str, model: TiedLM, opt: torch.optim.Optimizer,
               stream: SeededStream, progress: Progress) -> None:
    """An atomic, resumable checkpoint: weights, optimiser moments, stream state and progress."""
    tensors, groups = _optim_tensors(opt)
    tensors.update({f"model.{k}": v for k, v in model.state_dict().items()})
    save_checkpoint(ckpt, tensors, {"run": run.to_dict(), "fingerprint": run.fingerprint(), "step": progress.step,
                                    "skipped": progress.skipped, "elapsed": progress.elapsed, "param_groups": groups,
                                    "stream_state": stream.get_state(), "model": run.to_dict()["model"],
                                    "tokenizer": tok_hash})


class MetricsLog:
    """metrics.jsonl, truncated to the lines before the resumed step (a crash may have logged past it); only the
    writing rank keeps a file."""

    def __init__(self, out: Path | None, start: int):
        self.path = out / "metrics.jsonl" if out is not None else None
        self.rows: list[dict[str, Any]] = []
        if self.path is not None:
            if self.path.is_file():
                self.rows = [m for m in map(json.loads, self.path.read_text().splitlines()) if m["step"] < start]
            atomic_write_text(self.path, "".join(json.dumps(m) + "\n" for m in self.rows))

    def append(self, m: dict[str, Any]) -> None:
        self.rows.append(m)
        if self.path is not None:
            with open(self.path, "a") as fh:
                fh.write(json.dumps(m) + "\n")


def train_step(model: TiedLM, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig,
               step: int, device: torch.device) -> StepResult:
    """One step on the global batch (x, y): this rank's rows, the loss normalised by the global target count under
    data parallelism, gradients summed across ranks, clipped, applied. A non-finite loss, or a finite loss whose
    gradients are not finite, changes nothing (the step is skipped, as the original scripts skipped non-finite
    steps)."""
    rank, world = distributed.rank_world()
    for g in opt.param_groups:
        g["lr"] = lr_at(step, cfg)
    n_targets = count_targets(y, cfg.pad_targets)
    x, y = x[rank::world].to(device), y[rank::world].to(device)  # this rank's rows
    with _autocast(device, cfg.amp):
        loss, per_depth = supervised_loss(model, x, y, cfg, normalizer=n_targets if world > 1 else None, step=step)
    loss_val = distributed.all_reduce_sum(loss.detach()).item()  # every rank sees the global loss
    if not math.isfinite(loss_val):
        return StepResult(loss_val, None, per_depth)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    distributed.all_reduce_grads(model.parameters())
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
    if not math.isfinite(float(gnorm)):  # clipping by an infinite norm would write NaN into every parameter
        opt.zero_grad(set_to_none=True)
        return StepResult(loss_val, None, per_depth)
    opt.step()
    return StepResult(loss_val, float(gnorm), per_depth)


def step_metrics(model: TiedLM, cfg: TrainConfig, step: int, res: StepResult, seconds: float) -> dict[str, Any]:
    m = {"step": step, "loss": res.loss, "lr": lr_at(step, cfg), "grad_norm": res.grad_norm,
         "alpha": model.alphas(), "time": seconds}
    if cfg.depth_sampling == "uniform":
        m["depth"] = next(iter(res.per_depth))
    elif res.per_depth:
        m["loss_by_depth"] = {str(k): float(distributed.all_reduce_sum(v)) for k, v in res.per_depth.items()}
    return m


# ---------------------------------------------------------------------------------------------------- the loop
def train(run: RunConfig, out_dir: str | Path | None = None, corpus: Corpus | None = None, *,
          device: str | torch.device = "cpu", resume: bool = True, progress: bool | None = None,
          stop_after: int | None = None, runs_root: str | Path | None = None) -> TrainResult:
    """Train ``run`` from scratch, or resume it from ``out_dir/checkpoint.safetensors``.

    ``stop_after`` ends the call after that many steps of this call (a checkpoint is written), to test resumption.
    ``runs_root``: where a relative ``init_from`` is looked up (default: the runs directory).
    Resumed training ends with the same weights as uninterrupted training: the model, the optimiser moments and the
    batch stream's state are all restored."""
    cfg = run.train
    device, rank = _join(torch.device(device), cfg.batch_size)
    corpus = corpus if corpus is not None else prepare_corpus(run.data)
    tok_hash = _check_tokenizer(corpus, run)
    model, opt = build(run, device, runs_root)
    stream = make_stream(run, corpus)
    out = Path(out_dir) if out_dir is not None else None
    writer, ckpt = (out if rank == 0 else None), (out / CKPT if out else None)  # only rank 0 writes files
    state = Progress()
    if out is not None and resume and ckpt.is_file():
        state = resume_from(ckpt, run, tok_hash, model, opt, stream)
    if writer is not None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "config.json", json.dumps(run.to_dict(), indent=1))
    log = MetricsLog(writer, state.step)
    save = (lambda: save_state(ckpt, run, tok_hash, model, opt, stream, state)) if writer else (lambda: None)

    def keep(step: int) -> None:  # the weights alone, for a point of the horizon curve
        if writer is not None:
            save_model(out / kept_weights_name(step), model, run, step=step, skipped=state.skipped,
                       elapsed=clock(), tokenizer=tok_hash)

    model.train()
    end = cfg.steps if stop_after is None else min(cfg.steps, state.step + stop_after)
    bar = _progress_bar(run, state.step, end, show=rank == 0 and progress)
    res = StepResult(float("nan"), None, {})
    t0, base = time.perf_counter(), state.elapsed
    clock = lambda: base + time.perf_counter() - t0  # noqa: E731  seconds trained over all calls
    stop = _StopOnSignal(writer is not None and distributed.rank_world()[1] == 1)
    with stop:
        res = _loop(bar, stream, model, opt, cfg, device, state, log, save, keep, clock, end, ckpt, stop) or res
    bar.close()
    state.step, state.elapsed = end, clock()
    if writer is not None:
        save()
        if end == cfg.steps:
            save_model(out / FINAL, model, run, step=end, skipped=state.skipped, elapsed=state.elapsed,
                       tokenizer=tok_hash)
    distributed.barrier()  # the other ranks return once rank 0's files are complete
    return TrainResult(run, model, out, res.loss, state.skipped, state.elapsed, log.rows)


def _loop(bar, stream, model, opt, cfg, device, state, log, save, keep, clock, end, ckpt, stop
          ) -> StepResult | None:
    """The steps of one call; returns the last step's result. Stops early, checkpointed, on a signal (``stop``: after
    the step in flight) or on too many non-finite losses."""
    res = None
    for step in bar:
        x, y = stream.next()  # the global batch, identical on every rank
        res = train_step(model, opt, x, y, cfg, step, device)
        if res.grad_norm is None:
            state.skipped += 1
            log.append({"step": step, "event": "nonfinite_loss_skipped" if not math.isfinite(res.loss) else
                        "nonfinite_grad_skipped", "skipped": state.skipped})
            if state.skipped > cfg.max_nonfinite:
                state.step, state.elapsed = step, clock()
                save()
                raise NonFiniteLossError(
                    f"{state.skipped} non-finite losses (more than max_nonfinite={cfg.max_nonfinite}) by step "
                    f"{step}; the last good state is in {ckpt}")
            if step + 1 in cfg.keep_weights_at:  # the step was skipped, the weights after it still exist
                keep(step + 1)
            continue
        if step % cfg.log_every == 0 or step == cfg.steps - 1:
            log.append(step_metrics(model, cfg, step, res, clock()))
            bar.set_postfix(loss=f"{res.loss:.3f}")
        if step + 1 in cfg.keep_weights_at:
            keep(step + 1)
        if stop.signum is not None and step + 1 < end:
            state.step, state.elapsed = step + 1, clock()
            save()
            bar.close()
            raise TrainingInterrupted(f"training stopped by signal {signal.Signals(stop.signum).name} after step "
                                      f"{step + 1} of {cfg.steps}; checkpoint {ckpt}: run it again to resume")
        if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 and step + 1 < end:
            state.step, state.elapsed = step + 1, clock()
            save()
    return res


def _progress_bar(run: RunConfig, start: int, end: int, show: bool | None) -> tqdm:
    """Steps start..end of the run; ``show`` None: only on a terminal."""
    return tqdm(range(start, end), initial=start, total=run.train.steps, desc=f"train {run.name}/{run.scale}",
                disable=None if show is None else not show, leave=False, mininterval=1.0)


def _check_tokenizer(corpus: Corpus, run: RunConfig) -> str:
    vocab = corpus.tokenizer.get_vocab_size()
    if vocab > run.model.vocab_size:
        raise ValueError(f"tokenizer has {vocab} tokens but the model's vocab_size is {run.model.vocab_size}")
    return tokenizer_hash(corpus.tokenizer)


def _join(device: torch.device, batch_size: int) -> tuple[torch.device, int]:
    """Join torchrun's process group (if any): this process's device and rank."""
    distributed.init_from_env(device)
    rank, world = distributed.rank_world()
    if batch_size % world:
        raise ValueError(f"batch_size {batch_size} is not divisible by the number of processes {world}")
    return distributed.local_device(device), rank
