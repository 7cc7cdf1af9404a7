"""The sortedness classifier: an encoder over values 0–99 with a chosen positional encoding,
a violation score per token, pooled into one "sorted" logit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor, nn

from ..core.blocks import EncoderLayer
from ..core.hooks import HookedModel, HookPoint
from ..core.positional import Encoding, Positional
from ..core.runtime import eval_threads
from .data import N_VALUES, pad_batch, validate


@dataclass(frozen=True)  # shared as a default argument: never changed in place (replace() makes a new one)
class SortednessConfig:
    encoding: Encoding = "relative"  # how the model knows where a token is
    readout: Literal["max", "mean", "first"] = "max"  # how the per-token scores become one answer
    d_model: int = 64  # residual stream width
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128  # hidden width of each feed-forward block
    value_feature: bool = True  # add the value's angle on an arc (a built-in order)
    max_len: int = 256  # learned table rows: the longest test length
    n_exact: int = 3  # relative buckets: offsets -3 … 3 exact, the rest far left/right
    far_as_one: bool = True  # relative: a far bucket weighs as one key at any length
    alibi_directional: bool = True  # ALiBi heads look only left or only right (see positional.py)
    learned_init: Literal["sinusoidal", "random"] = "sinusoidal"  # the learned table's starting rows


MEMORY_BUDGET = 1 << 30  # bytes one forward pass of predict may spend on attention patterns
PATTERN_COPIES = 4  # (heads, L, L) float32 tensors alive at once: scores, bias, pattern, a spare
# (measured: 3.1 x heads·L²·4 bytes of peak memory at L = 3,000 and 4,096)


def memory_length_cap(n_heads: int) -> int:
    """The longest sequence whose attention fits MEMORY_BUDGET in one forward pass:
    PATTERN_COPIES · n_heads · L² · 4 bytes ≤ MEMORY_BUDGET, so L ≤ 4,096 with 4 heads
    (ALiBi and relative take any length, but 10,000 tokens would need about 5 GB)."""
    return math.isqrt(MEMORY_BUDGET // (PATTERN_COPIES * n_heads * 4))


def value_angle(tokens: Tensor) -> Tensor:
    """(batch, L) values -> (batch, L, 2): (cos θ, sin θ), θ from π/4 (value 0) to 3π/4 (99).

    Why a point on an arc and not value/99 itself: LayerNorm divides each token by its
    norm, so a feature that is mostly "value/99 · w" comes out as ±w and the size of the
    value is lost. On the arc the norm is the same for every value, LayerNorm keeps it,
    and cos θ still falls steadily with the value (by ≥ 0.011 per step), so the model can
    test x_i > x_j with one subtraction."""
    theta = math.pi / 4 + (math.pi / 2) * tokens.float() / (N_VALUES - 1)
    return torch.stack([theta.cos(), theta.sin()], dim=-1)


class SortednessClassifier(HookedModel, nn.Module):
    """Values -> encoder -> a violation score per token -> pooled over positions -> "sorted" logit."""

    metrics: dict  # set by the loader: the validation and test accuracies saved with the weights

    def __init__(self, cfg: SortednessConfig = SortednessConfig()):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(N_VALUES, cfg.d_model)
        nn.init.normal_(self.embed.weight, std=0.02)  # small (GPT-2's init): order, not identity, first
        # A learned table of 100 values knows nothing of their order. value_feature hands the
        # model "3 < 4" for free: see value_angle(). Comparing neighbours becomes linear.
        self.value_dir = nn.Linear(2, cfg.d_model, bias=False) if cfg.value_feature else None
        if self.value_dir is not None:
            # Norm ≈ √d_model, above the position tables' √(d_model/2): with the default (3× smaller)
            # init the absolute encodings spent most of training before they used the values at all.
            nn.init.normal_(self.value_dir.weight, std=1.0)
        self.pos = Positional(
            cfg.encoding,
            cfg.d_model,
            cfg.n_heads,
            cfg.max_len,
            cfg.n_exact,
            cfg.far_as_one,
            cfg.alibi_directional,
            cfg.learned_init,
        )
        self.layers = nn.ModuleList(EncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, i) for i in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, 1)
        self.hook_embed, self.hook_token_score = HookPoint(), HookPoint()
        self.name_hooks()

    @property
    def max_len(self) -> int | None:
        """The longest sequence this encoding supports; None = any length."""
        return self.pos.max_len

    def forward(self, tokens: Tensor, pad: Tensor | None = None) -> Tensor:
        """tokens (batch, L) values 0–99, pad (batch, L) True = padding -> logits (batch,).
        ValueError for L over length_cap: one cap for every entry point (forward, run_with_cache,
        run_with_hooks, predict, patching), before any allocation."""
        n_pos = tokens.size(1)
        if n_pos > self.length_cap:
            limit = "its position table" if self.max_len else "the memory cap (see memory_length_cap)"
            raise ValueError(
                f"sequences of {n_pos} tokens are longer than this classifier takes: {self.length_cap}, set by {limit}"
            )
        pad = torch.zeros_like(tokens, dtype=torch.bool) if pad is None else pad
        x = self.embed(tokens)  # (batch, L, d_model)
        if self.value_dir is not None:
            x = x + self.value_dir(value_angle(tokens))
        table = self.pos.table(n_pos)
        if table is not None:
            x = x + table.to(x.device)
        lengths = (~pad).sum(1) if pad.any() else None  # None: every row is full length
        x = self.hook_embed(x)
        bias = self.pos.bias(n_pos, lengths, tokens.device)  # ([batch,] heads, L, L) or None
        for layer in self.layers:
            x = layer(x, pad, bias, self.pos.rotary)
        # Each token scores "a violation is here" (batch, L); pooling over positions makes
        # it one "the sequence is unsorted" logit, and its negative is the "sorted" logit.
        score = self.hook_token_score(self.head(self.ln_f(x)).squeeze(-1))
        if self.cfg.readout == "max":  # "is there a violation anywhere?": one token decides
            pooled = score.masked_fill(pad, float("-inf")).amax(dim=1)
        elif self.cfg.readout == "mean":  # one violating token moves the answer by 1/L only
            keep = (~pad).float()
            pooled = (score * keep).sum(1) / keep.sum(1)
        else:  # "first": token 0 must gather the whole answer
            pooled = score[:, 0]
        return -pooled

    @property
    def length_cap(self) -> int:
        """The longest sequence predict accepts: the learned table's rows, or for the encodings
        that take any length the memory cap (see memory_length_cap)."""
        return self.max_len or memory_length_cap(self.cfg.n_heads)

    @torch.no_grad()
    def predict(self, seqs: Sequence[Sequence[int]], batch_size: int = 256) -> list[bool]:
        """True = sorted (non-decreasing). ValueError names any bad input, and a sequence longer
        than length_cap; batch_size bounds the rows of one forward pass (memory permitting)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
            raise TypeError(f"batch_size must be a whole number ≥ 1, not {batch_size!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be ≥ 1, not {batch_size}")
        reason = (
            None
            if self.max_len
            else (
                f"the memory cap of predict ({MEMORY_BUDGET >> 20} MiB for attention patterns, see memory_length_cap)"
            )
        )
        seqs = validate(seqs, self.length_cap, reason)
        with eval_threads(len(seqs)):
            return [bool(p > 0.5) for p in self.probabilities(seqs, batch_size)]

    @torch.no_grad()
    def probabilities(self, seqs: Sequence[Sequence[int]], batch_size: int = 256) -> np.ndarray:
        """P(sorted) for each row (rows are not validated: use predict for user input)."""
        self.eval()
        device = next(self.parameters()).device
        order = np.argsort([len(s) for s in seqs], kind="stable")  # similar lengths share a batch
        out = np.empty(len(seqs))
        n_pos = max(len(s) for s in seqs)
        step = max(1, batch_size * 16 // max(16, n_pos))  # keep (batch, heads, L, L) patterns small
        # ... and within the memory budget whatever batch_size asks for
        step = min(step, max(1, MEMORY_BUDGET // (PATTERN_COPIES * self.cfg.n_heads * 4 * n_pos**2)))
        for i in range(0, len(seqs), step):
            idx = order[i : i + step]
            tokens, pad = pad_batch([seqs[j] for j in idx], device)
            out[idx] = torch.sigmoid(self(tokens, pad)).double().cpu().numpy()
        return out
