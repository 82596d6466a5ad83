# %% [markdown]
# # 04 · Early exit and the trade-off law (paper A, §4.2–4.3)
#
# A model that can stop iterating early would save compute on easy tokens. Paper A tries two routes:
#
# 1. **Post-hoc exit on a single-depth model**: stop each position the first time its max softmax probability passes
#    a threshold τ. The paper reports this *fails*: at τ = 0.4 the average depth is 12.1 and NLL 5.98, at τ = 0.95
#    26.7 and 6.21 — far worse than simply running 16 iterations for everyone (4.43). Its reading: intermediate
#    depths are "confident but wrong".
# 2. **Multi-depth supervision**: train the loss at k ∈ {1, 2, 4, 8, 16, 30} (one pass, the top stack reading out each
#    depth). Then exiting at k = 1 is nearly free (7M: 4.40 vs 4.36; 23M: 4.298 vs 4.260) — but NLL no longer falls
#    with depth. Hence the **trade-off law**: depth scaling and free exit cannot coexist.
#
# PROTOCOL §7.3 found a flaw in the exit code: positions that never pass τ were *scored with the k = 1 logits*
# (the buffer was initialised from the first depth) while being *counted* at k = 30. That alone pulls the exit NLL
# toward the k = 1 value. This section runs the exit both ways — `fallback="paper"` and the corrected
# `fallback="final"` (never-exited positions keep the full-depth logits) — and compares each with uniform depth at
# the same average depth, on the same documents, with paired bootstrap CIs.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | paper
seeds = [0]  # training seeds; claims must hold for every seed
figures_dir = None  # default: figures/<scale>/
paper_dir = None  # default: paper/<scale>/
n_boot = 1000  # bootstrap replicates for confidence intervals
taus = [0.0, 0.2, 0.4, 0.6, 0.8, 0.95]

# %%
import altair as alt
import pandas as pd

from tiedlm_lib import get_run
from tiedlm_lib.analysis import depth_gap, exit_vs_uniform, heldout, saturation_depth
from tiedlm_lib.claims import verdict
from tiedlm_lib.evaluation import depth_stats
from tiedlm_lib.experiments import get_scale
from tiedlm_lib.report import Report
from tiedlm_lib.reported import reported, reported_k_sweep
from tiedlm_lib.stats import paired_diff

rep = Report("04_tradeoff", scale, figures_dir, paper_dir, seeds=seeds)
S = get_scale(scale)
K = S.K
all_depths = list(range(1, K + 1))
PAIRS = {"small": ("v3", "v4"), "large": ("v5", "v6")}  # (single-depth, multi-depth) per size
print(f"scale {scale}: K = {K}, supervised depths {S.depths}, seeds {seeds}")

# %% [markdown]
# ## The runs
#
# v3/v5: single-depth (loss at K only). v4/v6: the same models trained on the plain mean of the CE at the supervised
# depths, from one forward that shares the loop iterations. Both use the paper's block form and full backprop.

# %%
runs = {(size, kind, seed): get_run(name, scale, seed)
        for size, pair in PAIRS.items() for kind, name in zip(("single", "multi"), pair) for seed in seeds}
pd.DataFrame([{"size": s, "supervision": k, "seed": sd, "run": r.config.name, "params": r.result["params"],
               "train s": round(r.result["seconds"]), "s/step": round(r.result["seconds"] / r.result["steps"], 3),
               "final train loss": r.result["final_loss"]} for (s, k, sd), r in runs.items()])

# %% [markdown]
# ## Depth sweeps: single- versus multi-depth supervision
#
# Every depth 1..K on every held-out document, in one pass per batch.

# %%
stats = {key: depth_stats(r.model, heldout(r.config)(), all_depths) for key, r in runs.items()}
rows = [{"size": s, "supervision": k, "seed": sd, **row} for (s, k, sd), st in stats.items() for row in st.table()]
sweep = pd.DataFrame(rows)
rep.table(sweep, "k_sweep")
shown = sorted({1, 2, 4, 8, 16, K} & set(all_depths))
sweep[sweep.k.isin(shown)].pivot_table(index=["size", "supervision", "seed"], columns="k",
                                       values=["nll_masked", "nll_with_pad"]).round(3)

# %% [markdown]
# Reported sweeps (pad-inclusive, minimind, K = 30):

# %%
rep.table(pd.DataFrame([{"run": v, **{f"k={k}": x for k, x in reported_k_sweep(v).items()}}
                        for v in ("v3", "v4", "v5", "v6")]).assign(source="reported (PROTOCOL §6.1-6.2)"),
          "reported_k_sweep")

# %%
chart = alt.Chart(sweep).mark_line(point=alt.OverlayMarkDef(size=12)).encode(
    x=alt.X("k:Q", scale=alt.Scale(type="log", base=2), title="loop applications k"),
    y=alt.Y("nll_masked:Q", scale=alt.Scale(zero=False), title="held-out NLL, real targets (nats)"),
    color="supervision:N", detail="seed:N").properties(width=260, height=220).facet(column="size:N")
rep.chart(chart, "single_vs_multi")

# %% [markdown]
# ## Post-hoc max-prob exit on the single-depth models
#
# For each τ: NLL with pad (the paper's metric) and masked, the average exit depth over all positions (the paper's
# avg k, pads included) and over real-target positions, the *realised* depth (the original loop kept every position
# iterating until the whole batch had locked), and the difference to uniform depth at the same average depth
# (interpolated between the two nearest integer depths, per document), with its 95% CI.

# %%
def exit_table(supervision, allowed=None):
    """Exit against uniform depth, both fallbacks, for every model of one supervision kind."""
    return pd.DataFrame([{"size": size, "seed": seed, **r} for (size, kind, seed), st in stats.items()
                         if kind == supervision for fb in ("paper", "final")
                         for r in exit_vs_uniform(st, taus, fb, allowed=allowed, n_boot=n_boot)])


exits = rep.table(exit_table("single"), "maxprob_exit")
exits[["size", "seed", "fallback", "tau", "avg_k_all", "realised_k", "never_locked", "nll_with_pad",
       "uniform_with_pad", "exit_minus_uniform_with_pad", "nll_masked", "uniform_masked",
       "exit_minus_uniform_masked"]].round(3)

# %% [markdown]
# Reported (v3, paper fallback, pad-inclusive):

# %%
pd.DataFrame(reported("v3.exit.") + reported("v3.uniform."))

# %%
ex_long = exits.assign(kind="exit (" + exits.fallback + " fallback)")[["size", "seed", "kind", "avg_k_real",
                                                                       "nll_masked"]]
uni = sweep[sweep.supervision == "single"].rename(columns={"k": "avg_k_real"}).assign(kind="uniform depth")
ex_chart = alt.Chart(pd.concat([ex_long, uni[["size", "seed", "kind", "avg_k_real", "nll_masked"]]])).mark_line(
    point=True).encode(x=alt.X("avg_k_real:Q", title="average depth over real targets"),
                       y=alt.Y("nll_masked:Q", scale=alt.Scale(zero=False), title="NLL, real targets (nats)"),
                       color="kind:N", detail="seed:N").properties(width=260, height=220).facet(column="size:N")
rep.chart(ex_chart, "exit_vs_uniform")

# %% [markdown]
# ## The staircase exit on the multi-depth models
#
# Exits allowed only at the supervised depths, the paper's v4/v6 procedure, with both fallbacks.

# %%
stairs = rep.table(exit_table("multi", allowed=list(S.depths)), "staircase_exit")
stairs[["size", "seed", "fallback", "tau", "avg_k_all", "nll_with_pad", "nll_masked", "exit_minus_uniform_masked"]
       ].round(4)

# %% [markdown]
# ## "Confident but wrong"?
#
# Mean max-softmax probability over real targets against depth, beside NLL, for the single-depth models. If
# confidence saturates long before quality, an early exit keyed on confidence stops too soon. The saturation depth is
# the first depth at which a curve has covered 95% of its change from k = 1 to k = K.

# %%
conf_rows, sat = [], {}
for (size, kind, seed), st in stats.items():
    t = pd.DataFrame(st.table())
    sat[size, kind, seed] = {"maxprob": saturation_depth(all_depths, t.maxprob_real.tolist()),
                             "nll": saturation_depth(all_depths, t.nll_masked.tolist())}
    for _, r in t.iterrows():
        conf_rows.append({"size": size, "supervision": kind, "seed": seed, "k": r.k, "maxprob": r.maxprob_real,
                          "nll": r.nll_masked})
conf = pd.DataFrame(conf_rows)
rep.table(conf, "confidence_by_depth")
display(pd.DataFrame([{"size": s, "supervision": k, "seed": sd, "maxprob saturates at k": v["maxprob"],  # noqa: F821
                       "NLL saturates at k": v["nll"]} for (s, k, sd), v in sat.items()]))
c1 = alt.Chart(conf).mark_line(point=True).encode(x="k:Q", y=alt.Y("maxprob:Q", title="mean max-prob"),
                                                  color="supervision:N", detail="seed:N").properties(width=220,
                                                                                                 height=180)
c2 = c1.encode(y=alt.Y("nll:Q", scale=alt.Scale(zero=False), title="NLL (nats)"))
rep.chart(alt.hconcat(c1, c2).resolve_scale(y="independent"), "confidence_vs_nll")

# %% [markdown]
# ## The law: depth scaling against free exit, at both sizes
#
# *Depth scaling* = NLL(k=1) − NLL(k=K); *exit cost* = NLL(k=1) − min_k NLL(k). A single-depth model should have a
# large gap; a multi-depth model a small exit cost.

# %%
law_rows = []
for (size, kind, seed), st in stats.items():
    best_k = min(all_depths, key=lambda k: st.nll(k).masked)
    g = depth_gap(st, 1, K, "masked", n_boot)
    c = paired_diff(st.nll(1), st.nll(best_k), "masked", n_boot)
    law_rows.append({"size": size, "supervision": kind, "seed": seed, "gap k1-kK": g.point, "gap_lo": g.lo,
                     "gap_hi": g.hi, "best k": best_k, "best NLL": st.nll(best_k).masked, "exit cost": c.point,
                     "cost_lo": c.lo, "cost_hi": c.hi})
law = pd.DataFrame(law_rows)
rep.table(law, "tradeoff_law")
law.round(4)

# %% [markdown]
# ## The claims
#
# Criteria (all on held-out documents, 95% paired document-bootstrap CIs):
#
# * **A4** — exit fails: for every τ > 0 whose exit saves at least 5% of the depth (average depth ≤ 0.95·K), exit
#   NLL − uniform NLL at the same average depth has its CI above 0, at both sizes and every seed. *Not reproduced*
#   if the CI lies below 0 at some such τ. Thresholds whose exit saves less are shown but not judged: there almost
#   no position exits, exit and uniform depth coincide, and the difference is noise (a first version of this
#   criterion judged them too and came out inconclusive on exactly that: τ = 0.95, average depth 15.95 of 16).
#   Paper protocol: paper fallback, with-pad NLL, average over all positions. Corrected: final fallback, masked NLL.
# * **Q2** — does A4 survive the corrected fallback? The answer is the corrected-protocol A4 verdict.
# * **A5** — confident but wrong: mean max-prob saturates at a shallower depth than NLL, on the single-depth models.
# * **A6** — free exit: the multi-depth models' exit cost NLL(1) − min NLL has its CI upper end at or below 10% of
#   the single-depth gap at the same size (the paper's 0.04 nats was 2% of its 1.91-nat gap); not reproduced if the
#   CI lower end is above it.
# * **A7** — the law: at both sizes the single-depth gap's CI is above 0 *and* its exit cost exceeds the 10% bound,
#   while the multi-depth model meets A6 *and* its own gap is within that bound.
# * **A8** — no lower ceiling: best multi-depth NLL − best single-depth NLL has its CI at or below 0 (or straddling
#   it); not reproduced if the CI is above 0.

# %%
def exit_claim(df, metric, fb):
    sub = df[(df.fallback == fb) & (df.tau > 0)]
    col_k = "avg_k_all" if metric == "with_pad" else "avg_k_real"
    sub = sub[sub[col_k] <= 0.95 * K]  # exits that save at least 5% of the depth
    ci = sub[f"ci_{metric}"].tolist()
    holds = len(ci) > 0 and all(lo > 0 for lo, _ in ci)
    contra = any(hi < 0 for _, hi in ci)
    ev = {f"{r['size']}/s{r['seed']}/tau{r['tau']}": {"exit_minus_uniform": r[f"exit_minus_uniform_{metric}"],
                                                       "ci": list(r[f"ci_{metric}"]), "avg_k": r[col_k]}
          for _, r in sub.iterrows()}
    return verdict(holds, contra), ev


v_paper, ev = exit_claim(exits, "with_pad", "paper")
rep.claim("A4", v_paper, "exit NLL minus uniform-depth NLL at the same average depth has 95% CI above 0 for every "
          "tau > 0 with average depth <= 0.95 K (paper fallback, with-pad NLL)", ev, "paper")
v_corr, ev = exit_claim(exits, "masked", "final")
rep.claim("A4", v_corr, "same criterion with the final-depth fallback and masked NLL", ev, "corrected")
rep.claim("Q2", {"reproduced": "yes", "not reproduced": "no"}.get(v_corr, "inconclusive"),
          "A4's verdict under the corrected fallback (never-exited positions scored at full depth, masked NLL)",
          {"A4_paper": v_paper, "A4_corrected": v_corr}, "corrected")

single_sat = {k: v for k, v in sat.items() if k[1] == "single"}
rep.claim("A5", verdict(all(v["maxprob"] < v["nll"] for v in single_sat.values()),
                        all(v["maxprob"] >= v["nll"] for v in single_sat.values())),
          "on single-depth models, mean max-prob reaches 95% of its k=1..K change at a shallower depth than NLL does "
          "(point estimates; no CI)", {f"{k[0]}/s{k[2]}": v for k, v in single_sat.items()}, "corrected")

bound = {}
for (size, kind, seed) in runs:
    if kind == "single":
        bound[size, seed] = 0.1 * law[(law["size"] == size) & (law.supervision == "single") &
                                      (law.seed == seed)]["gap k1-kK"].item()
L = law.set_index(["size", "supervision", "seed"])
a6_ok = all(L.loc[(s, "multi", sd), "cost_hi"] <= b for (s, sd), b in bound.items())
a6_bad = any(L.loc[(s, "multi", sd), "cost_lo"] > b for (s, sd), b in bound.items())
rep.claim("A6", verdict(a6_ok, a6_bad), "multi-depth exit cost NLL(1) - min_k NLL(k) has 95% CI upper end <= 10% "
          "of the single-depth k=1..K gap at the same size (masked NLL)",
          {f"{s}/s{sd}": {"cost": L.loc[(s, "multi", sd), "exit cost"], "ci": [L.loc[(s, "multi", sd), "cost_lo"],
                                                                               L.loc[(s, "multi", sd), "cost_hi"]],
                          "bound": b} for (s, sd), b in bound.items()}, "corrected")

law_holds = all(L.loc[(s, "single", sd), "gap_lo"] > 0 and L.loc[(s, "single", sd), "cost_lo"] > b
                and L.loc[(s, "multi", sd), "cost_hi"] <= b and L.loc[(s, "multi", sd), "gap_hi"] <= b
                for (s, sd), b in bound.items())
law_broken = any(L.loc[(s, "multi", sd), "gap_lo"] > b and L.loc[(s, "multi", sd), "cost_hi"] <= b
                 for (s, sd), b in bound.items())  # a model with both depth scaling and free exit
rep.claim("A7", verdict(law_holds, law_broken), "at both sizes: single-depth gap CI > 0 and exit cost > bound; "
          "multi-depth exit cost and gap both within the bound (10% of the single-depth gap)",
          {f"{s}/{k}/s{sd}": {"gap": r["gap k1-kK"], "exit_cost": r["exit cost"]}
           for (s, k, sd), r in L.iterrows()}, "corrected")

ceil = {}
for (s, sd) in bound:
    a, b = stats[s, "multi", sd], stats[s, "single", sd]
    d = paired_diff(a.nll(int(L.loc[(s, "multi", sd), "best k"])), b.nll(int(L.loc[(s, "single", sd), "best k"])),
                    "masked", n_boot)
    ceil[f"{s}/s{sd}"] = d.as_dict()
rep.claim("A8", verdict(all(d["lo"] <= 0 for d in ceil.values()), any(d["lo"] > 0 for d in ceil.values())),
          "best multi-depth NLL minus best single-depth NLL has 95% CI reaching 0 or below (masked)", ceil,
          "corrected")

# %% [markdown]
# ## What this section shows
#
# The verdicts above are written to `paper/<scale>/claims.json`. The decisive row is the exit table under the two
# fallbacks: if the exit only looks catastrophic with the paper's fallback, "confident but wrong" is an artefact of
# scoring never-exited positions at k = 1. The law itself is about *what the readout was trained on*: the multi-depth
# model's top layers learned to read every supervised depth, the single-depth model's only k = K — section 10 tests
# how much of that is a readout effect.
