# %% [markdown]
# # 01 · The architecture (paper A, §2)
#
# Every model of paper A is a stack between a token embedding (plus a learned position table) and an untied output
# head. The stack mixes **standard layers** (pre-norm attention + SwiGLU, each sublayer scaled by its own raw scalar
# gate, initialised at 0.1) and **tied loops**: one block applied k times as z ← z + α·f(z), with a single scalar
# α = clamp(sigmoid(a), 0.01, 0.9) per loop. One string describes each stack:
#
# | version | layout | what it is |
# |---|---|---|
# | v3 / v5 | `S S A*30 S S` | the sandwich: 2 standard layers, one loop of 30, 2 standard layers (7.27M / 23.05M) |
# | v9 | `S*5` | the iso-parameter vanilla model: five distinct standard layers |
# | v12 | `S A*15 S B*15 S` | two loops with a bridge layer |
# | v13 | `S A*10 B*10 C*10 S` | three loops |
# | v14 | `S A*8 B*8 C*7 D*7` | four loops, no closing standard layer |
#
# This section builds each one, checks its parameter count against the original code's, shows where the parameters
# sit, the α parametrisation, and the two forms of the tied block.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | paper (the trained-model part uses this scale's cached runs)
device = None  # cpu | cuda; default: TIEDLM_DEVICE, else CUDA when available, else the CPU
seeds = None  # training seeds; default: the scale's (smoke: [0], cpu: [0, 1, 2, 3, 4])
figures_dir = None  # default: figures/<scale>/
paper_dir = None  # default: paper/<scale>/

# %%
import math

import altair as alt
import pandas as pd
import torch

from tiedlm_lib import ModelConfig, TiedLM, get_run, paper_config
from tiedlm_lib.evaluation.analysis import heldout, state_norms
from tiedlm_lib.paper.report import Report, stroke_dash
from tiedlm_lib.paper.reported import reported_value
from tiedlm_lib.runs import get_scale

rep = Report("01_architecture", scale, figures_dir, paper_dir, seeds=seeds)
seeds = rep.seeds
S = get_scale(scale)

# %% [markdown]
# ## Every paper model, built from its layout
#
# At V = 23005 the counts must equal the original code's exactly (PROTOCOL §3.4). The 23M models differ from each
# other by a handful of parameters (the `params` column): a tied block has one scalar α where a standard layer has two
# gates, which is what "iso-parameter" means in the paper.

# %%
VERSIONS = ["v3", "v5", "v9", "v12", "v13", "v14"]
models = {v: TiedLM(paper_config(v)) for v in VERSIONS}
rows = []
for v, m in models.items():
    b = m.param_breakdown()
    total = m.num_params()
    rows.append({"version": v, "layout": m.config.layout, "d_model": m.config.d_model, "params": total,
                 "reported params": int(reported_value(f"params.{v}")),
                 "equal": total == int(reported_value(f"params.{v}")),
                 "embeddings + head share": (b["embedding"] + b["positions"] + b["head"]) / total,
                 "blocks share": (b["standard blocks"] + b["tied blocks"]) / total})
params = rep.table(pd.DataFrame(rows), "parameters")
params

# %%
assert params["equal"].all(), "a paper model's parameter count differs from the original code's"
breakdown = pd.DataFrame([{"version": v, "part": part, "params": n} for v, m in models.items()
                          for part, n in m.param_breakdown().items()])
rep.table(breakdown, "parameter_breakdown")
chart = alt.Chart(breakdown).mark_bar().encode(
    y=alt.Y("version:N", sort=VERSIONS), x=alt.X("params:Q", stack="normalize", title="share of parameters"),
    color=alt.Color("part:N", sort=["embedding", "positions", "head", "outer LayerNorms", "standard blocks",
                                    "tied blocks"])).properties(width=420, height=160)
rep.chart(chart, "parameter_breakdown")

# %% [markdown]
# About two thirds of every 23M model sits in the token embedding, the position table and the untied head (14.83M of
# 23.05M); the five block-equivalents hold 8.22M. A claim that "tied beats vanilla at equal parameters" therefore
# compares models whose *blocks* are 36% of the budget.
#
# ## The stacks, drawn
#
# Each box is one application, bottom to top; a loop's boxes share one set of weights.

# %%
cells = []
for v, m in models.items():
    x = 0
    for seg in m.segments:
        for _ in range(seg.iters):
            cells.append({"version": v, "position": x, "block": seg.name if seg.kind == "loop" else "standard",
                          "kind": seg.kind})
            x += 1
stack = alt.Chart(pd.DataFrame(cells)).mark_rect(stroke="white").encode(
    x=alt.X("position:O", title="application (bottom → top)", axis=alt.Axis(labels=False, ticks=False)),
    y=alt.Y("version:N", sort=VERSIONS), color=alt.Color("block:N", title="block")).properties(width=520, height=160)
rep.chart(stack, "stacks")

# %% [markdown]
# ## The α parametrisation
#
# α = clamp(sigmoid(a), 0.01, 0.9) with the raw parameter a initialised at logit(0.1) = ln(0.1/0.9) ≈ −2.197, so α
# starts at exactly 0.1. Initialising the raw parameter at 0.1 instead (an easy slip, and the paper's v1 did
# initialise it at 0.5) would start α at sigmoid(0.1) ≈ 0.525, five times larger. The clamp also stops the gradient
# outside [0.01, 0.9].

# %%
a = torch.linspace(-6, 6, 241)
alpha = torch.sigmoid(a).clamp(0.01, 0.9)
curve = pd.DataFrame({"a": a.numpy(), "alpha": alpha.numpy()})
marks = pd.DataFrame({"a": [math.log(0.1 / 0.9), 0.1], "alpha": [0.1, 1 / (1 + math.exp(-0.1))],
                      "label": ["a = logit(0.1): α = 0.1 (the code)", "a = 0.1: α = 0.525 (the slip)"]})
chart = (alt.Chart(curve).mark_line().encode(x=alt.X("a:Q", title="raw parameter a"),
                                             y=alt.Y("alpha:Q", title="α"))
         + alt.Chart(marks).mark_point(size=80, filled=True).encode(x="a:Q", y="alpha:Q",
                                                                    color=alt.Color("label:N", title=None))
         ).properties(width=360, height=220)
rep.chart(chart, "alpha")

# %%
fresh = TiedLM(ModelConfig(vocab_size=S.vocab_size, d_model=S.small.d_model, n_heads=S.small.n_heads,
                           layout=f"S S A*{S.K} S S", max_seq_len=S.seq_len))
print(f"alpha at initialisation: {fresh.alphas()['A']:.6f}; raw parameter {fresh.blocks['A'].alpha_logit.item():.4f}")

# %% [markdown]
# ## Two forms of the tied block
#
# The original code's block returns f(z) = LN2(u) + MLP(LN2(u)) with u = z + attn(LN1(z)) — the *normalised state*
# plus the MLP output, not a residual update. Each step z ← z + α·f(z) therefore adds α·LN2(u), a vector of norm about
# α·√d that never vanishes. The corrected form f(z) = a + MLP(LN2(z + a)) is a plain pre-norm residual update with the
# same parameters. Below: the state norm ‖z_i‖/‖z_0‖ per iteration, on held-out documents, at initialisation and after
# training (the small single-depth runs of section 03, from the runs cache).

# %%
norm_rows = []
for form in ("paper", "residual"):
    for seed in seeds:
        run = get_run("v3", scale, seed, overrides={"model.block": form}, device=device)
        torch.manual_seed(seed)
        init = TiedLM(run.config.model)
        batches = list(heldout(run.config, n_docs=4 * S.batch_size)())
        for when, model in (("initialisation", init), ("trained", run.model)):
            for i, r in enumerate(state_norms(model, batches, 2 * S.K)["A"]["ratio"]):
                norm_rows.append({"block form": form, "seed": seed, "when": when, "iteration": i, "norm ratio": r})
norms = rep.table(pd.DataFrame(norm_rows), "state_norms")
chart = alt.Chart(norms).mark_line().encode(
    x="iteration:Q", y=alt.Y("norm ratio:Q", title="‖z_i‖ / ‖z_0‖"), color="block form:N",
    strokeDash=stroke_dash("when", ["trained", "initialisation"]), detail="seed:N").properties(width=360, height=220)
rep.chart(chart, "block_forms")

# %%
norms[norms.iteration == S.K].pivot_table(index=["block form", "when"], columns="seed", values="norm ratio").round(3)

# %% [markdown]
# ## Claims
#
# No claim of docs/claims.md belongs to §2; the parameter counts above are checked by an assertion (and by the test
# suite). The block form's consequences are judged where they matter: depth scaling (section 03, Q3) and the fixed
# point that cannot exist (section 09, A18).

# %% [markdown]
# ## Results and what they mean
#
# Every number is read from this section's tables (`rep.fact`).

# %%
rep.fact("n_models", "parameters", "params", agg="count")
rep.fact("embed_share", "parameters", "embeddings + head share")
rep.fact("embed_min", "parameters", "embeddings + head share", agg="min")
rep.fact("embed_max", "parameters", "embeddings + head share", agg="max")
norm_paper = rep.fact("norm_paper", "state_norms", "norm ratio", {"block form": "paper", "when": "trained",
                                                                  "iteration": S.K})
norm_res = rep.fact("norm_res", "state_norms", "norm ratio", {"block form": "residual", "when": "trained",
                                                              "iteration": S.K})
rep.prose("Results", "All {n_models} of the paper's models have exactly the parameter counts of the original code; "
          "the token embedding, the position table and the head hold {embed_share:.0%} of a model's parameters on "
          "average (from {embed_min:.0%} to {embed_max:.0%}). After training, on this scale's small "
          "model (v3), the state entering the layers after the loop has {norm_paper:.2f} times its input's norm at "
          "k = {K} in the paper's block form and {norm_res:.2f} times in the residual form (mean over {n} seed{s}).",
          K=str(S.K), n=str(len(seeds)), s="s" if len(seeds) > 1 else "")

# %%
rep.prose("What this means", "The paper's block re-adds a normalised copy of the state every step. {consequence}",
          consequence=(f"Its state norm grows with the loop depth "
                       f"{'faster' if norm_paper > norm_res else 'no faster'} than the residual form's: what the "
                       "layers after the loop read changes in scale as well as in content with k, which sections 03 "
                       "(depth scaling) and 10 (readout probes) take into account." if norm_paper > 1 else
                       "Even so its trained state norm does not grow with the loop depth here, so what the layers "
                       "after the loop read changes in content, not in scale, with k."))
