"""Checkers for notebook 05's exercises (positional encodings), in the style of checks.py: one
printed line, ✅ or a hint naming the likely mistake, ⏳ for an unfilled stub; True only on a pass.

Each checker compares the learner's code with attnkit.core.positional on several sizes (odd and
non-power-of-two widths, lengths 1 and 7, 1 to 8 heads) and, when it differs, rebuilds the usual
mistakes (sines and cosines as halves, 10000^(-i/d) instead of 10000^(-2i/d), a rotation the wrong
way, symmetric ALiBi, ...) to name the one that was made. Nothing the learner hands over makes a
checker raise: numpy arrays, lists, None, a wrong signature all become a hint.
"""

from __future__ import annotations

import itertools
import re
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from ..core import positional
from .checking import Hint, NotDone, call, checker, first_line, refuse_list, require_tensor

BASE = 10000.0


def _run(fn, *args, context: str = ""):
    """checking.call, after saying what to pass when it is not a function."""
    if not callable(fn):
        raise Hint(f"pass your function itself (e.g. check(my_function)), not {_a(fn)}")
    return call(fn, *args, context=context)


def _a(x) -> str:
    name = type(x).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _array(x, what: str, integers: bool = False) -> Tensor:
    """The learner's result as a float64 CPU tensor; a torch tensor, numpy array or nested list.
    An integer array is refused with a hint unless `integers` (then a later check names it)."""
    if x is None:
        raise Hint(f"your {what} is None — did you forget `return`?")
    refuse_list(x, what)
    if (isinstance(x, np.ndarray) and np.iscomplexobj(x)) or (isinstance(x, Tensor) and x.is_complex()):
        raise Hint(f"your {what} is complex: return real numbers (sin and cos separately)")
    is_tensor, is_numpy = isinstance(x, Tensor), isinstance(x, np.ndarray)
    if (is_tensor and x.dtype in (torch.float16, torch.bfloat16)) or (is_numpy and x.dtype == np.float16):
        raise Hint(f"your {what} is {x.dtype}: too coarse for this check — compute in float32 or float64")
    if not integers and ((is_tensor and not x.is_floating_point()) or (is_numpy and x.dtype.kind in "biu")):
        raise Hint(
            f"your {what} holds integers ({x.dtype}): the values are fractions — create it as a float "
            "array (e.g. np.zeros(shape) or torch.zeros(shape), not zeros_like of an integer arange)"
        )
    if isinstance(x, Tensor):
        t = x.detach().cpu()
    elif isinstance(x, (np.ndarray, list, tuple, int, float, np.number)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", np.exceptions.ComplexWarning)  # complex -> float drops a part
                t = torch.from_numpy(np.array(x, dtype=np.float64))
        except Exception:
            raise Hint(
                f"your {what} is {_a(x)} that is not an array of numbers: return a tensor (or numpy array)"
            ) from None
    else:
        raise Hint(f"your {what} is {_a(x)}, expected a tensor (or numpy array)")
    return t.double()


def _dtype(x: Tensor, dtype: torch.dtype, what: str, why: str) -> None:
    """The values are right; the dtype must be `dtype` too (`why`: whose dtype it is, what breaks)."""
    if x.dtype != dtype:
        raise Hint(
            f"the values are right, but your {what} is {x.dtype}, expected {dtype} ({why}) — build its "
            f"tensors in that dtype (dtype=...) or end with .to({dtype})",
            mistake="wrong-dtype",
        )


def _shape(t: Tensor, expected: tuple, what: str, known: dict) -> Tensor:
    """Check a shape; `known` maps a wrong shape to the hint that explains it."""
    got = tuple(t.shape)
    if got != expected:
        if got in known:
            raise Hint(known[got])
        raise Hint(f"your {what} has shape {got}, expected {expected}")
    return t


def _close(a: Tensor, b: Tensor, atol: float = 1e-5) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=1e-4))


def _join(mistakes: list[str]) -> str:
    return mistakes[0] if len(mistakes) == 1 else f"{len(mistakes)} mistakes: " + "; and ".join(mistakes)


# ---------------------------------------------------------------- frequencies, shared by three exercises


# name -> (ω_i for i = 0 … d/2-1, the hint when a learner's code used it)
def _omegas(d: int) -> dict[str, tuple[Tensor, str]]:
    i = torch.arange(d // 2, dtype=torch.float64)
    return {
        "right": (BASE ** (-2 * i / d), ""),
        "i": (
            BASE ** (-i / d),
            "frequencies use 10000^(-i/d): the exponent is -2i/d — "
            "arange(0, d, 2) is already 2i, arange(d // 2) is i and needs the 2",
        ),
        "4i": (
            BASE ** (-4 * i / d),
            "frequencies use 10000^(-4i/d): arange(0, d, 2) is already 2i, do not multiply it by 2 again",
        ),
        "positive": (
            BASE ** (2 * i / d),
            "frequencies grow instead of shrinking: ω_i = 10000^(-2i/d) "
            "(a minus in the exponent), so the angle is p / 10000^(2i/d), "
            "not p · 10000^(2i/d)",
        ),
    }


# ---------------------------------------------------------------- 1. the sinusoidal table


def _table(n: int, d: int, omega: Tensor, layout: str, start: int = 0) -> Tensor:
    angles = torch.arange(start, start + n, dtype=torch.float64)[:, None] * omega  # (n, d/2)
    sin, cos = angles.sin(), angles.cos()
    first, second = (sin, cos) if layout.startswith("sin") else (cos, sin)
    if layout.endswith("halves"):
        return torch.cat([first, second], dim=-1)
    return torch.stack([first, second], dim=-1).reshape(n, d)


_LAYOUTS = {
    "sin-interleaved": "",
    "cos-interleaved": "sin and cos swapped: the even columns 2i hold sin(p·ω_i), the odd columns 2i+1 cos(p·ω_i)",
    "sin-halves": "sines first and cosines after (two halves): attnkit interleaves them, PE[p, 2i] = sin and "
    "PE[p, 2i+1] = cos — fill table[:, 0::2] and table[:, 1::2] (or stack(..., dim=-1) then reshape)",
    "cos-halves": "cosines first and sines after (two halves): attnkit interleaves them with the sine first, "
    "PE[p, 2i] = sin and PE[p, 2i+1] = cos — fill table[:, 0::2] and table[:, 1::2]",
}


def _table_mistakes(got: Tensor, n: int, d: int) -> str:
    """Name the mistakes that rebuild `got`, or '' when none of the usual ones does."""
    for (layout, layout_hint), (_freq, (omega, freq_hint)), start in itertools.product(
        _LAYOUTS.items(), _omegas(d).items(), (0, 1)
    ):
        if _close(got, _table(n, d, omega, layout, start)):
            start_hint = "positions start at 1: the first row is position 0 (arange(n_pos))" if start else ""
            return _join([h for h in (layout_hint, freq_hint, start_hint) if h])
    omega = _omegas(d)["right"][0]
    grid = omega[:, None] * torch.arange(n, dtype=torch.float64)  # (d/2, n): frequencies along the rows
    scrambled = torch.stack([grid.sin(), grid.cos()], -1).reshape(n, d)
    if n * d > 2 and _close(got, scrambled) and not _close(got, _table(n, d, omega, "sin-interleaved")):
        return (
            "positions and frequencies swapped: your angles are (d_model/2, n_pos) and reshaping them "
            "scrambles the table — build them as positions[:, None] * omega[None, :], (n_pos, d_model/2)"
        )
    i = torch.arange(d // 2, dtype=torch.float64)
    swapped = i[None, :] * BASE ** (-2 * torch.arange(n, dtype=torch.float64)[:, None] / d)
    if _close(got, torch.stack([swapped.sin(), swapped.cos()], -1).reshape(n, d)):
        return (
            "positions and frequency indices swapped: the angle is p·ω_i (position times the frequency "
            "of pair i), not i·ω_p"
        )
    return ""


@checker(
    "sinusoidal_table",
    "05-sinusoidal-table",
    "my_sinusoidal_table",
    references=("attnkit.core.positional:sinusoidal_table",),
)
def check_sinusoidal_table(fn: Callable) -> str:
    """`fn(n_pos, d_model)` -> (n_pos, d_model): PE[p, 2i] = sin(p·ω_i), PE[p, 2i+1] = cos(p·ω_i),
    ω_i = 10000^(-2i/d_model); an odd d_model raises ValueError."""
    for n, d in ((7, 6), (1, 10), (33, 22), (4, 2)):
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

_BLOCKS = {  # (c, s) -> 2×2 block, and the hint when a learner's matrix is made of it
    "right": (lambda c, s: [[c, s], [-s, c]], ""),
    "transposed": (
        lambda c, s: [[c, -s], [s, c]],
        "your M_k turns the wrong way: it maps PE(p) to PE(p - k). For the (sin, cos) order of each "
        "pair the block is [[cos kω, sin kω], [-sin kω, cos kω]] — yours is its transpose",
    ),
    "no minus": (
        lambda c, s: [[c, s], [s, c]],
        "not a rotation: one of the two sines needs a minus — [[cos kω, sin kω], [-sin kω, cos kω]]",
    ),
    "no minus'": (
        lambda c, s: [[c, -s], [-s, c]],
        "not a rotation: exactly one of the two sines has a minus — [[cos kω, sin kω], [-sin kω, cos kω]]",
    ),
    "swapped": (
        lambda c, s: [[s, c], [-c, s]],
        "sin and cos swapped in the block: cos kω goes on the diagonal, ±sin kω off it",
    ),
}


def _shift(k: int, d: int, omega: Tensor, block, halves: bool = False) -> Tensor:
    M = torch.zeros(d, d, dtype=torch.float64)
    for i, w in enumerate(omega.tolist()):
        b = torch.tensor(block(np.cos(k * w), np.sin(k * w)), dtype=torch.float64)
        rows = [i, i + d // 2] if halves else [2 * i, 2 * i + 1]
        M[np.ix_(rows, rows)] = b
    return M


def _shift_mistakes(got: Tensor, k: int, d: int) -> str:
    for (bname, (block, block_hint)), (freq, (omega, freq_hint)), k_used, halves in itertools.product(
        _BLOCKS.items(), _omegas(d).items(), (k, 1, -1), (False, True)
    ):
        if bname == "right" and freq == "right" and k_used == k and not halves:
            continue
        if _close(got, _shift(k_used, d, omega, block, halves)):
            way = "forward" if k_used > 0 else "back"
            k_hint = (
                ""
                if k_used == k
                else f"k ignored: your M_k moves one step {way} whatever k is — block i turns by k·ω_i"
            )
            halves_hint = (
                ""
                if not halves
                else (
                    "pairs (i, i + d_model/2) rotated together: attnkit's pairs are the neighbouring columns "
                    "(2i, 2i+1), sin then cos, so block i sits at rows and columns 2i, 2i+1"
                )
            )
            mistakes = [h for h in (block_hint, freq_hint, k_hint, halves_hint) if h]
            if mistakes:
                return _join(mistakes)
    return ""


@checker(
    "shift_matrix",
    "05-shift-matrix",
    "my_shift_matrix",
    references=("attnkit.core.positional:sinusoidal_shift_matrix",),
)
def check_shift_matrix(fn: Callable) -> str:
    """`fn(k, d_model)` -> (d_model, d_model) block-diagonal M_k with PE(p + k) = M_k · PE(p)."""
    for k, d in ((3, 6), (1, 10), (-2, 22), (0, 4), (100, 8)):
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


def _rope(x: Tensor, omega: Tensor, pairs: str = "interleaved", sign: int = 1, start: int = 0) -> Tensor:
    """RoPE with its usual variants: pairs "interleaved" (attnkit), "halves" (rotate_half), or
    "interleaved, halves out" (neighbours rotated, then written back as two halves)."""
    n, d = x.shape[-2], x.shape[-1]
    angles = sign * torch.arange(start, start + n, dtype=torch.float64)[:, None] * omega  # (pos, d/2)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = (x[..., : d // 2], x[..., d // 2 :]) if pairs == "halves" else (x[..., 0::2], x[..., 1::2])
    a, b = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    return torch.stack([a, b], dim=-1).flatten(-2) if pairs == "interleaved" else torch.cat([a, b], dim=-1)


_PAIRS = {
    "interleaved": "",
    "halves": "pairs (i, i + d_head/2) rotated together (the rotate_half layout of GPT-NeoX and Llama code): "
    "attnkit's pairs are neighbours (2i, 2i+1) — x[..., 0::2] and x[..., 1::2] — written back "
    "interleaved",
    "interleaved, halves out": "the rotated pairs are written back as two halves: interleave them again — "
    "torch.stack([a, b], dim=-1).flatten(-2)",
}


def _rope_mistakes(got: Tensor, x: Tensor) -> str:
    for (pairs, pairs_hint), sign, start, (_freq, (omega, freq_hint)) in itertools.product(
        _PAIRS.items(), (1, -1), (0, 1), _omegas(x.shape[-1]).items()
    ):
        if _close(got, _rope(x, omega, pairs, sign, start)):
            sign_hint = (
                (
                    "turned by -p·ω (the angle's sign): the pair (x1, x2) becomes "
                    "(x1·cos θ − x2·sin θ, x1·sin θ + x2·cos θ)"
                )
                if sign < 0
                else ""
            )
            start_hint = (
                ("positions start at 1: the first position is 0 and is not turned at all (torch.arange(n_pos))")
                if start
                else ""
            )
            mistakes = [h for h in (pairs_hint, sign_hint, start_hint, freq_hint) if h]
            if mistakes:
                return _join(mistakes)
    return ""


@checker("rotate (RoPE)", "05-rope-rotate", "my_rotate", references=("attnkit.core.positional:rotate",))
def check_rotate(fn: Callable) -> str:
    """`fn(x)`: x (..., pos, d_head) -> the same shape, pair (2i, 2i+1) at position p turned by p·ω_i."""
    gen = torch.Generator().manual_seed(5)
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


def _pair_slopes(n_heads: int) -> Tensor:
    return positional.alibi_slopes((n_heads + 1) // 2).double().repeat_interleave(2)[:n_heads]


def _slope_variants(H: int) -> dict[str, tuple[Tensor, str]]:
    pairs = (H + 1) // 2
    variants = {
        "right": (_pair_slopes(H), ""),
        "per head": (
            positional.alibi_slopes(H).double(),
            "each head got its own slope (alibi_slopes(n_heads)): a left head and the right head after "
            "it share one — alibi_slopes(n_pairs) with n_pairs = (n_heads + 1) // 2, each repeated "
            "twice (repeat_interleave(2)[:n_heads])",
        ),
        "tiled": (
            positional.alibi_slopes(pairs).double().repeat(2)[:H],
            "slopes tiled (a, b, a, b) instead of paired (a, a, b, b): use repeat_interleave(2), so that "
            "heads 2h and 2h+1 share slope h",
        ),
        "reversed": (
            _pair_slopes(H).flip(0),
            "slopes in reverse order: the steepest, 2^(-8/n_pairs), goes to the first pair and 2^-8 to the last",
        ),
        "n = heads": (
            (2.0 ** (-8.0 * torch.arange(1, pairs + 1, dtype=torch.float64) / H)).repeat_interleave(2)[:H],
            "slopes computed with n = n_heads in 2^(-8h/n): the formula runs over the pairs, "
            "n = n_pairs = (n_heads + 1) // 2, so that the last pair gets 2^-8",
        ),
        "pairs + 1": (
            positional.alibi_slopes(H // 2 + 1).double().repeat_interleave(2)[:H],
            "one pair too many for an even head count: n_pairs = (n_heads + 1) // 2, "
            "which is n_heads / 2 when n_heads is even",
        ),
        "single": (
            torch.full((H,), 2.0**-8, dtype=torch.float64),
            "every head has the same slope: the pairs get 2^(-8/n), 2^(-16/n), …, 2^-8 with n the number of pairs",
        ),
    }
    return variants


def _alibi_value(n: int, slopes: Tensor, sign: int = 1, minus_one: bool = True) -> Tensor:
    """(heads, q, k) values at every entry: -sign·slope·(|j - i| - 1 if minus_one else |j - i|)."""
    distance = (torch.arange(n)[None, :] - torch.arange(n)[:, None]).abs().double()
    return -sign * slopes[:, None, None] * (distance - 1 if minus_one else distance)


def _alibi_blocked(n: int, H: int, left_even: bool = True) -> Tensor:
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    right_keys, left_keys = offset > 0, offset < 0
    even, odd = (right_keys, left_keys) if left_even else (left_keys, right_keys)
    return torch.stack([even if h % 2 == 0 else odd for h in range(H)])


def _alibi_mistakes(got: Tensor, n: int, H: int) -> str:
    """Name what is wrong, in order: blocked keys, the diagonal, then the values of allowed keys."""
    blocked, ref_blocked = got < -1e4, _alibi_blocked(n, H)
    diag = torch.eye(n, dtype=torch.bool).expand(H, n, n)
    if n > 1 and not blocked.any():
        off = ~diag
        if any(
            _close(got[off], _alibi_value(n, s, 1, one)[off])
            for (s, _), one in itertools.product(_slope_variants(H).values(), (False, True))
        ):
            return (
                "symmetric ALiBi (-slope·|j - i| on both sides) cannot tell left from right: attnkit's is "
                "directional — heads 0, 2, … see only keys j < i, heads 1, 3, … only keys j > i; give the "
                "other side -inf"
            )
        return (
            "no key is blocked: heads 0, 2, … see only keys to the left (j < i) and heads 1, 3, … only keys "
            "to the right (j > i); give the other side -inf"
        )
    if not torch.equal(blocked, ref_blocked):
        if torch.equal(blocked, ref_blocked | diag):
            return (
                "the token itself is blocked: give the diagonal -30 instead of -inf — a last resort, so that "
                "the first token of a left head (it has no left) still attends somewhere; with -inf its row "
                "is all -inf and the softmax gives NaN"
            )
        if torch.equal(blocked & ~diag, _alibi_blocked(n, H, left_even=False)):
            return (
                "left and right swapped: heads 0, 2, … look left — block the keys j > i (to the right of "
                "query i) — and heads 1, 3, … look right, blocking j < i"
            )
        if H > 1 and all(torch.equal(blocked[h] & ~diag[0], ref_blocked[0]) for h in range(H)):
            return "every head looks left: the odd heads (1, 3, …) look right — block their keys j < i instead"
        if H > 1 and all(torch.equal(blocked[h] & ~diag[0], ref_blocked[1]) for h in range(H)):
            return "every head looks right: the even heads (0, 2, …) look left — block their keys j > i instead"
        h, i, j = (blocked != ref_blocked).nonzero()[0].tolist()
        side = "left (keys j < i)" if h % 2 == 0 else "right (keys j > i)"
        return (
            f"head {h}, query {i}, key {j} should be {'blocked (-inf)' if ref_blocked[h, i, j] else 'allowed'}: "
            f"head {h} looks {side} only, and the token itself gets -30"
        )
    values = got[diag]
    if not _close(values, torch.full_like(values, -30.0)):
        if _close(values, torch.zeros_like(values)):
            return (
                "the token itself gets bias 0, as much as its nearest neighbour: give the diagonal -30, a last "
                "resort used only when a token has nothing on its side (the first token of a left head)"
            )
        if _close(values, _alibi_value(n, _pair_slopes(H))[diag]):
            return (
                "the diagonal follows the formula (-slope·(0 - 1) = +slope): overwrite it with -30 "
                "(masked_fill(j == i, -30.0))"
            )
        return "the diagonal (each token itself) should be -30 in every head"
    allowed = ~ref_blocked & ~diag
    if not allowed.any():
        return ""
    for (_name, (slopes, slope_hint)), sign, minus_one in itertools.product(
        _slope_variants(H).items(), (1, -1), (True, False)
    ):
        if _close(got[allowed], _alibi_value(n, slopes, sign, minus_one)[allowed]):
            sign_hint = (
                ("sign flipped: the bias falls with distance, -slope·(|j - i| - 1), so farther keys get less weight")
                if sign < 0
                else ""
            )
            one_hint = (
                (
                    "off by one: the nearest allowed key (|j - i| = 1) gets 0, so the bias is "
                    "-slope·(|j - i| - 1), not -slope·|j - i|"
                )
                if not minus_one
                else ""
            )
            mistakes = [h for h in (slope_hint, sign_hint, one_hint) if h]
            if mistakes:
                return _join(mistakes)
    ref = _alibi_value(n, _pair_slopes(H))
    h, i, j = (~torch.isclose(got, ref, atol=1e-5) & allowed).nonzero()[0].tolist()
    return (
        f"head {h}, query {i}, key {j}: your bias is {got[h, i, j].item():.4g}, expected "
        f"{ref[h, i, j].item():.4g} = -slope·(|j - i| - 1) with head {h}'s slope "
        f"{_pair_slopes(H)[h].item():.4g} (pair {h // 2} of alibi_slopes((n_heads + 1) // 2))"
    )


def _runs(fn: Callable, *args) -> bool:
    """Does the learner's code return without raising on these arguments? (A probe for a hint.)"""
    try:
        call(fn, *args)
    except Exception:
        return False
    return True


@checker("alibi_bias", "05-alibi-bias", "my_alibi_bias", references=("attnkit.core.positional:alibi_bias",))
def check_alibi_bias(fn: Callable) -> str:
    """`fn(n_pos, n_heads)` -> (heads, q_pos, k_pos), attnkit's directional ALiBi bias."""
    odd_passed = False  # once an odd head count has passed, a later failure is about something else
    for n, H in ((7, 8), (6, 5), (7, 3), (1, 3), (4, 2)):
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


def _pool_cases() -> list[tuple[Tensor, Tensor]]:
    gen = torch.Generator().manual_seed(11)
    # Real scores below 0 in most rows (so a padding left at 0 would win); padding scores large,
    # so that a max that forgets the padding shows.
    score = -1 - torch.rand(3, 5, generator=gen)
    score[0, 2] = 0.5  # one violation in the first row
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] + [True] * 4])
    score = score.masked_fill(pad, 5.0)
    single = (torch.tensor([[-0.25]], dtype=torch.float64), torch.tensor([[False]]))  # float64 in, float64 out
    wide = torch.randn(2, 7, generator=gen)
    wide_pad = torch.zeros(2, 7, dtype=torch.bool)
    wide_pad[1, 4:] = True
    # Extreme values, ties and columns that are padding in every row: real scores of -1e12 (a padding
    # fill of -1e9 would beat them), two equal maxima in row 1, the last two columns all padding.
    extreme = torch.tensor([[-3e12, -1e12, 7.0, 9.0], [-5e12, -2e12, -2e12, 9.0]])
    extreme_pad = torch.tensor([[False, False, True, True], [False, False, False, True]])
    return [(score, pad), single, (wide, wide_pad), (extreme, extreme_pad)]


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
        real = ~pad
        ref = score.masked_fill(pad, float("-inf")).amax(dim=1).double()
        if _close(got, ref):
            _dtype(out, score.dtype, f"result{context}", "score's: the classifier's logit keeps the model's dtype")
            continue
        s = score.double()
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
        candidates = [
            (
                s.masked_fill(real, float("-inf")).amax(1),
                "pad is True at padding, so fill the scores where pad is True — masked_fill(pad, float('-inf')), "
                "not masked_fill(~pad, ...)",
            ),
            (
                -ref,
                "sign flipped: return the max itself (the kit's model returns its negative as the 'sorted' logit; "
                "here the readout is the 'unsorted' score)",
            ),
            (
                s.amax(1),
                "padding counted: its scores can be anything, so fill them with -inf before the max — "
                "score.masked_fill(pad, float('-inf')).amax(dim=1)",
            ),
            (
                (s * real).amax(1),
                "padding became 0, which beats a row whose real scores are all negative: fill "
                "the padding with -inf instead of multiplying by the mask",
            ),
            (
                (s * real).sum(1) / real.sum(1),
                "that is mean pooling over the real tokens: one violation counts "
                "1/L — take the max over the real tokens",
            ),
            (s.mean(1), "that is mean pooling (with the padding counted too): take the max over the real tokens"),
            ((s * real).sum(1), "that is a sum over the tokens: take the max over the real tokens"),
            (s.sum(1), "that is a sum over the tokens: take the max over the real tokens"),
            (
                s.masked_fill(pad, float("-inf")).argmax(1).double(),
                "those are the positions of the maxima (argmax): return the maximum scores themselves",
            ),
        ]
        for candidate, hint in candidates:
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
