"""attnkit/course/repeats.py: which student-edition cells repeat the solution edition's work (the
root conftest.py skips them under nbval when both editions run). Every cell that depends on the
learner, changes shared state, or feeds such a cell must run."""

import nbformat
import pytest

from attnkit.course.editions import student_notebook
from attnkit.course.grading import NOTEBOOKS_DIR
from attnkit.course.repeats import cells_that_repeat_the_solution

new = nbformat.v4.new_code_cell
CHECK = {"tags": ["check"]}


def skipped(solution_sources, student_sources, check=()):
    """Indices skipped for a student edition whose cells differ from the solution's where given."""
    meta = lambda i: CHECK if i in check else {}  # noqa: E731
    solution = [new(s, metadata=meta(i)) for i, s in enumerate(solution_sources)]
    student = [new(s, metadata=meta(i)) for i, s in enumerate(student_sources)]
    return sorted(cells_that_repeat_the_solution(student, solution))


STUB = "def my_f(x):\n    raise NotImplementedError"
SOLVED = "def my_f(x):\n    return x + 1"


def test_a_demo_that_reads_no_learner_name_is_skipped_and_the_stub_and_its_check_run():
    cells = ["import torch", "w = torch.ones(3)", "print(w.sum())", SOLVED, "checks.check_f(my_f, torch.float32)"]
    student = cells[:3] + [STUB, cells[4]]
    assert skipped(cells, student, check={4}) == [1, 2]


@pytest.mark.parametrize(
    "demo",
    [
        "y = my_f(2)",  # calls the learner's function
        "fs = [my_f]\nprint(fs)",  # reads it
        "def g():\n    return my_f(1)\ng()",  # through a function body
    ],
)
def test_a_cell_that_reads_a_learners_name_runs_and_so_do_the_cells_that_read_what_it_made(demo):
    cells = ["import torch", SOLVED, demo, "z = [v for v in globals()]\nprint(y if 'y' in dir() else 1)"]
    assert 2 not in skipped(cells, [cells[0], STUB, *cells[2:]])


def test_what_a_learner_dependent_cell_binds_taints_later_readers_but_a_rebound_loop_name_does_not():
    cells = ["import numpy as np", SOLVED, "e = my_f(np.pi)", "print(e)", "for e in range(3):\n    print(e)"]
    assert skipped(cells, [cells[0], STUB, *cells[2:]]) == [4]


@pytest.mark.parametrize(
    "changes",
    [
        "model.eval()",
        "torch.manual_seed(0)",
        "torch.set_num_threads(1)",
        "model.weight.data[0] = 1",
        "history.append(1)",
        "model.weight.mul_(2)",
    ],
)
def test_a_cell_that_changes_state_another_cell_made_runs(changes):
    made = "import torch\nmodel = torch.nn.Linear(2, 2)\nhistory = []"
    cells = [made, changes, SOLVED, "checks.check_f(my_f, torch.float32)"]
    student = [cells[0], changes, STUB, cells[3]]
    assert 1 not in skipped(cells, student, check={3})
    # the same call on an object the cell made itself changes nothing another cell sees
    own = "fig = object.__new__(type('F', (), {'append': lambda s, x: None}))\nfig.append(1)"
    assert 1 in skipped([cells[0], own, *cells[2:]], [cells[0], own, STUB, cells[3]], check={3})


def test_a_cell_that_binds_what_a_cell_that_must_run_reads_runs():
    cells = ["import torch", "scale = torch.tensor(2.0)", "unused = 3", SOLVED, "print(my_f(scale))"]
    assert skipped(cells, [*cells[:3], STUB, cells[4]]) == [2]


def test_nothing_is_skipped_when_a_cell_does_not_parse_or_the_cells_do_not_line_up():
    cells = ["import torch", "w = 1", SOLVED]
    assert skipped(cells, ["import torch", "w = (", STUB]) == []
    assert cells_that_repeat_the_solution([new(c) for c in cells], [new(c) for c in cells[:2]]) == {}


@pytest.mark.parametrize("path", sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.name[:2])
def test_in_the_course_every_stub_and_check_cell_runs(path):
    solution = nbformat.read(path, as_version=4)
    code = lambda nb: [c for c in nb.cells if c.cell_type == "code"]  # noqa: E731
    student = code(student_notebook(solution))
    skip = cells_that_repeat_the_solution(student, code(solution))
    for i, (cell, original) in enumerate(zip(student, code(solution), strict=True)):
        if cell.source != original.source or "check" in cell.metadata.get("tags", []) or "my_" in cell.source:
            assert i not in skip, f"{path.name} code cell {i} must run: {cell.source[:80]!r}"
    if path.name.startswith("02"):  # the point: the training demos run once, in the solution edition
        trains = [i for i, c in enumerate(student) if "train_adder(" in c.source]
        assert trains and set(trains) <= set(skip), (trains, sorted(skip))


def test_an_object_a_learner_dependent_cell_handed_the_learners_code_to_is_learner_dependent_after():
    made = "import torch\nmodel = torch.nn.Linear(2, 2)"
    cells = [made, SOLVED, "install(model, my_f)", "print(model(torch.ones(2)))", "print(torch.ones(1))"]
    assert skipped(cells, [made, STUB, *cells[2:]]) == [4]  # the model now carries the learner's code


@pytest.mark.parametrize(
    "reader, runs",
    [
        ("def g(x):\n    return (lambda my_value: my_value)(x)\nprint(g(3))", False),  # a nested lambda's argument
        (
            "def g(x):\n    def h(my_value):\n        return my_value\n    return h(x)\nprint(g(3))",
            False,
        ),  # a nested def's
        ("def g(x):\n    def my_value(y):\n        return y\n    return my_value(x)\nprint(g(3))", False),
        ("def outer():\n    def inner():\n        my_value = 1\n    return my_value\nprint(outer())", True),
        ("def f():\n    ys = [my_value for my_value in range(3)]\n    return my_value\nprint(f())", True),
        ("class A:\n    my_value = 1\n    def m(self):\n        return my_value\nprint(A().m())", True),
        ("def f(x=my_value):\n    return x\nprint(f())", True),  # a default is read where f is defined
    ],
    ids=[
        "nested-lambda-argument",
        "nested-def-argument",
        "nested-def-name",
        "nested-store",
        "comprehension-variable",
        "class-body",
        "default",
    ],
)
def test_a_function_reads_what_python_says_it_reads(reader, runs):
    """Each function, lambda, class body and comprehension is its own scope: a name one of them binds
    for itself hides nothing from the code around it (the learner-dependent `my_value` is read when
    Python would read it, and only then)."""
    cells = [SOLVED, "my_value = my_f(1)", reader]
    assert skipped(cells, [STUB, *cells[1:]]) == ([] if runs else [2])
