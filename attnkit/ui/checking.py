"""The machinery every exercise checker shares: a checker calls the learner's code on inputs of its
own, compares with the kit's reference and prints one line — ✅, ❌ with a hint that names the likely
mistake, or ⏳ for an unfilled stub — and returns True only on a pass. Nothing the learner hands over
escapes as a traceback or a second line. The checkers themselves: checks (notebook 01),
adder_checks, heatmap_checks, ablation_checks, positional_checks, interp_checks (02-06).
"""
from __future__ import annotations

import contextlib
import functools
import io
import math
import re
import warnings
from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor


class Hint(Exception):
    """A mistake was found; the message is the hint shown to the learner."""

    icon = "❌"


class NotDone(Hint):
    icon = "⏳"


def checker(title: str):
    """Turn `check(...) -> pass message` (raising Hint) into `check(...) -> bool` that prints one line."""
    def wrap(check):
        @functools.wraps(check)
        def run(*args, **kwargs) -> bool:
            rng_state = torch.get_rng_state()  # a checker never moves the learner's random numbers
            try:
                # Whatever the learner's code prints stays out: the checker's line is the only one.
                with contextlib.redirect_stdout(io.StringIO()):
                    message = check(*args, **kwargs)
            except Hint as hint:
                print(one_line(f"{hint.icon} {title}: {hint}"))
                return False
            except Exception as e:  # whatever the learner handed over: one line, never a traceback
                print(one_line(f"❌ {title}: the checker could not use what you passed ({first_line(e)}) — "
                                "compare your code's signature and return value with the exercise's"))
                return False
            finally:
                torch.set_rng_state(rng_state)
            print(one_line(f"✅ {title}: passed — {message}"))
            return True
        return run
    return wrap


def one_line(text: str) -> str:
    """A hint that quotes a learner's value (a tensor's repr spans lines) still prints as one line."""
    return re.sub(r"\s*\n\s*", " ", text.strip())


def first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: " + (str(e).strip().splitlines() or [""])[0]


# Exception messages that mean the same mistake in any exercise.
GENERAL_ADVICE = (
    ("cannot assign module before Module.__init__", "call super().__init__() first in __init__"),
    ("view size is not compatible", "after a transpose the tensor is not contiguous: use .reshape (or .contiguous().view)"),
)


def call(fn: Callable, *args, context: str = "", advice: Sequence[tuple[str, str]] = GENERAL_ADVICE,
         signature: str = "", **kwargs):
    """Call the learner's code; turn any exception into a Hint naming it and, where `advice` has a
    (fragment of the message, meaning) pair for it, what it usually means. A TypeError about the
    learner's own function's arguments says so (and shows `signature`, the exercise's, if given)."""
    if not callable(fn):
        raise Hint(f"expected a function or class, got a {type(fn).__name__}: pass the function itself, without calling it")
    try:
        # What the learner's code prints or warns stays out of the checker's one line.
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except NotImplementedError:
        broken = _last_cell_error()
        if broken:  # the learner's new solution never ran: the stub from before is still defined
            raise Hint(f"the last cell you ran stopped with {broken}, so your solution is not defined yet "
                       "(the stub from before still is) — fix that cell and run it again") from None
        raise NotDone("not implemented yet — fill in the stub above") from None
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        hint = f"your code raised {type(e).__name__}{context}: {first}"
        called = first.split("(")[0].split(".")[-1]  # "my_shift() takes 1 positional argument ..."
        if isinstance(e, TypeError) and "argument" in first and called in (getattr(fn, "__name__", None), "__init__", "forward"):
            hint += (f" — the exercise's signature is {signature}" if signature else
                     " — your function's arguments differ from the exercise's: the checker calls it exactly as the exercise shows")
        else:
            hint += next((f" — {meaning}" for fragment, meaning in advice if fragment in first), "")
        raise Hint(hint) from None


def _last_cell_error() -> str:
    """In a notebook: the error the previously run cell stopped with ("" if none, or if that was
    a stub's NotImplementedError). A solution cell with a SyntaxError defines nothing new."""
    try:
        from IPython import get_ipython
    except ImportError:
        return ""
    shell = get_ipython()
    result = getattr(shell, "last_execution_result", None)
    error = result is not None and (result.error_before_exec or result.error_in_exec)
    if not error or isinstance(error, NotImplementedError):
        return ""
    return first_line(error)


def as_tensor(x, what: str, shape: tuple, names: str = "") -> Tensor:
    """x as a tensor of `shape`, or a hint saying what it is instead; `names` reads the shape, e.g. "(batch, pos)"."""
    expected = f"{shape}" + (f" = {names}" if names else "")
    if x is None:
        raise Hint(f"your {what} is None — did you forget `return`?")
    if isinstance(x, np.ndarray):
        raise Hint(f"your {what} is a numpy array: return a torch tensor of shape {expected} (torch.as_tensor)")
    if not isinstance(x, Tensor):
        raise Hint(f"your {what} is a {type(x).__name__}, expected a torch tensor of shape {expected}")
    if tuple(x.shape) != shape:
        hint = f"your {what} has shape {tuple(x.shape)}, expected {expected}"
        if x.numel() == math.prod(shape) and x.dim() == len(shape):
            hint += (" — the right values in another arrangement: take every size from the input's .shape, "
                     "not from fixed numbers or the notebook's globals")
        raise Hint(hint)
    return x


def close(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=1e-5, rtol=1e-4)


def max_diff(a: Tensor, b: Tensor) -> str:
    return f"max difference {(a.double() - b.double()).abs().max().item():.3g}"


def randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
