"""Checkers for notebook 05's exercises (positional encodings), as every checker in attnkit/exercises: one
printed line, ✅ or a hint naming the likely mistake, ⏳ for an unfilled stub; True only on a pass.

Each checker compares the learner's code with attnkit.core.positional on several sizes (odd and
non-power-of-two widths, lengths 1 and 7, 1 to 8 heads) and, when it differs, rebuilds the usual
mistakes (sines and cosines as halves, 10000^(-i/d) instead of 10000^(-2i/d), a rotation the wrong
way, symmetric ALiBi, ...) to name the one that was made. Nothing the learner hands over makes a
checker raise: numpy arrays, lists, None, a wrong signature all become a hint.

The checkers are here, where the notebook imports them; what they share lives beside them:
positional_values (reading a learner's result), positional_sinusoids (the rebuilt mistakes of the
table, the shift matrix and RoPE) and positional_masks (ALiBi's and the max-pool's cases and mistakes).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch
from torch import Tensor

from ..core import positional
from .checking import Hint, NotDone, case_generator, checker, first_line, hidden, require_tensor
from .positional_masks import _alibi_mistakes, _pool_candidates, _pool_cases, _runs
from .positional_sinusoids import _rope_mistakes, _shift_mistakes, _table_mistakes
from .positional_values import _a, _array, _close, _dtype, _run, _shape

# ---------------------------------------------------------------- 1. the sinusoidal table


@checker(
    "sinusoidal_table",
    "05-sinusoidal-table",
    "my_sinusoidal_table",
    references=("attnkit.core.positional:sinusoidal_table",),
)
def check_sinusoidal_table(fn: Callable) -> str:
    """`fn(n_pos, d_model)` -> (n_pos, d_model): PE[p, 2i] = sin(p·ω_i), PE[p, 2i+1] = cos(p·ω_i),
    ω_i = 10000^(-2i/d_model); an odd d_model raises ValueError."""
    for n, d in ((7, 6), (1, 10), (33, 22), (4, 2), *hidden((12, 14), (5, 18))):
        context = f" for n_pos={n}, d_model={d}"
        try:
            out = _run(fn, n, d, context=context)
        except NotDone:
            raise
        except Hint as hint:
            if "raised ValueError" in str(hint):
                raise Hint(
                    f"{hint} — but d_model={d} is even: are your arguments in the order (n_pos, d_model)?"
                ) from None
            raise
        got = _array(out, f"table{context}")
        known = {
            (d, n): f"your table{context} has shape {(d, n)}, expected {(n, d)}: one row per position "
            "(n_pos rows, d_model columns) — transposed, or the arguments taken as (d_model, n_pos)?",
            (n, d // 2): f"your table{context} has shape {(n, d // 2)}, expected {(n, d)}: "
            "each pair i gives two columns, a sine and a cosine",
        }
        for g in (64, 256):  # the notebook's d_model and n_pos
            known.update(
                {
                    (n, g): f"your table{context} has {g} columns, expected {d}: use the d_model argument, "
                    "not the notebook's global d_model",
                    (g, d): f"your table{context} has {g} rows, expected {n}: use the n_pos argument, "
                    "not the notebook's global n_pos",
                }
            )
        got = _shape(got, (n, d), f"table{context}", known)
        if torch.isnan(got).any():
            raise Hint(f"NaN in your table{context}")
        ref = positional.sinusoidal_table(n, d).double()
        if _close(got, ref):
            continue
        mistake = _table_mistakes(got, n, d)
        if mistake:
            raise Hint(f"{context.strip()}: {mistake}")
        p, c = (~torch.isclose(got, ref, atol=1e-5, rtol=1e-4)).nonzero()[0].tolist()
        fn_name = "sin" if c % 2 == 0 else "cos"
        raise Hint(
            f"{context.strip()}: PE[{p}, {c}] is {got[p, c].item():.4g}, expected {ref[p, c].item():.4g} = "
            f"{fn_name}({p}·ω_{c // 2}) with ω_i = 10000^(-2i/d_model)"
        )

    d = 7
    context = f" for n_pos=5 and an odd d_model={d}"
    if not callable(fn):
        raise Hint(f"pass your function itself, not {_a(fn)}")
    try:
        out = fn(5, d)
    except NotImplementedError:
        raise NotDone("not implemented yet — fill in the stub above") from None
    except ValueError as e:
        if re.search(r"could not broadcast|could not be broadcast|cannot reshape|with a sequence", str(e)):
            raise Hint(
                f"an odd d_model fails by accident inside your code (ValueError: {first_line(e)}): "
                "check it first — `if d_model % 2: raise ValueError(...)`"
            ) from None
    except Exception as e:
        raise Hint(
            f"your code raised {type(e).__name__}{context} ({first_line(e)}): raise a ValueError "
            "that says the width must be even — `if d_model % 2: raise ValueError(...)` first"
        ) from None
    else:
        returned = "None" if out is None else "a table"
        raise Hint(
            f"{context.strip()}: your code returned {returned} instead of raising: the last sine would "
            "have no cosine partner — raise a ValueError, as attnkit's sinusoidal_table does"
        )
    return "matches attnkit's table for 1, 4, 7 and 33 positions at widths 2, 6, 10 and 22, and refuses an odd width"


# ---------------------------------------------------------------- 2. the shift matrix M_k


@checker(
    "shift_matrix",
    "05-shift-matrix",
    "my_shift_matrix",
    references=("attnkit.core.positional:sinusoidal_shift_matrix",),
)
def check_shift_matrix(fn: Callable) -> str:
    """`fn(k, d_model)` -> (d_model, d_model) block-diagonal M_k with PE(p + k) = M_k · PE(p)."""
    for k, d in ((3, 6), (1, 10), (-2, 22), (0, 4), (100, 8), *hidden((5, 12), (-7, 14))):
        context = f" for k={k}, d_model={d}"
        got = _array(_run(fn, k, d, context=context), f"matrix{context}")
        known = {
            (d // 2, 2, 2): f"your result{context} is the {d // 2} blocks (d_model/2, 2, 2): place them on the "
            "diagonal of one (d_model, d_model) matrix — torch.block_diag(*blocks)",
            (64, 64): f"your matrix{context} is (64, 64), expected ({d}, {d}): build ω from the d_model "
            "argument, not the notebook's global omega / d_model",
        }
        got = _shape(got, (d, d), f"matrix{context}", known)
        if torch.isnan(got).any():
            raise Hint(f"NaN in your matrix{context}")
        ref = positional.sinusoidal_shift_matrix(k, d)
        if _close(got, ref):
            continue
        mistake = _shift_mistakes(got, k, d)
        if mistake:
            raise Hint(f"{context.strip()}: {mistake}")
        if not _close(got @ got.T, torch.eye(d, dtype=torch.float64)):
            raise Hint(
                f"{context.strip()}: your M_k is not a rotation (M_k M_kᵀ ≠ I): it must be block-diagonal, "
                "block i = [[cos kω_i, sin kω_i], [-sin kω_i, cos kω_i]] at rows and columns 2i, 2i+1"
            )
        off_block = got.clone()
        for i in range(d // 2):
            off_block[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = 0
        if off_block.abs().max() > 1e-6:
            raise Hint(
                f"{context.strip()}: your M_k has entries outside the 2×2 blocks on its diagonal: pair i "
                "(columns 2i, 2i+1) only ever mixes with itself"
            )
        pair = (got - ref).abs().amax(dim=1).argmax().item() // 2
        raise Hint(
            f"{context.strip()}: M_k · PE(p) differs from PE(p + k), first in pair {pair} (max difference "
            f"{(got - ref).abs().max().item():.3g}): block i turns by k·ω_i, ω_i = 10000^(-2i/d_model)"
        )
    return "PE(p + k) = M_k · PE(p) for k = -2, 0, 1, 3, 100 at widths 4, 6, 8, 10 and 22"


# ---------------------------------------------------------------- 3. the RoPE rotation

_SHAPE_ERROR = re.compile(r"size|shape|dimension|unpack|broadcast|index|must match", re.I)


@checker("rotate (RoPE)", "05-rope-rotate", "my_rotate", references=("attnkit.core.positional:rotate",))
def check_rotate(fn: Callable) -> str:
    """`fn(x)`: x (..., pos, d_head) -> the same shape, pair (2i, 2i+1) at position p turned by p·ω_i."""
    gen = case_generator(5)
    for shape, dtype in (
        ((2, 3, 5, 10), torch.float32),
        ((7, 6), torch.float32),
        ((1, 1, 1, 4), torch.float32),
        ((3, 9, 22), torch.float64),
    ):
        x = torch.randn(*shape, generator=gen, dtype=dtype)
        context = f" on x of shape {shape}"
        given = x.clone()
        if not callable(fn):
            raise Hint(f"pass your function itself (e.g. check(my_rotate)), not {_a(fn)}")
        try:
            out = fn(given)
        except NotImplementedError:
            raise NotDone("not implemented yet — fill in the stub above") from None
        except Exception as e:
            hint = f"your code raised {type(e).__name__}{context}: {first_line(e)}"
            if _SHAPE_ERROR.search(str(e)):
                hint += (
                    " — x is (..., pos, d_head) with any number of leading axes: take n_pos = x.shape[-2] "
                    "and d_head = x.shape[-1], and let the (pos, d_head/2) angles broadcast over the rest"
                )
            raise Hint(hint) from None
        require_tensor(out, f"result{context}")
        got = _shape(
            _array(out, f"result{context}"),
            shape,
            f"result{context}",
            {
                shape[:-1] + (shape[-1] // 2,): f"your result{context} has half the width: return both "
                "rotated coordinates of every pair, interleaved"
            },
        )
        if torch.isnan(got).any():
            raise Hint(f"NaN in your result{context}")
        ref = positional.rotate(x).double()
        if not _close(got, ref):
            mistake = _rope_mistakes(got, x.double())
            if mistake:
                raise Hint(f"{context.strip()}: {mistake}")
            if not _close(got.norm(dim=-1), x.double().norm(dim=-1)):
                raise Hint(
                    f"{context.strip()}: your result changes each vector's length, so it is not a "
                    "rotation: the pair (x1, x2) becomes (x1·cos θ − x2·sin θ, x1·sin θ + x2·cos θ), "
                    "θ = p·ω_i"
                )
            raise Hint(
                f"{context.strip()}: your result differs from attnkit's rotate (max difference "
                f"{(got - ref).abs().max().item():.3g}): position p (x's second-to-last axis) turns pair i "
                "by p·ω_i, ω_i = 10000^(-2i/d_head)"
            )
        if not torch.equal(given, x):
            raise Hint(
                f"{context.strip()}: your function changed x in place: return a new tensor "
                "(the model still needs its q and k; build the result with torch.stack or a clone)"
            )
        _dtype(
            out,
            x.dtype,
            f"result{context}",
            "x's: a rotated q or k of another dtype than v makes the attention's product with v fail",
        )
    return (
        "matches attnkit's rotate on 2-D, 3-D and 4-D inputs, widths 4, 6, 10 and 22, 1 to 9 positions, "
        "in x's dtype (float32 and float64)"
    )


# ---------------------------------------------------------------- 4. the directional ALiBi bias


@checker("alibi_bias", "05-alibi-bias", "my_alibi_bias", references=("attnkit.core.positional:alibi_bias",))
def check_alibi_bias(fn: Callable) -> str:
    """`fn(n_pos, n_heads)` -> (heads, q_pos, k_pos), attnkit's directional ALiBi bias."""
    odd_passed = False  # once an odd head count has passed, a later failure is about something else
    for n, H in ((7, 8), (6, 5), (7, 3), (1, 3), (4, 2), *hidden((9, 6), (3, 7))):
        context = f" for n_pos={n}, n_heads={H}"
        try:
            out = _run(fn, n, H, context=context)
        except NotDone:
            raise
        except Hint as hint:
            # The advice is given only where a probe confirms it: the same length with one head more runs.
            if H % 2 and not odd_passed and _runs(fn, n, H + 1):
                raise Hint(
                    f"{hint} — with an odd head count the last head is a left head without a partner: "
                    "take (n_heads + 1) // 2 slopes and keep the first n_heads after "
                    "repeat_interleave(2)"
                ) from None
            if n == 1 and _runs(fn, 2, H):
                raise Hint(
                    f"{hint} — with one position the bias is (heads, 1, 1): only the token itself, -30 in every head"
                ) from None
            raise
        require_tensor(out, f"bias{context}")
        got = _array(out, f"bias{context}")
        known = {
            (n, n, H): f"your bias{context} is (q_pos, k_pos, heads): put the heads first, "
            "(heads, q_pos, k_pos) — e.g. permute(2, 0, 1)",
            (n, n): f"your bias{context} has no head axis: return (heads, q_pos, k_pos), one slope per head pair",
        }
        got = _shape(got, (H, n, n), f"bias{context}", known)
        if torch.isnan(got).any():
            ref = positional.alibi_bias(n, H).double()
            nan = torch.isnan(got)
            # 0 · inf from a mask: NaN on exactly the blocked keys, or on exactly the allowed ones (the diagonal
            # aside, often set last); NaN anywhere else has another cause, and the hint just says where.
            off = ~torch.eye(n, dtype=torch.bool).expand(H, n, n)
            blocked = torch.isinf(ref)
            if torch.equal(nan[off], blocked[off]) or torch.equal(nan[off], ~blocked[off]):
                raise Hint(
                    f"NaN in your bias{context} on every {'blocked' if nan[blocked].any() else 'allowed'} key: "
                    "0 · inf is NaN — set blocked keys with masked_fill or torch.where instead of multiplying "
                    "by a mask"
                )
            h, i, j = (int(v) for v in nan.nonzero()[0])
            raise Hint(
                f"NaN in your bias{context} at [h={h}, i={i}, j={j}], where the bias is {ref[h, i, j].item():.4g}"
            )
        if (got > 1e4).any():
            raise Hint(f"+inf (or a huge positive number) in your bias{context}: blocked keys get -inf")
        ref = positional.alibi_bias(n, H).double()
        blocked, ref_blocked = got < -1e4, torch.isinf(ref)
        if torch.equal(blocked, ref_blocked) and _close(got[~ref_blocked], ref[~ref_blocked]):
            _dtype(
                out,
                torch.get_default_dtype(),
                f"bias{context}",
                "torch's default dtype, float32: a float64 bias makes the float32 scores "
                "float64, and their product with the float32 values fails",
            )
            odd_passed = odd_passed or H % 2 == 1
            continue
        mistake = _alibi_mistakes(got, n, H)
        raise Hint(f"{context.strip()}: {mistake or 'your bias differs from the reference'}")
    return "matches attnkit's directional alibi_bias (a float32 tensor) for 1 to 7 positions and 2, 3, 5 and 8 heads"


# ---------------------------------------------------------------- 5. the max-pool readout


@checker("max_pool", "05-max-pool", "my_max_pool")
def check_max_pool(fn: Callable) -> str:
    """`fn(score, pad)`: score (batch, pos), pad (batch, pos) True = padding -> (batch,) max over real tokens."""
    for score, pad in _pool_cases():
        batch, n = score.shape
        context = f" on a batch of {batch} with {n} positions"
        given = (score.clone(), pad.clone())
        out = _run(fn, *given, context=context)
        if not (torch.equal(given[0], score) and torch.equal(given[1], pad)):
            raise Hint(
                f"your function changed the score or pad it was given{context} (in place, e.g. masked_fill_ or "
                "score[pad] = ...): in the model they are the caller's, still needed after the readout — "
                "use score.masked_fill(pad, float('-inf')), which returns a new tensor"
            )
        if (
            isinstance(out, tuple)
            and len(out) == 2
            and all(isinstance(o, Tensor) for o in out)
            and not out[1].is_floating_point()
            and out[1].dtype != torch.bool
        ):  # (values, indices)
            raise Hint("torch.max(x, dim) returns a pair (values, indices): take .values (or use x.amax(dim))")
        require_tensor(out, f"result{context}")
        got = _array(out, f"result{context}", integers=True)  # an argmax is named below
        known = {
            (): f"your result{context} is one number for the whole batch: pool over the positions only, "
            "giving one number per sequence (dim=1)",
            (batch, 1): f"your result{context} is (batch, 1): return shape (batch,) — drop keepdim=True",
            (batch, n): f"your result{context} is still one score per token: take the max over the positions (dim=1)",
        }
        if batch != n:
            known[(n,)] = (
                f"your result{context} has one number per position: the max ran over the batch axis; "
                "pool over the positions, dim=1 (or -1)"
            )
        got = _shape(got, (batch,), f"result{context}", known)
        ref = score.masked_fill(pad, float("-inf")).amax(dim=1).double()
        if _close(got, ref):
            _dtype(out, score.dtype, f"result{context}", "score's: the classifier's logit keeps the model's dtype")
            continue
        nan = torch.isnan(got)
        if nan.any():  # the hint names a cause only when the NaNs sit where that cause puts them
            padded = pad.any(1)
            # x * ~pad + pad * -inf: 0 · -inf at every real token, so also in the rows without padding
            if nan.all() and pad.any() and (~pad).all(1).any():
                raise Hint(
                    f"NaN in your result{context}: 0 · inf is NaN — fill the padding with "
                    "score.masked_fill(pad, float('-inf')) instead of multiplying by a mask"
                )
            if torch.equal(nan, padded):
                raise Hint(
                    f"NaN in your result{context} exactly for the sequences with padding: the padding was "
                    "filled with NaN, which the max passes on — fill it with float('-inf')"
                )
            b = int(nan.nonzero()[0])
            raise Hint(
                f"NaN in your result{context} for sequence {b}, whose largest real score is "
                f"{ref[b].item():.4g}: look for an operation that gives NaN there (0 · inf, 0 / 0, inf - inf, "
                "the std of one number)"
            )
        for candidate, hint in _pool_candidates(score, pad, ref):
            if _close(got, candidate.double()):  # -inf matches -inf
                raise Hint(hint)
        over = got > ref + 1e-6 * ref.abs().clamp(min=1)
        if over.any() and bool((ref[over] < -1e6).all()):  # only real scores this low tell a finite fill
            b = int(over.nonzero()[0])
            raise Hint(
                f"sequence {b}{context}: your readout is {got[b].item():.4g}, above its largest real score "
                f"{ref[b].item():.4g} — the padding was filled with a finite number that beats scores this "
                "low: fill it with float('-inf') (or torch.finfo(score.dtype).min)"
            )
        if torch.isinf(got).any():
            raise Hint(
                f"-inf in your result{context}: a row with every token masked? pad is True at padding, "
                "and every sequence has at least one real token"
            )
        b = int((~torch.isclose(got, ref, atol=1e-5)).nonzero()[0].item())
        raise Hint(
            f"sequence {b}{context}: your readout is {got[b].item():.4g}, expected {ref[b].item():.4g}, "
            "the largest score among its real (not padding) tokens"
        )
    return "the largest score of each sequence's real tokens, with padding, batch 1 and one position"
