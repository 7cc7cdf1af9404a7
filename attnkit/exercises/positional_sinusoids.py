"""The usual mistakes in notebook 05's sinusoidal exercises, rebuilt so that a checker
(attnkit.exercises.positional) can name the one a learner made: the sinusoidal table (sines and
cosines as halves or swapped, positions from 1), the shift matrix M_k (turned the wrong way, a sine
without its minus, k ignored) and RoPE (rotate_half pairs, the angle's sign). All three share the
frequencies ω_i = 10000^(-2i/d), and their usual wrong exponents.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from torch import Tensor

from .positional_values import _close, _join

BASE = 10000.0


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


# ---------------------------------------------------------------- 3. the RoPE rotation


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
