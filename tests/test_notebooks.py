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

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
LONG_TRAINING_ON = re.compile(r"^\s*(RETRAIN|FULL_TRAINING|LONG_TRAINING|TRAIN_FROM_SCRATCH)\s*=\s*True\b", re.M)
SOLUTION = re.compile(r"<details>\s*<summary>\s*Solution\s*</summary>.*?```python\n(.*?)```.*?</details>", re.S)


def read(path):
    return nbformat.read(path, as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_there_are_notebooks():
    assert (ROOT / "notebooks" / "01_attention_from_scratch.ipynb") in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_named_and_valid(path):
    assert re.fullmatch(r"0[1-6]_[a-z0-9_]+\.ipynb", path.name), "notebooks are named NN_topic.ipynb, 01-06"
    nb = read(path)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path):
    dirty = [i for i, c in enumerate(read(path).cells)
             if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
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
def test_no_cell_asks_nbval_to_compare_outputs(path):
    # With no stored outputs, a compared cell could only fail (or, with outputs, flake on numbers).
    marked = [c.source.splitlines()[0] for c in code_cells(read(path))
              if "NBVAL_CHECK_OUTPUT" in c.source or "nbval-check-output" in c.metadata.get("tags", [])]
    assert not marked


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_has_a_difficulty_mark_and_a_solution(path):
    cells = read(path).cells
    starts = [i for i, c in enumerate(cells) if c.cell_type == "markdown"
              and re.match(r"#+ .*Exercise", c.source)]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(cells)
        title = cells[start].source.splitlines()[0]
        assert "⭐" in title, f"{title!r}: no difficulty mark"
        assert any(c.cell_type == "markdown" and SOLUTION.search(c.source) for c in cells[start:end]), \
            f"{title!r}: no collapsible solution"


def test_the_test_command_runs_every_notebook():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert re.search(r"pytest .*--dist loadfile .*--nbval-lax tests notebooks", recipe)
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme_top = (ROOT / "README.md").read_text()[:600]
    assert "make lab" in readme_top and "make test" in readme_top


def test_notebook_01_solutions_pass_their_checkers(capsys):
    """The collapsible solutions, run in order, pass every checker cell of notebook 01."""
    nb = read(ROOT / "notebooks" / "01_attention_from_scratch.ipynb")
    namespace = {}
    exec("import math, torch\nfrom torch import nn\nimport torch.nn.functional as F\nfrom attnkit.ui import checks",
         namespace)
    solutions = [m.group(1) for c in nb.cells if c.cell_type == "markdown" for m in SOLUTION.finditer(c.source)]
    assert len(solutions) == 4
    for solution in solutions:
        exec(solution, namespace)

    calls = [node for c in code_cells(nb) for node in ast.walk(ast.parse(c.source))
             if isinstance(node, ast.Call) and ast.unparse(node.func).startswith("checks.check_")]
    assert len(calls) == 5
    for call in calls:
        assert eval(compile(ast.Expression(call), "<checker>", "eval"), namespace), ast.unparse(call)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 5 and all(line.startswith("✅") for line in printed), printed


def test_notebook_06_solutions_pass_their_checkers(capsys):
    """Notebook 06's collapsible solutions, run in order, pass its three checkers."""
    nb = read(ROOT / "notebooks" / "06_how_the_adder_carries.ipynb")
    namespace = {}
    exec("import numpy as np, torch\nfrom attnkit.adder.data import carry_stats\n"
         "from attnkit.ui import interp_checks as checks", namespace)
    solutions = [m.group(1) for c in nb.cells if c.cell_type == "markdown" for m in SOLUTION.finditer(c.source)]
    assert len(solutions) == 3
    for solution in solutions:
        exec(solution, namespace)
    assert namespace["checks"].check_normalised_effect(namespace["my_normalised_effect"])
    assert namespace["checks"].check_patch_hook(namespace["my_patch_hook"])
    assert namespace["checks"].check_carry_pair(namespace["my_carry_pair"])
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 3 and all(line.startswith("✅") for line in printed), printed
