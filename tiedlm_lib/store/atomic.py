"""Atomic file writes: a reader sees the old file or the complete new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, fsync it, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; outputs are ordinary files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    def w(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return atomic_write(path, w)


def replace_block(path: str | Path, begin: str, end: str, body: str) -> bool:
    """Rewrite what lies between the marker lines ``begin`` and ``end`` of a text file (a generated block of a
    README) with ``body``, atomically; True if the file changed. A file without both markers is an error, not a
    silent no-op: the block would otherwise go stale unnoticed."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if begin not in text or end not in text.split(begin, 1)[1]:
        raise ValueError(f"{path} has no generated block {begin!r} ... {end!r}")
    head, rest = text.split(begin, 1)
    new = f"{head}{begin}\n{body.strip()}\n{end}{rest.split(end, 1)[1]}"
    if new != text:
        atomic_write_text(path, new)
    return new != text
