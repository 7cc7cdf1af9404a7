"""A class's grades: several notebooks graded at once, each notebook's rows kept in the CSV as soon
as they are known (a re-run resumes), the kit checked before anyone is graded (pre-flight) and after
each notebook (a submission that rewrote the kit's files stops the class), and a summary that
prints on any terminal.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path

from ..resources import package_folder
from . import grading
from .grading import NOTEBOOKS_DIR, Row, grade_notebook

MISSING = "not-handed-in"  # the mistake id of a row for a notebook a learner did not return (classes.py)

COLUMNS = ["learner_file", "exercise", "passed", "line", "mistake", "learner"]
KIT_DIR = Path(grading.__file__).resolve().parents[1]  # the installed package, attnkit/
MIN_CELL_TIMEOUT = 10.0  # s: below it an honest notebook's slowest cell fails on a loaded machine


class GradingStopped(RuntimeError):
    """Grading cannot go on (the kit's own files changed, or the pre-flight failed)."""


def check_cell_timeout(value: float) -> float:
    if not (value == value and value not in (float("inf"), float("-inf"))):
        raise ValueError(f"--cell-timeout must be a finite number of seconds, got {value}")
    if value < MIN_CELL_TIMEOUT:
        raise ValueError(
            f"--cell-timeout must be at least {MIN_CELL_TIMEOUT:g} s (an honest notebook's cells "
            f"need several seconds on a loaded machine), got {value:g}"
        )
    return value


def kit_hash(notebooks_dir: Path = NOTEBOOKS_DIR) -> str:
    """A hash of what grading reads (a submission must not change it): the kit's code, the data its
    checkers read and the course notebooks the check cells come from, wherever the kit is installed."""
    digest = hashlib.sha256()
    data, notebooks = package_folder("data"), Path(notebooks_dir)
    folders = [
        ("attnkit", KIT_DIR, sorted(KIT_DIR.rglob("*.py"))),
        ("data", data, sorted(data.glob("adder.*"))),
        ("notebooks", notebooks, grading.course_notebooks(notebooks)),
    ]
    for label, root, paths in folders:
        for path in paths:
            digest.update(f"{label}/{path.relative_to(root)}".encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


# ---------------------------------------------------------------- the CSV


def read_csv(path: Path) -> list[Row]:
    """The rows of a grades file this kit wrote; an error for any other file (never overwritten)."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or header[:4] != COLUMNS[:4]:
            raise ValueError(
                f"{path} exists and is not a grades table written by attnkit (its first line is not "
                f"{','.join(COLUMNS)}): choose another --csv"
            )
        return [Row(r[0], r[1], r[2] == "yes", *r[3:6]) for r in reader if len(r) >= 4]


def write_csv(rows: Iterable[Row], path) -> None:
    """All rows as CSV, written atomically (a grades file is never half written), with the
    permissions the user's umask gives a new file."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(
            [row.learner_file, row.exercise, "yes" if row.passed else "no", row.line, row.mistake, row.learner]
        )
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(buffer.getvalue())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _umask() -> int:
    try:  # Linux: read without changing it (os.umask would, for every thread)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------- a class


def still_to_grade(notebooks: list, out: Path, regrade: bool = False) -> tuple[list[Row], list[str]]:
    """(the rows of `out` kept, the notebooks to grade now): those not in `out` yet, or all with `regrade`."""
    names = [str(n) for n in notebooks]
    # a "not handed in" row is worked out afresh on every run: the notebook may have come in since
    kept = [r for r in read_csv(out) if r.mistake != MISSING] if Path(out).exists() else []
    if regrade:
        kept = [r for r in kept if r.learner_file not in set(names)]
    done = {r.learner_file for r in kept}
    return kept, list(dict.fromkeys(n for n in names if n not in done))


def grade_class(
    notebooks: list,
    out: Path,
    cell_timeout: float = 120,
    jobs: int = 1,
    regrade: bool = False,
    notebooks_dir: Path = NOTEBOOKS_DIR,
    progress: Callable[[str], None] | None = None,
    grade: Callable = grade_notebook,
    learner_of: dict[str, str] | None = None,
    missing: Iterable[Row] = (),
) -> tuple[list[Row], list[str]]:
    """Grade every notebook not yet in `out` (all with `regrade`), `jobs` at a time; the CSV is
    rewritten atomically after each notebook. `learner_of` names each notebook's learner; `missing`
    are the rows of notebooks a learner did not hand in (attnkit.course.classes). (all rows, the
    files graded now)."""
    out = Path(out)
    names = [str(n) for n in notebooks]
    kept, todo = still_to_grade(names, out, regrade)
    learner_of = learner_of or {}
    by_file: dict[str, list[Row]] = {}
    for row in [*kept, *missing]:
        by_file.setdefault(row.learner_file, []).append(row)
    order = {name: i for i, name in enumerate([*names, *(f for f in by_file if f not in names)])}
    before, lock, graded = kit_hash(notebooks_dir), threading.Lock(), []

    def one(name: str) -> list[Row]:
        rows = [replace(r, learner=learner_of.get(name, "")) for r in grade(name, cell_timeout, notebooks_dir)]
        if kit_hash(notebooks_dir) != before:
            raise GradingStopped(
                f"the kit's own files changed while {name} was graded: a submission may have "
                f"rewritten them ({KIT_DIR}); reinstall attnkit and grade again "
                f"(the rows graded before it were kept in {out})"
            )
        return rows

    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        pending = {pool.submit(one, name): name for name in todo}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            failure = None
            for future in sorted(finished, key=lambda f: order[pending[f]]):
                name = pending.pop(future)
                if future.exception() is not None:  # kept for after the others finished with it
                    failure = failure or future.exception()
                    continue
                rows = future.result()
                with lock:
                    by_file[name] = rows
                    graded.append(name)
                    write_csv([r for f in sorted(by_file, key=lambda f: order.get(f, -1)) for r in by_file[f]], out)
                if progress:
                    progress(name)
            if failure is not None:
                raise failure
    except BaseException:
        for future in list(pending):
            future.cancel()
        for proc, token in list(grading.LIVE):  # the notebooks being graded now: stopped at once
            grading.kill_job(proc, token)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [r for f in sorted(by_file, key=lambda f: order.get(f, -1)) for r in by_file[f]], graded


# ---------------------------------------------------------------- pre-flight


def preflight(notebooks: list, cell_timeout: float, jobs: int, notebooks_dir: Path = NOTEBOOKS_DIR) -> None:
    """Before anyone is graded: the checking process imports this kit, and the course's own solutions
    of the notebooks handed in pass every exercise. Raises GradingStopped with one clear error."""
    probe = subprocess.run(
        [sys.executable, "-I", "-c", "import attnkit; print(attnkit.__file__)"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    ours = str(KIT_DIR / "__init__.py")
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        raise GradingStopped(
            f"pre-flight: {sys.executable} cannot import attnkit ({last}): install the kit "
            "in this environment (pip install -e .) before grading"
        )
    if Path(probe.stdout.strip()).resolve() != Path(ours).resolve():
        raise GradingStopped(
            f"pre-flight: the checking process imports attnkit from {probe.stdout.strip()}, not "
            f"this kit ({ours}): a stale install? reinstall it (pip install -e .)"
        )
    named = {grading.course_by_name(Path(n), notebooks_dir) for n in notebooks}
    sources = sorted(p for p in named if p is not None) or grading.course_notebooks(notebooks_dir)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda s: grade_notebook(s, cell_timeout, notebooks_dir), sources))
    failed = [r for rows in results for r in rows if not r.passed]
    if failed:
        shown = "; ".join(f"{r.exercise}: {r.line}" for r in failed[:3])
        raise GradingStopped(
            f"pre-flight: the course's own solutions do not pass ({len(failed)} exercise(s): "
            f"{shown}) — this environment cannot grade fairly; nothing was graded"
        )


# ---------------------------------------------------------------- the summary

ASCII = str.maketrans(
    {
        "✅": "[pass]",
        "❌": "[fail]",
        "⏳": "[todo]",
        "✓": "+",
        "✗": "-",
        "—": "-",
        "…": "...",
        "−": "-",
        "ᵀ": "^T",
        "·": "*",
        "→": "->",
        "≥": ">=",
        "≤": "<=",
    }
)


def summary(rows: list[Row], worth: dict[str, float] | None = None) -> str:
    """A readable summary: per file, the score and each exercise that did not pass, with its line;
    per learner, the total (in points too, with `worth`: points per exercise)."""
    out: list[str] = []
    files: dict[str, list[Row]] = {}
    for row in rows:
        files.setdefault(row.learner_file, []).append(row)
    for name, file_rows in files.items():
        passed = sum(r.passed for r in file_rows)
        out.append(f"{name}: {passed}/{len(file_rows)} exercises passed")
        out += [f"    {'✓' if r.passed else '✗'} {r.exercise}: {r.line}" for r in file_rows if not r.passed]
    learners: dict[str, list[Row]] = {}
    for row in rows:
        if row.learner:
            learners.setdefault(row.learner, []).append(row)
    for learner, learner_rows in learners.items():
        handed = {r.learner_file for r in learner_rows if r.mistake != MISSING}
        points = ""
        if worth is not None:
            earned = sum(worth.get(r.exercise, 1.0) for r in learner_rows if r.passed)
            points = f", {earned:g} of {sum(worth.get(r.exercise, 1.0) for r in learner_rows):g} points"
        out.append(
            f"learner {learner}: {sum(r.passed for r in learner_rows)}/{len(learner_rows)} exercises passed "
            f"({len(handed)} notebook(s) handed in){points}"
        )
    total = sum(r.passed for r in rows)
    out.append(f"total: {total}/{len(rows)} exercises passed in {len(files)} notebook(s)")
    return "\n".join(out)


def printable(text: str, encoding: str | None) -> str:
    """`text` as the terminal's encoding can show it (an ASCII-only terminal gets [pass]/[fail])."""
    encoding = encoding or "ascii"
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        return text.translate(ASCII).encode(encoding, "replace").decode(encoding)
