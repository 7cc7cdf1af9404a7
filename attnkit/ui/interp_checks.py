"""Checkers for notebook 06's exercises (activation patching), in the style of checks.py: one
printed line, ✅ or a hint naming the likely mistake, never a traceback; True when passed."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..interp.patching import carry_pair
from .checks import Hint, _call, _checker


def _number(x, what: str) -> np.ndarray:
    if x is None:
        raise Hint(f"your {what} returned None — did you forget `return`?")
    try:
        return np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=float)
    except (TypeError, ValueError):
        raise Hint(f"your {what} returned a {type(x).__name__}, expected a number (or an array of them)") from None


@_checker("normalised_effect")
def check_normalised_effect(fn: Callable) -> str:
    """`fn(patched, clean, corrupted)` -> (patched - corrupted) / (clean - corrupted), elementwise."""
    cases = [(-3.0, -1.0, -5.0), (-5.0, -1.0, -5.0), (-1.0, -1.0, -5.0), (2.5, 4.0, 1.0)]
    for patched, clean, corrupted in cases:
        got = float(_number(_call(fn, patched, clean, corrupted, context=" on plain floats"), "function"))
        want = (patched - corrupted) / (clean - corrupted)
        if np.isclose(got, want):
            continue
        if np.isclose(got, 1 - want):
            raise Hint("you measured the distance from the clean run: 0 must mean 'no change from the "
                       "corrupted run', so subtract the corrupted metric in both places")
        if np.isclose(got, -want):
            raise Hint("the sign is flipped: divide by (clean - corrupted), not (corrupted - clean)")
        if np.isclose(got, patched - corrupted / (clean - corrupted)):
            raise Hint("operator precedence: put (patched - corrupted) in parentheses before dividing")
        raise Hint(f"for patched={patched}, clean={clean}, corrupted={corrupted} you return {got:.3g}; "
                   f"expected {want:.3g} — 1 means the patch restores the clean run, 0 that it changes nothing")
    arrays = (np.array([-3.0, -2.0]), np.array([-1.0, -1.0]), np.array([-5.0, -3.0]))  # -> [0.5, 0.5]
    for kind, args in (("numpy arrays", arrays), ("tensors", tuple(torch.tensor(a) for a in arrays))):
        try:
            got = _number(_call(fn, *args, context=f" on {kind}"), "function")
        except Hint as hint:
            if "converted to Python scalars" in str(hint) or "ambiguous" in str(hint):
                raise Hint(f"{hint} — on {kind} the answer has one value per token: use arithmetic that "
                           "works elementwise (no float(), no Python `if` on the values)") from None
            raise
        if got.shape != (2,) or not np.allclose(got, [0.5, 0.5]):
            raise Hint(f"on {kind} of two answer tokens you return {got}; expected [0.5 0.5] — "
                       "use arithmetic that works elementwise (no float(), no Python `if` on the values)")
    return "1 = restores the clean run, 0 = no change, on floats, arrays and tensors"


@_checker("patch_hook")
def check_patch_hook(make_hook: Callable) -> str:
    """`make_hook(clean_z, head, pos)` -> hook(z, hook) returning z with [:, head, pos] from clean_z."""
    for batch, n_heads, n_pos, d_head, head, pos in [(1, 4, 5, 16, 1, 2), (3, 2, 7, 5, 0, 6), (2, 3, 1, 4, 2, 0)]:
        gen = torch.Generator().manual_seed(batch * 100 + n_pos)
        clean = torch.randn(1, n_heads, n_pos, d_head, generator=gen)
        z = torch.randn(batch, n_heads, n_pos, d_head, generator=gen)
        original = z.clone()
        hook = _call(make_hook, clean, head, pos, context=" when making the hook")
        if not callable(hook):
            raise Hint(f"make_hook should return a function hook(z, hook), not a {type(hook).__name__}")
        out = _call(hook, z, None, context=f" on z of shape {tuple(z.shape)}")
        out = z if out is None else out  # an in-place hook that returns nothing works too
        if not isinstance(out, torch.Tensor) or out.shape != z.shape:
            raise Hint(f"the hook must return z's shape {tuple(z.shape)}, got "
                       f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}")
        want = original.clone()
        want[:, head, pos] = clean[:, head, pos]
        if torch.allclose(out, want):
            continue
        if torch.allclose(out, clean.expand_as(out)):
            raise Hint("you returned the whole clean z: only one head at one position should change")
        if torch.allclose(out[:, :, pos], clean[:, :, pos].expand_as(out[:, :, pos])):
            raise Hint("you replaced every head at that position: index the head axis too, z[:, head, pos]")
        if torch.allclose(out[:, head], clean[:, head].expand_as(out[:, head])) and n_pos > 1:
            raise Hint("you replaced every position of that head: index the position axis too, z[:, head, pos]")
        if n_heads != n_pos and pos < n_heads and head < n_pos and torch.allclose(out[:, pos, head], clean[:, pos, head].expand_as(out[:, pos, head])):
            raise Hint("head and position are swapped: z is (batch, heads, pos, d_head), so z[:, head, pos]")
        raise Hint(f"for z of shape {tuple(z.shape)}, head {head}, position {pos} the result differs from "
                   f"z with z[:, {head}, {pos}] = clean_z[:, {head}, {pos}] (batch 1 of clean_z broadcasts)")
    return "one head at one position patched, for batch 1 and 3, several widths"


@_checker("carry_pair")
def check_carry_pair(fn: Callable) -> str:
    """`fn(a, b)` -> ("a+b", "a+b2") where b2 lowers b's units digit so the units column stops
    carrying and no other carry changes; None when that is impossible."""
    rng = np.random.default_rng(6)
    cases = [(125, 137), (125, 134), (555, 445), (9, 1), (19, 3), (0, 0)] + [tuple(map(int, p)) for p in rng.integers(0, 1000, (200, 2))]
    for a, b in cases:
        want = carry_pair(a, b, 0)
        got = _call(fn, a, b, context=f" on a={a}, b={b}")
        if got == want or (got is not None and want is not None and tuple(got) == want):
            continue
        if want is None and got is not None:
            if (a % 10) + (b % 10) < 10:
                raise Hint(f"{a}+{b} does not carry in the units column: return None")
            raise Hint(f"for {a}+{b} you return {got!r}, but removing its units carry also removes the carry "
                       f"of the next column (a chain): only one carry may change — return None")
        if got is None:
            raise Hint(f"{a}+{b} carries in the units column and can lose just that carry: expected {want!r}")
        raise Hint(f"for {a}+{b} you return {got!r}, expected {want!r}: lower b's units digit to "
                   f"9 - (a's units digit) — the largest digit that does not carry — and keep the rest")
    return f"{len(cases)} problems, with and without carries and chains"
