"""Checkers for notebook 06's exercises (activation patching), as every checker in attnkit/exercises: one
printed line, ✅ or a hint naming the likely mistake, never a traceback; True when passed.

Each checker runs the learner's code on several cases and, when a result is wrong, compares it with
what the common mistakes would give, so that the hint can name the mistake and say what to do.

The checkers (and yours_if_it_passed) are here, where the notebook imports them; beside them:
patching_effect (the normalised effect's cases and mistakes), patching_hook (the hook's cases and
where a wrong hook wrote) and patching_pairs (the carry pairs' cases and hints)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from ..core.hooks import HookPoint
from ..interp.patching import carry_pair, head_patch_hook
from .checking import Hint, call, case_generator, case_rng, checker, wrote_into_activation, yours_or_kits
from .patching_effect import _EFFECT_ARRAYS, _ELEMENTWISE, _effect, _effect_on_floats, _hidden_effects, _value
from .patching_hook import _HOOK_CASES, _a, _which_cells
from .patching_pairs import _PAIR_CASES, _pair_hint


def yours_if_it_passed(answer, check, hints: bool = True):
    """Check `answer`; the rest of the notebook then uses it if it passed, else the kit's own."""
    kits = {
        "06-normalised-effect": _effect,
        "06-patch-hook": head_patch_hook,
        "06-carry-pair": lambda a, b: carry_pair(a, b, column=0),
    }
    return yours_or_kits(answer, check, kits, hints)


# ---------------------------------------------------------------- the normalised effect


@checker("normalised_effect", "06-normalised-effect", "my_normalised_effect")
def check_normalised_effect(fn: Callable) -> str:
    """`fn(patched, clean, corrupted)` -> (patched - corrupted) / (clean - corrupted), elementwise."""
    _effect_on_floats(fn)
    for kind, args in _EFFECT_ARRAYS + _hidden_effects():
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


@checker("patch_hook", "06-patch-hook", "my_patch_hook", references=("attnkit.interp.patching:head_patch_hook",))
def check_patch_hook(make_hook: Callable) -> str:
    """`make_hook(clean_z, head, pos)` -> hook(z, hook) returning z with [:, head, pos] from clean_z."""
    for batch, n_heads, n_pos, d_head, head, pos in _HOOK_CASES:
        gen = case_generator(batch * 100 + n_pos)
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


@checker("carry_pair", "06-carry-pair", "my_carry_pair", references=("attnkit.interp.patching:carry_pair",))
def check_carry_pair(fn: Callable) -> str:
    """`fn(a, b)` -> ("a+b", "a+b2") where b2 lowers b's units digit so the units column stops
    carrying and no other carry changes; None when that is impossible."""
    rng = case_rng(6)
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
