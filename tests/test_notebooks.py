"""The notebook convention, so that nbval checks what we think it checks.

nbval compares only cells that have stored outputs, never compares PNGs, and does compare
SVG and widget text reprs. So every notebook is committed WITHOUT outputs and run with
--nbval-lax (every cell must run; none is compared), and states its key numbers in visible
`assert` cells. Long training sits behind a flag that is False when committed.
"""

import ast
import re
from pathlib import Path

import nbformat
import pytest

from attnkit.exercises import registry

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LONG_TRAINING_ON = re.compile(r"^\s*(RETRAIN|FULL_TRAINING|LONG_TRAINING|TRAIN_FROM_SCRATCH)\s*=\s*True\b", re.M)


def read(path):
    return nbformat.read(path, as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def cell_trees(nb):
    """Each code cell's syntax tree, its IPython magics (%matplotlib inline) left out."""
    return [ast.parse(re.sub(r"^\s*%.*$", "", c.source, flags=re.M)) for c in code_cells(nb)]


def renamed_kit_imports(nb) -> list[str]:
    """`from attnkit... import x as y` and `import attnkit... as y`, but a notebook's checkers
    (`from attnkit.exercises import positional as positional_checks`): README, "How the notebooks
    import the kit"."""
    found = []
    for tree in cell_trees(nb):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attnkit"):
                for alias in node.names:
                    checkers = alias.asname and alias.asname.endswith("_checks")
                    if checkers and node.module == "attnkit.exercises":
                        if alias.name.startswith(alias.asname.removesuffix("_checks")):
                            continue
                    if alias.asname:
                        found.append(f"from {node.module} import {alias.name} as {alias.asname}")
            elif isinstance(node, ast.Import):
                found += [
                    f"import {a.name} as {a.asname}" for a in node.names if a.asname and a.name.startswith("attnkit")
                ]
    return found


def kit_function_names() -> set[str]:
    """The public functions and classes the package defines at module level, but the checkers' and
    the grader's (exercises/, course/: never used in a notebook by their function names)."""
    names = set()
    for path in (ROOT / "attnkit").rglob("*.py"):
        if path.parent.name in ("exercises", "course"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                names.add(node.name)
    return names


def kit_names_redefined(nb) -> list[str]:
    """Functions and classes a notebook defines under the name of one of the kit's: a copy of kit code
    (notebook 01 once drew with its own `heatmap`), or a second meaning for one name."""
    kit = kit_function_names()
    defined = {n.name for tree in cell_trees(nb) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return sorted(defined & kit)


def test_there_are_notebooks():
    assert (ROOT / "notebooks" / "01_attention_from_scratch.ipynb") in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_named_and_valid(path):
    assert re.fullmatch(r"0[1-7]_[a-z0-9_]+\.ipynb", path.name), "notebooks are named NN_topic.ipynb, 01-07"
    nb = read(path)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path):
    dirty = [
        i
        for i, c in enumerate(read(path).cells)
        if c.cell_type == "code" and (c.outputs or c.execution_count is not None)
    ]
    assert not dirty, f"cells {dirty} have outputs: clear them (Edit > Clear Outputs of All Cells) before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_checks_itself_with_visible_asserts(path):
    visible = [c for c in code_cells(read(path)) if not c.metadata.get("jupyter", {}).get("source_hidden")]
    assert any(re.search(r"^\s*assert\b", c.source, re.M) for c in visible), "no visible assert cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_long_training_is_off(path):
    flags = [c.source for c in code_cells(read(path)) if LONG_TRAINING_ON.search(c.source)]
    assert not flags, f"long training is switched on: {flags}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_imports_the_kit_under_its_own_names(path):
    assert not renamed_kit_imports(read(path)), (
        "import the kit's names unrenamed (README: How the notebooks import the kit)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_defines_no_function_of_the_kit_again(path):
    assert not kit_names_redefined(read(path)), "use the kit's own (import it), or give yours a name of its own"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_asks_nbval_to_compare_outputs(path):
    # With no stored outputs, a compared cell could only fail (or, with outputs, flake on numbers).
    marked = [
        c.source.splitlines()[0]
        for c in code_cells(read(path))
        if "NBVAL_CHECK_OUTPUT" in c.source or "nbval-check-output" in c.metadata.get("tags", [])
    ]
    assert not marked


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_has_a_mark_a_hint_a_marked_solution_and_a_check(path):
    """An exercise: a ⭐ heading with a collapsible hint, then a solution cell nbgrader can read
    (its metadata, BEGIN/END SOLUTION markers), then check cells with one checker call each."""
    cells = read(path).cells
    heading = re.compile(r"^#+ .*Exercise.*$", re.M)
    starts = [i for i, c in enumerate(cells) if c.cell_type == "markdown" and heading.search(c.source)]
    assert len(starts) >= 3, "at least three exercises per notebook"
    grade_ids, exercises = [], []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(cells)
        title = heading.search(cells[start].source).group()
        assert "⭐" in title, f"{title!r}: no difficulty mark"
        assert re.search(r"<details>\s*<summary>\s*Hint", cells[start].source), f"{title!r}: no collapsible hint"
        solution = next(c for c in cells[start + 1 : end] if c.cell_type == "code")
        meta = solution.metadata.get("nbgrader", {})
        assert meta.get("solution") is True and meta.get("grade") is False and meta.get("grade_id"), (
            f"{title!r}: its first code cell is not an nbgrader solution cell"
        )
        assert "### BEGIN SOLUTION" in solution.source and "### END SOLUTION" in solution.source, title
        grade_ids.append(meta["grade_id"])
        checks = [c for c in cells[start:end] if "check" in c.metadata.get("tags", [])]
        assert checks, f"{title!r}: no check cell"
        for check in checks:
            calls = re.findall(r"\bcheck_\w+\b", check.source)
            assert len(calls) == 1, f"{title!r}: a check cell makes one checker call, not {calls}"
            exercises.append(check.metadata["attnkit"]["exercise"])
            # nbgrader: an autograder test worth a point that a student cannot change
            assert {k: check.metadata["nbgrader"][k] for k in ("grade", "locked", "points", "solution")} == {
                "grade": True,
                "locked": True,
                "points": 1,
                "solution": False,
            }, title
            assert check.metadata["nbgrader"]["grade_id"] == exercises[-1] + "-check"
            # a check cell never shows an answer: no kit reference, no formula, only the checker
            exercise = registry()[exercises[-1]]
            names = [r.rsplit(".", 1)[-1].split(":")[-1] for r in exercise.references]
            assert not any(re.search(rf"\b{n}\b", check.source) for n in names) and "lambda" not in check.source, (
                check.source
            )
    assert len(set(grade_ids)) == len(grade_ids) and len(set(exercises)) == len(exercises)
    marked = [c for c in cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    assert len(marked) == len(starts), "every solution region belongs to an exercise"
    # nbgrader takes any line containing a marker, in any cell, as one, and refuses a notebook with
    # one outside a solution cell: prose must not quote them.
    stray = [
        i
        for i, c in enumerate(cells)
        if not c.metadata.get("nbgrader", {}).get("solution")
        and ("BEGIN SOLUTION" in c.source or "END SOLUTION" in c.source)
    ]
    assert not stray, f"cells {stray} mention a solution marker outside a solution cell"


def test_the_test_command_runs_every_notebook():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert re.search(r"-m attnkit student build/student", recipe)  # the student edition, then
    assert re.search(r"pytest .*--dist loadfile .*--nbval-lax tests notebooks build/student", recipe)
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme_top = (ROOT / "README.md").read_text()[:600]
    assert "make lab" in readme_top and "make test" in readme_top


def test_every_checker_test_runs_under_each_cpu_kernel_set():
    """Checker tests compare floats the kernels round differently: `make test-cpus` (and .ci/run's
    `default`/`avx2` pass) must list every one of them in FLOAT_UNIT_TESTS."""
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^FLOAT_UNIT_TESTS := ((?:.*\\\n)*.*)$", makefile, re.M).group(1)
    listed_files = set(re.findall(r"tests/(test_\w+\.py)", listed))
    checker_tests = {p.name for p in (ROOT / "tests").glob("test_*checks*.py")} | {"test_every_checker.py"}
    assert checker_tests <= listed_files, sorted(checker_tests - listed_files)
    assert all((ROOT / "tests" / name).exists() for name in listed_files), sorted(listed_files)
