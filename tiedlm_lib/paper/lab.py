"""JupyterLab as a reader of the executable paper: the settings that make a double-click on a paired ``.py`` source
open it as a notebook (jupytext's "Jupytext Notebook" viewer), written into the environment's JupyterLab settings
overrides, so that ``make lab`` gives every user the same behaviour without touching their own settings.

    python -m tiedlm_lib.paper.lab --write-settings
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tiedlm_lib.store.atomic import atomic_write_text

SETTINGS = {
    # a double-click on a paired .py source opens it as a notebook
    "@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"python": "Jupytext Notebook"}},
    # no request to the Jupyter news feed (the project never reaches the network on its own)
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false"},
}


def overrides_path(prefix: str | Path | None = None) -> Path:
    """``<prefix>/share/jupyter/lab/settings/overrides.json``, the environment-wide defaults JupyterLab reads."""
    return Path(prefix or sys.prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


def write_settings(prefix: str | Path | None = None) -> Path:
    """Merge ``SETTINGS`` into the overrides file (other settings kept; a corrupt file is refused, not replaced)."""
    path = overrides_path(prefix)
    current = {}
    if path.is_file():
        try:
            current = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON ({e}); fix or remove it, then run this again") from None
    for plugin, values in SETTINGS.items():
        current.setdefault(plugin, {}).update(values)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, json.dumps(current, indent=1))


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-settings"]:
        print("usage: python -m tiedlm_lib.paper.lab --write-settings", file=sys.stderr)
        sys.exit(2)
    print(f"JupyterLab settings: {write_settings()}")
