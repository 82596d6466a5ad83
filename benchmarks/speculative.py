"""Self-speculative decoding against plain cached decoding, greedy, batch size 1, on cpu-scale models.

For the single-depth (v3), multi-depth (v4) and sampled-depth (section 10's sampled continuation of v3) small models
of seed 0: tokens/s of plain cached decoding at full depth and of tiedlm_lib.depth.speculative at each draft depth and
draft length, on prompts cut from held-out documents; the outputs are checked identical token for token; the
speed-up comes with a bootstrap CI over prompts (paired). Runs that are not in the cache are skipped (say --train to
train them first). Run nothing else meanwhile: timings on 2 cores are sensitive to any other process.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/speculative.py --csv benchmarks/results/speculative_cpu.csv \
        --readme docs/library.md

``--readme`` rewrites that page's generated block (docs/library.md: the best configuration per model, and sentences
computed from the numbers, ``speculative.readme_markdown``) from the summary just measured; with ``--from-csv`` it
times nothing and regenerates the block from a committed summary CSV.
"""
import argparse
import time
from pathlib import Path

import pandas as pd
import torch

from tiedlm_lib import get_run
from tiedlm_lib.depth.speculative import README_BEGIN, README_END, README_MODEL, benchmark, readme_markdown
from tiedlm_lib.evaluation.analysis import cached_corpus
from tiedlm_lib.runs import get_scale, intervention_arm
from tiedlm_lib.store.atomic import replace_block

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--scale", default="cpu")
p.add_argument("--prompts", type=int, default=12)
p.add_argument("--prompt-len", type=int, default=16)
p.add_argument("--max-new", type=int, default=64)
p.add_argument("--depths", default="1,2,4,8")
p.add_argument("--lens", default="2,4,8")
p.add_argument("--repeats", type=int, default=3)
p.add_argument("--train", action="store_true", help="train runs missing from the cache")
p.add_argument("--csv", type=Path, default=None, help="summary CSV (per-prompt rows go beside it, *_prompts.csv)")
p.add_argument("--readme", type=Path, default=None, help="rewrite this README's generated speculative block")
p.add_argument("--from-csv", type=Path, default=None, help="time nothing: regenerate --readme from this summary CSV")
a = p.parse_args()
if a.from_csv:
    if not a.readme:
        p.error("--from-csv only regenerates a README block: give --readme too")
    changed = replace_block(a.readme, README_BEGIN, README_END,
                            readme_markdown(pd.read_csv(a.from_csv).to_dict("records"), README_MODEL))
    print(f"{a.readme}: {'rewritten' if changed else 'unchanged'}")
    raise SystemExit(0)

S = get_scale(a.scale)
base = get_run("v3", a.scale, 0, train_if_missing=a.train, progress=False)
models = {"single-depth (v3)": lambda: base,
          "multi-depth (v4)": lambda: get_run("v4", a.scale, 0, train_if_missing=a.train, progress=False),
          "sampled-depth (v3 + sampled continuation)": lambda: get_run(
              intervention_arm(base.config, "sampled", S.short_steps), train_if_missing=a.train, progress=False)}
corpus = cached_corpus(base.config.data)
docs = [corpus.val[i] for i in range(len(corpus.val)) if len(corpus.val[i]) >= a.prompt_len][:a.prompts]
prompts = [d[:a.prompt_len].tolist() for d in docs]
configs = [(d, L) for d in map(int, a.depths.split(",")) for L in map(int, a.lens.split(","))]
print(f"torch threads {torch.get_num_threads()}, {len(prompts)} prompts of {a.prompt_len} tokens, {a.max_new} new "
      f"tokens, configs {configs}", flush=True)
summaries, per_prompt = [], []
for label, load in models.items():
    try:
        run = load()
    except FileNotFoundError as e:
        print(f"skip {label}: {e}", flush=True)
        continue
    K = run.config.model.layout
    t = time.time()
    rows, summary = benchmark(run.model, prompts, a.max_new, [c for c in configs if c[0] < run.model.core_segments[0]
                                                              .iters], repeats=a.repeats)
    for r in summary:
        summaries.append({"model": label, "layout": K, "threads": torch.get_num_threads(), **r})
        print(f"  {label} d={r['draft depth']} L={r['draft length']}: {r['speculative tokens/s']:.0f} vs "
              f"{r['plain tokens/s']:.0f} tok/s, speed-up {r['speed-up']:.2f} [{r['speed-up lo']:.2f}, "
              f"{r['speed-up hi']:.2f}], acceptance {r['acceptance']:.2f}", flush=True)
    per_prompt += [{"model": label, **r} for r in rows]
    print(f"{label}: {time.time() - t:.0f} s", flush=True)
if a.csv:
    a.csv.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(summaries).to_csv(a.csv, index=False)
    pd.DataFrame(per_prompt).to_csv(a.csv.with_name(a.csv.stem + "_prompts.csv"), index=False)
    print(f"written {a.csv}")
if a.readme:
    replace_block(a.readme, README_BEGIN, README_END, readme_markdown(summaries, README_MODEL))
    print(f"rewritten the speculative block of {a.readme}")
