# %% [markdown]
# # 07 · Several loops: is diversity the sweet spot? (paper A, §5.5, extended)
#
# Paper A splits the 30 tied iterations over several loops at (nearly) the same parameter count: one loop (v10,
# 2.508 real-token), two loops with a bridge layer (v12, 2.4994), three loops (v13, **2.4922**), four loops (v14,
# 2.514). It concludes that "three loops are the sweet spot" — diversity helps, then regresses — and reads the final
# α per loop (v13: 0.059 / 0.072 / 0.126; v14's last loop 0.261) as role differentiation. The gaps are 0.007–0.022
# nats from one seed, and v14 differs from v13 in a second way the paper names: to keep the parameter count it drops
# the closing standard layer, so its last loop feeds the head directly.
#
# Here: the same layouts at one parameter budget and one total iteration count, several seeds, paired CIs pooled over
# the seeds (the training seed is the unit: docs/statistics.md); v14 with the closing layer restored (v14c, one block
# more: the confound isolated, parameters not matched); α per loop over training. The runs use the same size and
# schedule as section 06 (shared: v10).

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | paper
device = None  # cpu | cuda; default: TIEDLM_DEVICE, else CUDA when available, else the CPU
seeds = None  # training seeds; default: the scale's (smoke: [0], cpu: [0, 1, 2, 3, 4])
extended_seeds = None  # further seeds of v14 and v14u for A16's under-iterated half; default: the scale's (cpu: 5-9)
figures_dir = None  # default: figures/<scale>/
paper_dir = None  # default: paper/<scale>/
n_boot = 2000
n_batches = 60  # the suffix benchmark: 60 batches × 16 held-out sequences (the paper's size)
batch_size = 16
size = None  # default: the scale's preset, as section 06 (registry.section_overrides)
steps = None  # default: likewise (0.8 x the scale's short run at smoke/cpu; the paper's own at paper)

# %%
import math

import altair as alt
import pandas as pd

from tiedlm_lib import get_run
from tiedlm_lib.evaluation.analysis import assert_direction, cached_corpus, heldout_scores
from tiedlm_lib.evaluation.suffix_benchmark import draw
from tiedlm_lib.paper import verdicts
from tiedlm_lib.paper.report import Report, listed, seed_color
from tiedlm_lib.paper.reported import reported
from tiedlm_lib.runs import get_scale, section_overrides, sft_run
from tiedlm_lib.stats import inference
from tiedlm_lib.stats.bootstrap import paired_diff

rep = Report("07_multi_loop", scale, figures_dir, paper_dir, seeds=seeds, extended_seeds=extended_seeds)
seeds = rep.seeds
S = get_scale(scale)
OVR = section_overrides(scale) | ({"size": size} if size else {}) | ({"train.steps": steps} if steps else {})
steps = OVR.get("train.steps")  # None: each experiment's own steps (the paper scale)
CAST = {"1 loop (v10)": "v10", "2 loops + bridge (v12)": "v12", "3 loops (v13)": "v13",
        "4 loops, no closing layer (v14)": "v14", "4 loops + closing layer (v14c)": "v14c",
        "4 loops, last under-iterated (v14u)": "v14u"}  # v14u: A16's second half (its last loop has K/8 iterations)
UNDER, EQUAL = "4 loops, last under-iterated (v14u)", "4 loops, no closing layer (v14)"
print(f"scale {scale}: overrides {OVR or 'none (the paper runs)'}, seeds {seeds}"
      + (f"; v14 and v14u also at seeds {rep.extended} (A16's under-iterated half)" if rep.extended else ""))

# %% [markdown]
# Every layout at the section's seeds. v14 and v14u, the pair A16's second half compares, are also trained at the
# scale's extended seeds (cpu: 5-9; docs/statistics.md amendment 14): only their final α is read there, by that half
# alone. Every score, gap and the other claims rest on the section's seeds.

# %%
runs = {(label, seed): get_run(name, scale, seed, OVR, device=device) for label, name in CAST.items() for seed in seeds}
alpha_only = {(label, seed): get_run(CAST[label], scale, seed, OVR, device=device) for label in (EQUAL, UNDER)
              for seed in rep.extended}
pd.DataFrame([{"model": m, "seed": s, "layout": r.config.model.layout, "params": r.model.num_params(),
               "train s": round(r.result["seconds"]), "final α": r.result["alpha"], "read for": "every claim"
               if s in seeds else "A16's under-iterated half"} for (m, s), r in (runs | alpha_only).items()])

# %% [markdown]
# ## Held-out scores and the gaps to one loop
#
# Each gap per seed with a paired document-bootstrap CI, then pooled over the training seeds (random effects, HKSJ
# t-interval with the shared-document term; docs/statistics.md §1): the pooled point and its 95% interval, the SD
# between seeds, the 95% prediction interval for a new seed, and how many seeds' own CIs lie above or below 0 (a
# description, not a verdict). With one seed the pooled row is that seed's CI.

# %%
corpus = cached_corpus(runs["1 loop (v10)", seeds[0]].config.data)
bench = draw(corpus.val, S.seq_len, "heldout", n_batches, batch_size)
scores = {key: heldout_scores(r, bench) for key, r in runs.items()}
table = rep.table(pd.DataFrame([{"model": m, "seed": s, "suffix real-token": sc["suffix"].masked,
                                 "full-sequence masked": sc["full"].masked} for (m, s), sc in scores.items()]),
                  "scores")
display(table.groupby("model", sort=False)[["suffix real-token", "full-sequence masked"]]  # noqa: F821
        .agg(["mean", "std"]).round(4))
gap_rows, ests = [], {}
PAIRS = {"2 loops - 1 loop": ("2 loops + bridge (v12)", "1 loop (v10)"),
         "3 loops - 1 loop": ("3 loops (v13)", "1 loop (v10)"),
         "3 loops - 2 loops": ("3 loops (v13)", "2 loops + bridge (v12)"),
         "4 loops - 3 loops": ("4 loops, no closing layer (v14)", "3 loops (v13)"),
         "4 loops + closing - 4 loops": ("4 loops + closing layer (v14c)", "4 loops, no closing layer (v14)")}
for g, (a, b) in PAIRS.items():
    for seed in seeds:
        e = paired_diff(scores[a, seed]["suffix"], scores[b, seed]["suffix"], "masked", n_boot, seed)
        ests.setdefault(g, []).append(e)
        gap_rows.append({"gap": g, "seed": seed, "value": e.point, "lo": e.lo, "hi": e.hi})
gaps = rep.table(pd.DataFrame(gap_rows), "gaps")
nll = table.set_index(["model", "seed"])["suffix real-token"]
for g, (a, b) in PAIRS.items():  # each gap is first − second, recomputed from the scores table's real-token NLLs
    assert_direction(g, dict(zip(seeds, ests[g])), {sd: nll[a, sd] for sd in seeds}, {sd: nll[b, sd] for sd in seeds})


def pooled_columns(es):
    p = inference.pool(es)
    return {"pooled": p.point, "pooled lo": p.lo, "pooled hi": p.hi, "between-seed sd": p.between_sd,
            "new seed lo": p.pred_lo, "new seed hi": p.pred_hi, **inference.seed_counts(es)}


gap_pooled = rep.table(pd.DataFrame([{"gap": g, **pooled_columns(es)} for g, es in ests.items()]), "gap_pooled")
gap_pooled.round(4)

# %% [markdown]
# Reported (paper scale, one seed):

# %%
pd.DataFrame(reported("bench.v10.real") + reported("bench.v12.real") + reported("bench.v13.real") +
             reported("bench.v14.real"))[["id", "value", "source"]]

# %%
gc = alt.Chart(gaps).mark_point(filled=True).encode(x=alt.X("value:Q", title="real-token gap (nats)"),
                                                     y=alt.Y("gap:N", title=None), color=seed_color(seeds))
ge = alt.Chart(gaps).mark_rule().encode(x="lo:Q", x2="hi:Q", y="gap:N", color=seed_color(seeds))
zero = (alt.Chart(pd.DataFrame({"x": [0]})).mark_rule(color="gray").encode(x="x:Q")
        + alt.Chart(pd.DataFrame({"x": [0], "t": ["0: no difference"]})).mark_text(
            align="left", dx=3, dy=-4, color="gray", fontSize=9).encode(x="x:Q", y=alt.value(6), text="t:N"))
rep.chart((ge + gc + zero).properties(width=380, height=160), "gaps")

# %% [markdown]
# ## α per loop over training
#
# The step size α = clamp(sigmoid(a), 0.01, 0.9) of each loop, from the training logs.

# %%
alpha_rows = []
for (m, s), r in (runs | alpha_only).items():
    for rec in r.metrics:
        for loop, a in (rec.get("alpha") or {}).items():
            alpha_rows.append({"model": m, "seed": s, "step": rec["step"], "loop": loop, "alpha": a})
alphas = pd.DataFrame(alpha_rows)
final = alphas.sort_values("step").groupby(["model", "seed", "loop"]).alpha.last().unstack("loop")
rep.table(final.reset_index(), "final_alpha")
display(final.round(3))  # noqa: F821
ac = alt.Chart(alphas[alphas.model != "1 loop (v10)"]).mark_line().encode(
    x="step:Q", y=alt.Y("alpha:Q", title="α"), color="loop:N", detail="seed:N").properties(width=200, height=150)
rep.chart(ac.facet(facet=alt.Facet("model:N", sort=list(dict.fromkeys(alphas.model))), columns=2),
          "alpha_by_loop")  # facets in the runs' order (fewer loops first), not a-z

# %% [markdown]
# ## The full pipeline: pre-training then SFT
#
# Paper A's best full-pipeline model is the three-loop model after SFT (v13S: 2.8802 real-token, 1.1429 with pad).
# The same SFT (the paper's protocol, a quarter of the pre-training steps) of the three-loop model, beside section
# 06's SFT runs of the one-loop tied model and the vanilla model (the same configurations, so cached).

# %%
sft_steps = max(2, steps // 4) if steps else None  # None: the paper's SFT recipe (28,304 steps; sft_run)
PIPE = {"3 loops (v13)": "v13", "1 loop (v10)": "v10", "vanilla (v9)": "v9"}
pipe = {}
for label, name in PIPE.items():
    for seed in seeds:
        base = get_run(name, scale, seed, OVR, device=device)
        pipe[label, seed] = get_run(sft_run(base.config, f"{name}-sft-paper", "paper", steps=sft_steps), device=device)
pipe_scores = {k: heldout_scores(r, bench)["suffix"] for k, r in pipe.items()}
pipe_tab = rep.table(pd.DataFrame([{"model": f"{m} + SFT", "seed": s, "real token": v.masked,
                                    "with pad": v.with_pad} for (m, s), v in pipe_scores.items()]), "pipeline")
pipe_est = {other: [paired_diff(pipe_scores["3 loops (v13)", s], pipe_scores[other, s], "masked", n_boot, s)
                    for s in seeds] for other in ("1 loop (v10)", "vanilla (v9)")}
pipe_nll = pipe_tab.set_index(["model", "seed"])["real token"]
for o, es in pipe_est.items():  # 3 loops + SFT − other + SFT, recomputed from the pipeline table's real-token NLLs
    assert_direction(f"3 loops + SFT - {o} + SFT", dict(zip(seeds, es)),
                     {sd: pipe_nll["3 loops (v13) + SFT", sd] for sd in seeds},
                     {sd: pipe_nll[f"{o} + SFT", sd] for sd in seeds})
display(pipe_tab.groupby("model")[["real token", "with pad"]].agg(["mean", "std"]).round(4))  # noqa: F821
pd.DataFrame([{"gap": f"3 loops + SFT - {o} + SFT", **{f"s{s}": f"{e.point:+.3f} [{e.lo:+.3f}, {e.hi:+.3f}]"
                                                         for s, e in zip(seeds, es)}, **pooled_columns(es)}
              for o, es in pipe_est.items()]).round(4)

# %% [markdown]
# ## The claims
#
# Every criterion reads an estimate pooled over the training seeds (its 95% interval: the HKSJ t-interval with the
# shared-document term) against a threshold and a smallest effect size of interest (SESOI), pre-registered in
# `tiedlm_lib/preregistered.csv` (docs/statistics.md §2, §7). A claim over several units is reproduced only when every
# unit is (intersection–union) and not reproduced when some unit contradicts it at the Bonferroni level over its
# units. How many seeds' own CIs lie on each side is shown beside, never deciding.
#
# * **A15** — diversity helps up to three loops, then regresses: the pooled gaps three − one and three − two loops
#   lie below 0 and four − three loops above 0 (real-token suffix NLL). Not reproduced if one of the three lies on
#   the other side of 0 or inside ±0.02 nats (the model-vs-model SESOI); otherwise inconclusive.
# * **A16** — α differentiates by loop, and a loop with too few iterations inflates its α. The first half: in every
#   multi-loop layout, log(final α of the last loop / final α of the first), pooled over seeds, lies above 0 (not
#   reproduced below 0 or inside ±log 1.1). The second half needs a layout whose last loop has fewer iterations than
#   the others, as paper A's v14 (8/8/7/7) has: v14u gives its last loop an eighth of K (2 of 16 at cpu, 3 of 30 at
#   the paper scale) and the rest to three loops; per seed, log(α of its last loop / mean α of its other loops) minus
#   the same in v14 (equal loops, same seed), pooled over seeds, lies above 0 (not reproduced below 0 or inside
#   ±log 1.1); this half alone also reads the extended seeds (cpu: 5-9). At smoke (K = 4) v14u has the same loops as
#   v14, so this half has nothing to find there.
# * **A17** — the three-loop model is the best full-pipeline model: after SFT the pooled gaps of its real-token NLL
#   to the one-loop tied model's and to the vanilla model's both lie below 0; not reproduced if either lies above 0
#   or inside ±0.02 nats (Bonferroni over the two).
# * **Q4** (multi-loop part) — do these gaps exceed their noise across seeds? Per gap, *yes* if its pooled interval
#   excludes 0, *no* if it lies inside ±0.02 nats, otherwise *inconclusive*; the answer is the three-vs-one-loop
#   gap's, every other gap's beside it.
#
# All criteria are functions of `tiedlm_lib.paper.verdicts`, unit-tested for every outcome.

# %%
per_seed = {g: dict(zip(seeds, es)) for g, es in ests.items()}
a15 = verdicts.a15(per_seed)
a16 = verdicts.a16({m: {sd: final.loc[(m, sd)].dropna().to_dict() for (m_, sd) in final.index if m_ == m}
                    for m in CAST}, under=UNDER, equal=EQUAL, extended=rep.extended)
a17 = verdicts.a17({f"3 loops + SFT - {o} + SFT": dict(zip(seeds, es)) for o, es in pipe_est.items()})
q4 = verdicts.q4(per_seed, "3 loops - 1 loop")
# A16 builds its log ratios from the order of the dicts' loops: recomputed from the final-α table in each model's own
# loop order (last over first; the under-iterated layout's last over the mean of its others, minus the same in v14)
loops = {m: runs[m, seeds[0]].model.loop_names for m in CAST}
for m in (m for m in CAST if len(loops[m]) > 1 and m != UNDER):
    assert_direction(f"A16 log(alpha last / first), {m}",
                     {sd: a16.evidence[f"alpha differentiates by loop: {m}"][f"s{sd}"][0] for sd in seeds},
                     {sd: math.log(final.loc[(m, sd), loops[m][-1]]) for sd in seeds},
                     {sd: math.log(final.loc[(m, sd), loops[m][0]]) for sd in seeds})


def inflation(m, sd):
    a = [final.loc[(m, sd), n] for n in loops[m]]
    return math.log(a[-1] / (sum(a[:-1]) / len(a[:-1])))


assert_direction("A16 inflation, v14u - v14",
                 {sd: a16.evidence[f"an under-iterated loop inflates alpha: {UNDER} - {EQUAL}"][f"s{sd}"][0]
                  for sd in seeds + rep.extended},
                 {sd: inflation(UNDER, sd) for sd in seeds + rep.extended},
                 {sd: inflation(EQUAL, sd) for sd in seeds + rep.extended})
for j in (a15, a16, a17, q4):
    rep.judge(j)

# %% [markdown]
# ## Results and what they mean
#
# Every number is read from this section's tables (`rep.fact`); every direction word is derived from those numbers
# or from the verdicts above.

# %%
g = {name: rep.fact(key, "gaps", "value", {"gap": name}) for key, name in (
    ("g21", "2 loops - 1 loop"), ("g31", "3 loops - 1 loop"), ("g32", "3 loops - 2 loops"),
    ("g43", "4 loops - 3 loops"), ("g4c", "4 loops + closing - 4 loops"))}
best = table.groupby("model")["suffix real-token"].mean().idxmin()
# "lowest" only where the pooled intervals say so: the best-mean model against every other model, paired per seed
# and pooled (best - other < 0 everywhere); otherwise the means are indistinguishable at this scale
others = [m for m in table.model.unique() if m != best]
vs_best = rep.table(pd.DataFrame([{"best - other": f"{best} - {o}", **pooled_columns(
    [paired_diff(scores[best, sd]["suffix"], scores[o, sd]["suffix"], "masked", n_boot, sd) for sd in seeds])}
    for o in others]), "best_vs_others")
beats = (vs_best["pooled hi"] < 0).tolist()
# "lowest" is scoped to the layouts compared here: section 06's vanilla models (the compute-matched v9c among them)
# are scored on the same benchmark but are not in this comparison
cast_n = f"the {len(others) + 1} loop layouts compared here"
lowest = (f"{best} has the lowest NLL of {cast_n}: its pooled gap to every other layout lies below 0."
          if beats and all(beats) else
          f"The lowest mean NLL of {cast_n} is {best}'s, but it is not distinguishable at this scale: "
          f"{len(beats) - sum(beats)} of its {len(beats)} pooled gaps to the other layouts include 0 or favour the "
          "other layout.") + (" Section 06's vanilla models, the compute-matched v9c included, are not in this "
                              "comparison.")
rep.prose("Results", "Real-token suffix NLL relative to fewer loops (mean over {n} seed{s}): two loops with a bridge "
          "{g21:+.3f} against one loop, three loops {g31:+.3f} against one and {g32:+.3f} against two, four loops "
          "{g43:+.3f} against three. Restoring the closing layer of the four-loop model changes it by {g4c:+.3f}. "
          "{lowest}", n=str(len(seeds)), s="s" if len(seeds) > 1 else "", lowest=lowest)

# %%
side = verdicts.side  # where a unit's pooled interval lies: "negligible", "below 0", "above 0" or "undecided"


def against(j):
    """The units that go against a judgement's claim, each with where its pooled interval lies."""
    def where(b):
        return {"negligible": f"inside ±{b['pooled']['sesoi']:g}"}.get(side(b), side(b))
    return ", ".join(f"{u} lies {where(j.evidence[u])}" for u, v in j.outcomes.items() if v == "not reproduced")


four = side(a15.evidence["4 loops - 3 loops"])
four_worse = four == "above 0"  # the regression the closing-layer confound would explain
DIFF = "alpha differentiates by loop: "
first_half = {u[len(DIFF):]: v for u, v in a16.outcomes.items() if u.startswith(DIFF)}
alpha_not = [u for u, v in first_half.items() if v == "not reproduced"]
INFLATE = f"an under-iterated loop inflates alpha: {UNDER} - {EQUAL}"
under_p = [a16.evidence[INFLATE]["pooled"]["point"], *a16.evidence[INFLATE]["pooled"]["interval"]]
sft_words = {"below 0": "its pooled gap lies below 0 (better)", "above 0": "its pooled gap lies above 0 (worse)",
             "negligible": "its pooled gap lies inside ±0.02 nats", "undecided": "its pooled gap's interval holds 0"}
rep.prose("What this means", "Loop diversity {a15_words} (A15 {a15}). Four loops {four}. Restoring the closing "
          "layer {closing} ({g4c:+.3f} nats on average).\n\n"
          "Per-loop step sizes: {a16_words} (A16 {a16}).\n\nAfter SFT the three-loop model is {a17_words} (A17 "
          "{a17}). Across seeds, {q4_words} (Q4 {q4}).", a15=a15.verdict, a16=a16.verdict, a17=a17.verdict,
          q4=q4.verdict,
          a15_words={"reproduced": "helps up to three loops and then regresses",
                     "not reproduced": "does not follow the paper's up-then-down pattern. Against it, "
                                       + against(a15)}.get(
              a15.verdict, "is not settled by the pooled gaps"),
          four={"above 0": "are worse than three (pooled interval above 0)",
                "below 0": "are better than three (pooled interval below 0)",
                "negligible": "match three within ±0.02 nats"}.get(four, "are not separated from three"),
          closing={"below 0": "improves the four-loop model (pooled interval below 0)" + (
                       ", the confound the paper names" if four_worse else ""),
                   "above 0": "makes the four-loop model worse (pooled interval above 0)" + (
                       ", so the confound the paper names does not explain the regression" if four_worse else ""),
                   "negligible": "leaves the four-loop model unchanged within ±0.02 nats" + (
                       ", so the confound the paper names does not explain the regression" if four_worse else "")}.get(
              side(q4.evidence["4 loops + closing - 4 loops"]),
              "is not separated from leaving it out: the pooled interval holds 0, while {up} seeds' own CIs lie above "
              "0 and {down} below, so the seeds disagree in sign".format(
                  up=q4.evidence["4 loops + closing - 4 loops"]["pooled"]["seeds above"],
                  down=q4.evidence["4 loops + closing - 4 loops"]["pooled"]["seeds below"])),
          a16_words=("the last loop's final α is not above the first's in " + listed(alpha_not)
                     + ". There the log ratio, pooled over seeds, lies below 0 or inside ±log 1.1"
                     if alpha_not else
                     "the last loop's final α is above the first's in every multi-loop layout (pooled over seeds)"
                     if all(v == "reproduced" for v in first_half.values()) else
                     "whether the last loop's final α exceeds the first's is not settled in every multi-loop layout")
                    + ". " + {
                        "reproduced": "A loop with too few iterations inflates its α (v14u against v14)",
                        "not reproduced": {"negligible": "A loop with too few iterations inflates its α by less "
                                                         "than a factor of 1.1 if at all (v14u against v14: the "
                                                         "pooled log ratio {:+.3f} [{:+.3f}, {:+.3f}] lies inside "
                                                         "±log 1.1)",
                                           "below 0": "A loop with too few iterations has a smaller α, not a larger "
                                                      "one (v14u against v14: the pooled log ratio {:+.3f} "
                                                      "[{:+.3f}, {:+.3f}] lies below 0)"}.get(
                            side(a16.evidence[INFLATE]), "").format(*under_p)}.get(
                        a16.outcomes.get(INFLATE),
                        "Whether a loop with too few iterations inflates its α is not settled (v14u against v14)"),
          a17_words={"reproduced": "the best full-pipeline model",
                     "not reproduced": f"not shown to be the best. Against it, {against(a17)}"}.get(
              a17.verdict, "not shown to be the best: "
              + "; ".join(f"against {u.split(' - ', 1)[1].replace(' + SFT', '')}, {sft_words[side(a17.evidence[u])]}"
                          for u in a17.outcomes)),
          q4_words={"below 0": "the three- versus one-loop gap's pooled interval lies below 0",
                    "above 0": "the three- versus one-loop gap's pooled interval lies above 0",
                    "negligible": "the three- versus one-loop gap's pooled interval lies inside ±0.02 nats"}.get(
              side(q4.evidence["3 loops - 1 loop"]),
              "the three- versus one-loop gap's pooled interval neither excludes 0 nor lies inside ±0.02 nats"))
