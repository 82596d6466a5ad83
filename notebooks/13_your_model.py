# %% [markdown]
# # 13 · The protocol on your own model: a dense Hugging Face control
#
# Paper B offers the Depth Control Protocol to anyone who wants to know whether *their* model uses its depth, and
# checks it on dense, non-weight-shared LMs (24-28 layers): a dense model has no loop to iterate, so whatever share
# of a truncation gap a readout probe removes there is what truncating *any* stack costs its readout — the negative
# control for the tied models' shares. Section 10's dense control is a 5-layer, 0.4M-parameter `TiedLM`. This
# section runs the protocol the way a user would on a checkpoint of their own: a **Hugging Face `LlamaForCausalLM`**
# (RMSNorm, rotary positions, SwiGLU), trained here and read through `tiedlm_lib.hub.adapter.HFDepthModel`, which
# rearranges the model's own layers inside its own forward, so nothing of the model is re-implemented.
#
# **The model.** The small size's width and heads, an MLP of 8/3·d (so a layer has the 12·d² parameters of the tied
# models' blocks), an untied head, and **12 layers at the cpu scale** (4 at smoke): deep enough that paper B's grid
# k = round(f·L), f ∈ {0.25, 0.5, 0.75, 0.86, 0.93, 1}, gives six distinct depths, and close to the 16 block
# applications of the tied core, so that neither model is much the deeper. It trains with v3's recipe (data, steps,
# batch, learning rate, seed) and the library's training step (`tiedlm_lib.hub.dense`). The schedules are prefix and
# suffix. Paper B's negative control also ran `repeat` on its dense models; it is refused here, for the reason paper B
# itself gives (the linchpin needs weight sharing: repeating a dense layer makes another model). Calibration documents
# are disjoint from the evaluation documents, and every share is pooled over training seeds, the seed the unit
# (`protocol.pooled_shares`).

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | paper
device = None  # cpu | cuda; default: TIEDLM_DEVICE, else CUDA when available, else the CPU
seeds = None  # training seeds; default: the scale's (smoke: [0], cpu: [0, 1, 2, 3, 4])
figures_dir = None  # default: figures/<scale>/
paper_dir = None  # default: paper/<scale>/
n_boot = 2000  # paired document-bootstrap replicates
n_cal = 100  # calibration documents (held-out, disjoint from the evaluation documents)
n_eval = 300  # evaluation documents
probes = ["head/temperature", "head/diagonal", "loop/tuned"]  # paper B's two, and section 10's most capable
probe_iters = 40  # L-BFGS iterations per probe fit (section 10's count; the smoke scale uses at most 10, in CI)

# %%
import dataclasses
from pathlib import Path

import pandas as pd

from tiedlm_lib import get_run
from tiedlm_lib.evaluation.analysis import cached_corpus
from tiedlm_lib.hub import dense, protocol
from tiedlm_lib.model.schedules import budget
from tiedlm_lib.paper import verdicts
from tiedlm_lib.paper.report import Report, shown_path
from tiedlm_lib.runs import experiment
from tiedlm_lib.stats import inference
from tiedlm_lib.stats.bootstrap import Estimate
from tiedlm_lib.store.memo import code_fingerprint, memoised

rep = Report("13_your_model", scale, figures_dir, paper_dir, seeds=seeds)
seeds = rep.seeds
NAMED = ("head/temperature", "head/diagonal", "loop/tuned")  # the probes this section's prose reads by name
if not set(NAMED) <= set(probes):
    raise ValueError(f"probes must include {list(NAMED)}, which this section's prose reads; got {probes!r} (the "
                     "command `python -m tiedlm_lib dcp --probes` takes any list)")
if scale == "smoke":
    probe_iters = min(probe_iters, 10)
corpus = cached_corpus(experiment("v3", scale).data)
docs = corpus.val
n_cal_used = min(n_cal, len(docs) // 3)
n_eval_used = min(n_eval, len(docs) - n_cal_used)
print(f"scale {scale}: seeds {seeds}, {len(docs)} held-out documents ({n_cal_used} calibration, {n_eval_used} "
      f"evaluation), probes {probes}, {probe_iters} L-BFGS iterations a fit")

# %% [markdown]
# ## The runs
#
# One dense model per training seed, cached under `runs/<scale>/dense-llama-s<seed>-<fingerprint>/` as a
# `save_pretrained` folder — exactly what `python -m tiedlm_lib dcp --model` reads — beside v3, the small tied model
# trained with the same recipe.

# %%
runs = {s: dense.get_dense(scale, s, device=device) for s in seeds}
tied = {s: get_run("v3", scale, s, device=device) for s in seeds}
run_rows = [{"seed": s, "layers": r["layers"], "params": r["params"], "train s": round(r["seconds"]),
             "final train loss": r["final_loss"], "v3 params": tied[s].result["params"],
             "v3 final train loss": tied[s].result["final_loss"]} for s, (_, r) in runs.items()]
rep.table(pd.DataFrame(run_rows), "runs")

# %% [markdown]
# ## Conditions and shares
#
# Every (schedule, k) on the evaluation documents, raw and after each probe fitted for that condition on the
# calibration documents; then each probe's share of the gap prefix(k) − prefix(L), with its paired
# document-bootstrap interval (the probes held fixed), per seed.

# %%
v3 = experiment("v3", scale)


def protocol_result(seed, model):
    """``protocol.run`` on one dense checkpoint, kept beside its run (``tiedlm_lib.store.memo``) as section 10 keeps
    its probe shares: keyed by every argument, the documents, the checkpoint's weights and the code that computes
    it (the library's deciding modules and the protocol's own), so a re-execution reads it back. The kept latencies
    are those measured when it was computed."""
    kw = {"n_cal": n_cal_used, "n_eval": n_eval_used, "probes": list(probes), "seq_len": v3.data.seq_len,
          "batch_size": v3.train.batch_size, "n_boot": n_boot, "seed": 0, "iters": probe_iters}
    key = {**kw, "documents": dataclasses.asdict(v3.data), "held-out documents": len(docs),
           "protocol code": code_fingerprint(("tiedlm_lib.hub.protocol", "tiedlm_lib.hub.adapter"))}

    def compute():
        r = protocol.run(model, docs, progress=True, **kw)
        return {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
    return protocol.Result(**memoised(dense.run_dir(scale, seed), "protocol", key, compute))


results = {s: protocol_result(s, model) for s, (model, _) in runs.items()}
L = budget(runs[seeds[0]][0].layout)
cond = rep.table(pd.DataFrame([{"seed": s, **r} for s, res in results.items() for r in res.conditions]),
                 "conditions")
cond[cond.seed == seeds[0]][["schedule", "k", "raw NLL", *[f"{p} NLL" for p in probes], "tokens"]]

# %%
shares = rep.table(pd.DataFrame([{"seed": s, **r} for s, res in results.items() for r in res.shares]), "shares")
pooled = rep.table(pd.DataFrame(protocol.pooled_shares(list(results.values()))), "pooled_shares")
pooled

# %%
rep.chart(protocol.figure(results[seeds[0]].conditions, probes).properties(
    title=f"dense Llama, {L} layers (seed {seeds[0]}): NLL against k, raw and recalibrated"), "nll_by_k")

# %% [markdown]
# ## Beside section 10
#
# Section 10 measured the same shares on the tied models (the gap prefix(1) − prefix(N)) and on its 5-layer dense
# control. Both are read from its tables when it has been executed at this scale, each pooled over its seeds by the
# same rule. Gaps of different size are not the same question: the dense rows at near-full truncation (k/L ≈ 0.9,
# paper B's 26/28) are paper B's comparison; the row whose raw gap is nearest the tied gap is the matched one. The
# intervals are not built alike: section 10's include refits of each probe on resampled calibration documents
# (`lens.share_by_probe`), this section's hold the probes fixed (evaluation resampling only, as `dcp.decompose`
# does), so they are narrower by the fit's own uncertainty.

# %%
tables = rep.paper / "tables"


def pooled_rows(df, keys, label):
    out = []
    for key, g in df.groupby(keys):
        key = key if isinstance(key, tuple) else (key,)
        p = inference.pool([Estimate(r["share"], r["share lo"], r["share hi"]) for _, r in g.iterrows()])
        out.append({"model": label(dict(zip(keys, key))), "probe": dict(zip(keys, key))["probe"],
                    "raw gap": g["raw gap"].mean(), "share": p.point, "lo": p.lo, "hi": p.hi, "seeds": p.n})
    return out


beside = []
for _, r in pooled.iterrows():
    gap = shares[(shares.probe == r["probe"]) & (shares.k == r["k"])]["raw gap"].mean()
    beside.append({"model": f"dense Llama {L} layers, prefix({r['k']}) vs prefix({L})", "probe": r["probe"],
                   "raw gap": gap, "share": r["pooled share"], "lo": r.get("lo"), "hi": r.get("hi"),
                   "seeds": r["checkpoints"]})
s10 = tables / "10_depth_control_protocol-probe_shares.csv"
n10 = tables / "10_depth_control_protocol-negative_control.csv"
if s10.is_file() and n10.is_file():
    t10 = pd.read_csv(s10)
    d10 = pd.read_csv(n10)
    # section 10's tables must be of one execution on this section's seeds: a parallel run starts this section
    # after section 10 (paper.AFTER), and this check catches tables left by an earlier execution on other seeds
    seen = {"probe_shares": sorted(set(t10.seed)), "negative_control": sorted(set(d10.seed))}
    if any(v != sorted(seeds) for v in seen.values()):
        raise ValueError(f"section 10's tables in {shown_path(tables)} hold the seeds {seen}, not this section's "
                         f"{sorted(seeds)}: execute section 10 on these seeds first "
                         "(make nb NB=10_depth_control_protocol)")
    beside += pooled_rows(t10[t10.probe.isin(probes) & (t10.schedule == "prefix")], ["model", "probe"],
                          lambda k: f"section 10: {k['model']}, prefix(1) vs prefix(N)")
    beside += pooled_rows(d10[d10.probe.isin(probes)], ["dense gap", "probe"],
                          lambda k: f"section 10: 5-layer dense, {k['dense gap']}")
    print("section 10's rows read from", shown_path(tables))
else:
    print(f"section 10 has not been executed at scale {scale} (no {s10.name}): the dense Llama's rows alone")
beside_df = rep.table(pd.DataFrame(beside), "beside_section_10")
beside_df

# %% [markdown]
# ## Your own checkpoint
#
# The same protocol on any local `save_pretrained` folder of a GPT-2, GPT-NeoX/Pythia, Llama, Mistral/SmolLM or
# Qwen2/3 model (a hub id only with `--allow-network`), from the command line:
#
# ```bash
# python -m tiedlm_lib dcp --model ./my-model --data docs.jsonl --out dcp-my-model
# python -m tiedlm_lib dcp --model ./seed0,./seed1,./seed2 --data docs.jsonl --probes head/diagonal,loop/tuned
# ```
#
# or from Python, as this section does:
#
# ```python
# from tiedlm_lib import protocol
# model, tok = protocol.load_hf("./my-model")               # an HFDepthModel: dense, or looped if marked so
# docs = protocol.tokenize(tok, protocol.read_documents("docs.jsonl"), seq_len=256)
# res = protocol.run(model, docs, n_cal=100, n_eval=300)    # res.conditions, res.shares, res.decomposition
# ```
#
# A model whose stack repeats one layer module (weights shared by identity) is looped: it gets `repeat`, `frozen` and
# the decomposition too. On disk a loop's copies are tied again only for a checkpoint marked looped (`save_untied`
# and `export-hf` write the mark) or with `--retie`, so a dense model with equal layers stays dense. A folder written
# by `export-hf` is read as the looped model it is. A model of another family implements the four members of
# `schedules.DepthModel`.

# %%
the_dense_run_dir = Path(dense.run_dir(scale, seeds[0]))
print(f"this section's first checkpoint, readable by the command: {shown_path(the_dense_run_dir)}")
near = max(k for k in pooled.k if k < L)  # the nearest-full truncation of the grid
rep.fact("near_k", "pooled_shares", "k", {"probe": probes[1], "k": near}, agg="only")
shallow = min(pooled.k)
rep.fact("shallow_k", "pooled_shares", "k", {"probe": probes[1], "k": shallow}, agg="only")
# each truncation's raw gap prefix(k) - prefix(L), mean over seeds (the gap every share below is a share of)
rep.fact("near_gap", "shares", "raw gap", {"probe": probes[1], "k": near})
rep.fact("shallow_gap", "shares", "raw gap", {"probe": probes[1], "k": shallow})


def share_phrase(name, probe, k):
    """A probe's pooled share at prefix(k) as a template phrase, its verb chosen by the pooled interval: it removes
    part of the gap (interval above 0), widens it (below 0), or is not distinguishable from 0."""
    where = {"probe": probe, "k": k}
    row = pooled[(pooled.probe == probe) & (pooled.k == k)].iloc[0]
    if not pd.notna(row["pooled share"]):
        raise ValueError(f"the pooled share of {probe} at prefix({k}) is undefined: {row.get('note')}")
    for col, suffix in (("pooled share", ""), ("lo", "_lo"), ("hi", "_hi")):
        rep.fact(name + suffix, "pooled_shares", col, where, agg="only")
    return interval_phrase(name, row["lo"], row["hi"])


def interval_phrase(name, lo, hi):
    """The template phrase of the share fact ``name`` (with ``name_lo`` and ``name_hi``), its verb read from the
    interval [lo, hi]; a share within ±5% of 0 gets a decimal, so that no bound reads "-0%"."""
    f = ".1%" if max(abs(lo), abs(hi)) < 0.05 else ".0%"
    iv = f"{{{name}:{f}}} [{{{name}_lo:{f}}}, {{{name}_hi:{f}}}]"
    return (f"removes {iv} of the gap" if lo > 0 else f"widens the gap (a share of {iv})" if hi < 0 else
            f"removes {iv} of the gap, not distinguishable from 0")


pooled_words = f"pooled over {len(seeds)} seeds" if len(seeds) > 1 else "one seed"
rep.fact("train_s", "runs", "train s")
rep.fact("params", "runs", "params")
rep.prose("Results", "The {L}-layer dense Llama has {params:,.0f} parameters and trained for {train_s:.0f} s a seed "
          "(mean over {n} seed{s}). Truncating it to prefix({near_k:.0f}) of {L} layers leaves a gap of "
          "{near_gap:.3f} nats to the full model. A temperature fitted to each of the two models (truncated and full) "
          f"{share_phrase('near_temp', 'head/temperature', near)}. The per-feature affine map "
          f"{share_phrase('near_diag', 'head/diagonal', near)}, and the tuned lens at the last layer's output "
          f"{share_phrase('near_tuned', 'loop/tuned', near)} ({pooled_words}). A share above 100% means the "
          "recalibrated truncated model reads out better than the recalibrated full one. At "
          f"prefix({{shallow_k:.0f}}), a gap of {{shallow_gap:.3f}} nats, the affine map "
          f"{share_phrase('shallow_diag', 'head/diagonal', shallow)}.",
          L=str(L), n=str(len(seeds)), s="" if len(seeds) == 1 else "s")

# %%
TIED = "section 10: single small, prefix(1) vs prefix(N)"  # the single-depth small tied model, section 03's v3
DENSE_NEAR = f"dense Llama {L} layers, prefix({near}) vs prefix({L})"
if (beside_df.model == TIED).any():
    d = beside_df[(beside_df.model == DENSE_NEAR) & (beside_df.probe == "head/diagonal")].iloc[0]
    t = beside_df[(beside_df.model == TIED) & (beside_df.probe == "head/diagonal")].iloc[0]
    rep.fact("tied_diag", "beside_section_10", "share", {"model": TIED, "probe": "head/diagonal"}, agg="only")
    rep.fact("tied_gap", "beside_section_10", "raw gap", {"model": TIED, "probe": "head/diagonal"}, agg="only")
    rep.fact("dense_gap", "beside_section_10", "raw gap", {"model": DENSE_NEAR, "probe": "head/diagonal"},
             agg="only")
    for row in (d, t):
        if not all(pd.notna(row[c]) for c in ("share", "lo", "hi")):
            raise ValueError(f"the head/diagonal share of {row['model']!r} has no pooled interval: {dict(row)}")
    diff = verdicts.difference(Estimate(d["share"], d["lo"], d["hi"]), Estimate(t["share"], t["lo"], t["hi"]))
    relation = ("larger than" if diff.lo > 0 else "smaller than" if diff.hi < 0 else
                "not distinguishable from")
    # gaps of different size are not the same question: the dense truncation whose gap is nearest the tied gap
    own = beside_df[beside_df.model.str.startswith("dense Llama") & (beside_df.probe == "head/diagonal")]
    m = own.loc[(own["raw gap"] - t["raw gap"]).abs().idxmin()]
    rep.table(pd.DataFrame([{**m.to_dict(), "tied raw gap": t["raw gap"],
                             "k": int(m.model.split("prefix(")[1].split(")")[0])}]), "matched_gap")
    for name, col in (("m_k", "k"), ("m_gap", "raw gap"), ("m_share", "share"), ("m_share_lo", "lo"),
                      ("m_share_hi", "hi")):
        rep.fact(name, "matched_gap", col, agg="only")
    m_where = {"probe": "head/diagonal", "k": int(m.model.split("prefix(")[1].split(")")[0])}
    rep.fact("m_gap_min", "shares", "raw gap", m_where, agg="min")
    rep.fact("m_gap_max", "shares", "raw gap", m_where, agg="max")
    # a mean gap equal to the tied one at the printed precision is a coincidence a reader should not take for a copy
    same = f"{m['raw gap']:.3f}" == f"{t['raw gap']:.3f}"
    rep.prose("What this means", "Paper B's comparison at this scale: the affine probe's share of the dense model's "
              "near-full truncation gap ({near_diag:.0%} of {dense_gap:.3f} nats) is {relation} its share of the "
              "single-depth tied model's whole depth gap ({tied_diag:.0%} of {tied_gap:.3f} nats, section 10). The "
              "difference is {diff}: the two pooled intervals combined on a normal scale (this section's holds the "
              "probes fixed, section 10's includes refits).\n\nGaps of different size are not the same question. "
              "The dense truncation whose mean gap is nearest the tied gap is prefix({m_k:.0f}), at {m_gap:.3f} nats"
              + (", the same to three decimals by chance" if same else "")
              + (" (its seeds range from {m_gap_min:.3f} to {m_gap_max:.3f})" if len(seeds) > 1 else "")
              + ". Of that gap the affine probe "
              f"{interval_phrase('m_share', m['lo'], m['hi']).replace(' of the gap', '')}. These shares are "
              "descriptions with pooled intervals, not verdicts: no claim of either paper is judged on this "
              "model{extra}.", relation=relation,
              diff=f"{diff.point:+.2f} [{diff.lo:+.2f}, {diff.hi:+.2f}]",
              extra=" (the smoke scale's model is sized only to run in CI)" if scale == "smoke" else "")
else:
    rep.prose("What this means", "Section 10 has not been executed at this scale, so the dense model's shares stand "
              "alone here (the affine probe removes {near_diag:.0%} of its near-full truncation gap). They are "
              "descriptions with pooled intervals, not verdicts: no claim of either paper is judged on this "
              "model{extra}.", extra=" (the smoke scale's model is sized only to run in CI)" if scale == "smoke"
              else "")
