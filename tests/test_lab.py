"""JupyterLab as the reader of the executable paper: a real server on a free port opens a paired .py source as a
notebook through its contents API, runs a cell in a real kernel over the server's websocket, and — where Chromium is
available — renders the notebook's cells in the browser (screenshot in paper/smoke/lab.png)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, method: str = "GET", body: dict | None = None) -> dict:
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from tiedlm_lib.paper.lab import write_settings

    write_settings()  # what `make lab` does: .py sources open as notebooks
    port = _free_port()
    home = tmp_path_factory.mktemp("lab-home")
    served = home / "notebooks"  # a copy: the server and the browser never touch the repository's files
    shutil.copytree(ROOT / "notebooks", served, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copy(ROOT / "jupytext.toml", home / "jupytext.toml")
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_DATA_DIR": str(home / "data"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                             "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
                             "--ServerApp.disable_check_xsrf=True", "--allow-root",
                             f"--ServerApp.root_dir={served}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                _get(f"{url}/api/status")
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"JupyterLab exited: {proc.stderr.read()[-2000:]}")
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not answer within 60 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_paired_py_source_opens_as_a_notebook(lab):
    model = _get(f"{lab}/api/contents/04_tradeoff.py?type=notebook&content=1")
    assert model["type"] == "notebook"
    cells = model["content"]["cells"]
    assert cells[0]["cell_type"] == "markdown" and cells[0]["source"].startswith("# 04")
    params = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1 and 'scale = "cpu"' in params[0]["source"]
    assert sum(c["cell_type"] == "code" for c in cells) > 10


def test_a_cell_runs_in_a_real_kernel_over_the_servers_websocket(lab):
    import websocket  # websocket-client, a JupyterLab dependency

    kernel = _get(f"{lab}/api/kernels", "POST", {"name": "python3"})
    ws = websocket.create_connection(f"{lab.replace('http', 'ws')}/api/kernels/{kernel['id']}/channels", timeout=60)
    try:
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({"header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test",
                                       "session": uuid.uuid4().hex, "version": "5.3"},
                            "parent_header": {}, "metadata": {}, "channel": "shell",
                            "content": {"code": "from tiedlm_lib.model.layout import parse_layout\n"
                                                "len(parse_layout('S S A*16 S S'))",
                                        "silent": False, "store_history": False, "user_expressions": {},
                                        "allow_stdin": False}}))
        result = None
        deadline = time.time() + 60
        while time.time() < deadline:
            m = json.loads(ws.recv())
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "execute_result":
                result = m["content"]["data"]["text/plain"]
            if m["msg_type"] == "error":
                pytest.fail(f"the cell raised: {m['content']['ename']}: {m['content']['evalue']}")
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle" and result is not None:
                break
        assert result == "5"
    finally:
        ws.close()
        _get(f"{lab}/api/kernels/{kernel['id']}", "DELETE")


def test_make_lab_settings_merge_and_refuse_a_corrupt_file(tmp_path):
    from tiedlm_lib.paper.lab import SETTINGS, overrides_path, write_settings

    path = overrides_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}))
    write_settings(tmp_path)
    got = json.loads(path.read_text())
    assert got["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}  # the user's setting kept
    assert all(got[k] == v for k, v in SETTINGS.items())
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        write_settings(tmp_path)
    assert path.read_text() == "{not json"  # nothing overwritten


def test_the_notebook_renders_in_headless_chromium(lab):
    browser = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                   None)
    if browser is None:
        pytest.skip("no Chromium found: `make browser` installs Debian's chromium package; the render check needs it")
    url = f"{lab}/lab/tree/04_tradeoff.py"  # the paired source, as a double-click opens it
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=30000",
            "--window-size=1280,1000"]
    dom = subprocess.run([*args, "--dump-dom", url], capture_output=True, text=True, timeout=180).stdout
    assert "jp-Notebook" in dom and dom.count("jp-Cell ") > 10, dom[-2000:]
    assert "Trade-off" in dom or "trade-off" in dom
    shot = ROOT / "paper" / "smoke" / "lab.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([*args, f"--screenshot={shot}", url], capture_output=True, text=True, timeout=180)
    assert shot.is_file() and shot.stat().st_size > 10_000
