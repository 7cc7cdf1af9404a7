"""The cases of notebook 06's carry pairs and the hint for a wrong pair, for its checker
(attnkit.exercises.patching): problems with and without carries, chains, one- and two-digit
operands and random ones, and what a pair must be (the same digits but one, a carry only in the
clean problem, ...).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable

import numpy as np

from ..interp.patching import carry_pair

# The notebook's pair first; no carry; a units column summing to exactly 10; a chain (555+445) and
# a tens column that carries by itself (348+276); one- and two-digit numbers and chains (99+1);
# then 200 random problems.
_PAIR_CASES = [
    (125, 137),
    (125, 134),
    (348, 276),
    (125, 135),
    (555, 445),
    (9, 1),
    (7, 8),
    (99, 1),
    (48, 6),
    (505, 95),
    (155, 165),
    (19, 3),
    (0, 0),
    (999, 999),
    (901, 119),
]


_PROBLEM = re.compile(r"(-?\d+)\+(-?\d+)")


_PLACES = ["units", "tens", "hundreds", "thousands"]


def _differing_digits(x: int, y: int) -> list[str]:
    return [place for i, place in enumerate(_PLACES) if (x // 10**i) % 10 != (y // 10**i) % 10]


def _pair_hint(a: int, b: int, got, want: tuple[str, str] | None, fn: Callable | None = None) -> str:
    """The hint for a result that is not carry_pair(a, b); `fn`, the learner's code, confirms a hint
    that names a mistake before it is given."""
    units_a, units_b = a % 10, b % 10
    tens_sum = (a // 10) % 10 + (b // 10) % 10
    if want is None:
        if isinstance(got, (bool, tuple, list, str)) and not got:
            return f"for {a}+{b} you return {got!r}: when there is no pair, return None itself"
        if units_a + units_b < 10:
            return f"{a}+{b} does not carry in the units column ({units_a} + {units_b} < 10): return None"
        return (
            f"for {a}+{b} you return {got!r}, but its tens digits sum to 9, so removing the units carry "
            "also removes the tens carry (a chain): only one carry may change — return None"
        )
    if got is None or (isinstance(got, (bool, tuple, list, str)) and not got):
        if units_a + units_b == 10 and _carries_above_ten(fn, a, b):
            return (
                f"{a}+{b} carries: its units digits sum to exactly 10 ({units_a} + {units_b}) — test "
                f"a % 10 + b % 10 >= 10, not > 10; expected {want!r}"
            )
        if tens_sum >= 10:
            return (
                f"for {a}+{b} you return {got!r}, but its tens column carries by itself ({tens_sum} ≥ 10), so "
                f"removing the units carry changes only that one — not a chain: expected {want!r}"
            )
        return (
            f"{a}+{b} carries in the units column and can lose just that carry: expected {want!r} — b's units "
            f"digit becomes 9 - a % 10 = {9 - units_a} (one more still carries, and then no carry is lost)"
        )
    if isinstance(got, str):
        return f"you return one string {got!r}: return a pair (clean, corrupted), {want!r}"
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"for {a}+{b} you return {got!r}: return a pair of strings (clean, corrupted), {want!r}"
    if all(isinstance(x, (int, np.integer)) for x in got):
        if int(got[0]) == a + b:
            return f"you return the sums {tuple(got)!r}: return the problems as strings, {want!r}"
        return f'you return numbers {tuple(got)!r}: return the problems as strings, f"{{a}}+{{b}}", {want!r}'
    if not all(isinstance(x, str) for x in got):
        return f'you return {tuple(got)!r}: return the two problems as strings, f"{{a}}+{{b}}", {want!r}'
    if tuple(got) == want[::-1]:
        return f"the pair is reversed: the clean problem first, then the corrupted one, {want!r}"
    if any(" " in x for x in got):
        return f'no spaces in the problems: the adder reads them as {want[0]!r} — f"{{a}}+{{b}}"'
    parsed = [_PROBLEM.fullmatch(x) for x in got]
    if not all(parsed):
        return f'your strings {tuple(got)!r} are not problems like {want[0]!r}: write f"{{a}}+{{b}}"'
    (a1, b1), (a2, b2) = [(int(m[1]), int(m[2])) for m in parsed if m]
    b_want = int(want[1].split("+")[1])
    if (a1, b1, a2, b2) == (a, b, a, b_want):  # the right numbers, written differently
        return (
            f"your strings {tuple(got)!r} have leading zeros: write the numbers as they are, "
            f'f"{{a}}+{{b2}}" with b2 a number — {want!r}'
        )
    if (a1, b1) != (a, b):
        return f"your clean problem {got[0]!r} is not {a}+{b}: build both strings from a and b"
    if a2 != a:
        if b2 == b:
            return f"you changed a ({a} → {a2}): change b's units digit and keep a — {want!r}"
        return f"your corrupted problem {got[1]!r} changes a: keep a and change only b's units digit — {want!r}"
    if b2 == b:
        return f"your corrupted problem is the clean one: lower b's units digit to 9 - a % 10 — {want!r}"
    if b2 == b - units_b and b_want != b2:
        return (
            f"you set b's units digit to 0: lower it only as far as needed, to 9 - a % 10 = {9 - units_a}, "
            f"the largest digit that does not carry — {want!r}"
        )
    if b2 == b_want + 1:
        return (
            f"{got[1]!r} still carries ({units_a} + {b2 % 10} = 10): off by one — the largest units digit "
            f"that does not carry is 9 - a % 10 = {9 - units_a}"
        )
    if b2 == b_want - 1:
        return (
            f"{got[1]!r} is one lower than needed: off by one — the largest units digit that does not carry "
            f"is 9 - a % 10 = {9 - units_a}, not 8 - a % 10"
        )
    if b >= 10 and b2 == 9 - units_a:
        return f"your b2 = {b2} keeps only the new units digit: keep b's other digits, b - b % 10 + (9 - a % 10)"
    changed = [place for place in _differing_digits(b, b2) if place != "units"] if b2 >= 0 else ["sign"]
    if changed:
        return (
            f"your b2 = {b2} changes b's {' and '.join(changed)} digit: change only the units digit, the "
            f"last one (b % 10) — {want!r}"
        )
    if units_a + b2 % 10 >= 10:
        return f"{got[1]!r} still carries in the units column: b's units digit should be 9 - a % 10 = {9 - units_a}"
    return (
        f"for {a}+{b} you return {tuple(got)!r}, expected {want!r}: lower b's units digit to 9 - a % 10, "
        "the largest digit that does not carry, and keep the rest"
    )


def _carries_above_ten(fn: Callable | None, a: int, b: int) -> bool:
    """Does the learner's code find the pair for the same problem with units summing to 11 (b's units
    digit + 1)? Then a units sum of exactly 10 is the one it misses: "> 10 instead of >= 10"."""
    if fn is None or b % 10 == 9:
        return False
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            got = fn(a, b + 1)
    except Exception:
        return False
    want = carry_pair(a, b + 1, 0)
    return want is not None and isinstance(got, (tuple, list)) and tuple(got) == want
