"""Whether a learner's answer is the kit's own: the answer itself, a wrapper or subclass of the kit's
reference (kit_reference), or code that calls it while the checker runs (ReferenceWatch). A checker
names either as "kit-reference" and does not pass it."""

from __future__ import annotations

import importlib
import inspect
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

KIT_DIR = Path(__file__).resolve().parents[1]  # attnkit/
EXERCISES_DIR = Path(__file__).resolve().parent  # attnkit/exercises/
_LIBRARY_DIRS = tuple(
    sorted(
        {str(KIT_DIR)}
        | {p for k, p in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")}
    )
)


def resolve(reference: str):
    """ "attnkit.core.attention:MultiHeadAttention.split_heads" -> the object."""
    module, _, qualname = reference.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def reference_codes(references: Sequence[str]) -> dict:
    """code object -> the reference's name, for every function of every reference (a class: its methods)."""
    codes = {}
    for ref in references:
        obj = resolve(ref)
        members = vars(obj).values() if inspect.isclass(obj) else [obj]
        for member in members:
            member = getattr(member, "__func__", member)
            code = getattr(inspect.unwrap(member), "__code__", None) if callable(member) else None
            if code is not None:
                codes[code] = ref.replace(":", ".")
    return codes


def kit_reference(answer, references: Sequence[str]) -> str | None:
    """Why `answer` is the kit's own implementation (it, a wrapper around it, a subclass), or None."""
    if not references:
        return None
    targets = {id(resolve(r)): r.replace(":", ".") for r in references}
    seen, todo = set(), [answer]
    while todo:  # the answer, and whatever it wraps: functools.partial, @wraps, a bound method
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if id(obj) in targets:
            what = "is" if obj is answer else "wraps"
            return f"your answer {what} the kit's own {targets[id(obj)]} — write your own to pass"
        for attr in ("func", "__wrapped__", "__func__"):
            inner = getattr(obj, attr, None) if not isinstance(obj, type) else None
            if inner is not None:
                todo.append(inner)
        if isinstance(obj, type):
            for ref_id, name in targets.items():
                bases = [id(b) for b in obj.__mro__[1:]]
                if ref_id in bases:
                    return f"your class subclasses the kit's own {name} — write your own to pass"
    return None


def is_learner_code(filename: str) -> bool:
    """Code a notebook defined (not the kit's, the standard library's or an installed package's)."""
    return not (filename.startswith(_LIBRARY_DIRS) or filename.startswith("<frozen"))


def _fingerprint(code) -> tuple:
    return (code.co_code, code.co_names, tuple(c for c in code.co_consts if not hasattr(c, "co_code")))


class ReferenceWatch:
    """While active, notes a call of the kit's reference made from the learner's code (directly
    or through other library code), not from the checker itself comparing with it."""

    def __init__(self, references: Sequence[str], checker_runs_here: bool = True):
        self.codes = reference_codes(references) if references else {}
        # A copy of a reference's code (another file name, a shifted line) has the same instructions.
        self.copies = {_fingerprint(c): name for c, name in self.codes.items()}
        self.checker_runs_here = checker_runs_here  # else (the grader's learner process) no call is the checker's
        self.found: str | None = None
        self._previous = None

    def _trace(self, frame, event, arg):
        if (
            event == "call"
            and self.found is None
            and (frame.f_code in self.codes or (self.copies and _fingerprint(frame.f_code) in self.copies))
        ):
            name = self.codes.get(frame.f_code) or self.copies[_fingerprint(frame.f_code)]
            if not self.checker_runs_here:
                self.found = f"your answer calls the kit's own {name} — write your own to pass"
                return None
            caller = frame.f_back
            while caller is not None:
                filename = caller.f_code.co_filename
                if filename.startswith(str(EXERCISES_DIR)):
                    break  # the checker's own call of the reference
                if is_learner_code(filename):
                    self.found = f"your answer calls the kit's own {name} — write your own to pass"
                    break
                caller = caller.f_back
        return None  # no line tracing: only calls are watched

    def __enter__(self):
        self._previous = sys.gettrace()
        if self.codes and self._previous is None:  # a debugger's tracer is left alone
            sys.settrace(self._trace)
        return self

    def __exit__(self, *exc):
        if self.codes and self._previous is None:
            sys.settrace(None)
        return False
