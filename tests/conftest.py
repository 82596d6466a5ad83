import os

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def _isolated_dirs(tmp_path_factory):
    """Every test session gets its own runs cache and data cache, so tests never read a user's runs."""
    root = tmp_path_factory.mktemp("tiedlm")
    old = {k: os.environ.get(k) for k in ("TIEDLM_RUNS", "TIEDLM_CACHE")}
    os.environ["TIEDLM_RUNS"] = str(root / "runs")
    os.environ["TIEDLM_CACHE"] = str(root / "cache")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    yield root
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def smoke_corpus():
    from tiedlm_lib import experiment, prepare_corpus

    return prepare_corpus(experiment("v3", "smoke").data)


def tiny_model(layout="S A*3 S", block="paper", vocab=37, d=16, heads=2, seq=12, seed=0, dtype=torch.float32):
    """A small model whose zero-initialised head is randomised, so that depths give distinct logits."""
    from tiedlm_lib import ModelConfig, TiedLM

    torch.manual_seed(seed)
    m = TiedLM(ModelConfig(vocab_size=vocab, d_model=d, n_heads=heads, layout=layout, max_seq_len=seq, block=block))
    torch.nn.init.normal_(m.head.weight, std=0.5)
    return m.to(dtype)
