# %% [markdown]
# # 12 · Depth at inference: exact speculative decoding, exit rules against the oracle, exits with a guarantee
#
# Paper A's "free early exit" and its trade-off law are statements about the cost of inference, but a user of a
# looped model cares about what inference actually gives: tokens per second at unchanged outputs, and how much depth
# a token may skip without changing its prediction. This section measures both, on the small single-depth (v3),
# multi-depth (v4) and sampled-depth models (section 10's sampled continuation of v3).
#
# 1. **Self-speculative decoding** (`tiedlm_lib.depth.speculative`): draft tokens at depth d, verify them at full depth
#    in one pass that continues from iteration d on the draft's own states (the layers before the loop and the loop's
#    first d iterations are shared, so they are computed once), accept the longest agreeing prefix plus the full
#    model's next token, roll every per-application KV cache back. Greedy output is *identical* to plain greedy
#    decoding (the benchmark refuses to time an output that differs); the question is speed.
# 2. **Exit rules against the oracle** (`tiedlm_lib.depth.exits`): per token, exit at the first depth whose confidence —
#    max-prob (paper A's rule), minus entropy, minus the KL from the previous depth, minus the relative state change,
#    the top token's run length, or a learned logistic probe — reaches a threshold. The oracle exits at the earliest
#    depth whose top token equals the full-depth one.
# 3. **Exits with a guarantee**: Learn-then-Test picks, on calibration documents, the most aggressive threshold whose
#    share of tokens disagreeing with full depth is at most ε with probability ≥ 1 − δ; we check the guarantee on
#    unseen documents over many calibration splits and report the depth it buys — the trade-off law in guaranteed
#    terms.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | paper
device = None  # cpu | cuda; default: TIEDLM_DEVICE, else CUDA when available, else the CPU
seeds = None  # training seeds; default: the scale's (smoke: [0], cpu: [0, 1, 2, 3, 4])
extended_seeds = None  # further seeds of the multi-depth model, for Q7 alone; default: the scale's (cpu: 5-9)
figures_dir = None  # default: figures/<scale>/
paper_dir = None  # default: paper/<scale>/
n_prompts = 12  # benchmark prompts (batch size 1), cut from held-out documents
prompt_len = 16
max_new = 64  # greedy tokens per prompt (capped by the sequence length)
draft_depths = [1, 2, 4, 8]  # capped below the trained depth
draft_lens = [2, 4]
repeats = 2  # timed repeats per prompt and configuration (the fastest kept)
# (at the smoke scale, CI's: at most 4 prompts, 16 new tokens, one repeat and 10 splits)
n_probe_docs = 114  # held-out documents to fit the learned exit probe and the draft probe on
n_boot = 300  # document-bootstrap replicates of each exit curve point
eps_grid = [0.1, 0.2, 0.3]  # the user's tolerated share of tokens that disagree with full depth
delta = 0.1  # allowed probability that the guarantee fails
n_splits = 40  # random calibration/test splits of the remaining documents

# %%
import time

import altair as alt
import numpy as np
import pandas as pd

from tiedlm_lib import get_run
from tiedlm_lib.data import eval_batches
from tiedlm_lib.depth.dcp import split_documents
from tiedlm_lib.depth.exits import (
    CRITERIA,
    ExitProbe,
    collect_features,
    confidence,
    curve,
    guarantee_splits,
    oracle_depths,
    outcome,
    rate_minus_eps,
)
from tiedlm_lib.depth.readout import ProbeSpec, collect_states, fit_probe
from tiedlm_lib.depth.speculative import benchmark, call_bound_phrase
from tiedlm_lib.evaluation.analysis import assert_direction, cached_corpus
from tiedlm_lib.model.schedules import budget, plan
from tiedlm_lib.paper import verdicts
from tiedlm_lib.paper.report import Report
from tiedlm_lib.runs import get_scale, intervention_arm
from tiedlm_lib.stats.bootstrap import Estimate

rep = Report("12_depth_at_inference", scale, figures_dir, paper_dir, seeds=seeds, extended_seeds=extended_seeds)
seeds = rep.seeds
S = get_scale(scale)
if scale == "smoke":  # CI's budgets (the smoke scale's numbers are not evidence of anything); every code path runs
    n_prompts, max_new, repeats, n_splits = min(n_prompts, 4), min(max_new, 16), 1, min(n_splits, 10)
print(f"scale {scale}: K = {S.K}, seeds {seeds}"
      + (f"; the multi-depth model also at seeds {rep.extended} (Q7)" if rep.extended else ""))

# %% [markdown]
# ## The models
#
# The small single-depth (v3) and multi-depth (v4) models of section 04, and the sampled-depth model: v3 continued
# with a depth drawn uniformly from 1..K at every step (section 10's intervention arm, the same cached run at that
# section's default parameters). The multi-depth model is also trained at the scale's extended seeds (cpu: 5-9;
# docs/statistics.md amendment 14), where only its speed-up is measured, for Q7; Q8, Q9 and every other table rest
# on the section's seeds.

# %%
runs = {}
for sd in seeds:
    single = get_run("v3", scale, sd, device=device)
    runs["single-depth", sd] = single
    runs["multi-depth", sd] = get_run("v4", scale, sd, device=device)
    runs["sampled-depth", sd] = get_run(intervention_arm(single.config, "sampled", S.short_steps), device=device)
q7_only = {("multi-depth", sd): get_run("v4", scale, sd, device=device) for sd in rep.extended}
MODELS = ["single-depth", "multi-depth", "sampled-depth"]
K = budget(runs["single-depth", seeds[0]].model.layout)  # one tied loop: K core applications = K iterations
cfg0 = runs["single-depth", seeds[0]].config
corpus = cached_corpus(cfg0.data)
n_docs = len(corpus.val)
probe_idx, pool_idx = split_documents(n_docs, min(n_probe_docs, n_docs // 4), seed=0)


def batches(idx):
    return eval_batches(corpus.val, cfg0.data.seq_len, cfg0.train.batch_size, indices=idx)


max_new = min(max_new, cfg0.data.seq_len - prompt_len)
prompts = [corpus.val[int(i)][:prompt_len].tolist() for i in pool_idx if len(corpus.val[int(i)]) >= prompt_len][
    :n_prompts]
configs = [(d, L) for d in draft_depths if d < K for L in draft_lens]
pd.DataFrame([{"model": m, "seed": sd, "run": r.config.name, "layout": r.config.model.layout,
               "steps": r.config.train.steps, "read for": "every question" if sd in seeds else "Q7"}
              for (m, sd), r in (runs | q7_only).items()])

# %% [markdown]
# ## 1. Self-speculative decoding
#
# Greedy, batch size 1, `max_new` tokens after each of `n_prompts` prompts cut from held-out documents, against plain
# cached decoding at full depth. The speed-up is the geometric mean over prompts of the time ratio, with a bootstrap
# CI over prompts (the same prompt under both: paired). Every model at the first seed; the multi-depth model, which
# Q7 is about, at every seed, the extended ones included. Timings depend on the machine: they are this machine's,
# printed with its thread count.

# %%
import torch  # noqa: E402

speed_rows, per_prompt = [], []
for (m, sd), r in (runs | q7_only).items():
    if sd != seeds[0] and m != "multi-depth":
        continue
    t = time.time()
    rows, summary = benchmark(r.model, prompts, max_new, configs, repeats=repeats, seed=sd)
    speed_rows += [{"model": m, "seed": sd, "threads": torch.get_num_threads(), **x} for x in summary]
    per_prompt += [{"model": m, "seed": sd, **x} for x in rows]
    print(f"{m} seed {sd}: {time.time() - t:.0f} s")
speed = rep.table(pd.DataFrame(speed_rows), "speculative_speed")
speed[["model", "seed", "draft depth", "draft length", "plain tokens/s", "speculative tokens/s", "speed-up",
       "speed-up lo", "speed-up hi", "acceptance", "tokens per round", "calls / plain calls"]].round(3)

# %%
first = speed[speed.seed == seeds[0]]
sp = alt.Chart(first).encode(x=alt.X("draft depth:O", title="draft depth d"),
                             xOffset=alt.XOffset("draft length:N"),
                             color=alt.Color("draft length:N", title="draft length"))
bars = sp.mark_point(filled=True, size=60).encode(y=alt.Y("speed-up:Q", title="speed-up over plain decoding"))
ci = sp.mark_rule().encode(y="speed-up lo:Q", y2="speed-up hi:Q")
ref = alt.Chart(pd.DataFrame({"y": [1.0, verdicts.SPEEDUP_TARGET],
                              "what": ["1: no speed-up", f"{verdicts.SPEEDUP_TARGET:g}: Q7's target"]}))
ref_rule = ref.mark_rule(strokeDash=[4, 3], color="gray").encode(y="y:Q")
ref_text = ref.mark_text(align="left", dx=2, dy=-5, color="gray", fontSize=10).encode(y="y:Q", text="what:N",
                                                                                       x=alt.value(0))
acc = alt.Chart(first).mark_line(point=True).encode(
    x=alt.X("draft depth:Q", title="draft depth d"), y=alt.Y("acceptance:Q", title="acceptance rate"),
    color=alt.Color("draft length:N", title="draft length"))


def for_model(chart, m):
    return chart.transform_filter(alt.datum.model == m)


rep.chart(alt.vconcat(
    alt.hconcat(*[(ref_rule + ref_text + for_model(ci, m) + for_model(bars, m)).properties(
        width=170, height=180, title=m) for m in MODELS]),
    alt.hconcat(*[for_model(acc, m).properties(width=170, height=150, title=m) for m in MODELS])),
    "speculative_speed")

# %% [markdown]
# **Draft recalibration.** The draft reads a depth-d state with a readout trained on depth-K states (section 10). A
# head/diagonal probe fitted for depth d (on the probe documents, `tiedlm_lib.depth.readout`) changes what the draft
# proposes, never what is output: outputs stay identical; acceptance may change. First seed, single- and multi-depth
# models.

# %%
cal_rows = []
for m in ("single-depth", "multi-depth"):
    r = runs[m, seeds[0]]
    full = plan(r.config.model.layout, "prefix", K)
    for d in sorted({c[0] for c in configs}):
        st = collect_states(r.model, batches(probe_idx), plan(r.config.model.layout, "prefix", d), "head", full=full)
        fitted = fit_probe(r.model, st, ProbeSpec("head", "diagonal"), lams=[1e-3, 1e-2, 1e-1], iters=40)
        for probe, label in ((None, "none"), (fitted, "head/diagonal")):
            _, summ = benchmark(r.model, prompts, max_new, [(d, draft_lens[-1])], repeats=1, probe=probe)
            cal_rows.append({"model": m, "draft depth": d, "draft length": draft_lens[-1], "draft probe": label,
                             "acceptance": summ[0]["acceptance"], "tokens per round": summ[0]["tokens per round"]})
draft_cal = rep.table(pd.DataFrame(cal_rows), "draft_recalibration")
draft_cal.pivot_table(index=["model", "draft depth", "draft length"], columns="draft probe",
                      values="acceptance").round(3)

# %% [markdown]
# ## 2. Exit rules against the oracle
#
# Every depth 1..K read out for every real target of the held-out pool (documents outside the probe documents), one
# causal pass per sequence. For each rule, thresholds at quantiles of its confidence; for each threshold the average
# depth, the NLL and the agreement with the full-depth top token, with document-bootstrap CIs. The learned rule is a
# logistic probe fitted on the probe documents. The oracle (black) exits at the earliest depth that agrees with full
# depth.

# %%
features, probes_ = {}, {}
exit_rows = []
for (m, sd), r in runs.items():
    f = collect_features(r.model, batches(pool_idx))
    features[m, sd] = f
    probes_[m, sd] = ExitProbe.fit(collect_features(r.model, batches(probe_idx)))
    for c in (*CRITERIA, "learned"):
        conf = probes_[m, sd].confidence(f) if c == "learned" else confidence(f, c)
        finite = conf[np.isfinite(conf)]
        taus = np.unique(np.quantile(finite, np.linspace(0.05, 0.99, 12))) if c != "stability" else range(1, K + 1)
        exit_rows += [{"model": m, "seed": sd, "rule": c, **x} for x in curve(f, conf, taus, n_boot, sd)]
    exit_rows.append({"model": m, "seed": sd, "rule": "oracle", "tau": np.nan, **outcome(f, oracle_depths(f))})
exits = rep.table(pd.DataFrame(exit_rows), "exit_curves")
exits[exits.rule == "oracle"].round(3)

# %%
base = alt.Chart(exits).transform_filter(alt.datum.rule != "oracle").encode(
    x=alt.X("avg depth:Q", title="average depth"), color=alt.Color("rule:N", title="rule"), detail="seed:N")
orc = alt.Chart(exits).transform_filter(alt.datum.rule == "oracle").mark_point(shape="diamond", size=80, filled=True,
                                                                              color="black")
agree = (base.mark_line(point=alt.OverlayMarkDef(size=12)).encode(
    y=alt.Y("agreement:Q", title="agreement with full depth")) + orc.encode(x="avg depth:Q", y="agreement:Q"))
nll = (base.mark_line(point=alt.OverlayMarkDef(size=12)).encode(
    y=alt.Y("nll:Q", scale=alt.Scale(zero=False), title="NLL, real targets (nats)"))
    + orc.encode(x="avg depth:Q", y="nll:Q"))
rep.chart(alt.vconcat(
    alt.hconcat(*[for_model(agree, m).properties(width=190, height=170, title=f"{m} (black: oracle)")
                  for m in MODELS]),
    alt.hconcat(*[for_model(nll, m).properties(width=190, height=170) for m in MODELS])), "exit_curves")

# %% [markdown]
# ## 3. Exits with a guarantee
#
# For each model, seed, rule (max-prob, paper A's; the learned probe) and ε: `n_splits` random halvings of the pool
# into calibration and test documents; Learn-then-Test (δ = `delta`, thresholds on a fixed grid) on the calibration
# half; on the test half, the share of tokens whose exit disagrees with full depth (with its standard error,
# documents as the unit) and the average depth (`exits.guarantee_splits`). A split whose ε cannot be certified runs at
# full depth. The guarantee bounds the long-run disagreement rate, not a finite test half's: Q9 therefore judges the
# rate itself with its interval against ε (`exits.rate_minus_eps`), and the share of splits whose test half exceeded ε
# is shown beside it as a description. The splits reuse one pool of documents (they are dependent); the interval
# averages their standard errors, which is conservative for that. Hoeffding's bound is conservative too: with few
# calibration documents even the latest exit may not be certified, and the certified share is reported beside the
# depth.

# %%
grid = np.linspace(0.0, 1.0, 41)
g_rows = []
for (m, sd), f in features.items():
    rng = np.random.default_rng(sd)
    for rule in ("maxprob", "learned"):
        conf = probes_[m, sd].confidence(f) if rule == "learned" else confidence(f, rule)
        for eps in eps_grid:
            g_rows += [{"model": m, "seed": sd, "rule": rule, "eps": eps, **r}
                       for r in guarantee_splits(f, conf, grid, eps, delta, cfg0.data.seq_len, n_splits, rng)]
guar = pd.DataFrame(g_rows)
rep.table(guar, "guarantee_splits")
cover = rep.table(guar.groupby(["model", "seed", "rule", "eps"], as_index=False).agg(
    splits=("split", "count"), certified=("certified", "mean"), violations=("violated", "sum"),
    violation_rate=("violated", "mean"), avg_depth=("avg depth", "mean"),
    disagreement=("test disagreement", "mean"), disagreement_se=("test disagreement se", "mean")), "guarantee")
cover.round(3)

# %%
gc = alt.Chart(cover).encode(x=alt.X("eps:Q", title="ε (tolerated disagreement)"), color=alt.Color("model:N"),
                             shape=alt.Shape("rule:N"), detail="seed:N")
depth_chart = gc.mark_line(point=True).encode(y=alt.Y("avg_depth:Q", title="average depth on test documents"))
viol_chart = gc.mark_point(filled=True, size=50).encode(y=alt.Y("violation_rate:Q", title="share of splits violated"))
dl = alt.Chart(pd.DataFrame({"y": [delta], "t": [f"δ = {delta:g}"]}))
rep.chart(alt.hconcat(depth_chart.properties(width=260, height=200),
                      (viol_chart + dl.mark_rule(strokeDash=[4, 3], color="gray").encode(y="y:Q")
                       + dl.mark_text(align="left", dx=2, dy=-5, color="gray").encode(y="y:Q", text="t:N",
                                                                                     x=alt.value(0)))
                      .properties(width=260, height=200)), "guarantee")

# %% [markdown]
# ## The questions
#
# Criteria are functions of `tiedlm_lib.paper.verdicts`, unit-tested for every outcome. Q7 and Q8 follow
# docs/statistics.md: each seed's estimate is pooled over the training seeds (random effects, HKSJ t-interval plus the
# shared-document term; one seed is not pooled and is that seed's CI), and the pooled 95% interval is read against the
# threshold (side, threshold and SESOI from `tiedlm_lib/preregistered.csv`); the seeds on each side are shown as
# descriptions.
#
# * **Q7** — does self-speculative decoding buy ≥ 1.5× greedy tokens/s at identical outputs on the multi-depth model?
#   One configuration is judged: `d1 L2` (`verdicts.Q7_CONFIG`), the best point on seed 0 of the three-seed run,
#   fixed before the pre-registration. It is judged, *yes* and *no* alike, on the **other seeds only** (the seed it
#   was selected on would favour it; at cpu seeds 1-9, the extended seeds included): *yes* if its pooled speed-up
#   lies above 1.5 (SESOI 0.1×), *no* if below, otherwise inconclusive. Every configuration is shown beside, pooled
#   over all seeds, not deciding. A run of seed 0 alone has no other seed: it is judged on that seed and says
#   "single seed: selected and judged on the same seed".
# * **Q8** — does an exit with a guarantee save depth on the single-depth model? With max-prob (paper A's rule), ε =
#   the middle of `eps_grid` and δ: per seed its average depth on test documents (mean over splits, full depth where
#   nothing was certified); *yes* if pooled over seeds it lies below 0.9·K, *no* if above (SESOI half an iteration),
#   otherwise inconclusive.
# * **Q9** — does the guarantee hold on unseen documents? Per model, rule and ε (each its own unit) and seed, the test
#   halves' disagreement rate minus ε, averaged over the splits, with its interval; pooled over seeds, *yes* if every
#   unit's interval lies below 0 (the rate is below ε), *no* if some unit's lies above 0 (Bonferroni over units),
#   inconclusive otherwise. The slack ε − rate is in the evidence: a large slack means a conservative guarantee.

# %%
mult = speed[speed.model == "multi-depth"]
per_config = {}
for _, r in mult.iterrows():
    per_config.setdefault(f"d{int(r['draft depth'])} L{int(r['draft length'])}", {})[int(r["seed"])] = Estimate(
        r["speed-up"], r["speed-up lo"], r["speed-up hi"])
measured = set(per_config.get(verdicts.Q7_CONFIG, {}))
q7_alone = measured == {0}  # seed 0 alone: no seed the selection did not see (verdicts.q7's selection_seed=None)
# each speed-up is plain time / speculative time: recomputed as the ratio of the per-prompt rows' geometric-mean times
pp = pd.DataFrame(per_prompt).query("model == 'multi-depth'")
geo = np.exp(np.log(pp[["plain s", "speculative s"]]).groupby([pp["draft depth"], pp["draft length"], pp.seed])
             .mean())
geo.index = [(f"d{d} L{L}", sd) for d, L, sd in geo.index]
assert_direction("Q7 speed-up", {(c, sd): e for c, ps in per_config.items() for sd, e in ps.items()},
                 geo["plain s"].to_dict(), geo["speculative s"].to_dict(), kind="ratio")
q7 = rep.judge(verdicts.q7(per_config, selection_seed=None if q7_alone else 0))
eps_mid = eps_grid[len(eps_grid) // 2]
single_mp = cover[(cover.model == "single-depth") & (cover.rule == "maxprob") & (cover.eps == eps_mid)]
q8 = rep.judge(verdicts.q8({int(r["seed"]): float(r["avg_depth"]) for _, r in single_mp.iterrows()}, K, eps_mid,
                           delta, "single-depth (v3), max-prob"))
q9_rates: dict[str, dict] = {}
q9_units = set()
for (m, sd, rule, eps), g in guar.groupby(["model", "seed", "rule", "eps"]):
    q9_units.add(f"{m}/{rule}/eps{eps:g}")
    e = rate_minus_eps(g.to_dict("records"), eps)  # certified splits only; None if none was certified
    if e is not None:
        q9_rates.setdefault(f"{m}/{rule}/eps{eps:g}", {})[int(sd)] = e
# each unit's evidence is rate − ε: the certified splits' mean test disagreement recomputed from the splits table
rate = guar[guar.certified.astype(bool)].groupby(["model", "seed", "rule", "eps"])["test disagreement"].mean()
q9_ev = {(u, sd): e for u, ps in q9_rates.items() for sd, e in ps.items()}
if q9_ev:  # nothing certified: no evidence, and Q9 is inconclusive by rule
    unit = {k: (f"{k[0]}/{k[2]}/eps{k[3]:g}", k[1]) for k in rate.index}  # (model, seed, rule, eps) -> Q9's key
    assert_direction("Q9 rate - eps", q9_ev, {unit[k]: v for k, v in rate.items()}, {u: k[3] for k, u in unit.items()})
q9 = rep.judge(verdicts.q9(q9_rates, delta, sorted(q9_units - set(q9_rates))))

# %% [markdown]
# ## Results and what they mean

# %%
sel_d, sel_L = (int(x[1:]) for x in q7["evidence"]["selected"].split())  # Q7's configuration, selected on seed 0
where = {"model": "multi-depth", "draft depth": sel_d, "draft length": sel_L}
best_speedup = rep.fact("best_speedup", "speculative_speed", "speed-up", where)  # mean over seeds
rep.fact("best_acceptance", "speculative_speed", "acceptance", where)
best_calls = rep.fact("best_calls", "speculative_speed", "calls / plain calls", where)
rep.fact("single_best", "speculative_speed", "speed-up", {"model": "single-depth"}, "max")
g_depth = {}
for m in MODELS:
    key = m.split("-")[0]
    rep.fact(f"oracle_{key}", "exit_curves", "avg depth", {"model": m, "rule": "oracle"})
    g_depth[m] = rep.fact(f"g_depth_{key}", "guarantee", "avg_depth", {"model": m, "rule": "maxprob", "eps": eps_mid})
    rep.fact(f"cert_{key}", "guarantee", "certified", {"model": m, "rule": "maxprob", "eps": eps_mid})
per_seed_depth = cover[(cover.rule == "maxprob") & (cover.eps == eps_mid)].pivot_table(
    index="seed", columns="model", values="avg_depth")
earlier = (per_seed_depth["multi-depth"] < per_seed_depth["single-depth"]).tolist()
rep.fact("worst_violation", "guarantee", "violation_rate", None, "max")
sel_rows = mult[(mult["draft depth"] == sel_d) & (mult["draft length"] == sel_L)]
bound_by_seed = {int(r["seed"]): call_bound_phrase(r["speed-up lo"], r["speed-up hi"], r["calls / plain calls"])
                 for _, r in sel_rows.iterrows()}  # against each seed's own call count
by_phrase: dict[str, list[int]] = {}
for sd, w in sorted(bound_by_seed.items()):  # seeds grouped by what their measurement says, not one clause each
    by_phrase.setdefault(w, []).append(sd)
bound_words = (f"{next(iter(by_phrase))} in every seed" if len(by_phrase) == 1 else "; ".join(
    f"{w} (seed{'s' if len(sds) > 1 else ''} {', '.join(map(str, sds))})" for w, sds in by_phrase.items()))
single_seeds = sorted(speed[speed.model == "single-depth"]["seed"].unique().tolist())
rep.prose("Results", "Greedy self-speculative decoding reproduced plain greedy decoding token for token in every "
          "timed run. On the multi-depth model the configuration Q7 judges (draft depth {d}, draft length {L}, "
          "selected on seed 0 before the pre-registration) ran at {best_speedup:.2f}× plain decoding's tokens/s "
          "(mean over seeds) with acceptance {best_acceptance:.2f}. It made {best_calls:.2f}× plain decoding's "
          "sequential block calls. On the single-depth model the best speed-up of any configuration was "
          "{single_best:.2f}× ({single_seeds_words}). The oracle exit averages {oracle_single:.1f} (single-depth), "
          "{oracle_multi:.1f} (multi-depth) and {oracle_sampled:.1f} (sampled-depth) of {K} depths. With a guarantee "
          "(max-prob, ε = {eps}, δ = {delta}) the exit averages {g_depth_single:.1f}, {g_depth_multi:.1f} and "
          "{g_depth_sampled:.1f} depths on unseen documents, certified in {cert_single:.0%}, {cert_multi:.0%} and "
          "{cert_sampled:.0%} of the calibration splits. The largest share of splits that exceeded ε on their test "
          "half was {worst_violation:.2f}.",
          d=str(sel_d), L=str(sel_L), K=str(K), eps=f"{eps_mid:g}",
          single_seeds_words=(f"timed on seed {single_seeds[0]} only" if len(single_seeds) == 1 else
                              f"over seeds {', '.join(map(str, single_seeds))}"),
          delta=f"{delta:g}")

# %%
rep.prose("What this means", "Self-speculative decoding {q7_words} (Q7 {q7}; {q7_seeds}). {why}\n\nAn exit with a "
          "guarantee {q8_words} on the single-depth model (Q8 {q8}), and the guarantee {q9_words} (Q9 {q9}). The "
          "trade-off law in guaranteed terms, as a description that no criterion judges: averaged over calibration "
          "splits, the guaranteed exit of the model trained for every depth is shallower than the single-depth "
          "model's in {n_earlier} of {n_seeds} seeds.",
          q7=q7["verdict"], q8=q8["verdict"], q9=q9["verdict"],
          q7_words={"yes": "buys at least 1.5× wall-clock speed at exact outputs on the multi-depth model",
                    "no": "does not reach 1.5× wall-clock speed on the multi-depth model at this scale"}.get(
              q7["verdict"], "may or may not reach 1.5× on the multi-depth model: the pooled interval does not "
              "settle it"),
          q7_seeds=("single seed: selected and judged on the same seed" if q7_alone else
                    f"judged on seed{'s' if len(measured - {0}) > 1 else ''} "
                    f"{', '.join(map(str, sorted(measured - {0})))}, without seed 0, on which it was selected"),
          why=(f"Each drafted token still runs the layers around the loop plus d iterations, so the selected "
               f"configuration makes {best_calls:.2f}× plain decoding's sequential block calls (mean over seeds): "
               f"{1 / best_calls:.2f}× would be the speed-up if calls were all that cost, and it ran at "
               f"{best_speedup:.2f}×. Per seed, the measured speed-up (its CI over prompts) {bound_words}."),
          q8_words={"yes": "saves at least a tenth of the depth", "no": "saves less than a tenth of the depth"}.get(
              q8["verdict"], "may or may not save a tenth of the depth: the pooled interval does not settle it"),
          q9_words={"yes": "held on unseen documents wherever an exit was certified",
                    "no": "failed on unseen documents"}.get(
              q9["verdict"], "could not be shown to hold on unseen documents in every case (some pooled interval "
                             "reaches ε)"),
          n_earlier=str(sum(earlier)), n_seeds=str(len(earlier)))
