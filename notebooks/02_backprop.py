# %% [markdown]
# # 02 · Backpropagating through the loop (paper A, §3)
#
# Training a loop of K applications with exact backprop stores K copies of the block's activations. Paper A offers a
# **1-step phantom gradient** instead: run the loop without a graph and backpropagate through one step. It reports
# 46% less memory and 52% less time per step (6.45 → 3.50 GB; 143 → 69 ms), an NLL cost of only +0.03 after 1,000
# steps — and, over the full 39,695-step horizon, a large penalty: +1.36 real-token NLL (3.867 vs 2.508), with every
# depth below K near ln V.
#
# PROTOCOL §4.4 and §7.7 show what the code did: the one step with gradient was taken **at the loop input h**, not at
# the last state, and attached to z_K by a straight-through estimator — so the block was only ever trained on its first
# step's behaviour. This section puts the whole menu side by side (`tiedlm_lib` names):
#
# | mode | gradient | memory |
# |---|---|---|
# | `full` | exact | grows with k |
# | `checkpoint` | exact (recomputes each iteration's activations) | about phantom's |
# | `phantom` | the paper's: one step at the loop input | one step |
# | `phantom-last` | the standard one-step form at the last state (bottom stack: straight-through identity) | one step |
# | `truncated:4` | through the last 4 iterations | four steps |

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | paper
seeds = None  # training seeds; default: the scale's (smoke: [0], cpu: [0, 1, 2])
figures_dir = None  # default: figures/<scale>/
paper_dir = None  # default: paper/<scale>/
n_boot = 2000
long_steps = None  # the long horizon; default: the scale's long runs (cpu: 1500 steps, 1.5 x the short run)
modes_short = ["full", "phantom", "phantom-last", "truncated:4"]
modes_long = ["full", "phantom", "phantom-last"]  # truncated:4 is measured over the short run only (cost)
# checkpoint has exactly full's gradient (tests/test_training.py checks it to 1e-12), so it trains like full up to
# float rounding; it is measured for memory and time above, not retrained here.

# %%
import math

import altair as alt
import pandas as pd

from tiedlm_lib import get_run, verdicts
from tiedlm_lib.analysis import heldout, sweep_depths
from tiedlm_lib.evaluation import depth_stats
from tiedlm_lib.experiments import get_scale
from tiedlm_lib.paths import project_root
from tiedlm_lib.report import Report
from tiedlm_lib.reported import reported, reported_value
from tiedlm_lib.stats import paired_diff

rep = Report("02_backprop", scale, figures_dir, paper_dir, seeds=seeds)
seeds = rep.seeds
S = get_scale(scale)
K = S.K
long_steps = long_steps or S.long_steps
print(f"scale {scale}: small model d{S.small.d_model}, K = {K}; short {S.short_steps} steps, long {long_steps}")

# %% [markdown]
# ## Memory and time per step
#
# Measured by `benchmarks/backprop_modes.py` (committed CSV; the command is in `benchmarks/README.md`) on a 2-core CPU
# for the cpu-scale large model (d128, B=16, T=128) at k = 4, 8, 16, 30, each configuration in its own process.

# %%
bench = pd.read_csv(project_root() / "benchmarks" / "results" / "backprop_modes_cpu.csv")
rep.table(bench, "memory_time")
m = alt.Chart(bench).mark_line(point=True).encode(x="k:Q", y=alt.Y("peak_MiB:Q", title="peak memory (MiB)"),
                                                  color="mode:N").properties(width=260, height=200)
t = m.encode(y=alt.Y("s_per_step:Q", title="seconds per step"))
rep.chart(m | t, "memory_time")

# %%
b = bench.set_index(["mode", "k"])
kmax = int(bench.k.max())
def ratio(a, b_, k, col):
    return b.loc[(a, k), col] / b.loc[(b_, k), col]


ratios = pd.DataFrame([{"k": k, "phantom/full memory": ratio("phantom", "full", k, "peak_MiB"),
                        "phantom/full time": ratio("phantom", "full", k, "s_per_step"),
                        "checkpoint/phantom memory": ratio("checkpoint", "phantom", k, "peak_MiB"),
                        "checkpoint/full time": ratio("checkpoint", "full", k, "s_per_step")}
                       for k in sorted(bench.k.unique())])
rep.table(ratios.round(3), "ratios")

# %% [markdown]
# ## Quality after a short and a long run
#
# The small single-depth model (v3's configuration) trained with each mode: a short run (the paper's memory test
# was 1,000 steps) and a run of the scale's long horizon (`long_steps`). Each is evaluated on every held-out document
# at the trained depth K and below (the paper's "k < 16 ≈ random" observation for its long phantom run).

# %%
runs = {}
for seed in seeds:
    for mode in modes_short:
        runs["short", mode, seed] = get_run("v3", scale, seed, overrides={"train.backprop": mode})
    for mode in modes_long:
        runs["long", mode, seed] = get_run("v3", scale, seed, overrides={"train.backprop": mode,
                                                                          "train.steps": long_steps})
depths = [k for k in sweep_depths(K) if k <= K]
stats = {key: depth_stats(r.model, heldout(r.config)(), depths) for key, r in runs.items()}
rows = [{"horizon": h, "mode": mo, "seed": sd, "steps": runs[h, mo, sd].result["steps"],
         "train s/step": runs[h, mo, sd].result["seconds"] / runs[h, mo, sd].result["steps"], **row}
        for (h, mo, sd), st in stats.items() for row in st.table()]
quality = rep.table(pd.DataFrame(rows), "quality")
quality[quality.k == K].round(4)

# %%
chart = alt.Chart(quality).mark_line(point=True).encode(
    x=alt.X("k:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(values=depths)),
    y=alt.Y("nll_masked:Q", title="held-out NLL, real targets", scale=alt.Scale(zero=False)),
    color="mode:N", detail="seed:N").properties(width=260, height=220).facet(column="horizon:N")
rep.chart(chart, "nll_by_depth")

# %% [markdown]
# The paper's numbers (reported; its memory test used the 7.27M model for 1,000 steps with pad-inclusive NLL, its
# long runs the 23.05M model for 39,695 steps on the suffix benchmark's real tokens):

# %%
pd.DataFrame(reported("memtest.") + reported("bench.v7.real") + reported("bench.v10.real") + reported("v7.k_sweep."))

# %% [markdown]
# ## Gaps to full backprop, with paired CIs

# %%
gap_rows = []
for (h, mode, seed), st in stats.items():
    if mode == "full":
        continue
    d = paired_diff(st.nll(K), stats[h, "full", seed].nll(K), "masked", n_boot)
    gap_rows.append({"horizon": h, "mode": mode, "seed": seed, "NLL - full": d.point, "ci_lo": d.lo, "ci_hi": d.hi})
gaps = rep.table(pd.DataFrame(gap_rows), "gaps")
gaps.round(4)

# %% [markdown]
# ## The paper's long phantom run (v7)
#
# A3 is a statement about one run: the large model trained for the long horizon with the paper-form phantom gradient
# and its schedule (warm-up, β₂ = 0.95). That run (`v7` at this scale) is evaluated here at every depth up to K; the
# small-model long runs above are the controlled comparison of estimators, not a stand-in for it.

# %%
v7 = {seed: get_run("v7", scale, seed) for seed in seeds}
v7_stats = {(ev, seed): depth_stats(r.model, heldout(r.config, sampling=ev)(), depths)
            for seed, r in v7.items() for ev in ("paper", "all")}
v7_sweep = rep.table(pd.DataFrame([{"evaluation": ev, "seed": sd, **row} for (ev, sd), st in v7_stats.items()
                                   for row in st.table()]), "v7_k_sweep")
v7_sweep.pivot_table(index=["evaluation", "seed"], columns="k", values=["nll_with_pad", "nll_masked"]).round(3)

# %% [markdown]
# ## The claims
#
# Each criterion is a function of `tiedlm_lib.verdicts`, unit-tested on synthetic estimates for every outcome it
# can return; it is stated here before the call that judges.
#
# * **A9** — phantom saves memory and time and costs little over a short run. *Criterion*: at the deepest benchmarked
#   k the phantom/full ratios are ≤ 0.6 for memory and time (the paper: 0.54 and 0.48), and the short-run NLL gap
#   phantom − full is non-inferior at +0.1 nats in every seed (CI upper end below 0.1; the paper: +0.03). Not
#   reproduced if a ratio exceeds 0.6 or every seed's gap CI lies above 0.1.
# * **A10** — over the long horizon phantom underfits badly. *Criterion*: the long-run gap phantom − full has its
#   CI above 0 in every seed and its mean exceeds the short-run gap's. Its size is reported as a fraction of full
#   backprop's NLL beside the paper's (1.36 / 2.508).
# * **A3** — long phantom training makes shallow depths useless, judged on v7. *Criterion*: NLL(k) for every
#   k ≤ K/2 within 1 nat of ln V and NLL(K) not, in every seed; not reproduced if NLL(K/2) < ln V − 1 in every seed.
#   Paper protocol: the paper's k-sweep (pad-inclusive NLL on its 20 batches drawn with replacement); corrected:
#   real targets on every held-out document once.
#
# A9 and A10 are judged on every held-out document's real targets (the corrected evaluation; the paper measured
# A10 on its train-overlap suffix benchmark), so they are labelled *corrected*.
# * **Q5** — is the long-horizon penalty specific to the paper's loop-input phantom? *Yes* if phantom-last's
#   long-run NLL is below the paper phantom's (CI below 0 in every seed) while the paper phantom underfits; *no* if
#   phantom-last is worse in every seed or the paper phantom does not underfit.

# %%
def gap(h, mode):
    return {sd: paired_diff(stats[h, mode, sd].nll(K), stats[h, "full", sd].nll(K), "masked", n_boot)
            for sd in seeds}


kk = int(bench.k.max())
a9 = verdicts.a9(ratio("phantom", "full", kk, "peak_MiB"), ratio("phantom", "full", kk, "s_per_step"),
                 gap("short", "phantom"), kk)
paper_rel = (reported_value("bench.v7.real") - reported_value("bench.v10.real")) / reported_value("bench.v10.real")
a10 = verdicts.a10(gap("long", "phantom"), {sd: stats["long", "full", sd].nll(K).masked for sd in seeds}, paper_rel,
                   short_gap=gap("short", "phantom"), protocol="corrected")
a3 = [verdicts.a3({sd: {k: getattr(v7_stats[ev, sd].nll(k), metric) for k in depths} for sd in seeds}, S.vocab_size,
                  K, metric, protocol) for protocol, ev, metric in (("paper", "paper", "with_pad"),
                                                                    ("corrected", "all", "masked"))]
q5 = verdicts.q5({sd: paired_diff(stats["long", "phantom-last", sd].nll(K), stats["long", "phantom", sd].nll(K),
                                  "masked", n_boot) for sd in seeds}, gap("long", "phantom"))
for j in (a9, a10, *a3, q5):
    rep.judge(j)

# %% [markdown]
# ## Results and what they mean
#
# Every number below is read from this section's tables (`rep.fact`), and every direction word is derived from those
# numbers or from the verdicts above, so the paragraphs hold at every scale.

# %%
kmax = int(ratios.k.max())
rep.fact("mem", "ratios", "phantom/full memory", {"k": kmax}, "only")
rep.fact("time", "ratios", "phantom/full time", {"k": kmax}, "only")
rep.fact("short", "gaps", "NLL - full", {"horizon": "short", "mode": "phantom"})
rep.fact("long", "gaps", "NLL - full", {"horizon": "long", "mode": "phantom"})
rep.fact("last", "gaps", "NLL - full", {"horizon": "long", "mode": "phantom-last"})
rep.fact("v7_1", "v7_k_sweep", "nll_masked", {"evaluation": "all", "k": 1})
rep.fact("v7_K", "v7_k_sweep", "nll_masked", {"evaluation": "all", "k": K})
rep.prose("Results", "At the deepest benchmarked depth (k = {k}) the paper's phantom gradient used {mem:.0%} of full "
          "backprop's peak memory and {time:.0%} of its step time. Trained on the small model, it ended "
          "{short:+.3f} nats from full backprop after the short run and {long:+.3f} after the long one (means over "
          "{n} seed{s}); the last-state phantom ended {last:+.3f} after the long run. The paper's own long phantom run "
          "(v7) reads out at {v7_1:.2f} nats at k = 1 and {v7_K:.2f} at k = {K} (ln V = {lnv}).",
          k=str(kmax), n=str(len(seeds)), s="s" if len(seeds) > 1 else "", K=str(K),
          lnv=f"{math.log(S.vocab_size):.2f}")

# %%
grows, saves = a10.evidence["grows with the horizon"], a9.evidence["saves memory and time"]  # the criteria's own
paper_mem = reported_value("memtest.phantom.peak_gb") / reported_value("memtest.full.peak_gb")  # 3.50 / 6.45
paper_time = reported_value("steptime.v7") / reported_value("steptime.v5")  # 69 / 143 ms, the 23M runs' logged steps
a9_margin = f"the {verdicts.A9_SHORT_MARGIN:g}-nat margin of “costs little”"
rep.prose("What this means", "The phantom gradient's saving in memory and time is {saving}; its short-run cost, "
          "{short:+.3f} nats (mean over seeds), is {cost_words} (A9 {a9}). Its gap to "
          "full backprop {grows} from the short to the long run (A10 {a10}), {horizon}. Shallow depths of the long "
          "phantom run are {a3_words} (A3 {a3}), and the long-run penalty is {q5_words} to the paper's loop-input "
          "form (Q5 {q5}). Exact gradients need not cost phantom-sized memory: `checkpoint` keeps only each "
          "iteration's input and recomputes the rest in the backward pass, at the time cost in the ratio table.",
          saving=(f"within the criterion's bound of {verdicts.A9_RATIO:g} of full backprop" if saves else
                  f"short of the criterion's bound of {verdicts.A9_RATIO:g} of full backprop")
          + f", against the paper's {paper_mem:.2f} for memory and {paper_time:.2f} for time", a9=a9.verdict,
          cost_words={"non-inferior": f"within {a9_margin} in every seed",
                      "inferior": f"above {a9_margin} in every seed"}.get(
              a9.evidence["short-run outcome"], f"not settled against {a9_margin}: a seed's CI straddles it, or seeds "
              "disagree"),
          grows="grows (mean over seeds)" if grows else "does not grow (mean over seeds)", a10=a10.verdict,
          horizon={"reproduced": "so an approximate gradient has to be validated on the full training horizon",
                   "not reproduced": "and at the long horizon it does not underfit full backprop in every seed here"
                   }.get(a10.verdict, "so whether a short-run check of an approximate gradient misleads is not "
                         "settled here"), a3=a3[1].verdict,
          a3_words={"reproduced": "near uniform guessing", "not reproduced": "not near uniform guessing"}.get(
              a3[1].verdict, "not settled between the two"), q5=q5.verdict,
          q5_words={"yes": "specific", "no": "not specific" if q5.outcomes["phantom - full"] != "below 0" else
                    "absent here (the paper's phantom beats full backprop in every seed), so nothing is specific",
                    "inconclusive": "not shown to be specific"}[q5.verdict])
