"""A Hugging Face causal LM as a depth model (``schedules.DepthModel``): the user's own checkpoint under paper B's
schedules, the readout probes and the DCP decomposition.

The protocol asks a model for the state after a *schedule*'s core — its layers run in another order, fewer of them,
one of them again, or an update re-added (``tiedlm_lib.model.schedules``) — and for the rest of the readout from a
state. ``HFDepthModel`` gets both from the model's own forward: for one call it replaces the stack of decoder layers
with the sequence the schedule needs, made of the *same* layer modules, and sets the config's layer count (and, for
Qwen2/3, the per-layer attention types) to match. So the family's own code still builds the attention mask, the
rotary or learned positions and calls each layer; nothing of a layer is re-implemented. Five small modules join
the sequence where needed: ``_Capture`` ends it and stops the forward with the state it receives (``core_state``:
the prelude and core only, no head computed); ``_Inject`` starts it with a given state in place of the embeddings
(``finish``: the coda and the final norm, whose output a hook returns); ``_Reuse`` re-adds the last update
(``frozen``), from the inputs ``_Recorded`` keeps; ``_Tap`` keeps the state after a layer (``iter_prefix``: every
prefix of one forward). A family therefore needs only three facts (``Family``: where its
layers, their count and its final norm are; the head is ``get_output_embeddings()``); a family it does not know is
refused with the class name and how to add one (``HOW_TO_ADD``).

A looped model is a stack in which the same layer module appears several times in a row (weights shared by
identity): ``layout`` names each run of one module a loop (``"S S A*8 S"``), every other layer a standard layer, as
``TiedLM`` layouts do, so ``schedules.plan(model.layout, schedule, k)`` applies unchanged. A dense model's layout is
all standard layers (``"S S S S"``: all core), and ``repeat`` is refused on it, for the reason paper B gives (its
negative control ran it anyway): the linchpin control is realisable only with weight sharing; repeating a dense
layer makes another model. Every forward runs
without a KV cache: a shared layer keeps one ``layer_idx``, so a cache would let its later calls attend to the keys
of its earlier ones (a looped model's own cached forward is wrong for that reason; a test shows it).

Token ids: the library marks padding by id 0 (``data.PAD_ID``) and never scores it, while a Hugging Face
vocabulary uses id 0 for a real token. ``token_offset=1`` (the default) shifts the vocabulary: library id t is the
model's id t − 1, and the logits gain a column 0 at −1e9 (pad: never predicted, never a target). Sequences are
right-padded (the library's batches are), so the causal mask keeps pad positions out of every real position's
context. ``token_offset=0`` is for a model trained on the library's own ids (section 13's dense control).

``transformers`` is an optional dependency (``pip install tiedlm[hf]``); this module needs it only for a model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from tiedlm_lib.model.schedules import REPEAT_ON_DENSE, REUSE, Plan, check_plan, plan, split_layout
from tiedlm_lib.model.tied import eval_mode

LOOPED_MARK = "tiedlm_looped"  # a config attribute: this checkpoint's equal consecutive layers are one loop
PAD_LOGIT = -1e9  # the pad column's logit under token_offset=1: probability 0 (exp underflows), log finite (float16:
# half its lowest value, -1e9 does not fit)


@dataclass(frozen=True)
class Family:
    """Where a family keeps what a schedule rearranges: dotted attribute paths from the ``*ForCausalLM`` model."""

    layers: str  # the nn.ModuleList of decoder layers, iterated by the family's forward
    count: str  # the config attribute the forward may slice the layers by
    norm: str  # the final norm, applied to the last layer's output
    # the head is the model's get_output_embeddings() (the transformers API, stable across versions: GPT-NeoX's was
    # embed_out and is lm_head in transformers 5)


FAMILIES: dict[str, Family] = {
    "GPT2LMHeadModel": Family("transformer.h", "n_layer", "transformer.ln_f"),
    "GPTNeoXForCausalLM": Family("gpt_neox.layers", "num_hidden_layers", "gpt_neox.final_layer_norm"),
    **{name: Family("model.layers", "num_hidden_layers", "model.norm")
       for name in ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")},
}
HOW_TO_ADD = ("add a Family(layers=..., count=..., norm=...) to tiedlm_lib.hub.adapter.FAMILIES under the model's "
              "class name: the dotted paths of its nn.ModuleList of decoder layers, the config attribute its forward "
              "slices them by, and its final norm (see the entries for GPT-2, GPT-NeoX and Llama); "
              "or implement tiedlm_lib.model.schedules.DepthModel (layout, core_state, finish, head) for it directly")


REFUSED: dict[str, str] = {
    "Inkling2Loop": (
        "Inkling2Loop (transformers 5.24) is looped, but not as the protocol needs: each of its loop_num_passes passes "
        "restarts from the pre-loop state and receives the previous pass only through gated messages retrieved from "
        "that pass's block states, so a pass is not an application of a block to the previous state (z <- z + f(z)). "
        "Fewer passes (loop_num_passes = k) is defined, but the controls that rearrange applications (repeat, "
        "suffix, frozen) have no defined input, and the adapter's stack of layer positions cannot express a pass; "
        "it is refused rather than read as something it is not (docs/library.md)"),
}


def refused_reason(class_name: str) -> str | None:
    """Why a looped family the protocol cannot read is refused (``REFUSED``), by its class name; None otherwise."""
    return next((why for prefix, why in REFUSED.items() if class_name.startswith(prefix)), None)


def _get(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _set(obj, path: str, value) -> None:
    *head, last = path.split(".")
    for part in head:
        obj = getattr(obj, part)
    setattr(obj, last, value)


def _layout(layers: Sequence[nn.Module]) -> tuple[str, list[str]]:
    """The TiedLM-style layout of a stack (runs of one module are loops) and each position's block name."""
    tokens, names, letters, std = [], [], iter("ABCDEFGHIJKLMNOPQRUVWXYZ"), 0
    i = 0
    while i < len(layers):
        j = i
        while j + 1 < len(layers) and layers[j + 1] is layers[i]:
            j += 1
        if j > i:
            letter = next(letters)
            tokens.append(f"{letter}*{j - i + 1}")
            names += [letter] * (j - i + 1)
        else:
            tokens.append("S")
            names.append(f"S{std}")
            std += 1
        i = j + 1
    if len({id(m) for m in layers}) != len(set(names)):
        raise ValueError("a layer module appears in two separate places of the stack: only consecutive repeats (a "
                         "loop) have a layout")
    return " ".join(tokens), names


def _same_layer(a: nn.Module, b: nn.Module) -> bool:
    """Two layer modules of one class whose parameters and buffers are all exactly equal."""
    if type(a) is not type(b):
        return False
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(sa[k].shape == sb[k].shape and torch.equal(sa[k], sb[k]) for k in sa)


def tie_repeated_layers(model: nn.Module) -> list[tuple[int, int]]:
    """Make a loaded looped model looped again: each run of consecutive decoder layers with exactly equal weights
    (and, for Qwen2/3, one attention kind) becomes one shared module, the run's first, in place. ``save_pretrained``
    cannot write a stack whose layers share a module (``save_untied`` writes it with a copy per position), so a
    looped checkpoint comes back from disk as a stack of equal layers. Returns the runs tied, (first position,
    length), in order; none for a dense model (independently trained layers are never exactly equal)."""
    fam = _family(model)
    layers = list(_get(model, fam.layers))
    types = getattr(model.config, "layer_types", None) or [None] * len(layers)
    runs, i = [], 0
    while i < len(layers):
        j = i
        while j + 1 < len(layers) and types[j + 1] == types[i] and (layers[j + 1] is layers[i]
                                                                    or _same_layer(layers[i], layers[j + 1])):
            j += 1
        if j > i:
            runs.append((i, j - i + 1))
            layers[i:j + 1] = [layers[i]] * (j - i + 1)
        i = j + 1
    _set(model, fam.layers, nn.ModuleList(layers))
    return runs


def save_untied(model: nn.Module, folder, **kwargs) -> None:
    """``save_pretrained`` of a looped model, every position of the stack with its own copy of its layer for the
    duration (the weights written once per position; the model is left as it was), its config marked looped
    (``LOOPED_MARK``): the dcp command ties the copies again for a marked checkpoint (``tie_repeated_layers``), and
    for no other unless asked (``--retie``), so a dense model whose layers happen to be equal (a depth-upscaled one)
    stays dense. ``kwargs`` go to ``save_pretrained``."""
    import copy

    fam = _family(model)
    layers, seen, own = list(_get(model, fam.layers)), set(), []
    for m in layers:  # a copy for each repeat only: memory grows by the loop's extra positions, not the model
        own.append(copy.deepcopy(m) if id(m) in seen else m)
        seen.add(id(m))
    _set(model, fam.layers, nn.ModuleList(own))
    was = getattr(model.config, LOOPED_MARK, None)
    setattr(model.config, LOOPED_MARK, True)  # the mark by which the loader ties the copies again
    try:
        model.save_pretrained(folder, **kwargs)
    finally:
        _set(model, fam.layers, nn.ModuleList(layers))
        if was is None:
            delattr(model.config, LOOPED_MARK)
        else:
            setattr(model.config, LOOPED_MARK, was)


def _check_stack(model: nn.Module, family: Family, layers: Sequence[nn.Module]) -> None:
    """The stack is the one the model's forward runs: the config's layer count (the forward may slice by it) and,
    for Qwen2/3, one attention kind per position, the same at every position of a shared layer."""
    name, n = type(model).__name__, getattr(model.config, family.count)
    if n != len(layers):
        raise ValueError(f"{name}: config.{family.count} = {n} but {family.layers} holds {len(layers)} layers; its "
                         f"forward may run only the first {n}: set config.{family.count} to the stack's length")
    types = getattr(model.config, "layer_types", None)
    if types is None:
        return
    if len(types) != len(layers):
        raise ValueError(f"{name}: config.layer_types names {len(types)} layers, the stack holds {len(layers)}")
    kinds: dict[int, set] = {}
    for m, t in zip(layers, types):
        kinds.setdefault(id(m), set()).add(t)
    mixed = [sorted(k) for k in kinds.values() if len(k) > 1]
    if mixed:
        raise ValueError(f"{name}: a shared layer sits at positions of different attention kinds ({mixed[0]}); "
                         "a loop's positions must share one kind (config.layer_types)")


def _family(model: nn.Module) -> Family:
    """The family of a model's class, matched along its MRO (a subclass keeps its family), or a clear refusal."""
    known = [c.__name__ for c in type(model).__mro__ if c.__name__ in FAMILIES]
    why = refused_reason(type(model).__name__)
    if why:
        raise ValueError(why)
    if not known:
        raise ValueError(f"{type(model).__name__} is not a supported family (supported: "
                         f"{', '.join(sorted(FAMILIES))}); to add it, {HOW_TO_ADD}")
    return FAMILIES[known[0]]


class _Stopped(Exception):
    """Raised inside the model's forward to return a state from the middle of it."""

    def __init__(self, value: torch.Tensor):
        super().__init__("a state caught inside the forward")
        self.value = value


class _Capture(nn.Module):
    """The last module of a swapped stack: stops the forward with the state it receives."""

    def forward(self, hidden_states, *args, **kwargs):
        raise _Stopped(hidden_states)


class _Inject(nn.Module):
    """The first module of a swapped stack: the given state in place of the embeddings."""

    def __init__(self, z: torch.Tensor):
        super().__init__()
        self.z = z

    def forward(self, hidden_states, *args, **kwargs):
        if hidden_states.shape != self.z.shape:
            raise RuntimeError(f"the injected state has shape {tuple(self.z.shape)}, the forward's "
                               f"{tuple(hidden_states.shape)}")
        return self.z


class _Recorded(nn.Module):
    """A layer call that keeps its input, the state before the update it writes (for ``_Reuse``)."""

    def __init__(self, layer: nn.Module, memory: dict):
        super().__init__()
        self.layer, self.memory = layer, memory

    def forward(self, hidden_states, *args, **kwargs):
        self.memory["prev"] = hidden_states
        return self.layer(hidden_states, *args, **kwargs)


class _Tap(nn.Module):
    """A pass-through module that keeps the state it receives (``iter_prefix``)."""

    def __init__(self, store: list):
        super().__init__()
        self.store = store

    def forward(self, hidden_states, *args, **kwargs):
        self.store.append(hidden_states)
        return hidden_states


class _Reuse(nn.Module):
    """``frozen``: z_{i+1} = z_i + (z_i − z_{i−1}), the last update re-added without calling a layer."""

    def __init__(self, memory: dict):
        super().__init__()
        self.memory = memory

    def forward(self, hidden_states, *args, **kwargs):
        prev, self.memory["prev"] = self.memory["prev"], hidden_states
        return hidden_states + (hidden_states - prev)


def model_ids(tokens: torch.Tensor, vocab_size: int, token_offset: int) -> torch.Tensor:
    """The library's (B, T) token ids as the model's: checked against the library-side vocabulary ``vocab_size``
    (the model's shifted by ``token_offset``) and for right padding only, then shifted."""
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape (batch, seq_len), got {tuple(tokens.shape)}")
    bad = (tokens < 0) | (tokens >= vocab_size)
    if bad.any():
        raise ValueError(f"token id {int(tokens[bad][0])} is outside the vocabulary [0, {vocab_size}) "
                         f"(the model's {vocab_size - token_offset} ids shifted by token_offset "
                         f"{token_offset})")
    pad = tokens == 0
    if (pad[:, :-1] & ~pad[:, 1:]).any():  # a pad before a real token: left or interior padding
        row = int((pad[:, :-1] & ~pad[:, 1:]).any(1).nonzero()[0])
        raise ValueError(f"row {row} of the batch has padding (id 0) before a real token: the adapter takes no "
                         "attention mask, so only right padding is read correctly (real positions never attend "
                         "to pads after them); pad on the right, or pass one document per row unpadded")
    return (tokens - token_offset).clamp_min(0)  # pad (0) becomes a real id at positions nothing scores


class HFDepthModel(nn.Module):
    """A Hugging Face causal LM of a known family as a ``schedules.DepthModel`` (see the module docstring)."""

    def __init__(self, model: nn.Module, token_offset: int = 1):
        super().__init__()
        family = _family(model)
        if token_offset not in (0, 1):
            raise ValueError(f"token_offset must be 1 (a Hugging Face vocabulary: library id t is the model's id t-1, "
                             f"0 is pad) or 0 (a model trained on the library's ids), got {token_offset!r}")
        self.hf, self.family, self.token_offset = model, family, token_offset
        for what, path in (("layer stack", family.layers), ("final norm", family.norm)):
            try:  # both paths read once here, so a model without one is refused by name now, not mid-protocol
                _get(model, path)
            except AttributeError:
                raise ValueError(f"{type(model).__name__} has no {what} at {path!r}, where its family entry "
                                 f"(tiedlm_lib.hub.adapter.FAMILIES) expects it; {HOW_TO_ADD}") from None
        self.layers = list(_get(model, self.family.layers))
        _check_stack(model, family, self.layers)
        self.layout, self.names = _layout(self.layers)
        self.blocks = dict(zip(self.names, self.layers))
        types = getattr(model.config, "layer_types", None)  # Qwen2/3: each layer's attention kind, by position
        self._types = None if types is None else list(types)
        self.dense = "*" not in self.layout
        self.vocab_size = model.config.vocab_size + token_offset
        self.train(model.training)  # the wrapper's mode is the model's (nn.Module starts in training mode)

    @property
    def config(self):
        return self.hf.config

    def norm(self) -> nn.Module:
        return _get(self.hf, self.family.norm)

    # ------------------------------------------------------------------ the stack, swapped for one call
    @contextlib.contextmanager
    def _stack(self, order: Sequence[nn.Module]) -> Iterator[None]:
        """The model's forward runs ``order`` in place of its layers for the duration (restored on exit)."""
        fam, cfg = self.family, self.hf.config
        old_layers, old_count = _get(self.hf, fam.layers), getattr(cfg, fam.count)
        old_types = getattr(cfg, "layer_types", None)
        _set(self.hf, fam.layers, nn.ModuleList(order))  # the same modules: no copy of any weight
        setattr(cfg, fam.count, len(order))
        if self._types is not None:  # keyed at call time: a deep copy has other module ids
            kind = {id(m): t for m, t in zip(self.layers, self._types)}
            cfg.layer_types = [kind.get(id(getattr(m, "layer", m)), "full_attention") for m in order]
        try:
            yield
        finally:
            _set(self.hf, fam.layers, old_layers)
            setattr(cfg, fam.count, old_count)
            if self._types is not None:
                cfg.layer_types = old_types

    def order(self, p: Plan) -> list[nn.Module]:
        """The modules the plan's prelude and core run, in order (layers, with ``_Recorded`` / ``_Reuse`` for a
        re-added update)."""
        check_plan(self.layout, p)
        if self.dense and p.schedule == "repeat":
            raise ValueError(REPEAT_ON_DENSE)
        out: list[nn.Module] = [self.blocks[n] for n in p.prelude]
        if REUSE not in p.core:
            return out + [self.blocks[n] for n in p.core]
        memory: dict = {}
        return out + [_Reuse(memory) if n == REUSE else _Recorded(self.blocks[n], memory) for n in p.core]

    def _ids(self, tokens: torch.Tensor) -> torch.Tensor:
        return model_ids(tokens, self.vocab_size, self.token_offset)

    # ------------------------------------------------------------------ the DepthModel interface
    def core_state(self, tokens: torch.Tensor, p: Plan) -> torch.Tensor:
        """(B, T) -> (B, T, d): the state after plan ``p``'s prelude and core, from the model's own forward."""
        return self._state_after(tokens, self.order(p))

    def _state_after(self, tokens: torch.Tensor, order: Sequence[nn.Module]) -> torch.Tensor:
        """The state after running the modules ``order`` from the embeddings (the family's own forward)."""
        with self._stack([*order, _Capture()]):
            try:
                self.hf(self._ids(tokens), use_cache=False)
            except _Stopped as s:
                return s.value
        raise RuntimeError(f"{type(self.hf).__name__}'s forward did not call its layers: the family entry "
                           f"{self.family} does not match the model")

    def iter_prefix(self, tokens: torch.Tensor, applications: Sequence[int]) -> Iterator[tuple[int, torch.Tensor]]:
        """(k, the state after prefix(k)'s core) for each k in sorted(applications), from one forward: the core's
        first max(k) layers with a ``_Tap`` after each requested k (``schedules.prefix_states`` checks the k)."""
        ks = sorted(set(applications))
        p = self.order(plan(self.layout, "prefix", ks[-1]))
        n_pre, store = len(p) - ks[-1], []
        order = list(p[:n_pre])
        for i, layer in enumerate(p[n_pre:]):
            order.append(layer)
            if i + 1 in ks:
                order.append(_Tap(store))
        self._state_after(tokens, order)
        yield from zip(ks, store)

    def finish(self, z: torch.Tensor) -> torch.Tensor:
        """(B, T, d) -> (B, T, d): the coda and the final norm on a core state (the head's input)."""
        _, _, coda = split_layout(self.layout)

        def hook(module, args, out):
            raise _Stopped(out)

        handle = self.norm().register_forward_hook(hook)
        dummy = torch.zeros(z.shape[:2], dtype=torch.long, device=z.device)  # replaced by z at once
        try:
            with self._stack([_Inject(z.to(self.dtype)), *(self.blocks[s.name] for s in coda)]):
                self.hf(dummy, use_cache=False)
        except _Stopped as s:
            return s.value
        finally:
            handle.remove()
        raise RuntimeError(f"{type(self.hf).__name__}'s forward did not reach its final norm {self.family.norm}")

    @property
    def dtype(self) -> torch.dtype:
        """The weights' dtype (a bfloat16 or float16 checkpoint is kept in its own dtype)."""
        return self.hf.get_output_embeddings().weight.dtype

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """(B, T, d) -> (B, T, V + token_offset) logits, in float32 whatever the weights' dtype: the head runs in
        the weights' dtype on a state of any dtype (the probes hand it float32 states)."""
        return self._shifted(self.hf.get_output_embeddings()(h.to(self.dtype)).float())

    def _shifted(self, logits: torch.Tensor) -> torch.Tensor:
        """The model's logits in the library's ids: under token_offset=1, a pad column first."""
        if not self.token_offset:
            return logits
        pad = max(PAD_LOGIT, torch.finfo(logits.dtype).min / 2)
        return torch.cat([logits.new_full((*logits.shape[:-1], 1), pad), logits], -1)

    def forward(self, tokens: torch.Tensor, backprop: str = "full") -> torch.Tensor:
        """(B, T, V + token_offset) logits of the model as trained, with gradients: what the library's training step
        calls (``training.supervised_loss``); only exact backprop applies to a model without a tied loop."""
        if backprop != "full":
            raise ValueError(f"a Hugging Face model trains with backprop='full' only, got {backprop!r}")
        return self._shifted(self.hf(self._ids(tokens), use_cache=False).logits.float())

    @torch.no_grad()
    def logits(self, tokens: torch.Tensor, p: Plan | None = None) -> torch.Tensor:
        """(B, T, V + token_offset) logits of the schedule ``p`` (None: the model's own forward as trained), in eval
        mode."""
        with eval_mode(self):
            if p is None:
                return self(tokens)
            return self.head(self.finish(self.core_state(tokens, p)))
