"""Scaled dot-product and multi-head attention, written from first principles.

One set of axis names everywhere: batch, heads, q_pos (queries), k_pos (keys),
d_model (residual width) and d_head (width of one head).

Every MultiHeadAttention has a stable `name` ("enc.self.0", "dec.cross.1", ...) and named
hook points on q, k, v, the scores, the pattern, z and its output (hooks.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .hooks import HookPoint


def scaled_dot_product_attention(
    q: Tensor,  # (..., q_pos, d_head)
    k: Tensor,  # (..., k_pos, d_head)
    v: Tensor,  # (..., k_pos, d_v)
    mask: Tensor | None = None,  # bool, True = may attend; broadcasts to (..., q_pos, k_pos)
    dropout_p: float = 0.0,
    bias: Tensor | None = None,  # float, added to the scores (ALiBi, relative buckets)
) -> tuple[Tensor, Tensor]:
    """softmax(q·kᵀ / √d_head + bias, masked) · v, returning (output, weights).

    A query whose keys are all masked attends to nothing: its weights and its
    output are zeros, never NaN (a plain softmax over -inf gives NaN there).
    """
    weights = attention_weights(attention_scores(q, k, mask, bias), mask, dropout_p)
    return attend(weights, v), weights


def attention_scores(q: Tensor, k: Tensor, mask: Tensor | None = None, bias: Tensor | None = None) -> Tensor:
    """q·kᵀ / √d_head (+ bias), masked keys set to the most negative float: (..., q_pos, k_pos)."""
    # Scaling q rather than the scores: the same numbers (bit for bit when √d_head is a power
    # of two, as here), but q has d_head columns where the scores have k_pos (256 at test).
    scores = (q / math.sqrt(q.size(-1))) @ k.transpose(-2, -1)
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        # The most negative finite number, not -inf: exp() of it is exactly 0,
        # and a fully masked row stays finite (attention_weights zeroes it).
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return scores


def attention_weights(scores: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0) -> Tensor:
    """softmax over keys; a row whose keys are all masked gets weight 0 everywhere."""
    one_query = scores.size(-2) == 1  # a decoding step: see softmax_short_rows
    weights = softmax_short_rows(scores) if one_query else scores.softmax(dim=-1)
    if mask is not None:
        weights = weights * mask.any(dim=-1, keepdim=True)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights


def attend(weights: Tensor, v: Tensor) -> Tensor:
    """Σ_j weight_j · v_j: (..., q_pos, k_pos) × (..., k_pos, d_v) -> (..., q_pos, d_v)."""
    if weights.size(-2) == 1:
        # The same sum as products and a sum over keys: on a CPU a matrix product with a
        # single row per head is slower than this (greedy decoding; benchmarks/bench_attention.py).
        return (weights.transpose(-2, -1) * v).sum(dim=-2, keepdim=True)
    return weights @ v


def softmax_short_rows(scores: Tensor) -> Tensor:
    """softmax over the last axis, written out: e^(s - max) / Σ e^(s - max).

    Equal to Tensor.softmax up to rounding (~1e-7), and faster on a CPU when rows are as
    short as a decoding step's handful of keys (torch's kernel is built for long rows)."""
    e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def causal_mask(n_pos: int, device=None) -> Tensor:
    """(q_pos, k_pos) bool: position i may attend to positions 0..i only."""
    return torch.ones(n_pos, n_pos, dtype=torch.bool, device=device).tril()


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate W_Q, W_K, W_V, W_O (all d_model × d_model).

    Hook points (see hooks.py), named after the module's stable `name` ("enc.self.0", ...):
    hook_q, hook_k, hook_v (batch, heads, pos, d_head), hook_scores and hook_pattern
    (batch, heads, q_pos, k_pos), hook_z (batch, heads, q_pos, d_head) and hook_result
    (batch, q_pos, d_model)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.name = "attn"  # stable name, set by the owning model
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
        self.hook_scores, self.hook_pattern = HookPoint(), HookPoint()
        self.hook_z, self.hook_result = HookPoint(), HookPoint()

    def split_heads(self, x: Tensor) -> Tensor:
        """(batch, pos, d_model) -> (batch, heads, pos, d_head)"""
        batch, n_pos, _ = x.shape
        return x.view(batch, n_pos, self.n_heads, self.d_head).transpose(1, 2)

    def merge_heads(self, z: Tensor) -> Tensor:
        """(batch, heads, pos, d_head) -> (batch, pos, d_model)"""
        batch, _, n_pos, _ = z.shape
        return z.transpose(1, 2).reshape(batch, n_pos, self.d_model)

    def project_kv(self, x_kv: Tensor) -> tuple[Tensor, Tensor]:
        """(batch, k_pos, d_model) -> keys, values, each (batch, heads, k_pos, d_head)"""
        return self.hook_k(self.split_heads(self.W_K(x_kv))), self.hook_v(self.split_heads(self.W_V(x_kv)))

    def forward(
        self,
        x_q: Tensor,  # (batch, q_pos, d_model)
        x_kv: Tensor | None = None,  # (batch, k_pos, d_model); None = self-attention
        key_padding_mask: Tensor | None = None,  # (batch, k_pos) bool, True = padding (as nn.MultiheadAttention)
        causal: bool = False,
        attn_bias: Tensor | None = None,  # (heads, q_pos, k_pos) additive bias
        rotary: Callable[[Tensor], Tensor] | None = None,  # rotates q and k (RoPE)
        kv: tuple[Tensor, Tensor] | None = None,  # keys, values from project_kv(): reused while decoding
    ) -> Tensor:
        q = self.hook_q(self.split_heads(self.W_Q(x_q)))
        k, v = kv if kv is not None else self.project_kv(x_q if x_kv is None else x_kv)
        if rotary is not None:
            q, k = rotary(q), rotary(k)

        # (batch, 1, q_pos, k_pos), True = may attend. A mask that allows everything is left out:
        # the result is the same bit for bit, and it saves two passes over the scores.
        mask = None
        if key_padding_mask is not None and bool(key_padding_mask.any()):
            mask = ~key_padding_mask[:, None, None, :]
        if causal and x_q.size(1) > 1:  # one query (incremental decoding) is the last row: sees every key
            tri = causal_mask(k.size(2), x_q.device)[-x_q.size(1) :]  # the last q_pos rows
            mask = tri if mask is None else mask & tri

        scores = self.hook_scores(attention_scores(q, k, mask, attn_bias))
        pattern = self.hook_pattern(attention_weights(scores, mask, self.dropout if self.training else 0.0))
        return self.finish(attend(pattern, v))

    def finish(self, z: Tensor) -> Tensor:
        """Heads' values z (batch, heads, q_pos, d_head) -> the module's output: through hook_z
        (where ablation acts), W_O and hook_result. A replay from cached z starts here."""
        return self.hook_result(self.W_O(self.merge_heads(self.hook_z(z))))
