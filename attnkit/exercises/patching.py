"""Checkers for notebook 06's exercises (activation patching), in the style of checks.py: one
printed line, ✅ or a hint naming the likely mistake, never a traceback; True when passed.

Each checker runs the learner's code on several cases and, when a result is wrong, compares it with
what the common mistakes would give, so that the hint can name the mistake and say what to do."""

from __future__ import annotations

import contextlib
import io
import itertools
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..core.hooks import HookPoint
from ..interp.patching import carry_pair, head_patch_hook
from .checking import Hint, call, checker, wrote_into_activation


def yours_if_it_passed(answer, check, hints: bool = True):
    """Check `answer`; the rest of the notebook then uses it if it passed, else the kit's own
    (kept here, out of the notebook, so that the check cell does not show the answer)."""
    if check(answer, hints=hints):
        return answer
    return {
        "06-normalised-effect": _effect,
        "06-patch-hook": head_patch_hook,
        "06-carry-pair": lambda a, b: carry_pair(a, b, column=0),
    }[check.exercise.id]


# ---------------------------------------------------------------- the normalised effect


def _effect(p, c, k):
    return (p - k) / (c - k)


# (patched, clean, corrupted) as plain floats: a patch half way, one that changes nothing, one that
# restores all, one a third of the way (rounding shows), one that makes things worse (< 0) and one
# that overshoots (> 1), positive metrics, and a clean metric below the corrupted one.
_EFFECT_CASES = [
    (-3.0, -1.0, -5.0),
    (-5.0, -1.0, -5.0),
    (-1.0, -1.0, -5.0),
    (-4.0, -2.0, -5.0),
    (-6.0, -1.0, -5.0),
    (0.0, -1.0, -5.0),
    (2.5, 4.0, 1.0),
    (1.0, -2.0, 3.0),
]

_SWAPPED = (
    "your arguments are in another order: the checker calls fn(patched, clean, corrupted), as the "
    "notebook does — (patched - corrupted) / (clean - corrupted)"
)
# What a common mistake returns for (patched, clean, corrupted), and the hint that names it.
_EFFECT_MISTAKES = (
    [
        (
            lambda p, c, k: (p - c) / (k - c),
            "you measured the distance from the clean run (clean and corrupted swapped?): 0 must mean 'no change "
            "from the corrupted run', so subtract the corrupted metric in both places, (patched - corrupted) / "
            "(clean - corrupted)",
        ),
        (
            lambda p, c, k: (p - k) / (k - c),
            "the sign is flipped: divide by (clean - corrupted), not (corrupted - clean)",
        ),
        (
            lambda p, c, k: p - k / (c - k),
            "operator precedence: put (patched - corrupted) in parentheses before dividing",
        ),
        (
            lambda p, c, k: (p - k) / c - k,
            "operator precedence: put (clean - corrupted) in parentheses — / goes before -",
        ),
        (
            lambda p, c, k: 100 * _effect(p, c, k),
            "you return a percentage: the effect is a fraction, 1 = as good as the clean run — leave out the × 100",
        ),
        (
            lambda p, c, k: np.floor(_effect(p, c, k)),
            "// is floor division (it rounds down to a whole number): divide with /",
        ),
        (
            lambda p, c, k: np.clip(_effect(p, c, k), 0, 1),
            "your effect is clamped to [0, 1]: leave it as it is — below 0 (the patch made things worse) and above "
            "1 (it overshoots the clean run) are findings too",
        ),
        (
            lambda p, c, k: abs(_effect(p, c, k)),
            "the effect can be negative (a patch that makes the run worse than the corrupted one): leave out abs()",
        ),
        (
            lambda p, c, k: (p - k) / abs(c - k),
            "leave out abs(): when the clean metric is below the corrupted one, "
            "(clean - corrupted) is negative and the division must keep its sign",
        ),
        (lambda p, c, k: (p - k) / c, "you divided by the clean metric alone: divide by the gap (clean - corrupted)"),
        (
            lambda p, c, k: (p - k) / k,
            "you divided by the corrupted metric alone: divide by the gap (clean - corrupted)",
        ),
        (
            lambda p, c, k: p / c,
            "patched / clean is a ratio, not the normalised effect: measure from the corrupted "
            "run, (patched - corrupted) / (clean - corrupted)",
        ),
        (
            lambda p, c, k: p - k,
            "you return patched - corrupted without dividing: divide it by (clean - corrupted), "
            "so that the clean run scores 1",
        ),
        (
            lambda p, c, k: (c - k) / (p - k),
            "the fraction is upside down: (patched - corrupted) goes above the line, (clean - corrupted) below",
        ),
    ]
    + [  # a signature whose order differs from the call's (two of the six orders are named above)
        (lambda p, c, k, order=order: _effect(*(dict(p=p, c=c, k=k)[n] for n in order)), _SWAPPED)
        for order in itertools.permutations("pck")
        if order not in (tuple("pck"), tuple("pkc"), tuple("cpk"))
    ]
    + [
        (lambda p, c, k, n=n: np.round(_effect(p, c, k), n), "you rounded the effect: return it unrounded")
        for n in (0, 1, 2, 3)
    ]
)
_ELEMENTWISE = (
    "use plain arithmetic, which works elementwise: no float() or .item(), no math.*, and no Python "
    "`if`, `and`/`or`, min() or max() on the values"
)

# Arrays of answer tokens: 1-D numpy, 1-D float32 tensors (as the notebook's), 2-D tensors
# (samples, tokens) and a one-token tensor.
_P = [[-3.0, -2.0, -7.0], [0.0, -4.0, -1.0]]
_C = [[-1.0, -1.0, -1.0], [-1.0, -2.0, -1.0]]
_K = [[-5.0, -3.0, -5.0], [-5.0, -5.0, -5.0]]
_EFFECT_ARRAYS: list[tuple[str, tuple[Any, ...]]] = [
    ("numpy arrays", tuple(np.array(x[0]) for x in (_P, _C, _K))),
    ("tensors", tuple(torch.tensor(x[0]) for x in (_P, _C, _K))),
    ("2-D tensors (samples, tokens)", tuple(torch.tensor(x) for x in (_P, _C, _K))),
    ("one-token tensors", tuple(torch.tensor(x[1][1:2]) for x in (_P, _C, _K))),
]


def _value(x, what: str) -> np.ndarray:
    """The learner's result as a float array, or the hint for why it is not a number."""
    if x is None:
        raise Hint(f"your {what} returned None — did you forget `return`?")
    if isinstance(x, (str, bytes, dict, set)) or callable(x):
        raise Hint(f"your {what} returned a {type(x).__name__}, expected a number (or an array of them)")
    try:
        return np.asarray(x.detach().cpu() if isinstance(x, Tensor) else x, dtype=float)
    except (TypeError, ValueError, RuntimeError):
        raise Hint(f"your {what} returned a {type(x).__name__}, expected a number (or an array of them)") from None


def _name_effect_mistake(got: list) -> None:
    """Raise the hint of the common mistake that gives `got` on _EFFECT_CASES, if one does."""
    with np.errstate(all="ignore"):
        for mistake, hint in _EFFECT_MISTAKES:
            if np.allclose(got, [mistake(*map(np.float64, case)) for case in _EFFECT_CASES], equal_nan=True):
                raise Hint(hint)


def _on_numpy_floats(fn: Callable) -> list | None:
    """The learner's results on _EFFECT_CASES given numpy floats, which divide by zero without raising."""
    try:
        with np.errstate(all="ignore"):
            values = [_value(call(fn, *map(np.float64, case)), "function") for case in _EFFECT_CASES]
    except Hint:
        return None
    return [float(v) for v in values] if all(v.shape == () for v in values) else None


def _effect_on_floats(fn: Callable) -> None:
    got: list = []
    for p, c, k in _EFFECT_CASES:
        where = f" for patched={p}, clean={c}, corrupted={k}"
        try:
            result = call(fn, p, c, k, context=where)
        except Hint as hint:
            raised = str(hint).split(" — ")[0].removesuffix(", but expected one of:")  # without call's advice
            if "ZeroDivisionError" in str(hint):
                on_numpy = _on_numpy_floats(fn)  # an upside-down fraction or the arguments in another order?
                if on_numpy is not None:
                    _name_effect_mistake(on_numpy)
                raise Hint(
                    f"your code divided by zero{where}: divide by (clean - corrupted), which is never 0 "
                    "here — and the checker calls fn(patched, clean, corrupted), in that order"
                ) from None
            if "'float' object has no attribute" in str(hint):
                raise Hint(
                    f"{raised} — on plain floats there are no tensor methods (.clone(), .numpy(), .item() "
                    "...): plain arithmetic works on floats, arrays and tensors alike"
                ) from None
            if "must be Tensor, not float" in str(hint) or "got (float" in str(hint):
                raise Hint(
                    f"{raised} — torch functions need tensors, and the effect must work on plain floats too: "
                    "write plain arithmetic, (patched - corrupted) / (clean - corrupted)"
                ) from None
            raise
        value = _value(result, "function")
        if value.shape != ():
            raise Hint(
                f"you return a {type(result).__name__} ({value.size} value{'s' * (value.size != 1)}){where}: "
                "return the effect alone, one number"
            )
        got.append(float(value))
    want = [_effect(*case) for case in _EFFECT_CASES]
    if np.allclose(got, want):
        return
    _name_effect_mistake(got)
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if not np.isclose(g, w))
    p, c, k = _EFFECT_CASES[i]
    raise Hint(
        f"for patched={p}, clean={c}, corrupted={k} you return {got[i]:.3g}; expected {want[i]:.3g} — "
        "(patched - corrupted) / (clean - corrupted): 1 = as good as the clean run, 0 = no better than "
        "the corrupted one"
    )


@checker("normalised_effect", "06-normalised-effect", "my_normalised_effect")
def check_normalised_effect(fn: Callable) -> str:
    """`fn(patched, clean, corrupted)` -> (patched - corrupted) / (clean - corrupted), elementwise."""
    _effect_on_floats(fn)
    for kind, args in _EFFECT_ARRAYS:
        copies = tuple(a.copy() if isinstance(a, np.ndarray) else a.clone() for a in args)
        try:
            result = call(fn, *copies, context=f" on {kind}")
        except Hint as hint:
            text = str(hint)
            if any(s in text for s in ("Python scalars", "to Scalar", "array of size 1", "ambiguous")):
                raise Hint(f"{text} — on {kind} the effect has one value per answer token: {_ELEMENTWISE}") from None
            if "must be Tensor, not numpy.ndarray" in text:
                raise Hint(
                    f"{text} — torch functions need tensors: write plain arithmetic, "
                    "(patched - corrupted) / (clean - corrupted), which works on arrays too"
                ) from None
            raise
        for name, before, after in zip(("patched", "clean", "corrupted"), args, copies):
            if not np.array_equal(np.asarray(before), np.asarray(after)):
                raise Hint(
                    f"your function changed its argument {name} in place (-=, /= ...) on {kind}: the "
                    "caller's metrics must stay as they were — write patched - corrupted, which makes "
                    "a new one"
                )
        want = _effect(*args)
        if isinstance(args[0], Tensor) and not isinstance(result, Tensor):
            if isinstance(result, np.ndarray):
                raise Hint(
                    "on tensors your function returns a numpy array: keep tensors tensors (the notebook "
                    "calls .numpy() on the result) — plain arithmetic works on both, np.asarray/np.array "
                    "turns a tensor into an array"
                )
            raise Hint(
                f"on tensors your function returns a {type(result).__name__}: return a tensor, "
                "(patched - corrupted) / (clean - corrupted) as it is (no .tolist(), no list of values)"
            )
        got = _value(result, "function")
        shape = tuple(want.shape)
        if got.shape != shape:
            if got.shape == () and np.isclose(got, np.asarray(want, dtype=float).mean()):
                raise Hint(
                    f"on {kind} you return the mean over the answer tokens: return one value per token (no .mean())"
                )
            raise Hint(
                f"on {kind} of shape {shape} you return shape {got.shape}: return one value per answer "
                f"token, the same shape as the inputs — {_ELEMENTWISE}"
            )
        if not np.allclose(got, np.asarray(want, dtype=float), atol=1e-6):
            raise Hint(
                f"on {kind} you return {np.round(got, 3).tolist()}; expected "
                f"{np.round(np.asarray(want, dtype=float), 3).tolist()} — {_ELEMENTWISE}"
            )
    return (
        "1 = restores the clean run, 0 = no change, below 0 and above 1 kept; on floats, arrays and "
        "1-D, 2-D and one-token tensors"
    )


# ---------------------------------------------------------------- the patching hook

# (batch, n_heads, n_pos, d_head, head, pos). Batch 2 first, with head and pos inside z both ways
# and n_heads != n_pos, so that a swap, an off-by-one or the notebook's fixed head 1 / pos 5 show;
# then batch 1, batch 3 at the last position, and a single position; no head width is the notebook's.
_HOOK_CASES = [(2, 6, 7, 5, 3, 4), (1, 4, 5, 16, 1, 2), (3, 2, 7, 3, 0, 6), (2, 3, 1, 4, 2, 0)]


def _a(name: str) -> str:
    return f"{'an' if name[:1] in 'aeiouAEIOU' else 'a'} {name}"


def _cells(mask: Tensor) -> set:
    return {tuple(c) for c in mask.nonzero().tolist()}


def _which_cells(out: Tensor, z: Tensor, clean: Tensor, head: int, pos: int) -> None:
    """Raise the hint that names where the learner's hook put clean_z (out is z's shape, and wrong)."""
    batch = z.size(0)
    from_clean = torch.isclose(out, clean.expand_as(out)).all(-1)  # (batch, heads, pos)
    kept = torch.isclose(out, z).all(-1)
    if not (from_clean | kept).all():
        b, h, p = (~(from_clean | kept)).nonzero()[0].tolist()
        raise Hint(
            f"at sample {b}, head {h}, position {p} your hook returns values that are neither z's nor "
            "clean_z's: copy clean_z[:, head, pos] as it is (assign with =, nothing added or scaled)"
        )
    per_sample = [_cells(from_clean[b]) for b in range(batch)]
    if batch > 1 and per_sample[0] == {(head, pos)} and not any(per_sample[1:]):
        raise Hint(
            f"only the first sample of the batch was patched (z has batch {batch}): index every sample, "
            "z[:, head, pos] = clean_z[:, head, pos]"
        )
    cells = per_sample[0]
    if any(s != cells for s in per_sample):
        raise Hint(
            "the samples of the batch were patched differently: patch every sample the same way, "
            "z[:, head, pos] = clean_z[:, head, pos] (clean_z's batch of 1 broadcasts)"
        )
    n_heads, n_pos = from_clean.shape[1:]
    if cells == {(h, pos) for h in range(n_heads)}:
        raise Hint("you replaced every head at that position: index the head axis too, z[:, head, pos]")
    if cells == {(head, p) for p in range(n_pos)}:
        raise Hint("you replaced every position of that head: index the position axis too, z[:, head, pos]")
    if cells == {(pos, head)}:
        raise Hint("head and position are swapped: z is (batch, heads, pos, d_head), so z[:, head, pos]")
    if len(cells) == 1:
        ((h, p),) = cells
        if h == head and abs(p - pos) == 1:
            raise Hint(
                f"you patched position {p} instead of {pos}: off by one? positions count from 0 — "
                "z[:, head, pos] with pos as given"
            )
        if p == pos and abs(h - head) == 1:
            raise Hint(
                f"you patched head {h} instead of {head}: off by one? heads count from 0 — "
                "z[:, head, pos] with head as given"
            )
        raise Hint(
            f"you patched head {h} at position {p}, but the checker asked for head {head} at position "
            f"{pos}: use the arguments head and pos, not fixed numbers such as the notebook's"
        )
    raise Hint(
        f"your hook put clean_z into {len(cells)} (head, position) cells {sorted(cells)[:4]}: only one "
        f"should change, z[:, {head}, {pos}]"
    )


@checker("patch_hook", "06-patch-hook", "my_patch_hook", references=("attnkit.interp.patching:head_patch_hook",))
def check_patch_hook(make_hook: Callable) -> str:
    """`make_hook(clean_z, head, pos)` -> hook(z, hook) returning z with [:, head, pos] from clean_z."""
    for batch, n_heads, n_pos, d_head, head, pos in _HOOK_CASES:
        gen = torch.Generator().manual_seed(batch * 100 + n_pos)
        clean = torch.randn(1, n_heads, n_pos, d_head, generator=gen)
        z = torch.randn(batch, n_heads, n_pos, d_head, generator=gen)
        clean_before, z_before = clean.clone(), z.clone()
        where = f" (z of shape {tuple(z.shape)}, head {head}, pos {pos})"
        hook = call(make_hook, clean, head, pos, context=" when making the hook")
        if isinstance(hook, Tensor):
            raise Hint(
                "make_hook returned a tensor: it should return the hook function itself, `return hook`, "
                "without calling it — the model calls it later with each z"
            )
        if not callable(hook):
            raise Hint(
                f"make_hook should return a function hook(z, hook), not {_a(type(hook).__name__)}: "
                "end it with `return hook`"
            )
        hook_point = HookPoint()
        hook_point.name = "enc.self.0.hook_z"
        try:
            out = call(hook, z, hook=hook_point, context=f" when called as hook(z, hook=point){where}")
        except Hint as hint:
            text = str(hint)
            if "unexpected keyword argument 'hook'" in text:
                raise Hint(
                    "the model calls a hook as hook(z, hook=point), TransformerLens's way: name its second "
                    "argument `hook` (def hook(z, hook)), even if unused"
                ) from None
            if "out of bounds for dimension 0 with size 1" in text:
                raise Hint(
                    f"clean_z has batch 1 (one clean run) while z has batch {batch}: take "
                    "clean_z[:, head, pos] (it broadcasts over z's batch), not clean_z[i] per sample"
                ) from None
            if "must match the existing size" in text or "must match the size of tensor" in text:
                raise Hint(
                    f"{text.split(' — ')[0]} — the piece of clean_z you copy must have the shape of "
                    f"z[:, head, pos], (batch, d_head): index clean_z like z, with all 4 axes, "
                    "clean_z[:, head, pos] (clean_z[0] drops the batch axis, so [:, head, pos] would then "
                    "index other axes)"
                ) from None
            raise
        if not torch.equal(clean, clean_before):
            raise Hint(
                "your hook changed clean_z: it only reads it — copy from clean_z into (a clone of) z, "
                "z[:, head, pos] = clean_z[:, head, pos]"
            )
        if not torch.equal(z, z_before):
            raise wrote_into_activation("z[:, head, pos] = ...")
        if out is None:
            raise Hint("your hook returns None: return the patched copy of z (`return z` at its end)")
        if not isinstance(out, Tensor):
            raise Hint(f"the hook must return a tensor of z's shape {tuple(z.shape)}, not {_a(type(out).__name__)}")
        if out.shape != z.shape:
            if out.shape == clean.shape and batch > 1:
                raise Hint(
                    f"your hook returns clean_z's shape {tuple(clean.shape)} for z of batch {batch}: start "
                    "from z (z.clone()) and copy only clean_z[:, head, pos] into it"
                )
            raise Hint(
                f"the hook must return z's shape {tuple(z.shape)}, got {tuple(out.shape)}: the whole z, with "
                "one head at one position replaced"
            )
        if out.dtype != z.dtype:
            raise Hint(
                f"your hook returns {out.dtype} for a z of {z.dtype}: keep z's dtype (no .double(), .half() "
                "or torch.tensor(...) copies) — the next layer expects it"
            )
        want = z_before.clone()
        want[:, head, pos] = clean[:, head, pos]
        if torch.allclose(out, want):
            continue
        if torch.allclose(out, z_before):
            raise Hint(
                "z comes back unchanged: assign z[:, head, pos] = clean_z[:, head, pos] on the tensor you "
                "return (if you cloned z, patch and return the clone)"
            )
        if torch.allclose(out, clean.expand_as(out)):
            raise Hint("you returned the whole clean z: only one head at one position should change")
        inverted = clean.expand_as(out).clone()
        inverted[:, head, pos] = z_before[:, head, pos]
        if torch.allclose(out, inverted):
            raise Hint(
                "you started from clean_z: start from z (the corrupted run, z.clone()) and put only "
                "clean_z[:, head, pos] into it"
            )
        added = z_before.clone()
        added[:, head, pos] += clean[:, head, pos]
        if torch.allclose(out, added):
            raise Hint(
                "you added clean_z to z at that head and position: replace it, z[:, head, pos] = "
                "clean_z[:, head, pos] (=, not +=)"
            )
        _which_cells(out, z_before, clean, head, pos)
    return "one head at one position patched, for batch 1, 2 and 3, 2 to 6 heads and 1 to 7 positions"


# ---------------------------------------------------------------- carry pairs

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


@checker("carry_pair", "06-carry-pair", "my_carry_pair", references=("attnkit.interp.patching:carry_pair",))
def check_carry_pair(fn: Callable) -> str:
    """`fn(a, b)` -> ("a+b", "a+b2") where b2 lowers b's units digit so the units column stops
    carrying and no other carry changes; None when that is impossible."""
    rng = np.random.default_rng(6)
    cases = _PAIR_CASES + [tuple(map(int, p)) for p in rng.integers(0, 1000, (200, 2))]
    for a, b in cases:
        want = carry_pair(a, b, 0)
        got = call(fn, a, b, context=f" on a={a}, b={b}")
        if want is None and got is None:
            continue
        if (
            want is not None
            and isinstance(got, (tuple, list))
            and len(got) == 2
            and all(isinstance(x, str) for x in got)
            and tuple(got) == want
        ):
            continue
        raise Hint(_pair_hint(a, b, got, want, fn))
    return (
        f"{len(cases)} problems of 1 to 3 digits, with and without a units carry, with chains (555+445, "
        "99+1) and tens columns that carry by themselves"
    )
