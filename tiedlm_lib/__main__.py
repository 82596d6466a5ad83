"""Command line: ``python -m tiedlm_lib {list,info,train,eval} ...``.

    python -m tiedlm_lib list
    python -m tiedlm_lib info v5 --scale paper
    python -m tiedlm_lib train v3 --scale cpu [--seed 0] [--set train.steps=200 --set model.block=residual]
    python -m tiedlm_lib eval v3 --scale cpu [--depths 1,2,4,8,16,32] [--taus 0,0.2,0.4,0.6,0.8,0.95]
    python -m tiedlm_lib train-all --scale cpu [--seeds 0,1,2] [--extended 5,6] [--only v3,v4] [--reverse] [--status]
    torchrun --nproc_per_node=N -m tiedlm_lib train-all --scale paper      # every rank trains each run together
    python -m tiedlm_lib dcp --model DIR[,DIR...] --data FILE.jsonl [--probes head/diagonal,loop/tuned] [--out DIR]
"""

from __future__ import annotations

import argparse
import ast
import gc
import json
import os
import sys
import time

from tiedlm_lib.data import eval_batches, prepare_corpus
from tiedlm_lib.evaluation.analysis import depth_grid
from tiedlm_lib.evaluation.nll import depth_stats, evaluate_nll, maxprob_exit
from tiedlm_lib.model.checkpoint import CheckpointError
from tiedlm_lib.model.tied import TiedLM
from tiedlm_lib.runs import EXPERIMENTS, SCALES, experiment, get_run, is_complete, paper_config, run_dir
from tiedlm_lib.runs.cache import cache_status
from tiedlm_lib.runs.registry import notebook_runs, section_runs
from tiedlm_lib.store.atomic import atomic_write_text
from tiedlm_lib.training.distributed import rank_world
from tiedlm_lib.training.loop import TrainingInterrupted


def _parse_set(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key:
            raise ValueError(f"--set expects KEY=VALUE such as train.steps=200, got {item!r}")
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw  # a bare string such as model.block=residual
    return out


def _ints(text: str, what: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not vals:
        raise ValueError(f"{what} is empty")
    return vals


def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{what} must be comma-separated numbers, got {text!r}") from None


def _table(rows: list[dict], cols: list[str]) -> str:
    def fmt(v):
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    cells = [[fmt(r[c]) for c in cols] for r in rows]
    w = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w[i]) for i, c in enumerate(cols))]
    lines += ["  ".join(v.rjust(w[i]) for i, v in enumerate(row)) for row in cells]
    return "\n".join(lines)


def cmd_list(args) -> None:
    print("experiments:")
    for name, e in EXPERIMENTS.items():
        print(f"  {name:5s} {e.description}  [{e.reference}]")
    print("scales:")
    for s in SCALES.values():
        print(f"  {s.name:6s} small d{s.small.d_model}/{s.small.n_heads}h, large d{s.large.d_model}/{s.large.n_heads}h,"
              f" K={s.K}, seq {s.seq_len}, vocab {s.vocab_size}, batch {s.batch_size},"
              f" {s.short_steps}/{s.long_steps} steps, corpus {s.corpus}")


def cmd_info(args) -> None:
    if args.scale == "paper":
        cfg = paper_config(args.name)
        print(json.dumps({"model": cfg.__dict__}, indent=1))
    else:
        run = experiment(args.name, args.scale, args.seed, _parse_set(args.set))
        cfg = run.model
        print(json.dumps(run.to_dict(), indent=1))
    print(f"parameters: {TiedLM(cfg).num_params():,}")


def cmd_train(args) -> None:
    run = experiment(args.name, args.scale, args.seed, _parse_set(args.set))
    t = time.perf_counter()
    r = get_run(run, root=args.runs, progress=True, device=args.device)
    res = r.result
    if rank_world()[0] == 0:
        print(f"{run.name}/{run.scale}/seed {run.train.seed}: {res['steps']} steps, "
              f"final loss {res['final_loss']:.4f}, {res['seconds']:.0f} s training "
              f"({res['seconds'] / res['steps']:.3f} s/step), {res['params']:,} params, alpha {res['alpha']}; "
              f"{'trained now' if r.fresh else 'from the cache'}: {r.dir} (call took {time.perf_counter() - t:.0f} s)")


def cmd_train_all(args) -> None:
    """Train every run the sections need (``registry.notebook_runs``) into the runs cache, skipping finished ones;
    an interrupted run resumes from its checkpoint. Two processes may share the work (one with ``--reverse``): a run
    that one is training, the other waits for instead of training twice."""
    seeds = _ints(args.seeds, "--seeds") if args.seeds else None
    extended = None if not args.extended else [] if args.extended == "none" else _ints(args.extended, "--extended")
    todo = notebook_runs(args.scale, seeds, extended)
    if args.sections:
        todo = _of_sections(todo, section_runs(args.scale, seeds, extended), args.sections)
    if args.status:
        by_section = section_runs(args.scale, seeds, extended)
        if args.sections:
            by_section = {k: v for k, v in by_section.items() if k in {w.strip()[:2] for w in args.sections.split(",")}}
        return _print_status(todo, args, by_section)
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {c.name for c in todo}
        if unknown:
            raise ValueError(f"--only names {sorted(unknown)} are not runs of the sections; expected among "
                             f"{sorted({c.name for c in todo})}")
        todo = [c for c in todo if c.name in names]
    if args.reverse:
        todo = todo[::-1]
    # a continuation (SFT, paper B's intervention) starts from its base run's weights: whatever the order, the base
    # is trained first (a --reverse worker meets continuations before their bases)
    bases = {f"{c.scale}/{c.cache_name()}/model.safetensors": c for c in notebook_runs(args.scale, seeds, extended)}
    rank = int(os.environ.get("RANK", "0"))  # torchrun sets it before any process group exists
    done = sum(is_complete(run_dir(c, args.runs)) for c in todo)
    if rank == 0:
        print(f"{len(todo)} runs at scale {args.scale}, {done} already in the cache", flush=True)
    start = time.perf_counter()
    for i, cfg in enumerate(todo, 1):
        t = time.perf_counter()
        if cfg.train.init_from in bases:
            get_run(bases[cfg.train.init_from], root=args.runs, progress=False, device=args.device)
        r = get_run(cfg, root=args.runs, progress=False, device=args.device)
        if rank == 0:
            what = "trained now" if r.fresh else "from the cache"
            print(f"[{i}/{len(todo)}] {cfg.name} seed {cfg.train.seed} ({cfg.train.steps} steps): {what}, "
                  f"{time.perf_counter() - t:.0f} s (total {time.perf_counter() - start:.0f} s)", flush=True)


def _of_sections(todo, by_section: dict, spec: str) -> list:
    """The runs of ``todo`` that the sections named in ``spec`` ("06,07" or notebook names) train, in its order."""
    wanted = {w.strip()[:2] for w in spec.split(",") if w.strip()}
    unknown = sorted(wanted - set(by_section))
    if unknown or not wanted:
        raise ValueError(f"--sections {spec!r}: {unknown or 'none given'} train no runs; expected section numbers "
                         f"among {sorted(by_section)} (or notebook names such as 06_iso_param_2x2)")
    names = {f"{c.train.seed}/{c.cache_name()}" for w in wanted for c in by_section[w]}
    return [c for c in todo if f"{c.train.seed}/{c.cache_name()}" in names]


def _print_status(todo, args, by_section: dict | None = None) -> None:
    """``train-all --status``: what the cache holds of the sections' runs and what is left, nothing trained; then
    which sections have every run done (executable now without training) and what the others wait for."""
    rows = cache_status(todo, args.runs)
    print(_table([{**r, "seconds": "" if r["seconds"] is None else f"{r['seconds']:.0f}",
                   "left (est. s)": "" if r.get("estimate s") is None else f"{r['estimate s']:.0f}"} for r in rows],
                 ["run", "seed", "steps", "status", "done steps", "seconds", "left (est. s)", "dir"]))
    done = [r for r in rows if r["status"] == "done"]
    left = [r for r in rows if r["status"] != "done"]
    unknown = sum(r.get("estimate s") is None for r in left)
    print(f"{len(done)} of {len(rows)} runs done ({sum(r['seconds'] for r in done):.0f} s of training); "
          f"{len(left)} left, about {sum(r.get('estimate s') or 0 for r in left):.0f} single-process seconds"
          + (f" ({unknown} without an estimate: nothing comparable measured yet)" if unknown else "")
          + " (estimates: measured seconds per step of finished runs that cost the same per step)")
    if by_section:
        left_by_dir = {r["dir"]: r for r in rows if r["status"] != "done"}
        ready, waiting = [], []
        for sec, cfgs in by_section.items():
            missing = [left_by_dir[d] for d in {run_dir(c, args.runs).name for c in cfgs} if d in left_by_dir]
            if not missing:
                ready.append(sec)
            else:
                waiting.append(f"{sec} ({len(missing)} of {len(cfgs)} runs left, about "
                               f"{sum(r.get('estimate s') or 0 for r in missing):.0f} s)")
        print(f"sections with every run done: {', '.join(ready) or 'none'}; waiting: {', '.join(waiting) or 'none'}")


def cmd_eval(args) -> None:
    run = experiment(args.name, args.scale, args.seed, _parse_set(args.set))
    # every argument is checked before anything is trained or written
    wanted_depths = _ints(args.depths, "--depths") if args.depths else None
    if wanted_depths and min(wanted_depths) < 1:
        raise ValueError(f"--depths must be positive integers, got {args.depths!r}")
    taus = _floats(args.taus, "--taus")
    if not taus or not all(0.0 <= t <= 1.0 for t in taus):
        raise ValueError(f"--taus must be comma-separated thresholds in [0, 1], got {args.taus!r}")
    if args.docs is not None and args.docs < 1:
        raise ValueError(f"--docs must be a positive integer, got {args.docs}")
    r = get_run(run, root=args.runs, progress=True, train_if_missing=not args.no_train, device=args.device)
    corpus = prepare_corpus(run.data)
    model = r.model  # on get_run's device
    loops = run.model.trained_depth
    report: dict = {"run": run.name, "scale": run.scale, "seed": run.train.seed, "dir": str(r.dir)}

    def batches():
        return eval_batches(corpus.val, run.data.seq_len, run.train.batch_size, sampling=args.sampling,
                            n_docs=args.docs, seed=999)

    if not loops or len(set(loops.values())) > 1:
        # the trained model; with unequal loops (v14: 8/8/7/7) no depth k is it, so the sweep below is labelled as
        # what it is and exits (judged against full depth = the last k) are not run
        stats = evaluate_nll(model, batches(), device=args.device)
        report["nll"] = stats.row()
        print("the trained model" + (f" (loops {loops})" if loops else "") + ":")
        print(_table([stats.row()], ["nll_masked", "nll_with_pad", "pad_fraction", "real_tokens"]))
    if loops and len(set(loops.values())) > 1:
        depths = wanted_depths or depth_grid(max(loops.values()))
        ds = depth_stats(model, batches(), depths, args.device)
        report["k_sweep_every_loop"] = ds.table()
        print(f"every loop at k iterations (none of these is the trained model, whose loops differ: {loops}):")
        print(_table(report["k_sweep_every_loop"], ["k", "nll_masked", "nll_with_pad", "pad_fraction",
                                                    "maxprob_real"]))
        print("exits not run: they are judged against full depth, which no single k is for this layout")
    elif loops:
        K = model.full_depth
        depths = wanted_depths or depth_grid(K, [2 * K])
        ds = depth_stats(model, batches(), depths, args.device)
        report["k_sweep"] = ds.table()
        print(f"k sweep on {len(ds.doc_index)} validation documents ({args.sampling} sampling):")
        print(_table(report["k_sweep"], ["k", "nll_masked", "nll_with_pad", "pad_fraction", "maxprob_real"]))
        supervised = list(run.train.depths) if run.train.depths else None
        exit_stats = depth_stats(model, batches(), supervised or list(range(1, K + 1)), args.device)
        rows = []
        for fb in ("paper", "final"):
            rows += [res.__dict__ for res in maxprob_exit(exit_stats, taus, fb, supervised)]
        report["exit"] = rows
        kind = "staircase exit at the supervised depths" if supervised else "max-prob exit at every depth"
        print(f"post-hoc {kind} (paper fallback: never-locked positions keep the shallowest logits):")
        print(_table(rows, ["tau", "fallback", "nll_with_pad", "nll_masked", "avg_k_all", "avg_k_real",
                            "realised_k", "never_locked"]))
    atomic_write_text(r.dir / "eval.json", json.dumps(report, indent=1))
    print(f"written {r.dir / 'eval.json'}")


def _dcp_arguments(args) -> tuple[list[str], list[str], list[str] | None]:
    """The dcp command's arguments checked before any model loads: (folders, probes, schedules or None)."""
    from tiedlm_lib.depth.readout import ProbeSpec
    from tiedlm_lib.model.schedules import SCHEDULE_NAMES

    folders = [f.strip() for f in args.model.split(",") if f.strip()]
    if not folders:
        raise ValueError("--model is empty: give a save_pretrained folder, or several separated by commas")
    probes = [q.strip() for q in args.probes.split(",") if q.strip()]
    if not probes:
        raise ValueError("--probes is empty: name at least one, e.g. head/diagonal")
    for q in probes:
        ProbeSpec.parse(q)  # a bad name fails before any model loads
    for flag, v, least in (("--seq-len", args.seq_len, 2), ("--batch-size", args.batch_size, 1),
                           ("--n-boot", args.n_boot, 1), ("--n-cal", args.n_cal, 1)):
        if v is not None and v < least:
            raise ValueError(f"{flag} must be at least {least}" + (" (a target needs a token before it)"
                                                                  if flag == "--seq-len" else "") + f", got {v}")
    if args.retie and args.no_retie:
        raise ValueError("--retie and --no-retie contradict each other: give at most one")
    schedules = [s.strip() for s in args.schedules.split(",") if s.strip()] or None
    bad = [s for s in schedules or [] if s not in SCHEDULE_NAMES]
    if bad:
        raise ValueError(f"--schedules must be among {', '.join(SCHEDULE_NAMES)}, got {', '.join(bad)}")
    return folders, probes, schedules


def cmd_dcp(args) -> None:
    """The Depth Control Protocol on local Hugging Face checkpoints (``tiedlm_lib.hub.protocol``)."""
    import torch
    from tqdm.auto import tqdm

    from tiedlm_lib.hub import protocol

    folders, probes, schedules = _dcp_arguments(args)
    protocol.check_checkpoints(folders, args.allow_network)
    texts = protocol.read_documents(args.data, args.text_field, args.max_docs)
    if args.n_cal >= len(texts):
        raise ValueError(f"--n-cal {args.n_cal} leaves no evaluation documents: {args.data} has {len(texts)}")
    protocol.check_same_tokens(folders, texts, args.allow_network)
    device = args.device or os.environ.get("TIEDLM_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    ks = _ints(args.ks, "--ks") if args.ks else None
    results, tables = [], {}
    retie = True if args.retie else False if args.no_retie else None  # None: as the checkpoint's mark says
    seq_lens = set()
    for folder in tqdm(folders, desc="checkpoints", disable=len(folders) == 1):
        model, tok = protocol.load_hf(folder, args.allow_network, device, retie=retie, dtype=args.dtype)
        seq_len = args.seq_len or protocol.default_seq_len(model)
        seq_lens.add(seq_len)
        docs = protocol.tokenize(tok, texts, seq_len, model.token_offset)
        print(f"{folder}: {type(model.hf).__name__}, layout {model.layout!r}, {len(docs)} documents "
              f"({args.n_cal} calibration), {seq_len} tokens each, {args.dtype}", flush=True)
        res = protocol.run(model, docs, n_cal=args.n_cal, n_eval=args.n_eval, ks=ks, schedules=schedules,
                           probes=probes, seq_len=seq_len, batch_size=args.batch_size, n_boot=args.n_boot,
                           seed=args.seed, progress=True)
        results.append(res)
        model = tok = None  # one checkpoint in memory at a time: this one goes before the next loads
        gc.collect()
        for name in ("conditions", "shares", "decomposition"):
            tables.setdefault(name, []).extend({"checkpoint": folder, **r} for r in getattr(res, name))
    if len(results) > 1:
        tables["pooled_shares"] = protocol.pooled_shares(results)
    chart = protocol.figure([r for r in tables["conditions"] if r["checkpoint"] == folders[0]], probes)
    meta = {"models": folders, "data": str(args.data), "documents": len(texts), "n_cal": args.n_cal,
            "n_eval": args.n_eval, "seq_len": sorted(seq_lens), "dtype": args.dtype, "probes": probes,
            "n_boot": args.n_boot,
            "seed": args.seed, "device": device,
            "special tokens": "each tokenizer's defaults (paper B's rule: BOS when the tokenizer adds one)"}
    paths = protocol.write(args.out, tables, chart, meta)
    shares = tables["pooled_shares"] if len(results) > 1 else tables["shares"]
    print(_table(shares, [c for c in ("checkpoint", "probe", "k", "N", "raw gap", "share", "share lo", "share hi",
                                      "checkpoints", "pooled share", "lo", "hi") if c in shares[0]]))
    print(f"written {len(paths)} files under {args.out}")


def cmd_export_hf(args) -> None:
    """A shipped or cached run as a transformers folder (``tiedlm_lib.hub.export``)."""
    from tiedlm_lib.hub.export import export_run

    out = export_run(args.run, args.seed, args.scale, args.out, root=args.runs)
    print(f"exported {args.run} (seed {args.seed}, {args.scale}) to {out}: load it with\n"
          f"  AutoModelForCausalLM.from_pretrained({str(out)!r}, trust_remote_code=True)\n"
          "and run a depth with model(input_ids, depth=k) or model.generate(input_ids, depth=k)")


def _add_export_parser(sub) -> None:
    sp = sub.add_parser("export-hf", help="a trained run as a transformers folder (AutoModelForCausalLM with "
                        "trust_remote_code; depth=k at call time)")
    sp.add_argument("--run", required=True, help="experiment name, e.g. v3 (see 'list')")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--scale", default="cpu", help="smoke | cpu | paper (default cpu)")
    sp.add_argument("--out", required=True, help="a new (or empty) folder to write")
    sp.add_argument("--runs", default=None, help="runs cache directory (default ./runs or $TIEDLM_RUNS)")
    sp.set_defaults(fn=cmd_export_hf)


def _load_user_model(args):
    """(model, tokenizer, device) of the --model folder for the exits and speculate commands."""
    import torch

    from tiedlm_lib.hub import protocol

    device = args.device or os.environ.get("TIEDLM_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tok = protocol.load_hf(args.model, args.allow_network, device, retie=True if args.retie else None,
                                  dtype=args.dtype)
    return model, tok, device


def cmd_exits(args) -> None:
    """Learn-then-Test exit thresholds on a user's model, checked on held-out documents (``hub.user_exits``)."""
    from tiedlm_lib.hub import protocol, user_exits

    eps = [float(e) for e in args.eps.split(",") if e.strip()]
    criteria = [c.strip() for c in args.criteria.split(",") if c.strip()]
    texts = protocol.read_documents(args.data, args.text_field, args.max_docs)
    model, tok, device = _load_user_model(args)
    seq_len = args.seq_len or protocol.default_seq_len(model)
    docs = protocol.tokenize(tok, texts, seq_len, model.token_offset)
    n_cal = args.n_cal if args.n_cal is not None else len(docs) // 2
    print(f"{args.model}: layout {model.layout!r}, {len(docs)} documents ({n_cal} calibration), {seq_len} tokens "
          f"each", flush=True)
    rows = user_exits.certify(model, docs, eps=eps, delta=args.delta, n_cal=n_cal, seq_len=seq_len,
                              criteria=criteria, batch_size=args.batch_size, seed=args.seed, progress=True)
    meta = {"model": args.model, "data": str(args.data), "documents": len(docs), "n_cal": n_cal, "seq_len": seq_len,
            "eps": eps, "delta": args.delta, "criteria": criteria, "seed": args.seed, "device": device,
            "guarantee": "with probability >= 1 - delta over the calibration documents, the long-run share of tokens "
                         "whose exit token differs from the full model's is at most eps (Learn-then-Test, Hoeffding, "
                         "documents as the unit); the held-out rate is a check, not the guarantee"}
    paths = protocol.write(args.out, {"exits": rows}, None, meta)
    print(_table(rows, ["rule", "eps", "certified", "tau", "held-out disagreement", "disagreement se", "exceeds eps",
                        "avg depth", "depth saved", "NLL cost"]))
    print(f"written {len(paths)} files under {args.out}")


def _add_user_model_arguments(sp) -> None:
    sp.add_argument("--model", required=True, help="a save_pretrained folder (a looped model, an export-hf folder)")
    sp.add_argument("--device", default=None, help="cpu or cuda (default: TIEDLM_DEVICE, else cuda when available)")
    sp.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "auto"],
                    help="the weights' dtype in memory (default float32)")
    sp.add_argument("--retie", action="store_true", help="tie equal consecutive layers into a loop even where the "
                    "checkpoint is not marked looped")
    sp.add_argument("--allow-network", action="store_true", help="let --model name a hub id (downloads it)")
    sp.add_argument("--out", required=True, help="folder for the tables and run.json")


def cmd_speculate(args) -> None:
    """Exact self-speculative decoding on a user's looped model (``hub.user_speculate``)."""
    from tiedlm_lib.hub import protocol, user_speculate

    texts = user_speculate.read_prompts(args.prompts, args.text_field)
    model, tok, device = _load_user_model(args)
    user_speculate.check_draft_depth(model, args.draft_depth)  # before any decoding
    prompts = [[t + model.token_offset for t in tok(x)["input_ids"]] for x in texts]
    empty = [i for i, p in enumerate(prompts) if not p]
    if empty:
        raise ValueError(f"prompt {empty[0]} of {args.prompts} has no token: every prompt needs at least one")
    print(f"{args.model}: layout {model.layout!r}, {len(prompts)} prompts, {args.max_new} new tokens each, draft "
          f"depth {args.draft_depth}, draft length {args.draft_len}", flush=True)
    rows = user_speculate.run(model, prompts, args.max_new, args.draft_depth, args.draft_len, progress=True)
    summ = user_speculate.summary(rows)
    meta = {"model": args.model, "prompts": str(args.prompts), "max_new": args.max_new,
            "draft_depth": args.draft_depth, "draft_len": args.draft_len, "device": device, **summ,
            "timing": "batch size 1, one after the other on this machine; run nothing else meanwhile"}
    paths = protocol.write(args.out, {"speculate": rows, "summary": [summ]}, None, meta)
    print(_table([summ], list(summ)))
    print(f"written {len(paths)} files under {args.out}")


def _add_speculate_parser(sub) -> None:
    sp = sub.add_parser("speculate", help="exact self-speculative decoding on your looped model: tokens/s against "
                        "plain greedy, the equality check, the acceptance rate")
    _add_user_model_arguments(sp)
    sp.add_argument("--prompts", required=True, help="a text file (one prompt a line) or a JSONL file")
    sp.add_argument("--text-field", default="text", help="the JSONL field holding each prompt (default text)")
    sp.add_argument("--draft-depth", type=int, required=True, help="iterations of the first loop the draft runs "
                    "(an export-hf folder), or core applications (a Hugging Face looped model)")
    sp.add_argument("--draft-len", type=int, default=2, help="tokens drafted per round (default 2)")
    sp.add_argument("--max-new", type=int, default=32, help="new tokens per prompt (default 32)")
    sp.set_defaults(fn=cmd_speculate)


def _add_exits_parser(sub) -> None:
    sp = sub.add_parser("exits", help="exit thresholds with a guarantee (Learn-then-Test) on your looped model")
    _add_user_model_arguments(sp)
    sp.add_argument("--data", required=True, help="a JSONL file, one object per line with a text field")
    sp.add_argument("--text-field", default="text")
    sp.add_argument("--max-docs", type=int, default=None, help="read at most this many documents")
    sp.add_argument("--eps", default="0.05", help="comma-separated disagreement rates to certify (default 0.05)")
    sp.add_argument("--delta", type=float, default=0.1, help="the certificate's failure probability (default 0.1)")
    sp.add_argument("--criteria", default="maxprob", help="exit rules: maxprob (paper A's), stability (default "
                    "maxprob)")
    sp.add_argument("--n-cal", type=int, default=None, help="calibration documents (default half; the rest held out)")
    sp.add_argument("--seq-len", type=int, default=None, help="tokens per document (default 256 or the context)")
    sp.add_argument("--batch-size", type=int, default=8)
    sp.add_argument("--seed", type=int, default=0, help="the calibration/held-out split")
    sp.set_defaults(fn=cmd_exits)


def _add_dcp_parser(sub) -> None:
    sp = sub.add_parser("dcp", help="the Depth Control Protocol on your own Hugging Face checkpoint(s)")
    sp.add_argument("--model", required=True, help="a save_pretrained folder, or several separated by commas "
                    "(seeds of one model: their shares are pooled, the checkpoint the unit; checkpoints along one "
                    "run are not independent, so their pooled interval only describes them)")
    sp.add_argument("--data", required=True, help="a JSONL file, one object per line with a text field")
    sp.add_argument("--text-field", default="text", help="the field holding each document's text (default text)")
    sp.add_argument("--probes", default="head/temperature,head/diagonal",
                    help="readout probes 'placement/form' (placements head, loop; forms temperature, diagonal, "
                    "full, tuned)")
    sp.add_argument("--schedules", default="", help="default: prefix,suffix for a dense model; "
                    "prefix,repeat,suffix,frozen for a looped one")
    sp.add_argument("--ks", default="", help="core applications k (default: round(f*L) for f in 0.25 .. 1 for a "
                    "dense model, powers of two to N for a looped one)")
    sp.add_argument("--n-cal", type=int, default=100, help="calibration documents (default 100)")
    sp.add_argument("--n-eval", type=int, default=None, help="evaluation documents (default: all the others)")
    sp.add_argument("--max-docs", type=int, default=None, help="read at most this many documents")
    sp.add_argument("--seq-len", type=int, default=None, help="tokens per document (truncated; default 256, or the "
                    "model's context where that is shorter)")
    sp.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "auto"],
                    help="the weights' dtype in memory (default float32; auto: the checkpoint's own); the probes are "
                    "fitted in float32 either way")
    sp.add_argument("--batch-size", type=int, default=8)
    sp.add_argument("--n-boot", type=int, default=2000, help="bootstrap replicates (default 2000)")
    sp.add_argument("--seed", type=int, default=0, help="the calibration/evaluation split and the bootstrap")
    sp.add_argument("--out", default="dcp-out", help="folder for the tables, figure and run.json (default dcp-out)")
    sp.add_argument("--device", default=None, help="cpu or cuda (default: TIEDLM_DEVICE, else cuda when available)")
    sp.add_argument("--allow-network", action="store_true", help="let --model name a hub id (downloads it)")
    sp.add_argument("--retie", action="store_true", help="tie consecutive layers of exactly equal weights into one "
                    "shared module even where the checkpoint is not marked looped (save_untied and export-hf mark "
                    "theirs; by default an unmarked model stays as saved: a depth-upscaled dense model stays dense)")
    sp.add_argument("--no-retie", action="store_true", help="keep a checkpoint marked looped as separate layers")
    sp.set_defaults(fn=cmd_dcp)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tiedlm_lib", description="tied-depth LMs: train and evaluate the "
                                "paper's experiments at a scale (smoke, cpu, paper)")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="experiments and scales").set_defaults(fn=cmd_list)
    for name, fn, hlp in (("info", cmd_info, "show a run's config and parameter count"),
                          ("train", cmd_train, "train a run (cached: trained once per config and seed)"),
                          ("eval", cmd_eval, "k sweep and early exit on the validation split")):
        sp = sub.add_parser(name, help=hlp)
        sp.add_argument("name", help="experiment name, e.g. v3 (see 'list')")
        sp.add_argument("--scale", default="cpu", help="smoke | cpu | paper (default cpu)")
        sp.add_argument("--seed", type=int, default=0)
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config field, e.g. train.steps=200 or model.block=residual")
        sp.add_argument("--runs", default=None, help="runs cache directory (default ./runs or $TIEDLM_RUNS)")
        sp.add_argument("--device", default=None,
                        help="cpu or cuda (default: TIEDLM_DEVICE, else cuda when available, else cpu; under "
                        "torchrun: one GPU per process)")
        sp.set_defaults(fn=fn)
        if name == "eval":
            sp.add_argument("--depths", default="", help="comma-separated depths (default powers of 2, K and 2K)")
            sp.add_argument("--taus", default="0,0.2,0.4,0.6,0.8,0.95", help="exit thresholds")
            sp.add_argument("--sampling", default="all", choices=["all", "paper"],
                            help="all: every validation document once; paper: 20 batches drawn with seeds 999+i")
            sp.add_argument("--docs", type=int, default=None, help="evaluate the first N validation documents")
            sp.add_argument("--no-train", action="store_true", help="fail instead of training a missing run")
    sp = sub.add_parser("train-all", help="train every run the sections need into the runs cache")
    sp.add_argument("--scale", default="cpu", help="smoke | cpu | paper (default cpu)")
    sp.add_argument("--seeds", default="", help="comma-separated seeds (default: the scale's)")
    sp.add_argument("--extended", default="", help="comma-separated seeds at which only the cheap small-model runs "
                    "of registry.EXTENDED are trained (default: the scale's extended_seeds when --seeds is not "
                    "given, none when it is; 'none': none)")
    sp.add_argument("--only", default="", help="comma-separated run names (e.g. v3,v4,dcp-sampled)")
    sp.add_argument("--sections", default="", help="comma-separated sections (e.g. 06,07): only the runs they "
                    "train, so one section can be executed while the next one's runs train")
    sp.add_argument("--reverse", action="store_true", help="start from the end of the list (a second worker)")
    sp.add_argument("--status", action="store_true", help="train nothing: list each run as done, partial or "
                    "missing, with its training seconds or an estimate of the seconds left")
    sp.add_argument("--runs", default=None, help="runs cache directory (default ./runs or $TIEDLM_RUNS)")
    sp.add_argument("--device", default=None,
                        help="cpu or cuda (default: TIEDLM_DEVICE, else cuda when available, else cpu; under "
                        "torchrun: one GPU per process)")
    sp.set_defaults(fn=cmd_train_all)
    _add_dcp_parser(sub)
    _add_export_parser(sub)
    _add_exits_parser(sub)
    _add_speculate_parser(sub)
    args = p.parse_args(argv)

    try:
        args.fn(args)
    except (ValueError, FileNotFoundError, FileExistsError, CheckpointError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except TrainingInterrupted as e:
        print(f"interrupted: {e}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
