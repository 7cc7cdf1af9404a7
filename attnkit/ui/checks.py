"""Checkers for a learner's own attention code (notebook 01's exercises).

Each checker calls the learner's code on small random inputs, compares the result
with attnkit's reference, and prints one line: a pass, or a hint that names the
likely mistake. It returns True when the code passed. An exception raised by the
learner's code never escapes as a traceback: it becomes a hint too.

    >>> checks.check_causal_mask(my_causal_mask)
    ✅ causal_mask: passed — matches the reference for 1, 4 and 7 positions
"""
from __future__ import annotations

import functools
import inspect
import math
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from ..core.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention


class Hint(Exception):
    """A mistake was found; the message is the hint shown to the learner."""

    icon = "❌"


class NotDone(Hint):
    icon = "⏳"


def _checker(title: str):
    """Turn `check(...) -> pass message` (raising Hint) into `check(...) -> bool` that prints."""
    def wrap(check):
        @functools.wraps(check)
        def run(*args, **kwargs) -> bool:
            try:
                message = check(*args, **kwargs)
            except Hint as hint:
                print(f"{hint.icon} {title}: {hint}")
                return False
            print(f"✅ {title}: passed — {message}")
            return True
        return run
    return wrap


def _call(fn: Callable, *args, context: str = "", **kwargs):
    """Call the learner's code; turn any exception into a Hint."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise NotDone("not implemented yet — fill in the stub above (a collapsible solution follows it)")
    except Exception as e:
        first_line = (str(e).strip().splitlines() or [""])[0]
        hint = f"your code raised {type(e).__name__}{context}: {first_line}"
        if "NoneType" in first_line:
            hint += " — mask=None must mean 'no mask': guard the masking with `if mask is not None`"
        elif "view size is not compatible" in first_line:
            hint += " — after a transpose the tensor is not contiguous: use .reshape (or .contiguous().view)"
        raise Hint(hint) from None


def _as_tensor(x, what: str, shape: tuple) -> Tensor:
    if not isinstance(x, Tensor):
        raise Hint(f"your {what} is a {type(x).__name__}, expected a tensor of shape {shape}")
    if tuple(x.shape) != shape:
        raise Hint(f"your {what} has shape {tuple(x.shape)}, expected {shape}")
    return x


def _close(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=1e-5, rtol=1e-4)


def _max_diff(a: Tensor, b: Tensor) -> str:
    return f"max difference {(a.double() - b.double()).abs().max().item():.3g}"


def _randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- scaled dot-product attention

@_checker("scaled_dot_product_attention")
def check_scaled_dot_product_attention(fn: Callable) -> str:
    """`fn(q, k, v, mask=None) -> (output, weights)`, mask bool with True = may attend."""
    batch, heads, q_pos, k_pos, d_head, d_v = 2, 3, 4, 5, 16, 6  # d_head=16: a missing 1/√d_head shows
    q, k, v = _randn(batch, heads, q_pos, d_head, seed=1), _randn(batch, heads, k_pos, d_head, seed=2), \
        _randn(batch, heads, k_pos, d_v, seed=3)
    out_shape, w_shape = (batch, heads, q_pos, d_v), (batch, heads, q_pos, k_pos)

    def run(mask: Optional[Tensor], context: str, nan_hint: str) -> tuple[Tensor, Tensor]:
        args = (q.clone(), k.clone(), v.clone()) + (() if mask is None else (mask.clone(),))
        result = _call(fn, *args, context=context)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise Hint("return a pair (output, weights), as attnkit.scaled_dot_product_attention does")
        out, w = _as_tensor(result[0], "output", out_shape), _as_tensor(result[1], "weights", w_shape)
        if torch.isnan(out).any() or torch.isnan(w).any():
            raise Hint(nan_hint)
        return out, w

    # 1. No mask: the softmax axis and the scale.
    out, w = run(None, " with mask=None", "NaN in the output with mask=None")
    ref_out, ref_w = scaled_dot_product_attention(q, k, v)
    if not _close(w.sum(-1), torch.ones(w_shape[:-1])):
        if _close(w.sum(-2), torch.ones(batch, heads, k_pos)):
            raise Hint("rows of your weights do not sum to 1: softmax over the wrong axis? use dim=-1, the key axis")
        raise Hint("rows of your weights do not sum to 1: apply a softmax over the key axis (dim=-1)")
    if not _close(w, ref_w):
        scores = q @ k.transpose(-2, -1)
        wrong_scales = {
            1.0: "scores not scaled by 1/sqrt(d_head)? divide q·kᵀ by math.sqrt(q.size(-1))",
            1 / d_head: "scores divided by d_head: the scale is 1/sqrt(d_head), not 1/d_head",
            math.sqrt(d_head): "scores multiplied by sqrt(d_head): divide by it instead",
            1 / math.sqrt(d_v): "scores scaled by v's width: the scale is 1/sqrt(d_head), q's last dimension",
        }
        for scale, hint in wrong_scales.items():
            if _close(w, (scores * scale).softmax(-1)):
                raise Hint(hint)
        raise Hint(f"your weights differ from softmax(q·kᵀ / sqrt(d_head)) ({_max_diff(w, ref_w)})")
    if not _close(out, ref_out):
        raise Hint(f"your weights are right but the output is not weights @ v ({_max_diff(out, ref_out)})")

    # 2. A mask (every row keeps at least one key): its polarity, and masking before the softmax.
    mask = _randn(batch, 1, q_pos, k_pos, seed=4) > 0   # broadcasts over heads
    mask[..., 0], mask[..., 1] = True, False            # no row fully masked, none fully open
    out, w = run(mask, " with a mask", "NaN in the output with a mask, though no row is fully masked")
    ref_out, ref_w = scaled_dot_product_attention(q, k, v, mask)
    if not _close(w, ref_w):
        if _close(w, scaled_dot_product_attention(q, k, v, ~mask)[1]):
            raise Hint("mask inverted: True means 'may attend', so fill the scores where the mask is False "
                       "(scores.masked_fill(~mask, float('-inf')))")
        if _close(w, scaled_dot_product_attention(q, k, v)[1]):
            raise Hint("your mask is ignored: the weights are the same as with no mask")
        blocked = w.masked_select(~mask.expand(w_shape))
        if blocked.abs().max() > 1e-6:
            raise Hint("weights at masked positions are not zero: fill the masked scores with -inf before the softmax")
        raise Hint("masked after the softmax? masked weights are zero but rows no longer sum to 1 — "
                   "fill the masked scores with -inf before the softmax instead")
    if not _close(out, ref_out):
        raise Hint(f"with a mask your weights are right but the output is not weights @ v ({_max_diff(out, ref_out)})")

    # 3. A fully masked row: zeros, never NaN.
    mask[0, 0, 1] = False
    out, w = run(mask, " with a fully masked row",
                 "NaN in the output: a fully masked row? softmax over a row of -inf is 0/0; give a query "
                 "whose keys are all masked zero weights (e.g. weights * mask.any(-1, keepdim=True))")
    ref_out, ref_w = scaled_dot_product_attention(q, k, v, mask)
    if not (_close(w, ref_w) and _close(out, ref_out)):
        if torch.allclose(w[0, :, 1], torch.full_like(w[0, :, 1], 1 / k_pos)):
            raise Hint("your fully masked row attends evenly to every key: a query whose keys are all masked "
                       "should get zero weights and a zero output")
        raise Hint("a fully masked row should give zero weights and a zero output, and other rows stay as they were")
    return "matches attnkit's reference with no mask, with a mask, and with a fully masked row (zeros, no NaN)"


# ---------------------------------------------------------------- causal mask

@_checker("causal_mask")
def check_causal_mask(fn: Callable) -> str:
    """`fn(n_pos) -> (n_pos, n_pos)` bool, True = may attend."""
    for n in (4, 1, 7):  # 4 first: large enough to tell every wrong triangle apart
        mask = _as_tensor(_call(fn, n, context=f" for n_pos={n}"), f"mask for n_pos={n}", (n, n))
        ref = causal_mask(n)
        if mask.dtype != torch.bool:
            if mask.is_floating_point() and torch.isinf(mask).any():
                raise Hint("return a bool mask (True = may attend), not an additive mask of 0 and -inf")
            raise Hint(f"your mask has dtype {mask.dtype}: return a bool tensor (True = may attend)")
        if torch.equal(mask, ref):
            continue
        ones = torch.ones(n, n, dtype=torch.bool)
        wrong = {
            "upper triangle: position i would see the positions after it; keep the lower triangle (tril)":
                ones.triu(),
            "off by one — the diagonal is excluded: position i may attend to itself too (tril(), not tril(-1))":
                ones.tril(-1),
            "mask inverted: True must mean 'may attend', and you marked the positions to block":
                ones.triu(1),
            "off by one: position i may not see position i+1 (tril(), not tril(1))":
                ones.tril(1),
        }
        for hint, candidate in wrong.items():
            if torch.equal(mask, candidate):
                raise Hint(hint)
        i, j = (mask != ref).nonzero()[0].tolist()
        raise Hint(f"for n_pos={n}, mask[{i}, {j}] should be {bool(ref[i, j])}: "
                   "row i is True at keys 0..i and False after")
    return "matches the reference for 1, 4 and 7 positions"


# ---------------------------------------------------------------- head split and merge

@_checker("split_heads")
def check_split_heads(fn: Callable) -> str:
    """`fn(x, n_heads)`: (batch, pos, d_model) -> (batch, heads, pos, d_head)."""
    batch, n_pos, n_heads, d_head = 2, 5, 3, 4  # all different, so a swapped axis shows in the shape
    x = _randn(batch, n_pos, n_heads * d_head, seed=5)
    expected = (batch, n_heads, n_pos, d_head)
    out = _call(fn, x.clone(), n_heads)
    if isinstance(out, Tensor) and tuple(out.shape) == (batch, n_pos, n_heads, d_head):
        raise Hint(f"your output has shape {tuple(out.shape)}, expected {expected}: "
                   "forgot transpose(1, 2) after the view?")
    out = _as_tensor(out, "output", expected)
    if torch.equal(out, x.reshape(expected)):
        raise Hint("wrong transpose: reshaping straight to (batch, heads, pos, d_head) mixes positions into "
                   "heads; view as (batch, pos, heads, d_head), then transpose(1, 2)")
    if not torch.equal(out, x.view(batch, n_pos, n_heads, d_head).transpose(1, 2)):
        raise Hint("wrong values: head h should hold features h*d_head .. (h+1)*d_head - 1 of every position")
    return "(batch, pos, d_model) -> (batch, heads, pos, d_head) with the right features in each head"


@_checker("merge_heads")
def check_merge_heads(fn: Callable) -> str:
    """`fn(z)`: (batch, heads, pos, d_head) -> (batch, pos, d_model)."""
    batch, n_heads, n_pos, d_head = 2, 3, 5, 4
    z = _randn(batch, n_heads, n_pos, d_head, seed=6)
    expected = (batch, n_pos, n_heads * d_head)
    out = _as_tensor(_call(fn, z.clone()), "output", expected)
    if torch.equal(out, z.reshape(expected)):
        raise Hint("wrong transpose: reshaping (batch, heads, pos, d_head) straight to (batch, pos, d_model) "
                   "mixes heads and positions; transpose(1, 2) first, then reshape")
    if not torch.equal(out, z.transpose(1, 2).reshape(expected)):
        raise Hint("wrong values: position p should be the concatenation of every head's z at p, head 0 first")
    return "(batch, heads, pos, d_head) -> (batch, pos, d_model), heads concatenated in order"


# ---------------------------------------------------------------- multi-head attention

def _mha_variant(ref: MultiHeadAttention, x: Tensor, mask: Optional[Tensor], *, n_heads: Optional[int] = None,
                 scale: Optional[float] = None, straight_split: bool = False, W_O: bool = True) -> Tensor:
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


@_checker("multi_head_attention")
@torch.no_grad()
def check_multi_head_attention(cls: Callable) -> str:
    """`cls(d_model, n_heads)` -> a module with nn.Linear W_Q, W_K, W_V, W_O and
    `forward(x, key_padding_mask=None) -> (batch, pos, d_model)`; True in the mask = padding."""
    batch, n_pos, d_model, n_heads = 2, 5, 12, 3  # d_model not a power of two; d_head = 4
    x = _randn(batch, n_pos, d_model, seed=7)
    module = cls if isinstance(cls, nn.Module) else _call(cls, d_model, n_heads, context=" in __init__")
    if isinstance(cls, nn.Module):
        d_model, n_heads = module.W_Q.in_features, module.n_heads
        x = _randn(batch, n_pos, d_model, seed=7)
    module.eval()

    missing = [name for name in ("W_Q", "W_K", "W_V", "W_O") if not isinstance(getattr(module, name, None), nn.Linear)]
    if missing:
        _call(module, x, context=" in forward")  # an unfilled stub says so first
        if missing == ["W_O"]:
            raise Hint("missing W_O: multi-head attention ends with an output projection, "
                       "self.W_O = nn.Linear(d_model, d_model), applied to the merged heads")
        raise Hint(f"no {', '.join('self.' + m for m in missing)} found: "
                   "name the projections W_Q, W_K, W_V, W_O, each nn.Linear(d_model, d_model)")

    # The reference gets the learner's own randomly initialised weights (a missing bias stays zero).
    ref = MultiHeadAttention(d_model, n_heads).eval()
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        mine, theirs = getattr(ref, name), getattr(module, name)
        mine.weight.copy_(theirs.weight)
        mine.bias.copy_(theirs.bias if theirs.bias is not None else torch.zeros(d_model))

    def run(context: str, **kwargs) -> Tensor:
        out = _call(module, x.clone(), context=context, **kwargs)
        if isinstance(out, tuple):  # (output, weights) is fine too
            out = out[0]
        out = _as_tensor(out, "output", (batch, n_pos, d_model))
        if torch.isnan(out).any():
            raise Hint(f"NaN in the output{context}")
        return out

    out = run(" in forward")
    if not _close(out, ref(x)):
        d_head = d_model // n_heads
        wrong = [
            ("missing W_O: your output skips the output projection; return self.W_O(merged heads)",
             dict(W_O=False)),
            ("heads split with the wrong transpose: view as (batch, pos, heads, d_head), then transpose(1, 2)",
             dict(straight_split=True)),
            ("one head only? your output equals single-head attention; split q, k, v into n_heads heads",
             dict(n_heads=1)),
            ("scores scaled by 1/sqrt(d_model): each head scales by 1/sqrt(d_head), d_head = d_model // n_heads",
             dict(scale=1 / math.sqrt(d_model))),
            ("scores not scaled by 1/sqrt(d_head)?", dict(scale=1.0)),
        ]
        for hint, mistake in wrong:
            if _close(out, _mha_variant(ref, x, None, **mistake)):
                raise Hint(hint)
        raise Hint(f"your output differs from the reference with the same weights ({_max_diff(out, ref(x))})")

    if "key_padding_mask" not in inspect.signature(module.forward).parameters:
        return "matches attnkit's MultiHeadAttention (add a key_padding_mask argument to check padding too)"
    pad = torch.zeros(batch, n_pos, dtype=torch.bool)
    pad[1, -2:] = True  # the second sequence is two tokens shorter
    out = run(" with a key_padding_mask", key_padding_mask=pad)
    if not _close(out, ref(x, key_padding_mask=pad)):
        if _close(out, ref(x, key_padding_mask=~pad)):
            raise Hint("key_padding_mask is True at padding, so those keys are the ones to block: "
                       "attend where the mask is False (mask = ~key_padding_mask)")
        if _close(out, ref(x)):
            raise Hint("key_padding_mask ignored: the output is the same as without it")
        raise Hint("with a key_padding_mask your output differs: block keys where it is True, "
                   "broadcast as key_padding_mask[:, None, None, :] over heads and queries")
    return "matches attnkit's MultiHeadAttention with the same weights, with and without padding"
