# %% [markdown]
# # 14 · Across sizes: each effect as a trend toward the paper's size
#
# Every verdict of the ledger is measured at one point: d64 / d128, K = 16, 1,000 steps on KJV verses. The first
# question a reader asks is whether the findings transfer to other sizes. Paper A itself has two sizes and one seed,
# and neither paper reports an effect as a function of size with seed-level intervals. This section trains the
# small recipe over a **width ladder** and a **depth ladder**, measures each effect at every point, pooled over
# training seeds, and reads how it moves with size (docs/statistics.md amendment 17, written and committed before any
# ladder run was trained).
#
# * **The width ladder**: the single-depth (v3) and multi-depth (v4) models at K = 16 and the short run's 1,000 steps,
#   at d = 32, 64, 96, 128, 192 and 320. Every width sees the same batches of the same documents (a seed's batch stream
#   does not depend on the model), so size is the only change. The recipe's rule across widths: heads = d / 32 and a
#   peak learning rate 2e-3 × 64 / d. Today's v3/v4 (d64) and v5/v6 (d128) follow it and are ladder points as they
#   are. d128's blocks are those of paper A's small model, d320's those of its large model.
# * **The depth ladder**: the same two models at d64 with K = 8, 16 and 30 (30 is paper A's K).
#
# Size is counted in **block parameters** (the standard and tied blocks, without the vocabulary-sized embedding and
# head, where most of paper A's parameters sit). What the ladder does not vary is said beside it: the vocabulary
# (512 against paper A's 23,005), the sequence length (128 against 256), the corpus (KJV verses against minimind) and
# the steps (1,000 against 3,000).
#
# **Nothing here judges a claim.** A trend is described with the pre-registered words only: an effect **grows** or
# **shrinks** with size when the pooled slope's 95% interval lies above or below 0, otherwise there is **no detectable
# trend**. Its sign across the points **holds at every size**, **holds where decided**, **changes direction between
# sizes**, or is **decided at no size** (`tiedlm_lib.runs.ladder`). These are nominal 95% descriptions without a
# multiplicity correction.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu (the size ladder is defined at these two scales)
device = None  # cpu | cuda; default: TIEDLM_DEVICE, else CUDA when available, else the CPU
seeds = None  # the section's seeds for the report; the ladder's own seeds are fixed per point (amendment 17)
figures_dir = None  # default: figures/<scale>/
paper_dir = None  # default: paper/<scale>/
train_missing = None  # train ladder runs not in the cache; default: at smoke only (at cpu `python -m tiedlm_lib
# train-all --sections 14` trains them, about two days on one core; the section reads what is trained, lists the rest)
n_boot = None  # paired document-bootstrap replicates per point and seed; default 1000 (smoke: 200)
n_cal = 100  # calibration documents for B3's probes (section 10's)
n_eval = 300  # evaluation documents for B1 and B3 (section 10's)
n_refit = None  # probe refits on resampled calibration documents; default 30 (amendment 10; smoke: 2, CI's budget)
probe_boot = None  # evaluation resamples for a probe's share; default 1000 (smoke: 200)
probe_iters = 40  # L-BFGS iterations per probe fit (section 10's; the smoke scale uses at most 10, in CI)

# %%
import math
import re

import altair as alt
import pandas as pd
from tqdm.auto import tqdm

from tiedlm_lib import get_run
from tiedlm_lib.paper import across_sizes as xs
from tiedlm_lib.paper.report import Report, listed
from tiedlm_lib.paper.reported import reported_k_sweep
from tiedlm_lib.paper.scale_card import train_docs
from tiedlm_lib.runs import get_scale, is_complete, paper_config, run_dir
from tiedlm_lib.runs import ladder as lad

rep = Report("14_across_sizes", scale, figures_dir, paper_dir, seeds=seeds)
S = get_scale(scale)
L = lad.get_ladder(scale)
train_missing = scale == "smoke" if train_missing is None else bool(train_missing)
SMOKE = scale == "smoke"  # CI's budgets: the smoke ladder's numbers are not evidence of anything
n_boot = n_boot or (200 if SMOKE else 1000)
n_refit = (2 if SMOKE else 30) if n_refit is None else n_refit
probe_boot = probe_boot or (200 if SMOKE else 1000)
probe_iters = min(probe_iters, 10) if SMOKE else probe_iters
budgets = xs.Budgets(n_boot=n_boot, n_cal=n_cal, n_eval=n_eval, n_refit=n_refit, probe_boot=probe_boot,
                     probe_iters=probe_iters)
print(f"scale {scale}: widths {L.widths} at K = {S.K}; K = {L.Ks} at d{L.base_width}; "
      f"{'training' if train_missing else 'reading'} the ladder's runs")

# %% [markdown]
# ## The ladder
#
# Every point, its recipe, its parameters (all of them and the blocks alone), its seeds, and how many of its runs are
# trained. At the cpu scale the ladder is about two days of training on one core. The section reads the runs that are
# trained and lists the others; an effect is read as a trend only where it was measured at three or more sizes.

# %%
points = lad.points(scale)
runs_of = {(p["kind"], p["d"], p["K"], sd): lad.point_run(p["kind"], scale, sd, p["d"], p["K"])
           for p in points for sd in p["seeds"]}
rows = []
for p in points:
    cfgs = [runs_of[p["kind"], p["d"], p["K"], sd] for sd in p["seeds"]]
    rows.append({"kind": p["kind"], "d": p["d"], "K": p["K"], "axes": " and ".join(p["axes"]), "run": cfgs[0].name,
                 "heads": cfgs[0].model.n_heads, "lr": cfgs[0].train.lr,
                 "params": sum(lad.param_counts(cfgs[0]).values()), "block params": lad.block_params(cfgs[0]),
                 "seeds": len(cfgs), "trained": sum(is_complete(run_dir(c)) for c in cfgs)})
n_train = train_docs(S)
ladder = rep.table(pd.DataFrame(rows).assign(**{
    "passes over the training split": S.short_steps * S.batch_size / n_train}), "ladder")
ladder

# %% [markdown]
# ## Each effect at each point
#
# Per point and seed, on the held-out documents of sections 04 (A1-A8) and 10 (B1, B3), each with its paired
# document-bootstrap interval: A1's depth gap NLL(1) − NLL(K) of the single-depth model; A4's max-prob exit penalty
# (exit NLL − uniform-depth NLL at the same average depth, corrected fallback) at τ = 0.4, with 0.2 and 0.6 beside;
# A6's exit cost NLL(1) − NLL(best k) and A8's best multi-depth − best single-depth NLL, each depth chosen on the
# selection half and estimated on the other; A7's other half, the multi-depth model's own depth gain NLL(1) − NLL(K);
# B1's application-count share (prefix(1) − frozen(1)) / (prefix(1) − prefix(K)); and B3's calibration share of
# prefix(1) − prefix(K) with paper B's head/diagonal probe and with loop/diagonal, 30 refits. The tuned probe form is
# not measured (its fits are most of section 10's hours); A13's iso-parameter vanilla model is not trained on the
# ladder.

# %%
rep.table(pd.DataFrame([{"effect": e.name, "claim": e.claim, "what it measures": e.what, "threshold": e.threshold,
                         "read": "yes" if e.read else "shown beside"} for e in xs.EFFECTS]), "effects")


# %%
def trained(cfg):
    return train_missing or is_complete(run_dir(cfg))


measured, context, missing = [], [], []
todo = [(p, sd) for p in points if p["kind"] == "single" for sd in p["seeds"]]
for p, sd in tqdm(todo, desc="ladder points"):
    pair = {kind: runs_of[kind, p["d"], p["K"], sd] for kind in ("single", "multi")}
    if not all(trained(c) for c in pair.values()):
        missing += [f"{c.name} seed {sd}" for c in pair.values() if not trained(c)]
        continue
    single, multi = (get_run(pair[k], device=device) for k in ("single", "multi"))
    est, ctx = xs.point_effects(single, multi, sd, budgets)
    size = lad.block_params(single.config)
    for axis in p["axes"]:
        x = math.log2(size) if axis == "width" else math.log2(p["K"])
        for name, e in est.items():
            measured.append({"axis": axis, "effect": name, "d": p["d"], "K": p["K"], "seed": sd, "x": x,
                             "size": size if axis == "width" else p["K"], "point": e.point, "lo": e.lo, "hi": e.hi})
    context.append({"d": p["d"], "K": p["K"], "seed": sd, "block params": size, **ctx})
per_seed = rep.table(pd.DataFrame(measured), "per_seed")
rep.table(pd.DataFrame(context), "context")
print(f"measured {len(context)} point-seeds; not trained yet: {len(missing)} runs"
      + (f" ({listed(missing[:6])}{', …' if len(missing) > 6 else ''})" if missing else ""))

# %% [markdown]
# Pooled over each point's seeds (the seed is the unit; random effects with the shared-document term, as every
# verdict of the ledger), with where the interval lies against the effect's threshold: 0 for the gaps and the
# penalty, the claims' own 0.05 nats for A6, A7 and A8, 95% for B1's share and a fifth for B3's.

# %%
pooled = rep.table(pd.DataFrame(xs.pooled_points(measured)), "pooled")
for axis in ("width", "depth"):
    if (pooled.axis == axis).any():
        print(f"the {axis} ladder: pooled estimate at each size")
        display(pooled[pooled.axis == axis].pivot_table(index="effect", columns="size", values="pooled",  # noqa: F821
                                                      sort=False).round(3))

# %% [markdown]
# ## The trends
#
# Per training seed, the OLS slope of the seed's estimates on log₂ of the point's size (block parameters on the width
# ladder, K on the depth ladder), with a normal interval from the points' own intervals; the slopes pooled over seeds.
# The slope is per doubling of size. A seed needs three points.

# %%
trend = rep.table(pd.DataFrame(xs.trends(measured, xs.pooled_points(measured))), "trends")
trend[["axis", "effect", "points", "sizes", "slope per doubling", "slope lo", "slope hi", "seeds in slope", "trend",
       "direction"]].round(4)

# %% [markdown]
# ## The figures
#
# Each effect against size: every seed's estimate (small dots), the pooled estimate with its 95% interval (black), the
# effect's threshold (gray), and paper A's reported magnitude at its own size where it reports one (an open diamond:
# pad-inclusive NLLs on minimind at K = 30, another corpus and tokenizer, so compare signs and shapes, not levels).
# Where the paper's size lies beyond the largest measured point, the pooled slope is drawn from that point to it as a
# band labelled "extrapolation, not a verdict". The band is never read as a verdict.

# %%
PAPER_BLOCKS = {"v3": lad.block_params(paper_config("v3")), "v5": lad.block_params(paper_config("v5"))}


def paper_marks():
    """Paper A's reported magnitudes at its sizes (block parameters) and at K = 30 (its small model), from its
    reported sweeps (PROTOCOL §6.1-6.2): the single-depth gap NLL(1) − NLL(30), the multi-depth model's gain and exit
    cost (NLL(1) − its best), and the ceiling (best multi − best single)."""
    out = []
    for single, multi in (("v3", "v4"), ("v5", "v6")):
        s, m = reported_k_sweep(single), reported_k_sweep(multi)
        vals = {"A1 depth gap": s[1] - s[30], "A7 multi-depth gain": m[1] - m[30],
                "A6 exit cost": m[1] - min(m.values()), "A8 ceiling": min(m.values()) - min(s.values())}
        for name, v in vals.items():
            out.append({"axis": "width", "effect": name, "x": math.log2(PAPER_BLOCKS[single]),
                        "size": PAPER_BLOCKS[single], "value": v, "what": f"paper A, reported ({single}/{multi})"})
            if single == "v3":
                out.append({"axis": "depth", "effect": name, "x": math.log2(30), "size": 30, "value": v,
                            "what": "paper A, reported (v3/v4, K = 30)"})
    return pd.DataFrame(out)


marks = rep.table(paper_marks(), "paper_marks")
band = rep.table(pd.DataFrame(
    xs.extrapolation(pooled.to_dict("records"), trend.to_dict("records"), "width",
                     math.log2(PAPER_BLOCKS["v5"]))
    + xs.extrapolation(pooled.to_dict("records"), trend.to_dict("records"), "depth", math.log2(30)),
    columns=["axis", "effect", "from x", "x", "centre", "lo", "hi", "label"]), "extrapolation")
band


# %%
def axis_chart(axis):
    title = "block parameters (log scale)" if axis == "width" else "loop depth K (log scale)"
    x = alt.X("size:Q", scale=alt.Scale(type="log", base=2), title=title)
    panels = []
    for e in xs.EFFECTS:
        ps, po = per_seed[(per_seed.axis == axis) & (per_seed.effect == e.name)], \
            pooled[(pooled.axis == axis) & (pooled.effect == e.name)]
        if po.empty:
            continue
        unit = "share of the gap" if e.name.endswith("share") else "nats"
        layers = [alt.Chart(ps).mark_circle(size=14, opacity=0.45, color="#4c78a8").encode(x=x, y=alt.Y(
                      "point:Q", title=unit)),
                  alt.Chart(po).mark_rule(color="black").encode(x=x, y="lo:Q", y2="hi:Q"),
                  alt.Chart(po).mark_line(point=True, color="black").encode(x=x, y="pooled:Q"),
                  alt.Chart(pd.DataFrame({"t": [e.threshold]})).mark_rule(color="gray", strokeDash=[3, 3]).encode(
                      y="t:Q")]
        mk = marks[(marks.axis == axis) & (marks.effect == e.name)] if not marks.empty else marks
        if not mk.empty:
            layers.append(alt.Chart(mk).mark_point(shape="diamond", size=70, color="#e45756").encode(
                x=x, y="value:Q", tooltip=["what", "value"]))
        bd = band[(band.axis == axis) & (band.effect == e.name)]
        if not bd.empty:
            seg = pd.concat([pd.DataFrame({"size": [2 ** r["from x"], 2 ** r["x"]],
                                           "lo": [po.loc[po.x.idxmax(), "lo"], r["lo"]],
                                           "hi": [po.loc[po.x.idxmax(), "hi"], r["hi"]], "label": r["label"]})
                             for _, r in bd.iterrows()])
            layers.append(alt.Chart(seg).mark_area(opacity=0.15, color="#f58518").encode(
                x=x, y="lo:Q", y2="hi:Q", tooltip=["label"]))
        panels.append(alt.layer(*layers).properties(width=190, height=140, title=e.name))
    rows_ = [alt.hconcat(*panels[i:i + 3]) for i in range(0, len(panels), 3)]
    return alt.vconcat(*rows_) if rows_ else alt.Chart(pd.DataFrame()).mark_point()


rep.chart(axis_chart("width"), "width_ladder")

# %%
rep.chart(axis_chart("depth"), "depth_ladder")

# %% [markdown]
# ## Results
#
# The prose below is generated from the trend table by the pre-registered words; each number is read back from it.

# %%
READ = [e for e in xs.EFFECTS if e.read]
SIGN = {"holds at every size": "its sign against {t} holds at every size",
        "holds where decided": "its sign against {t} holds where it is decided",
        "changes direction between sizes": "it changes direction between sizes (against {t})",
        "decided at no size": "its sign against {t} is decided at no size",
        "not measured": "it was not measured"}  # the pre-registered words (ladder.DIRECTION_WORDS), in a sentence
assert set(SIGN) == set(lad.DIRECTION_WORDS)


def effect_sentence(axis, e):
    """One effect's sentence on one axis, its numbers named as facts of the trends table."""
    t = trend[(trend.axis == axis) & (trend.effect == e.name)]
    if t.empty:
        return f"{e.name} was measured at no point of the {axis} ladder."
    r = t.iloc[0]
    sides = sorted(set(pooled[(pooled.axis == axis) & (pooled.effect == e.name)]["side of threshold"]) - {"undecided"})
    sign = SIGN[r["direction"]].format(t=f"{e.threshold:g}") + (
        f" ({sides[0]} {e.threshold:g} where decided)" if len(sides) == 1 else "")
    if not math.isfinite(r["slope per doubling"]):
        return f"{e.name}: {r['trend']}; {sign}."
    tag = re.sub(r"\W", "_", f"{axis} {e.name}")  # a format field name: letters, digits and _
    for col, key in (("slope per doubling", "s"), ("slope lo", "lo"), ("slope hi", "hi"), ("points", "n")):
        rep.fact(f"{tag}_{key}", "trends", col, {"axis": axis, "effect": e.name}, agg="only")
    return (f"{e.name}: {r['trend']} (slope {{{tag}_s:+.3f}} per doubling, 95% interval [{{{tag}_lo:+.3f}}, "
            f"{{{tag}_hi:+.3f}}], {{{tag}_n:.0f}} sizes); {sign}.")


def ladder_prose(axis, what):
    if not (trend.axis == axis).any():
        return f"No point of the {axis} ladder is trained yet."
    groups = (("A1", "A4"), ("A6", "A7", "A8"), ("B1", "B3"))  # single-depth exits, the law's half, the protocol
    return f"Against {what}, each effect in turn. " + "\n\n".join(
        " ".join(effect_sentence(axis, e) for e in READ if e.claim in g) for g in groups)


rep.prose("Results", ladder_prose("width", "block parameters") + "\n\n" + ladder_prose("depth", "the loop depth K"))

# %% [markdown]
# ## What this means

# %%
def signs(axis):
    t = trend[(trend.axis == axis) & trend.read]
    held = sorted(t[t.direction.isin(["holds at every size", "holds where decided"])].effect)
    changed = sorted(t[t.direction == "changes direction between sizes"].effect)
    thin = sorted(set(e.name for e in READ) - set(t[t.points >= 3].effect))
    words = [f"the sign holds for {listed(held)}" if held else "no effect's sign is decided and kept",
             f"it changes between sizes for {listed(changed)}" if changed else "no effect changes sign"]
    if thin:
        words.append(f"{listed(thin)} {'is' if len(thin) == 1 else 'are'} not yet measured at three sizes")
    return "; ".join(words)


rep.prose("What this means", "On the width ladder {width}. On the depth ladder {depth}. The ladder describes how "
          "the ledger's effects move with size; it changes no verdict, and its words are nominal 95% descriptions "
          "without a multiplicity correction.", width=signs("width"), depth=signs("depth"))
