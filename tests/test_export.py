"""A trained run as a transformers folder (issue 57, item 1): loaded by AutoModelForCausalLM in a process where
tiedlm_lib cannot be imported, it gives the library's logits at every depth and the same greedy tokens; the folder
goes through the dcp command as a looped model."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tiedlm_lib.depth.generate import generate
from tiedlm_lib.hub import export
from tiedlm_lib.model.config import ModelConfig
from tiedlm_lib.model.tied import TiedLM

pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parent.parent

# Run in a fresh interpreter where `import tiedlm_lib` fails: the folder must stand on torch and transformers alone.
OUTSIDE = r"""
import json, sys
sys.modules["tiedlm_lib"] = None
import torch
from transformers import AutoModelForCausalLM
folder, inputs, out = sys.argv[1:4]
ref = torch.load(inputs)
m = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
res = {"class": type(m).__name__}
with torch.no_grad():
    res["logits"] = {str(k): m(ref["x"], depth=k).logits.tolist() for k in ref["depths"]}
    res["default"] = m(ref["x"]).logits.tolist()
    p = ref["x"][:1, :ref["prompt"]]
    res["greedy"] = {str(k): m.generate(p, max_new_tokens=ref["new"], do_sample=False, depth=k)[0].tolist()
                     for k in ref["depths"]}
    res["greedy default"] = m.generate(p, max_new_tokens=ref["new"], do_sample=False)[0].tolist()
    right = torch.ones_like(ref["x"]); right[:, -3:] = 0
    res["right padded"] = m(ref["x"], attention_mask=right).logits.tolist()
    left = torch.ones_like(ref["x"]); left[:, :3] = 0
    try:
        m(ref["x"], attention_mask=left)
        res["left padded"] = "accepted"
    except ValueError as e:
        res["left padded"] = str(e)
if len(sys.argv) > 4:
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    res["tokens"] = tok(sys.argv[4])["input_ids"]
json.dump(res, open(out, "w"))
"""


def outside(folder, ref, tmp_path, text=None):
    torch.save(ref, tmp_path / "ref.pt")
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    r = subprocess.run([sys.executable, "-c", OUTSIDE, str(folder), str(tmp_path / "ref.pt"), str(tmp_path / "o.json"),
                        *([text] if text else [])], cwd=tmp_path, env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads((tmp_path / "o.json").read_text())


def tiny(layout="S A*4 S", seed=0):
    torch.manual_seed(seed)
    m = TiedLM(ModelConfig(vocab_size=40, d_model=32, n_heads=2, layout=layout, max_seq_len=32))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.2)  # the head starts at zero: random weights make every depth's logits differ
    return m.eval()


def check(m, res, ref, tol=1e-5):
    with torch.no_grad():
        for k in ref["depths"]:
            assert torch.allclose(torch.tensor(res["logits"][str(k)]), m(ref["x"], depth=k), atol=tol, rtol=0)
            want = generate(m, ref["x"][0, :ref["prompt"]].tolist(), max_new=ref["new"], depth=k, stop=[1])[0]
            assert res["greedy"][str(k)][ref["prompt"]:] == want
        assert torch.allclose(torch.tensor(res["default"]), m(ref["x"]), atol=tol, rtol=0)
        want = generate(m, ref["x"][0, :ref["prompt"]].tolist(), max_new=ref["new"], stop=[1])[0]
        assert res["greedy default"][ref["prompt"]:] == want
    # right padding changes nothing at the real positions; left padding is refused by name
    assert torch.allclose(torch.tensor(res["right padded"])[:, :-3], torch.tensor(res["default"])[:, :-3])
    assert "not right-padded" in res["left padded"]


def test_an_exported_model_gives_the_librarys_logits_and_tokens_where_tiedlm_lib_cannot_be_imported(tmp_path):
    m = tiny()
    folder = export.export_hf(m, tmp_path / "out")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "generation_config.json", "model.safetensors",
                                                        "modeling_tiedlm.py"]
    ref = {"x": torch.randint(2, 40, (2, 12), generator=torch.Generator().manual_seed(1)), "depths": [1, 2, 4],
           "prompt": 5, "new": 6}
    res = outside(folder, ref, tmp_path)
    assert res["class"] == "TiedLMForCausalLM"
    check(m, res, ref)
    # and the depths differ, so equal logits at each depth are not one depth's logits every time
    assert res["logits"]["1"] != res["logits"]["4"]


def test_the_modeling_file_is_the_librarys_source_and_imports_only_torch_and_transformers():
    src = export.modeling_source()
    tree = ast.parse(src)
    mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert mods <= {"__future__", "torch", "transformers", "math", "re", "json", "hashlib", "dataclasses",
                    "collections", "contextlib", "typing", "functools"}, mods
    import inspect
    for mod in export.SOURCES:  # every definition of the library's model modules, as written (its deferred
        # imports of the library, whose names the file defines, replaced by a pass)
        for name, obj in vars(mod).items():
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == mod.__name__:
                body = export._strip_library_imports(inspect.getsource(obj))[0]
                assert body in src, f"{mod.__name__}.{name} is not in the modeling file as written"


def test_export_refuses_a_used_folder_and_leaves_nothing_when_it_fails(tmp_path, monkeypatch):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("keep")
    with pytest.raises(FileExistsError, match="not an empty folder"):
        export.export_hf(tiny(), tmp_path / "used")
    assert (tmp_path / "used" / "x").read_text() == "keep"
    with pytest.raises(TypeError, match="exports a tiedlm_lib TiedLM"):
        export.export_hf(torch.nn.Linear(2, 2), tmp_path / "lin")

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(export, "modeling_source", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        export.export_hf(tiny(), tmp_path / "half")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["used"]  # no half-written folder, no partial one


def test_a_shipped_run_exports_with_its_tokenizer_and_answers_at_k_1_4_and_16(tmp_path):
    from tiedlm_lib.runs import get_run

    run = get_run("v3", "cpu", 0, root=ROOT / "runs", train_if_missing=False, device="cpu")
    assert run.model.config.trained_depth == {"A": 16}
    folder = export.export_run("v3", 0, "cpu", tmp_path / "v3", root=ROOT / "runs")
    text = "And God said, Let there be light"
    ref = {"x": torch.randint(4, run.model.config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(2)),
           "depths": [1, 4, 16], "prompt": 8, "new": 8}
    res = outside(folder, ref, tmp_path, text)
    check(run.model.eval(), res, ref)
    from tiedlm_lib.data import get_tokenizer, load_corpus, split_corpus

    d = run.config.data
    tok = get_tokenizer(d, split_corpus(load_corpus(d), d.val_fraction, d.split_seed)[0])
    assert res["tokens"] == tok.encode(text).ids
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["looped"] and cfg["tiedlm_export"]["run"] == "v3" and cfg["tiedlm"]["layout"] == "S S A*16 S S"


def test_the_exported_folder_goes_through_the_protocol_as_the_looped_model_it_is(tmp_path, monkeypatch):
    from tiedlm_lib.data import TokenDocs
    from tiedlm_lib.hub import protocol

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    m = tiny("S A*4 S", seed=3)
    folder = export.export_hf(m, tmp_path / "out")
    assert export.is_export(folder) and not export.is_export(tmp_path)
    loaded = export.ExportedDepthModel(
        __import__("transformers").AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=True).eval())
    assert loaded.layout == "S A*4 S" and loaded.token_offset == 0 and not loaded.dense
    g = torch.Generator().manual_seed(4)
    docs = TokenDocs.from_lists([torch.randint(2, 40, (int(n),), generator=g).tolist()
                                 for n in torch.randint(6, 20, (12,), generator=g)])
    kw = dict(n_cal=6, ks=[1, 2], schedules=["prefix", "frozen"], probes=["head/temperature"], seq_len=20,
              batch_size=4, n_boot=20, seed=0)
    a, b = protocol.run(m, docs, **kw), protocol.run(loaded, docs, **kw)
    assert len(a.conditions) == len(b.conditions) > 0 and len(a.shares) == len(b.shares) > 0
    for ra, rb in [*zip(a.conditions, b.conditions), *zip(a.shares, b.shares)]:
        assert ra.keys() == rb.keys()
        for key in ra:
            if "ms per" in key or "second" in key:  # the machine's time, not the model's numbers
                continue
            if isinstance(ra[key], float):
                assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-6), key
            else:
                assert ra[key] == rb[key], key


def _looped_llama(folder, texts):
    """A tiny Llama whose layers 1..3 are one shared module, saved by save_untied (marked looped), with a tokenizer."""
    import transformers

    from tiedlm_lib.data import train_tokenizer
    from tiedlm_lib.hub.adapter import save_untied

    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=train_tokenizer(texts, 300))
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=16, intermediate_size=32, num_hidden_layers=5,
                                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    m = transformers.LlamaForCausalLM(cfg)
    layers = m.model.layers
    m.model.layers = torch.nn.ModuleList([layers[0], layers[1], layers[1], layers[1], layers[4]])
    save_untied(m, folder)
    tok.save_pretrained(folder)


def test_exits_and_speculate_run_end_to_end_on_an_export_and_on_a_looped_hf_model(tmp_path, monkeypatch, capsys):
    import pandas as pd

    from tiedlm_lib.__main__ import main
    from tiedlm_lib.data import kjv_documents
    from tiedlm_lib.hub import user_speculate

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    texts = kjv_documents()[:24]
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    (tmp_path / "prompts.txt").write_text("And God said\n\nIn the beginning\n")
    from tiedlm_lib.data import train_tokenizer

    m = TiedLM(ModelConfig(vocab_size=300, d_model=32, n_heads=2, layout="S A*4 S", max_seq_len=64))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.2)
    export.export_hf(m, tmp_path / "exported", train_tokenizer(texts, 300))
    _looped_llama(tmp_path / "llama", texts)
    for name, d in (("exported", 2), ("llama", 1)):
        model = str(tmp_path / name)
        out = tmp_path / f"exits-{name}"
        assert main(["exits", "--model", model, "--data", str(data), "--eps", "0.3,0.6", "--delta", "0.2",
                     "--criteria", "maxprob,stability", "--seq-len", "24", "--out", str(out), "--device", "cpu"]) == 0
        ex = pd.read_csv(out / "exits.csv")
        assert len(ex) == 4 and set(ex.rule) == {"maxprob", "stability"} and (ex["held-out documents"] == 12).all()
        assert ((ex["avg depth"] >= 1) & (ex["avg depth"] <= ex.K)).all()
        assert (ex.loc[~ex.certified, "avg depth"] == ex.loc[~ex.certified, "K"]).all()  # uncertified: full depth
        out = tmp_path / f"spec-{name}"
        assert main(["speculate", "--model", model, "--prompts", str(tmp_path / "prompts.txt"), "--draft-depth",
                     str(d), "--max-new", "8", "--out", str(out), "--device", "cpu"]) == 0
        sp = pd.read_csv(out / "speculate.csv")
        assert len(sp) == 2 and sp.identical.all() and (sp.tokens == 8).all()
        assert (sp.accepted <= sp.drafted).all()
    assert "uncached (Hugging Face)" in set(sp.path)
    # the uncached path is plain greedy decoding, checked against a full forward per token by hand
    from tiedlm_lib.hub import protocol

    hf, tok = protocol.load_hf(tmp_path / "llama")
    assert hf.layout == "S A*3 S"
    prompt = [t + 1 for t in tok("And God said")["input_ids"]]
    got, counts = user_speculate.speculate_uncached(hf, prompt, 6, 1, 3)
    seq = list(prompt)
    for _ in range(6):
        seq.append(int(hf.logits(torch.tensor([seq]))[0, -1].argmax()))
    assert got == seq[len(prompt):] and counts["accepted"] <= counts["drafted"]
    # bad input: one line each
    (tmp_path / "empty.txt").write_text("\n\n")
    dense = tmp_path / "dense"
    _save_dense(dense, texts)
    capsys.readouterr()
    for argv, msg in ((["--model", model, "--prompts", str(tmp_path / "empty.txt"), "--draft-depth", "1"],
                       "holds no prompt"),
                      (["--model", model, "--prompts", str(tmp_path / "prompts.txt"), "--draft-depth", "3"],
                       "--draft-depth must be an integer in 1..2"),
                      (["--model", str(dense), "--prompts", str(tmp_path / "prompts.txt"), "--draft-depth", "1"],
                       "has no looped block")):
        assert main(["speculate", *argv, "--out", str(tmp_path / "x"), "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        last = err.strip().splitlines()[-1]  # (transformers' loading bar may precede it)
        assert msg in last and last.startswith("error: ") and "Traceback" not in err, err


def _save_dense(folder, texts):
    import transformers

    from tiedlm_lib.data import train_tokenizer

    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=train_tokenizer(texts, 300))
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
