"""Checkers for notebook 07's exercises (the adder's training replayed), as every checker in
attnkit/exercises: one printed line, ✅ or a hint naming the likely mistake, never a traceback;
True only on a pass.

    replay_checks.check_first_lasting(my_first_lasting)      # ⭐ when a curve crosses a line and stays
    replay_checks.check_learned_order(my_learned_order)      # ⭐⭐ which kinds of sums come in first
    replay_checks.check_progress_measure(my_progress)        # ⭐⭐⭐ a measure that moves before exact match
    replay_checks.yours_if_it_passed(my_first_lasting, replay_checks.check_first_lasting)  # or the kit's own
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..interp.replay import first_lasting
from .checking import Hint, call, case_rng, checker, yours_or_kits

# ---------------------------------------------------------------- when a curve crosses and stays

STEPS = [0, 20, 40, 60, 80, 100, 120, 140]


def _lasting_cases() -> list[tuple[str, list, list, float]]:
    """(label, steps, values, threshold): a dip after the first crossing, a value exactly on the
    line, one never reached, one reached at the start, one that falls back at the end."""
    rng = case_rng(7)
    noisy = np.clip(np.linspace(0, 1, 12) + rng.normal(0, 0.15, 12), 0, 1).round(3).tolist()
    return [
        ("a curve that dips after first crossing", STEPS, [0.0, 0.2, 0.95, 0.6, 0.92, 0.97, 0.99, 1.0], 0.9),
        ("a value exactly on the line", STEPS, [0.1, 0.3, 0.5, 0.9, 0.9, 0.95, 0.9, 0.99], 0.9),
        ("a curve that never gets there", STEPS, [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], 0.9),
        ("a curve above the line from the start", STEPS, [0.95, 0.96, 0.97, 0.98, 0.99, 1.0, 1.0, 1.0], 0.9),
        ("a curve that falls back at the end", STEPS, [0.0, 0.5, 0.95, 0.96, 0.97, 0.98, 0.99, 0.5], 0.9),
        ("uneven steps, noisy", [0, 5, 10, 25, 50, 75, 100, 150, 200, 300, 400, 600], noisy, 0.5),
    ]


def _first_crossing(steps, values, threshold):
    return next((s for s, v in zip(steps, values) if v >= threshold), None)


@checker("first_lasting", "07-first-lasting", "my_first_lasting", references=("attnkit.interp.replay:first_lasting",))
def check_first_lasting(fn: Callable) -> str:
    """`fn(steps, values, threshold)` -> the first step from which values stay >= threshold to the
    end, or None when the last value is below it."""
    for label, steps, values, threshold in _lasting_cases():
        got = call(fn, list(steps), list(values), threshold, context=f" on {label}")
        want = first_lasting(steps, values, threshold)
        if isinstance(got, (np.integer, torch.Tensor)) and not isinstance(got, bool):
            got = int(got)
        if got == want and (got is None or isinstance(got, int)):
            continue
        if want is None:
            raise Hint(
                f"on {label} (last value {values[-1]} vs threshold {threshold}) you return {got!r}: when the "
                "curve is not above the line at the end, it has not crossed it for good — return None"
            )
        if got is not None and got in range(len(steps)) and steps[got] == want:
            raise Hint(f"on {label} you return {got}, the position in the list: return the step, steps[{got}] = {want}")
        if got == _first_crossing(steps, values, threshold):
            raise Hint(
                f"on {label} you return step {got}, where it first crosses the line; it dips below again "
                f"later — the answer is the step from which it stays above: {want}"
            )
        strict = next((s for i, s in enumerate(steps) if all(v > threshold for v in values[i:])), None)
        if got == strict:
            raise Hint(
                f"on {label} you return {got}: a value equal to the threshold counts (>=, not >); expected {want}"
            )
        raise Hint(f"on {label} (threshold {threshold}) you return {got!r}; expected step {want}")
    return "the first step from which the curve stays at or above the line; dips, ties and never-reached"


# ---------------------------------------------------------------- which sums are learned first


def _order(steps, curves: dict, threshold: float) -> list[str]:
    """Names by the step each curve crosses the threshold for good; those that never do, last."""
    when = {n: first_lasting(steps, v, threshold) for n, v in curves.items()}
    names = list(curves)
    return sorted(names, key=lambda n: (when[n] is None, when[n] if when[n] is not None else 0, names.index(n)))


def _order_cases() -> list[tuple[str, list, dict, float]]:
    rises = {
        "late": [0.0, 0.0, 0.1, 0.3, 0.6, 0.8, 0.95, 0.99],
        "early": [0.0, 0.4, 0.9, 0.95, 0.97, 0.99, 1.0, 1.0],
        "dipping": [0.0, 0.95, 0.5, 0.5, 0.5, 0.93, 0.96, 0.99],  # first touches the line earliest
    }
    cases = [("three groups, one dipping", STEPS, rises, 0.9)]
    cases.append(("a group that never gets there", STEPS, {**rises, "never": [0.0] * 4 + [0.5] * 4}, 0.9))
    tie = {"b": [0.0, 0.95, 1, 1, 1, 1, 1, 1], "a": [0.0, 0.91, 1, 1, 1, 1, 1, 1], "c": [0, 0, 0, 0, 0, 0, 0, 0.95]}
    cases.append(("a tie (keep the order given)", STEPS, tie, 0.9))
    return cases


def _learned_order_from_replay() -> list[tuple[str, list, dict, float]]:
    """The three seeds' carry-group curves, when the replay study's results are there."""
    try:
        from ..experiments.replay_study import load_replay

        runs = load_replay()["seeds"]
    except (OSError, ValueError):
        return []
    return [
        (f"seed {seed}'s carry groups at {t}", run["steps"], run["by_group"], t)
        for seed, run in runs.items()
        for t in (0.5, 0.9)
    ]


@checker("learned_order", "07-learned-order", "my_learned_order")
def check_learned_order(fn: Callable) -> str:
    """`fn(steps, curves, threshold)` -> the curves' names, ordered by the step at which each
    reaches the threshold for good (first_lasting); the ones that never do last; ties in the
    order given."""
    for label, steps, curves, threshold in _order_cases() + _learned_order_from_replay():
        given = {n: list(v) for n, v in curves.items()}
        got = call(fn, list(steps), given, threshold, context=f" on {label}")
        if given != curves:
            raise Hint("your function changed `curves`: leave the caller's lists as they are (sort a copy)")
        want = _order(steps, curves, threshold)
        if isinstance(got, tuple):
            got = list(got)
        if got == want:
            continue
        if not isinstance(got, list) or not all(isinstance(n, str) for n in got):
            raise Hint(f"on {label} you return {got!r}: return a list of the curves' names (their keys in `curves`)")
        if sorted(got) != sorted(want):
            missing = sorted(set(want) - set(got))
            extra = " — a curve that never reaches the threshold goes last, not out" if missing else ""
            raise Hint(f"on {label} your list has {got}, but it must hold each name once: {want}{extra}")
        if got == want[::-1]:
            raise Hint(f"on {label} you return {got}: that is last-learned first — sort by the step, earliest first")
        first = {n: _first_crossing(steps, v, threshold) for n, v in curves.items()}
        by_first = sorted(curves, key=lambda n: (first[n] is None, first[n] or 0, list(curves).index(n)))
        if got == by_first:
            raise Hint(
                f"on {label} you order by the step where each curve first touches the line, {got}; a curve "
                f"that dips below again has not learned it yet — order by the step from which it stays: {want}"
            )
        raise Hint(f"on {label} (threshold {threshold}) you return {got}; expected {want}")
    return "ordered by when each curve stays above the line; never-reached last, ties as given, on the three seeds"


# ---------------------------------------------------------------- a progress measure

PROGRESS_SUMS = 500  # held-out sums the learner's measure and exact match are computed on
HALF = 0.5  # "moves": reaches half of its whole change from the first snapshot to the last


def _scalar(x, step: int) -> float:
    if isinstance(x, torch.Tensor):
        if x.numel() != 1:
            raise Hint(f"at step {step} your measure returned a tensor of shape {tuple(x.shape)}: return one number")
        x = x.item()
    if isinstance(x, np.ndarray):
        if x.size != 1:
            raise Hint(f"at step {step} your measure returned an array of shape {x.shape}: return one number")
        x = x.item()
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)):
        raise Hint(f"at step {step} your measure returned {type(x).__name__}: return one number (a float)")
    if not math.isfinite(float(x)):
        raise Hint(f"at step {step} your measure returned {x}: it must be a finite number (log of 0? divide by 0?)")
    return float(x)


def _progress_inputs():
    from ..adder.data import encode_sources, encode_targets, load_test_set

    a, b = load_test_set()
    pick = np.sort(np.random.default_rng(7).choice(len(a), PROGRESS_SUMS, replace=False))
    return a[pick], b[pick], encode_sources, encode_targets


def halfway(steps: Sequence[int], values: Sequence[float]) -> int | None:
    """The step from which a curve stays at least half of the way from its first value to its last."""
    v = np.asarray(values, dtype=float)
    span = v[-1] - v[0]
    return first_lasting(steps, ((v - v[0]) / span).tolist(), HALF) if span else None


@checker("progress_measure", "07-progress-measure", "my_progress")
def check_progress_measure(fn: Callable, snapshots=None) -> str:
    """`fn(model, src, tgt)` -> one number that grows as the model learns and gets halfway (from
    its value at the first snapshot to its value at the last) at an earlier step than greedy
    exact match does, on 500 held-out sums."""
    from ..adder.evaluate import greedy_correct

    if snapshots is None:
        from ..adder.snapshots import load_snapshots

        snapshots = load_snapshots()
    a, b, encode_sources, encode_targets = _progress_inputs()
    steps = list(snapshots.steps)
    values: dict[int, float] = {}
    exact: dict[int, float] = {}
    # In a shuffled order: a measure must read the model, not count its calls.
    for i in np.random.default_rng(11).permutation(len(steps)).tolist():
        model = snapshots[i].model
        cfg = model.cfg
        src = encode_sources(a, b, cfg.n_digits, cfg.zero_pad)
        tgt = encode_targets(a + b, cfg.n_digits, cfg.reverse_output)
        with torch.no_grad():
            got = call(fn, model, src.clone(), tgt.clone(), context=f" at step {steps[i]}")
        values[i] = _scalar(got, steps[i])
        exact[i] = float(greedy_correct(model, a, b).mean())
    mine = [values[i] for i in range(len(steps))]
    em = [exact[i] for i in range(len(steps))]
    if mine[-1] == mine[0]:
        raise Hint(f"your measure is {mine[0]:.4g} at the first snapshot and at the last: it does not track learning")
    if mine[-1] < mine[0]:
        raise Hint(
            f"your measure falls as the model learns ({mine[0]:.4g} at step {steps[0]}, {mine[-1]:.4g} at step "
            f"{steps[-1]}): return something that grows with progress (e.g. minus the loss)"
        )
    if np.allclose(mine, em, atol=1e-9):
        raise Hint("that is greedy exact match itself: the exercise asks for a measure that moves before it")
    yours, theirs = halfway(steps, mine), halfway(steps, em)
    if yours is None or theirs is None or yours >= theirs:
        raise Hint(
            f"your measure gets halfway (and stays) at step {yours}, exact match at step {theirs}: it does not "
            "move first — try a teacher-forced measure, which scores every digit given the true ones before it"
        )
    return (
        f"halfway at step {yours}, exact match at step {theirs}, on {PROGRESS_SUMS} held-out sums and "
        f"{len(steps)} snapshots"
    )


def right_probability(model, src, tgt) -> float:
    """The kit's progress measure: the mean probability of the right answer token, the true
    tokens before it fed in (teacher forcing), padding left out."""
    from ..adder.data import PAD

    logits = model(src, tgt[:, :-1])
    gold = tgt[:, 1:]
    p_right = logits.softmax(-1).gather(-1, gold.unsqueeze(-1)).squeeze(-1)
    return float(p_right[gold != PAD].mean())


def yours_if_it_passed(answer, check, hints: bool = True):
    """Check `answer`; the rest of the notebook then uses it if it passed, else the kit's own."""
    kits = {"07-first-lasting": first_lasting, "07-learned-order": _order, "07-progress-measure": right_probability}
    return yours_or_kits(answer, check, kits, hints)
