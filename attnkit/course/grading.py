"""Grade submitted notebooks: run each in a fresh kernel, one cell at a time under a time limit,
and read every check cell's one line. A notebook that crashes, loops or imports something
missing is graded as far as it got, with the reason; it never stops the others.

When a submission is a copy of a course notebook, its check cells are first restored
from the course's own (as nbgrader does with locked cells), so an edited checker cannot pass,
and an exercise whose check cell was deleted still gets its row.
"""
from __future__ import annotations

import csv
import io
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import nbformat

from ..resources import notebooks_dir
from .editions import check_cells, exercise_ids

NOTEBOOKS_DIR = notebooks_dir()
MARKS = ("✅", "❌", "⏳")


@dataclass
class Row:
    learner_file: str
    exercise: str
    passed: bool
    line: str                   # the checker's line, or why there is none


def course_notebook(path: Path, nb, notebooks_dir: Path = NOTEBOOKS_DIR) -> Optional[Path]:
    """The course notebook a submission is a copy of: same file name, or a name ending in it, or
    else (a renamed download, "01_attention (1).ipynb") the one that shares its exercises."""
    sources = sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb"))
    for source in sources:
        if path.name == source.name or path.name.endswith(("_" + source.name, "-" + source.name)):
            return source
    submitted = set(exercise_ids(nb))
    shared = [(len(submitted & set(exercise_ids(nbformat.read(s, as_version=4)))), s) for s in sources]
    best = max(shared, default=(0, None))
    return best[1] if best[0] else None


def _restore_checks(nb, source) -> list[str]:
    """Put the course's check cells back into `nb`; the exercises expected, in the course's order."""
    ours = check_cells(source)
    for exercise, cell in check_cells(nb).items():
        if exercise in ours:
            cell.source = ours[exercise].source
    return list(ours)


def _kernel_manager():
    """A kernel running this very Python (like nbval's --nbval-current-env), never some other
    'python3' kernel found on the machine."""
    import ipykernel.kernelspec
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class CurrentEnv(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return self.kernel_spec_class(resource_dir=ipykernel.kernelspec.RESOURCES,
                                          **ipykernel.kernelspec.get_kernel_dict())

    # async: nbclient can then stop waiting on a cell that loops (a blocking client waits forever)
    return AsyncKernelManager(kernel_name="attnkit-current-env", kernel_spec_manager=CurrentEnv())


def _error_of(cell) -> Optional[str]:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"{output.get('ename')}: {(output.get('evalue') or '').splitlines()[0] if output.get('evalue') else ''}"
    return None


def checker_lines(outputs) -> list[str]:
    """The checker lines (✅/❌/⏳) among a cell's outputs."""
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stdout")
    return [line for line in text.splitlines() if line.startswith(MARKS)]


def run_notebook(nb, folder: Path, cell_timeout: float) -> tuple[Optional[str], int]:
    """Execute `nb` in place, cell by cell: (why it stopped early or None, index of the last cell run)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    client = NotebookClient(nb, km=_kernel_manager(), timeout=cell_timeout, allow_errors=True,
                            interrupt_on_timeout=False, resources={"metadata": {"path": str(folder)}})
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    # The kernel process's own log (not the cells' output) would interleave with the progress bar.
    with client.setup_kernel(env=env, stderr=subprocess.DEVNULL):
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            try:
                client.execute_cell(cell, index)
            except CellTimeoutError:
                return f"cell {index + 1} ran over the {cell_timeout:g} s limit and was stopped", index
            except DeadKernelError:
                return f"the kernel died in cell {index + 1} (a crash, or out of memory)", index
    return None, len(nb.cells)


def grade_notebook(path, cell_timeout: float = 120, notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Row]:
    """One row per exercise of the notebook at `path`."""
    path = Path(path)
    name = str(path)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:
        return [Row(name, "(notebook)", False, f"could not read the notebook: {type(e).__name__}: {e}")]
    source = course_notebook(path, nb, notebooks_dir)
    expected = _restore_checks(nb, nbformat.read(source, as_version=4)) if source else exercise_ids(nb)
    if not expected:
        return [Row(name, "(notebook)", False, "no exercises found: no cell tagged 'check'")]
    try:
        stopped, last = run_notebook(nb, path.parent.resolve(), cell_timeout)
    except Exception as e:  # the kernel could not even start
        stopped, last = f"the notebook could not be run: {type(e).__name__}: {e}", -1

    rows, first_error = {}, None
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        error = _error_of(cell)
        tags = cell.get("metadata", {}).get("tags", [])
        if "check" in tags:
            exercise = cell.metadata["attnkit"]["exercise"]
            line = (checker_lines(cell.get("outputs", [])) or [None])[-1]
            if index > last:
                rows[exercise] = Row(name, exercise, False, f"not reached: {stopped}")
            elif index == last and stopped:
                rows[exercise] = Row(name, exercise, False, stopped)
            elif line is not None:
                rows[exercise] = Row(name, exercise, line.startswith("✅"), line)
            else:
                why = f"the check cell raised {error}" if error else "the check cell printed no checker line"
                if first_error:
                    why += f" (the first error before it: {first_error})"
                rows[exercise] = Row(name, exercise, False, why)
        if error and first_error is None:
            first_error = f"cell {index + 1}, {error}"
    return [rows.get(e) or Row(name, e, False, "the check cell for this exercise is missing from the notebook")
            for e in expected]


def write_csv(rows: Iterable[Row], path) -> None:
    """All rows as CSV, written atomically (a grades file is never half written)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["learner_file", "exercise", "passed", "line"])
    for row in rows:
        writer.writerow([row.learner_file, row.exercise, "yes" if row.passed else "no", row.line])
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(buffer.getvalue())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def summary(rows: list[Row]) -> str:
    """A readable summary: per file, the score and each exercise that did not pass, with its line."""
    out, files = [], {}
    for row in rows:
        files.setdefault(row.learner_file, []).append(row)
    for name, file_rows in files.items():
        passed = sum(r.passed for r in file_rows)
        out.append(f"{name}: {passed}/{len(file_rows)} exercises passed")
        out += [f"    {'✓' if r.passed else '✗'} {r.exercise}: {r.line}" for r in file_rows if not r.passed]
    total = sum(r.passed for r in rows)
    out.append(f"total: {total}/{len(rows)} exercises passed in {len(files)} notebook(s)")
    return "\n".join(out)
