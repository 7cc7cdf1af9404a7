"""Reading what a learner's code returned, for notebook 02's checkers (attnkit.exercises.adder): the
learner's function called with the exercise's signature, token ids as a torch.long tensor, a pair,
a share as one float — and whatever cannot be read becomes a hint instead of an exception.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from .checking import Hint, call, refuse_list


def _learner(fn: Callable, *args, signature: str, context: str = ""):
    """checking.call, with the exercise's signature named when the learner's own one differs."""
    if not callable(fn):
        raise Hint(f"pass your function itself, {signature.split('(')[0]}, not a {type(fn).__name__}")
    return call(fn, *args, context=context, signature=signature)


def _ids_tensor(x, what: str) -> Tensor:
    """A torch tensor of integer token ids (the exercise's type; numpy arrays, lists and floats are
    refused: the model's embedding takes long ids), as torch.long."""
    if x is None:
        raise Hint(f"your {what} is None — did you forget `return`?")
    refuse_list(x, what)
    if not isinstance(x, Tensor):
        raise Hint(
            f"your {what} is a {type(x).__name__}, expected a torch tensor of token ids (torch.long)"
            + (" — torch.as_tensor(...) converts it" if isinstance(x, (np.ndarray, list, tuple)) else ""),
            mistake="not-a-tensor",
        )
    x = x.detach().cpu()
    if x.is_floating_point():
        whole = bool(torch.isfinite(x).all()) and torch.equal(x, x.round())
        raise Hint(
            f"your {what} is a {x.dtype} tensor"
            + (" of whole numbers" if whole else " of non-integer values")
            + ": token ids are integers, torch.long"
            + (" (.long(), or keep argmax's dtype)" if whole else " (an argmax, not logits)"),
            mistake="ids-not-integers",
        )
    if x.dtype == torch.bool or x.is_complex():
        raise Hint(f"your {what} is a {x.dtype} tensor, expected token ids (torch.long)", mistake="ids-not-integers")
    return x.long()


def _pair(result, what: str, names: tuple[str, str]):
    if result is None:
        raise Hint(f"{what} returned None — did you forget `return {names[0]}, {names[1]}`?")
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        kind = f"a {type(result).__name__}" + (f" of {len(result)}" if isinstance(result, (tuple, list)) else "")
        raise Hint(f"{what} should return a pair ({names[0]}, {names[1]}), not {kind}")
    return result


def _same(a: Tensor, b: Tensor) -> bool:
    return tuple(a.shape) == tuple(b.shape) and torch.equal(a.long(), b.long())


def _number(x, what: str, batch: int, n_pos: int) -> float:
    if x is None:
        raise Hint(f"your {what} is None — did you forget to return it?")
    if isinstance(x, Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bool and x.numel() == 1:
            raise Hint(f"your {what} is a bool: return the share of rows (or tokens) that are right, a number")
        if x.numel() != 1:
            shape = tuple(x.shape)
            if x.dim() == 1 and x.numel() == batch:
                raise Hint(f"your {what} has one value per row {shape}: average it over the rows too (.float().mean())")
            if shape == (batch, n_pos):
                raise Hint(f"your {what} has one value per token {shape}: reduce it to one number, a share")
            raise Hint(f"your {what} has shape {shape}: return one number, a share between 0 and 1")
        x = x.double().item()
    elif isinstance(x, np.ndarray):
        if x.size != 1:
            raise Hint(f"your {what} has shape {x.shape}: return one number, a share between 0 and 1")
        x = x.reshape(()).item()
    if isinstance(x, (bool, np.bool_)):
        raise Hint(f"your {what} is a bool: return the share of rows (or tokens) that are right, a number")
    if not isinstance(x, (int, float, np.number)):
        raise Hint(f"your {what} is a {type(x).__name__}, expected a number between 0 and 1")
    return float(x)


def _same_number(a: float, b: float) -> bool:
    return bool(np.isclose(a, b, equal_nan=True))
