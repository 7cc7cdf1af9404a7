"""nbgrader out of the box: the course's notebooks through real nbgrader (0.9.5, in an environment of
its own: make nbgrader-check), generate_assignment then autograde, on planted submissions — honest
(the solutions), wrong, blank (the release as handed out) and cheating (the kit's own answer, an
edited check cell) — must give, exercise by exercise, the same pass/fail as `attnkit grade`.

    .venv/bin/python tests/nbgrader_check.py build/nbgrader-venv [NOTEBOOK_PREFIX ...]

Not part of `make test` (installing nbgrader and autograding take minutes). Exit status 0 when
every row agrees. nbgrader runs the checks in the student's own kernel: a submission that replaces
a checker there still fools it (attnkit grade names that as tampering; tests/test_grading.py).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from attnkit.course.editions import without_markers
from attnkit.course.grading import NOTEBOOKS_DIR, course_notebooks, exercise_of, grade_notebook

ASSIGNMENT = "ps"
WRONG = {  # one wrong answer per notebook, in its first exercise's solution cell
    "01": "def my_causal_mask(n_pos):\n    return torch.ones(n_pos, n_pos, dtype=torch.bool).triu()",
    "06": "def my_normalised_effect(patched, clean, corrupted):\n    return (patched - clean) / (clean - corrupted)",
}
KIT = {
    "01": ("01-attention", "my_attention = scaled_dot_product_attention"),
    "06": ("06-patch-hook", "my_patch_hook = P.head_patch_hook"),
}


def solution_cells(nb) -> dict:
    return {
        c.metadata["nbgrader"]["grade_id"]: c
        for c in nb.cells
        if c.get("metadata", {}).get("nbgrader", {}).get("solution")
    }


def submissions(release: Path, course: Path, prefix: str) -> dict:
    """student name -> the submitted notebook (from the release nbgrader wrote)."""
    solved = {g: without_markers(c.source) for g, c in solution_cells(nbformat.read(course, as_version=4)).items()}
    out = {}
    for student in ("honest", "wrong", "blank", "cheating"):
        nb = nbformat.read(release, as_version=4)
        cells = solution_cells(nb)
        if student in ("honest", "wrong", "cheating"):
            for grade_id, cell in cells.items():
                cell.source = solved[grade_id]
        if student == "wrong":
            first = next(iter(cells.values()))
            first.source = WRONG[prefix]
        if student == "cheating":
            grade_id, line = KIT[prefix]
            cells[grade_id].source = line
            # and a blank answer whose check cell is "fixed" to always pass
            blank_id = next(g for g in cells if g != grade_id)
            cells[blank_id].source = solution_cells(nbformat.read(release, as_version=4))[blank_id].source
            for cell in nb.cells:
                if exercise_of(cell) == blank_id:
                    cell.source = 'print("✅ passed")'
                    break
        out[student] = nb
    return out


def main() -> None:
    venv = Path(sys.argv[1]).resolve()
    prefixes = sys.argv[2:] or ["01", "06"]
    nbgrader = [str(venv / "bin" / "nbgrader")]
    root = Path(tempfile.mkdtemp(prefix="attnkit-nbgrader-"))
    try:
        # nbgrader's kernel is this environment's Python (attnkit and torch), found as "python3"
        kernels = root / "jupyter" / "kernels" / "python3"
        kernels.mkdir(parents=True)
        (kernels / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "attnkit",
                    "language": "python",
                }
            )
        )
        env = {
            **os.environ,
            "JUPYTER_PATH": str(root / "jupyter"),
            "OMP_NUM_THREADS": "1",
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        }  # its alembic
        (root / "nbgrader_config.py").write_text(
            "c = get_config()\nc.CourseDirectory.course_id = 'attnkit'\nc.Execute.timeout = 600\n"
        )
        sources = [p for p in course_notebooks(NOTEBOOKS_DIR) if p.name[:2] in prefixes]
        (root / "source" / ASSIGNMENT).mkdir(parents=True)
        for path in sources:
            shutil.copy(path, root / "source" / ASSIGNMENT / path.name)
        run = lambda *args: subprocess.run(
            nbgrader + list(args),
            cwd=root,
            env=env,
            check=True,  # noqa: E731
            capture_output=True,
            text=True,
        )
        run("generate_assignment", ASSIGNMENT, "--force")
        planted = {}
        for path in sources:
            release = root / "release" / ASSIGNMENT / path.name
            for student, nb in submissions(release, path, path.name[:2]).items():
                target = root / "submitted" / student / ASSIGNMENT / path.name
                target.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(nb, target)
                planted[(student, path.name)] = target
        for student in ("honest", "wrong", "blank", "cheating"):
            run("autograde", ASSIGNMENT, "--student", student, "--force")
        query = (
            "import json, sys\nfrom nbgrader.api import Gradebook\nout = {}\n"
            "with Gradebook('sqlite:///gradebook.db') as gb:\n"
            "    for nb in gb.find_assignment('ps').notebooks:\n"
            "        for student in ('honest', 'wrong', 'blank', 'cheating'):\n"
            "            for cell in nb.grade_cells:\n"
            "                g = gb.find_grade(cell.name, nb.name, 'ps', student)\n"
            "                out[f'{student}|{nb.name}|{cell.name}'] = g.score\n"
            "print(json.dumps(out))\n"
        )
        scores = json.loads(
            subprocess.run(
                [str(venv / "bin" / "python"), "-c", query],
                cwd=root,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        disagree, rows = [], 0
        for (student, name), path in planted.items():
            for row in grade_notebook(path):
                score = scores[f"{student}|{name[:-6]}|{row.exercise}-check"]
                rows += 1
                agree = (score == 1) == row.passed
                print(
                    f"{'ok ' if agree else 'DIFF'} {student:9s} {row.exercise:22s} nbgrader {score:g}  "
                    f"attnkit {'passed' if row.passed else 'failed'}: {row.line[:70]}"
                )
                if not agree:
                    disagree.append((student, row.exercise))
        print(f"{rows - len(disagree)} of {rows} rows agree between nbgrader 0.9.5 autograde and attnkit grade")
        sys.exit(1 if disagree else 0)
    except subprocess.CalledProcessError as e:
        print(f"nbgrader failed: {' '.join(e.cmd[:3])}\n{e.stdout[-2000:]}\n{e.stderr[-3000:]}", file=sys.stderr)
        sys.exit(1)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
