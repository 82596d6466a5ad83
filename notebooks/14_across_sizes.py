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
# (512 against paper A's 23,005), the sequence length (128 against 256), the corpus (KJV verses against minimind), the
# steps (1,000 against 3,000) and the passes over the training split (about 1.6 per short run at every point; paper A
# about once).
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
def load(cfg):
    """The run if it is trained (or trainable here) and complete; else None with the reason it is left out
    (amendment 17: a run that stops or diverges leaves its seed out of that point, listed)."""
    if not (train_missing or is_complete(run_dir(cfg))):
        return None, "not trained yet"
    run = get_run(cfg, device=device)
    status = xs.usable(run)
    return (run, "") if status == "complete" else (None, status)


measured, context, left_out = [], [], []
todo = [(p, sd) for p in points if p["kind"] == "single" for sd in p["seeds"]]
for p, sd in tqdm(todo, desc="ladder points"):
    got = {kind: load(runs_of[kind, p["d"], p["K"], sd]) for kind in ("single", "multi")}
    left_out += [{"kind": k, "d": p["d"], "K": p["K"], "seed": sd, "run": runs_of[k, p["d"], p["K"], sd].name,
                  "why": why} for k, (r, why) in got.items() if r is None]
    if all(r is None for r, _ in got.values()):
        continue
    est, ctx = xs.point_effects(got["single"][0], got["multi"][0], sd, budgets)
    size = lad.block_params(runs_of["single", p["d"], p["K"], sd])
    for axis in p["axes"]:
        x = math.log2(size) if axis == "width" else math.log2(p["K"])
        for name, e in est.items():
            measured.append({"axis": axis, "effect": name, "d": p["d"], "K": p["K"], "seed": sd, "x": x,
                             "size": size if axis == "width" else p["K"], "point": e.point, "lo": e.lo, "hi": e.hi})
    context.append({"d": p["d"], "K": p["K"], "seed": sd, "block params": size, **ctx})
COLUMNS = ["axis", "effect", "d", "K", "seed", "x", "size", "point", "lo", "hi"]
per_seed = rep.table(pd.DataFrame(measured, columns=COLUMNS), "per_seed")
rep.table(pd.DataFrame(context), "context")
left = rep.table(pd.DataFrame(left_out, columns=["kind", "d", "K", "seed", "run", "why"]), "left_out")
print(f"measured {len(context)} point-seeds; {len(left)} runs left out "
      f"({', '.join(f'{n} {w}' for w, n in left.why.value_counts().items()) or 'none'})")
left

# %% [markdown]
# Pooled over each point's seeds (the seed is the unit; random effects with the shared-document term, as every
# verdict of the ledger), with where the interval lies against the effect's threshold: 0 for the gaps and the
# penalty, the claims' own 0.05 nats for A6, A7 and A8, 95% for B1's share and a fifth for B3's.

# %%
POOLED = ["axis", "effect", "x", "size", "d", "K", "seeds", "seeds not finite", "threshold", "pooled", "lo", "hi",
          "side of threshold"]
pooled = rep.table(pd.DataFrame(xs.pooled_points(measured), columns=POOLED), "pooled")
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
TRENDS = ["axis", "effect", "claim", "read", "points", "sizes", "slope per doubling", "slope lo", "slope hi",
          "seeds in slope", "seeds left out", "trend", "direction", "threshold"]
trend = rep.table(pd.DataFrame(xs.trends(measured, xs.pooled_points(measured)), columns=TRENDS), "trends")
trend[["axis", "effect", "points", "sizes", "slope per doubling", "slope lo", "slope hi", "seeds in slope", "trend",
       "direction"]].round(4)

# %% [markdown]
# **The law at each point**, beside A7's other half (a description, as section 04 reads it across models): each
# model's exit cost, its NLL(1) minus the other model's best NLL, and its own depth gap NLL(1) − NLL(K), on the
# estimation half with every depth chosen on the selection half, pooled over the point's seeds. A model *has both*
# where its pooled exit cost lies below 0.05 nats and its depth gap above 0.05; it *lacks one* where its exit cost
# lies above 0.05 or its gap below; otherwise it is undecided. The law says no model has both.

# %%
def law_rows():
    out = []
    for (axis, size), g in pooled[pooled.effect.str.startswith("A7 law")].groupby(["axis", "size"], sort=False):
        for m in ("single", "multi"):
            c = g[g.effect == f"A7 law: {m} exit cost"]
            d = g[g.effect == f"A7 law: {m} depth gap"]
            if c.empty or d.empty:
                continue
            c, d = c.iloc[0], d.iloc[0]
            n = int(min(c.seeds, d.seeds))
            state = (xs.SINGLE_SEED if n < 2 else "has both" if c.hi < 0.05 and d.lo > 0.05 else
                     "lacks one" if c.lo > 0.05 or d.hi < 0.05 else "undecided")
            out.append({"axis": axis, "size": size, "model": m, "seeds": n, "exit cost": c.pooled,
                        "exit lo": c.lo, "exit hi": c.hi, "depth gap": d.pooled, "gap lo": d.lo, "gap hi": d.hi,
                        "the law at this point": state})
    return pd.DataFrame(out, columns=["axis", "size", "model", "seeds", "exit cost", "exit lo", "exit hi",
                                      "depth gap", "gap lo", "gap hi", "the law at this point"])


law = rep.table(law_rows(), "law_by_point")
law.round(4)

# %% [markdown]
# ## The figures
#
# Each effect against size: every seed's estimate (small dots), the pooled estimate with its 95% interval (black), the
# effect's threshold (gray, dashed), paper A's sizes (red, dotted: its models' blocks, 1.32M and 8.22M, and K = 30),
# and paper A's reported magnitude at its own size where it reports one (an open diamond:
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
        paper_at = pd.DataFrame({"size": [PAPER_BLOCKS["v3"], PAPER_BLOCKS["v5"]] if axis == "width" else [30]})
        layers.append(alt.Chart(paper_at).mark_rule(color="#e45756", strokeDash=[1, 3]).encode(x=x))
        bd = band[(band.axis == axis) & (band.effect == e.name)]
        if not bd.empty:
            seg = pd.concat([pd.DataFrame({"size": [2 ** r["from x"], 2 ** r["x"]],
                                           "lo": [po.loc[po.x.idxmax(), "lo"], r["lo"]],
                                           "hi": [po.loc[po.x.idxmax(), "hi"], r["hi"]], "label": r["label"]})
                             for _, r in bd.iterrows()])
            layers.append(alt.Chart(seg).mark_area(opacity=0.15, color="#f58518").encode(
                x=x, y="lo:Q", y2="hi:Q", tooltip=["label"]))
            layers.append(alt.Chart(seg.tail(1)).mark_text(align="right", dy=-4, fontSize=9, color="#c26a12").encode(
                x=x, y="hi:Q", text="label:N"))
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
def side_words(axis, e):
    """The effect's pre-registered direction word on one axis (``ladder.direction_word``), with the side of its
    threshold where the word says one side holds: "above 0 at every size", "below 0.05 where decided (3 of 5
    sizes)", "changes direction between sizes (against 0.95)", "decided at no size (against 0.2)" or "not measured"."""
    t = trend[(trend.axis == axis) & (trend.effect == e.name)]
    word = t.iloc[0]["direction"] if not t.empty else "not measured"
    pts = pooled[(pooled.axis == axis) & (pooled.effect == e.name) & (pooled.seeds >= 2)]
    sides = sorted(set(pts["side of threshold"]) - {"undecided"})
    if word == "holds at every size":
        return f"{sides[0]} {e.threshold:g} at every size"
    if word == "holds where decided":
        return f"{sides[0]} {e.threshold:g} where decided ({(pts['side of threshold'] != 'undecided').sum()} of " \
               f"{len(pts)} sizes)"
    return word if word == "not measured" else f"{word} (against {e.threshold:g})"


def effect_sentence(axis, e):
    """One effect's sentence on one axis, its numbers named as facts of the trends table."""
    t = trend[(trend.axis == axis) & (trend.effect == e.name)]
    if t.empty:
        return f"{e.name} was measured at no point of the {axis} ladder."
    r = t.iloc[0]
    sign = "across the sizes, " + side_words(axis, e)
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
    """Each read effect's direction word on one axis, grouped: what holds (and on which side), what changes, what
    is decided nowhere, what is not yet measured at three sizes."""
    if not (trend.axis == axis).any():
        return "Nothing is measured yet."
    groups = {}
    for e in READ:
        groups.setdefault(side_words(axis, e), []).append(e.name)
    return " ".join(f"{w[0].upper()}{w[1:]}: {listed(n)}." for w, n in groups.items())


MEANS = ("Each effect's side of its threshold across the sizes (0 for the gaps and the exit penalty, 0.05 nats for "
         "A6-A8, 95% for B1's share, a fifth for B3's; a point from one seed decides no side).\n\n"
         "The width ladder (block parameters). {width}\n\nThe depth ladder (K). {depth}\n\n"
         "The ladder describes how the ledger's effects move with size; it changes no verdict, and its words are "
         "nominal 95% descriptions without a multiplicity correction.")
rep.prose("What this means", MEANS, width=signs("width"), depth=signs("depth"))
