"""A class handed in as folders: one folder per learner, named by the learner's id.

    subs/ann/01_attention_from_scratch.ipynb             attnkit grade subs
    subs/ben/03_attention_heatmaps.ipynb
    submitted/ann/ps1/01_attention_from_scratch.ipynb    nbgrader's layout: attnkit grade submitted

Every notebook under a learner's folder (at any depth: nbgrader puts an assignment folder between)
is graded, and its rows carry the learner's id. A course notebook that someone in the class handed
in and a learner did not gets that learner a row per exercise saying so, so a missing notebook is
never a hole in the gradebook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .gradebook import MISSING
from .grading import NOTEBOOKS_DIR, Row, course_by_name, exercise_ids


@dataclass
class Class:
    notebooks: list[str] = field(default_factory=list)  # every notebook to grade, in order
    learner_of: dict[str, str] = field(default_factory=dict)  # notebook -> learner id
    missing: list[Row] = field(default_factory=list)  # a row per exercise of each notebook not handed in


def handed_in(folder: Path) -> list[Path]:
    """The notebooks under a learner's folder, at any depth, without Jupyter's checkpoint copies."""
    found = [p for p in folder.rglob("*.ipynb") if p.is_file() and ".ipynb_checkpoints" not in p.parts]
    return sorted(found, key=lambda p: (p.name, str(p)))


def gather(paths: list[str], notebooks_dir: Path = NOTEBOOKS_DIR) -> Class:
    """What to grade: each path a notebook (graded as it is, no learner id) or a class folder (each
    folder in it a learner; files directly in it are not anyone's and are refused)."""
    out = Class()
    for given in dict.fromkeys(paths):
        path = Path(given)
        if not path.is_dir():
            out.notebooks.append(given)
            continue
        strays = sorted(p.name for p in path.glob("*.ipynb"))
        if strays:
            raise ValueError(
                f"{path} holds notebooks of no learner ({', '.join(strays[:3])}): a class folder holds one "
                "folder per learner (subs/ann/01_....ipynb); name the files themselves to grade them"
            )
        learners = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not learners:
            raise ValueError(f"{path} holds no learner's folder: a class folder holds one folder per learner")
        by_learner = {learner: handed_in(learner) for learner in learners}
        named = {course_by_name(nb, notebooks_dir) for nbs in by_learner.values() for nb in nbs}
        courses = {c for c in named if c is not None}  # the course notebooks someone handed in
        for learner, notebooks in by_learner.items():
            for notebook in notebooks:
                out.notebooks.append(str(notebook))
                out.learner_of[str(notebook)] = learner.name
            returned = {course_by_name(nb, notebooks_dir) for nb in notebooks}
            for course in sorted(c for c in courses if c not in returned):
                expected = learner / course.name
                line = f"not handed in: no copy of {course.name} in {learner}"
                out.missing += [
                    Row(str(expected), e, False, line, MISSING, learner.name)
                    for e in exercise_ids(nbformat.read(course, as_version=4))
                ]
    return out
