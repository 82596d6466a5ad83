"""The mutation audit of issue 31: apply one mutation at a time to the library, run the test meant to catch it,
restore the file, and print CAUGHT or SURVIVED. ``python benchmarks/mutations.py [name fragment ...]``.

Each mutation is a (name, file, exact text, replacement, pytest arguments) row; a row whose text no longer occurs
once in its file stops the audit (the code moved: update the row)."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
MUTATIONS = [
    ("lr schedule not applied", "tiedlm_lib/training/loop.py", '        g["lr"] = lr_at(step, cfg)\n', '        pass\n',
     "tests/test_training.py -k hand_stepped"),
    ("clipping removed", "tiedlm_lib/training/loop.py",
     "    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)\n",
     "    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), float('inf'))\n",
     "tests/test_training.py -k hand_stepped"),
    ("weight decay 0", "tiedlm_lib/training/loop.py", "weight_decay=cfg.weight_decay,", "weight_decay=0.0,",
     "tests/test_training.py -k hand_stepped"),
    ("LTT p-value: certify whenever the calibration rate is below eps", "tiedlm_lib/depth/exits.py",
     "    return 1.0 if mean >= 0 else float(math.exp(-2 * m * mean ** 2))",
     "    return 1.0 if mean >= 0 else 0.0", "tests/test_exits.py -k ltt_certifies"),
    ("Kendall tau-b tie correction removed", "tiedlm_lib/evaluation/suffix_benchmark.py",
     "    denom = np.sqrt((n0 - ta) * (n0 - tb))", "    denom = float(n0)", "tests/test_stats_analysis.py -k kendall"),
    ("exit_vs_uniform sign flipped", "tiedlm_lib/evaluation/analysis.py",
     '        d_real = paired_diff(ex, uniform_at(stats, res.avg_k_real), "masked", n_boot, seed)',
     '        d_real = paired_diff(uniform_at(stats, res.avg_k_real), ex, "masked", n_boot, seed)',
     "tests/test_stats_analysis.py -k exit_vs_uniform"),
    ("non-finite gradients applied", "tiedlm_lib/training/loop.py",
     "    if not math.isfinite(float(gnorm)):", "    if False:", "tests/test_training.py -k non_finite_gradients"),
]
A3_ROW = ("A3,both,shallow depths useless,ln V - min over k <= K/2 of NLL(k) on the long phantom run (masked: "
          "paper A's v7 sweep is masked),superiority,-1,")
MUTATIONS += [
    ("A3 threshold halved", "tiedlm_lib/preregistered.csv",
     A3_ROW + "1,", A3_ROW + "0.5,",
     "tests/test_verdicts.py -k a3"),
    ("A3 'only K lands' conjunct dropped", "tiedlm_lib/paper/verdicts/gradients.py",
     """    parts = (Parts("A3").add("shallow depths useless", {"ln V - best NLL(k <= K/2)": pts(shallow)})
             .add("only K lands", {"ln V - NLL(K)": pts(deep)}))""",
     """    parts = Parts("A3").add("shallow depths useless", {"ln V - best NLL(k <= K/2)": pts(shallow)})""",
     "tests/test_verdicts.py -k a3"),
    ("A3 'shallow useless' conjunct dropped", "tiedlm_lib/paper/verdicts/gradients.py",
     """    parts = (Parts("A3").add("shallow depths useless", {"ln V - best NLL(k <= K/2)": pts(shallow)})
             .add("only K lands", {"ln V - NLL(K)": pts(deep)}))""",
     """    parts = Parts("A3").add("only K lands", {"ln V - NLL(K)": pts(deep)})""",
     "tests/test_verdicts.py -k a3"),
]
only = sys.argv[1:]
for name, path, old, new, test in MUTATIONS:
    if only and not any(o in name for o in only):
        continue
    p = ROOT / path
    src = p.read_text()
    assert src.count(old) == 1, (name, src.count(old))
    try:
        p.write_text(src.replace(old, new))
        r = subprocess.run(f"OMP_NUM_THREADS=1 {sys.executable} -m pytest -q -x {test}", shell=True, cwd=ROOT,
                           capture_output=True, text=True)
        print(f"{'CAUGHT ' if r.returncode else 'SURVIVED'} {name}  [{test}]", flush=True)
    finally:
        p.write_text(src)
