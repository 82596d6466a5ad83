"""Where runs and caches live: inside the project folder (ignored by git), whatever directory the caller starts in.

``TIEDLM_HOME`` overrides the project root, ``TIEDLM_RUNS`` the runs directory, ``TIEDLM_CACHE`` the cache
(tokenizers, tokenised corpora, HF ``datasets`` cache)."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    if os.environ.get("TIEDLM_HOME"):
        return Path(os.environ["TIEDLM_HOME"]).resolve()
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "tiedlm_lib").is_dir() and (d / "pyproject.toml").is_file():
            return d
    pkg_parent = Path(__file__).resolve().parents[1]  # an editable install: the checkout holding the package
    if (pkg_parent / "pyproject.toml").is_file():
        return pkg_parent
    return here


def runs_dir() -> Path:
    return Path(os.environ.get("TIEDLM_RUNS") or project_root() / "runs")


def cache_dir() -> Path:
    return Path(os.environ.get("TIEDLM_CACHE") or project_root() / ".cache")


def setup_hf_home() -> None:
    """Keep the HF caches inside the project unless the user chose a place."""
    os.environ.setdefault("HF_HOME", str(cache_dir() / "hf"))
