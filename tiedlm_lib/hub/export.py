"""A trained run as a transformers folder: ``AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)`` loads
it on a machine without tiedlm_lib, ``model(input_ids, depth=k)`` and ``model.generate(..., depth=k)`` run every tied
loop k times (default: the trained depth).

The folder's ``modeling_tiedlm.py`` is written at export time from the library's own model source (``SOURCES``: the
layout parser, the gradient estimators, the schedules, the configs and ``TiedLM``), with the imports between those
modules removed, so there is one model, not a second hand-kept copy: a test loads the folder in a process where
``import tiedlm_lib`` fails and compares its logits with the library's. The wrapper appended to it
(``_WRAPPER``) is the transformers side only: a config class holding the library's ``ModelConfig`` as a dict, and a
``PreTrainedModel`` whose ``model`` is the library's ``TiedLM``, so the weights keep their names under ``model.``.

Token ids are the library's (pad = 0 and never predicted; the byte-level BPE tokenizer ships as ``tokenizer.json``).
Generation recomputes the whole sequence at each step (no KV cache: a tied block's iterations would share one cache
slot in transformers' per-layer caches); ``tiedlm_lib.depth.generate`` has the cached path. The config carries
``looped: true``, the mark by which the ``dcp`` command reads the folder as a looped model.
"""

from __future__ import annotations

import ast
import inspect
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from tiedlm_lib.model import config as _config
from tiedlm_lib.model import gradients as _gradients
from tiedlm_lib.model import layout as _layout
from tiedlm_lib.model import schedules as _schedules
from tiedlm_lib.model import tied as _tied
from tiedlm_lib.store.atomic import atomic_write_text

SOURCES = (_layout, _gradients, _schedules, _config, _tied)  # in dependency order
MODELING = "modeling_tiedlm.py"
FORMAT = "tiedlm-hf/1"

_WRAPPER = '''

# ------------------------------------------------------------------------------------- the transformers wrapper
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel  # noqa: E402
from transformers.modeling_outputs import CausalLMOutput  # noqa: E402


class TiedLMConfig(PretrainedConfig):
    """The library's ModelConfig (``tiedlm``, a dict) and the depth ``model(...)`` runs by default (None: trained)."""

    model_type = "tiedlm"

    def __init__(self, tiedlm=None, depth=None, looped=True, **kwargs):
        self.tiedlm = dict(tiedlm or {})
        self.depth = depth
        self.looped = looped
        cfg = ModelConfig(**self.tiedlm) if self.tiedlm else None
        if cfg is not None:
            kwargs.setdefault("vocab_size", cfg.vocab_size)
            kwargs.setdefault("hidden_size", cfg.d_model)
            kwargs.setdefault("num_attention_heads", cfg.n_heads)
            kwargs.setdefault("max_position_embeddings", cfg.max_seq_len)
        kwargs.setdefault("use_cache", False)
        super().__init__(**kwargs)


def _right_padded(mask):
    """Whether every row of an attention mask is ones then zeros (right padding, which the model's causal attention
    keeps out of every real position's context)."""
    m = mask.long()
    return bool((m[:, 1:] <= m[:, :-1]).all())


class TiedLMForCausalLM(PreTrainedModel, GenerationMixin):
    """The library's TiedLM in transformers: ``model(input_ids, depth=k)``, ``model.generate(..., depth=k)``."""

    config_class = TiedLMConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules = ["TiedBlock", "StdBlock"]

    def __init__(self, config):
        super().__init__(config)
        self.model = TiedLM(ModelConfig(**config.tiedlm))
        self.post_init()

    def _init_weights(self, module):
        pass  # TiedLM initialises itself; from_pretrained then loads every weight

    def get_input_embeddings(self):
        return self.model.tok_emb

    def get_output_embeddings(self):
        return self.model.head

    def forward(self, input_ids=None, attention_mask=None, labels=None, depth=None, **kwargs):
        if input_ids is None:
            raise ValueError("TiedLMForCausalLM needs input_ids")
        if attention_mask is not None and not _right_padded(attention_mask):
            raise ValueError("attention_mask is not right-padded: this model has no key-padding mask, so left or "
                             "interior padding would let real positions attend to pads; pad on the right "
                             "(tokenizer.padding_side = 'right') or pass one sequence at a time")
        depth = self.config.depth if depth is None else depth
        logits = self.model(input_ids, depth=depth)
        loss = None
        if labels is not None:
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                                     labels[:, 1:].reshape(-1), ignore_index=-100)
        return CausalLMOutput(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, depth=None, **kwargs):
        # the whole sequence each step: no KV cache (see the module's doc)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "depth": depth}

    @classmethod
    def _supports_default_dynamic_cache(cls):
        return False
'''


def _strip_library_imports(src: str) -> tuple[str, list[str]]:
    """The module's source without ``from __future__`` and without its imports of tiedlm_lib (top-level or deferred:
    the names are defined in the same file); returns the source and the aliases those imports bound (``name =
    original`` lines to append)."""
    lines = src.splitlines()
    aliases = []
    for node in sorted(ast.walk(ast.parse(src)), key=lambda n: -getattr(n, "lineno", 0)):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if mod != "__future__" and not mod.startswith("tiedlm_lib"):
                continue
            aliases += [f"{a.asname} = {a.name}" for a in node.names if a.asname and mod != "__future__"]
        elif not (isinstance(node, ast.Import) and any(a.name.startswith("tiedlm_lib") for a in node.names)):
            continue
        # a deferred import becomes a pass, so that no block is left empty
        keep = [" " * node.col_offset + "pass"] if node.col_offset else []
        lines[node.lineno - 1: node.end_lineno] = keep
    return "\n".join(lines) + "\n", aliases


def modeling_source() -> str:
    """The self-contained modeling file: the library's model modules, then the transformers wrapper."""
    parts = ['"""tiedlm: a tied-depth ("looped") Transformer LM, written by `python -m tiedlm_lib export-hf` from the '
             'library\'s own model source\n(tiedlm_lib.model: layout, gradients, schedules, config, tied), followed by '
             'its transformers wrapper. Depends only on torch\nand transformers."""\n\nfrom __future__ import '
             'annotations\n']
    aliases: list[str] = []
    for mod in SOURCES:
        src, al = _strip_library_imports(inspect.getsource(mod))
        parts.append(f"\n# {'-' * 80} from {mod.__name__}\n{src}")
        aliases += al
    if aliases:
        parts.append("\n# names the library's modules imported from each other under another name\n"
                     + "\n".join(sorted(set(aliases))) + "\n")
    return "".join(parts) + _WRAPPER


def _tokenizer_files(tok, out: Path, max_len: int) -> None:
    from tiedlm_lib.data import PAD_ID, SPECIAL_TOKENS

    tok.save(str(out / "tokenizer.json"))
    specials = {"pad_token": SPECIAL_TOKENS[PAD_ID], "eos_token": SPECIAL_TOKENS[1]}
    atomic_write_text(out / "tokenizer_config.json", json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_len, "padding_side": "right",
         "add_prefix_space": False, **specials}, indent=1))
    atomic_write_text(out / "special_tokens_map.json", json.dumps(specials, indent=1))


def export_hf(model, out: str | Path, tokenizer=None, *, run_name: str = "", seed: int | None = None,
              scale: str = "") -> Path:
    """Write ``model`` (a ``TiedLM``) and ``tokenizer`` (a ``tokenizers.Tokenizer``, optional) as a transformers
    folder at ``out`` (created; an existing non-empty folder is refused). Returns the folder."""
    from tiedlm_lib.model.tied import TiedLM

    if not isinstance(model, TiedLM):
        raise TypeError(f"export_hf exports a tiedlm_lib TiedLM, got {type(model).__name__}")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty folder: name a new one")
    tmp = out.with_name(f".{out.name}.partial")  # written whole, then moved into place: never half a folder
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _write(model, tmp, tokenizer, {"format": FORMAT, "run": run_name, "seed": seed, "scale": scale,
                                       "trained depth": model.config.trained_depth})
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _write(model, out: Path, tokenizer, mark: dict) -> None:
    from tiedlm_lib.data import PAD_ID

    cfg = {k: getattr(model.config, k) for k in model.config.__dataclass_fields__}
    state = {f"model.{k}": v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt", "tiedlm": FORMAT})
    (out / MODELING).write_text(modeling_source())
    hf = {"architectures": ["TiedLMForCausalLM"], "model_type": "tiedlm", "tiedlm": cfg, "depth": None,
          "looped": True, "auto_map": {"AutoConfig": "modeling_tiedlm.TiedLMConfig",
                                       "AutoModelForCausalLM": "modeling_tiedlm.TiedLMForCausalLM"},
          "vocab_size": model.config.vocab_size, "hidden_size": model.config.d_model,
          "num_attention_heads": model.config.n_heads, "max_position_embeddings": model.config.max_seq_len,
          "pad_token_id": PAD_ID, "eos_token_id": 1, "bos_token_id": None, "use_cache": False, "dtype": "float32",
          "tiedlm_token_offset": 0, "tiedlm_export": mark}
    atomic_write_text(out / "config.json", json.dumps(hf, indent=1))
    atomic_write_text(out / "generation_config.json", json.dumps(
        {"pad_token_id": PAD_ID, "eos_token_id": 1, "use_cache": False, "do_sample": False}, indent=1))
    if tokenizer is not None:
        _tokenizer_files(tokenizer, out, model.config.max_seq_len)


def export_run(name: str, seed: int = 0, scale: str = "cpu", out: str | Path = ".", root=None) -> Path:
    """Export a shipped (or cached) run with its tokenizer; never trains (a missing run is an error)."""
    from tiedlm_lib.data import get_tokenizer, load_corpus, split_corpus, split_paper
    from tiedlm_lib.runs import get_run

    run = get_run(name, scale, seed, root=root, train_if_missing=False, device="cpu")
    d = run.config.data
    ds = load_corpus(d)
    train = (split_paper(ds, d.val_fraction) if d.split == "paper" else split_corpus(ds, d.val_fraction,
                                                                                      d.split_seed))[0]
    return export_hf(run.model.float(), out, get_tokenizer(d, train), run_name=name, seed=seed, scale=scale)


def is_export(folder: str | Path) -> bool:
    """Whether ``folder`` is a transformers folder written by ``export_hf`` (its config carries the export's mark)."""
    p = Path(folder) / "config.json"
    try:
        return p.is_file() and json.loads(p.read_text()).get("tiedlm_export", {}).get("format") == FORMAT
    except (ValueError, AttributeError):
        return False


class ExportedDepthModel(torch.nn.Module):
    """An exported folder, loaded through transformers, as a ``schedules.DepthModel``: the folder's own copy of
    ``TiedLM`` implements the interface, so the protocol runs the exported code, not the library's. Its token ids are
    the library's (``token_offset`` 0)."""

    token_offset = 0
    dense = False

    def __init__(self, hf_model):
        super().__init__()
        self.hf = hf_model
        self.layout = hf_model.model.config.layout
        self.vocab_size = hf_model.config.vocab_size
        self.train(hf_model.training)

    @property
    def config(self):
        return self.hf.config

    def core_state(self, tokens: torch.Tensor, p) -> torch.Tensor:
        return self.hf.model.core_state(tokens, p)

    def iter_prefix(self, tokens: torch.Tensor, applications):
        return self.hf.model.iter_prefix(tokens, applications)

    def finish(self, z: torch.Tensor) -> torch.Tensor:
        return self.hf.model.finish(z)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return self.hf.model.head(h)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.hf.model(tokens)


def load_export(folder: str | Path, device: str = "cpu", dtype=torch.float32):
    """(ExportedDepthModel, tokenizer) of an exported folder. Its modeling file is the folder's own (written by
    ``export_hf``), so it is loaded with ``trust_remote_code`` only for a folder that carries the export's mark."""
    import transformers

    if not is_export(folder):
        raise ValueError(f"{folder} is not a folder written by python -m tiedlm_lib export-hf (no tiedlm_export mark "
                         "in its config.json)")
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), trust_remote_code=True,
                                                              local_files_only=True, dtype=dtype)
    tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=True)
    return ExportedDepthModel(model.eval().to(device)), tok
