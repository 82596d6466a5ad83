"""Executing the sections: papermill into ``paper/<scale>/`` (or a scratch folder), in order or several at once with
single-threaded kernels, each section moved into place only when it succeeds, its time recorded; and the check that
no page, table or ledger names a path of the executing machine."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from tiedlm_lib.paths import project_root
from tiedlm_lib.store.atomic import atomic_write_text

# Sections that read another section's tables start after it in a parallel run (a sequential run keeps the numbered
# order, which already has them after it); the claims ledger (11) runs after every other section.
AFTER = {"13_your_model": ("10_depth_control_protocol",)}
# Sections defined at some scales only: the size ladder (section 14) is a cpu-scale study, with a smoke ladder for CI
# (``runs.ladder.LADDERS``; tests/test_across_sizes.py keeps the two in step). At another scale it is left out, said so.
ONLY_AT = {"14_across_sizes": ("smoke", "cpu")}
PARTIAL = ".partial"  # under paper/<scale>/: notebooks being executed (never committed; see .gitignore)


# The rehearsal's evaluation budgets (`--rehearse`): every notebook at the paper scale's exact models, with its
# document, batch, bootstrap and fit budgets cut so that all twelve run on 2 CPU cores. The logits of V = 23005 at
# seq 256 are 23.5 MB a sequence per depth, so every pass that stores per-depth logits gets a handful of documents.
REHEARSAL_PARAMS: dict[str, dict] = {
    "02_backprop": {"n_boot": 50},
    "03_depth_scaling": {"n_boot": 50},
    "04_tradeoff": {"n_boot": 50, "taus": [0.0, 0.8]},
    "05_padding_benchmark": {"n_boot": 50, "n_batches": 3, "batch_size": 2, "pool": 60},
    "06_iso_param_2x2": {"n_boot": 50, "n_batches": 3, "batch_size": 2},
    "07_multi_loop": {"n_boot": 50, "n_batches": 3, "batch_size": 2},
    "08_sft_generation": {"n_boot": 50, "n_batches": 3, "batch_size": 2, "n_prompts": 3, "n_shown": 1, "max_new": 4},
    "09_negative_results": {"n_boot": 50, "n_probe_docs": 8, "n_trace_docs": 4, "extrapolate": 1},
    "10_depth_control_protocol": {"n_boot": 50, "n_cal": 2, "n_eval": 4, "n_refit": 1, "probe_boot": 20,
                                  "probe_iters": 2, "curve_budgets": [300, 600], "intervention_warmup": 1,
                                  "full_depth_grid": False},
    "13_your_model": {"n_boot": 50, "n_cal": 2, "n_eval": 4, "probe_iters": 2},
    "12_depth_at_inference": {"n_prompts": 2, "max_new": 4, "draft_depths": [1, 8], "draft_lens": [2], "repeats": 1,
                              "n_probe_docs": 4, "n_boot": 20, "eps_grid": [0.3], "n_splits": 3},
}


def notebooks(root: Path | None = None, only: list[str] | None = None) -> list[Path]:
    root = root or project_root()
    # in number order, the claims ledger last: it collects every other section's verdicts
    nbs = sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"), key=lambda p: (p.stem == "11_claims", p.stem))
    if only:
        names = {p.stem for p in nbs}
        unknown = [n for n in only if n not in names]
        if unknown:
            raise ValueError(f"unknown notebooks {unknown}: expected names among {sorted(names)}")
        nbs = [p for p in nbs if p.stem in only]
    return nbs


def ipc_kernel_manager():
    """A kernel manager whose kernels talk over local IPC sockets (in Jupyter's runtime folder) instead of TCP on
    localhost: nothing listens on a port, and the kernel does not print its warning that TCP without encryption can be
    read by others on the machine, once per section."""
    import uuid

    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.paths import jupyter_runtime_dir
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport(self):
            return "ipc"

        @default("ip")
        def _ip(self):
            Path(jupyter_runtime_dir()).mkdir(parents=True, exist_ok=True)
            return str(Path(jupyter_runtime_dir()) / f"tiedlm-kernel-{uuid.uuid4().hex[:12]}")

    return IPCKernelManager


class NotebookFailed(RuntimeError):
    pass


def output_name(scale: str, seeds: list[int] | None = None) -> str:
    """Where a run of the paper goes: ``paper/<name>/`` and ``figures/<name>/``. The scale's own seeds (or none given)
    write the scale's paper; any other seed set is a first look of its own (``cpu-seeds0``), so that a quick
    single-seed run never overwrites the five-seed results."""
    from tiedlm_lib.runs import get_scale

    own = get_scale(scale).seeds
    if seeds is None or sorted(seeds) == sorted(own):
        return scale
    return f"{scale}-seeds{'_'.join(map(str, sorted(seeds)))}"


def _outputs(scale: str, seeds: list[int] | None, root: Path, into: Path | None = None) -> tuple[Path, dict]:
    """The checked scale and seeds as the notebooks' parameters, and the folder their executed copies go to (made).
    ``into``: a folder of their own for the executed notebooks, tables, ledger and figures (``make verify``'s scratch:
    ``<into>/paper`` and ``<into>/figures``), never the committed ones."""
    from tiedlm_lib.runs import get_scale  # torch only when executing

    get_scale(scale)
    if seeds is not None:
        from tiedlm_lib.runs.registry import check_seeds

        seeds = check_seeds(seeds)
        if sorted(seeds) == sorted(get_scale(scale).seeds):
            seeds = None  # the scale's own seeds: its paper, with its extended seeds (registry.extended_seeds)
    name = output_name(scale, seeds)
    out_dir = Path(into) / "paper" if into else root / "paper" / name
    out_dir.mkdir(parents=True, exist_ok=True)
    params = {"scale": scale, **({} if seeds is None else {"seeds": seeds})}
    if into:
        params |= {"paper_dir": str(out_dir), "figures_dir": str(Path(into) / "figures")}
    elif name != scale:  # a first look of its own: tables, ledger and figures beside, never over, the scale's
        params |= {"paper_dir": str(out_dir), "figures_dir": str(root / "figures" / name)}
    return out_dir, params


def execute(scale: str, only: list[str] | None = None, root: Path | None = None, log=print,
            seeds: list[int] | None = None, jobs: int = 1, into: Path | None = None) -> list[dict]:
    """Execute the notebooks with papermill into paper/<scale>/; returns [{notebook, seconds}]. ``seeds``: the
    training seeds of every section (default: the scale's); other seeds than the scale's give a quick first look
    whose verdicts say "single-seed" in their basis, written to paper/<scale>-seeds<...>/ (``output_name``). ``jobs``
    > 1 executes that many sections at once, each kernel single-threaded (on 2 cores two single-threaded processes
    train these small models ~1.3x faster than one two-threaded process; a run two sections need is trained once, the
    second waiting on its lock); the claims section runs last, alone. CPU float results depend on the thread count
    (in the fourth or fifth digit), so every kernel is single-threaded however many sections run at once: the
    committed cpu numbers were computed so, and a re-execution gives the same digits (``make verify``). ``into``: a
    scratch folder for every output (``_outputs``)."""
    import papermill as pm  # notebook machinery only when executing, not for the HTML

    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    root = (root or project_root()).resolve()  # absolute: the run changes the working directory
    out_dir, params = _outputs(scale, seeds, root, into)
    nbs = notebooks(root, only)
    left_out = [nb.stem for nb in nbs if scale not in ONLY_AT.get(nb.stem, (scale,))]
    for name in left_out:
        log(f"{name} is defined at the scales {', '.join(ONLY_AT[name])}, not at {scale}: left out")
    nbs = [nb for nb in nbs if nb.stem not in left_out]
    budgets = REHEARSAL_PARAMS if scale == "rehearsal" else {}
    timings: list[dict] = []
    start = time.perf_counter()
    lock = threading.Lock()

    def run_one(i: int, nb: Path) -> None:
        log(f"[{i}/{len(nbs)}] {nb.stem} at {scale} ...")
        t0 = time.perf_counter()
        try:
            # no cwd=: papermill would os.chdir per call, which is process-wide and races between threads (one
            # section's exit restores the old directory while another's kernel is still starting); execute sets
            # the kernels' working directory once for the whole run instead
            # executed into .partial/ and moved into place only when it succeeds: a failed or interrupted section
            # leaves the executed notebook it replaces untouched
            partial = out_dir / PARTIAL / nb.name
            partial.parent.mkdir(parents=True, exist_ok=True)
            pm.execute_notebook(str(nb), str(partial), parameters={**params, **budgets.get(nb.stem, {})},
                                kernel_name="python3", progress_bar=False, log_output=False,
                                kernel_manager_class=ipc_kernel_manager())
            _without_machine_paths(partial, root, out_dir / nb.name)
            os.replace(partial, out_dir / nb.name)
        except pm.PapermillExecutionError as e:
            raise NotebookFailed(f"{nb.stem} failed in cell {e.cell_index} (execution count {e.exec_count}): "
                                 f"{e.ename}: {e.evalue} — the partial notebook is {partial}") from None
        dt = time.perf_counter() - t0
        with lock:
            timings.append({"notebook": nb.stem, "seconds": round(dt, 1)})
            _record_timing(out_dir / "timings.json", timings[-1])  # after each notebook: a later failure keeps it
        log(f"      {nb.stem} done in {dt:.0f} s (total {time.perf_counter() - start:.0f} s)")

    numbered = list(enumerate(nbs, 1))
    with contextlib.chdir(root / "notebooks"), _single_threaded_kernels():  # ../runs and ../figures from there
        if jobs == 1:
            for i, nb in numbered:
                run_one(i, nb)
        else:
            _run_parallel(run_one, numbered, jobs)
    return timings


def _run_parallel(run_one, numbered: list, jobs: int) -> None:
    """Every section but the claims ledger on ``jobs`` threads of single-threaded kernels, each started once the
    sections it reads (``AFTER``) have finished in this run, then the ledger alone."""
    last = [(i, nb) for i, nb in numbered if nb.stem == "11_claims"]
    rest = [(i, nb) for i, nb in numbered if (i, nb) not in last]
    here = {nb.stem for _, nb in rest}
    waiting = {(i, nb): {d for d in AFTER.get(nb.stem, ()) if d in here} for i, nb in rest}
    finished: set[str] = set()
    pool = ThreadPoolExecutor(jobs)
    running: dict = {}

    def start_ready():
        for item, deps in list(waiting.items()):
            if deps <= finished:
                del waiting[item]
                running[pool.submit(run_one, *item)] = item[1].stem

    try:
        start_ready()
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in done:
                name = running.pop(f)
                f.result()  # the first failure stops the run: sections not started are cancelled
                finished.add(name)
            start_ready()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    for i, nb in last:
        run_one(i, nb)


@contextlib.contextmanager
def _single_threaded_kernels():
    """Kernels started inside inherit one thread per library (OpenMP, MKL, torch's intra-op pool)."""
    keys = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
    old = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: "1" for k in keys})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _cell_parameters(cells, tags: tuple[str, ...]) -> dict:
    """The literal assignments of the cells tagged with ``tags``, in that order of tags (later ones win)."""
    out: dict = {}
    for tag in tags:
        for cell in cells:
            if tag not in cell.get("metadata", {}).get("tags", []):
                continue
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            for node in ast.parse(src).body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    with contextlib.suppress(ValueError):  # not a literal (e.g. a path built from others)
                        out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def executed_parameters(path: str | Path) -> dict:
    """The parameters an executed notebook ran with: its ``parameters`` cell, then papermill's injected ones (literal
    assignments only)."""
    return _cell_parameters(json.loads(Path(path).read_text())["cells"], ("parameters", "injected-parameters"))


def run_times(pdir: Path) -> list[dict]:
    """Each executed notebook's wall time and start (UTC, to the minute) from its papermill metadata, in section
    order: the times of the executions the pages show. ``timings.json`` only logs ``make paper``'s runs, and a section
    re-executed alone (``make nb``) would leave its time there stale. A notebook without the record is skipped."""
    rows = []
    for nb in sorted(Path(pdir).glob("[0-9][0-9]_*.ipynb")):
        pm_meta = json.loads(nb.read_text()).get("metadata", {}).get("papermill", {})
        if isinstance(pm_meta.get("duration"), (int, float)):
            rows.append({"notebook": nb.stem, "seconds": float(pm_meta["duration"]),
                         "executed": str(pm_meta.get("start_time") or "")[:16].replace("T", " ")})
    return rows


def _record_timing(path: Path, timing: dict) -> None:
    """Merge one notebook's wall time into timings.json, keeping the other notebooks' earlier times."""
    old = {t["notebook"]: t for t in json.loads(path.read_text())} if path.is_file() else {}
    old[timing["notebook"]] = timing
    atomic_write_text(path, json.dumps(sorted(old.values(), key=lambda t: t["notebook"]), indent=1))


# An absolute path of the executing machine (issue 54): none may reach a page, a table or the ledger. A path begins
# after a character that cannot precede one in prose or code (so not inside a URL or base64 data).
ABSOLUTE_PATH = re.compile(r"(?<![\w./+~])(?:/(?:home|root|work|tmp|Users)/[^\s\"'<>)\]},;]*|[A-Za-z]:\\[^\s\"'<>]*)")
_KERNEL_CELL = re.compile(r"/tmp/ipykernel_\d+/\d+\.py")
_SITE_PACKAGES = re.compile(r"(?<![\w./+~])/[^\s\"'<>]*?/site-packages/")


def relative_paths(text: str, roots) -> str:
    """``text`` with the executing machine's paths made project-relative: a path under one of ``roots`` (the
    project's folders on the machines that executed or render it) relative to it, a library's path from its
    ``site-packages/``, a kernel cell's temporary file as ``<cell>``, the home folder as ``~``."""
    for r in sorted({str(Path(r)) for r in roots if r and str(r) != "/"}, key=len, reverse=True):
        at = r"(?<![\w./+~])" + re.escape(r)
        text = re.sub(at + r"(?![\w-])(?!\.\w)/?", lambda m: "" if m.group(0).endswith("/") else ".", text)
    text = _KERNEL_CELL.sub("<cell>", text)
    text = _SITE_PACKAGES.sub("site-packages/", text)
    home = str(Path.home())
    if home not in ("/", ""):
        text = re.sub(r"(?<![\w./+~])" + re.escape(home) + r"/", "~/", text)
    return text


def machine_paths(text: str) -> list[str]:
    """The absolute paths of an executing machine in ``text`` (``ABSOLUTE_PATH``), each once."""
    return list(dict.fromkeys(m.group(0) for m in ABSOLUTE_PATH.finditer(text)))


def _map_strings(node, fn):
    if isinstance(node, str):
        return fn(node)
    if isinstance(node, list):
        return [_map_strings(x, fn) for x in node]
    if isinstance(node, dict):
        return type(node)({k: _map_strings(v, fn) for k, v in node.items()})
    return node


def _without_machine_paths(path: Path, root: Path, final: Path) -> None:
    """An executed notebook rewritten with project-relative paths: papermill's record of its input and output, and
    every output a cell printed (``relative_paths``)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nb = nbformat.from_dict(_map_strings(nb, lambda t: relative_paths(t, [root])))
    pm_meta = nb.metadata.get("papermill")
    if isinstance(pm_meta, dict) and pm_meta.get("output_path"):
        with contextlib.suppress(ValueError):
            pm_meta["output_path"] = Path(final).resolve().relative_to(root).as_posix()
    nbformat.write(nb, path)


def executing_roots(nb) -> list[str]:
    """The project folders a notebook was executed in, from papermill's record of its input path
    (``<root>/notebooks/<name>.ipynb``) where that is absolute."""
    src = str(nb.metadata.get("papermill", {}).get("input_path") or "")
    p = Path(src)
    return [str(p.parent.parent)] if p.is_absolute() and p.parent.name == "notebooks" else []


def check_no_machine_paths(pdir: Path) -> None:
    """Refuse (ValueError naming the file and the path) a table or ledger file of ``paper/<name>/`` that names an
    absolute path of the executing machine."""
    files = [*sorted(pdir.glob("*.json")), *sorted(pdir.glob("*.md")), *sorted(pdir.glob("*.csv")),
             *sorted((pdir / "tables").glob("*"))]
    for f in files:
        if f.is_file():
            found = machine_paths(f.read_text(errors="replace"))
            if found:
                raise ValueError(f"{f} names an absolute path of the executing machine ({found[0]}): write it "
                                 "relative to the project (report.shown_path)")

