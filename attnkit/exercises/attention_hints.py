"""The hints of notebook 01's checkers (attnkit.exercises.attention): the advice for the exceptions
a learner's attention code raises, what is wrong with a learner's attention weights (no scaling, a
wrong scale, the mask ignored or inverted, a softmax over the wrong axis, ...), multi-head attention
rebuilt with one mistake each, and the learner's module built for given sizes, or the hint for why
it cannot be.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor, nn

from ..core.attention import MultiHeadAttention, scaled_dot_product_attention
from .checking import GENERAL_ADVICE, Hint, call, close, max_diff, randn

# Common exception messages and what they usually mean in a learner's attention code.
ATTENTION_ADVICE = GENERAL_ADVICE + (
    (
        "NoneType",
        "something is None: an argument that may be None (mask=None means 'no mask': guard it with "
        "`if mask is not None`), or a function of yours that forgot to `return`",
    ),
    (
        "object has no attribute",
        "arguments in the wrong order, or a list/number where a tensor is expected? check the exercise's signature",
    ),
    (
        "shapes cannot be multiplied",
        "a matrix product with the wrong axes: with batch and head axes, transpose with "
        "k.transpose(-2, -1) (k.T reverses every axis) and index axes from the end",
    ),
    (
        "must match the size of tensor",
        "axes do not line up: with batch and head axes, transpose with k.transpose(-2, -1) "
        "(k.T reverses every axis), index axes from the end, and do not use the notebook's globals",
    ),
    (
        "shape '[",
        "a reshape to a fixed or wrong size: take every size from the input's .shape, not from the notebook's globals",
    ),
    (
        "is invalid for input of size",
        "a reshape to a fixed or wrong size: take every size from the input's .shape, not from the notebook's globals",
    ),
)


# notebook 01's learner code is attention code: its exceptions get the attention advice too
_call = functools.partial(call, advice=ATTENTION_ADVICE)


def _fitted_scale(weights: Tensor, scores: Tensor) -> float | None:
    """The s with softmax(s · scores) == weights, if there is one (from the log-weights' slope)."""
    if not (weights > 0).all():
        return None
    log_w = weights.double().log()
    a = log_w - log_w.mean(-1, keepdim=True)
    b = scores.double() - scores.double().mean(-1, keepdim=True)
    s = ((a * b).sum() / (b * b).sum()).item()
    return s if close(weights, (scores * s).softmax(-1)) else None


def _diagnose_weights(w: Tensor, q: Tensor, k: Tensor, mask: Tensor | None, ref_w: Tensor) -> None:
    """Raise the hint that names the learner's mistake in `w` (already the right shape)."""
    d_head = q.size(-1)
    scores = q @ k.transpose(-2, -1)
    rows = w.double().sum(-1)
    if mask is None and not close(rows, torch.ones_like(rows)):
        if close(w.double().sum(-2), torch.ones_like(w.double().sum(-2))):
            raise Hint("the columns of your weights sum to 1, not the rows: softmax over the key axis, dim=-1")
        if close(rows, torch.full_like(rows, 1 / math.sqrt(d_head))):
            raise Hint(
                "each row sums to 1/sqrt(d_head): you divided after the softmax — scale the scores "
                "before it, softmax(q @ kᵀ / sqrt(d_head))"
            )
        raise Hint(
            f"rows of your weights sum to {rows.min().item():.3g}..{rows.max().item():.3g}, not 1: "
            "the weights are softmax(scores, dim=-1), each row a distribution over the keys"
        )
    if mask is None:
        s = _fitted_scale(w, scores)
        if s is not None:
            named = {
                1.0: "scores not scaled: divide q @ kᵀ by sqrt(d_head)",
                1 / d_head: "scores divided by d_head: the scale is 1/sqrt(d_head), not 1/d_head",
                math.sqrt(d_head): "scores multiplied by sqrt(d_head): divide by it instead",
            }
            for scale, hint in named.items():
                if math.isclose(s, scale, rel_tol=1e-3):
                    raise Hint(hint)
            raise Hint(
                f"your scores are scaled by {s:.4g}, the checker's d_head is {d_head} (scale "
                f"{1 / math.sqrt(d_head):.4g}): take d_head from the input, math.sqrt(q.size(-1)), not "
                "from a fixed number, the notebook's globals or v's width"
            )
        raise Hint(
            f"your weights differ from softmax(q @ kᵀ / sqrt(d_head), dim=-1) ({max_diff(w, ref_w)}): "
            "compute the scores as q @ k.transpose(-2, -1)"
        )
    # With a mask.
    full = mask.expand(w.shape)
    if close(w, scaled_dot_product_attention(q, k, k, ~mask)[1]):
        raise Hint(
            "mask inverted: True means 'may attend', so fill the scores where the mask is False "
            "(scores.masked_fill(~mask, ...))"
        )
    if close(w, scaled_dot_product_attention(q, k, k)[1]):
        raise Hint("your mask is ignored: the weights are the same as with no mask")
    blocked = w.masked_select(~full)
    if blocked.numel() and blocked.abs().max() > 1e-6:
        raise Hint(
            "weights at masked positions are not zero: before the softmax, fill the masked scores with a "
            "very negative number, scores.masked_fill(~mask, torch.finfo(scores.dtype).min) "
            "(filling with 0 still leaves exp(0) = 1)"
        )
    rows = w.double().sum(-1)
    if not close(rows, torch.ones_like(rows)):
        raise Hint(
            "masked after the softmax? masked weights are zero but the rows no longer sum to 1 — "
            "fill the masked scores before the softmax instead"
        )
    raise Hint(f"with a mask your weights differ from the reference ({max_diff(w, ref_w)})")


def _mha_variant(
    ref: MultiHeadAttention,
    x: Tensor,
    mask: Tensor | None,
    *,
    n_heads: int | None = None,
    scale: float | None = None,
    straight_split: bool = False,
    W_O: bool = True,
) -> Tensor:
    """The reference computation with one deliberate mistake, to recognise a learner's."""
    batch, n_pos, d_model = x.shape
    n_heads = n_heads or ref.n_heads
    d_head = d_model // n_heads

    def split(t: Tensor) -> Tensor:
        if straight_split:
            return t.reshape(batch, n_heads, n_pos, d_head)
        return t.view(batch, n_pos, n_heads, d_head).transpose(1, 2)

    q, k, v = split(ref.W_Q(x)), split(ref.W_K(x)), split(ref.W_V(x))
    if scale is not None:
        q = q * scale * math.sqrt(d_head)  # undoes the reference's own 1/√d_head
    z, _ = scaled_dot_product_attention(q, k, v, mask)
    merged = z.transpose(1, 2).reshape(batch, n_pos, d_model)
    return ref.W_O(merged) if W_O else merged


def _mha_module(cls, d_model: int, n_heads: int) -> nn.Module:
    """The learner's module for (d_model, n_heads), or the hint for why it cannot be one."""
    if isinstance(cls, nn.Module):
        raise Hint(
            "pass the class itself (MyMultiHeadAttention), not an instance: the checker builds its own with other sizes"
        )
    if not callable(cls):
        raise Hint(f"expected your class, got a {type(cls).__name__}")
    module = _call(cls, d_model, n_heads, context=f" in __init__(d_model={d_model}, n_heads={n_heads})")
    if not isinstance(module, nn.Module):
        raise Hint(
            f"your class builds a {type(module).__name__}, not an nn.Module: declare it as "
            "class MyMultiHeadAttention(nn.Module) and call super().__init__() first"
        )
    missing = [n for n in ("W_Q", "W_K", "W_V", "W_O") if not isinstance(getattr(module, n, None), nn.Linear)]
    if missing:  # an unfilled stub says so first
        _call(module, randn(1, 2, d_model, seed=0), context=" in forward")
    if missing == ["W_O"]:
        raise Hint(
            "missing W_O: multi-head attention ends with an output projection, "
            "self.W_O = nn.Linear(d_model, d_model), applied to the merged heads"
        )
    if missing:
        raise Hint(
            f"no {', '.join('self.' + m for m in missing)} found (an nn.Linear each): "
            "name the projections W_Q, W_K, W_V, W_O, each nn.Linear(d_model, d_model)"
        )
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        shape = tuple(getattr(module, name).weight.shape)
        if shape == (d_model, d_model):
            continue
        if shape == (n_heads, n_heads):
            raise Hint(
                f"your {name} is nn.Linear({n_heads}, {n_heads}) for d_model={d_model}, n_heads={n_heads}: "
                "arguments swapped? __init__ receives (d_model, n_heads) in that order"
            )
        if d_model // n_heads in shape:
            raise Hint(
                f"your {name} maps to or from d_head = {d_model // n_heads} features: each projection covers "
                "all heads at once, nn.Linear(d_model, d_model); split into heads afterwards"
            )
        raise Hint(
            f"your {name}.weight has shape {shape} for d_model={d_model}: make it nn.Linear(d_model, d_model), "
            "sized from __init__'s arguments, not the notebook's globals"
        )
    return module
