"""The kit's own answer is not the learner's. Each checker's exercise has a reference in the kit
(attnkit.causal_mask for check_causal_mask, ...). A submission that is, wraps or calls it passes
the checker, since the checker compares with that very reference; run_checker catches it: the learner's
object itself is compared with the reference, and while the checker runs, a profiler sees every call
of the reference and walks up the stack: reached from the learner's code (a cell, not a file of the
kit or of an installed library) before any checker frame, the kit's own answer was used.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import io
import os
import sys
import types

# checker -> the kit's solutions of its exercise, "module:qualified.name".
REFERENCES = {
    "check_causal_mask": ["attnkit.core.attention:causal_mask"],
    "check_scaled_dot_product_attention": ["attnkit.core.attention:scaled_dot_product_attention"],
    "check_split_heads": ["attnkit.core.attention:MultiHeadAttention.split_heads"],
    "check_merge_heads": ["attnkit.core.attention:MultiHeadAttention.merge_heads"],
    "check_multi_head_attention": ["attnkit.core.attention:MultiHeadAttention"],
    "check_greedy": ["attnkit.adder.model:Seq2SeqTransformer.greedy", "attnkit.adder.model:Seq2SeqTransformer._greedy"],
    "check_ablation_hook": ["attnkit.core.hooks:gate_z", "attnkit.core.hooks:ablate_heads"],
    "check_mean_z": ["attnkit.adder.evaluate:mean_z"],
    "check_prune_order": ["attnkit.interp.studies:prune_order"],
    "check_head_importance": ["attnkit.interp.studies:gradient_importance"],
    "check_sinusoidal_table": ["attnkit.core.positional:sinusoidal_table"],
    "check_shift_matrix": ["attnkit.core.positional:sinusoidal_shift_matrix"],
    "check_rotate": ["attnkit.core.positional:rotate"],
    "check_alibi_bias": ["attnkit.core.positional:alibi_bias"],   # alibi_slopes is a helper the exercise may use
    "check_patch_hook": ["attnkit.interp.patching:head_patch_hook"],
    "check_carry_pair": ["attnkit.interp.patching:carry_pair"],
}
CHECKING_MODULES = ("attnkit.ui.checking", "attnkit.ui.check_models", "attnkit.ui.checks", "attnkit.ui.adder_checks",
                    "attnkit.ui.heatmap_checks", "attnkit.ui.ablation_checks", "attnkit.ui.positional_checks",
                    "attnkit.ui.interp_checks", __name__)


def _resolve(spec: str):
    module, name = spec.split(":")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _codes(obj, into: set) -> set:
    """Every code object of a function, a class's methods, or a module's functions and classes, nested ones too."""
    if isinstance(obj, types.ModuleType):
        for value in list(vars(obj).values()):
            if getattr(value, "__module__", None) == obj.__name__:
                _codes(value, into)
    elif isinstance(obj, type):
        for value in list(vars(obj).values()):
            _codes(getattr(value, "__func__", value), into)
    elif isinstance(obj, functools.partial):
        _codes(obj.func, into)
    elif isinstance(obj, types.CodeType):
        if obj not in into:
            into.add(obj)
            for const in obj.co_consts:
                if isinstance(const, types.CodeType):
                    _codes(const, into)
    elif hasattr(obj, "__code__"):
        _codes(obj.__code__, into)
        for cell in getattr(obj, "__closure__", None) or ():
            with contextlib.suppress(ValueError):
                if isinstance(cell.cell_contents, types.FunctionType):
                    _codes(cell.cell_contents, into)
    return into


# Taken when this module is imported, before any learner code runs.
CHECKER_CODES = set()
for _name in CHECKING_MODULES:
    _codes(importlib.import_module(_name), CHECKER_CODES)
REFERENCE_OBJECTS = {checker: [_resolve(spec) for spec in specs] for checker, specs in REFERENCES.items()}
REFERENCE_CODES = {checker: set().union(*(_codes(o, set()) for o in objs)) for checker, objs in REFERENCE_OBJECTS.items()}
LIBRARY_DIRS = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                             os.path.dirname(os.path.dirname(__file__)))})


def _is_learners(frame) -> bool:
    filename = frame.f_code.co_filename
    return not os.path.realpath(filename).startswith(LIBRARY_DIRS) if os.path.isabs(filename) else True


def _unwrapped(obj, depth: int = 0):
    """obj and what it wraps: a partial's function, a bound method's, functools.wraps' __wrapped__."""
    yield obj
    if depth > 5:
        return
    for inner in (getattr(obj, "func", None) if isinstance(obj, functools.partial) else None,
                  getattr(obj, "__func__", None), getattr(obj, "__wrapped__", None)):
        if inner is not None:
            yield from _unwrapped(inner, depth + 1)


def is_reference(checker_name: str, learner) -> str:
    """Why `learner` is the kit's reference itself (an alias, a partial, a subclass), or ""."""
    refs, codes = REFERENCE_OBJECTS.get(checker_name, []), REFERENCE_CODES.get(checker_name, set())
    for obj in _unwrapped(learner):
        if any(obj is ref for ref in refs) or getattr(obj, "__code__", None) in codes:
            return "is the kit's own"
        if isinstance(obj, type) and any(isinstance(r, type) and issubclass(obj, r) for r in refs):
            return "is a subclass of the kit's own"
    return ""


def run_checker(exercise: str, checker_name: str, checker, learner) -> tuple[str, str]:
    """(why the kit's own solution was used, or "", the checker's line)."""
    title = checker_name.removeprefix("check_")
    names = ", ".join(s.split(":")[1] for s in REFERENCES.get(checker_name, []))
    why = is_reference(checker_name, learner)
    if why:
        return f"{title}: your answer {why} {names}: the exercise is to write it yourself", ""
    codes, reached = REFERENCE_CODES.get(checker_name, set()), []

    def watch(frame, event, arg):
        if event == "call" and frame.f_code in codes and not reached:
            caller = frame.f_back
            while caller is not None and caller.f_code not in CHECKER_CODES:
                if _is_learners(caller):
                    reached.append(frame.f_code.co_name)
                    break
                caller = caller.f_back

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        sys.setprofile(watch if codes else None)
        try:
            checker(learner)
        except BaseException as e:  # SystemExit, KeyboardInterrupt from the learner's code: a failed check
            return "", f"❌ {title}: your code raised {type(e).__name__}"
        finally:
            removed = codes and sys.getprofile() is not watch
            sys.setprofile(None)
    if removed:
        return f"{title}: the submission turned off the grader's watch on the kit's own {names}", ""
    lines = printed.getvalue().strip().splitlines()
    line = lines[-1] if lines else "the checker printed nothing"
    if reached:
        return f"{title}: your code calls the kit's own {reached[0]} ({names}): the exercise is to write it yourself", line
    return "", line
