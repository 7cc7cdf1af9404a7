"""What a submission must not change in the checking process, and how a change is named.

The runner takes a Snapshot after importing the checkers and before the first cell of the
submission runs; before and after each check it asks what changed. A changed entry is tampering
(the check fails with a message naming it), never a pass: the checkers and everything they rely on
(the kit's modules, their functions' code, torch and numpy's functions and the Tensor and Module
classes, builtins, sys.modules, sys.stdout, the tracer, IPython's event hooks) are compared by
identity with what they were. Plain data (a module's settings, caches) is not compared: honest
notebooks change it (torch.set_num_threads, np.set_printoptions).
"""

from __future__ import annotations

import builtins
import inspect
import os
import sys
import types
from collections.abc import Mapping

import torch  # noqa: F401 (imported first: its path tells its own wrappers from a submission's)

# Modules whose functions and classes a checker relies on (each with its submodules).
WATCHED = (
    "attnkit",
    "torch",
    "numpy",
    "math",
    "functools",
    "contextlib",
    "io",
    "inspect",
    "warnings",
    "itertools",
    "operator",
    "re",
    "copy",
    "collections",
    "dataclasses",
    "json",
    "os",
    "sys",
    "builtins",
)
# Classes whose methods (by identity) a checker relies on beyond the kit's own.
_CLASSES = (
    "torch.Tensor",
    "torch._C.TensorBase",
    "torch.nn.Module",
    "torch.nn.Linear",
    "torch.nn.Parameter",
    "torch.Generator",
)
_TORCH_DIR = (
    os.path.dirname(sys.modules["torch"].__file__ or "/nonexistent/") if "torch" in sys.modules else "/nonexistent"
)
_ROUTINE = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    type,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
    staticmethod,
    classmethod,
    property,
)


def _watched(name: str) -> bool:
    return name.split(".")[0] in WATCHED


def _routines(namespace: dict) -> dict:
    """name -> (object, its __code__ or None) for the functions, classes and modules in a namespace."""
    out = {}
    for key, value in list(namespace.items()):
        if isinstance(value, _ROUTINE) or type(value).__module__.startswith("torch") and callable(value):
            out[key] = (value, _code(value))
    return out


def _code(value):
    return value.__code__ if isinstance(value, types.FunctionType) else None


def _closure(fn) -> tuple:
    return tuple(
        id(c.cell_contents) if c.cell_contents is not None else None for c in (fn.__closure__ or ()) if _filled(c)
    )


def _reachable(path: str, value, depth: int = 3):
    """(path, function) for a function of the kit's, the functions in its closure and attributes."""
    if not isinstance(value, types.FunctionType) or not value.__module__.startswith("attnkit") or depth == 0:
        return
    yield path, value
    inner = [c.cell_contents for c in (value.__closure__ or ()) if _filled(c)] + list(vars(value).values())
    for i, item in enumerate(inner):
        yield from _reachable(f"{path}.{getattr(item, '__name__', i)}", item, depth - 1)


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (reading an empty cell raises)
        return True
    except ValueError:
        return False


class Snapshot:
    """The identities a submission must leave alone, taken before it runs.

    `base`: a snapshot taken earlier in the state this process started from (the grading server's,
    before it forked this checking process). A module's functions and classes are read from it when
    the module is the same object; only modules imported since are read here. Reading every
    module's namespace takes ~0.13 s (torch has ~1,500 modules), once per server, not per notebook."""

    def __init__(self, shell=None, base: Snapshot | None = None):
        self.modules = {name: m for name, m in list(sys.modules.items()) if _watched(name) and m is not None}
        known, read = (base.modules, base.namespaces) if base is not None else ({}, {})
        # sys holds state IPython rewrites on every error (sys.last_type ...): its streams and tracer
        # are compared below instead. builtins is always read again: the shell adds its own names
        # (display) when it starts, after the base was taken.
        self.namespaces: dict[str, dict] = {
            name: read[name] if known.get(name) is m and name != "builtins" else _routines(vars(m))
            for name, m in self.modules.items()
            if name != "sys"
        }
        self.classes = {}
        for name, module in self.modules.items():
            if name.startswith("attnkit"):
                for key, value in vars(module).items():
                    if isinstance(value, type) and value.__module__ == name:
                        self.classes[f"{name}.{key}"] = (value, _routines(dict(vars(value))))
        for path in _CLASSES:
            owner, _, attr = path.rpartition(".")
            cls = getattr(sys.modules[owner], attr)
            self.classes[path] = (cls, _routines(dict(vars(cls))))
        self.class_keys = {path: set(vars(cls)) for path, (cls, _) in self.classes.items()}
        # The checkers' own functions and everything they hold: the wrapper's closure (the check,
        # evaluate), attributes set on it, and each one's code.
        self.functions = {}
        for name, module in self.modules.items():
            if name.startswith("attnkit.exercises"):
                for key, value in vars(module).items():
                    for path, fn in _reachable(f"{name}.{key}", value):
                        self.functions[path] = (
                            fn,
                            fn.__code__,
                            fn.__defaults__,
                            fn.__kwdefaults__,
                            _closure(fn),
                            dict(vars(fn)),
                        )
        self.builtins = dict(vars(builtins))
        self.streams = (sys.stdout, sys.stderr, sys.stdin)
        self.trace = (sys.gettrace(), sys.getprofile())
        self.shell = shell
        self.events = self._events(shell)

    @staticmethod
    def _events(shell) -> dict:
        if shell is None:
            return {}
        # matplotlib.pyplot registers a hook of its own when imported: only hooks whose code the
        # submission wrote count
        return {
            event: [id(cb) for cb in callbacks if not _library_code(cb)]
            for event, callbacks in shell.events.callbacks.items()
        }

    def changes(self) -> list[str]:
        """Every change a submission made to what the checks rely on, in words (empty: none)."""
        found = []
        for key, value in self.builtins.items():
            if vars(builtins).get(key, _MISSING) is not value:
                found.append(f"builtins.{key} replaced")
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                found.append(f"sys.modules[{name!r}] replaced")
            if name in self.namespaces:
                found += _compare(name, self.namespaces[name], vars(module))
        for path, (cls, members) in self.classes.items():
            found += _compare(path, members, vars(cls))
            # a new attribute of a class shadows its bases' (torch.Tensor.__ne__ over TensorBase's)
            found += [f"{path}.{key} replaced" for key in vars(cls).keys() - self.class_keys[path]]
        for path, (fn, code, defaults, kwdefaults, closure, attrs) in self.functions.items():
            if fn.__code__ is not code:
                found.append(f"the code of checker {path} replaced (__code__)")
            elif (
                fn.__defaults__ is not defaults
                or fn.__kwdefaults__ is not kwdefaults
                or _closure(fn) != closure
                or vars(fn).keys() != attrs.keys()
                or any(vars(fn)[k] is not v for k, v in attrs.items())
            ):
                found.append(f"checker {path} changed")
        names = ("sys.stdout", "sys.stderr", "sys.stdin")
        found += [
            f"{n} replaced"
            for n, before, now in zip(names, self.streams, (sys.stdout, sys.stderr, sys.stdin))
            if before is not now
        ]
        if (sys.gettrace(), sys.getprofile()) != self.trace:
            found.append("the tracer (sys.settrace / sys.setprofile) changed")
        if self.shell is not None:
            now = self._events(self.shell)
            for event in set(now) | set(self.events):
                if set(now.get(event, [])) - set(self.events.get(event, [])):
                    found.append(f"an IPython {event} hook registered")
        return found


_MISSING = object()


def _compare(where: str, before: dict, namespace: Mapping) -> list[str]:
    out = []
    for key, (value, code) in before.items():
        now = namespace.get(key, _MISSING)
        if now is _MISSING:
            out.append(f"{where}.{key} deleted")
        elif now is not value and not _library_wrapper(now, value):
            what = "checker" if where.startswith("attnkit.exercises") and key.startswith("check_") else ""
            out.append(f"{what + ' ' if what else ''}{where}.{key} replaced")
        elif code is not None and _code(value) is not code:
            out.append(f"the code of {where}.{key} replaced (__code__)")
    return out


def _library_code(fn) -> bool:
    from .kit_reference import is_learner_code

    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return isinstance(code, types.CodeType) and not is_learner_code(code.co_filename)


def _library_wrapper(now, before) -> bool:
    """torch wraps some of its own functions when a submodule loads (torch._dynamo wraps
    torch.manual_seed): a wrapper of the same function, defined in torch, is not the submission's."""
    try:
        return (
            inspect.unwrap(now) is before
            and isinstance(now, types.FunctionType)
            and now.__code__.co_filename.startswith(_TORCH_DIR)
        )
    except Exception:
        return False


def describe(changes: list[str]) -> str | None:
    """One line for the gradebook: what the submission changed (the first few)."""
    if not changes:
        return None
    more = f" and {len(changes) - 3} more" if len(changes) > 3 else ""
    return "tampering: " + "; ".join(changes[:3]) + more + " by the submission — not graded as passed"
