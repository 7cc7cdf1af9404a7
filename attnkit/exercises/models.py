"""The small models and batches the checkers run a learner's code on, never the notebook's own:
a toy seq2seq model of any vocabulary that records what it is fed, a recording wrapper around a
kit model, tiny seeded Seq2SeqTransformers, the committed adder (where it loads) and batches of
sums. Every model is seeded without touching the global random state."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from torch import Tensor, nn

from ..adder.data import encode_sources, encode_targets
from ..adder.model import Seq2SeqConfig, Seq2SeqTransformer
from ..interp.ablation import Problems
from .checking import case_generator, case_rng


def answers(lengths: list[int], n_pos: int, symbols: list[int], bos: int, eos: int, pad: int, seed: int) -> Tensor:
    """(batch, n_pos) rows `<s> symbols… </s> <pad>…`, row i holding lengths[i] symbols."""
    gen = case_generator(seed)
    rows = torch.full((len(lengths), n_pos), pad, dtype=torch.long)
    for i, n in enumerate(lengths):
        body = torch.tensor(symbols)[torch.randint(len(symbols), (n,), generator=gen)]
        rows[i, 0], rows[i, 1 : n + 1], rows[i, n + 1] = bos, body, eos
    return rows


class ToySeq2Seq(nn.Module):
    """A stand-in for the adder: model(src, tgt) -> (batch, tgt_pos, vocab) logits, causal over tgt
    (position t depends on tgt[:, :t+1] and all of src), of any vocabulary. It records each call,
    so that a checker can tell what the learner fed it, and refuses inputs the adder could not use
    with an error that says what is wrong. With `step`, its logits are rounded to multiples of
    `step`: exact ties between ids, which greedy decoding must break towards the lowest id."""

    def __init__(self, vocab: int, seed: int, d: int = 12, max_pos: int = 24, step: float = 0.0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)  # never the global RNG: a checker leaves it alone

        def param(*shape: int, scale: float = 1.0) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=gen) * scale)

        self.src_embed, self.tgt_embed, self.prefix_embed = param(vocab, d), param(vocab, d), param(vocab, d)
        self.pos = param(max_pos, d)
        self.unembed = param(d, vocab, scale=3 / d**0.5)
        self.vocab, self.step = vocab, step
        self.init_args = (vocab, seed, d, max_pos, step)  # what rebuilds it in the learner's process (grading)
        self.calls: list[tuple[Tensor, Tensor]] = []

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        for name, x in (("src", src), ("the decoder input", tgt)):
            if not isinstance(x, Tensor):
                raise TypeError(f"model(src, tgt) takes tensors of token ids; {name} is a {type(x).__name__}")
            if x.dim() != 2:
                raise ValueError(f"model(src, tgt) takes (batch, pos) token ids; {name} has shape {tuple(x.shape)}")
            if x.is_floating_point() or x.dtype == torch.bool:
                raise TypeError(f"token ids must be integers (torch.long); {name} is {x.dtype}")
        if src.size(0) != tgt.size(0):
            raise ValueError(f"src has {src.size(0)} rows but the decoder input has {tgt.size(0)}")
        for name, x in (("src", src), ("the decoder input", tgt)):
            if x.numel() and (int(x.min()) < 0 or int(x.max()) >= self.vocab):
                raise IndexError(f"{name} holds an id outside this model's vocabulary 0..{self.vocab - 1}")
        if tgt.size(1) == 0:
            raise ValueError("the decoder input is empty (it starts with <s>)")
        if src.size(1) > self.pos.size(0):
            raise ValueError(f"src has {src.size(1)} positions, more than this model's {self.pos.size(0)}")
        if tgt.size(1) > self.pos.size(0):
            raise ValueError(
                f"the decoder input has {tgt.size(1)} positions, more than this model's {self.pos.size(0)}"
            )
        self.calls.append((src.detach().clone(), tgt.detach().clone()))
        return self.logits(src, tgt)

    def logits(self, src: Tensor, tgt: Tensor) -> Tensor:
        """The forward pass without the checks and the record (for the checker's own use)."""
        n = tgt.size(1)
        context = 2 * torch.tanh(self.src_embed[src] + self.pos[: src.size(1)].flip(0)).mean(1, keepdim=True)
        prefix = self.prefix_embed[tgt].cumsum(1) / torch.arange(1, n + 1).view(1, n, 1)  # causal mean
        logits = torch.tanh(context + self.tgt_embed[tgt] + prefix + self.pos[:n]) @ self.unembed
        return (logits / self.step).round() * self.step if self.step else logits


class Recording(nn.Module):
    """A kit model that records its calls, like ToySeq2Seq."""

    def __init__(self, inner: Seq2SeqTransformer):
        super().__init__()
        self.inner = inner.eval()
        self.calls: list[tuple[Tensor, Tensor]] = []

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        if isinstance(src, Tensor) and isinstance(tgt, Tensor) and src.dim() == tgt.dim() == 2:
            cfg = self.inner.cfg
            if src.size(0) != tgt.size(0):
                raise ValueError(f"src has {src.size(0)} rows but the decoder input has {tgt.size(0)}")
            for name, x in (("src", src), ("the decoder input", tgt)):
                if x.numel() and not x.is_floating_point() and (int(x.min()) < 0 or int(x.max()) >= cfg.vocab_size):
                    raise IndexError(f"{name} holds an id outside this model's vocabulary 0..{cfg.vocab_size - 1}")
            if tgt.size(1) > cfg.max_tgt_len:
                raise ValueError(
                    f"the decoder input has {tgt.size(1)} positions, more than this model's {cfg.max_tgt_len}"
                )
            self.calls.append((src.detach().clone(), tgt.detach().clone()))
        return self.inner(src, tgt)

    def logits(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.inner(src, tgt)


def tiny_adder(seed: int) -> Recording:
    """A freshly initialised small Seq2SeqTransformer (the notebook's vocabulary, PAD = 13)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Seq2SeqTransformer(Seq2SeqConfig(d_model=16, n_heads=2, n_enc_layers=1, n_dec_layers=1, d_ff=24))
    return Recording(model)


@lru_cache(maxsize=1)
def committed_state() -> tuple[Seq2SeqConfig, dict] | None:
    """The committed adder's config and weights, or None where it cannot be loaded."""
    try:
        from ..adder.pretrained import CHECKPOINT, adder_config_problems
        from ..core.checkpoint import config_from, load_checkpoint

        payload = load_checkpoint(CHECKPOINT, kind="adder")
        cfg = config_from(Seq2SeqConfig, payload["config"], CHECKPOINT, adder_config_problems)
        return cfg, payload["state_dict"]
    except Exception:
        return None


def committed_adder() -> Recording | None:
    found = committed_state()
    if found is None:
        return None
    cfg, state = found
    try:
        with torch.random.fork_rng(devices=[]):
            model = Seq2SeqTransformer(cfg)
        model.load_state_dict(state)
    except Exception:
        return None
    return Recording(model)


def sums(pairs: list[tuple[int, int]], n_digits: int = 3) -> tuple[Tensor, Tensor]:
    a, b = np.array([x for x, _ in pairs]), np.array([y for _, y in pairs])
    return encode_sources(a, b, n_digits), encode_targets(a + b, n_digits)


def tiny_ablation_model(seed: int) -> Seq2SeqTransformer:
    """A small encoder-decoder unlike the notebook's adder (3 heads, d_head 4, 1 + 2 layers,
    two-digit operands), seeded without touching the global RNG."""
    cfg = Seq2SeqConfig(n_digits=2, d_model=12, n_heads=3, n_enc_layers=1, n_dec_layers=2, d_ff=24)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Seq2SeqTransformer(cfg)
        with torch.no_grad():  # larger weights than the default init: sharper, more varied gradients
            for p in model.parameters():
                if p.dim() == 2:
                    p.mul_(2.5)
    return model.eval()


def sum_batches(model, sizes: list[int], seed: int) -> list[tuple[Tensor, Tensor, Tensor]]:
    """Batches (src, tgt_in, gold) of two-digit sums with answers of 1 to 3 digits (PAD in gold)."""
    rng = case_rng(seed)
    n = sum(sizes)
    a, b = rng.integers(0, 100, n), rng.integers(0, 100, n)
    a[:2], b[:2] = [3, 99], [4, 98]  # a one-digit and a three-digit answer
    p = Problems.from_operands(model, a, b)
    bounds = np.cumsum([0] + sizes)
    return [(p.src[i:j], p.tgt_in[i:j], p.gold[i:j]) for i, j in zip(bounds[:-1], bounds[1:])]
