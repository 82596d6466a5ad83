"""Training and evaluation throughput of the library against a naive reference written the way the paper's scripts
wrote it: separate q/k/v projections and reshapes, an explicit (B, H, T, T) score matrix with a causal mask filled
with -inf, softmax, then the value product — all fp32 eager. Same configs, same batches, same weights, same run.

    python benchmarks/naive_reference.py                                   # cpu scale: tied v3 and vanilla v9
    python benchmarks/naive_reference.py --csv benchmarks/results/naive_reference_cpu.csv
    python benchmarks/naive_reference.py --profile                         # where a library training step spends time

Before anything is timed, the naive model is loaded with the library model's weights and both must give the same
logits and the same gradients (to 1e-4): the comparison is between two implementations of one function.

Measured: training tokens/s (forward, fp32 CE, backward, clip, AdamW) for the tied sandwich (v3 at cpu scale) and
the iso-parameter vanilla stack (v9 at cpu scale); evaluation tokens/s for a depth sweep k in {1, 2, 4, 8, 16}
computed in one pass (the library's ``model(x, depths=...)``: the loop runs once to 16 and the top stack reads out
each depth) against one pass per depth.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import train_step, write_csv  # benchmarks/ is the script's directory

from tiedlm_lib import TiedLM, TrainConfig, experiment
from tiedlm_lib.data import shift_targets
from tiedlm_lib.evaluation.analysis import depth_grid


# ---------------------------------------------------------------------------------------------------- naive model
class NaiveAttention(nn.Module):
    def __init__(self, d: int, n_heads: int, T: int):
        super().__init__()
        self.h = n_heads
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def forward(self, x):
        B, T, d = x.shape
        dh = d // self.h
        q = self.q(x).view(B, T, self.h, dh).transpose(1, 2)
        k = self.k(x).view(B, T, self.h, dh).transpose(1, 2)
        v = self.v(x).view(B, T, self.h, dh).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(dh)  # (B, H, T, T)
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        return self.o((att @ v).transpose(1, 2).contiguous().view(B, T, d))


class NaiveMLP(nn.Module):
    def __init__(self, d: int, r: int):
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(d, r * d), nn.Linear(d, r * d), nn.Linear(r * d, d)

    def forward(self, u):
        return self.down(F.silu(self.gate(u)) * self.up(u))


class NaiveStd(nn.Module):
    def __init__(self, cfg, T):
        super().__init__()
        d = cfg.d_model
        self.ln_a, self.ln_f = nn.LayerNorm(d, eps=cfg.ln_eps), nn.LayerNorm(d, eps=cfg.ln_eps)
        self.attn, self.mlp = NaiveAttention(d, cfg.n_heads, T), NaiveMLP(d, cfg.mlp_ratio)
        self.s_attn, self.s_ffn = nn.Parameter(torch.tensor(0.1)), nn.Parameter(torch.tensor(0.1))

    def forward(self, x):
        x = x + self.s_attn * self.attn(self.ln_a(x))
        return x + self.s_ffn * self.mlp(self.ln_f(x))


class NaiveTied(nn.Module):
    def __init__(self, cfg, T):
        super().__init__()
        d = cfg.d_model
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=cfg.ln_eps), nn.LayerNorm(d, eps=cfg.ln_eps)
        self.attn, self.mlp = NaiveAttention(d, cfg.n_heads, T), NaiveMLP(d, cfg.mlp_ratio)
        self.alpha_logit = nn.Parameter(torch.tensor(0.0))
        self.lo, self.hi = cfg.alpha_min, cfg.alpha_max

    def forward(self, z):
        alpha = torch.sigmoid(self.alpha_logit).clamp(self.lo, self.hi)
        a = self.attn(self.ln1(z))
        v = self.ln2(z + a)
        return z + alpha * (v + self.mlp(v))  # the paper form


class NaiveLM(nn.Module):
    """The sandwich with per-layer modules and a Python loop, as in the original scripts."""

    def __init__(self, cfg):
        super().__init__()
        from tiedlm_lib.model.layout import parse_layout

        T, d = cfg.max_seq_len, cfg.d_model
        self.segments = parse_layout(cfg.layout)
        self.tok_emb, self.pos_emb = nn.Embedding(cfg.vocab_size, d), nn.Embedding(T + cfg.extra_pos_rows, d)
        self.ln_emb, self.ln_f = nn.LayerNorm(d, eps=cfg.ln_eps), nn.LayerNorm(d, eps=cfg.ln_eps)
        self.blocks = nn.ModuleDict({s.name: NaiveStd(cfg, T) if s.kind == "std" else NaiveTied(cfg, T)
                                     for s in self.segments})
        self.head = nn.Linear(d, cfg.vocab_size)

    def forward(self, tokens, depth=None):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.ln_emb(self.tok_emb(tokens) + self.pos_emb(pos))
        for s in self.segments:
            for _ in range(1 if s.kind == "std" else (depth or s.iters)):
                x = self.blocks[s.name](x)
        return self.head(self.ln_f(x))

    def load_from(self, lib: TiedLM) -> NaiveLM:
        """Copy a library model's weights (its fused qkv split into q, k, v)."""
        sd = {}
        for k, v in lib.state_dict().items():
            if ".attn.qkv." in k:
                for name, part in zip("qkv", v.chunk(3, dim=0)):
                    sd[k.replace(".qkv.", f".{name}.")] = part.clone()
            else:
                sd[k.replace(".attn.out.", ".attn.o.")] = v.clone()
        missing, unexpected = self.load_state_dict(sd, strict=False)
        assert not unexpected and all(m.endswith(".mask") for m in missing), (missing, unexpected)
        return self


# ---------------------------------------------------------------------------------------------------- checks
def check_equal(lib: TiedLM, naive: NaiveLM, x: torch.Tensor, y: torch.Tensor) -> float:
    """The two implementations compute the same function and gradient (random head, so logits are not all zero)."""
    torch.manual_seed(1)
    nn.init.normal_(lib.head.weight, std=0.5)
    naive.load_from(lib)
    a, b = lib(x), naive(x)
    err = float((a - b).abs().max().detach())
    F.cross_entropy(a.flatten(0, 1), y.flatten(), ignore_index=0).backward()
    F.cross_entropy(b.flatten(0, 1), y.flatten(), ignore_index=0).backward()
    g_lib = dict(lib.named_parameters())["head.weight"].grad
    g_naive = dict(naive.named_parameters())["head.weight"].grad
    err = max(err, float((g_lib - g_naive).abs().max()))
    if err > 1e-4:
        raise AssertionError(f"naive and library models disagree by {err:.2e}")
    return err


def batch(cfg, B: int, T: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(4, cfg.vocab_size, (B, T), generator=g)
    return x, shift_targets(x)


def time_train(model, x, y, tcfg, steps: int, warmup: int, naive: bool, variant: str = "library") -> float:
    """Median seconds per training step. ``variant`` (library only): "library", "sdpa-math" (SDPA forced to its
    math backend), "compiled" (torch.compile on every block), "bf16" (bf16 autocast)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if variant == "compiled":
        for block in model.blocks.values():
            block.compile()
        warmup += 1  # the first step compiles
    times = []
    for i in range(warmup + steps):
        t = time.perf_counter()
        if variant == "sdpa-math":
            with sdpa_kernel(SDPBackend.MATH):
                float(train_step(model, opt, x, y, tcfg))
        elif variant in ("bf16", "compiled", "library") and not naive:
            float(train_step(model, opt, x, y, tcfg, amp=variant == "bf16").detach())
        else:
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=0)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            float(loss.detach())
        if i >= warmup:
            times.append(time.perf_counter() - t)
    return statistics.median(times)


@torch.no_grad()
def time_sweep(model, x, depths, reps: int, one_pass: bool) -> float:
    times = []
    for _ in range(reps + 1):
        t = time.perf_counter()
        if one_pass:
            out = model(x, depths=depths)
        else:
            out = {k: model(x, depth=k) for k in depths}
        assert len(out) == len(depths)
        times.append(time.perf_counter() - t)
    return statistics.median(times[1:])


def profile_step(run_name: str, B: int, T: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    run = experiment(run_name, "cpu")
    model = TiedLM(run.model)
    x, y = batch(run.model, B, T)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):
        train_step(model, opt, x, y, run.train)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            train_step(model, opt, x, y, run.train)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default="v3,v9", help="experiments at cpu scale to compare (default v3,v9)")
    p.add_argument("--seq-lens", default="128,256", help="sequence lengths (cpu scale 128; the paper's 256)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--csv", default=None)
    p.add_argument("--profile", action="store_true", help="profile the library's v3 training step instead")
    p.add_argument("--ablations", action="store_true",
                   help="also time the library step with SDPA's math backend, torch.compile, and bf16 autocast")
    a = p.parse_args()
    torch.manual_seed(0)
    if a.profile:
        s = experiment("v3", "cpu")
        profile_step("v3", s.train.batch_size, s.data.seq_len)
        return
    rows = []
    for name, T in [(n, int(t)) for n in a.runs.split(",") for t in a.seq_lens.split(",")]:
        run = experiment(name, "cpu", overrides={"model.max_seq_len": T, "data.seq_len": T})
        B = run.train.batch_size
        tcfg = TrainConfig(**{**run.train.__dict__, "depths": None})
        x, y = batch(run.model, B, T)
        torch.manual_seed(0)
        lib = TiedLM(run.model)
        naive = NaiveLM(run.model)
        err = check_equal(lib, naive, x[:4], y[:4])
        torch.manual_seed(0)
        lib, naive = TiedLM(run.model), NaiveLM(run.model)
        naive.load_from(lib)
        t_lib = time_train(lib, x, y, tcfg, a.steps, a.warmup, naive=False)
        t_naive = time_train(naive, x, y, tcfg, a.steps, a.warmup, naive=True)
        row = {"run": name, "layout": run.model.layout, "d_model": run.model.d_model, "B": B, "T": T,
               "max_abs_diff": f"{err:.1e}", "train_tok_s_library": round(B * T / t_lib),
               "train_tok_s_naive": round(B * T / t_naive), "train_speedup": round(t_naive / t_lib, 2)}
        print(row, flush=True)
        rows.append(row)
        # what each library choice buys: the same step with one choice undone or one added
        if a.ablations and T == run.data.seq_len == 128:
            for variant in ("sdpa-math", "compiled", "bf16"):
                torch.manual_seed(0)
                t_v = time_train(TiedLM(run.model), x, y, tcfg, a.steps, a.warmup, naive=False, variant=variant)
                vrow = {"run": f"{name} library {variant}", "layout": run.model.layout, "d_model": run.model.d_model,
                        "B": B, "T": T, "train_tok_s_library": round(B * T / t_v),
                        "train_speedup": round(t_naive / t_v, 2)}
                print(vrow, flush=True)
                rows.append(vrow)
        if lib.loop_names and T == 128:
            K = max(run.model.trained_depth.values())
            lib.eval()
            # two sweeps: the k-sweep's depth grid (powers of two and K), and every depth 1..K (post-hoc exit's)
            for depths in (depth_grid(K), list(range(1, K + 1))):
                t_one = time_sweep(lib, x, depths, a.steps, one_pass=True)
                t_sep = time_sweep(lib, x, depths, a.steps, one_pass=False)
                # the expected ratio from block applications: separate passes run bottom + k + top per depth; one
                # pass runs the bottom once, the loop to max(depths), and the top once per depth
                n_bot = next(i for i, s in enumerate(lib.segments) if s.kind == "loop")
                n_top = len(lib.segments) - n_bot - 1
                sep = sum(depths) + len(depths) * (n_bot + n_top)
                one = max(depths) + n_bot + len(depths) * n_top
                srow = {"run": f"{name} sweep", "layout": run.model.layout, "d_model": run.model.d_model, "B": B,
                        "T": T, "sweep_depths": "/".join(map(str, depths)) if len(depths) < 8 else f"1..{K}",
                        "sweep_tok_s_one_pass": round(len(depths) * B * T / t_one),
                        "sweep_tok_s_separate": round(len(depths) * B * T / t_sep),
                        "sweep_speedup": round(t_sep / t_one, 2), "block_applications_ratio": round(sep / one, 2)}
                print(srow, flush=True)
                rows.append(srow)
    write_csv(rows, a.csv)


if __name__ == "__main__":
    main()
