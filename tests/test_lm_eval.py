"""lm-evaluation-harness on a tied model at a chosen depth (issue 57, item 5): the registered model ``tiedlm`` scores
what the library's model scores, on a local task file (lm-eval's standard tasks download their data)."""

import json

import pytest
import torch

pytest.importorskip("lm_eval")
pytest.importorskip("transformers")

from lm_eval.api.instance import Instance  # noqa: E402

from tiedlm_lib.data import train_tokenizer  # noqa: E402
from tiedlm_lib.hub import export  # noqa: E402
from tiedlm_lib.hub.lm_eval_model import EOS_ID, TiedLMHarness  # noqa: E402
from tiedlm_lib.model.config import ModelConfig  # noqa: E402
from tiedlm_lib.model.tied import TiedLM  # noqa: E402

TEXTS = ["And God said, Let there be light: and there was light.", "In the beginning God created the heaven and "
         "the earth.", "And the evening and the morning were the first day."] * 8


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lm_eval")
    torch.manual_seed(0)
    m = TiedLM(ModelConfig(vocab_size=300, d_model=32, n_heads=2, layout="S A*4 S", max_seq_len=16))
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.2)
    tok = train_tokenizer(TEXTS, 300)
    return m.eval(), tok, export.export_hf(m, tmp / "model", tok)


def req(kind, *args):
    return Instance(request_type=kind, doc={}, arguments=args, idx=0)


def test_each_request_kind_scores_what_the_librarys_model_scores_at_the_depth(exported, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    m, tok, folder = exported
    lm = TiedLMHarness(pretrained=str(folder), depth=2)
    ctx, cont = "And God said", ", Let there be light"
    whole, c = tok.encode(ctx + cont).ids, tok.encode(ctx).ids
    with torch.no_grad():
        lp = m(torch.tensor([whole[:-1]]), depth=2)[0].log_softmax(-1)
    want = float(sum(lp[i - 1, whole[i]] for i in range(len(c), len(whole))))
    [(ll, greedy)] = lm.loglikelihood([req("loglikelihood", ctx, cont)])
    assert ll == pytest.approx(want, abs=1e-4) and isinstance(greedy, bool)
    assert lm.loglikelihood([req("loglikelihood", ctx, cont)])[0][0] != pytest.approx(
        TiedLMHarness(pretrained=str(folder), depth=4).loglikelihood([req("loglikelihood", ctx, cont)])[0][0])
    # a text longer than the 16-position context: every token scored once, after <eos> for the first window
    text = TEXTS[0] + " " + TEXTS[1]
    ids = tok.encode(text).ids
    assert len(ids) > 16
    [rolling] = lm.loglikelihood_rolling([req("loglikelihood_rolling", text)])
    with torch.no_grad():
        first = m(torch.tensor([[EOS_ID] + ids[:15]]), depth=2)[0].log_softmax(-1)
    assert rolling < float(sum(first[i, ids[i]] for i in range(16))) < 0  # the rest of the text costs more
    [gen] = lm.generate_until([req("generate_until", "And God", {"until": ["."], "max_gen_toks": 6})])
    ids, new = tok.encode("And God").ids, []
    with torch.no_grad():  # greedy at depth 2 by hand, on the library's model, to the stop string or 6 tokens
        for _ in range(6):
            new.append(int(m(torch.tensor([ids + new]), depth=2)[0, -1].argmax()))
            if "." in tok.decode(new) or new[-1] == EOS_ID:
                break
    assert gen == tok.decode(new).split(".")[0]
    with pytest.raises(ValueError, match="exactly one of pretrained=DIR"):
        TiedLMHarness()
    with pytest.raises(ValueError, match="depth must be a positive integer"):
        TiedLMHarness(pretrained=str(folder), depth=0)


def test_a_local_task_runs_through_simple_evaluate(exported, monkeypatch, tmp_path):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    _, _, folder = exported
    rows = [{"question": "And God said, Let there be", "choices": [" light", " darkness"], "label": 0},
            {"question": "In the beginning God created the heaven and the", "choices": [" earth", " sea"],
             "label": 0}]
    (tmp_path / "kjv.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "kjv_mc.yaml").write_text(
        "task: kjv_mc\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: " + str(tmp_path / "kjv.jsonl")
        + "\ntest_split: test\noutput_type: multiple_choice\ndoc_to_text: \"{{question}}\"\n"
        "doc_to_choice: \"{{choices}}\"\ndoc_to_target: label\nmetric_list:\n  - metric: acc\n")
    res = simple_evaluate(model="tiedlm", model_args=f"pretrained={folder},depth=2", tasks=["kjv_mc"],
                          task_manager=TaskManager(include_path=str(tmp_path), include_defaults=False),
                          device="cpu")
    acc = res["results"]["kjv_mc"]["acc,none"]
    assert 0 <= acc <= 1 and res["config"]["model_args"] == f"pretrained={folder},depth=2"
