"""Calling a learner's code and reading what it returned, for notebook 03's checkers
(attnkit.exercises.heatmaps): the call (numpy's warnings silenced, advice for index and
broadcasting errors), numbers as a float array, and the typical sample's index as one int — or a hint.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from .checking import Hint, call


def _attempt(fn: Callable, *args, context: str = "", shapes: str = "", axes: bool = False):
    """checking.call (numpy's warnings silenced too), after saying what to pass when `fn` is not a
    function; `axes` and `shapes` add this exercise's advice for index and broadcasting errors."""
    if isinstance(fn, type):
        raise Hint(
            f"you passed a class ({fn.__name__}): write a function (def ...) and pass it, e.g. check(my_function)"
        )
    if not callable(fn):
        what = "None" if fn is None else f"a {type(fn).__name__}"
        raise Hint(f"pass your function itself, e.g. check(my_function), not {what}")
    advice = [
        (
            fragment,
            "write it for any number of leading axes: count axes from the end (dim=-1 is the key "
            "axis) and don't unpack a fixed number of sizes",
        )
        for fragment in ("out of range", "too many indices", "to unpack")
        if axes
    ]
    advice += [
        (fragment, shapes) for fragment in ("must match the size", "could not be broadcast", "shape mismatch") if shapes
    ]
    with np.errstate(all="ignore"):
        return call(fn, *args, context=context, advice=advice)


def _array(x, expected: str) -> np.ndarray:
    """The learner's result as a float64 array; a Hint when it cannot be one."""
    if x is None:
        raise Hint("your function returned None — did you forget `return`?")
    try:
        if isinstance(x, Tensor):
            x = x.detach().cpu().double().numpy()
        arr = np.asarray(x, dtype=float)
    except Exception:
        raise Hint(f"your function returned a {type(x).__name__}, expected {expected}") from None
    return arr


def _close(got: np.ndarray, want, atol: float = 1e-5) -> bool:
    want = np.asarray(want, dtype=float)
    return got.shape == want.shape and bool(np.allclose(got, want, atol=atol, rtol=1e-4))


def _index(out, n_samples: int, n_measures: int) -> int:
    """The learner's answer as an index: an int (Python's, numpy's or a 0-d integer tensor), or a Hint."""
    if isinstance(out, (bool, np.bool_)) or (isinstance(out, Tensor) and out.dtype == torch.bool):
        raise Hint("your function returned a bool: return the index of the typical sample (an int)")
    got = _array(out, "one int, the index of a sample")
    if got.size != 1:
        if got.shape == (n_samples,):
            raise Hint(
                f"you returned {n_samples} values (one distance per sample?): return the index of the "
                "smallest, e.g. int(np.argmin(distance))"
            )
        if got.shape == (n_measures,):
            raise Hint("you returned a row of measures: return the index of the sample, not its values")
        raise Hint(f"you returned an array of shape {got.shape}: return one int, the index of a sample")
    got = got.reshape(())
    if not (np.isfinite(got) and float(got).is_integer()):
        raise Hint(f"you returned {float(got):g}: return the index of a sample, an int from 0 to {n_samples - 1}")
    if (
        isinstance(out, (float, np.floating))
        or getattr(out, "dtype", None) in (np.float32, np.float64)
        or (isinstance(out, Tensor) and out.is_floating_point())
    ):  # an index must index: values[3.0] fails
        raise Hint(
            f"you returned {float(got):g} as a float ({getattr(out, 'dtype', type(out).__name__)}): return the "
            "index as an int (int(...), or np.argmin's own integer), so that values[i] works",
            mistake="index-not-int",
        )
    i = int(got)
    if not 0 <= i < n_samples:
        raise Hint(
            f"you returned {i}, but there are {n_samples} samples (rows of `values`): return the index "
            f"of a row, from 0 to {n_samples - 1}"
        )
    return i
