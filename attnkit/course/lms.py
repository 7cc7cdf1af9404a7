"""The gradebook an LMS imports: points per exercise, totals per learner and notebook, and the CSV
files Canvas and Moodle read (`attnkit grade ... --points FILE --canvas FILE --moodle FILE`).

Points: by default an exercise's stars (⭐ to ⭐⭐⭐, as the notebook's heading gives them); a small
course file changes any of them:

    # points.toml
    [points]
    "01-multi-head" = 5
    "04-head-importance" = 4

Canvas ("Import" in the Gradebook): the columns Student, ID, SIS User ID, SIS Login ID and Section,
then one column per notebook; the second row, "Points Possible", gives each notebook's maximum, which
Canvas uses for a column it creates. A learner is matched by SIS Login ID: the learner's id (the
folder name in a class folder), as the instructor named the folders.

Moodle ("Import" > "CSV file" in the Grader report): a header row, a Username column to map "Identify
user by" to, and one column per notebook, each mapped to a grade item or a new one.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
import tomllib
from pathlib import Path

from ..core.journal import atomic_write  # torch-free: the grader's process never imports torch
from .grading import Row

CANVAS_HEAD = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_HEAD = ["Username"]
PREFIX = "attnkit "  # every notebook column starts with it: a file with one is a file this kit wrote


def load_points(path, known: dict[str, tuple[str, str, int]]) -> dict[str, float]:
    """exercise id -> points: the stars of `known` (feedback.exercises()), changed by the [points]
    table of the TOML file at `path` (None: the stars alone). A ValueError names what is wrong."""
    points: dict[str, float] = {e: float(stars) for e, (_, _, stars) in known.items()}
    if path is None:
        return points
    try:
        table = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"--points {path}: cannot read it as TOML ({e})") from None
    given = table.get("points")
    if not isinstance(given, dict) or set(table) != {"points"}:
        raise ValueError(f'--points {path}: expected one [points] table of "exercise-id" = points, got {sorted(table)}')
    for exercise, value in given.items():
        if exercise not in known:
            near = difflib.get_close_matches(exercise, list(known), n=1)
            raise ValueError(
                f"--points {path}: no exercise {exercise!r} in the course"
                + (f" (did you mean {near[0]!r}?)" if near else f"; the exercises: {', '.join(known)}")
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"--points {path}: {exercise} = {value!r}; points are a number, 0 or more")
        points[exercise] = float(value)
    return points


def totals(rows: list[Row], points: dict[str, float], known: dict[str, tuple[str, str, int]]) -> dict:
    """learner -> notebook -> (earned, possible); a notebook named alone stands for its learner."""
    out: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        learner = row.learner or Path(row.learner_file).stem
        notebook = known.get(row.exercise, (Path(row.learner_file).stem, "", 1))[0]
        earned_possible = out.setdefault(learner, {}).setdefault(notebook, [0.0, 0.0])
        worth = points.get(row.exercise, 1.0)
        earned_possible[0] += worth if row.passed else 0.0
        earned_possible[1] += worth
    return {learner: {nb: (e, p) for nb, (e, p) in notebooks.items()} for learner, notebooks in out.items()}


def _number(x: float) -> str:
    return f"{x:g}"


def _table(head: list[str], first: list[list[str]], by_learner: dict, notebooks: list[str], login: bool) -> str:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(head + [PREFIX + nb for nb in notebooks])
    writer.writerows(first)
    for learner, per in sorted(by_learner.items()):
        ids = [learner, "", "", learner, ""] if login else [learner]
        writer.writerow(ids + [_number(per[nb][0]) if nb in per else "" for nb in notebooks])
    return text.getvalue()


def canvas_csv(by_learner: dict) -> str:
    notebooks = sorted({nb for per in by_learner.values() for nb in per})
    possible = [_number(max(per[nb][1] for per in by_learner.values() if nb in per)) for nb in notebooks]
    return _table(CANVAS_HEAD, [["Points Possible", "", "", "", ""] + possible], by_learner, notebooks, login=True)


def moodle_csv(by_learner: dict) -> str:
    notebooks = sorted({nb for per in by_learner.values() for nb in per})
    return _table(MOODLE_HEAD, [], by_learner, notebooks, login=False)


def check_export_path(path, flag: str) -> Path:
    """`path` for an export: new, or a file this kit wrote before (never one it did not write)."""
    path = Path(path)
    if path.suffix.lower() != ".csv":
        raise ValueError(f"{flag} {path}: the file must end in .csv")
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a folder")
    if path.exists():
        head = path.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        if PREFIX not in head:
            raise ValueError(f"{flag} {path} exists and is not a gradebook attnkit wrote: choose another file")
    if not path.parent.is_dir():
        raise ValueError(f"{flag} {path}: no folder {path.parent}")
    return path


def write_export(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"))
