"""Reading what a learner's code returned, for notebook 05's checkers (attnkit.exercises.positional):
a tensor, numpy array or nested list becomes a float64 tensor, and whatever cannot be read
(None, a complex or float16 array, integers where fractions belong, a wrong shape or dtype)
becomes a hint instead of an exception.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import Tensor

from .checking import Hint, call, refuse_list


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
