"""The process that grades one submission: `python -m attnkit.course.check_process FD` reads a job
(the notebook's code cells, its check cells already replaced by the course's) from stdin, runs the
learner's cells in order in a fresh IPython shell, and at each check cell calls the kit's checker
itself on the learner's definition. Results go to file descriptor FD as JSON lines; the cells'
own output goes nowhere. The grade is what the checker returns here, never what a cell prints.

Learner code shares this process with the checker, so before any of it runs this process imports
every attnkit module and takes a snapshot of what a checker depends on: every attnkit module's
names, every kit function's code, defaults and closure, and the names in builtins, sys, torch,
torch.Tensor, nn.Module, numpy and math. Before and after each check the snapshot is compared;
anything replaced fails the check as "checker replaced by the submission". While the learner's
code runs inside a check, a profiler watches for the kit's own solution of that exercise being
called from the learner's code (see `references.py`).
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import io
import json
import os
import pkgutil
import sys
import types

WATCHED = ("builtins", "sys", "os", "io", "contextlib", "functools", "math", "json", "numpy", "torch",
           "torch.nn", "torch.nn.functional", "torch.testing")
CHECKER_MODULES = ("checks", "adder_checks", "heatmap_checks", "ablation_checks", "positional_checks",
                   "interp_checks")
# Names that change on their own: the last exception, the shell's `_`.
VOLATILE = ("sys.last_type", "sys.last_value", "sys.last_traceback", "sys.last_exc", "builtins._")
WRAPPED_BY_TORCH = ("torch.manual_seed",)
TAMPERED = "checker replaced by the submission"


def import_kit() -> list[types.ModuleType]:
    """Every attnkit module, imported now: one the learner imports later is not new to the snapshot."""
    import attnkit
    for info in pkgutil.walk_packages(attnkit.__path__, "attnkit."):
        if info.name.split(".")[-1] in ("__main__",) or ".check_process" in info.name:
            continue
        importlib.import_module(info.name)
    return [m for name, m in sys.modules.items() if name == "attnkit" or name.startswith("attnkit.")]


def find_checker(name: str):
    """The kit's checker function called `name` (check_causal_mask, ...), or None."""
    if not name.startswith("check_"):
        return None
    for module in CHECKER_MODULES:
        found = getattr(importlib.import_module(f"attnkit.ui.{module}"), name, None)
        if callable(found):
            return found
    return None


def _function_parts(fn, depth: int = 0) -> tuple:
    """What makes `fn` what it is; a decorated checker's inner function (in its closure) too."""
    closure = tuple(cell.cell_contents if _cell_full(cell) else None for cell in fn.__closure__ or ())
    if depth == 0:
        closure += tuple(_function_parts(c, 1) for c in closure if isinstance(c, types.FunctionType))
    return (fn.__code__, fn.__defaults__, tuple((fn.__kwdefaults__ or {}).items()), closure, fn.__globals__)


def _cell_full(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def snapshot() -> dict:
    """{where: object} for everything a checker relies on; compared by identity, not equality."""
    import numpy
    import torch
    state = {}
    names = [n for n in sys.modules if n == "attnkit" or n.startswith("attnkit.") or n in WATCHED]
    for name in names:
        module = sys.modules[name]
        state[f"sys.modules[{name!r}]"] = module
        kit = name.startswith("attnkit")
        for key, value in list(vars(module).items()):
            state[f"{name}.{key}"] = value
            if kit and isinstance(value, types.FunctionType) and value.__module__.startswith("attnkit"):
                state[f"{name}.{key} (its code)"] = _function_parts(value)
            if kit and isinstance(value, type) and value.__module__.startswith("attnkit"):
                for attr, member in list(vars(value).items()):
                    state[f"{name}.{key}.{attr}"] = member
                    if isinstance(member, types.FunctionType):
                        state[f"{name}.{key}.{attr} (its code)"] = _function_parts(member)
    for cls, where in ((torch.Tensor, "torch.Tensor"), (torch.nn.Module, "torch.nn.Module"),
                       (torch._C.TensorBase, "torch._C.TensorBase"), (numpy.ndarray, "numpy.ndarray")):
        for attr, member in list(vars(cls).items()):
            state[f"{where}.{attr}"] = member
    for volatile in VOLATILE:
        state.pop(volatile, None)
    return state


def changes(before: dict, after: dict) -> list[str]:
    """What was replaced or removed since `before` (new names are fine: lazy imports add some)."""
    changed = []
    for key, value in before.items():
        now = after.get(key, _MISSING)
        if key in WRAPPED_BY_TORCH and getattr(now, "__wrapped__", None) is value:
            continue  # torch._dynamo, imported by the first torch.compile-aware call, wraps these
        if isinstance(value, tuple) and isinstance(now, tuple):
            same = len(value) == len(now) and all(_same(a, b) for a, b in zip(value, now))
        else:
            same = now is value
        if not same:
            changed.append(key)
    return changed


def _same(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a is b


_MISSING = object()


def check_call(source: str) -> tuple[str, str]:
    """(checker name, argument name) of a check cell's `module.check_x(name)` call."""
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("check_")
                and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and not node.keywords):
            return node.func.attr, node.args[0].id
    raise ValueError("the check cell calls no attnkit checker")


def with_result(source: str, checker: str, result: bool) -> str:
    """The check cell with its checker call replaced by the result already found (the notebook's later
    cells may use it, e.g. `hook_ok = checks.check_patch_hook(...)`)."""
    class Replace(ast.NodeTransformer):
        def visit_Call(self, node):
            if isinstance(node.func, ast.Attribute) and node.func.attr == checker:
                return ast.copy_location(ast.Constant(result), node)
            return self.generic_visit(node)
    return ast.unparse(Replace().visit(ast.parse(source)))


def _shell():
    """An IPython shell without a front end: magics run (`%matplotlib inline` needs no GUI loop)."""
    from IPython.core.interactiveshell import InteractiveShell

    class Headless(InteractiveShell):
        def enable_gui(self, gui=None):
            pass
    return Headless.instance()


class Grader:
    def __init__(self, out):
        self.out = out
        self.kit = import_kit()
        self.shell = _shell()
        self.namespace = self.shell.user_ns
        from . import references
        self.references = references
        self.trusted_print = print
        self.before = snapshot()
        self.first_error = None

    def send(self, **message) -> None:
        os.write(self.out, (json.dumps(message) + "\n").encode())

    def run_cell(self, index: int, source: str) -> None:
        self.send(cell=index)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            result = self.shell.run_cell(source, store_history=False)
        error = result.error_before_exec or result.error_in_exec
        if error is not None and self.first_error is None:
            first = (str(error).strip().splitlines() or [""])[0]
            self.first_error = f"cell {index + 1}, {type(error).__name__}: {first}"

    def check(self, index: int, exercise: str, source: str) -> None:
        self.send(cell=index, checking=exercise)
        try:
            checker_name, arg = check_call(source)
        except (SyntaxError, ValueError) as e:
            return self.result(exercise, False, f"the check cell is not a check: {e}")
        checker = find_checker(checker_name)
        if checker is None:
            return self.result(exercise, False, f"the check cell calls {checker_name}, which is no attnkit checker")
        tampered = changes(self.before, snapshot())
        if tampered:
            return self.result(exercise, False, f"{TAMPERED}: {', '.join(tampered[:3])} changed before the check")
        if arg not in self.namespace:
            why = f"the check cell raised NameError: name '{arg}' is not defined"
            return self.result(exercise, False, why + (f" (the first error before it: {self.first_error})"
                                                       if self.first_error else ""))
        learner = self.namespace[arg]
        reached, line = self.references.run_checker(exercise, checker_name, checker, learner)
        tampered = changes(self.before, snapshot())
        if tampered:
            return self.result(exercise, False, f"{TAMPERED}: {', '.join(tampered[:3])} changed during the check")
        passed = line.startswith("✅") and not reached
        if reached:
            self.result(exercise, False, f"❌ {reached}", mistake="kit-reference")
        else:
            self.result(exercise, passed, line)
        # The rest of the cell (what the notebook keeps of the result) runs as the learner's own code.
        self.run_cell(index, with_result(source, checker_name, passed))

    def result(self, exercise: str, passed: bool, line: str, mistake: str = "") -> None:
        self.send(exercise=exercise, passed=passed, line=line, mistake=mistake)


def main() -> None:
    out = int(sys.argv[1])
    job = json.loads(sys.stdin.read())
    sys.stdin.close()
    grader = Grader(out)
    for cell in job["cells"]:
        if cell.get("exercise"):
            grader.check(cell["index"], cell["exercise"], cell["source"])
        else:
            grader.run_cell(cell["index"], cell["source"])
    grader.send(done=True)


if __name__ == "__main__":
    main()
