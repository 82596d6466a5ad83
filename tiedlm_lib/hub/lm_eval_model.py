"""lm-evaluation-harness on a tied model at a chosen depth: the registered model ``tiedlm``.

    pip install -e .[eval]
    python -m tiedlm_lib.hub.lm_eval_model --model tiedlm --model_args pretrained=./v3-hf,depth=4 \\
        --tasks my_task --include_path ./my_tasks

``model_args``: ``pretrained=DIR`` (a folder written by ``export-hf``) or ``run=NAME`` with ``seed``, ``scale`` and
``runs`` (a run of the runs cache), and ``depth`` (every tied loop that many times; default the trained depth).
Running this module registers the model and hands its arguments to lm-eval's command line; in Python,
``import tiedlm_lib.hub.lm_eval_model`` registers it for ``lm_eval.simple_evaluate(model="tiedlm", ...)``.

The three request kinds, batch size 1, no KV cache (a tied loop's iterations would share one cache slot):
``loglikelihood`` scores a continuation after its context (an empty context conditions on <eos>, the library's
document separator), ``loglikelihood_rolling`` a whole text in windows of the model's context (lm-eval's rolling
windows: every token predicted once, each with as much context as fits), ``generate_until`` decodes greedily until
a stop string or ``max_gen_toks``. Token ids are the library's (pad 0 is never a target).
"""

from __future__ import annotations

import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

EOS_ID = 1  # data.SPECIAL_TOKENS: <eos>, the separator a context-free score conditions on


@register_model("tiedlm")
class TiedLMHarness(LM):
    """A tied model for lm-eval: an ``export-hf`` folder (``pretrained``) or a run (``run``), read at ``depth``."""

    def __init__(self, pretrained: str | None = None, run: str | None = None, seed: int = 0, scale: str = "cpu",
                 runs: str | None = None, depth: int | None = None, device: str = "cpu", max_gen_toks: int = 32,
                 **kwargs):
        super().__init__()
        device = str(device or "cpu")
        if device.startswith("cuda") and not torch.cuda.is_available():
            device = "cpu"  # lm-eval's command line asks for cuda by default; this machine has none
        if (pretrained is None) == (run is None):
            raise ValueError("model_args needs exactly one of pretrained=DIR (an export-hf folder) or run=NAME")
        if pretrained is not None:
            from tiedlm_lib.hub.export import load_export

            loaded, tok = load_export(pretrained, device)
            self.model = loaded.hf.model  # the folder's own TiedLM
            self._encode = lambda t: tok(t, add_special_tokens=False)["input_ids"]
            self._decode = tok.decode
        else:
            from tiedlm_lib.data import get_tokenizer, load_corpus, split_corpus, split_paper
            from tiedlm_lib.runs import get_run

            r = get_run(run, scale, int(seed), root=runs, train_if_missing=False, device=device)
            d = r.config.data
            ds = load_corpus(d)
            train = split_paper(ds, d.val_fraction)[0] if d.split == "paper" else split_corpus(
                ds, d.val_fraction, d.split_seed)[0]
            tok = get_tokenizer(d, train)
            self.model = r.model
            self._encode = lambda t: tok.encode(t).ids
            self._decode = tok.decode
        self.model.eval()
        self.depth = None if depth in (None, "", "None") else int(depth)
        if self.depth is not None:
            self.model._check_depth(self.depth)
        self.max_len = self.model.config.max_seq_len
        self.max_gen_toks = int(max_gen_toks)
        self._device = device

    @torch.no_grad()
    def _logprobs(self, ids: list[int]) -> torch.Tensor:
        """(T, V) log-probabilities of the next token after each of ``ids`` (at most the model's context)."""
        x = torch.tensor([ids[-self.max_len:]], device=self._device)
        return self.model(x, depth=self.depth)[0].float().log_softmax(-1).cpu()

    def _score(self, context: list[int], target: list[int]) -> tuple[float, bool]:
        """log p(target | context) and whether greedy decoding gives ``target``, the context cut from the left."""
        seq = (context + target)[-(self.max_len + 1):]
        lp = self._logprobs(seq[:-1])[-len(target):]
        tg = torch.tensor(seq[-len(target):])
        return float(lp.gather(1, tg[:, None]).sum()), bool((lp.argmax(-1) == tg).all())

    def _split(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Token ids of a context and its continuation: the pair encoded whole and cut where the context's own
        encoding ends, so a token that spans the boundary is not split in two (lm-eval's convention)."""
        if not context:
            return [EOS_ID], self._encode(continuation)
        whole, ctx = self._encode(context + continuation), self._encode(context)
        return whole[:len(ctx)], whole[len(ctx):]

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        out = []
        for req in requests:
            ctx, cont = self._split(*req.args)
            if not cont:
                raise ValueError(f"an empty continuation after {req.args[0][-40:]!r}: nothing to score")
            out.append(self._score(ctx, cont))
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        out = []
        for req in requests:
            windows = map(make_disjoint_window, get_rolling_token_windows(
                self._encode(req.args[0]), prefix_token=EOS_ID, max_seq_len=self.max_len, context_len=1))
            out.append(sum(self._score(ctx, pred)[0] for ctx, pred in windows))
        return out

    @torch.no_grad()
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out = []
        for req in requests:
            context, kw = req.args
            until = kw.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            n = int(kw.get("max_gen_toks", self.max_gen_toks))
            ids = (self._encode(context) or [EOS_ID])[-(self.max_len - 1):]
            new: list[int] = []
            for _ in range(min(n, self.max_len - len(ids))):
                new.append(int(self._logprobs(ids + new)[-1].argmax()))
                text = self._decode(new)
                if new[-1] == EOS_ID or any(u in text for u in until):
                    break
            text = self._decode(new)
            for u in until:
                text = text.split(u)[0]
            out.append(text)
        return out


if __name__ == "__main__":
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
