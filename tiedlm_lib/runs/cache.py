"""The runs cache: each run trained once per exact configuration, shared by every notebook and process.

A run lives in ``runs/<scale>/<name>-s<seed>-<fingerprint>/``; the fingerprint hashes the fields of the config that
differ from their defaults (``RunConfig.fingerprint``). An entry is complete once ``result.json`` is written, after
the final weights. Concurrent callers asking for one run wait on a file lock and train it once; under torchrun every
rank trains together and rank 0 decides whether training is needed.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tiedlm_lib import devices
from tiedlm_lib.model.checkpoint import config_diff, load_model, saved_run
from tiedlm_lib.model.config import LABELS, RunConfig
from tiedlm_lib.model.tied import TiedLM
from tiedlm_lib.paths import runs_dir
from tiedlm_lib.runs.registry import experiment
from tiedlm_lib.store.atomic import atomic_write_text
from tiedlm_lib.training import distributed
from tiedlm_lib.training.loop import FINAL, kept_weights_name, train


@dataclass
class Run:
    config: RunConfig
    dir: Path
    model: TiedLM
    fresh: bool = False  # trained (or resumed) by this call rather than loaded from the cache

    @property
    def metrics(self) -> list[dict[str, Any]]:
        p = self.dir / "metrics.jsonl"
        return [json.loads(line) for line in p.read_text().splitlines()] if p.is_file() else []

    @property
    def result(self) -> dict[str, Any]:
        return json.loads((self.dir / "result.json").read_text())

    @property
    def kept_steps(self) -> list[int]:
        """The steps whose weights the run kept (``TrainConfig.keep_weights_at``), then its final step."""
        return [*self.config.train.keep_weights_at, self.config.train.steps]

    def model_at(self, step: int) -> TiedLM:
        """The model after ``step`` training steps: one of ``kept_steps`` (the last is the trained model). A point
        inside a run is not a shorter run: its learning rate has not decayed to the schedule's end."""
        if step == self.config.train.steps:
            return self.model
        if step not in self.config.train.keep_weights_at:
            raise ValueError(f"run {self.config.name} (seed {self.config.train.seed}) kept its weights at steps "
                             f"{self.kept_steps}, not at {step!r}")
        from tiedlm_lib.model.checkpoint import read_meta

        path = self.dir / kept_weights_name(step)
        saved = read_meta(path).get("step")
        if saved != step:
            raise ValueError(f"{path} holds the weights after step {saved}, not {step}")
        return load_model(path, self.config.model).to(devices.model_device(self.model))


def training_status(result: dict[str, Any] | None, vocab_size: int, max_nonfinite: int | None = None) -> str:
    """A finished training's status, read from its log only (docs/statistics.md amendment 15): ``stopped`` when
    there is no result (training raised on too many non-finite steps, so there are no final weights), or when its
    skipped steps exceed ``max_nonfinite`` (the training config's: it raised once and was resumed from its
    checkpoint to the end, which does not undo the stop); ``diverged`` when the last logged training loss is not
    finite or at least ln V (the full-depth model no better than uniform guessing on its own batches), else
    ``complete`` (skipped steps it recovered from, within ``max_nonfinite``, do not change it)."""
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2, got {vocab_size!r}")
    if max_nonfinite is not None and (not isinstance(max_nonfinite, int) or max_nonfinite < 0):
        raise ValueError(f"max_nonfinite must be a non-negative integer or None, got {max_nonfinite!r}")
    if result is None:
        return "stopped"
    if "final_loss" not in result:
        raise ValueError(f"a run's result holds its final_loss; got the keys {sorted(result)}")
    if max_nonfinite is not None and int(result.get("skipped_steps", 0)) > max_nonfinite:
        return "stopped"
    loss = float(result["final_loss"])
    return "diverged" if not math.isfinite(loss) or loss >= math.log(vocab_size) else "complete"


class StaleRunError(ValueError):
    """A cache entry whose stored config disagrees with the config that hashed to it (a default changed)."""


def run_dir(run: RunConfig, root: str | Path | None = None) -> Path:
    root = Path(root) if root is not None else runs_dir()
    return root / run.scale / run.cache_name()


def is_complete(path: Path) -> bool:
    """A run is complete only once result.json exists; it is written last, after the final weights."""
    return (path / "result.json").is_file() and (path / "model.safetensors").is_file()


def check_entry(path: Path, cfg: RunConfig) -> None:
    """Refuse a cache entry trained with other values than ``cfg`` has. The fingerprint leaves out fields at their
    default, so an entry made before a default changed hashes like a config with the new default; its stored
    config.json still records the old value. Fields the stored config predates count as their defaults."""
    try:
        stored = saved_run(json.loads((path / "config.json").read_text()), path / "config.json")
    except (OSError, ValueError) as e:
        raise StaleRunError(f"runs cache entry {path} cannot be checked: {e}") from None
    diffs = config_diff(stored.to_dict(), cfg.to_dict(), ignore=LABELS)
    missing = [k for k in cfg.train.keep_weights_at if not (path / kept_weights_name(k)).is_file()]
    if missing and not diffs:
        raise StaleRunError(f"runs cache entry {path} lacks the weights it was to keep at steps {missing} "
                            f"({', '.join(kept_weights_name(k) for k in missing)}): delete the entry to retrain it")
    if diffs:
        raise StaleRunError(f"runs cache entry {path} was trained with another configuration than its fingerprint "
                            f"now describes ({'; '.join(diffs)}): a default changed (or a field was removed) since "
                            "it was trained; delete the entry to retrain it, or set the old value explicitly")


def get_run(name_or_config: str | RunConfig, scale: str = "cpu", seed: int = 0,
            overrides: dict[str, Any] | None = None, *, root: str | Path | None = None, train_if_missing: bool = True,
            progress: bool | None = None, device: str | None = None) -> Run:
    """A trained run from the cache, training (or resuming) it first if needed, its model on ``device`` (default:
    ``devices.default_device(None, scale)``: ``TIEDLM_DEVICE``, else CUDA for the paper scale when available, else
    the CPU). Concurrent callers asking for the same run wait on a file lock instead of training it twice. Training a
    paper-scale run on a CPU is refused (weeks of work on a machine that may have a GPU) unless
    ``TIEDLM_ALLOW_CPU_PAPER=1``."""
    cfg = name_or_config if isinstance(name_or_config, RunConfig) else experiment(name_or_config, scale, seed,
                                                                                  overrides)
    device = devices.default_device(device, cfg.scale)
    path = run_dir(cfg, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    distributed.init_from_env(torch.device(device))
    rank, world = distributed.rank_world()
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        if rank == 0:
            fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = distributed.broadcast_object(not is_complete(path))
        if not fresh:
            check_entry(path, cfg)
        elif not train_if_missing:
            raise FileNotFoundError(f"run {cfg.name}/{cfg.scale}/seed {cfg.train.seed} is not in the cache: {path}")
        else:
            _refuse_paper_on_cpu(cfg, device)
            res = train(cfg, path, progress=progress, device=device, runs_root=path.parent.parent)
            if rank == 0:
                atomic_write_text(path / "result.json", json.dumps(
                    {"final_loss": res.final_loss, "skipped_steps": res.skipped_steps, "seconds": res.seconds,
                     "steps": cfg.train.steps, "params": res.model.num_params(), "alpha": res.model.alphas(),
                     "processes": world, "torch_threads": torch.get_num_threads(), "device": str(device)},
                    indent=1))  # float results on a CPU depend on the thread count: recorded beside them
                (path / "checkpoint.safetensors").unlink(missing_ok=True)  # the final weights supersede it
            distributed.barrier()
    return Run(cfg, path, load_model(path / FINAL, cfg.model).to(distributed.local_device(torch.device(device))), fresh)


class PaperScaleOnCPU(ValueError):
    """A paper-scale run asked to train on a CPU (a ValueError: the command line prints its one line)."""


def gpu_time_words(hours: float) -> str:
    """A GPU-time estimate in the unit that reads: minutes under an hour ("about 7 GPU minutes"), hours above."""
    if hours >= 1:
        return f"about {hours:.1f} GPU hours"
    m = max(1, round(hours * 60))
    return f"about {m} GPU minute{'s' if m != 1 else ''}"


def _refuse_paper_on_cpu(cfg: RunConfig, device: str) -> None:
    """A paper-scale run trains on a GPU; on a CPU only when asked for explicitly, told how long it would take."""
    if cfg.scale != "paper" or torch.device(device).type != "cpu" or os.environ.get("TIEDLM_ALLOW_CPU_PAPER") == "1":
        return
    from tiedlm_lib.runs.registry import plan_rows

    row = next((r for r in plan_rows("paper", [cfg.train.seed]) if r["run"] == cfg.name), None)
    gpu = gpu_time_words(row["GPU hours"]) if row else "hours"
    raise PaperScaleOnCPU(f"run {cfg.name} (seed {cfg.train.seed}) is a paper-scale run, {cfg.train.steps:,} steps: "
                          f"{gpu} on one GPU, and tens to hundreds of times that on a CPU. Train it on a GPU "
                          "(device='cuda', or TIEDLM_DEVICE=cuda), or set TIEDLM_ALLOW_CPU_PAPER=1 to train it here "
                          "anyway (the rehearsal, --scale paper --rehearse, needs neither)")


def _cost_key(cfg: RunConfig) -> tuple:
    """Runs that cost the same per step: width, layer applications, backprop mode, supervised depths."""
    from tiedlm_lib.model.layout import parse_layout

    apps = sum(seg.iters for seg in parse_layout(cfg.model.layout))
    return cfg.model.d_model, apps, cfg.train.backprop, tuple(cfg.train.depths or ())


def cache_status(runs: list[RunConfig], root: str | Path | None = None) -> list[dict[str, Any]]:
    """Where each run stands in the cache: "done" (with its training seconds from result.json), "partial" (the
    steps logged so far) or "missing", and for the unfinished ones an estimate of the seconds left — the measured
    seconds per step of finished runs that cost the same per step (``_cost_key``), else of all finished runs scaled
    by layer applications × width², else None (nothing measured yet)."""
    rows, per_step = [], {}
    for cfg in runs:
        path = run_dir(cfg, root)
        row = {"run": cfg.name, "seed": cfg.train.seed, "steps": cfg.train.steps, "dir": path.name}
        if is_complete(path):
            res = json.loads((path / "result.json").read_text())
            row |= {"status": "done", "seconds": float(res["seconds"]), "done steps": cfg.train.steps}
            per_step.setdefault(_cost_key(cfg), []).append(row["seconds"] / cfg.train.steps)
        else:
            logged = [json.loads(line)["step"] for line in (path / "metrics.jsonl").read_text().splitlines()
                      if line.strip()] if (path / "metrics.jsonl").is_file() else []
            row |= {"status": "partial" if logged else "missing", "seconds": None,
                    "done steps": max(logged, default=0)}
        rows.append((cfg, row))

    def unit(key: tuple) -> float:
        return key[0] ** 2 * key[1]

    scaled = [s / unit(k) for k, v in per_step.items() for s in v]
    out = []
    for cfg, row in rows:
        if row["status"] != "done":
            key, left = _cost_key(cfg), cfg.train.steps - row["done steps"]
            if key in per_step:
                row["estimate s"] = left * sorted(per_step[key])[len(per_step[key]) // 2]
            elif scaled:
                row["estimate s"] = left * unit(key) * sorted(scaled)[len(scaled) // 2]
            else:
                row["estimate s"] = None
        out.append(row)
    return out
