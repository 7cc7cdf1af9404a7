"""Calling a learner's code and reading what it returned, for notebook 04's checkers
(attnkit.exercises.ablation): the call with the exercise's own advice, numbers as a float64 array
(or a hint), and the comparisons and random tensors the checkers share.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from .checking import GENERAL_ADVICE, Hint, call, refuse_list


def _learner(fn: Callable, *args, context: str = "", advice: tuple = (), **kwargs):
    """checking.call, with this exercise's own advice first: ((fragment of the message, advice), ...)."""
    if not callable(fn):
        raise Hint(f"expected a function, got a {type(fn).__name__}: pass the function itself, without calling it")
    return call(fn, *args, context=context, advice=tuple(advice) + GENERAL_ADVICE, **kwargs)


def _randn(*shape: int, gen: torch.Generator) -> Tensor:
    return torch.randn(*shape, generator=gen)


def _same(a: Tensor, b: Tensor, tol: float = 1e-5) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=tol, rtol=tol)


def _array(x, what: str) -> np.ndarray:
    """A learner's numbers (tensor, numpy array, list) as a float64 array, or a hint."""
    if x is None:
        raise Hint(f"your {what} returned None — did you forget `return`?")
    refuse_list(x, f"{what}'s result")
    if isinstance(x, Tensor):
        x = x.detach().cpu()
    try:
        out = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError, RuntimeError):
        raise Hint(f"your {what} returned a {type(x).__name__}, expected a tensor of numbers") from None
    return out
