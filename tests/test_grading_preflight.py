"""Before grading anyone, `grade` checks that the checking process imports this kit and that the
course's own solutions pass; a broken environment stops with one error instead of grading a class
zero. Grading skips the cells the course tags `skip-when-grading` (its training demos), never a
cell a learner tagged."""
from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from attnkit.course.grading import PreflightError, preflight

cell = nbformat.v4.new_code_cell


def course(answer):
    """A one-exercise course notebook whose solution is `answer`."""
    return nbformat.v4.new_notebook(cells=[
        cell("import torch\nfrom attnkit.ui import checks"), cell(answer),
        cell("checks.check_causal_mask(my_causal_mask);", metadata={"tags": ["check"], "attnkit": {"exercise": "mask"}})])


RIGHT = "def my_causal_mask(n_pos):\n    return torch.ones(n_pos, n_pos, dtype=torch.bool).tril()"
WRONG = RIGHT.replace("tril", "triu")


@pytest.mark.slow
def test_an_attnkit_standing_in_for_the_kit_stops_grading_before_anything_is_written(tmp_path):
    folder = tmp_path / "alice"
    (folder / "attnkit").mkdir(parents=True)
    (folder / "attnkit" / "__init__.py").write_text("raise ImportError('stale')\n")
    nbformat.write(course(RIGHT), folder / "mask.ipynb")
    out = tmp_path / "grades.csv"
    done = subprocess.run([sys.executable, "-m", "attnkit", "grade", str(folder / "mask.ipynb"), "--csv", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "pre-flight failed, nobody was graded" in done.stderr and str(folder) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


@pytest.mark.slow
def test_a_course_solution_that_fails_stops_grading(tmp_path):
    course_dir, submitted = tmp_path / "course", tmp_path / "in"
    course_dir.mkdir(), submitted.mkdir()
    nbformat.write(course(WRONG), course_dir / "01_mask.ipynb")
    nbformat.write(course(RIGHT), submitted / "01_mask.ipynb")
    with pytest.raises(PreflightError, match="the course's own solution 01_mask.ipynb fails mask: ❌ causal_mask"):
        preflight([submitted / "01_mask.ipynb"], 60, course_dir)
    nbformat.write(course(RIGHT), course_dir / "01_mask.ipynb")
    preflight([submitted / "01_mask.ipynb"], 60, course_dir)   # passes: no error


DIE = "import os\nos._exit(1)  # a training demo, as far as this test is concerned"


def course_with_demo():
    nb = course(RIGHT)
    nb.cells.insert(1, cell(DIE, metadata={"tags": ["skip-when-grading"]}, id="demo"))
    nb.cells.append(cell("while True:\n    pass"))  # after the last check: no grade depends on it
    return nb


@pytest.mark.slow
def test_cells_the_course_tags_are_skipped_but_not_cells_a_learner_tags(tmp_path):
    from attnkit.course.grading import grade_notebook
    course_dir, submitted = tmp_path / "course", tmp_path / "in"
    course_dir.mkdir(), submitted.mkdir()
    nbformat.write(course_with_demo(), course_dir / "01_mask.ipynb")

    def grade(nb):
        nbformat.write(nb, submitted / "01_mask.ipynb")
        [row] = grade_notebook(submitted / "01_mask.ipynb", 20, course_dir)
        return row

    import time
    start = time.monotonic()
    row = grade(course_with_demo())    # the course's tagged demo and the endless cell after the last check: skipped
    assert row.passed and time.monotonic() - start < 20, row   # 20: the endless cell would run out the limit
    own = course_with_demo()           # a learner's own tag on a cell the course does not tag: it runs
    own.cells.insert(2, cell(DIE, metadata={"tags": ["skip-when-grading"]}, id="mine"))
    row = grade(own)
    assert not row.passed and "process died" in row.line, row
    changed = course_with_demo()       # the course's cell id with the learner's own code: it runs
    changed.cells[1].source = DIE + "\n"
    row = grade(changed)
    assert not row.passed and "process died" in row.line, row
