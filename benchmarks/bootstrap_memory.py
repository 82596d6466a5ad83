"""Peak memory and time of the paired document bootstrap at the paper scale's held-out size (63,512 documents,
2,000 replicates): the chunked ``stats.Resample`` the library uses against the one-array index draw it replaced.

``python benchmarks/bootstrap_memory.py [--docs 63512] [--boot 2000] [--csv FILE]``. Memory is numpy's own
allocations traced by ``tracemalloc`` (numpy reports them to it), peak over the call; both paths give the same
interval (checked)."""

import argparse
import csv
import time
import tracemalloc

import numpy as np

from tiedlm_lib.stats.bootstrap import NLLStats, paired_diff, percentile, value


def one_array(a: NLLStats, b: NLLStats, n_boot: int, seed: int):
    """The bootstrap as it was: every index at once, (n_boot, n_docs) int64, then fancy-indexed sums."""
    idx = np.random.default_rng(seed).integers(0, len(a.doc_index), size=(n_boot, len(a.doc_index)))
    rep = (a.sum_real[idx].sum(1) / a.n_real[idx].sum(1)) - (b.sum_real[idx].sum(1) / b.n_real[idx].sum(1))
    return percentile(value(a) - value(b), rep)


def measure(fn, *args):
    tracemalloc.start()
    t = time.perf_counter()
    out = fn(*args)
    seconds = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, peak / 2 ** 20, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=63_512)
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--csv", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = args.docs

    def stats():
        n_real = rng.integers(20, 256, n)
        return NLLStats(np.arange(n), rng.uniform(2, 4, n) * n_real, n_real, rng.uniform(2, 4, n) * n_real, n_real)

    a, b = stats(), stats()
    rows = []
    chunked, mib_c, s_c = measure(paired_diff, a, b, "masked", args.boot, 0)
    whole, mib_w, s_w = measure(one_array, a, b, args.boot, 0)
    if (chunked.lo, chunked.hi) != (whole.lo, whole.hi):
        raise SystemExit(f"the two bootstraps disagree: {chunked} against {whole}")
    for name, mib, s in (("chunked Resample (library)", mib_c, s_c), ("one index array (before)", mib_w, s_w)):
        rows.append({"bootstrap": name, "documents": n, "replicates": args.boot, "peak MiB": round(mib, 1),
                     "seconds": round(s, 2)})
        print(f"{name:28s} {n} documents x {args.boot} replicates: peak {mib:8.1f} MiB, {s:6.2f} s")
    print(f"same interval: {chunked}")
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
