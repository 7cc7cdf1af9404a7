"""Grade submitted notebooks. Each submission runs in a fresh checking process of its own
(check_process.py), one cell at a time under a time limit; at each check cell that process calls the
kit's checker itself on the learner's definition, with integrity checks of the checking code before
and after, and sends back a structured result. The grade never comes from what a cell printed. A
notebook that crashes, loops or imports something missing is graded as far as it got, with the
reason; it never stops the others.

When a submission is a copy of a course notebook, its check cells are first restored from the
course's own (as nbgrader does with locked cells), so an edited checker cannot pass; an exercise
whose check cell was deleted is checked after the learner's last cell. Cells the course tags
`skip-when-grading` (notebook 02's training demos) and everything after the last check cell are not
run: no exercise depends on them. `preflight` checks the environment before anyone is graded.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import nbformat

from ..resources import notebooks_dir
from ..core.journal import atomic_write
from .check_process import TAMPERED
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


def checker_lines(outputs) -> list[str]:
    """The checker lines (✅/❌/⏳) among a cell's outputs (what a learner sees; the grade does not read them)."""
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stdout")
    return [line for line in text.splitlines() if line.startswith(MARKS)]


SKIP_TAG = "skip-when-grading"


def skipped_cells(course) -> dict:
    """{cell id: source} of the course's cells tagged `skip-when-grading`: demos no exercise needs
    (notebook 02's training runs). Only the course's tags count, never a submission's own."""
    if course is None:
        return {}
    return {cell.get("id"): cell.source for cell in course.cells
            if cell.cell_type == "code" and SKIP_TAG in cell.get("metadata", {}).get("tags", [])}


def _job(nb, skip: dict = {}) -> list[dict]:  # noqa: B006 (read only)
    """The code cells to run, in order; a check cell carries its exercise id (the grade comes from it).
    A cell the course tags `skip-when-grading` is left out while the learner has not changed it (a
    changed one is the learner's own code and runs)."""
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("id") in skip and cell.source == skip[cell.get("id")]:
            continue
        exercise = None
        if "check" in cell.get("metadata", {}).get("tags", []):
            exercise = (cell.metadata.get("attnkit") or {}).get("exercise") if isinstance(cell.metadata.get("attnkit"), dict) else None
            exercise = exercise if isinstance(exercise, str) else None
        cells.append({"index": index, "source": cell.source, "exercise": exercise})
    return cells


def run_checks(cells: list[dict], folder: Path, cell_timeout: float) -> tuple[dict, Optional[str], int]:
    """Run `cells` in a fresh checking process (see check_process.py): ({exercise: Row fields}, why it
    stopped early or None, index of the cell it stopped in). Every process the submission started
    goes when it ends (the checking process leads a session of its own, killed as a group)."""
    read_end, write_end = os.pipe()
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "MPLBACKEND": "Agg"}
    proc = _start([sys.executable, "-m", "attnkit.course.check_process", str(write_end)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=folder, env=env, pass_fds=(write_end,), start_new_session=True)
    if proc is None:
        os.close(write_end)
        os.close(read_end)
        raise KeyboardInterrupt
    os.close(write_end)
    results, stopped, current, buffer = {}, None, -1, b""
    try:
        proc.stdin.write(json.dumps({"cells": cells}).encode())
        proc.stdin.close()
        deadline = time.monotonic() + max(cell_timeout, 60)   # the first cell also waits for the imports
        while True:
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                stopped = f"cell {current + 1} ran over the {cell_timeout:g} s limit and was stopped"
                break
            chunk = os.read(read_end, 65536)
            if not chunk:
                stopped = f"the notebook's process died in cell {current + 1} (a crash, or out of memory)"
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            done = False
            for line in lines:
                message = json.loads(line)
                if message.get("done"):
                    done = True
                elif "exercise" in message:
                    exercise = message["exercise"]
                    # Two results for one exercise: something besides the grader wrote one.
                    results[exercise] = (None if exercise in results else message)
                elif "cell" in message:
                    current, deadline = message["cell"], time.monotonic() + cell_timeout
            if done:
                break
    finally:
        _kill_group(proc)
        os.close(read_end)
    return results, stopped, current


_LIVE, _LOCK, _STOPPING = set(), threading.Lock(), threading.Event()


def _start(*args, **kwargs):
    """A checking process, remembered so that stop_all can end it from another thread (Ctrl-C)."""
    with _LOCK:
        if _STOPPING.is_set():
            return None
        proc = subprocess.Popen(*args, **kwargs)
        _LIVE.add(proc)
        return proc


def stop_all() -> None:
    """End every checking process and whatever it started; no new one starts."""
    _STOPPING.set()
    with _LOCK:
        for proc in list(_LIVE):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def _kill_group(proc) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with _LOCK:
        _LIVE.discard(proc)


def grade_notebook(path, cell_timeout: float = 120, notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Row]:
    """One row per exercise of the notebook at `path`."""
    path = Path(path)
    name = str(path)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:
        # Every exercise the file could be for gets its row: no hole in the gradebook.
        why = f"could not read the notebook: {type(e).__name__}: {e}".splitlines()[0]
        source = course_notebook(path, nbformat.v4.new_notebook(), notebooks_dir)
        sources = [source] if source else sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb"))
        exercises = [e for s in sources for e in exercise_ids(nbformat.read(s, as_version=4))]
        return [Row(name, e, False, why) for e in exercises] or [Row(name, "(notebook)", False, why)]
    source = course_notebook(path, nb, notebooks_dir)
    course = nbformat.read(source, as_version=4) if source else None
    expected = _restore_checks(nb, course) if source else exercise_ids(nb)
    if not expected:
        return [Row(name, "(notebook)", False, "no exercises found: no cell tagged 'check'")]
    cells = _job(nb, skipped_cells(course))
    present = {c["exercise"] for c in cells}
    # A deleted check cell: the course's runs after the learner's last cell.
    cells += [{"index": len(nb.cells), "source": cell.source, "exercise": exercise}
              for exercise, cell in (check_cells(course).items() if course else ()) if exercise not in present]
    # What follows the last check cell cannot change any grade: it is not run.
    last_check = max((i for i, c in enumerate(cells) if c["exercise"]), default=len(cells) - 1)
    cells = cells[:last_check + 1]
    try:
        results, stopped, last = run_checks(cells, path.parent.resolve(), cell_timeout)
    except Exception as e:
        results, stopped, last = {}, f"the notebook could not be run: {type(e).__name__}: {e}", -1

    rows = []
    order = {c["exercise"]: c["index"] for c in cells if c["exercise"]}
    for exercise in expected:
        message = results.get(exercise, False)
        if message is None:
            rows.append(Row(name, exercise, False, f"{TAMPERED}: the result of this check was written twice"))
        elif message:
            rows.append(Row(name, exercise, bool(message["passed"]), str(message["line"])))
        elif exercise not in order:
            rows.append(Row(name, exercise, False, "the check cell for this exercise is missing from the notebook"))
        elif order[exercise] == last and stopped:
            rows.append(Row(name, exercise, False, stopped))
        else:
            rows.append(Row(name, exercise, False, f"not reached: {stopped}" if stopped else "no result"))
    return rows


class PreflightError(Exception):
    """The environment or the course cannot grade anyone fairly: nothing should be graded."""


# Run as the checking process is (same interpreter and environment): which attnkit does each
# submission folder see? `python -m` puts the folder first on sys.path, so an `attnkit` folder
# beside the submissions, or a stale install, would stand in for this kit.
_WHICH_KIT = """import sys, json, importlib, importlib.util
folders, neutral, seen = json.loads(sys.stdin.read()), sys.path[0], {}
for folder in folders:   # found, not imported: every import machinery (an editable install's too) asked
    sys.path[0] = folder
    importlib.invalidate_caches()
    seen[folder] = getattr(importlib.util.find_spec("attnkit"), "origin", None)
sys.path[0] = neutral
import attnkit
print(json.dumps({"kit": attnkit.__file__, "folders": seen}))
"""


def preflight(notebooks, cell_timeout: float = 120, notebooks_dir: Path = NOTEBOOKS_DIR, jobs: int = 1) -> None:
    """Before grading anyone: the checking process must import this attnkit (from every submission's
    folder), and the course's own solution of every notebook among `notebooks` must pass all its
    exercises (each course notebook graded once per run). PreflightError says what is wrong."""
    import attnkit
    from concurrent.futures import ThreadPoolExecutor
    ours = Path(attnkit.__file__).resolve()
    folders = list(dict.fromkeys(str(Path(n).resolve().parent) for n in notebooks))
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "MPLBACKEND": "Agg"}
    with tempfile.TemporaryDirectory() as neutral:
        done = subprocess.run([sys.executable, "-c", _WHICH_KIT], input=json.dumps(folders), capture_output=True,
                              text=True, cwd=neutral, env=env, timeout=300)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise PreflightError(f"the checking process ({sys.executable}) cannot import attnkit: {last}")
    seen = json.loads(done.stdout)
    if Path(seen["kit"]).resolve() != ours:
        raise PreflightError(f"the checking process imports attnkit from {Path(seen['kit']).parent}, not this kit "
                             f"({ours.parent}): a stale install? Reinstall the kit in this environment")
    for folder, origin in seen["folders"].items():
        if origin is None or Path(origin).resolve() != ours:
            raise PreflightError(f"a notebook in {folder} would import attnkit from {origin}, not this kit "
                                 f"({ours.parent}): remove what stands in for it there")
    sources = []
    for n in notebooks:
        with contextlib.suppress(Exception):   # an unreadable file is graded (as unreadable) later
            source = course_notebook(Path(n), nbformat.read(n, as_version=4), notebooks_dir)
            if source and source not in sources:
                sources.append(source)
    with tempfile.TemporaryDirectory() as work, ThreadPoolExecutor(max_workers=jobs) as pool:
        copies = []
        for source in sources:   # graded from a copy: nothing is written beside the course
            copies.append(Path(work) / source.name)
            copies[-1].write_bytes(source.read_bytes())
        try:
            graded = list(pool.map(lambda copy: grade_notebook(copy, cell_timeout, notebooks_dir), copies))
        except BaseException:   # Ctrl-C: end the checking processes now, not after their notebooks
            stop_all()
            raise
        for source, rows in zip(sources, graded):
            failed = [r for r in rows if not r.passed]
            if failed:
                raise PreflightError(f"the course's own solution {source.name} fails {failed[0].exercise}: "
                                     f"{failed[0].line} (the environment grades correct answers wrong)")


HEADER = ["learner_file", "exercise", "passed", "line"]


def read_csv(path) -> list[Row]:
    """The rows of a grades table this grader wrote (ValueError for any other file: it is left alone)."""
    with open(path, encoding="utf-8", newline="") as f:
        table = list(csv.reader(f))
    if not table or table[0] != HEADER:
        raise ValueError(f"{path} exists and is not a grades table written by attnkit: choose another --csv")
    return [Row(r[0], r[1], r[2] == "yes", r[3]) for r in table[1:] if len(r) == 4]


def write_csv(rows: Iterable[Row], path) -> None:
    """All rows as CSV, written atomically (a grades file is never half written)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(HEADER)
    for row in rows:
        writer.writerow([row.learner_file, row.exercise, "yes" if row.passed else "no", row.line])
    # mode 0o666 less the umask (a course group can read it), unlike mkstemp's 0o600
    atomic_write(Path(path), buffer.getvalue().encode("utf-8"))


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
