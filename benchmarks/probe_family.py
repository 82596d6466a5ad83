"""Cost and a first look (one seed, not a verdict) of the readout-probe family on a cpu-scale single-depth model.

For every probe (placement x form, tiedlm_lib.depth.readout) the calibration share of the k=1 -> k=16 prefix gap with 2
refits, then the share against calibration tokens for the diagonal and full forms at both placements, with the
seconds each took. Section 10 is where such numbers become verdicts (several seeds, stated criteria).

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/probe_family.py v3     # trains v3 at cpu first if not cached
"""
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tiedlm_lib import get_run
from tiedlm_lib.data import eval_batches
from tiedlm_lib.depth.dcp import split_documents
from tiedlm_lib.depth.readout import ProbeSpec, all_probes, collect_states, data_curve, share_by_probe
from tiedlm_lib.evaluation.analysis import cached_corpus
from tiedlm_lib.model.schedules import plan

name = sys.argv[1] if len(sys.argv) > 1 else "v3"
OUT = Path(__file__).resolve().parent / "results"
t0 = time.time()
run = get_run(name, "cpu", 0, progress=False)
print(f"{name} ready after {time.time() - t0:.0f} s", flush=True)
cfg = run.config
corpus = cached_corpus(cfg.data)
n_val = len(corpus.val)
cal, ev = split_documents(n_val, 100, 300, seed=0)
make = lambda idx: (lambda: eval_batches(corpus.val, cfg.data.seq_len, cfg.train.batch_size, indices=idx))
t = time.time()
FIT = dict(lams=(1e-3, 1e-2, 1e-1), iters=60)
rows = []
for spec in all_probes():
    t1 = time.time()
    rows += share_by_probe(run.model, make(cal), make(ev), 1, 16, probes=[spec], n_refit=2, n_boot=1000, **FIT)
    r = rows[-1]
    print(f"  {spec.name}: share {r['share']:.3f} [{r['share lo']:.3f}, {r['share hi']:.3f}] "
          f"lambda {r['lambda k_min']}/{r['lambda k_max']} ({time.time() - t1:.0f} s)", flush=True)
print(f"share_by_probe (8 probes, 2 refits): {time.time() - t:.0f} s", flush=True)
df = pd.DataFrame(rows)
print(df[["probe", "share", "share lo", "share hi", "raw gap", "calibrated gap", "lambda k_min", "lambda k_max",
          "lambda at edge", "calibration tokens"]].round(4).to_string(index=False), flush=True)
df.to_csv(f"{OUT}/probe_family_{name}_cpu.csv", index=False)
# the data curve: calibration documents from the held-out pool outside the evaluation documents
pool = np.setdiff1d(np.arange(n_val), ev)
layout = cfg.model.layout
plans = (plan(layout, "prefix", 1), plan(layout, "prefix", 16))
curve = []
for spec in (ProbeSpec("head", "diagonal"), ProbeSpec("loop", "diagonal"), ProbeSpec("head", "full"),
             ProbeSpec("loop", "full")):
    t = time.time()
    P = tuple(collect_states(run.model, make(pool)(), p, spec.placement) for p in plans)
    E = tuple(collect_states(run.model, make(ev)(), p, spec.placement) for p in plans)
    budgets = [b for b in (1000, 3000, 10000, 30000) if b < P[0].n_tokens] + [P[0].n_tokens]
    rows = data_curve(run.model, spec, P, E, budgets, n_boot=500, **FIT)
    print(f"data curve {spec.name}: {time.time() - t:.0f} s", flush=True)
    curve += rows
cd = pd.DataFrame(curve)
print(cd.round(4).to_string(index=False))
cd.to_csv(f"{OUT}/probe_family_curve_{name}_cpu.csv", index=False)
print(f"pool {len(pool)} docs; total {time.time() - t0:.0f} s")
