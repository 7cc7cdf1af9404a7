"""Grade submitted notebooks, one row per exercise, in a process the submission cannot reach.

For each submission the grader plans what to run: the submission's code cells in order, the
course's own check cells in place of the submission's (an edited one changes nothing, a deleted
one is checked at the end), without the cells no exercise needs (after the last check, and the
course's slow demos left unchanged). A fresh checking process (attnkit.exercises.runner) runs the
plan: it snapshots the checkers and what they rely on before the submission's first cell, calls
each checker itself on the learner's object and reports a structured result over a pipe — never a
printed line — with any tampering named. The grader keeps the time limits, kills every process
the submission started, and checks that the kit's own files are unchanged after each notebook.
A notebook that crashes, loops or cannot be read is graded as far as it got, with the reason.
"""

from __future__ import annotations

import ast
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from ..exercises.runner import cgroup_dir, not_dumpable
from ..resources import notebooks_dir as _installed_notebooks
from . import grading_server
from .grading_server import STARTUP_LIMIT

# The course the grader checks against: the notebooks installed with the kit (a clone's notebooks/,
# a wheel's attnkit/notebooks), found through attnkit.resources, never by walking up from this file.
NOTEBOOKS_DIR = _installed_notebooks()
SKIP = "skip"  # a course cell's metadata["attnkit"]["grading"]: no exercise needs it
# The checkers' hidden cases are drawn from it (checking.GRADING_SEED): `attnkit grade --grading-seed N`,
# an instructor's secret if a class must not know them; the same seed grades the same way.
GRADING_SEED = 0


@dataclass
class Row:
    learner_file: str
    exercise: str
    passed: bool
    line: str  # the checker's line, or why there is none
    mistake: str = ""  # the mistake's id ("" when passed)
    learner: str = ""  # the learner's id: their folder's name in a class folder ("" for a file named alone)


def exercise_of(cell) -> str | None:
    """The exercise id of a check cell, or None (not a check cell, or malformed metadata)."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    if not isinstance(metadata, dict) or not isinstance(metadata.get("tags"), list) or "check" not in metadata["tags"]:
        return None
    exercise = metadata.get("attnkit", {}).get("exercise") if isinstance(metadata.get("attnkit"), dict) else None
    return exercise if isinstance(exercise, str) and exercise else None


def exercise_ids(nb) -> list[str]:
    return list(dict.fromkeys(e for e in map(exercise_of, nb.get("cells", [])) if e))


def course_notebooks(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    return sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb"))


class CourseMissing(ValueError):
    """The course notebooks the grader checks against are not where the kit keeps them."""


def require_course(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The course notebooks, or CourseMissing naming where they were looked for: a grader that found
    no course would grade every learner zero."""
    found = course_notebooks(notebooks_dir)
    if not found:
        raise CourseMissing(
            f"cannot grade: no course notebooks (NN_name.ipynb) in {notebooks_dir}, where this attnkit keeps "
            "them; the install is incomplete: reinstall attnkit (pip install --force-reinstall attnkit)"
        )
    return found


def course_by_name(path: Path, notebooks_dir: Path = NOTEBOOKS_DIR) -> Path | None:
    for source in course_notebooks(notebooks_dir):
        if path.name == source.name or path.name.endswith(("_" + source.name, "-" + source.name)):
            return source
    return None


def course_notebook(path: Path, nb, notebooks_dir: Path = NOTEBOOKS_DIR) -> Path | None:
    """The course notebook a submission is a copy of: same file name, or a name ending in it, or
    else (a renamed download, "01_attention (1).ipynb") the one that shares its exercises."""
    found = course_by_name(path, notebooks_dir)
    if found:
        return found
    submitted = set(exercise_ids(nb))
    shared = [
        (len(submitted & set(exercise_ids(nbformat.read(s, as_version=4)))), s) for s in course_notebooks(notebooks_dir)
    ]
    best = max(shared, default=(0, None))
    return best[1] if best[0] else None


def _one_expression(source: str) -> bool:
    """A check cell that only calls its checker (nothing later needs it run again)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    return len(body) == 1 and isinstance(body[0], ast.Expr)


def plan(nb, course) -> tuple[list[dict], list[str]]:
    """(the items the checking process runs, in order; the exercises, in the course's order)."""
    checks = {e: c for c in course.cells if (e := exercise_of(c))}
    skippable = {
        c.source
        for c in course.cells
        if c.cell_type == "code"
        and isinstance(c.metadata.get("attnkit"), dict)
        and c.metadata["attnkit"].get("grading") == SKIP
    }
    items: list[dict] = []
    last: dict = {}
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code" or not isinstance(cell.get("source"), str):
            continue
        exercise = exercise_of(cell)
        if exercise in checks:  # the course's check cell, whatever the submission's says
            last[exercise] = len(items)
            source = checks[exercise].source
            items.append(
                {"index": index, "exercise": exercise, "source": source, "run_source": not _one_expression(source)}
            )
        elif exercise is None and cell.source not in skippable:
            items.append({"index": index, "source": cell.source})
    keep = {i for i in last.values()}  # each exercise checked once, at its last check cell
    items = [it for i, it in enumerate(items) if not it.get("exercise") or i in keep]
    end = max((i for i, it in enumerate(items) if it.get("exercise")), default=-1)
    items = items[: end + 1]  # no exercise needs what comes after the last check
    for exercise in checks:
        if exercise not in last:  # its check cell was deleted: checked at the end
            items.append(
                {"index": len(nb.cells), "exercise": exercise, "source": "", "run_source": False, "deleted": True}
            )
    return items, list(checks)


# ---------------------------------------------------------------- the checking process


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _tagged(token: str) -> list[int]:
    """Processes whose environment carries this job's token (a double-forked daemon keeps it)."""
    tag = f"ATTNKIT_GRADING_JOB={token}".encode()
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if entry.name.isdigit():
            try:
                if tag in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def kill_job(proc: subprocess.Popen, token: str) -> None:
    """The checking process and every process the submission started from it."""
    for _ in range(100):  # a process may fork while it is being killed: again until none is left
        pids = set(_descendants(proc.pid)) | set(_tagged(token)) | ({proc.pid} if proc.poll() is None else set())
        pids.discard(os.getpid())
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        time.sleep(0.05)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    group = cgroup_dir(token)
    for _ in range(20 if group is not None and group.exists() else 0):  # the job's cgroup, where it has one
        try:
            left = (group / "cgroup.procs").read_text().split()
            for pid in left:
                os.kill(int(pid), signal.SIGKILL)
            if not left:
                group.rmdir()
                break
        except OSError:
            pass
        time.sleep(0.05)


CONFINED: list[str] = []  # the limits the last learner's process took (the summary says them)
LIVE: set = set()  # (process, token) of every checking process running now (Ctrl-C kills them)


def run_plan(items: list[dict], folder: Path, cell_timeout: float) -> dict:
    """Run the plan in a fresh checking process: {"results", "errors", "stopped", "at"}."""
    # Two secrets: the job's token, in the environment of every process the job starts (to find them
    # all), and the reports' nonce, handed over on stdin only. One value for both let a submission
    # read the nonce from os.environ and forge a passing report for every exercise.
    token, nonce = secrets.token_hex(16), secrets.token_hex(16)
    not_dumpable()  # the grader's rows: no process of the same user may write into this one's memory
    stderr, ipython_dir = tempfile.TemporaryFile(), tempfile.TemporaryDirectory(prefix="attnkit-grading-")
    # no profile, history or startup file of the instructor's
    job_env = {"ATTNKIT_GRADING_JOB": token, "IPYTHONDIR": ipython_dir.name}
    read_end, write_end = os.pipe()
    proc, job_in = _start(folder, write_end, stderr, job_env)
    os.close(write_end)
    LIVE.add((proc, token))
    out: dict[str, Any] = {"results": {}, "errors": [], "stopped": None, "at": None, "done": False}
    try:
        job = {"nonce": nonce, "items": items, "grading_seed": GRADING_SEED}
        job_in.write((json.dumps(job) + "\n").encode())
        job_in.close()
        _read_reports(read_end, nonce, cell_timeout, out)
    except BrokenPipeError:
        out["stopped"] = "the checking process did not start"
    finally:
        os.close(read_end)
        kill_job(proc, token)
        LIVE.discard((proc, token))
        if isinstance(proc, grading_server.Forked):
            proc.close()
        if out["stopped"] and out["at"] is None:  # it never got going: say why
            stderr.seek(0)
            last = [line for line in stderr.read().decode("utf-8", "replace").splitlines() if line.strip()][-1:]
            out["stopped"] += f" ({last[0].strip()[:200]})" if last else ""
        stderr.close()
        ipython_dir.cleanup()
    return out


def _start(folder: Path, write_end: int, stderr, job_env: dict):
    """(the checking process, the pipe its job is written to): forked by the grading server where
    there is one (Linux), else `python -I -m attnkit.exercises.runner FD` started afresh."""
    forked = grading_server.start(folder, write_end, stderr, job_env)
    if forked is not None:
        return forked
    proc = subprocess.Popen(
        [sys.executable, "-I", "-m", "attnkit.exercises.runner", str(write_end)],
        pass_fds=(write_end,),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        cwd=folder,
        env={**grading_server.base_env(), **job_env},
        start_new_session=True,
    )
    assert proc.stdin is not None  # stdin=PIPE
    return proc, proc.stdin


def _read_reports(fd: int, nonce: str, cell_timeout: float, out: dict) -> None:
    buffer, deadline, limit = b"", time.monotonic() + STARTUP_LIMIT, "starting the checking process"
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            where = limit if out["at"] is None else f"cell {out['at'] + 1}"
            out["stopped"] = (
                f"{where} ran over the {cell_timeout:g} s limit and was stopped"
                if out["at"] is not None
                else f"the checking process took over {STARTUP_LIMIT:g} s to start"
            )
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            if not out["done"]:
                where = f"in cell {out['at'] + 1}" if out["at"] is not None else "before the first cell"
                out["stopped"] = f"the checking process died {where} (a crash, an exit, or out of memory)"
            return
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            try:
                message = json.loads(line)
                assert isinstance(message, dict) and message.get("nonce") == nonce
            except (ValueError, AssertionError):
                out["stopped"], out["at"] = (
                    "tampering: the checking process's report was forged by the submission",
                    None,
                )
                out["results"].clear()
                return
            event = message.get("event")
            if event == "ready":  # what the learner's process got, said before any of its code ran
                CONFINED[:] = [str(c) for c in message.get("confined", [])][:12]
            elif event in ("cell", "check"):
                out["at"], deadline = message["index"], time.monotonic() + cell_timeout
            elif event == "error":
                out["errors"].append((message["index"], message["error"]))
            elif event == "result":
                if message["exercise"] in out["results"]:
                    out["stopped"], out["at"] = (
                        "tampering: the checking process's report was forged by the submission",
                        None,
                    )
                    out["results"].clear()
                    return
                out["results"][message["exercise"]] = message
            elif event == "done":  # not EOF: a process the submission forked may hold the pipe open
                out["done"] = True
                return


# ---------------------------------------------------------------- grading one notebook


def grade_notebook(path, cell_timeout: float = 120, notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Row]:
    """One row per exercise of the notebook at `path` (an unreadable file: a failed row for every
    exercise it could be for; a readable notebook of no course exercise: one "(notebook)" row)."""
    path = Path(path)
    name = str(path)
    try:
        nb = nbformat.read(path, as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("it has no list of cells")
    except Exception as e:
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        why = f"could not read the notebook: {type(e).__name__}: {first}"
        # Every exercise the file could be for gets its row: no hole in the gradebook.
        source = course_by_name(path, notebooks_dir)
        sources = [source] if source else sorted(Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb"))
        expected = [e for s in sources for e in exercise_ids(nbformat.read(s, as_version=4))] or ["(notebook)"]
        return [Row(name, e, False, why, "unreadable") for e in expected]
    source = course_notebook(path, nb, notebooks_dir)
    if source is None:
        return [
            Row(
                name,
                "(notebook)",
                False,
                "not a course notebook: no check cell of any course exercise",
                "unknown-notebook",
            )
        ]
    items, expected = plan(nb, nbformat.read(source, as_version=4))
    try:
        out = run_plan(items, path.parent.resolve(), cell_timeout)
    except OSError as e:
        out = {"results": {}, "errors": [], "stopped": f"the checking process could not start: {e}", "at": None}
    return _rows(name, items, expected, out)


def _rows(name: str, items: list[dict], expected: list[str], out: dict) -> list[Row]:
    rows = {}
    for item in items:
        exercise = item.get("exercise")
        if not exercise or exercise in rows:
            continue
        result = out["results"].get(exercise)
        if result is None:
            why = out["stopped"] or "no result came back"
            at = out["at"]
            rows[exercise] = Row(
                name,
                exercise,
                False,
                why if at == item["index"] or at is None else f"not reached: {why}",
                "not-reached",
            )
            continue
        line, mistake = result["line"], result["mistake"]
        if not result["passed"] and mistake in ("not-defined", "unusable-answer", "error"):
            before = [f"cell {i + 1}, {e}" for i, e in out["errors"] if i < item["index"]]
            line += f" (the first error before it: {before[0]})" if before else ""
        if item.get("deleted"):
            line += " (its check cell was deleted from the notebook: checked at the end)"
        rows[exercise] = Row(name, exercise, bool(result["passed"]), line, mistake)
    return [rows.get(e) or Row(name, e, False, "not checked", "not-reached") for e in expected]
