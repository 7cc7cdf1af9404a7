"""The cases and rebuilt mistakes of notebook 06's normalised effect, for its checker
(attnkit.exercises.patching): plain floats, numpy arrays and tensors of several shapes, the effect
computed with one common mistake each (clean and corrupted swapped, an upside-down fraction,
rounding, ...), and the run on plain floats that names the mistake a wrong answer makes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .checking import Hint, call, case_generator, hidden


def _effect(p, c, k):
    return (p - k) / (c - k)


# (patched, clean, corrupted) as plain floats: a patch half way, one that changes nothing, one that
# restores all, one a third of the way (rounding shows), one that makes things worse (< 0) and one
# that overshoots (> 1), positive metrics, and a clean metric below the corrupted one.
_EFFECT_CASES = [
    (-3.0, -1.0, -5.0),
    (-5.0, -1.0, -5.0),
    (-1.0, -1.0, -5.0),
    (-4.0, -2.0, -5.0),
    (-6.0, -1.0, -5.0),
    (0.0, -1.0, -5.0),
    (2.5, 4.0, 1.0),
    (1.0, -2.0, 3.0),
]


_SWAPPED = (
    "your arguments are in another order: the checker calls fn(patched, clean, corrupted), as the "
    "notebook does — (patched - corrupted) / (clean - corrupted)"
)


# What a common mistake returns for (patched, clean, corrupted), and the hint that names it.
_EFFECT_MISTAKES = (
    [
        (
            lambda p, c, k: (p - c) / (k - c),
            "you measured the distance from the clean run (clean and corrupted swapped?): 0 must mean 'no change "
            "from the corrupted run', so subtract the corrupted metric in both places, (patched - corrupted) / "
            "(clean - corrupted)",
        ),
        (
            lambda p, c, k: (p - k) / (k - c),
            "the sign is flipped: divide by (clean - corrupted), not (corrupted - clean)",
        ),
        (
            lambda p, c, k: p - k / (c - k),
            "operator precedence: put (patched - corrupted) in parentheses before dividing",
        ),
        (
            lambda p, c, k: (p - k) / c - k,
            "operator precedence: put (clean - corrupted) in parentheses — / goes before -",
        ),
        (
            lambda p, c, k: 100 * _effect(p, c, k),
            "you return a percentage: the effect is a fraction, 1 = as good as the clean run — leave out the × 100",
        ),
        (
            lambda p, c, k: np.floor(_effect(p, c, k)),
            "// is floor division (it rounds down to a whole number): divide with /",
        ),
        (
            lambda p, c, k: np.clip(_effect(p, c, k), 0, 1),
            "your effect is clamped to [0, 1]: leave it as it is — below 0 (the patch made things worse) and above "
            "1 (it overshoots the clean run) are findings too",
        ),
        (
            lambda p, c, k: abs(_effect(p, c, k)),
            "the effect can be negative (a patch that makes the run worse than the corrupted one): leave out abs()",
        ),
        (
            lambda p, c, k: (p - k) / abs(c - k),
            "leave out abs(): when the clean metric is below the corrupted one, "
            "(clean - corrupted) is negative and the division must keep its sign",
        ),
        (lambda p, c, k: (p - k) / c, "you divided by the clean metric alone: divide by the gap (clean - corrupted)"),
        (
            lambda p, c, k: (p - k) / k,
            "you divided by the corrupted metric alone: divide by the gap (clean - corrupted)",
        ),
        (
            lambda p, c, k: p / c,
            "patched / clean is a ratio, not the normalised effect: measure from the corrupted "
            "run, (patched - corrupted) / (clean - corrupted)",
        ),
        (
            lambda p, c, k: p - k,
            "you return patched - corrupted without dividing: divide it by (clean - corrupted), "
            "so that the clean run scores 1",
        ),
        (
            lambda p, c, k: (c - k) / (p - k),
            "the fraction is upside down: (patched - corrupted) goes above the line, (clean - corrupted) below",
        ),
    ]
    + [  # a signature whose order differs from the call's (two of the six orders are named above)
        (lambda p, c, k, order=order: _effect(*(dict(p=p, c=c, k=k)[n] for n in order)), _SWAPPED)
        for order in itertools.permutations("pck")
        if order not in (tuple("pck"), tuple("pkc"), tuple("cpk"))
    ]
    + [
        (lambda p, c, k, n=n: np.round(_effect(p, c, k), n), "you rounded the effect: return it unrounded")
        for n in (0, 1, 2, 3)
    ]
)


_ELEMENTWISE = (
    "use plain arithmetic, which works elementwise: no float() or .item(), no math.*, and no Python "
    "`if`, `and`/`or`, min() or max() on the values"
)


# Arrays of answer tokens: 1-D numpy, 1-D float32 tensors (as the notebook's), 2-D tensors
# (samples, tokens) and a one-token tensor.
_P = [[-3.0, -2.0, -7.0], [0.0, -4.0, -1.0]]


_C = [[-1.0, -1.0, -1.0], [-1.0, -2.0, -1.0]]


_K = [[-5.0, -3.0, -5.0], [-5.0, -5.0, -5.0]]


_EFFECT_ARRAYS: list[tuple[str, tuple[Any, ...]]] = [
    ("numpy arrays", tuple(np.array(x[0]) for x in (_P, _C, _K))),
    ("tensors", tuple(torch.tensor(x[0]) for x in (_P, _C, _K))),
    ("2-D tensors (samples, tokens)", tuple(torch.tensor(x) for x in (_P, _C, _K))),
    ("one-token tensors", tuple(torch.tensor(x[1][1:2]) for x in (_P, _C, _K))),
]


def _hidden_effects() -> list[tuple[str, tuple[Any, ...]]]:
    """At grading time: tensors of values no notebook passed (no patched value equals a clean one)."""
    if not hidden(True):
        return []
    gen = case_generator(61)
    patched, clean, corrupted = (torch.randn(3, 5, generator=gen, dtype=torch.float64) for _ in range(3))
    return [("fresh 2-D tensors", (patched, clean + 3.0, corrupted - 3.0))]


def _value(x, what: str) -> np.ndarray:
    """The learner's result as a float array, or the hint for why it is not a number."""
    if x is None:
        raise Hint(f"your {what} returned None — did you forget `return`?")
    if isinstance(x, (str, bytes, dict, set)) or callable(x):
        raise Hint(f"your {what} returned a {type(x).__name__}, expected a number (or an array of them)")
    try:
        return np.asarray(x.detach().cpu() if isinstance(x, Tensor) else x, dtype=float)
    except (TypeError, ValueError, RuntimeError):
        raise Hint(f"your {what} returned a {type(x).__name__}, expected a number (or an array of them)") from None


def _name_effect_mistake(got: list) -> None:
    """Raise the hint of the common mistake that gives `got` on _EFFECT_CASES, if one does."""
    with np.errstate(all="ignore"):
        for mistake, hint in _EFFECT_MISTAKES:
            if np.allclose(got, [mistake(*map(np.float64, case)) for case in _EFFECT_CASES], equal_nan=True):
                raise Hint(hint)


def _on_numpy_floats(fn: Callable) -> list | None:
    """The learner's results on _EFFECT_CASES given numpy floats, which divide by zero without raising."""
    try:
        with np.errstate(all="ignore"):
            values = [_value(call(fn, *map(np.float64, case)), "function") for case in _EFFECT_CASES]
    except Hint:
        return None
    return [float(v) for v in values] if all(v.shape == () for v in values) else None


def _effect_on_floats(fn: Callable) -> None:
    got: list = []
    for p, c, k in _EFFECT_CASES:
        where = f" for patched={p}, clean={c}, corrupted={k}"
        try:
            result = call(fn, p, c, k, context=where)
        except Hint as hint:
            raised = str(hint).split(" — ")[0].removesuffix(", but expected one of:")  # without call's advice
            if "ZeroDivisionError" in str(hint):
                on_numpy = _on_numpy_floats(fn)  # an upside-down fraction or the arguments in another order?
                if on_numpy is not None:
                    _name_effect_mistake(on_numpy)
                raise Hint(
                    f"your code divided by zero{where}: divide by (clean - corrupted), which is never 0 "
                    "here — and the checker calls fn(patched, clean, corrupted), in that order"
                ) from None
            if "'float' object has no attribute" in str(hint):
                raise Hint(
                    f"{raised} — on plain floats there are no tensor methods (.clone(), .numpy(), .item() "
                    "...): plain arithmetic works on floats, arrays and tensors alike"
                ) from None
            if "must be Tensor, not float" in str(hint) or "got (float" in str(hint):
                raise Hint(
                    f"{raised} — torch functions need tensors, and the effect must work on plain floats too: "
                    "write plain arithmetic, (patched - corrupted) / (clean - corrupted)"
                ) from None
            raise
        value = _value(result, "function")
        if value.shape != ():
            raise Hint(
                f"you return a {type(result).__name__} ({value.size} value{'s' * (value.size != 1)}){where}: "
                "return the effect alone, one number"
            )
        got.append(float(value))
    want = [_effect(*case) for case in _EFFECT_CASES]
    if np.allclose(got, want):
        return
    _name_effect_mistake(got)
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if not np.isclose(g, w))
    p, c, k = _EFFECT_CASES[i]
    raise Hint(
        f"for patched={p}, clean={c}, corrupted={k} you return {got[i]:.3g}; expected {want[i]:.3g} — "
        "(patched - corrupted) / (clean - corrupted): 1 = as good as the clean run, 0 = no better than "
        "the corrupted one"
    )
