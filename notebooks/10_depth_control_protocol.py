# %% [markdown]
# # 10 · The Depth Control Protocol applied to tied-depth LMs (paper B)
#
# Section 03 read "NLL falls as k grows" as depth scaling, and section 04 built a trade-off law on it. Paper B points
# out that truncating a looped model to k applications changes three things at once:
#
# 1. **how many times** the block writes into the residual stream (k instead of N);
# 2. **how much distinct computation** happens (k iterations instead of N);
# 3. **what the readout sees**: the top layers and head were trained on depth-N states and now read a depth-k state,
#    which may simply be *out of distribution* for them.
#
# Its Depth Control Protocol (PROTOCOL §8) separates them with execution schedules and readout recalibration:
#
# * `prefix(k)` — the first k applications (plain truncation, the curve of section 03);
# * `repeat(k)` — the first k, then the k-th re-applied up to N: N writes, k distinct steps. In a single tied loop
#   the k-th application *is* the block, so repeat(k) is the full model; here it separates only on the multi-loop
#   layout. We add **`frozen(k)`**: the first k applications, then the k-th *update* re-added without recomputing
#   the block — N writes into the stream with exactly k distinct computations, realisable in any layout;
# * `suffix(k)` — only the last k applications;
# * **recalibration** per condition: a temperature T, and an affine map on the readout input h = LN_f(z),
#   h' = a ⊙ h + b, ridge-shrunk toward the identity (λ chosen on a 20% holdout) — fitted on *calibration*
#   documents disjoint from the *evaluation* documents (paper B's recurrent script fitted in sample).
#
# The **decomposition** of the naive gap prefix(1) − prefix(N): application count = prefix(1) − control(1);
# distinct depth = control(1) − control(N/2); block composition = control(N/2) − prefix(N); and the calibration term
# = the part of the gap that recalibrating the readout removes. One document resample is shared by every condition
# (5000 replicates). A **negative control** applies the schedules to the dense vanilla model, and a **training
# intervention** continues the single-depth model from its checkpoint with a sampled application count against a
# fixed one.
#
# The question neither paper asked: **is paper A's trade-off law a statement about computation or about the
# readout?**

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | paper
seeds = [0]  # training seeds
figures_dir = None  # default: figures/<scale>/
paper_dir = None  # default: paper/<scale>/
n_boot = 5000  # paired document-bootstrap replicates (paper B: 5000)
n_cal = 100  # calibration documents (held-out, disjoint from the evaluation documents)
n_eval = 300  # evaluation documents
max_cal_tokens = 8000  # calibration tokens per fit (seeded subsample)
intervention_steps = None  # default: a quarter of the scale's short run
intervention_lr = None  # default: a quarter of the base run's peak lr, constant

# %%
import altair as alt
import numpy as np
import pandas as pd

from tiedlm_lib import get_run
from tiedlm_lib.analysis import cached_corpus, depth_grid
from tiedlm_lib.claims import answer, verdict
from tiedlm_lib.data import eval_batches
from tiedlm_lib.dcp import decompose, evaluate_schedules, readout_share, split_documents
from tiedlm_lib.experiments import continuation, get_scale
from tiedlm_lib.report import Report
from tiedlm_lib.reported import reported
from tiedlm_lib.schedules import budget
from tiedlm_lib.stats import paired_diff

rep = Report("10_depth_control_protocol", scale, figures_dir, paper_dir, seeds=seeds)
S = get_scale(scale)
K = S.K
steps = intervention_steps or max(2, S.short_steps // 4)
print(f"scale {scale}: K = {K}, {n_cal} calibration + {n_eval} evaluation documents, {n_boot} replicates, "
      f"intervention {steps} steps")

# %% [markdown]
# ## The models
#
# The trade-off section's single-depth (v3, v5) and multi-depth (v4, v6) models, the three-loop layout (v13) and the
# dense iso-parameter vanilla model (v9) — all cached runs shared with sections 03, 04, 06 and 07.

# %%
MODELS = {"single small": "v3", "multi small": "v4", "single large": "v5", "multi large": "v6",
          "three loops": "v13", "dense (vanilla)": "v9"}
runs = {(label, seed): get_run(name, scale, seed) for label, name in MODELS.items() for seed in seeds}
pd.DataFrame([{"model": m, "run": r.config.name, "seed": s, "layout": r.config.model.layout,
               "core applications N": budget(r.config.model.layout), "params": r.result["params"]}
              for (m, s), r in runs.items()])

# %% [markdown]
# ## Conditions
#
# Each (schedule, k): raw NLL on the evaluation documents, and NLL after each recalibration fitted on the calibration
# documents. Depths: powers of two up to N for the loops; every k for the five-layer dense model. Real targets only.

# %%
def ks_for(N):
    return depth_grid(N, extra=[max(1, N // 2)]) if N > 5 else list(range(1, N + 1))


def doc_sets(run, seed):
    corpus = cached_corpus(run.data)
    cal, ev = split_documents(len(corpus.val), min(n_cal, len(corpus.val) // 3),
                              min(n_eval, len(corpus.val) - min(n_cal, len(corpus.val) // 3)), seed=seed)
    make = lambda idx: (lambda: eval_batches(corpus.val, run.data.seq_len, run.train.batch_size,  # noqa: E731
                                             indices=idx))
    return make(cal), make(ev)


def single_loop(layout):
    """One tied loop: every application is the same block, so suffix(k) = prefix(k) and repeat(k) = prefix(N)."""
    return len([t for t in layout.split() if t[0] != "S"]) == 1


def schedules_for(layout):
    return ["prefix", "frozen"] if single_loop(layout) else ["prefix", "frozen", "repeat", "suffix"]


def controls_for(layout):
    return ["frozen"] if single_loop(layout) else ["frozen", "repeat"]


results, rows = {}, []
for (label, seed), r in runs.items():
    N = budget(r.config.model.layout)
    cal_b, ev_b = doc_sets(r.config, seed)
    res = evaluate_schedules(r.model, cal_b, ev_b, schedules_for(r.config.model.layout), ks_for(N),
                             max_tokens=max_cal_tokens, seed=seed)
    results[label, seed] = res
    for (sched, k), c in res.items():
        rows.append({"model": label, "seed": seed, "N": N, "schedule": sched, "k": k, "raw": c.raw.masked,
                     "temperature": c.calibrated["temperature"].masked, "affine": c.calibrated["affine"].masked,
                     "T": c.fits["temperature"].temperature, "affine λ": c.fits["affine"].lam})
cond = rep.table(pd.DataFrame(rows), "conditions")
cond[cond.schedule == "prefix"].pivot_table(index=["model", "seed"], columns="k", values="raw").round(3)

# %% [markdown]
# Raw (solid) and affine-recalibrated (dashed) NLL per schedule. If the readout were the whole story, the dashed
# prefix curve would be flat; if the number of writes were, frozen would sit on the full-depth value.

# %%
long = cond.melt(id_vars=["model", "seed", "schedule", "k"], value_vars=["raw", "affine"], var_name="readout",
                 value_name="nll")
ch = alt.Chart(long).mark_line(point=alt.OverlayMarkDef(size=14)).encode(
    x=alt.X("k:Q", scale=alt.Scale(type="log", base=2), title="distinct applications k"),
    y=alt.Y("nll:Q", scale=alt.Scale(zero=False), title="NLL, real targets (nats)"),
    color="schedule:N", strokeDash="readout:N", detail="seed:N").properties(width=200, height=170)
rep.chart(ch.facet(facet="model:N", columns=3).resolve_scale(y="independent", x="independent"), "schedules")

# %% [markdown]
# ## The decomposition
#
# k_min = 1, k_mid = N/2, k_max = N. For the single-loop models the same-application-count control is `frozen`:
# there repeat(k) *is* the full model (and suffix(k) is prefix(k)), so paper B's repeat-based decomposition would put
# the whole gap into "application count" by construction. The three-loop and dense models get both controls.
# Calibration uses the affine map; the temperature-only share is beside it. 95% percentile intervals from one
# shared document resample.

# %%
dec_rows, decs = [], {}
for (label, seed), res in results.items():
    r = runs[label, seed]
    N = budget(r.config.model.layout)
    for control in controls_for(r.config.model.layout):
        for kind in ("affine", "temperature"):
            d = decompose(res, 1, max(1, N // 2), N, control=control, kind=kind, n_boot=n_boot, seed=seed)
            decs[label, seed, control, kind] = d
            for term, e in d.items():
                dec_rows.append({"model": label, "seed": seed, "control": control, "calibration": kind,
                                 "term": term, "value": e.point, "lo": e.lo, "hi": e.hi})
dec = rep.table(pd.DataFrame(dec_rows), "decomposition")
show = dec[(dec.calibration == "affine")].assign(ci=lambda t: t.apply(lambda r: f"[{r.lo:.3f}, {r.hi:.3f}]", axis=1))
show.pivot_table(index=["model", "seed", "control"], columns="term", values="value", sort=False).round(3)

# %%
share = dec[dec.term == "calibration share"].pivot_table(index=["model", "seed", "control"], columns="calibration",
                                                          values=["value", "lo", "hi"]).round(3)
share

# %% [markdown]
# Reported by paper B (calibration share of the naive gap; Huginn is its recurrent model, the others dense):

# %%
rb = pd.DataFrame(reported("dcp."))
rb["model"] = rb.id.str[len("dcp."):].str.rsplit(".", n=1).str[0]  # model names contain dots
rb["what"] = rb.id.str.rsplit(".", n=1).str[1]
rb.pivot_table(index="model", columns="what", values="value").round(3)

# %%
bars = dec[(dec.control == "frozen") & (dec.calibration == "affine") &
           dec.term.isin(["application count", "distinct depth", "block composition", "calibration"])]
bc = alt.Chart(bars).mark_bar().encode(x=alt.X("value:Q", title="nats of the naive gap prefix(1) − prefix(N)"),
                                       y=alt.Y("term:N", title=None), color="term:N")
err = alt.Chart(bars).mark_rule().encode(x="lo:Q", x2="hi:Q", y="term:N")
rep.chart((bc + err).properties(width=260, height=110).facet(facet="model:N", columns=2)
          .resolve_scale(x="independent"), "decomposition")

# %% [markdown]
# ## The training intervention
#
# From the single-depth small model's final weights (v3), two arms of continued training with the same data order,
# seed, constant lr and step count: **fixed** (loss at N, as before) and **sampled** (each step draws k ~ U{1..N}
# total applications and trains the prefix(k) plan). Paper B predicts that the sampled arm's calibration share
# collapses toward 0 and its fitted T at k = 1 moves to 1, while the fixed arm stays near the base.

# %%
arms = {}
for seed in seeds:
    base = runs["single small", seed]
    lr = intervention_lr or base.config.train.lr / 4
    arms["base", seed] = base
    for arm, sampling in (("fixed", "fixed"), ("sampled", "uniform")):
        arms[arm, seed] = get_run(continuation(base.config, f"dcp-{arm}", steps, lr, depth_sampling=sampling))
N0 = budget(runs["single small", seeds[0]].config.model.layout)
iv_rows, iv_res = [], {}
for (arm, seed), r in arms.items():
    cal_b, ev_b = doc_sets(r.config, seed)
    res = evaluate_schedules(r.model, cal_b, ev_b, ["prefix"], [1, N0], max_tokens=max_cal_tokens, seed=seed)
    iv_res[arm, seed] = res
    for kind in ("temperature", "affine"):
        d = readout_share(res, 1, N0, kind, n_boot, seed)
        iv_rows.append({"arm": arm, "seed": seed, "calibration": kind, "NLL k=1": res["prefix", 1].raw.masked,
                        f"NLL k={N0}": res["prefix", N0].raw.masked, "raw gap": d["total"].point,
                        "calibrated gap": d["calibrated gap"].point, "share": d["calibration share"].point,
                        "share lo": d["calibration share"].lo, "share hi": d["calibration share"].hi,
                        "T at k=1": res["prefix", 1].fits["temperature"].temperature,
                        f"T at k={N0}": res["prefix", N0].fits["temperature"].temperature})
iv = rep.table(pd.DataFrame(iv_rows), "intervention")
iv.round(3)

# %% [markdown]
# ## The claims
#
# Criteria (95% paired document-bootstrap CIs; "single-loop models" are the single-depth v3/v5):
#
# * **B1** — the slope conflates the three factors: on every single-depth model, prefix(1) − frozen(1) (application
#   count) and the affine calibration term both have CIs excluding 0 *and* they differ from the total.
# * **B2** — full application count with one distinct iteration is realisable only with weight sharing: on the
#   looped single-depth models frozen(1) beats prefix(1) (application count helps: CI of prefix(1) − frozen(1) above
#   0), while on the dense model repeat(1) — layer 0 applied N times — is worse than prefix(1) (CI below 0).
# * **B3** — little of a recurrent model's gap is correctable at the readout, unlike dense models: the looped
#   single-depth models' affine calibration share has its CI upper end below 0.2 and below the dense model's share
#   CI lower end. Not reproduced if a looped share's CI lower end is at or above 0.2.
# * **B4** — the negative control rules out artefacts: recalibrating an in-distribution readout (k = N, every
#   model, dense included) changes NLL by less than 0.01 nats — the protocol does not manufacture gains.
# * **B5** — sampled-depth training collapses the calibration share: the sampled arm's affine share is below the
#   fixed arm's (point) with its CI upper end below the fixed arm's CI lower end, and its T at k = 1 is closer to 1.
# * **B6** — the decomposition: the application-count, distinct-depth and block-composition terms sum to the total
#   (to 1e-9), and at least two of the four terms have CIs excluding 0 on every single-depth model.
# * **Q1** — is a substantial part (≥ 20%) of paper A's single-depth gap correctable at the readout? *yes* if the
#   affine share's CI lower end ≥ 0.2 on every single-depth model, *no* if its CI upper end < 0.2 on every one.

# %%
def term(label, seed, control, kind, name):
    return decs[label, seed, control, kind][name]


SINGLE = [m for m in MODELS if m.startswith("single")]
ev, b1 = {}, []
for m in SINGLE:
    for s in seeds:
        app, cal = term(m, s, "frozen", "affine", "application count"), term(m, s, "frozen", "affine", "calibration")
        tot = term(m, s, "frozen", "affine", "total")
        ok = (app.lo > 0 or app.hi < 0) and (cal.lo > 0 or cal.hi < 0) and abs(app.point - tot.point) > 0.05 * \
            tot.point
        b1.append(ok)
        ev[f"{m}/s{s}"] = {"total": tot.point, "application count": [app.point, app.lo, app.hi],
                           "calibration": [cal.point, cal.lo, cal.hi]}
rep.claim("B1", verdict(all(b1), not any(b1)), "single-depth models: application-count and affine-calibration terms "
          "both have CIs excluding 0 and neither is the whole gap", ev, "corrected")

ev, ok_loop, ok_dense = {}, [], []
for s in seeds:
    for m in SINGLE:
        app = term(m, s, "frozen", "affine", "application count")
        ok_loop.append(app.lo > 0)
        ev[f"{m}/s{s} prefix(1)-frozen(1)"] = [app.point, app.lo, app.hi]
    res = results["dense (vanilla)", s]
    d = paired_diff(res["prefix", 1].raw, res["repeat", 1].raw, n_boot=n_boot, seed=s)
    ok_dense.append(d.hi < 0)
    ev[f"dense/s{s} prefix(1)-repeat(1)"] = [d.point, d.lo, d.hi]
rep.claim("B2", verdict(all(ok_loop) and all(ok_dense), not any(ok_loop) or not any(ok_dense)),
          "looped: frozen(1) better than prefix(1) (CI above 0); dense: repeat(1) worse than prefix(1) (CI below 0)",
          ev, "corrected")

ev, holds, contra = {}, [], []
for s in seeds:
    dense = term("dense (vanilla)", s, "repeat", "affine", "calibration share")
    ev[f"dense/s{s}"] = [dense.point, dense.lo, dense.hi]
    for m in SINGLE:
        sh = term(m, s, "frozen", "affine", "calibration share")
        ev[f"{m}/s{s}"] = [sh.point, sh.lo, sh.hi]
        holds.append(sh.hi < 0.2 and sh.hi < dense.lo)
        contra.append(sh.lo >= 0.2)
rep.claim("B3", verdict(all(holds), any(contra)), "looped single-depth affine calibration share: CI upper end < 0.2 "
          "and below the dense model's CI lower end", ev, "corrected")

deltas = {f"{m}/s{s}": c[("prefix", budget(runs[m, s].config.model.layout))].calibrated["affine"].masked -
          c[("prefix", budget(runs[m, s].config.model.layout))].raw.masked for (m, s), c in results.items()}
rep.claim("B4", verdict(all(abs(v) < 0.01 for v in deltas.values()), any(abs(v) >= 0.05 for v in deltas.values())),
          "recalibrating the readout at full depth (in distribution) changes NLL by < 0.01 nats on every model",
          deltas, "corrected")

ev, b5, b5c = {}, [], []
for s in seeds:
    arms = iv[(iv.seed == s) & (iv.calibration == "affine")].set_index("arm")
    fx, sm = arms.loc["fixed"], arms.loc["sampled"]
    b5.append(sm["share"] < fx["share"] and sm["share hi"] < fx["share lo"] and
              abs(sm["T at k=1"] - 1) < abs(fx["T at k=1"] - 1))
    b5c.append(sm["share lo"] > fx["share hi"])
    ev[f"s{s}"] = {arm: {"share": [arms.loc[arm, "share"], arms.loc[arm, "share lo"], arms.loc[arm, "share hi"]],
                         "T_k1": arms.loc[arm, "T at k=1"]} for arm in arms.index}
rep.claim("B5", verdict(all(b5), any(b5c)), "sampled arm: affine calibration share below the fixed arm's (CIs "
          "disjoint) and T at k=1 closer to 1", ev, "corrected")

ev, b6 = {}, []
for m in SINGLE:
    for s in seeds:
        d = decs[m, s, "frozen", "affine"]
        tele = abs(d["application count"].point + d["distinct depth"].point + d["block composition"].point
                   - d["total"].point) < 1e-9
        nz = sum(1 for t in ("application count", "distinct depth", "block composition", "calibration")
                 if d[t].lo > 0 or d[t].hi < 0)
        b6.append(tele and nz >= 2)
        ev[f"{m}/s{s}"] = {t: [d[t].point, d[t].lo, d[t].hi] for t in d}
rep.claim("B6", verdict(all(b6), not any(b6)), "the terms telescope to the total and at least two of the four have "
          "CIs excluding 0 on every single-depth model (control: frozen)", ev, "corrected")

shares = {f"{m}/s{s}": term(m, s, "frozen", "affine", "calibration share") for m in SINGLE for s in seeds}
q1 = answer(all(e.lo >= 0.2 for e in shares.values()), all(e.hi < 0.2 for e in shares.values()))
_ = rep.claim("Q1", q1, "affine calibration share of the single-depth k=1..N gap: yes if its CI lower end >= 0.2 on "
              "every single-depth model, no if its CI upper end < 0.2 on every one",
              {k: [e.point, e.lo, e.hi] for k, e in shares.items()}, "corrected")

# %% [markdown]
# ## Computation or readout?
#
# The trade-off law (section 04) says a model cannot both improve with depth and exit early for free. If the
# single-depth gap were mostly a readout out of distribution, the law would be about *calibration*: a per-depth
# readout fix would buy free exit without giving up depth. The numbers above say how much of the gap that fix
# recovers (the calibration share), how much the sheer count of writes explains (frozen vs prefix), and whether
# training on sampled depths — the intervention — keeps the deep NLL while closing the shallow gap.

# %%
summary = []
for m in SINGLE:
    for s in seeds:
        d = decs[m, s, "frozen", "affine"]
        summary.append({"model": m, "seed": s, "gap": d["total"].point,
                        "readout share (affine)": d["calibration share"].point,
                        "share CI": f"[{d['calibration share'].lo:.2f}, {d['calibration share'].hi:.2f}]",
                        "application-count share": d["application count"].point / d["total"].point,
                        "distinct-depth share": d["distinct depth"].point / d["total"].point})
summary = rep.table(pd.DataFrame(summary), "computation_or_readout")
summary.round(3)

# %%
mean_share = float(np.mean(summary["readout share (affine)"]))
arm_means = iv[iv.calibration == "affine"].groupby("arm")[["NLL k=1", f"NLL k={N0}", "raw gap", "share"]].mean()
reading = {"no": "less than a fifth of it is readout: the slope is mostly computation",
           "yes": "at least a fifth of it is readout miscalibration, not computation",
           "inconclusive": "the CIs do not settle whether a fifth or more of it is readout"}[q1]
print(f"single-depth models: on average {mean_share:.0%} of the k=1..N gap is recovered by recalibrating the readout "
      f"(affine); {reading} (Q1: {q1}).")
print(f"intervention ({steps} steps): fixed arm NLL k=1 {arm_means.loc['fixed', 'NLL k=1']:.3f}, k={N0} "
      f"{arm_means.loc['fixed', f'NLL k={N0}']:.3f}; sampled arm k=1 {arm_means.loc['sampled', 'NLL k=1']:.3f}, k={N0} "
      f"{arm_means.loc['sampled', f'NLL k={N0}']:.3f}")
