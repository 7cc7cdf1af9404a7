"""Notebook 05's checkers (attnkit.exercises.positional): correct solutions written differently pass,
each planted mistake gets its own hint, and nothing a learner hands over makes a checker raise."""

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from torch import nn

from attnkit.core import positional
from attnkit.exercises import positional as positional_checks

from helpers import assert_hint, assert_hint_chain, assert_passes, checker_line

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "05_positional_encoding_extrapolation.ipynb"
CHECKS = [
    positional_checks.check_sinusoidal_table,
    positional_checks.check_shift_matrix,
    positional_checks.check_rotate,
    positional_checks.check_alibi_bias,
    positional_checks.check_max_pool,
]


def run(check, fn):
    return checker_line(check, fn)


# ---------------------------------------------------------------- the sinusoidal table


def table(n, d, *, layout="sin-interleaved", exponent=lambda d: -np.arange(0, d, 2) / d, start=0, odd="raise"):
    """A learner's table with at most one or two planted mistakes; odd d: "raise", "truncate" or "none"."""
    if d % 2 and odd == "raise":
        raise ValueError(f"d_model must be even, got {d}")
    angles = np.arange(start, start + n)[:, None] * 10000.0 ** exponent(d)
    sin, cos = np.sin(angles), np.cos(angles)
    first, second = (sin, cos) if layout.startswith("sin") else (cos, sin)
    if layout.endswith("halves"):
        return np.concatenate([first, second], axis=1)
    if odd == "truncate":
        return np.stack([first, second], -1).reshape(n, -1)[:, :d]
    out = np.empty((n, d))
    out[:, 0::2], out[:, 1::2] = first, second  # an odd d without a check breaks here (numpy ValueError)
    return out


def table_torch(n_pos, d_model):
    if d_model % 2 != 0:
        raise ValueError("odd width")
    omega = torch.exp(-torch.arange(0, d_model, 2).float() * torch.log(torch.tensor(10000.0)) / d_model)
    angles = torch.arange(n_pos).float()[:, None] * omega[None, :]
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(n_pos, d_model)


def table_loops(n_pos, d_model):
    import math

    if d_model % 2:
        raise ValueError("d_model must be even")
    rows = []
    for p in range(n_pos):
        row = []
        for i in range(d_model // 2):
            w = 1 / 10000 ** (2 * i / d_model)
            row += [math.sin(p * w), math.cos(p * w)]
        rows.append(row)
    return np.array(rows)  # a list of lists becomes an array (a list itself is refused)


def table_kit(n_pos, d_model):
    return positional.sinusoidal_table(n_pos, d_model)  # raises ValueError for odd widths


@pytest.mark.parametrize("fn", [table, table_torch, table_loops], ids=["numpy", "torch", "loops"])
def test_sinusoidal_table_correct_variants_pass(fn):
    assert_passes(positional_checks.check_sinusoidal_table, fn)


def positions_frequencies_swapped(n, d):
    if d % 2:
        raise ValueError("odd")
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = omega[:, None] * torch.arange(n)[None, :]  # (d/2, n): frequencies along the rows
    return torch.stack([angles.sin(), angles.cos()], -1).reshape(n, d)


def index_swapped(n, d):
    if d % 2:
        raise ValueError("odd")
    i, p = np.arange(d // 2)[None, :], np.arange(n)[:, None]
    angles = i * 10000.0 ** (-2 * p / d)  # i·ω_p instead of p·ω_i
    return np.stack([np.sin(angles), np.cos(angles)], -1).reshape(n, d)


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda n, d: table(n, d, layout="sin-halves"), "sines first and cosines after (two halves)"),
        (lambda n, d: table(n, d, layout="cos-interleaved"), "sin and cos swapped: the even columns 2i hold sin"),
        (lambda n, d: table(n, d, layout="cos-halves"), "cosines first and sines after"),
        (lambda n, d: table(n, d, exponent=lambda d: -np.arange(d // 2) / d), "frequencies use 10000^(-i/d)"),
        (lambda n, d: table(n, d, exponent=lambda d: -2 * np.arange(0, d, 2) / d), "frequencies use 10000^(-4i/d)"),
        (lambda n, d: table(n, d, exponent=lambda d: np.arange(0, d, 2) / d), "frequencies grow instead of shrinking"),
        (lambda n, d: table(n, d, start=1), "positions start at 1"),
        (
            lambda n, d: table(n, d, layout="sin-halves", exponent=lambda d: -np.arange(d // 2) / d),
            "2 mistakes: sines first and cosines after",
        ),
        (lambda n, d: table(n, d).T, "transposed, or the arguments taken as (d_model, n_pos)?"),
        (lambda n, d: table(n, 64), "not the notebook's global d_model"),
        (lambda n, d: table(256, d), "not the notebook's global n_pos"),
        (lambda n, d: np.sin(np.arange(n)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)), "a sine and a cosine"),
        (positions_frequencies_swapped, "positions and frequencies swapped"),
        (index_swapped, "positions and frequency indices swapped"),
        (
            lambda n, d: table(n, d, exponent=lambda d: -np.arange(0, d, 2) / d * np.log(1000) / np.log(10000)),
            "PE[1, 2] is",
        ),  # base 1000: the first wrong entry, named
        (lambda n, d: table(n, d, odd="truncate"), "your code returned a table instead of raising: the last sine"),
        (lambda n, d: None if d % 2 else table(n, d), "your code returned None instead of raising"),
        (lambda n, d: table(n, d, odd="none"), "an odd d_model fails by accident inside your code"),
        (
            lambda n, d: (
                table(n, d, odd="none") if d % 2 == 0 else table_torch(n, d + 1).reshape(n, -1)[:, :d].view(n, d + 1)
            ),
            "raise a ValueError that says the width must be even",
        ),  # a RuntimeError on the odd width
        (lambda d, n: table(n, d), "are your arguments in the order (n_pos, d_model)?"),
        (lambda n, d: table(n, d) * np.nan, "NaN in your table"),
    ],
)
def test_sinusoidal_table_mistakes_get_their_hint(fn, hint):
    assert_hint(positional_checks.check_sinusoidal_table, fn, hint)


def test_sinusoidal_table_own_value_error_messages_pass():
    def cannot(n, d):
        if d % 2:
            raise ValueError("d_model cannot be odd: could not pair the last sine")
        return table(n, d)

    assert_passes(positional_checks.check_sinusoidal_table, cannot)


def test_sinusoidal_table_assert_instead_of_value_error():
    def asserted(n, d):
        assert d % 2 == 0, "even please"
        return table(n, d)

    assert_hint(positional_checks.check_sinusoidal_table, asserted, "AssertionError")
    assert_hint(positional_checks.check_sinusoidal_table, asserted, "raise a ValueError")


# ---------------------------------------------------------------- the shift matrix


def shift(k, d, *, block="right", k_used=None, halves=False, exponent=lambda d: -np.arange(0, d, 2) / d):
    k = k if k_used is None else k_used
    blocks = {
        "right": lambda c, s: [[c, s], [-s, c]],
        "transposed": lambda c, s: [[c, -s], [s, c]],
        "no minus": lambda c, s: [[c, s], [s, c]],
        "swapped": lambda c, s: [[s, c], [-c, s]],
    }[block]
    M = np.zeros((d, d))
    for i, w in enumerate(10000.0 ** exponent(d)):
        idx = [i, i + d // 2] if halves else [2 * i, 2 * i + 1]
        M[np.ix_(idx, idx)] = blocks(np.cos(k * w), np.sin(k * w))
    return M


def shift_by_matrix_power(k, d_model):
    M1 = positional.sinusoidal_shift_matrix(1, d_model)
    return torch.linalg.matrix_power(M1, k)  # negative k: the inverse; float64 keeps k = 100 exact


def shift_vectorised(k, d_model):
    theta = k * 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model/2,)
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    M[even, even] = M[even + 1, even + 1] = theta.cos()
    M[even, even + 1], M[even + 1, even] = theta.sin(), -theta.sin()
    return M


@pytest.mark.parametrize("fn", [shift, shift_vectorised], ids=["numpy loop", "vectorised"])
def test_shift_matrix_correct_variants_pass(fn):
    assert_passes(positional_checks.check_shift_matrix, fn)


def blocks_off_diagonal(k, d):
    M = shift(k, d)
    M[:, [0, 1, 2, 3]] = M[:, [2, 3, 0, 1]]  # still orthogonal, but pair 0 mixes with pair 1
    return M


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda k, d: shift(k, d, block="transposed"), "your M_k turns the wrong way: it maps PE(p) to PE(p - k)"),
        (lambda k, d: shift(k, d, block="no minus"), "not a rotation: one of the two sines needs a minus"),
        (lambda k, d: shift(k, d, block="swapped"), "sin and cos swapped in the block"),
        (lambda k, d: shift(k, d, k_used=1), "k ignored: your M_k moves one step forward whatever k is"),
        (lambda k, d: shift(k, d, halves=True), "pairs (i, i + d_model/2) rotated together"),
        (lambda k, d: shift(k, d, exponent=lambda d: -np.arange(d // 2) / d), "frequencies use 10000^(-i/d)"),
        (lambda k, d: shift(k, d, exponent=lambda d: np.arange(0, d, 2) / d), "frequencies grow instead of shrinking"),
        (lambda k, d: shift(k, d, block="transposed", k_used=1), "your M_k moves one step back whatever k is"),
        (lambda k, d: shift(k, d, halves=True, exponent=lambda d: -np.arange(d // 2) / d), "2 mistakes"),
        (lambda k, d: shift(k, 64), "not the notebook's global omega / d_model"),
        (
            lambda k, d: np.stack(
                [
                    [[np.cos(k * w), np.sin(k * w)], [-np.sin(k * w), np.cos(k * w)]]
                    for w in 10000.0 ** (-np.arange(0, d, 2) / d)
                ]
            ),
            "torch.block_diag(*blocks)",
        ),
        (lambda k, d: 2 * shift(k, d), "your M_k is not a rotation (M_k M_kᵀ ≠ I)"),
        (blocks_off_diagonal, "entries outside the 2×2 blocks on its diagonal"),
        (lambda k, d: shift(k, d, exponent=lambda d: -np.arange(0, d, 2)[::-1] / d), "first in pair 0"),
        (lambda k, d: shift(k, d) * np.nan, "NaN in your matrix"),
    ],
)
def test_shift_matrix_mistakes_get_their_hint(fn, hint):
    assert_hint(positional_checks.check_shift_matrix, fn, hint)


# ---------------------------------------------------------------- RoPE


def rope(
    x, *, pairs="interleaved", sign=1, start=0, exponent=lambda d: -torch.arange(0, d, 2).float() / d, out="interleaved"
):
    n, d = x.shape[-2], x.shape[-1]
    angles = sign * torch.arange(start, start + n).float()[:, None] * 10000.0 ** exponent(d)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = (x[..., : d // 2], x[..., d // 2 :]) if pairs == "halves" else (x[..., 0::2], x[..., 1::2])
    a, b = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    return torch.stack([a, b], -1).flatten(-2) if out == "interleaved" else torch.cat([a, b], -1)


def rope_complex(x):
    n, d = x.shape[-2], x.shape[-1]
    theta = torch.arange(n)[:, None] * 10000.0 ** (-torch.arange(0, d, 2) / d)
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())  # complex64 or complex128
    theta = theta.to(x.dtype)
    return torch.view_as_real(z * torch.polar(torch.ones_like(theta), theta)).flatten(-2)


def rope_numpy_loops(x):
    a = x.numpy().astype(np.float64)
    out = a.copy()
    n, d = a.shape[-2], a.shape[-1]
    for p in range(n):
        for i in range(d // 2):
            t = p * 10000.0 ** (-2 * i / d)
            x1, x2 = a[..., p, 2 * i], a[..., p, 2 * i + 1]
            out[..., p, 2 * i] = x1 * np.cos(t) - x2 * np.sin(t)
            out[..., p, 2 * i + 1] = x1 * np.sin(t) + x2 * np.cos(t)
    return torch.from_numpy(out).to(x.dtype)  # computed in numpy, handed back as x's tensor type


def rope_matrix(x):
    n, d = x.shape[-2], x.shape[-1]
    R = torch.stack([positional.sinusoidal_shift_matrix(-p, d).to(x.dtype) for p in range(n)])  # R(pω) = M_{-p}
    return (R @ x.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize(
    "fn", [rope, rope_complex, rope_numpy_loops, rope_matrix], ids=["stack", "complex", "numpy loops", "shift matrices"]
)
def test_rotate_correct_variants_pass(fn):
    assert_passes(positional_checks.check_rotate, fn)


def rope_four_d_only(x):
    b, h, n, d = x.shape
    return rope(x)


def rope_positions_from_axis_1(x):
    n, d = x.shape[1], x.shape[-1]
    angles = torch.arange(n).float()[:, None] * 10000.0 ** (-torch.arange(0, d, 2).float() / d)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * angles.cos() - x2 * angles.sin(), x1 * angles.sin() + x2 * angles.cos()], -1).flatten(-2)


def rope_in_place(x):
    x[...] = rope(x.clone())
    return x


def rope_not_a_rotation(x):
    n, d = x.shape[-2], x.shape[-1]
    angles = torch.arange(n).float()[:, None] * 10000.0 ** (-torch.arange(0, d, 2).float() / d)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * angles.cos() - x2 * angles.sin(), x1 * angles.sin() - x2 * angles.cos()], -1).flatten(-2)


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda x: rope(x, pairs="halves", out="halves"), "pairs (i, i + d_head/2) rotated together (the rotate_half"),
        (lambda x: rope(x, sign=-1), "turned by -p·ω (the angle's sign)"),
        (lambda x: rope(x, start=1), "positions start at 1"),
        (lambda x: rope(x, exponent=lambda d: -torch.arange(d // 2).float() / d), "frequencies use 10000^(-i/d)"),
        (lambda x: rope(x, out="halves"), "the rotated pairs are written back as two halves"),
        (lambda x: rope(x, pairs="halves", out="halves", sign=-1), "2 mistakes"),
        (rope_four_d_only, "any number of leading axes"),
        (rope_positions_from_axis_1, "take n_pos = x.shape[-2]"),
        (rope_in_place, "changed x in place"),
        (rope_not_a_rotation, "changes each vector's length, so it is not a rotation"),
        (lambda x: rope(x)[..., 0::2], "half the width"),
        (
            lambda x: rope(x, exponent=lambda d: -torch.arange(0, d, 2).float() / d * 0.75),
            "differs from attnkit's rotate",
        ),
        (lambda x: rope(x, exponent=lambda d: -torch.arange(0, 64, 2).float() / 64), "raised RuntimeError"),
        (lambda x: rope(x) / 0 * 0, "NaN in your result"),
    ],
)
def test_rotate_mistakes_get_their_hint(fn, hint):
    assert_hint(positional_checks.check_rotate, fn, hint)


# ---------------------------------------------------------------- ALiBi


def alibi(
    n, H, *, slopes=None, sign=1, minus_one=True, left_even=True, diag=-30.0, blocked=float("-inf"), directional=True
):
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    s = positional.alibi_slopes((H + 1) // 2).repeat_interleave(2)[:H] if slopes is None else slopes(H)
    bias = -sign * s[:, None, None] * (offset.abs() - (1 if minus_one else 0))
    if directional:
        even, odd = (offset > 0, offset < 0) if left_even else (offset < 0, offset > 0)
        mask = torch.stack([even if h % 2 == 0 else odd for h in range(H)])
        bias = bias.masked_fill(mask, blocked)
    return bias if diag is None else bias.masked_fill(offset == 0, diag)


def alibi_loops(n_pos, n_heads):
    out = np.zeros((n_heads, n_pos, n_pos))
    for h in range(n_heads):
        m = 2.0 ** (-8.0 * (h // 2 + 1) / ((n_heads + 1) // 2))
        for i in range(n_pos):
            for j in range(n_pos):
                if i == j:
                    out[h, i, j] = -30
                elif (h % 2 == 0 and j > i) or (h % 2 == 1 and j < i):
                    out[h, i, j] = -np.inf
                else:
                    out[h, i, j] = -m * (abs(j - i) - 1)
    return torch.from_numpy(out).float()  # the model adds it to float32 scores


def alibi_where(n_pos, n_heads):
    i, j = torch.meshgrid(torch.arange(n_pos), torch.arange(n_pos), indexing="ij")
    slopes = torch.tensor([2.0 ** (-8 * (h // 2 + 1) / ((n_heads + 1) // 2)) for h in range(n_heads)])
    heads = torch.arange(n_heads)[:, None, None]
    ok = torch.where(heads % 2 == 0, j < i, j > i)
    return torch.where(
        i == j,
        torch.tensor(-30.0),
        torch.where(ok, -slopes[:, None, None] * ((j - i).abs() - 1), torch.tensor(torch.finfo().min)),
    )


@pytest.mark.parametrize(
    "fn",
    [alibi, alibi_loops, alibi_where, lambda n, H: alibi(n, H, blocked=-1e9)],
    ids=["masked_fill", "loops", "where + finfo.min", "-1e9"],
)
def test_alibi_correct_variants_pass(fn):
    assert_passes(positional_checks.check_alibi_bias, fn)


def alibi_floor_pairs(n, H):
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    slopes = positional.alibi_slopes(H // 2).repeat_interleave(2)  # one slope short for an odd count
    bias = -slopes[:, None, None] * (offset.abs() - 1)
    return bias.masked_fill(alibi(n, H).isinf(), float("-inf")).masked_fill(offset == 0, -30.0)


def alibi_times_mask(n, H):
    ref = alibi(n, H, blocked=0.0)
    allowed = ~alibi(n, H).isinf()
    return ref * allowed + (~allowed) * float("-inf") * 1.0 + 0 * ref  # 0 · -inf = NaN where allowed


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda n, H: positional.alibi_bias(n, H, directional=False), "symmetric ALiBi (-slope·|j - i| on both sides)"),
        (lambda n, H: alibi(n, H, directional=False), "symmetric ALiBi"),
        (lambda n, H: alibi(n, H, directional=False, sign=-1), "no key is blocked"),
        (lambda n, H: alibi(n, H, sign=-1), "sign flipped: the bias falls with distance"),
        (lambda n, H: alibi(n, H, left_even=False), "left and right swapped"),
        (lambda n, H: alibi(n, H, diag=float("-inf")), "the token itself is blocked: give the diagonal -30"),
        (lambda n, H: alibi(n, H, diag=0.0), "the token itself gets bias 0"),
        (lambda n, H: alibi(n, H, diag=None), "the diagonal follows the formula"),
        (lambda n, H: alibi(n, H, diag=-1.0), "the diagonal (each token itself) should be -30"),
        (lambda n, H: alibi(n, H, minus_one=False), "off by one: the nearest allowed key"),
        (lambda n, H: alibi(n, H, slopes=lambda H: positional.alibi_slopes(H)), "each head got its own slope"),
        (
            lambda n, H: alibi(n, H, slopes=lambda H: positional.alibi_slopes((H + 1) // 2).repeat(2)[:H]),
            "slopes tiled",
        ),
        (
            lambda n, H: alibi(
                n, H, slopes=lambda H: positional.alibi_slopes((H + 1) // 2).repeat_interleave(2)[:H].flip(0)
            ),
            "slopes in reverse order",
        ),
        (
            lambda n, H: alibi(
                n, H, slopes=lambda H: (2.0 ** (-8.0 * torch.arange(1, (H + 1) // 2 + 1) / H)).repeat_interleave(2)[:H]
            ),
            "slopes computed with n = n_heads",
        ),
        (
            lambda n, H: alibi(n, H, slopes=lambda H: positional.alibi_slopes(H // 2 + 1).repeat_interleave(2)[:H]),
            "one pair too many for an even head count",
        ),
        (alibi_floor_pairs, "with an odd head count the last head is a left head without a partner"),
        (
            lambda n, H: alibi(n, H) if n > 1 else torch.zeros(H, 1, 1)[:, 5],
            "with one position the bias is (heads, 1, 1)",
        ),
        (lambda n, H: alibi(n, H, sign=-1, minus_one=False), "2 mistakes"),
        (lambda n, H: torch.stack([alibi(n, H)[0]] * H), "every head looks left"),
        (lambda n, H: alibi(n, H).permute(1, 2, 0), "put the heads first"),
        (alibi_times_mask, "0 · inf is NaN"),
        (lambda n, H: -alibi(n, H), "+inf (or a huge positive number)"),
        (lambda n, H: alibi(n, H, slopes=lambda H: torch.full((H,), 0.3)), "head 0, query"),
    ],
)
def test_alibi_mistakes_get_their_hint(fn, hint):
    assert_hint(positional_checks.check_alibi_bias, fn, hint)


# ---------------------------------------------------------------- max pool


def pool_loops(score, pad):
    values = [max(s for s, p in zip(row.tolist(), prow.tolist()) if not p) for row, prow in zip(score, pad)]
    return torch.tensor(values, dtype=score.dtype)


@pytest.mark.parametrize(
    "fn",
    [
        lambda s, p: s.masked_fill(p, float("-inf")).amax(dim=1),
        lambda s, p: torch.where(p, torch.finfo(s.dtype).min, s).max(dim=-1).values,
        pool_loops,
        lambda s, p: torch.from_numpy(np.where(p.numpy(), -np.inf, s.numpy()).max(axis=1)),
    ],
    ids=["masked_fill", "where + finfo.min", "loops", "numpy"],
)
def test_max_pool_correct_variants_pass(fn):
    assert_passes(positional_checks.check_max_pool, fn)


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda s, p: s.amax(1), "padding counted"),
        (lambda s, p: (s * ~p).amax(1), "padding became 0"),
        (lambda s, p: s.masked_fill(p, 0).amax(1), "padding became 0"),
        (lambda s, p: (s * ~p).sum(1) / (~p).sum(1), "that is mean pooling over the real tokens"),
        (lambda s, p: s.mean(1), "that is mean pooling (with the padding counted too)"),
        (lambda s, p: s.masked_fill(p, float("-inf")).amax(0), "the max ran over the batch axis"),
        (lambda s, p: s.masked_fill(p, float("-inf")).max(1), "returns a pair (values, indices)"),
        (lambda s, p: s.masked_fill(p, float("-inf")).argmax(1), "argmax"),
        (lambda s, p: s.masked_fill(~p, float("-inf")).amax(1), "pad is True at padding, so fill the scores where pad"),
        (lambda s, p: -s.masked_fill(p, float("-inf")).amax(1), "sign flipped: return the max itself"),
        (lambda s, p: s.masked_fill(p, float("-inf")).amax(1, keepdim=True), "drop keepdim=True"),
        (lambda s, p: s.masked_fill(p, float("-inf")).max(), "one number for the whole batch"),
        (lambda s, p: (s * ~p).sum(1), "that is a sum over the tokens"),
        (lambda s, p: s.masked_fill(p, float("-inf")), "still one score per token"),
        (lambda s, p: (s * ~p + p * float("-inf")).amax(1), "NaN in your result"),
        (lambda s, p: s.masked_fill(p, float("-inf")).amax(1) + 0.1, "the largest score among its real"),
    ],
)
def test_max_pool_mistakes_get_their_hint(fn, hint):
    assert_hint(positional_checks.check_max_pool, fn, hint)


# ---------------------------------------------------------------- every checker: stubs and strange input


def stub(*args):
    raise NotImplementedError("your code here")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_the_unfilled_stub_is_not_done(check):
    passed, line = run(check, stub)
    assert passed is False and line.startswith("⏳") and "not implemented yet" in line, line


class Plain:  # not a function, not an nn.Module
    def __init__(self, *args):
        self.args = args


def generator(*args):
    yield torch.zeros(3)


STRANGE = {
    "None": None,
    "a number": 3,
    "a tensor": torch.zeros(3),
    "no arguments": lambda: torch.zeros(3),
    "one argument too many": lambda a, b, c: torch.zeros(3),
    "returns None": lambda *a: None,
    "a generator": generator,
    "a plain class": Plain,
    "an nn.Module class": nn.Identity,
    "returns a string": lambda *a: "table",
    "returns a ragged list": lambda *a: [[1.0, 2.0], [3.0]],
    "returns a dict": lambda *a: {"a": 1},
    "returns complex numbers": lambda *a: np.ones((3, 3), dtype=complex),
    "returns an empty tensor": lambda *a: torch.zeros(0),
    "returns a float": lambda *a: 0.5,
    "raises ZeroDivisionError": lambda *a: 1 / 0,
    "raises a KeyError": lambda *a: {}["x"],
    "arguments swapped": lambda a, b=None: (b, a),
    "numpy of the wrong shape": lambda *a: np.zeros((2, 2)),
}


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("what", list(STRANGE))
def test_checkers_never_raise(check, what):
    passed, line = run(check, STRANGE[what])
    assert passed is False and line[0] in "❌⏳", line


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_checkers_leave_the_random_state_alone(check):
    torch_state, np_state = torch.random.get_rng_state(), np.random.get_state()
    check(stub)
    check(lambda *a: torch.zeros(3))
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert all(np.array_equal(a, b) for a, b in zip(np.random.get_state(), np_state))


# ---------------------------------------------------------------- the notebook's own solutions and stubs


def notebook_exercises():
    """(solution source, check source) per exercise of notebook 05, in order."""
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    pairs = []
    for cell, check in zip(cells, cells[1:]):
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            grade_id = cell.metadata["nbgrader"]["grade_id"]
            assert (check.metadata["tags"], check.metadata["attnkit"]) == (["check"], {"exercise": grade_id})
            pairs.append((cell.source, check.source))
    return pairs


def namespace():
    ns = {}
    exec(
        "import numpy as np\nimport torch\nfrom attnkit.core import positional\n"
        "from attnkit.exercises import positional as positional_checks",
        ns,
    )
    return ns


def test_notebook_has_five_exercises_in_the_format():
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    solution = lambda c: c.metadata.get("nbgrader", {}).get("solution")  # noqa: E731 (check cells are tests)
    ids = [c.metadata["nbgrader"]["grade_id"] for c in cells if solution(c)]
    assert ids == ["05-sinusoidal-table", "05-shift-matrix", "05-rope-rotate", "05-alibi-bias", "05-max-pool"]
    for n, cell in enumerate(cells):
        if solution(cell):
            assert cell.metadata == {
                "nbgrader": {
                    "grade": False,
                    "grade_id": cell.metadata["nbgrader"]["grade_id"],
                    "locked": False,
                    "schema_version": 3,
                    "solution": True,
                    "task": False,
                }
            }
            title = cells[n - 1].source.splitlines()[0]
            assert re.match(r"### ⭐{1,3} Exercise: ", title), title
            assert "<details><summary>Hint</summary>\n\n" in cells[n - 1].source
            assert cell.source.count("### BEGIN SOLUTION") == cell.source.count("### END SOLUTION") == 1
            assert re.fullmatch(r"[\w.]+\(\w+\);", cells[n + 1].source.strip())


def test_notebook_solutions_pass(capsys):
    ns = namespace()
    for solution, check in notebook_exercises():
        exec(solution, ns)
        assert eval(check.rstrip(";"), ns) is True, check
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 5 and all(line.startswith("✅") for line in printed), printed


def test_notebook_stubs_are_not_done(capsys):
    region = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*$", re.S | re.M)
    ns = namespace()
    for solution, check in notebook_exercises():
        exec(region.sub(lambda m: f'{m.group(1)}raise NotImplementedError("your code here")', solution), ns)
        assert eval(check.rstrip(";"), ns) is False, check
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 5 and all(line.startswith("⏳") for line in printed), printed


# ---------------------------------------------------------------- following a hint leads on, never back


def test_following_the_hints_leads_to_a_pass():
    """A learner with two mistakes fixes them one hint at a time: each step gets a new hint, then ✅."""
    steps = [
        (
            positional_checks.check_sinusoidal_table,
            [
                (
                    lambda n, d: table(
                        n, d, layout="sin-halves", exponent=lambda d: -np.arange(d // 2) / d, odd="none"
                    ),
                    "2 mistakes",
                ),
                (lambda n, d: table(n, d, exponent=lambda d: -np.arange(d // 2) / d, odd="none"), "10000^(-i/d)"),
                (lambda n, d: table(n, d, odd="none"), "fails by accident"),
                (table, None),
            ],
        ),
        (
            positional_checks.check_shift_matrix,
            [
                (lambda k, d: shift(k, d, block="transposed", halves=True), "2 mistakes"),
                (lambda k, d: shift(k, d, block="transposed"), "turns the wrong way"),
                (shift, None),
            ],
        ),
        (
            positional_checks.check_rotate,
            [
                (lambda x: rope(x, sign=-1, out="halves"), "2 mistakes"),
                (lambda x: rope(x, out="halves"), "written back as two halves"),
                (rope, None),
            ],
        ),
        (
            positional_checks.check_alibi_bias,
            [
                (lambda n, H: alibi(n, H, directional=False), "symmetric ALiBi"),
                (lambda n, H: alibi(n, H, diag=None), "the diagonal follows the formula"),
                (lambda n, H: alibi(n, H, slopes=lambda H: positional.alibi_slopes(H)), "each head got its own slope"),
                (alibi_floor_pairs, "odd head count"),
                (alibi, None),
            ],
        ),
        (
            positional_checks.check_max_pool,
            [
                (lambda s, p: (s * ~p).amax(1), "padding became 0"),
                (lambda s, p: s.masked_fill(p, float("-inf")).amax(1), None),
            ],
        ),
    ]
    for check, chain in steps:
        assert_hint_chain(check, chain)


def test_an_exception_inside_a_checker_is_one_line_too(monkeypatch):
    def broken(*args):
        raise RuntimeError("a bug in the reference")

    monkeypatch.setattr(positional_checks.positional, "sinusoidal_table", broken)
    passed, line = run(positional_checks.check_sinusoidal_table, table)
    assert not passed and line.startswith("❌ sinusoidal_table: the checker could not use what you passed"), line


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda n, d: torch.zeros(n, d, dtype=torch.long), "holds integers"),
        (lambda n, d: np.zeros((n, d), dtype=int), "holds integers"),
        (lambda n, d: torch.tensor(table(n, d)).half(), "too coarse"),
        (lambda n, d: torch.tensor(table(n, d)).to(torch.complex64), "is complex"),
        (lambda n, d: np.ones((n, d), dtype=complex), "is complex"),
        (lambda n, d: torch.tensor(table(n, d), requires_grad=True), None),  # a leaf with grad: fine
        (lambda n, d: table(n, d).tolist(), "is a list, expected a torch tensor"),  # one type rule: lists refused
    ],
)
def test_result_types(fn, hint):
    passed, line = run(positional_checks.check_sinusoidal_table, fn)
    assert (passed and hint is None) or (not passed and hint in line), line


@pytest.mark.parametrize(
    "check, fn",
    [
        (positional_checks.check_sinusoidal_table, table_kit),
        (positional_checks.check_shift_matrix, shift_by_matrix_power),
        (positional_checks.check_shift_matrix, lambda k, d: positional.sinusoidal_shift_matrix(k, d).float()),
        (positional_checks.check_rotate, positional.rotate),
        (positional_checks.check_alibi_bias, positional.alibi_bias),
    ],
    ids=["table", "matrix power", "shift matrix", "rotate", "alibi"],
)
def test_the_kits_own_answer_does_not_pass(check, fn):
    passed, line = checker_line(check, fn)
    assert not passed and "the kit's own attnkit.core.positional." in line, line
