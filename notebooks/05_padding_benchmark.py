# %% [markdown]
# # 05 · The padding benchmark (paper A, §5)
#
# Paper A ranks its models on a "suffix benchmark": run each 256-token sequence and score only the last quarter,
# logits 192..254 against tokens 193..255. Sequences are padded documents, so the last quarter is mostly padding:
# **61.6% of the targets are pad**. The paper reports two numbers per model — the mean over every target ("with pad")
# and over real targets only — and finds that they rank the models in opposite orders: pre-trained models, which
# never learned to predict pad after pad (pre-training ignored pad targets), score ≈ 10 with pad and ≈ 2.5 on real
# tokens; SFT models, trained on pad targets, score ≈ 1.15 with pad and ≈ 2.9 on real tokens.
#
# PROTOCOL §7.1 adds that the benchmark sequences were the first 5000 of the *pre-training* cache, inside the
# training split: about 65% had been trained on. This section reproduces the benchmark both ways — drawn from
# sequences the model trained on (`source="train-overlap"`, the paper's) and from the held-out split (ours) — on a
# cast that spans the paper's: pad-ignoring pre-trained models of both sizes and layouts, the small model after
# pad-target SFT (the paper's protocol) and after response-only SFT, and a model pre-trained *with* pad targets.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | paper
device = None  # cpu | cuda; default: TIEDLM_DEVICE, else CUDA when available, else the CPU
seeds = None  # training seeds; default: the scale's (smoke: [0], cpu: [0, 1, 2, 3, 4])
figures_dir = None  # default: figures/<scale>/
paper_dir = None  # default: paper/<scale>/
n_boot = 2000  # bootstrap replicates (over benchmark draws)
n_batches = 60  # the paper: 60 batches × 16 sequences, random.Random(777)
batch_size = 16
pool = 5000  # train-overlap: draw from the first `pool` training documents (the paper: the first 5000)

# %%
import altair as alt
import pandas as pd

from tiedlm_lib import get_run
from tiedlm_lib.evaluation.analysis import assert_direction, cached_corpus
from tiedlm_lib.evaluation.suffix_benchmark import draw, implied_pad_nll, kendall_tau, seen_in_training, suffix_nll
from tiedlm_lib.paper import verdicts
from tiedlm_lib.paper.report import Report
from tiedlm_lib.paper.reported import reported, reported_value
from tiedlm_lib.runs import get_scale, section_overrides, sft_run
from tiedlm_lib.stats.bootstrap import Estimate, group_diff, mean_ci, paired_diff

rep = Report("05_padding_benchmark", scale, figures_dir, paper_dir, seeds=seeds)
seeds = rep.seeds
S = get_scale(scale)
print(f"scale {scale}: seq {S.seq_len}, benchmark {n_batches} x {batch_size} draws, seeds {seeds}")

# %% [markdown]
# ## The cast
#
# All pre-trained with pad targets ignored unless named otherwise. The vanilla and three-loop models are sections 06
# and 07's runs (the small size, 0.8 × the short run), shared through the runs cache. The SFT runs start from the
# small model's final weights (constant lr, fresh optimiser, docs/protocol.md §4.6) on a chat task derived from the
# corpus (see `tiedlm_lib.training.sft`), with the response in the last quarter — where the benchmark looks.

# %%
SHORT = section_overrides(scale)  # sections 06 and 07's runs (cached, shared; at paper scale the paper's own)


def cast(seed):
    small = get_run("v3", scale, seed, device=device)
    return {
        "small PT (v3)": small,
        "large PT (v5)": get_run("v5", scale, seed, device=device),
        "vanilla PT (v9)": get_run("v9", scale, seed, SHORT, device=device),
        "three loops PT (v13)": get_run("v13", scale, seed, SHORT, device=device),
        "small + SFT, pad targets (paper)": get_run(sft_run(small.config, "v3-sft-paper", "paper"), device=device),
        "small + SFT, corrected (response only, packed)": get_run(sft_run(small.config, "v3-sft-masked", "masked"),
                                                                  device=device),
        "small PT with pad targets": get_run("v3", scale, seed, overrides={"train.pad_targets": "include"},
                                             device=device),
    }


models = {(name, seed): r for seed in seeds for name, r in cast(seed).items()}
pd.DataFrame([{"model": n, "seed": s, "run": r.config.name, "steps": r.result["steps"],
               "loss on": r.config.data.task + ("" if r.config.data.task == "lm" else f" ({r.config.data.sft_loss})"),
               "pad targets": r.config.train.pad_targets} for (n, s), r in models.items()])

# %% [markdown]
# ## The benchmark sequences
#
# Two draws of the same size with the same seeded stream: from the first `pool` training documents (the paper's
# choice) and from the held-out documents. For the training draw we replay each pre-training stream to count how many
# drawn sequences the model had seen.

# %%
corpus = cached_corpus(models[next(iter(models))].config.data)
bench = {"train-overlap": draw(corpus.train, S.seq_len, "train-overlap", n_batches, batch_size, pool=pool),
         "heldout": draw(corpus.val, S.seq_len, "heldout", n_batches, batch_size)}
seen_draws, overlap = {}, {}  # per model: which train-overlap draws it saw in pre-training, and their fraction
for (name, seed), r in models.items():
    base_steps = r.config.train.steps if r.config.train.init_from is None else get_scale(scale).short_steps
    seen_draws[name, seed] = seen_in_training(r.config, len(corpus.train), base_steps)[bench["train-overlap"].doc]
    overlap[name, seed] = float(seen_draws[name, seed].mean())
pd.DataFrame([{"source": k, "draws": len(b.inputs), "distinct sequences": len(set(b.doc.tolist())),
               "targets per draw": b.targets.shape[1], "pad fraction of targets": b.pad_fraction}
              for k, b in bench.items()])

# %% [markdown]
# ## With pad against real tokens

# %%
scores, rows = {}, []
for (name, seed), r in models.items():
    for src, b in bench.items():
        s = suffix_nll(r.model, b, batch_size)
        scores[name, seed, src] = s
        rows.append({"model": name, "seed": seed, "source": src, "with pad": s.with_pad, "real token": s.masked,
                     "pad fraction": s.pad_fraction,
                     "implied pad NLL": implied_pad_nll(s.with_pad, s.masked, s.pad_fraction),
                     "seen in training": overlap[name, seed] if src == "train-overlap" else 0.0})
table = rep.table(pd.DataFrame(rows), "with_pad_vs_real")
table.round(3)

# %% [markdown]
# Reported (paper scale, train-overlap draws, 61.6% pad):

# %%
rb = pd.DataFrame(reported("bench."))
print(f"reported pad fraction: {reported_value('bench.pad_fraction')}")
rb = rb[rb.id != "bench.pad_fraction"].assign(model=lambda t: t.id.str.split(".").str[1],
                                              metric=lambda t: t.id.str.split(".").str[2])
rb = rb.pivot_table(index="model", columns="metric", values="value")
own = rb.drop(index=[m for m in rb.index if m.startswith(("cedlr", "metaash"))])  # paper A's own models
print(f"Kendall tau(with pad, real) over paper A's own models, from the reported numbers: "
      f"{kendall_tau(own.with_pad, own.real):.2f}")
rb

# %%
for src in bench:
    t = table[table.source == src]
    rank = t.assign(rank_with_pad=t["with pad"].rank(), rank_real=t["real token"].rank())
    display(rank[["model", "seed", "with pad", "rank_with_pad", "real token", "rank_real"]]  # noqa: F821
            .sort_values("rank_real").round(3).assign(source=src))
ch = alt.Chart(table).mark_point(filled=True, size=80).encode(
    x=alt.X("real token:Q", scale=alt.Scale(zero=False), title="real-token NLL (nats)"),
    y=alt.Y("with pad:Q", title="with-pad NLL (nats)"), color="model:N", shape="source:N",
    tooltip=["model", "source", "with pad", "real token"]).properties(width=360, height=260)
rep.chart(ch, "with_pad_vs_real")

# %% [markdown]
# ## Does the ranking reverse?
#
# Kendall's τ between the with-pad and the real-token orderings of the cast (τ = 1: same order, τ = −1: reversed),
# per source; and, for the pair the paper's story rests on — the pre-trained small model against the same model
# after pad-target SFT — each metric's paired difference with a bootstrap CI over the benchmark draws.

# %%
tau_rows, pair_rows = [], []
for seed in seeds:
    for src in bench:
        t = table[(table.source == src) & (table.seed == seed)]
        tau_rows.append({"seed": seed, "source": src, "kendall tau": kendall_tau(t["with pad"], t["real token"])})
        a, b = scores["small PT (v3)", seed, src], scores["small + SFT, pad targets (paper)", seed, src]
        for metric, col in (("with_pad", "with pad"), ("masked", "real token")):
            d = paired_diff(b, a, metric, n_boot, seed)
            pair_rows.append({"seed": seed, "source": src, "metric": col, "SFT - PT": d.point, "lo": d.lo,
                              "hi": d.hi})
taus = rep.table(pd.DataFrame(tau_rows), "kendall_tau")
pairs = rep.table(pd.DataFrame(pair_rows), "sft_vs_pt")
display(taus.round(3))  # noqa: F821
pairs.round(3)

# %% [markdown]
# ## Training sequences against held-out ones
#
# The same models on the two draws: a model that memorised its training sequences scores better on the paper's
# draw. Unpaired (different sequences): each NLL with its own CI.

# %%
mem_rows = []
for name, seed in models:
    e_tr = mean_ci(scores[name, seed, "train-overlap"], "masked", n_boot, seed)
    e_ho = mean_ci(scores[name, seed, "heldout"], "masked", n_boot, seed)
    mem_rows.append({"model": name, "seed": seed, "seen": overlap[name, seed], "real, train-overlap": e_tr.point,
                     "ci train": f"[{e_tr.lo:.3f}, {e_tr.hi:.3f}]", "real, held-out": e_ho.point,
                     "ci held-out": f"[{e_ho.lo:.3f}, {e_ho.hi:.3f}]", "held-out - train": e_ho.point - e_tr.point,
                     "CIs disjoint": e_ho.lo > e_tr.hi or e_tr.lo > e_ho.hi})
mem = rep.table(pd.DataFrame(mem_rows), "train_vs_heldout")
mem.round(3)

# %% [markdown]
# ## The claims
#
# Each criterion is a function of `tiedlm_lib.paper.verdicts`, unit-tested for every outcome it can return. Every
# criterion reads an estimate **pooled over the training seeds** (random effects; a per-seed number without a CI, such
# as a share or a rank correlation, is pooled by the t-interval on the seed points; docs/statistics.md §1) against a
# threshold and a smallest effect size of interest (SESOI), pre-registered in `tiedlm_lib/preregistered.csv`
# (docs/statistics.md §2, §7). A claim with several parts is reproduced only when every part is (intersection–union)
# and not reproduced when some part contradicts it at the Bonferroni level over the parts. How many seeds lie on each
# side, and the prediction interval for a new seed, are shown beside a verdict, never deciding it. With one seed
# nothing is pooled.
#
# * **A11** — padding dominates and rankings reverse (paper protocol: train-overlap draws; corrected: held-out
#   draws), two parts. *Padding-dominated*: per seed, the pad targets' share of the with-pad NLL (f·pad NLL /
#   with-pad NLL, f the pad fraction), least over the pad-ignoring pre-trained models, pooled, lies above 0.5 (not
#   reproduced below 0.5). *Rankings reverse*: Kendall τ between the with-pad and the real-token orderings of the
#   cast, pooled, lies below 0 — a reversal, as the paper's champion-to-last story says; not reproduced above 0 or
#   inside ±0.2 (no relation between the orderings is not a reversal). Shown beside, not judged: the with-pad rank of
#   the real-token champion (1 = best, of the cast) and whether SFT on pad targets moves the two metrics in opposite
#   directions (both CIs excluding 0). *Criterion changes, stated:* a first version required the pad **fraction** of
#   the targets to exceed 0.5 (the paper's 61.6%); the fraction is a property of the corpus and sequence length (this
#   section's `pad fraction` column), and on the first cpu run it was below one half, so that version judged the
#   corpus rather than the claim; "dominated" is judged by what the pads contribute to the with-pad number. The
#   three-seed ledger's τ < 0.5 judged "not the same ranking", not "reversed"; the pre-registered rule judges the
#   reversal (docs/statistics.md §7).
# * **Q6** — does evaluating on training sequences change the conclusions? The conclusions this section can compare
#   across draws are A11's verdict and the real-token ranking of the cast (A12–A14 are judged on held-out documents
#   only). *yes* if A11 is reproduced on one draw and not reproduced on the other, or the two draws rank the cast
#   differently: Kendall τ between their real-token NLLs (within each seed; pooling seeds would rank between-seed
#   differences too), pooled, lies below 0.5; *no* if A11's pooled verdict is the same on both draws and the τ
#   interval lies above 0.5; otherwise inconclusive. Beside it, the level shift: within the train-overlap draw, each
#   model's real-token NLL on the sequences it did **not** see minus those it **did** (same draw and pool, so a shift
#   is attributable to having been seen). *Criterion change, stated:* a first version answered Q6 from that shift
#   alone; that asks whether seen sequences score better, not whether the conclusions change.

# %%
def a11_evidence(src):
    out = {}
    for seed in seeds:
        p = pairs[(pairs.source == src) & (pairs.seed == seed)].set_index("metric")
        cast_t = table[(table.source == src) & (table.seed == seed)]
        t = cast_t[cast_t.model.str.contains("PT") & ~cast_t.model.str.contains("pad targets")]
        champion = cast_t["real token"].idxmin()  # the real-token best model; its rank on with-pad NLL (1 = best)
        out[seed] = {"tau": taus[(taus.source == src) & (taus.seed == seed)]["kendall tau"].item(),
                     "pad_fraction": bench[src].pad_fraction,
                     "pad_share": float((t["pad fraction"] * t["implied pad NLL"] / t["with pad"]).min()),
                     "champion_rank": int(cast_t["with pad"].rank(method="min")[champion]),
                     **{f"sft_minus_pt_{m}": Estimate(p.loc[c, "SFT - PT"], p.loc[c, "lo"], p.loc[c, "hi"])
                        for m, c in (("with_pad", "with pad"), ("real", "real token"))}}
    return out


# the models the pad share reads: the pad-ignoring pre-trained ones
PT_IGNORING = [n for n in dict.fromkeys(n for n, _ in models) if "PT" in n and "pad targets" not in n]
a11_ev = {src: a11_evidence(src) for src in bench}
for src, ev in a11_ev.items():
    # the pad share recomputed from the NLLStats sums: CE on pad targets (all minus real) over all CE, least model
    share = {sd: min(PT_IGNORING, key=lambda n, sd=sd: 1 - scores[n, sd, src].sum_real.sum()
                     / scores[n, sd, src].sum_all.sum()) for sd in seeds}
    sc = {sd: scores[share[sd], sd, src] for sd in seeds}
    assert_direction(f"A11 pad share ({src})", {sd: ev[sd]["pad_share"] for sd in seeds},
                     {sd: sc[sd].sum_all.sum() - sc[sd].sum_real.sum() for sd in seeds},
                     {sd: sc[sd].sum_all.sum() for sd in seeds}, kind="ratio", tol=1e-4)  # float32 sums
    # SFT - PT (shown beside A11) recomputed from the NLLStats properties of the two models
    sft, pt, prop = "small + SFT, pad targets (paper)", "small PT (v3)", {"with_pad": "with_pad", "real": "masked"}
    keys = [(sd, m) for sd in seeds for m in prop]
    assert_direction(f"A11 SFT - PT ({src})", {(sd, m): ev[sd][f"sft_minus_pt_{m}"] for sd, m in keys},
                     {(sd, m): getattr(scores[sft, sd, src], prop[m]) for sd, m in keys},
                     {(sd, m): getattr(scores[pt, sd, src], prop[m]) for sd, m in keys})
a11 = {"paper": verdicts.a11(a11_ev["train-overlap"], "paper", "train-overlap draws"),
       "corrected": verdicts.a11(a11_ev["heldout"], "corrected", "held-out draws")}
for j in a11.values():
    rep.judge(j)
# A11's per-seed numbers on each draw (descriptions; the verdict reads them pooled, below)
a11_parts = rep.table(pd.DataFrame([
    {"source": src, "seed": int(k[1:]), "cast": int(((table.source == src) & (table.seed == int(k[1:]))).sum()),
     "pad share": e["pad_share_of_with_pad_nll"], "pads carry > 50%": e["pad_share_of_with_pad_nll"] > 0.5,
     "kendall tau": e["kendall_tau"], "tau < 0 (reversed)": e["kendall_tau"] < 0,
     "champion's with-pad rank": e["champion's with-pad rank"],
     "SFT flips the sign": (e["sft_minus_pt_with_pad"][2] < 0 < e["sft_minus_pt_real"][1])
     or (e["sft_minus_pt_real"][2] < 0 < e["sft_minus_pt_with_pad"][1])}
    for src, j in (("train-overlap", a11["paper"]), ("heldout", a11["corrected"]))
    for k, e in j.evidence.items() if k[:1] == "s" and k[1:].isdigit()]), "a11_parts")

t_tr = table[table.source == "train-overlap"].sort_values(["seed", "model"])
t_ho = table[table.source == "heldout"].sort_values(["seed", "model"])
shift = {}
for (name, seed), seen in seen_draws.items():
    if 0 < seen.sum() < len(seen):
        shift.setdefault(name, {})[seed] = group_diff(scores[name, seed, "train-overlap"], seen, "masked", n_boot, seed)
seen_table = rep.table(pd.DataFrame([{"model": m, "seed": sd, "unseen - seen": e.point, "lo": e.lo, "hi": e.hi,
                                      "positive": e.point > 0, "CI above 0": e.lo > 0}
                                     for m, d in shift.items() for sd, e in d.items()]), "seen_vs_unseen")
# the two draws' real-token rankings compared within each seed (pooling seeds would rank between-seed differences too)
draw_tau = {sd: kendall_tau(t_tr[t_tr.seed == sd]["real token"], t_ho[t_ho.seed == sd]["real token"])
            for sd in seeds}
rep.table(pd.DataFrame([{"seed": sd, "kendall tau, train-overlap vs held-out": t} for sd, t in draw_tau.items()]),
          "draws_compared")
if shift:  # unseen - seen recomputed from the NLLStats of each group's rows, taken apart
    cells = [(name, sd) for name, d in shift.items() for sd in d]
    tr = {c: (scores[c[0], c[1], "train-overlap"], seen_draws[c]) for c in cells}
    assert_direction("Q6 unseen - seen", {(name, sd): shift[name][sd] for name, sd in cells},
                     {c: st.take(~g).masked for c, (st, g) in tr.items()},
                     {c: st.take(g).masked for c, (st, g) in tr.items()})
q6 = verdicts.q6(a11["paper"], a11["corrected"], draw_tau, shift)
rep.judge(q6)
# every judged unit pooled over seeds (verdicts.forest_rows): A11's two parts on each draw, Q6's draw-vs-draw tau
pooled = rep.table(pd.DataFrame([{"claim": j.claim, "protocol": j.protocol, **r}
                                 for j in (a11["paper"], a11["corrected"], q6) for r in verdicts.forest_rows(j.evidence)
                                 if j.claim == "A11" or r["unit"] == "kendall tau, train-overlap vs held-out"]),
                   "pooled_units")
display(pooled.round(3))  # noqa: F821
rep.fold(a11_parts.round(3), "Per seed: A11's parts on each draw (descriptions; pooled above)")
rep.fold(seen_table.round(4), "Per model and seed: unseen − seen on the train-overlap draws (Q6's level shift)")

# %%
# Q6's level shift per model, pooled over seeds (its evidence, a unit per model): what the seen-vs-unseen sentence
# below rests on
shift_pooled = rep.table(pd.DataFrame([{"model": m, "pooled": b["pooled"]["point"], "lo": b["pooled"]["interval"][0],
                                        "hi": b["pooled"]["interval"][1],
                                        "interval above 0": b["pooled"]["interval"][0] > 0,
                                        "interval below 0": b["pooled"]["interval"][1] < 0}
                                       for m, b in ((m, q6.evidence.get(m)) for m in shift)
                                       if isinstance(b, dict) and isinstance(b.get("pooled"), dict)],
                                      columns=["model", "pooled", "lo", "hi", "interval above 0",
                                               "interval below 0"]), "seen_vs_unseen_pooled")
shift_pooled.round(3)

# %% [markdown]
# ## Results and what they mean
#
# Every number is read from this section's tables (`rep.fact`); every direction word is derived from those numbers
# or from the verdicts above.

# %%
PT = "small PT (v3)"
rep.fact("pad_ho", "with_pad_vs_real", "pad fraction", {"source": "heldout", "model": PT})
pad_pt = rep.fact("pad_nll_pt", "with_pad_vs_real", "implied pad NLL", {"source": "heldout", "model": PT})
pad_sft = rep.fact("pad_nll_sft", "with_pad_vs_real", "implied pad NLL",
                   {"source": "heldout", "model": "small + SFT, pad targets (paper)"})
rep.fact("tau_ho", "kendall_tau", "kendall tau", {"source": "heldout"})
rep.fact("tau_tr", "kendall_tau", "kendall tau", {"source": "train-overlap"})
d_pad = rep.fact("d_pad", "sft_vs_pt", "SFT - PT", {"source": "heldout", "metric": "with pad"})
d_real = rep.fact("d_real", "sft_vs_pt", "SFT - PT", {"source": "heldout", "metric": "real token"})
shift_mean = rep.fact("shift", "seen_vs_unseen", "unseen - seen") if len(seen_table) else float("nan")
rep.prose("Results", "On held-out draws {pad_ho:.0%} of the suffix benchmark's targets are pad. A pre-trained model "
          "that ignored pad in training scores {pad_nll_pt:.1f} nats on those targets, the same model after SFT on "
          "pad targets {pad_nll_sft:.2f}. SFT changes the with-pad number by {d_pad:+.3f} nats and the real-token one "
          "by {d_real:+.3f}; the with-pad and real-token rankings of the cast are related by Kendall τ = {tau_ho:.2f} "
          "(train-overlap draws: {tau_tr:.2f}), means over seeds."
          + ("" if shift_mean == shift_mean else
             " No model saw only part of the train-overlap draw, so seen and unseen sequences were not compared."))

# %%
n_cast = rep.fact("n_cast", "a11_parts", "cast", {"source": "heldout"}, agg="max")
for src, tag, protocol in (("heldout", "ho", "corrected"), ("train-overlap", "tr", "paper")):
    for unit, name in (("padding-dominated: pad share", "share"), ("ranking reverses: kendall tau", "tau")):
        for sfx, col in (("", "point"), ("_lo", "lo"), ("_hi", "hi")):
            rep.fact(f"{name}_{tag}{sfx}", "pooled_units", col, {"claim": "A11", "protocol": protocol, "unit": unit},
                     agg="only")
    rep.fact(f"rank_{tag}", "a11_parts", "champion's with-pad rank", {"source": src})
    rep.fact(f"n_flip_{tag}", "a11_parts", "SFT flips the sign", {"source": src}, agg="sum")
n_seeds = rep.fact("n_seeds", "a11_parts", "seed", {"source": "heldout"}, agg="count")
dtau = {col: rep.fact(f"dtau{sfx}", "pooled_units", col, {"claim": "Q6", "unit": "kendall tau, train-overlap vs "
                                                            "held-out"}, agg="only")
        for sfx, col in (("", "point"), ("_lo", "lo"), ("_hi", "hi"))}
level = ""
if len(seen_table):
    n_shift = rep.fact("n_shift", "seen_vs_unseen", "unseen - seen", agg="count")
    n_pos = rep.fact("n_pos", "seen_vs_unseen", "positive", agg="sum")
    n_above = rep.fact("n_above", "seen_vs_unseen", "CI above 0", agg="sum")
    n_models = rep.fact("n_models", "seen_vs_unseen_pooled", "pooled", agg="count") if len(shift_pooled) else 0
    n_pool_above = rep.fact("n_pool_above", "seen_vs_unseen_pooled", "interval above 0", agg="sum") if n_models else 0
    n_pool_below = rep.fact("n_pool_below", "seen_vs_unseen_pooled", "interval below 0", agg="sum") if n_models else 0
    pooled_words = ("seen sequences score better for every model, each pooled interval above 0"
                    if n_pool_above == n_models else
                    "every model's pooled interval holds 0, so seen sequences are not shown to score better"
                    if n_pool_above == n_pool_below == 0 else
                    "the pooled interval lies above 0 for {n_pool_above} of {n_models} models and below 0 for "
                    "{n_pool_below}")
    level = (" Within the train-overlap draw, the real-token NLL of unseen minus seen sequences is positive in "
             "{n_pos} of {n_shift} model × seed estimates (mean {shift:+.3f} nats; CI above 0 in {n_above})."
             + (" Pooled over seeds, " + pooled_words + "." if n_models else ""))


A11_AGAINST = {"padding-dominated": "the pads do not carry most of the with-pad number",
               "ranking reverses": "the rankings are not reversed, τ's pooled interval lying {tau_where}"}


def tau_where(p):
    """Where a pooled Kendall τ's interval lies that shows no reversal: above 0, or inside ±SESOI."""
    lo, hi = p["interval"]
    return "wholly above 0" if lo > 0 else f"inside ±{p['sesoi']:g}" if -p["sesoi"] < lo and hi < p["sesoi"] else (
        "above 0 or inside the margin")


def a11_words(j):
    """What one draw's A11 verdict says, from its two parts' pooled verdicts (the part that contradicts it at the
    Bonferroni level, where it is not reproduced)."""
    if j.verdict == "reproduced":
        return "the pads carry most of the with-pad number and the two metrics rank the cast in reversed order"
    if j.verdict == "not reproduced":
        return " and ".join(A11_AGAINST[u.split(":")[0]].format(tau_where=tau_where(b["pooled"]))
                            for u, b in j.evidence.items() if u in j.outcomes
                            and b["pooled"]["verdict at the Bonferroni level"] == "not reproduced")
    return "a part is not settled: " + ", ".join(f"{u} {v}" for u, v in j.outcomes.items())


def a11_sentences(a11):
    """A11 on the two protocols: one sentence where both read the same, else one each."""
    p, c = (a11[k].verdict for k in ("paper", "corrected"))
    pw, cw = (a11_words(a11[k]) for k in ("paper", "corrected"))
    if (p, pw) == (c, cw):
        return f"A11 is {p} on either protocol: {pw}."
    return f"A11 is {p} on the paper's protocol: {pw}. It is {c} on the corrected one: {cw}."


rep.prose("What this means", "On held-out draws (the corrected protocol), pooled over {n_seeds} seed{s}, the pads' "
          "share of every pad-ignoring pre-trained model's with-pad NLL is at least {share_ho:.2f} [{share_ho_lo:.2f}, "
          "{share_ho_hi:.2f}] (against one half). Kendall τ between the with-pad and real-token rankings of the "
          "{n_cast}-model cast is {tau_ho:+.2f} [{tau_ho_lo:+.2f}, {tau_ho_hi:+.2f}] (a reversal is below 0). The "
          "real-token champion ranks {rank_ho:.1f} on with-pad NLL on average (1 = best). SFT on pad targets "
          "moves the two metrics in opposite directions (both CIs excluding 0) in {n_flip_ho} of {n_seeds} seeds."
          "\n\nOn the paper's train-overlap draws the share is {share_tr:.2f} [{share_tr_lo:.2f}, "
          "{share_tr_hi:.2f}], τ {tau_tr:+.2f} [{tau_tr_lo:+.2f}, {tau_tr_hi:+.2f}], the champion's with-pad "
          "rank {rank_tr:.1f} and the opposite moves {n_flip_tr} of {n_seeds}. {a11_sentences} Real-token NLL "
          "is the number that measures text.\n\nThe two draws' real-token rankings agree with Kendall τ "
          "{dtau:+.2f} [{dtau_lo:+.2f}, {dtau_hi:+.2f}], pooled{beyond}. So evaluating "
          "on training sequences {q6_words} (Q6 {q6})." + level,
          s="" if n_seeds == 1 else "s", a11_sentences=a11_sentences(a11), q6=q6.verdict,
          beyond=" (a t-interval on the seeds' τ, so its end can pass τ's bound of 1)" if dtau["hi"] > 1 else "",
          q6_words={"yes": "changes the section's conclusions: A11 is decided one way on one draw and the other on "
                           "the other, or the draws rank the cast differently, τ pooled below 0.5",
                    "no": "changes none of the section's conclusions: A11's pooled verdict is the same on both draws "
                          "and their real-token rankings agree, τ pooled above 0.5"}.get(
              q6.verdict, "is not shown either to change the section's conclusions or to leave them as they are"))
