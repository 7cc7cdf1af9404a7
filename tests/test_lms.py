"""The gradebook an LMS imports: points from the stars or a course file, totals per learner and
notebook, and the Canvas and Moodle CSV files, read back as those systems read them."""

from __future__ import annotations

import csv
import io
import shutil

import pytest

from attnkit.course import lms
from attnkit.course.feedback import exercises
from attnkit.course.gradebook import MISSING
from attnkit.course.grading import NOTEBOOKS_DIR, Row

KNOWN = exercises()


def test_points_are_the_stars_unless_a_course_file_says_otherwise(tmp_path):
    stars = lms.load_points(None, KNOWN)
    assert stars["01-causal-mask"] == 1 and stars["01-multi-head"] == 3 and len(stars) == len(KNOWN) == 27
    course = tmp_path / "points.toml"
    course.write_text('[points]\n"01-multi-head" = 5\n"02-loss" = 0\n')
    points = lms.load_points(course, KNOWN)
    assert points["01-multi-head"] == 5 and points["02-loss"] == 0 and points["01-causal-mask"] == 1


@pytest.mark.parametrize(
    "text, problem",
    [
        (
            '[points]\n"01-causal-masc" = 2\n',
            "no exercise '01-causal-masc' in the course (did you mean '01-causal-mask'?)",
        ),
        ('[points]\n"01-causal-mask" = -1\n', "01-causal-mask = -1; points are a number, 0 or more"),
        ('[points]\n"01-causal-mask" = "two"\n', "points are a number"),
        ('[points]\n"01-causal-mask" = true\n', "points are a number"),
        ('"01-causal-mask" = 2\n', "expected one [points] table"),
        ("[points\n", "cannot read it as TOML"),
    ],
)
def test_a_wrong_points_file_is_refused_by_name(tmp_path, text, problem):
    course = tmp_path / "points.toml"
    course.write_text(text)
    with pytest.raises(ValueError, match=None) as error:
        lms.load_points(course, KNOWN)
    assert problem in str(error.value) and str(course) in str(error.value)


def rows() -> list[Row]:
    ok = dict(passed=True, line="✅")
    return [
        Row("subs/ann/01.ipynb", "01-causal-mask", **ok, learner="ann"),
        Row("subs/ann/01.ipynb", "01-multi-head", **ok, learner="ann"),
        Row("subs/ann/02.ipynb", "02-loss", False, "❌", "wrong", learner="ann"),
        Row("subs/bo,b/01.ipynb", "01-causal-mask", False, "⏳", "not-done", learner="bo,b"),
        Row("subs/bo,b/01.ipynb", "01-multi-head", **ok, learner="bo,b"),
        Row("subs/bo,b/02_training_the_adder.ipynb", "02-loss", False, "not handed in", MISSING, learner="bo,b"),
    ]


def test_canvas_reads_a_login_id_per_learner_and_points_possible_per_notebook():
    points = lms.load_points(None, KNOWN)
    canvas = list(csv.reader(io.StringIO(lms.canvas_csv(lms.totals(rows(), points, KNOWN)))))
    assert canvas[0] == lms.CANVAS_HEAD + ["attnkit 01_attention_from_scratch", "attnkit 02_training_the_adder"]
    assert canvas[1] == ["Points Possible", "", "", "", "", "4", "2"]  # 1 + 3 stars; 2 stars
    # a learner id with a comma stays one field; a notebook not handed in counts 0 of its points
    assert canvas[2:] == [["ann", "", "", "ann", "", "4", "0"], ["bo,b", "", "", "bo,b", "", "3", "0"]]


def test_moodle_reads_a_username_column_and_a_grade_column_per_notebook():
    points = {**lms.load_points(None, KNOWN), "01-multi-head": 2.5}
    moodle = list(csv.reader(io.StringIO(lms.moodle_csv(lms.totals(rows(), points, KNOWN)))))
    assert moodle == [
        ["Username", "attnkit 01_attention_from_scratch", "attnkit 02_training_the_adder"],
        ["ann", "3.5", "0"],
        ["bo,b", "2.5", "0"],
    ]


def test_an_export_never_replaces_a_file_the_kit_did_not_write(tmp_path):
    theirs = tmp_path / "canvas.csv"
    theirs.write_text("Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1\n")
    with pytest.raises(ValueError, match="exists and is not a gradebook attnkit wrote"):
        lms.check_export_path(theirs, "--canvas")
    with pytest.raises(ValueError, match="must end in .csv"):
        lms.check_export_path(tmp_path / "grades.xlsx", "--moodle")
    ours = tmp_path / "moodle.csv"
    lms.write_export(ours, lms.moodle_csv(lms.totals(rows(), lms.load_points(None, KNOWN), KNOWN)))
    assert lms.check_export_path(ours, "--moodle") == ours  # its own file: written again


def test_the_command_line_refuses_a_bad_points_file_before_grading(tmp_path, capsys, monkeypatch):
    from helpers import cli

    (tmp_path / "subs" / "ann").mkdir(parents=True)
    shutil.copy(NOTEBOOKS_DIR / "01_attention_from_scratch.ipynb", tmp_path / "subs" / "ann")
    (tmp_path / "points.toml").write_text('[points]\n"01-attentoin" = 2\n')
    status, _, err = cli(capsys, monkeypatch, tmp_path, "grade", "subs", "--points", "points.toml")
    assert status == 2 and "did you mean '01-attention'" in err and "Traceback" not in err
    assert not (tmp_path / "grades.csv").exists()
