"""Every checker of every notebook, handed what a learner might hand it by mistake, prints exactly one
line (❌ or ⏳), returns False, never raises, and leaves the global random state alone. The checkers'
own test files plant each exercise's specific mistakes; this is the floor they all share."""

import importlib
import inspect

import numpy as np
import pytest
import torch
from torch import nn

from attnkit.exercises import MODULES

from helpers import checker_line

CHECKERS = [
    (name, f)
    for module in MODULES.values()
    for name, f in vars(importlib.import_module(f"attnkit.exercises.{module}")).items()
    if name.startswith("check_") and inspect.isfunction(f) and f.__module__.endswith(module)
]


def raises_value_error(*args, **kwargs):
    raise ValueError("something went wrong")


def returns_none(*args, **kwargs):
    return None


def stub(*args, **kwargs):
    raise NotImplementedError("your code here")


def generator(*args, **kwargs):
    yield 1


class PlainClass:
    pass


WRONG = {
    "None": None,
    "a number": 42,
    "a string": "my_function",
    "a list": [1, 2, 3],
    "numpy": np.zeros(3),
    "a tensor": torch.zeros(3),
    "raises": raises_value_error,
    "returns None": returns_none,
    "returns a tensor": lambda *a, **k: torch.zeros(3),
    "returns a list": lambda *a, **k: [0.0],
    "returns numpy": lambda *a, **k: np.zeros((2, 2)),
    "returns a string": lambda *a, **k: "yes",
    "takes nothing": lambda: 0,
    "a generator": generator,
    "a plain class": PlainClass,
    "an nn.Module class": nn.Linear,
    "an nn.Module": nn.Linear(2, 2),
    "a builtin": print,
    "NaN": lambda *a, **k: torch.full((2, 2), float("nan")),
    "the stub": stub,
}


def test_there_is_a_checker_for_every_exercise():
    assert len(CHECKERS) >= 24


@pytest.mark.parametrize("wrong", WRONG, ids=list(WRONG))
@pytest.mark.parametrize("name, check", CHECKERS, ids=[n for n, _ in CHECKERS])
def test_a_wrong_thing_gives_one_line_and_false(name, check, wrong):
    passed, line = checker_line(check, WRONG[wrong])  # one line, ✅ iff True, the global RNG unmoved
    assert passed is False and line.startswith("⏳") == (wrong == "the stub"), line
    assert "Traceback" not in line and len(line) < 600, line
