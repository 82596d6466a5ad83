"""Paper-scale step time and peak memory per backprop mode — one command, well under 10 minutes on one GPU.

    python benchmarks/gpu_check.py                      # v5/v10 model (23.05M), B=32, L=256, K=30, bf16, 200 steps
    python benchmarks/gpu_check.py --config v3          # the 7.27M model of the paper's memory test
    python benchmarks/gpu_check.py --device cpu --scale smoke --steps 5   # a sanity run of the script on a CPU

The batches are synthetic (uniform random tokens, each row right-padded from a random length in [L/4, L], as the
paper's padded batches were), so no data is needed; the step is the library's own training step (AdamW, fused on
CUDA; bf16 autocast; fp32 CE with pad ignored; clipping at 1.0). Peak memory is CUDA's max_memory_allocated over the
timed steps (reset after warm-up); on CPU it is the process's peak RSS, which only grows across modes.
Paper anchors (PROTOCOL §4.8, §6.3): 143 ms/step full vs 69 ms phantom for the 23M runs on an RTX 4090D-class GPU;
6.45 vs 3.50 GB peak for the 7.27M memory test.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import torch
from _common import train_step, write_csv  # benchmarks/ is the script's directory

from tiedlm_lib import ModelConfig, TiedLM, TrainConfig, paper_config
from tiedlm_lib.data import shift_targets


def batches(vocab: int, B: int, L: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    while True:
        x = torch.randint(1, vocab, (B, L), generator=g)
        lengths = torch.randint(L // 4, L + 1, (B,), generator=g)
        x[torch.arange(L)[None, :] >= lengths[:, None]] = 0
        yield x, shift_targets(x)


def measure(cfg: ModelConfig, mode: str, device: torch.device, B: int, steps: int, warmup: int) -> dict:
    torch.manual_seed(0)
    model = TiedLM(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=4e-4, betas=(0.9, 0.95), weight_decay=0.01,
                            fused=device.type == "cuda")
    tcfg = TrainConfig(steps=steps + 1, batch_size=B, backprop=mode)
    data = batches(cfg.vocab_size, B, cfg.max_seq_len)
    cuda = device.type == "cuda"
    t0 = None
    for step in range(steps):
        if step == warmup:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
        x, y = (t.to(device, non_blocking=True) for t in next(data))
        loss = train_step(model, opt, x, y, tcfg, amp=cuda)
    if cuda:
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / (steps - warmup)
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {"mode": mode, "ms_per_step": 1000 * dt, "peak_GiB": peak, "final_loss": float(loss.detach()),
            "params": model.num_params(), "tokens_per_s": B * cfg.max_seq_len / dt}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="v5", help="paper version whose model to build (v5 = v10's model)")
    p.add_argument("--scale", default="paper", choices=["paper", "smoke"],
                   help="smoke: a d32 K=4 model at L=64, to check the script on a CPU")
    p.add_argument("--modes", default="full,phantom,checkpoint")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--csv", default=None, help="also write the table as CSV")
    a = p.parse_args(argv)
    if a.steps <= a.warmup:
        p.error("--steps must exceed --warmup")
    cfg = paper_config(a.config)
    if a.scale == "smoke":
        cfg = ModelConfig(vocab_size=320, d_model=32, n_heads=2, layout=cfg.layout.replace("*30", "*4"),
                          max_seq_len=64)
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        print(f"device: {torch.cuda.get_device_name(device)}; torch {torch.__version__}")
    print(f"model {a.config} ({cfg.layout}, d{cfg.d_model}, V={cfg.vocab_size}), B={a.batch}, L={cfg.max_seq_len}, "
          f"{a.steps} steps ({a.warmup} warm-up) per mode", flush=True)
    rows = []
    for mode in a.modes.split(","):
        r = measure(cfg, mode, device, a.batch, a.steps, a.warmup)
        rows.append(r)
        print(f"  {mode:10s} {r['ms_per_step']:8.1f} ms/step  {r['tokens_per_s']:10.0f} tok/s  "
              f"peak {r['peak_GiB']:6.2f} GiB  loss {r['final_loss']:.3f}", flush=True)
    base = {r["mode"]: r for r in rows}
    if "full" in base:
        for r in rows:
            print(f"  {r['mode']:10s} time x{r['ms_per_step'] / base['full']['ms_per_step']:.2f} of full, "
                  f"memory x{r['peak_GiB'] / base['full']['peak_GiB']:.2f} of full")
    print("paper anchors: 143 ms full vs 69 ms phantom (23M); 6.45 vs 3.50 GB (7.27M memtest)")
    write_csv(rows, a.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
