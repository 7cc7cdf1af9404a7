"""Checkers for a learner's own attention code (notebook 01's exercises).

Each checker calls the learner's code on small random inputs of several shapes, compares the
result with attnkit's reference, and prints one line: a pass, or a hint that names the likely
mistake. It returns True when the code passed. Nothing the learner hands over (a wrong
signature, a list, numpy, a class that is not a module) escapes as a traceback: it becomes a
hint too (the shared machinery is in checking.py).

The checkers are here, where the notebook imports them; their hints (the advice for exceptions,
the diagnosis of wrong weights, multi-head attention's rebuilt mistakes) are in attention_hints.py.

    >>> attention_checks.check_causal_mask(my_causal_mask)
    ✅ causal_mask: passed — matches the reference for 1, 4, 7 and 13 positions
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..core.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from .attention_hints import _call, _diagnose_weights, _mha_module, _mha_variant
from .checking import Hint, as_tensor, checker, close, hidden, max_diff, randn

# ---------------------------------------------------------------- scaled dot-product attention


@checker(
    "scaled_dot_product_attention",
    "01-attention",
    "my_attention",
    references=("attnkit.core.attention:scaled_dot_product_attention",),
)
def check_scaled_dot_product_attention(fn: Callable) -> str:
    """`fn(q, k, v, mask=None) -> (output, weights)`, mask bool with True = may attend."""
    # 4-D (batch, heads, pos, d_head) with d_head 16; 2-D with d_head 9 (a hard-coded scale of 4 shows);
    # batch 1 with one query. q_pos != k_pos != d_v everywhere, so a swapped axis changes a shape.
    cases = [((2, 3), 4, 5, 16, 6), ((), 3, 7, 9, 5), ((1,), 1, 6, 10, 3)]
    for case, (lead, q_pos, k_pos, d_head, d_v) in enumerate(cases):
        seed = 10 * case
        q, k, v = (
            randn(*lead, q_pos, d_head, seed=seed),
            randn(*lead, k_pos, d_head, seed=seed + 1),
            randn(*lead, k_pos, d_v, seed=seed + 2),
        )
        where = f" ({len(lead) + 2}-D inputs, q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        out_names = "(..., q_pos, d_v)"
        w_shape = (*lead, q_pos, k_pos)

        def run(mask: Tensor | None, context: str, nan_hint: str) -> tuple[Tensor, Tensor]:
            args = (q.clone(), k.clone(), v.clone()) + (() if mask is None else (mask.clone(),))
            result = _call(fn, *args, context=context + where + ")")
            if not (isinstance(result, tuple) and len(result) == 2):
                raise Hint("return a pair (output, weights): the attended values and the attention weights")
            out, w = result
            if isinstance(w, Tensor) and tuple(w.shape) == (*lead, k_pos, q_pos):
                raise Hint(
                    f"your weights are (..., k_pos, q_pos) = {tuple(w.shape)}: q and k swapped? "
                    "the scores are q @ k.transpose(-2, -1), one row per query"
                )
            if (
                isinstance(out, Tensor)
                and tuple(out.shape) == (*lead, q_pos, k_pos)
                and isinstance(w, Tensor)
                and tuple(w.shape) == (*lead, q_pos, d_v)
            ):
                raise Hint("output and weights swapped: return (output, weights), in that order")
            w = as_tensor(w, "weights" + where + ")", w_shape, "(..., q_pos, k_pos)")
            out = as_tensor(out, "output" + where + ")", (*lead, q_pos, d_v), out_names)
            if torch.isnan(out).any() or torch.isnan(w).any():
                raise Hint(nan_hint)
            again = _call(fn, *args, context=context + where + ")")
            if isinstance(again, tuple) and isinstance(again[1], Tensor) and not torch.equal(again[1], w):
                raise Hint(
                    "your function gives different weights for the same input: dropout left on? "
                    "F.dropout defaults to training=True; leave dropout out here"
                )
            return out, w

        # 1. No mask: the softmax axis and the scale.
        out, w = run(None, " with mask=None", "NaN in the output with mask=None")
        ref_out, ref_w = scaled_dot_product_attention(q, k, v)
        if not close(w, ref_w):
            _diagnose_weights(w, q, k, None, ref_w)
        if not close(out, ref_out):
            raise Hint(f"your weights are right but the output is not weights @ v ({max_diff(out, ref_out)})")

        # 2. A mask (every row keeps at least one key, none keeps all): its polarity, masking before the softmax.
        mask = randn(*lead[:1], *([1] if len(lead) == 2 else []), q_pos, k_pos, seed=seed + 3) > 0
        mask[..., 0], mask[..., 1] = True, False
        out, w = run(mask, " with a mask", "NaN in the output with a mask, though no row is fully masked")
        ref_out, ref_w = scaled_dot_product_attention(q, k, v, mask)
        if not close(w, ref_w):
            _diagnose_weights(w, q, k, mask, ref_w)
        if not close(out, ref_out):
            raise Hint(
                f"with a mask your weights are right but the output is not weights @ v ({max_diff(out, ref_out)})"
            )

        # 3. A fully masked row: zeros, never NaN.
        mask[..., 0, :] = False
        out, w = run(
            mask,
            " with a fully masked row",
            "NaN in the output for a query whose keys are all masked: a softmax over a row of -inf is "
            "0/0, and NaN × 0 is still NaN — fill with torch.finfo(scores.dtype).min instead of -inf "
            "(or clean up with torch.nan_to_num), then zero the rows with no key: "
            "weights * mask.any(-1, keepdim=True)",
        )
        ref_out, ref_w = scaled_dot_product_attention(q, k, v, mask)
        if not (close(w, ref_w) and close(out, ref_out)):
            row = w[..., 0, :]
            if torch.allclose(row, torch.full_like(row, 1 / k_pos)):
                raise Hint(
                    "your fully masked row attends evenly to every key: a query whose keys are all masked "
                    "should get zero weights and a zero output — multiply the weights by "
                    "mask.any(-1, keepdim=True)"
                )
            raise Hint(
                "a fully masked row should give zero weights and a zero output, and other rows stay as they were"
            )
    return (
        "matches attnkit's reference on 4-D, 2-D and batch-1 inputs, with no mask, a mask "
        "and a fully masked row (zeros, no NaN)"
    )


# ---------------------------------------------------------------- causal mask


@checker("causal_mask", "01-causal-mask", "my_causal_mask", references=("attnkit.core.attention:causal_mask",))
def check_causal_mask(fn: Callable) -> str:
    """`fn(n_pos) -> (n_pos, n_pos)` bool, True = may attend."""
    for n in (
        4,
        1,
        7,
        13,
        *hidden(9, 21),
    ):  # 4 first: large enough to tell every wrong triangle apart; 13 > any small buffer
        mask = as_tensor(_call(fn, n, context=f" for n_pos={n}"), f"mask for n_pos={n}", (n, n), "(n_pos, n_pos)")
        ref = causal_mask(n)
        if mask.dtype != torch.bool:
            if mask.is_floating_point() and torch.isinf(mask).any():
                raise Hint("return a bool mask (True = may attend), not an additive mask of 0 and -inf")
            raise Hint(
                f"your mask has dtype {mask.dtype}: return a bool tensor (True = may attend), e.g. "
                "torch.ones(n_pos, n_pos, dtype=torch.bool).tril()"
            )
        if torch.equal(mask, ref):
            continue
        ones = torch.ones(n, n, dtype=torch.bool)
        wrong = {
            "upper triangle: position i would see the positions after it; keep the lower triangle (tril)": ones.triu(),
            (
                "off by one — the diagonal is excluded: position i may attend to itself too (tril(), not tril(-1))"
            ): ones.tril(-1),
            "mask inverted: True must mean 'may attend', and you marked the positions to block": ones.triu(1),
            "off by one: position i may not see position i+1 (tril(), not tril(1))": ones.tril(1),
            "every entry is True, so nothing is masked: position i must not see the keys after it (tril)": ones,
            "every entry is False, so every key is blocked: True marks the keys a position may attend to": ~ones,
        }
        for hint, candidate in wrong.items():
            if torch.equal(mask, candidate):
                raise Hint(hint)
        i, j = (mask != ref).nonzero()[0].tolist()
        raise Hint(
            f"for n_pos={n}, mask[{i}, {j}] should be {bool(ref[i, j])}: row i is True at keys 0..i and False after"
        )
    return "matches the reference for 1, 4, 7 and 13 positions"


# ---------------------------------------------------------------- head split and merge

# (batch, pos, heads, d_head): all different within a case; batch 1, one head, odd widths.
_HEAD_CASES = [(2, 5, 3, 4), (1, 7, 5, 3), (3, 2, 1, 6)]


@checker(
    "split_heads",
    "01-split-heads",
    "my_split_heads",
    references=("attnkit.core.attention:MultiHeadAttention.split_heads",),
)
def check_split_heads(fn: Callable) -> str:
    """`fn(x, n_heads)`: (batch, pos, d_model) -> (batch, heads, pos, d_head)."""
    for batch, n_pos, n_heads, d_head in _HEAD_CASES:
        x = randn(batch, n_pos, n_heads * d_head, seed=5)
        expected = (batch, n_heads, n_pos, d_head)
        context = f" for x of shape {tuple(x.shape)}, n_heads={n_heads}"
        out = _call(fn, x.clone(), n_heads, context=context)
        if isinstance(out, Tensor) and tuple(out.shape) == (batch, n_pos, n_heads, d_head) != expected:
            raise Hint(
                f"your output has shape {tuple(out.shape)}, expected {expected} = (batch, heads, pos, d_head): "
                "forgot transpose(1, 2) after the view?"
            )
        out = as_tensor(out, "output" + context, expected, "(batch, heads, pos, d_head)")
        if torch.equal(out, x.view(expected)) and n_heads > 1 and n_pos > 1:
            raise Hint(
                "wrong transpose: reshaping straight to (batch, heads, pos, d_head) mixes positions into "
                "heads; view as (batch, pos, heads, d_head), then transpose(1, 2)"
            )
        if not torch.equal(out, x.view(batch, n_pos, n_heads, d_head).transpose(1, 2)):
            raise Hint(
                f"wrong values{context}: head h should hold features h*d_head .. (h+1)*d_head - 1 of every "
                "position, with d_head = d_model // n_heads taken from x"
            )
    return "(batch, pos, d_model) -> (batch, heads, pos, d_head) for 3 shapes (batch 1, one head, odd widths)"


@checker(
    "merge_heads",
    "01-merge-heads",
    "my_merge_heads",
    references=("attnkit.core.attention:MultiHeadAttention.merge_heads",),
)
def check_merge_heads(fn: Callable) -> str:
    """`fn(z)`: (batch, heads, pos, d_head) -> (batch, pos, d_model)."""
    for batch, n_pos, n_heads, d_head in _HEAD_CASES:
        z = randn(batch, n_heads, n_pos, d_head, seed=6)
        expected = (batch, n_pos, n_heads * d_head)
        context = f" for z of shape {tuple(z.shape)}"
        out = as_tensor(_call(fn, z.clone(), context=context), "output" + context, expected, "(batch, pos, d_model)")
        if torch.equal(out, z.reshape(expected)) and n_heads > 1 and n_pos > 1:
            raise Hint(
                "wrong transpose: reshaping (batch, heads, pos, d_head) straight to (batch, pos, d_model) "
                "mixes heads and positions; transpose(1, 2) first, then reshape"
            )
        if not torch.equal(out, z.transpose(1, 2).reshape(expected)):
            raise Hint(
                f"wrong values{context}: position p should be the concatenation of every head's z at p, head 0 first"
            )
    return "(batch, heads, pos, d_head) -> (batch, pos, d_model), heads concatenated in order, for 3 shapes"


# ---------------------------------------------------------------- multi-head attention


@checker(
    "multi_head_attention",
    "01-multi-head",
    "MyMultiHeadAttention",
    references=("attnkit.core.attention:MultiHeadAttention",),
)
@torch.no_grad()
def check_multi_head_attention(cls: Callable) -> str:
    """`cls(d_model, n_heads)` -> a module with nn.Linear W_Q, W_K, W_V, W_O and
    `forward(x, key_padding_mask=None) -> (batch, pos, d_model)`; True in the mask = padding."""
    # d_model 12 (d_head 4), then batch 1 with d_model 18 and two heads of 9: no power of two, no globals.
    for case, (batch, n_pos, d_model, n_heads) in enumerate([(2, 5, 12, 3), (1, 7, 18, 2)]):
        where = f" (d_model={d_model}, n_heads={n_heads}, x {(batch, n_pos, d_model)})"
        module = _mha_module(cls, d_model, n_heads)
        module.eval()  # the learner's own dropout, if any, is off

        # The reference gets the learner's own randomly initialised weights (a missing bias stays zero).
        ref = MultiHeadAttention(d_model, n_heads).eval()
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            mine, theirs = getattr(ref, name), getattr(module, name)
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias if theirs.bias is not None else torch.zeros(d_model))
        x = randn(batch, n_pos, d_model, seed=7 + case)

        def run(context: str, **kwargs) -> Tensor:
            out = _call(module, x.clone(), context=context + where, **kwargs)
            if isinstance(out, tuple) and out:  # (output, weights) is fine too
                out = out[0]
            out = as_tensor(out, "output" + where, (batch, n_pos, d_model), "(batch, pos, d_model)")
            if torch.isnan(out).any():
                raise Hint(f"NaN in the output{context}{where}")
            return out

        out = run(" in forward")
        if not torch.equal(out, run(" in forward")):
            raise Hint(
                "your module gives different outputs for the same input in eval mode: dropout left on? "
                "F.dropout defaults to training=True; use nn.Dropout, or leave dropout out"
            )
        if not close(out, ref(x)):
            wrong: list[tuple[str, dict[str, Any]]] = [
                (
                    "missing W_O: your output skips the output projection; return self.W_O(merged heads)",
                    dict(W_O=False),
                ),
                (
                    "heads split with the wrong transpose: view as (batch, pos, heads, d_head), then transpose(1, 2)",
                    dict(straight_split=True),
                ),
                (
                    "one head only? your output equals single-head attention; split q, k, v into n_heads heads",
                    dict(n_heads=1),
                ),
                (
                    "scores scaled by 1/sqrt(d_model): each head scales by 1/sqrt(d_head), d_head = d_model // n_heads",
                    dict(scale=1 / math.sqrt(d_model)),
                ),
                ("scores not scaled by 1/sqrt(d_head): divide each head's q @ kᵀ by sqrt(d_head)", dict(scale=1.0)),
            ]
            for message, mistake in wrong:
                if close(out, _mha_variant(ref, x, None, **mistake)):
                    raise Hint(message)
            raise Hint(
                f"your output differs from the reference with the same weights{where} "
                f"({max_diff(out, ref(x))}): check the split into self.n_heads heads, the scale "
                "1/sqrt(d_head) and the order W_Q/W_K/W_V -> attention -> merge -> W_O"
            )

        try:
            params = inspect.signature(module.forward).parameters
        except (TypeError, ValueError):
            params = inspect.Signature().parameters  # none
        if "key_padding_mask" not in params and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            other = [n for n in params if n != "x"]
            raise Hint(
                f"forward has no key_padding_mask argument{f' (it has {other[0]!r})' if other else ''}: "
                "name it key_padding_mask=None, as PyTorch does — the checker passes it by name"
            )
        pad = torch.zeros(batch, n_pos, dtype=torch.bool)
        pad[-1, -2:] = True  # the last sequence is two tokens shorter
        out = run(" with a key_padding_mask", key_padding_mask=pad)
        if not close(out, ref(x, key_padding_mask=pad)):
            if close(out, ref(x, key_padding_mask=~pad)):
                raise Hint(
                    "key_padding_mask is True at padding, so those keys are the ones to block: "
                    "attend where the mask is False (mask = ~key_padding_mask)"
                )
            if close(out, ref(x)):
                raise Hint("key_padding_mask ignored: the output is the same as without it")
            raise Hint(
                "with a key_padding_mask your output differs: block keys where it is True, "
                "broadcast as key_padding_mask[:, None, None, :] over heads and queries"
            )
    return (
        "matches attnkit's MultiHeadAttention with the same weights, with and without padding, "
        "for d_model 12 / 3 heads and 18 / 2 heads"
    )
