import json
import re

import numpy as np
import pytest
import torch

from tiedlm_lib import DataConfig, load_corpus, split_corpus
from tiedlm_lib.data import (
    PAD_ID,
    BatchStream,
    TokenDocs,
    eval_batches,
    kjv_documents,
    load_tokenizer,
    pad_batch,
    shift_targets,
    train_tokenizer,
)


def test_kjv_documents_are_natural_units_of_varying_length():
    docs = kjv_documents()
    assert 9000 < len(docs) < 12000
    assert docs[0].startswith("In the beginning God created")
    assert not any(re.search(r"\d+:\d+", d) for d in docs)  # verse references ("31:48 ") are stripped
    lens = np.array([len(d) for d in docs])
    assert lens.min() < 100 and lens.max() > 1000  # padded batches carry real padding
    assert kjv_documents() == docs  # deterministic


def test_split_is_disjoint_by_construction_and_deterministic():
    ds = load_corpus(DataConfig())
    tr, va = split_corpus(ds, 0.05, seed=0)
    assert len(tr) + len(va) == len(ds)
    assert set(tr["doc_id"]).isdisjoint(va["doc_id"])
    assert set(tr["text"]).isdisjoint(va["text"])  # also duplicated texts never straddle the split
    assert 0.03 < len(va) / len(ds) < 0.07
    tr2, va2 = split_corpus(ds, 0.05, seed=0)
    assert va2["doc_id"] == va["doc_id"]
    _, va3 = split_corpus(ds, 0.05, seed=1)
    assert va3["doc_id"] != va["doc_id"]


def test_duplicate_texts_land_on_one_side():
    import datasets

    texts = ["same text"] * 50 + [f"doc {i}" for i in range(200)]
    tr, va = split_corpus(datasets.Dataset.from_dict({"doc_id": list(range(250)), "text": texts}), 0.3)
    assert ("same text" in tr["text"]) != ("same text" in va["text"])


def test_local_jsonl_json_and_text_corpora(tmp_path):
    (tmp_path / "c.jsonl").write_text('{"text": "alpha beta"}\n\n{"text": "gamma", "id": 3}\n')
    (tmp_path / "c.json").write_text(json.dumps(["one", {"text": "two"}]))
    (tmp_path / "c.txt").write_text("first doc\nline two\n\nsecond doc\n")
    assert load_corpus(DataConfig(corpus=str(tmp_path / "c.jsonl")))["text"] == ["alpha beta", "gamma"]
    assert load_corpus(DataConfig(corpus=str(tmp_path / "c.json")))["text"] == ["one", "two"]
    assert load_corpus(DataConfig(corpus=str(tmp_path / "c.txt")))["text"] == ["first doc\nline two", "second doc"]
    (tmp_path / "d.jsonl").write_text('{"content": "x"}\n')
    assert load_corpus(DataConfig(corpus=str(tmp_path / "d.jsonl"), text_field="content"))["text"] == ["x"]


def test_bad_corpora_give_clear_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": "fine"}\n{"text": broken\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:3: malformed JSON line"):
        load_corpus(DataConfig(corpus=str(bad)))
    nofield = tmp_path / "nofield.jsonl"
    nofield.write_text('{"text": "ok"}\n{"body": "x"}\n')
    with pytest.raises(ValueError, match=r"nofield\.jsonl:2: expected a JSON object with a string field 'text'"):
        load_corpus(DataConfig(corpus=str(nofield)))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")
    with pytest.raises(ValueError, match="is empty"):
        load_corpus(DataConfig(corpus=str(empty)))
    blank = tmp_path / "blank.txt"
    blank.write_text("   \n\n")
    with pytest.raises(ValueError, match="is empty"):
        load_corpus(DataConfig(corpus=str(blank)))
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"latin\.jsonl:2: not valid UTF-8"):
        load_corpus(DataConfig(corpus=str(latin)))
    with pytest.raises(FileNotFoundError, match="corpus file not found"):
        load_corpus(DataConfig(corpus=str(tmp_path / "missing.jsonl")))
    (tmp_path / "c.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="unsupported extension '.csv'"):
        load_corpus(DataConfig(corpus=str(tmp_path / "c.csv")))
    tiny = tmp_path / "tiny.jsonl"
    tiny.write_text('{"text": "only one"}\n')
    with pytest.raises(ValueError, match="too small for val_fraction"):
        split_corpus(load_corpus(DataConfig(corpus=str(tiny))), 0.05)


def test_tokenizer_has_pad_zero_and_roundtrips(tmp_path):
    tok = train_tokenizer(["In the beginning was the word"] * 20 + ["and the word was with God"] * 20, 300)
    assert tok.token_to_id("<pad>") == PAD_ID and tok.token_to_id("<eos>") == 1
    ids = tok.encode("In the beginning, café ☃").ids
    assert PAD_ID not in ids and tok.decode(ids) == "In the beginning, café ☃"
    tok.save(str(tmp_path / "t.json"))
    assert load_tokenizer(tmp_path / "t.json").encode("word").ids == tok.encode("word").ids
    with pytest.raises(ValueError, match="exceeds the model's vocab_size 100"):
        load_tokenizer(tmp_path / "t.json", vocab_size=100)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a valid tokenizer.json"):
        load_tokenizer(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="tokenizer file not found"):
        load_tokenizer(tmp_path / "none.json")
    with pytest.raises(ValueError, match="vocab_size must be >= 260"):
        train_tokenizer(["x"], 100)


def test_smoke_corpus_is_prepared_once(smoke_corpus):
    c = smoke_corpus
    assert c.tokenizer.get_vocab_size() == 320 and len(c.train) > 10 * len(c.val) > 0
    assert all(PAD_ID not in c.train[i] for i in range(50))


def _docs():
    return TokenDocs.from_lists([[5, 6, 7], [8], [9, 10, 11, 12, 13, 14], [15, 16]])


def test_padded_batches_truncate_right_pad_and_shift():
    x = pad_batch(_docs(), [0, 2, 1], 4)
    assert x.tolist() == [[5, 6, 7, 0], [9, 10, 11, 12], [8, 0, 0, 0]]
    assert shift_targets(x).tolist() == [[6, 7, 0, 0], [10, 11, 12, 0], [0, 0, 0, 0]]  # last target is pad


def test_batch_stream_state_restores_the_same_batches():
    s = BatchStream(_docs(), 4, 3, seed=42)
    s.next()
    state = s.get_state()
    want = [s.next()[0] for _ in range(3)]
    t = BatchStream(_docs(), 4, 3, seed=42)
    t.set_state(json.loads(json.dumps(state)))  # the state survives a JSON round trip (checkpoint metadata)
    assert all(torch.equal(a, t.next()[0]) for a in want)


def test_packed_stream_has_no_padding_and_shifted_targets():
    s = BatchStream(_docs(), 5, 4, seed=0, mode="packed")
    x, y = s.next()
    assert x.shape == (4, 5) and (x != PAD_ID).all()
    assert torch.equal(x[:, 1:], y[:, :-1])
    with pytest.raises(ValueError, match="shorter than seq_len"):
        BatchStream(_docs(), 40, 2, seed=0, mode="packed")


def test_eval_batches_all_and_paper_sampling():
    all_b = list(eval_batches(_docs(), 4, 3))
    assert [b.doc_index.tolist() for b in all_b] == [[0, 1, 2], [3]]
    p1 = [b.doc_index.tolist() for b in eval_batches(_docs(), 4, 8, sampling="paper", n_batches=2)]
    p2 = [b.doc_index.tolist() for b in eval_batches(_docs(), 4, 8, sampling="paper", n_batches=2)]
    assert p1 == p2 and len(p1) == 2 and len(p1[0]) == 8 and p1[0] != p1[1]
    with pytest.raises(ValueError, match="sampling must be"):
        list(eval_batches(_docs(), 4, 3, sampling="random"))


def test_data_config_validation():
    with pytest.raises(ValueError, match="batch_mode must be one of"):
        DataConfig(batch_mode="streamed")
    with pytest.raises(ValueError, match="val_fraction must be in"):
        DataConfig(val_fraction=1.5)
