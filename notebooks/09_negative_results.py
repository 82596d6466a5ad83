# %% [markdown]
# # 09 · Negative results: no fixed point, and a weak residual probe (paper A, §6)
#
# A weight-tied loop invites two hopes borrowed from deep-equilibrium models: that iterating the block converges to a
# fixed point z* = z* + α·f(z*), so "more iterations" has a natural end; and that how far a sequence is from
# converging — the residual ‖z_{k+1} − z_k‖ — says how hard it is, a free uncertainty signal. Paper A reports both as
# negative results: the relative residual stays near **0.15 per step** and never falls in 30 iterations, and the
# residual correlates with per-sequence NLL only weakly (**r = 0.27** at 7M, **0.385** at 23M, 0.269 for v7).
#
# PROTOCOL §7.6 explains the first result by construction. The paper's block returns f(z) = LN2(z + attn) + MLP(·):
# a *normalised copy of the state* plus the MLP output. A fixed point needs f(z*) = 0, i.e. MLP(v) = −v for the
# normalised v — the LayerNorm keeps ‖v‖ ≈ √d, so every step adds a vector of norm ≈ α·√d whatever the state. The
# residual cannot vanish; it can only shrink *relative* to a growing state. We measure both block forms: the plain
# residual block, f(z) = attn + MLP(LN2(z + attn)), has no such floor.
#
# The probe (PROTOCOL §5.3): per sequence, the residual is the **max over all positions, pads included**, of the
# last iteration's ‖z_K − z_{K−1}‖/‖z_0‖; NLL is the mean over real targets; sequences with fewer than 8 real targets
# are dropped; Pearson r over 100 sequences. Pads included means a sequence's residual may be set at a pad position
# the NLL never sees. We compute it that way, with the max over real positions only, and per token (each real
# position's residual against its own CE), with document-bootstrap CIs per seed, pooled over the training seeds
# (docs/statistics.md).

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | paper
device = None  # cpu | cuda; default: TIEDLM_DEVICE, else CUDA when available, else the CPU
seeds = None  # training seeds; default: the scale's (smoke: [0], cpu: [0, 1, 2, 3, 4])
figures_dir = None  # default: figures/<scale>/
paper_dir = None  # default: paper/<scale>/
n_boot = 2000  # bootstrap replicates
n_probe_docs = 300  # held-out documents for the probe (the paper: 100 sequences)
n_trace_docs = 64  # held-out documents for the per-iteration residual curves
extrapolate = 2  # iterate to extrapolate·K to see whether the residual ever falls

# %%
import altair as alt
import pandas as pd

from tiedlm_lib import get_run
from tiedlm_lib.evaluation.analysis import assert_direction, heldout, state_norms
from tiedlm_lib.evaluation.residual_probe import pearson_ci, residual_probe
from tiedlm_lib.paper import verdicts
from tiedlm_lib.paper.report import Report, listed
from tiedlm_lib.paper.reported import reported, reported_value
from tiedlm_lib.runs import get_scale
from tiedlm_lib.stats import inference
from tiedlm_lib.stats.bootstrap import Estimate

rep = Report("09_negative_results", scale, figures_dir, paper_dir, seeds=seeds)
seeds = rep.seeds
S = get_scale(scale)
K = S.K
SIZES = {"v3": f"small (d{S.small.d_model})", "v5": f"large (d{S.large.d_model})"}
FORMS = ["paper", "residual"]
print(f"scale {scale}: K = {K}, sizes {SIZES}, seeds {seeds}")

# %% [markdown]
# ## The runs
#
# The single-depth models of section 03, both block forms, both sizes (cached: trained once, shared).

# %%
runs = {(name, form, seed): get_run(name, scale, seed, overrides={"model.block": form}, device=device)
        for name in SIZES for form in FORMS for seed in seeds}
pd.DataFrame([{"run": n, "block": f, "seed": s, "params": r.result["params"], "alpha": r.result["alpha"]["A"]}
              for (n, f, s), r in runs.items()])

# %% [markdown]
# ## Does the loop converge?
#
# Mean over real positions of ‖z_{i+1} − z_i‖/‖z_0‖ (the original normalisation) and of ‖z_i‖/‖z_0‖, iterating to
# 2K. A converging loop's residual falls toward 0; the paper-form residual has the floor α·‖LN2(·) + MLP‖/‖z_0‖.

# %%
rows = []
for (name, form, seed), r in runs.items():
    batches = list(heldout(r.config, n_trace_docs)())
    tr = state_norms(r.model, batches, extrapolate * K)["A"]
    for i, (res, ratio) in enumerate(zip(tr["residual"], tr["ratio"][1:])):
        rows.append({"size": SIZES[name], "block": form, "seed": seed, "iteration": i + 1,
                     "relative residual": res, "state norm / input norm": ratio})
traj = rep.table(pd.DataFrame(rows), "residual_by_iteration")
summary = traj.groupby(["size", "block", "seed"]).apply(lambda g: pd.Series({
    "residual at 1": g["relative residual"].iloc[0],
    "residual at K": g.loc[g.iteration == K, "relative residual"].item(),
    f"residual at {extrapolate}K": g["relative residual"].iloc[-1],
    "min residual": g["relative residual"].min(),
    "last/first": g["relative residual"].iloc[-1] / g["relative residual"].iloc[0],
    "state norm ratio at K": g.loc[g.iteration == K, "state norm / input norm"].item()}), include_groups=False)
rep.table(summary.reset_index(), "convergence_summary")
summary.round(4)

# %%
base = alt.Chart(traj).encode(x=alt.X("iteration:Q", title="loop iteration i"), color="block:N", detail="seed:N")
c1 = base.mark_line().encode(y=alt.Y("relative residual:Q", scale=alt.Scale(type="log"),
                                     title="‖z_i − z_{i−1}‖ / ‖z_0‖"))
c2 = base.mark_line().encode(y=alt.Y("state norm / input norm:Q", title="‖z_i‖ / ‖z_0‖"))
rule = (alt.Chart(pd.DataFrame({"K": [K]})).mark_rule(strokeDash=[4, 4], color="gray").encode(x="K:Q")
        + alt.Chart(pd.DataFrame({"K": [K], "t": [f"trained K = {K}"]})).mark_text(
            align="left", dx=3, dy=-4, color="gray", fontSize=9).encode(x="K:Q", y=alt.value(6), text="t:N"))
rep.chart(alt.vconcat(*[
    alt.hconcat((c1.transform_filter(alt.datum.size == s) + rule).properties(width=240, height=180, title=s),
                (c2.transform_filter(alt.datum.size == s) + rule).properties(width=240, height=180))
    for s in SIZES.values()]), "residual_by_iteration")

# %% [markdown]
# ## The residual probe
#
# One pass per held-out batch at the trained depth K. Per sequence: the paper's residual (max over every position,
# pads included) and the masked one (max over real positions), each against the sequence's mean real-target NLL.
# Per token: each real position's own last-iteration residual against its CE. CIs resample documents. The per-seed
# correlations are folded beneath the pooled table below.

# %%
probe_rows, probes = [], {}
for (name, form, seed), r in runs.items():
    p = residual_probe(r.model, heldout(r.config, n_probe_docs)())
    probes[name, form, seed] = p
    cases = {"per sequence, pads included (paper)": (p.seq_residual_paper, p.seq_nll, None),
             "per sequence, real positions": (p.seq_residual_real, p.seq_nll, None),
             "per token, real positions": (p.tok_residual, p.tok_ce, p.tok_doc)}
    for what, (x, y, g) in cases.items():
        est = pearson_ci(x, y, g, n_boot=n_boot)
        probe_rows.append({"size": SIZES[name], "run": name, "block": form, "seed": seed, "probe": what,
                           "n": len(x), "r": est.point, "lo": est.lo, "hi": est.hi, "CI above 0": est.lo > 0,
                           "CI below 0": est.hi < 0})
probe = rep.table(pd.DataFrame(probe_rows), "probe_correlation")

# %% [markdown]
# Each r pooled over the training seeds (random effects, HKSJ t-interval with the shared-document term;
# docs/statistics.md §1; with one seed, that seed's CI), with the SD between seeds and how many seeds' own CIs lie
# above 0 and below 0.5 (a description, not a verdict):

# %%
pooled_rows = []
for (form, what, run), g in probe.groupby(["block", "probe", "run"], sort=False):
    es = [Estimate(r.r, r.lo, r.hi) for r in g.itertuples()]
    pr = inference.pool(es)
    pooled_rows.append({"block": form, "probe": what, "run": run, "size": SIZES[run], "pooled r": pr.point,
                        "pooled lo": pr.lo, "pooled hi": pr.hi, "between-seed sd": pr.between_sd,
                        "seeds above 0": inference.seed_counts(es)["seeds above"],
                        "seeds below 0.5": inference.seed_counts(es, 0.5)["seeds below"], "seeds": len(es)})
display(rep.table(pd.DataFrame(pooled_rows), "probe_pooled").round(3))  # noqa: F821
rep.fold(probe.round(3), "Per seed: each correlation with its CI (the rows pooled above)")

# %% [markdown]
# Reported (per sequence, pads included, 100 sequences, K = 30):

# %%
pd.DataFrame(reported("v3.probe") + reported("v5.probe") + reported("v7.probe") + reported("fixed_point"))

# %%
pc = alt.Chart(probe).mark_point(filled=True, size=60).encode(
    x=alt.X("r:Q", title="Pearson r (residual vs NLL)"), y=alt.Y("probe:N", title=None), color="block:N",
    shape="size:N")
bars = alt.Chart(probe).mark_rule().encode(x="lo:Q", x2="hi:Q", y="probe:N", color="block:N")
refs = pd.DataFrame({"r": [reported_value("v3.probe_r"), reported_value("v5.probe_r")],
                     "reported": ["7M (reported)", "23M (reported)"], "dy": [-4, 8]})
ref = (alt.Chart(refs).mark_rule(strokeDash=[4, 4]).encode(x="r:Q", tooltip="reported:N")
       + alt.Chart(refs).mark_text(align="left", dx=3, fontSize=9, color="gray").encode(
           x="r:Q", y=alt.value(6), yOffset="dy:Q", text="reported:N"))
rep.chart((bars + pc + ref).properties(width=420, height=160), "probe_correlation")

# %% [markdown]
# ## The claims
#
# The rules are pre-registered in `tiedlm_lib/preregistered.csv` (docs/statistics.md §2, §7); pooled intervals are
# over the training seeds, and a claim over several units is reproduced only when every unit is (intersection–union)
# and not reproduced when one contradicts it at the Bonferroni level over its units.
#
# * **A18** — no fixed point. For the paper-form block this holds by construction (the block re-adds a normalised
#   copy of the state, a floor under the residual), so it is a **check**, not a reproduction, and is not counted
#   among the reproductions: *check passed* when the relative residual at the last iterated depth (`extrapolate` × K)
#   is at least half its value at iteration 1 in every seed and size, *check failed* otherwise. The residual-form
#   block is a different model, not a corrected protocol of the same one, so it is recorded as an **extension**, and
#   there it is a claim: last / first, pooled over seeds, above 0.5 at both sizes (reproduced); below 0.5 at some
#   size (not reproduced); otherwise inconclusive.
# * **A19** — weak probe, stronger at the larger size: the paper-protocol per-sequence r, pooled over seeds, above 0
#   (a probe at all; not reproduced below 0 or inside ±0.05) and below 0.5 (weak; not reproduced above 0.5) at both
#   sizes, and r(large) − r(small) of the same seed (each seed's difference with both CIs' variances added) pooled
#   above 0 (not reproduced below 0 or inside ±0.05). The corrected protocol judges the per-token, pad-excluded
#   correlation the same way. Both criteria are functions of `tiedlm_lib.paper.verdicts`, unit-tested for every
#   outcome.

# %%
def residual_ratios(form):
    sub = summary.reset_index()
    sub = sub[sub.block == form]
    return {size: dict(zip(g.seed, g["last/first"])) for size, g in sub.groupby("size")}


by_it = traj.pivot_table(index=["block", "size", "seed"], columns="iteration", values="relative residual")
for form in FORMS:  # each ratio is the residual at iteration extrapolate·K over iteration 1's, from the trajectories
    ev = {(size, sd): v for size, d in residual_ratios(form).items() for sd, v in d.items()}
    assert_direction(f"A18 last / first, {form} block", ev, {k: by_it.loc[(form, *k), extrapolate * K] for k in ev},
                     {k: by_it.loc[(form, *k), 1] for k in ev}, kind="ratio")
a18 = (verdicts.a18(residual_ratios("paper"), "paper", f"paper-form block, iterated to {extrapolate}K"),
       verdicts.a18(residual_ratios("residual"), "extension", "residual-form block (no structural floor)"))


def correlations(what):
    sub = probe[(probe.block == "paper") & (probe.probe == what)]
    return {run: {int(r.seed): Estimate(r.r, r.lo, r.hi) for r in g.itertuples()} for run, g in sub.groupby("run")}


a19 = (verdicts.a19(correlations("per sequence, pads included (paper)"), "paper",
                    "paper-form models, per-sequence r (max residual incl. pads vs mean real NLL)", "v3", "v5"),
       verdicts.a19(correlations("per token, real positions"), "corrected",
                    "paper-form models, per token (each real position's residual vs its CE), pads excluded", "v3",
                    "v5"))
# A19 builds r(large) − r(small) inside the verdict from the runs it is told are small and large: recomputed from the
# probe table's r, the larger run being the one with more parameters
big, little = sorted(SIZES, key=lambda n: runs[n, "paper", seeds[0]].result["params"], reverse=True)
for j, what in zip(a19, ("per sequence, pads included (paper)", "per token, real positions")):
    r_of = probe[(probe.block == "paper") & (probe.probe == what)].set_index(["run", "seed"]).r
    ev = next(b for u, b in j.evidence.items() if u.startswith("stronger at the larger size"))
    assert_direction(f"A19 r(large) - r(small), {what}", {sd: ev[f"s{sd}"][0] for sd in seeds},
                     {sd: r_of[big, sd] for sd in seeds}, {sd: r_of[little, sd] for sd in seeds})
for j in (*a18, *a19):
    rep.judge(j)

# %% [markdown]
# ## Results and what they mean
#
# Every number is read from this section's tables (`rep.fact`); every direction word is derived from those numbers
# or from the verdicts above.

# %%
lf_paper = rep.fact("lf_paper", "convergence_summary", "last/first", {"block": "paper"})
lf_res = rep.fact("lf_res", "convergence_summary", "last/first", {"block": "residual"})
rep.fact("res_K", "convergence_summary", "residual at K", {"block": "paper"})
PAPER_PROBE, TOKEN_PROBE = "per sequence, pads included (paper)", "per token, real positions"
rep.fact("r_small", "probe_correlation", "r", {"run": "v3", "block": "paper", "probe": PAPER_PROBE})
rep.fact("r_large", "probe_correlation", "r", {"run": "v5", "block": "paper", "probe": PAPER_PROBE})
rep.fact("r_tok", "probe_correlation", "r", {"block": "paper", "probe": TOKEN_PROBE})
for key, run in (("r_small", "v3"), ("r_large", "v5")):
    for col, suffix in (("pooled r", "_p"), ("pooled lo", "_lo"), ("pooled hi", "_hi")):
        rep.fact(key + suffix, "probe_pooled", col, {"run": run, "block": "paper", "probe": PAPER_PROBE}, agg="only")
for col, name in (("CI above 0", "n_rpos"), ("CI below 0", "n_rneg"), ("r", "n_rcells")):
    rep.fact(name, "probe_correlation", col, {"block": "paper", "probe": PAPER_PROBE},
             agg="count" if col == "r" else "sum")
rep.prose("Results", "Iterated to {e}K, the paper-form block's relative residual ends at {lf_paper:.2f} times its "
          "first-iteration value (at K it is {res_K:.3f} of the input norm), the residual-form block's at "
          "{lf_res:.2f} times (means over sizes and {n} seed{s}). The paper's residual probe correlates with "
          "per-sequence NLL at r = {r_small:.2f} (small) and {r_large:.2f} (large) on average (pooled over seeds: "
          "{r_small_p:.2f} [{r_small_lo:.2f}, {r_small_hi:.2f}] and {r_large_p:.2f} [{r_large_lo:.2f}, "
          "{r_large_hi:.2f}]); per token, pads excluded, "
          "r = {r_tok:.2f}. Per sequence, its r has its CI above 0 in {n_rpos} of {n_rcells} size × seed cells and "
          "below 0 in {n_rneg}.", e=str(extrapolate), n=str(len(seeds)), s="s" if len(seeds) > 1 else "")

# %%
def probe_words(j):
    """A19's verdict in words: which parts go against the claim, or which are undecided."""
    if j.verdict == "reproduced":
        return "a weak uncertainty probe, stronger at the larger size"
    part = {u: u.split(":")[0] for u in j.outcomes}
    against = {part[u] for u, v in j.outcomes.items() if v == "not reproduced"}
    said = {"a probe at all": "no probe at some size, its r pooled below 0 or inside ±0.05",
            "weak": "not weak at some size, its r pooled above 0.5",
            "stronger at the larger size": "not stronger at the larger size, the difference pooled below 0 or "
                                           "inside ±0.05"}
    if j.verdict == "not reproduced":
        return "; ".join(said[p] for p in said if p in against)
    open_ = [p for p in said if any(part[u] == p and v == "inconclusive" for u, v in j.outcomes.items())]
    ask = {"a probe at all": "whether it is a probe at all", "weak": "whether it is weak",
           "stronger at the larger size": "whether it is stronger at the larger size"}
    return ("not shown to be the weak positive probe the paper reports, stronger at the larger size, since it is "
            "undecided " + " and ".join(ask[p] for p in open_))


def sign_words(js):
    """The sign of every pooled r the A19 judgements ``js`` read for "a probe at all" (from their evidence): how many
    points are negative and how many intervals lie wholly below or above 0, beside the sign of the paper's r."""
    pts = [b["pooled"] for j in js for u, b in j.evidence.items()
           if u.startswith("a probe at all: ") and isinstance(b, dict) and isinstance(b.get("pooled"), dict)]
    n, neg = len(pts), sum(p["point"] < 0 for p in pts)
    below, above = sum(p["interval"][1] < 0 for p in pts), sum(p["interval"][0] > 0 for p in pts)
    paper_r = [reported_value("v3.probe_r"), reported_value("v5.probe_r")]
    paper_sign = "positive" if min(paper_r) > 0 else "negative" if max(paper_r) < 0 else None
    theirs = f"the paper's r: {listed(f'{r:+.2f}' for r in paper_r)}"
    lie = {1: "lies"}.get(below, "lie")
    if neg in (0, n):  # every point of one sign
        sign = "negative" if neg else "positive"
        relation = ("the paper's sign" if sign == paper_sign else "the opposite of the paper's sign" if paper_sign
                    else "while the paper's r are of either sign")
        wholly = (f"{below} of the {n} intervals {lie} wholly below 0" if neg else
                  f"{above} of the {n} intervals {'lies' if above == 1 else 'lie'} wholly above 0")
        return (f"Every pooled r A19 reads is {sign} ({n} of {n}, per sequence and per token at both sizes), "
                f"{relation} ({theirs}); {wholly}.")
    return (f"Of the {n} pooled r's A19 reads, {neg} {'is' if neg == 1 else 'are'} negative and {n - neg} positive "
            f"({theirs}); {below} of the intervals {lie} wholly below 0 and {above} wholly above.")


rep.prose("What this means", "The paper-form loop {fp_words} (A18 {a18}){predicts}. The residual form {res_words} "
          "(A18 on this different block, an extension: {a18c}). The residual norm is "
          "{probe_words} (A19 {a19}; per token {a19c}). {signs}", a18=a18[0].verdict, a18c=a18[1].verdict,
          a19=a19[0].verdict, a19c=a19[1].verdict, signs=sign_words(a19),
          fp_words={"check passed": "does not approach a fixed point in any seed or size: its residual stays above "
                                    "half the first iteration's",
                    "check failed": "approaches a fixed point in some seed or size: its residual falls below half "
                                    "the first iteration's"}[a18[0].verdict],
          predicts={"check passed": ", as its block's normalised re-addition predicts",
                    "check failed": ", although its block's normalised re-addition predicts it cannot"}[
              a18[0].verdict],
          # the criterion is "below half the first residual": say what it found, and that the residual still falls
          res_words={"reproduced": "keeps more than half its first-iteration residual at both sizes (last / first "
                                   "pooled above 0.5)" + (
              f", although its residual falls, to {lf_res:.2f} of its first value on average"
              if lf_res < 1 else ""),
                     "not reproduced": "does approach a fixed point: last / first pooled below 0.5 at some size"}.get(
              a18[1].verdict, "is not separated from half its first-iteration residual at every size"),
          probe_words=probe_words(a19[0]))
