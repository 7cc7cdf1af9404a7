"""Notebook 07's checkers (attnkit/exercises/replay.py): the notebook's solutions pass, each planted
mistake gets its own hint, and the progress measure must read the model."""

import pytest
import torch
import torch.nn.functional as F

import attnkit
from attnkit.adder.data import PAD
from attnkit.adder.evaluate import greedy_correct
from attnkit.exercises import replay as checks
from attnkit.interp.replay import first_lasting

from helpers import checker_line


def lasting(steps, values, threshold):
    i = len(values)
    while i > 0 and values[i - 1] >= threshold:
        i -= 1
    return steps[i] if i < len(values) else None


def first_touch(steps, values, threshold):
    return next((s for s, v in zip(steps, values) if v >= threshold), None)


def position(steps, values, threshold):
    found = lasting(steps, values, threshold)
    return None if found is None else steps.index(found)


def strict(steps, values, threshold):
    i = len(values)
    while i > 0 and values[i - 1] > threshold:
        i -= 1
    return steps[i] if i < len(values) else None


def last_touch_even_if_below_at_the_end(steps, values, threshold):
    return lasting(steps, values, threshold) or first_touch(steps, values, threshold)


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lasting, "✅"),
        (first_lasting, "kit"),  # the kit's own function is refused
        (first_touch, "where it first crosses the line"),
        (position, "the position in the list"),
        (strict, "(>=, not >)"),
        (last_touch_even_if_below_at_the_end, "return None"),
    ],
)
def test_first_lasting(fn, hint):
    _, line = checker_line(checks.check_first_lasting, fn)
    assert hint in line, line


def order(steps, curves, threshold):
    when = {n: lasting(steps, v, threshold) for n, v in curves.items()}
    return sorted(curves, key=lambda n: (when[n] is None, when[n] or 0))


def order_by_first_touch(steps, curves, threshold):
    when = {n: first_touch(steps, v, threshold) for n, v in curves.items()}
    return sorted(curves, key=lambda n: (when[n] is None, when[n] or 0))


def order_reversed(steps, curves, threshold):
    return order(steps, curves, threshold)[::-1]


def order_without_the_never_learned(steps, curves, threshold):
    return [n for n in order(steps, curves, threshold) if lasting(steps, curves[n], threshold) is not None]


def order_sorting_in_place(steps, curves, threshold):
    for values in curves.values():
        values.sort()
    return order(steps, curves, threshold)


@pytest.mark.parametrize(
    "fn, hint",
    [
        (order, "✅"),
        (order_by_first_touch, "first touches the line"),
        (order_reversed, "last-learned first"),
        (order_without_the_never_learned, "goes last, not out"),
        (order_sorting_in_place, "changed `curves`"),
        (
            lambda steps, curves, threshold: [lasting(steps, v, threshold) for v in curves.values()],
            "list of the curves' names",
        ),
    ],
)
def test_learned_order(fn, hint):
    _, line = checker_line(checks.check_learned_order, fn)
    assert hint in line, line


class Few:
    """Five of the committed snapshots: the progress checker's logic, at a third of its cost."""

    def __init__(self, snapshots, steps=(0, 100, 160, 250, 400)):
        self.steps = list(steps)
        self._all = snapshots

    def __len__(self):
        return len(self.steps)

    def __getitem__(self, i):
        return self._all.at_step(self.steps[i])


@pytest.fixture(scope="module")
def few():
    return Few(attnkit.load_snapshots())


def minus_loss(model, src, tgt):
    logits = model(src, tgt[:, :-1])
    return -F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=PAD)


def loss(model, src, tgt):
    return -minus_loss(model, src, tgt)


def exact(model, src, tgt):
    out = model.greedy(src)
    gold = tgt[:, 1:]
    return ((out == gold) | (gold == PAD)).all(dim=1).float().mean()


calls = {"n": 0}


def counting_calls(model, src, tgt):  # a "measure" that grows with each call, whatever the model
    calls["n"] += 1
    return float(calls["n"])


@pytest.mark.parametrize(
    "fn, hint",
    [
        (checks.right_probability, "✅"),
        (minus_loss, "✅"),
        (loss, "falls as the model learns"),
        (exact, "greedy exact match itself"),
        (counting_calls, "❌"),  # shuffled calls: its "curve" is noise (here it falls)
        (lambda model, src, tgt: torch.ones(3), "one number"),
        (lambda model, src, tgt: float("nan"), "finite"),
        (lambda model, src, tgt: 0.5, "does not track learning"),
    ],
)
def test_progress_measure(few, fn, hint):
    _, line = checker_line(lambda f: checks.check_progress_measure(f, snapshots=few), fn)
    assert hint in line, line


def test_the_progress_checker_compares_with_exact_match_on_its_own_sums(few):
    a, b, *_ = checks._progress_inputs()
    em = [float(greedy_correct(few[i].model, a, b).mean()) for i in range(len(few))]
    assert em[0] == 0 and em[-1] > 0.99 and checks.halfway(few.steps, em) in few.steps


def test_the_kit_answer_is_used_when_a_learner_fails():
    assert checks.yours_if_it_passed(first_touch, checks.check_first_lasting) is first_lasting
    assert checks.yours_if_it_passed(lasting, checks.check_first_lasting) is lasting
