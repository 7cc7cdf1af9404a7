"""A class handed in as one folder per learner (attnkit/course/classes.py): rows carry the learner's
id, nbgrader's submitted/<learner>/<assignment>/ layout is read, a notebook a learner did not hand
in gets rows that say so, and the summary gives each learner's total."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nbformat
import pytest

from attnkit.course import gradebook
from attnkit.course.classes import gather
from attnkit.course.editions import BEGIN, END, student_notebook
from attnkit.course.grading import NOTEBOOKS_DIR, Row, exercise_ids
from attnkit.course.lms import CANVAS_HEAD

from helpers import cli

NB01 = NOTEBOOKS_DIR / "01_attention_from_scratch.ipynb"
NB03 = NOTEBOOKS_DIR / "03_attention_heatmaps.ipynb"


def hand_in(folder: Path, source: Path, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(source, folder / (name or source.name)))


def exercises(path: Path) -> list[str]:
    return exercise_ids(nbformat.read(path, as_version=4))


def test_a_class_folder_names_each_learner_and_what_they_did_not_hand_in(tmp_path):
    subs = tmp_path / "subs"
    ann01, ann03 = hand_in(subs / "ann", NB01), hand_in(subs / "ann", NB03)
    ben01 = hand_in(subs / "ben", NB01, "ben_01_attention_from_scratch.ipynb")  # a renamed copy is still 01
    hand_in(subs / "ben" / ".ipynb_checkpoints", NB03, "03_attention_heatmaps-checkpoint.ipynb")  # not handed in
    hand_in(subs / ".git", NB03)  # not a learner
    cal = hand_in(tmp_path / "submitted" / "cal" / "ps1", NB01)  # nbgrader's layout
    found = gather([str(subs), str(tmp_path / "submitted")])
    assert found.notebooks == [str(ann01), str(ann03), str(ben01), str(cal)]
    assert found.learner_of == {str(ann01): "ann", str(ann03): "ann", str(ben01): "ben", str(cal): "cal"}
    # ben did not hand in 03, which ann did; nobody in submitted/ handed in 03, so cal owes nothing
    assert [(r.learner, r.exercise, r.passed, r.mistake) for r in found.missing] == [
        ("ben", e, False, gradebook.MISSING) for e in exercises(NB03)
    ]
    assert all(r.line.startswith("not handed in: no copy of 03_attention_heatmaps.ipynb") for r in found.missing)


def test_a_class_folder_with_notebooks_of_no_learner_is_refused(tmp_path):
    hand_in(tmp_path / "subs", NB01)
    with pytest.raises(ValueError, match="notebooks of no learner .*01_attention_from_scratch"):
        gather([str(tmp_path / "subs")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no learner's folder"):
        gather([str(tmp_path / "empty")])


def fake_grade(name, cell_timeout, notebooks_dir):
    """Rows as the grader gives them, without running anything: passes for ann, fails for the rest."""
    return [Row(name, e, "/ann/" in name, "✅" if "/ann/" in name else "❌") for e in exercises(NB01)]


def test_the_gradebook_carries_learners_totals_and_fresh_missing_rows(tmp_path):
    subs = tmp_path / "subs"
    hand_in(subs / "ann", NB01)
    (subs / "ben").mkdir()
    out = tmp_path / "grades.csv"
    found = gather([str(subs)])
    rows, graded = gradebook.grade_class(
        found.notebooks, out, grade=fake_grade, learner_of=found.learner_of, missing=found.missing
    )
    with open(out, encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    assert [(r["learner"], r["passed"], r["mistake"]) for r in table] == [("ann", "yes", "")] * 5 + [
        ("ben", "no", gradebook.MISSING)
    ] * 5
    text = gradebook.summary(rows)
    assert "learner ann: 5/5 exercises passed (1 notebook(s) handed in)" in text
    assert "learner ben: 0/5 exercises passed (0 notebook(s) handed in)" in text
    # ben hands it in late: a re-run grades it (a "not handed in" row is never taken as graded)
    hand_in(subs / "ben", NB01)
    found = gather([str(subs)])
    assert not found.missing
    rows, graded = gradebook.grade_class(
        found.notebooks, out, grade=fake_grade, learner_of=found.learner_of, missing=found.missing
    )
    assert graded == [str(subs / "ben" / NB01.name)]
    assert [(r.learner, r.mistake) for r in gradebook.read_csv(out)] == [("ann", "")] * 5 + [("ben", "")] * 5


@pytest.mark.slow
def test_grade_a_class_folder_from_the_command_line(tmp_path, capsys, monkeypatch):
    hand_in(tmp_path / "subs" / "ann", NB01)  # solved
    nbformat.write(student_notebook(nbformat.read(NB01, as_version=4)), hand_in(tmp_path / "subs" / "ben", NB01))
    (tmp_path / "subs" / "dan").mkdir()  # handed in nothing
    wrong = nbformat.read(NB01, as_version=4)  # cal: one wrong answer, the rest solved
    [cell] = [c for c in wrong.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "01-causal-mask"]
    cell.source = "def my_causal_mask(n_pos):\n    return torch.ones(n_pos, n_pos, dtype=torch.bool).triu()"
    (tmp_path / "subs" / "cal").mkdir()
    nbformat.write(wrong, tmp_path / "subs" / "cal" / NB01.name)
    status, stdout, err = cli(capsys, monkeypatch, tmp_path, "grade", "subs", "--no-preflight", "--feedback", "fb")
    assert status == 0, err
    table = list(csv.DictReader((tmp_path / "grades.csv").open(encoding="utf-8")))
    by_learner = {name: [r["mistake"] for r in table if r["learner"] == name] for name in ("ann", "ben", "cal", "dan")}
    assert by_learner["ann"] == [""] * 5 and by_learner["ben"] == ["not-done"] * 5
    assert by_learner["dan"] == [gradebook.MISSING] * 5 and by_learner["cal"][0] and not any(by_learner["cal"][1:])
    assert "learner ann: 5/5" in stdout and "learner dan: 0/5 exercises passed (0 notebook(s) handed in)" in stdout
    # a feedback page per learner: points from the stars (1 + 2 + 2 + 2 + 3), the checker's line, where to review
    pages = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "fb").iterdir()}
    assert sorted(pages) == [f"{n}.{s}" for n in ("ann", "ben", "cal", "dan") for s in ("html", "md")]
    assert "**10 of 10 points**" in pages["ann.md"] and "**0 of 10 points**" in pages["dan.md"]
    assert "**9 of 10 points**" in pages["cal.md"] and "upper triangle" in pages["cal.md"]
    assert "“⭐ Exercise: the causal mask”" not in pages["cal.md"] and "“Exercise: the causal mask”" in pages["cal.md"]
    assert "<table>" in pages["cal.html"] and "upper triangle" in pages["cal.html"]
    # never the kit's answer: no line of any solution appears on any page
    solutions = [
        line.strip()
        for c in nbformat.read(NB01, as_version=4).cells
        if c.get("metadata", {}).get("nbgrader", {}).get("solution")
        for line in c.source.split(BEGIN)[1].split(END)[0].splitlines()
        if len(line.strip()) > 12
    ]
    assert solutions and not [s for s in solutions for text in pages.values() if s in text]
    # --no-hints: whether each passed, nothing more
    status, _, err = cli(capsys, monkeypatch, tmp_path, "grade", "subs", "--feedback", "quiet", "--no-hints")
    assert status == 0, err
    quiet = (tmp_path / "quiet" / "cal.md").read_text(encoding="utf-8")
    assert "❌ not passed" in quiet and "upper triangle" not in quiet and "**9 of 10 points**" in quiet
    # points from a course file, and the files Canvas and Moodle import (nothing graded again)
    (tmp_path / "points.toml").write_text('[points]\n"01-multi-head" = 5\n"01-causal-mask" = 0.5\n')
    status, stdout, err = cli(capsys, monkeypatch, tmp_path, "grade", "subs", "--points", "points.toml",
                              "--canvas", "canvas.csv", "--moodle", "moodle.csv", "--feedback", "fb")  # fmt: skip
    assert status == 0, err
    assert "learner cal: 4/5 exercises passed (1 notebook(s) handed in), 11 of 11.5 points" in stdout
    column = "attnkit 01_attention_from_scratch"
    canvas = list(csv.reader((tmp_path / "canvas.csv").open(encoding="utf-8")))
    assert canvas[:2] == [CANVAS_HEAD + [column], ["Points Possible", "", "", "", "", "11.5"]]
    assert canvas[2:] == [
        [n, "", "", n, "", p] for n, p in (("ann", "11.5"), ("ben", "0"), ("cal", "11"), ("dan", "0"))
    ]
    moodle = list(csv.reader((tmp_path / "moodle.csv").open(encoding="utf-8")))
    assert moodle == [["Username", column], ["ann", "11.5"], ["ben", "0"], ["cal", "11"], ["dan", "0"]]
    assert "**11 of 11.5 points**" in (tmp_path / "fb" / "cal.md").read_text(encoding="utf-8")


def test_feedback_never_touches_a_file_the_kit_did_not_write_and_keeps_learners_apart(tmp_path):
    from attnkit.course.feedback import write_feedback

    rows = [Row(f"subs/{who}/01.ipynb", e, True, "✅", "", who) for who in ("a b", "a_b") for e in exercises(NB01)]
    paths = write_feedback(rows, tmp_path / "fb")
    assert sorted(p.name for p in paths) == ["a_b-2.html", "a_b-2.md", "a_b.html", "a_b.md"]  # not one over the other
    assert write_feedback(rows, tmp_path / "fb") == paths  # its own pages: rewritten
    (tmp_path / "fb" / "a_b.md").write_text("the instructor's own notes on a b\n")
    before = {p.name: p.read_bytes() for p in (tmp_path / "fb").iterdir()}
    with pytest.raises(ValueError, match="a_b.md exists and is not a feedback page attnkit wrote"):
        write_feedback(rows, tmp_path / "fb")
    assert {p.name: p.read_bytes() for p in (tmp_path / "fb").iterdir()} == before  # nothing written
