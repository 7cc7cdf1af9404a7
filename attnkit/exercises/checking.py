"""The machinery every exercise checker shares: a checker calls the learner's code on inputs of its
own, compares with the kit's reference and prints one line — ✅, ❌ with a hint that names the likely
mistake, or ⏳ for an unfilled stub — and returns True only on a pass. Nothing the learner hands over
escapes as a traceback or a second line. The checkers themselves: attnkit.exercises.attention,
adder, heatmaps, ablation, positional, patching, replay (notebooks 01-07), imported in each notebook under
its own name (attention_checks, ..., patching_checks) so no alias means two things across notebooks.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .boundary import Remote
from .kit_reference import ReferenceWatch, kit_reference


class Hint(Exception):
    """A mistake was found; the message is the hint shown to the learner. `mistake` names it for
    the gradebook (by default a slug of the hint's first words)."""

    icon = "❌"

    def __init__(self, message: str, mistake: str = ""):
        super().__init__(message)
        self.mistake = mistake or slug(message)


class NotDone(Hint):
    icon = "⏳"

    def __init__(self, message: str, mistake: str = "not-done"):
        super().__init__(message, mistake)


@dataclass(frozen=True)
class Result:
    """What one check found: the notebook prints `line`, the grader records all four."""

    exercise: str
    passed: bool
    line: str  # one line: ✅, ❌ with a hint, or ⏳
    mistake: str = ""  # "" when passed; else the mistake's id ("not-done", "kit-reference", ...)


@dataclass(frozen=True)
class Exercise:
    """One exercise: its id (the gradebook's key), the learner's object the check is given, and
    the kit's own implementations of it (a learner's answer may not be, wrap or call one)."""

    id: str
    title: str
    answer: str  # the name the notebook's check cell passes, e.g. "my_causal_mask"
    references: tuple = ()  # "module:qualname" of the kit's implementations of the exercise
    check: Callable | None = None  # check(answer) -> bool, printing the line
    evaluate: Callable | None = None  # evaluate(answer) -> Result, printing nothing


def yours_or_kits(answer, check, kits: dict, hints: bool = True):
    """Check `answer` (printing the check's line); return it if it passed, else the kit's own answer
    to that exercise (`kits`: exercise id -> answer), so that the rest of a notebook runs on. The kit's
    answers live in the checker modules, out of the notebook: the check cell does not show them."""
    return answer if check(answer, hints=hints) else kits[check.exercise.id]


def slug(text: str, words: int = 6) -> str:
    """A stable id for a hint: its first words, lower case, joined by '-'."""
    return "-".join(re.findall(r"[a-z0-9_]+", text.lower())[:words]) or "other"


def checker(title: str, exercise: str = "", answer: str = "", references: Sequence[str] = ()):
    """Turn `check(answer) -> pass message` (raising Hint) into `check(answer) -> bool` that prints
    one line; `check.evaluate(answer) -> Result` prints nothing (the grader's way in)."""

    def wrap(check):
        def evaluate(*args, **kwargs) -> Result:
            rng_state = torch.get_rng_state()  # a checker never moves the learner's random numbers
            # A seed no learner picks: torch.manual_seed inside their code then shows in initial_seed()
            # (the learner's own generator state comes back in `finally`).
            torch.default_generator.manual_seed(_SENTINEL_SEED)  # the CPU one only: CUDA's stays
            state = torch_state()
            # In the grader the answer is a Remote: the learner's process looks for the kit's code there.
            remote = args[0]._session if args and isinstance(args[0], Remote) else None
            try:
                found = (
                    (remote.kit_reference(args[0], references) if remote else kit_reference(args[0], references))
                    if args
                    else None
                )
                if found:
                    raise Hint(found, mistake="kit-reference")
                # Whatever the learner's code prints stays out: the checker's line is the only one.
                with (
                    contextlib.redirect_stdout(io.StringIO()),
                    ReferenceWatch(references) as watch,
                    remote.watching(references) if remote else contextlib.nullcontext(),
                ):
                    message = check(*args, **kwargs)
                found = watch.found or (remote.found if remote else None)
                if found:
                    raise Hint(found, mistake="kit-reference")
                changed_state(state)
            except Hint as hint:
                if hint.mistake != "kit-reference":
                    with contextlib.suppress(Hint):  # a changed global state is the mistake to name first
                        changed_state(state)
                    hint = state.get("_found") or hint
                return Result(exercise, False, one_line(f"{hint.icon} {title}: {hint}"), hint.mistake)
            except Exception as e:  # whatever the learner handed over: one line, never a traceback
                with contextlib.suppress(Hint):
                    changed_state(state)
                if state.get("_found"):
                    cause = state["_found"]
                    return Result(exercise, False, one_line(f"{cause.icon} {title}: {cause}"), cause.mistake)
                return Result(
                    exercise,
                    False,
                    one_line(
                        f"❌ {title}: the checker could not use what you passed ({first_line(e)}) — compare your "
                        "code's signature and return value with the exercise's"
                    ),
                    "unusable-answer",
                )
            finally:
                torch.set_rng_state(rng_state)
                restore_state(state)
            return Result(exercise, True, one_line(f"✅ {title}: passed — {message}"))

        @functools.wraps(check)
        def run(*args, hints: bool = True, **kwargs) -> bool:
            result = evaluate(*args, **kwargs)
            line = result.line
            if not hints and not result.passed and result.mistake not in ("not-done", "kit-reference", "tampering"):
                line = f"❌ {title}: not right yet (this edition gives no hints)"
            print(line)
            # nbgrader's autograder (and its Validate button) fails a test cell only when it raises
            if not result.passed and os.environ.get("NBGRADER_EXECUTION") in ("autograde", "validate"):
                raise AssertionError(result.line)
            return result.passed

        run.evaluate = evaluate
        run.exercise = Exercise(exercise, title, answer, tuple(references), run, evaluate)
        return run

    return wrap


# ---------------------------------------------------------------- global torch state

_SENTINEL_SEED = 0x27_5EED_C0DE


def torch_state() -> dict:
    """What learner code may change for everyone after it (training then silently breaks or slows)."""
    return {
        "grad mode": torch.is_grad_enabled(),
        "default dtype": torch.get_default_dtype(),
        "number of threads": torch.get_num_threads(),
        "random seed": torch.initial_seed(),
    }


_STATE_ADVICE = {
    "grad mode": "torch.set_grad_enabled / torch.no_grad().__enter__ without its exit — use `with torch.no_grad():` "
    "so that it ends with the block, or none at all (training needs gradients)",
    "default dtype": "torch.set_default_dtype — give one tensor its dtype (dtype=...) instead",
    "number of threads": "torch.set_num_threads — leave it to the notebook",
    "random seed": "torch.manual_seed restarts the notebook's random numbers, so every cell after it repeats the "
    "same draws — use a generator of your own, torch.Generator().manual_seed(...), if you need fixed ones",
}


def changed_state(state: dict) -> None:
    """Raise a Hint naming what of torch's global state differs from `state` (noted in state['_found'])."""
    now = torch_state()
    for key, before in state.items():
        if not key.startswith("_") and now[key] != before:
            change = "reseeded" if key == "random seed" else f"changed ({before} -> {now[key]})"
            state["_found"] = Hint(
                f"your code left torch's {key} {change}, which "
                f"breaks the code that runs after it: {_STATE_ADVICE[key]}",
                mistake="global-state",
            )
            raise state["_found"]


def restore_state(state: dict) -> None:
    torch.set_grad_enabled(state["grad mode"])
    torch.set_default_dtype(state["default dtype"])
    if torch.get_num_threads() != state["number of threads"]:
        torch.set_num_threads(state["number of threads"])


def one_line(text: str) -> str:
    """A hint that quotes a learner's value (a tensor's repr spans lines) still prints as one line."""
    return re.sub(r"\s*\n\s*", " ", text.strip())


def first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: " + (str(e).strip().splitlines() or [""])[0]


# Exception messages that mean the same mistake in any exercise.
GENERAL_ADVICE = (
    ("cannot assign module before Module.__init__", "call super().__init__() first in __init__"),
    (
        "view size is not compatible",
        "after a transpose the tensor is not contiguous: use .reshape (or .contiguous().view)",
    ),
)


def call(
    fn: Callable,
    *args,
    context: str = "",
    advice: Sequence[tuple[str, str]] = GENERAL_ADVICE,
    signature: str = "",
    **kwargs,
):
    """Call the learner's code; turn any exception into a Hint naming it and, where `advice` has a
    (fragment of the message, meaning) pair for it, what it usually means. A TypeError about the
    learner's own function's arguments says so (and shows `signature`, the exercise's, if given)."""
    if not callable(fn):
        raise Hint(
            f"expected a function or class, got a {type(fn).__name__}: pass the function itself, without calling it"
        )
    try:
        # What the learner's code prints or warns stays out of the checker's one line.
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except NotImplementedError:
        broken = _last_cell_error()
        if broken:  # the learner's new solution never ran: the stub from before is still defined
            raise Hint(
                f"the last cell you ran stopped with {broken}, so your solution is not defined yet "
                "(the stub from before still is) — fix that cell and run it again"
            ) from None
        raise NotDone("not implemented yet — fill in the stub above") from None
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        hint = f"your code raised {type(e).__name__}{context}: {first}"
        called = first.split("(")[0].split(".")[-1]  # "my_shift() takes 1 positional argument ..."
        if (
            isinstance(e, TypeError)
            and "argument" in first
            and called in (getattr(fn, "__name__", None), "__init__", "forward")
        ):
            hint += (
                f" — the exercise's signature is {signature}"
                if signature
                else " — your function's arguments differ from the exercise's: the checker calls it exactly as "
                "the exercise shows"
            )
        else:
            hint += next((f" — {meaning}" for fragment, meaning in advice if fragment in first), "")
        raise Hint(hint) from None


def wrote_into_activation(assignment: str) -> Hint:
    """The hint for a hook that changed the activation it was handed (`assignment`, e.g.
    "z[:, head] = ..."): the model and any other hook still use that tensor."""
    return Hint(
        f"your hook wrote into the z it was handed ({assignment} on z itself): the activation must "
        "stay as it came — patch a copy, z = z.clone(), and return that",
        mistake="hook-writes-activation",
    )


GRADING_LAST_ERROR: list[
    str
] = []  # the grader's checking process: the last cell's error, as the learner's process said


def _last_cell_error() -> str:
    """In a notebook: the error the previously run cell stopped with ("" if none, or if that was
    a stub's NotImplementedError). A solution cell with a SyntaxError defines nothing new."""
    if GRADING_LAST_ERROR:
        return GRADING_LAST_ERROR[-1]
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
            hint += (
                " — the right values in another arrangement: take every size from the input's .shape, "
                "not from fixed numbers or the notebook's globals"
            )
        raise Hint(hint)
    return x


def refuse_list(x, what: str) -> None:
    """The one type rule (issue 27): where a task asks for a tensor (or array) of numbers, a Python list
    or tuple is refused, in every checker with this message."""
    if isinstance(x, (list, tuple)):
        raise Hint(
            f"your {what} is a {type(x).__name__}, expected a torch tensor — build it with torch "
            "operations, or convert with torch.tensor(...)",
            mistake="list-not-tensor",
        )


def require_tensor(x, what: str) -> None:
    """The rule's other half: where the task asks for a torch tensor (what a model computes with next),
    a numpy array is refused too — torch cannot add one to its tensors or assign one into them."""
    refuse_list(x, what)
    if isinstance(x, np.ndarray):
        raise Hint(
            f"your {what} is a numpy array, expected a torch tensor: the model computes with it in torch, "
            "which cannot mix the two — build it with torch operations (torch.as_tensor converts an array)",
            mistake="numpy-not-tensor",
        )


def close(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=1e-5, rtol=1e-4)


def max_diff(a: Tensor, b: Tensor) -> str:
    return f"max difference {(a.double() - b.double()).abs().max().item():.3g}"


# ---------------------------------------------------------------- the cases a checker tries

GRADING_SEED: int | None = None  # set in the grader's checking process (attnkit grade --grading-seed)


def case_seed(n: int) -> int:
    """The seed of a checker's inputs: `n` in a notebook; in the grader, one drawn from `n` and the
    grading seed, so that an answer hard-coded to the notebook's cases meets inputs it never saw."""
    return n if GRADING_SEED is None else (n * 1_000_003 + GRADING_SEED * 7_919 + 12_345) % (2**31 - 1)


def case_generator(n: int) -> torch.Generator:
    return torch.Generator().manual_seed(case_seed(n))


def case_rng(n: int) -> np.random.Generator:
    return np.random.default_rng(case_seed(n))


def hidden(*cases):
    """Cases a checker tries only in the grader, after the notebook's own (same checks, same hints)."""
    return cases if GRADING_SEED is not None else ()


def randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=case_generator(seed))


MARKS = ("✅", "❌", "⏳")


def checker_lines(outputs) -> list[str]:
    """The checker lines (✅/❌/⏳) among a notebook cell's outputs (what a learner sees; the
    grader reads Results instead)."""
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stdout")
    return [line for line in text.splitlines() if line.startswith(MARKS)]
