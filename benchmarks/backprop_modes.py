"""Peak memory and time per training step for each backprop mode and loop depth (CPU or CUDA).

    python benchmarks/backprop_modes.py                       # cpu-scale large model, k in 4, 8, 16, 30
    python benchmarks/backprop_modes.py --csv benchmarks/results/backprop_modes_cpu.csv

Each (mode, k) runs in a fresh subprocess, so peak memory is that configuration's own: on CPU the growth of the
process's peak RSS over its state after building the model, optimiser and batch (activations, gradients and the
optimiser moments — the last two the same for every mode), measured in a second process with
MALLOC_MMAP_THRESHOLD_=65536 so that freed tensors leave the resident set (see the comment in main); on CUDA
max_memory_allocated over the same span. Time is the median over the timed steps (after warm-up), with the default
allocator. The step is the library's: forward, fp32 CE, backward, clip, AdamW.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from _common import train_step, write_csv  # benchmarks/ is the script's directory

MODES = ["full", "checkpoint", "phantom", "phantom-last", "truncated:4"]


def one(mode: str, k: int, d: int, heads: int, vocab: int, B: int, T: int, steps: int, warmup: int,
        device: str) -> dict:
    import torch

    from tiedlm_lib import ModelConfig, TiedLM, TrainConfig
    from tiedlm_lib.data import shift_targets

    torch.manual_seed(0)
    dev = torch.device(device)
    model = TiedLM(ModelConfig(vocab_size=vocab, d_model=d, n_heads=heads, layout=f"S S A*{k} S S",
                               max_seq_len=T)).to(dev)
    torch.nn.init.normal_(model.head.weight, std=0.02)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(1, vocab, (B, T), generator=g).to(dev)
    y = shift_targets(x)
    cfg = TrainConfig(steps=steps + 1, batch_size=B, backprop=mode)
    cuda = dev.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        loss = train_step(model, opt, x, y, cfg)
        if cuda:
            torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - t0)
    peak = (torch.cuda.max_memory_allocated() if cuda else
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) - base
    return {"mode": mode, "k": k, "d_model": d, "batch": B, "seq_len": T, "device": device,
            "s_per_step": statistics.median(times), "peak_MiB": peak / 2**20, "loss": float(loss)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--ks", default="4,8,16,30")
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--csv", default=None)
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: run one config, print JSON
    a = p.parse_args(argv)
    common = (a.d, a.heads, a.vocab, a.batch, a.seq, a.steps, a.warmup, a.device)
    if a.one:
        mode, k = a.one.rsplit("@", 1)
        print(json.dumps(one(mode, int(k), *common)))
        return 0
    rows = []
    for k in (int(v) for v in a.ks.split(",")):
        for mode in a.modes.split(","):
            cmd = [sys.executable, __file__, "--one", f"{mode}@{k}", "--d", str(a.d), "--heads", str(a.heads),
                   "--vocab", str(a.vocab), "--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps),
                   "--warmup", str(a.warmup), "--device", a.device]

            def run(env, cmd=cmd):
                out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
                return json.loads(out.stdout.strip().splitlines()[-1])

            r = run(os.environ)  # time, with the allocator as users run it
            if a.device == "cpu":
                # Memory in a second process whose glibc returns every large freed block to the OS: otherwise freed
                # temporaries interleaved with retained tensors stay resident (heap fragmentation) and peak RSS
                # overstates live memory (checkpoint at k=30 read 1.62x phantom that way, 1.06x this way).
                r["peak_MiB"] = run({**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"})["peak_MiB"]
            rows.append(r)
            print(f"k={k:3d} {mode:13s} {r['s_per_step']:.3f} s/step  peak {r['peak_MiB']:8.1f} MiB", flush=True)
    by = {(r["mode"], r["k"]): r for r in rows}
    print("ratios: checkpoint/phantom memory, checkpoint/full time")
    for k in sorted({r["k"] for r in rows}):
        if all((m, k) in by for m in ("full", "checkpoint", "phantom")):
            c, ph, f = by["checkpoint", k], by["phantom", k], by["full", k]
            print(f"  k={k:3d}: memory x{c['peak_MiB'] / ph['peak_MiB']:.2f}, "
                  f"time x{c['s_per_step'] / f['s_per_step']:.2f}"
                  f"  (full/phantom memory x{f['peak_MiB'] / ph['peak_MiB']:.2f})")
    write_csv(rows, a.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
