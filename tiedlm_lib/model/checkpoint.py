"""Checkpoints as single safetensors files: weights (and optimiser moments) as tensors, everything else as JSON
in the header metadata. Written atomically; a checkpoint from another configuration is refused by name."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save_file

from tiedlm_lib.model.config import ModelConfig, RunConfig
from tiedlm_lib.model.tied import TiedLM
from tiedlm_lib.store.atomic import atomic_write


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable, truncated, or from another configuration."""


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        a, b = list(a), list(b)
    return [] if a == b else [f"{prefix[:-1]}: checkpoint {a!r} vs requested {b!r}"]


def config_diff(saved: dict, wanted: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """Differences between a saved and a wanted config dict, by dotted key."""
    saved, wanted = json.loads(json.dumps(saved)), json.loads(json.dumps(wanted))
    return [d for d in _diff(saved, wanted) if not d.split(":")[0].startswith(ignore)]


def saved_run(d: Any, where: str | Path) -> RunConfig:
    """A run config as saved (config.json, a checkpoint's metadata), with the fields it predates at their defaults;
    a missing or unreadable one (a field since removed) is refused, naming ``where``."""
    try:
        return RunConfig.from_dict(d)
    except (TypeError, KeyError, ValueError) as e:
        raise CheckpointError(f"{where}: the saved run configuration cannot be read by this version ({e})") from None


def save_checkpoint(path: str | Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> Path:
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    return atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata={"tiedlm": json.dumps(meta)}))


def read_meta(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        return json.loads(meta["tiedlm"])
    except (SafetensorError, KeyError, json.JSONDecodeError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not a readable tiedlm checkpoint ({type(e).__name__}: {e})") from None


def load_checkpoint(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    meta = read_meta(path)
    try:
        return load_file(str(path)), meta
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path}: corrupted checkpoint ({type(e).__name__}: {e})") from None


def save_model(path: str | Path, model: TiedLM, run: RunConfig | None = None, **extra: Any) -> Path:
    meta = {"model": dataclasses.asdict(model.config), "run": run.to_dict() if run else None, **extra}
    return save_checkpoint(path, model.state_dict(), meta)


def load_model(path: str | Path, config: ModelConfig | None = None) -> TiedLM:
    """Load a model saved by ``save_model`` (or a training checkpoint). If ``config`` is given it must match (a
    field the file predates counts as its default, as in the runs cache's fingerprint)."""
    tensors, meta = load_checkpoint(path)
    if "model" not in meta:
        raise CheckpointError(f"{path}: checkpoint carries no model configuration")
    try:
        saved = ModelConfig(**meta["model"])  # fields the file predates take their defaults
    except TypeError as e:
        raise CheckpointError(f"{path}: the saved model configuration cannot be read by this version ({e})") from None
    if config is not None:
        diffs = config_diff(dataclasses.asdict(saved), dataclasses.asdict(config))
        if diffs:
            raise CheckpointError(f"{path}: checkpoint is from another model configuration: " + "; ".join(diffs))
    model = TiedLM(saved)
    weights = {k[len("model."):] if k.startswith("model.") else k: v for k, v in tensors.items()
               if not k.startswith("optim.")}
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as e:
        raise CheckpointError(f"{path}: weights do not fit the saved configuration ({e})") from None
    return model
