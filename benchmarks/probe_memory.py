"""Peak memory of fitting and scoring a readout probe at a 32k vocabulary: chunked over rows (the library's default,
``readout.MAX_LOGITS`` logits a chunk) against one pass over every calibration token (the behaviour before issue 57).

``python benchmarks/probe_memory.py [--vocab 32000] [--seq 64] [--docs 8,32,128] [--csv FILE]``. Each configuration
runs in its own process with ``MALLOC_MMAP_THRESHOLD_=65536`` (see the README: freed temporaries then leave the
resident set); "peak MiB" is the growth of that process's peak RSS over its state after building the model and the
states, for one head/diagonal fit at a fixed ridge (10 L-BFGS iterations) followed by ``probe_nll`` and
``readout_metrics``. The model is a one-loop ``TiedLM`` at d = 64 with the given vocabulary; its states are random."""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from _common import write_csv


def child(vocab: int, seq: int, docs: int, chunked: bool) -> dict:
    import numpy as np
    import torch

    from tiedlm_lib import ModelConfig
    from tiedlm_lib.depth import readout as R
    from tiedlm_lib.model.tied import TiedLM

    torch.manual_seed(0)
    model = TiedLM(ModelConfig(d_model=64, n_heads=2, vocab_size=vocab, max_seq_len=seq, layout="S A*2 S"))
    g = torch.Generator().manual_seed(0)
    states = R.States(torch.randn(docs, seq, 64, generator=g), torch.randint(1, vocab, (docs, seq), generator=g),
                      np.arange(docs))
    if not chunked:
        R.MAX_LOGITS = 2 ** 62  # one pass over every token, as before
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    fitted = R.fit_probe(model, states, R.ProbeSpec("head", "diagonal"), iters=10, lam=0.1)
    nll = R.probe_nll(model, states, fitted)
    R.readout_metrics(model, states, fitted)
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"vocabulary": vocab, "positions": seq, "documents": docs, "tokens": docs * seq,
            "fit": "chunked (library)" if chunked else "one pass (before)",
            "rows a chunk": R.row_chunk(states, vocab) if chunked else docs,
            "peak MiB": round((peak - base) / 1024, 1), "seconds": round(seconds, 2),
            "NLL (checks the two agree)": round(float(nll.sum_real.sum() / nll.n_real.sum()), 6)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=32_000)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--docs", default="8,32,128")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(**json.loads(args.child))))
        return
    rows = []
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    for docs in (int(d) for d in args.docs.split(",")):
        for chunked in (True, False):
            spec = json.dumps({"vocab": args.vocab, "seq": args.seq, "docs": docs, "chunked": chunked})
            out = subprocess.run([sys.executable, __file__, "--child", spec], env=env, capture_output=True, text=True,
                                 check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"{row['fit']:20s} V={row['vocabulary']} T={row['positions']} {docs:4d} documents: peak "
                  f"{row['peak MiB']:8.1f} MiB, {row['seconds']:6.2f} s, NLL {row['NLL (checks the two agree)']}")
    write_csv(rows, args.csv)


if __name__ == "__main__":
    main()
