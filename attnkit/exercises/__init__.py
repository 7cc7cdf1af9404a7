"""The course's exercises: one module of checkers per notebook, the machinery they share
(checking), the small models they run a learner's code on (models), and the registry of every
exercise by id. The grader's checking process (runner) runs the same checkers on a submission's
definitions, which stay in a process of their own (boundary).

    from attnkit.exercises import attention as attention_checks  # notebook 01's checkers
    attention_checks.check_causal_mask(my_causal_mask)            # prints one line, returns True/False
    registry()["01-causal-mask"].evaluate(my_causal_mask)         # a Result: exercise, passed, line, mistake
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .checking import Exercise, Result

# notebook prefix -> the module of its checkers
MODULES = {
    "01": "attention",
    "02": "adder",
    "03": "heatmaps",
    "04": "ablation",
    "05": "positional",
    "06": "patching",
    "07": "replay",
}


def __getattr__(name: str):
    """Exercise and Result on first use: the grader's own process imports the runner beside this
    package and never checks anything itself, so it need not import torch (a second and a half)."""
    if name in ("Exercise", "Result"):
        from . import checking

        return getattr(checking, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def registry() -> dict[str, Exercise]:
    """Every exercise by id ("01-causal-mask", ...), in course order."""
    from .checking import Exercise

    found = {}
    for name in MODULES.values():
        module = importlib.import_module(f"{__name__}.{name}")
        for value in vars(module).values():
            exercise = getattr(value, "exercise", None)
            if isinstance(exercise, Exercise) and exercise.id:
                found[exercise.id] = exercise
    return dict(sorted(found.items()))


__all__ = ["Exercise", "Result", "MODULES", "registry"]
