"""The course's two editions and its grader: the student edition has stubs and no answers, a learner's
folder is never overwritten, and grading gives full marks, zero, exactly the planted rows, and a
reason for every notebook that crashes, loops, kills its checking process or cannot be read
(tests/test_grading.py: tampering, the kit's own answer, a class)."""

import csv
import re
from pathlib import Path

import nbformat
import pytest
import torch

from attnkit.course import editions
from attnkit.course.editions import BEGIN, END, STUB, exercise_ids, stub_source, student_notebook, write_student_edition
from attnkit.course.gradebook import summary
from attnkit.course.grading import NOTEBOOKS_DIR, grade_notebook

from helpers import cli

ROOT = Path(__file__).resolve().parents[1]
COURSE = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
NB01 = NOTEBOOKS_DIR / "01_attention_from_scratch.ipynb"


def read(path):
    return nbformat.read(path, as_version=4)


# ---------------------------------------------------------------- the student edition


def test_stub_source_replaces_each_region_at_its_indentation():
    source = (
        f"class A:\n    def f(self):\n        # doc\n        {BEGIN}\n        return 1\n        {END}\n\n"
        f"def g():\n    {BEGIN}\n    x = 2\n    return x\n    {END}\n    # after"
    )
    assert (
        stub_source(source) == f"class A:\n    def f(self):\n        # doc\n        {STUB}\n\n"
        f"def g():\n    {STUB}\n    # after"
    )


@pytest.mark.parametrize(
    "source, problem",
    [
        (f"{BEGIN}\nx = 1", f"{BEGIN} without an {END}"),
        (f"x = 1\n{END}", f"line 2: {END} without a {BEGIN}"),
        (f"{BEGIN}\n{BEGIN}\n{END}", "line 2: " + BEGIN + " inside another"),
    ],
)
def test_unbalanced_markers_name_the_line(source, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(")):
        stub_source(source)


def test_a_region_outside_a_solution_cell_is_an_error():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"def f():\n    {BEGIN}\n    pass\n    {END}")])
    with pytest.raises(ValueError, match="cell 1 has a ### BEGIN SOLUTION region but no nbgrader solution metadata"):
        student_notebook(nb)


@pytest.mark.parametrize("path", COURSE, ids=lambda p: p.name[:2])
def test_student_edition_has_stubs_and_no_answers(path):
    source = read(path)
    student, self_study = student_notebook(source), student_notebook(source, with_solutions=True)
    solutions = [c for c in source.cells if editions.is_solution_cell(c)]
    text = "\n".join(c.source for c in student.cells)
    code = "\n".join(c.source for c in student.cells if c.cell_type == "code")
    assert BEGIN not in code and END not in code and "<summary>Solution" not in text
    assert text.count(STUB) == sum(c.source.count(BEGIN) for c in solutions) >= 3
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
    assert editions.exercise_ids(student) == editions.exercise_ids(source)
    assert student.metadata["attnkit"]["edition"] == "student"
    # Self-study: each solution, without its markers, collapsed right under its stub.
    details = [c.source for c in self_study.cells if c.source.startswith("<details><summary>Solution")]
    assert [d.split("```python\n")[1].split("\n```")[0] for d in details] == [
        editions.without_markers(c.source) for c in solutions
    ]


@pytest.mark.parametrize("path", COURSE, ids=lambda p: p.name[:2])
def test_student_edition_keeps_the_nbgrader_metadata_of_every_check_and_solution_cell(path):
    # nbgrader's autograder grades the student edition's cells, not the course's: every check cell must
    # reach the learner as a locked 1-point test named after its exercise, unchanged (nbgrader refuses
    # a locked cell whose source changed), and every stubbed solution cell as a solution cell.
    source = read(path)
    course_checks = editions.check_cells(source)
    for edition in (
        student_notebook(source),
        student_notebook(source, hints=False),
        student_notebook(source, with_solutions=True),
    ):
        hints = edition.metadata["attnkit"].get("hints", True)
        checks = editions.check_cells(edition)
        assert list(checks) == list(course_checks) and len(checks) >= 3
        for exercise, cell in checks.items():
            meta = cell.metadata.get("nbgrader", {})
            assert {k: meta.get(k) for k in ("grade", "locked", "points", "solution", "grade_id")} == {
                "grade": True,
                "locked": True,
                "points": 1,
                "solution": False,
                "grade_id": f"{exercise}-check",
            }, (path.name, exercise, meta)
            # without hints the only change is the checker told so (the edition is nbgrader's source then)
            shown = cell.source if hints else cell.source.replace(", hints=False)", ")")
            assert shown == course_checks[exercise].source and (hints or "hints=False" in cell.source), (
                path.name,
                exercise,
            )
        stubs = [c for c in edition.cells if c.cell_type == "code" and STUB in c.source]
        assert stubs and all(
            c.metadata["nbgrader"]["solution"]
            and c.metadata["nbgrader"]["grade_id"]
            and not c.metadata["nbgrader"]["grade"]
            for c in stubs
        ), path.name
        grade_ids = [c.metadata["nbgrader"]["grade_id"] for c in edition.cells if "nbgrader" in c.metadata]
        assert len(grade_ids) == len(set(grade_ids)), path.name


def test_writing_the_edition_never_overwrites_a_learners_work(tmp_path):
    out = tmp_path / "student"
    written = write_student_edition(NOTEBOOKS_DIR, out)
    assert sorted(p.name for p in written) == [p.name for p in COURSE]
    assert write_student_edition(NOTEBOOKS_DIR, out)  # the same again: nothing to lose
    mine = out / COURSE[0].name
    mine.write_text(mine.read_text() + " ", encoding="utf-8")  # a learner's edit
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(ValueError, match=f"{mine} exists and differs from the edition"):
        write_student_edition(NOTEBOOKS_DIR, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing written at all
    write_student_edition(NOTEBOOKS_DIR, out, force=True)
    assert mine.read_text().endswith("\n") and sorted(p.name for p in out.iterdir()) == [p.name for p in COURSE]
    with pytest.raises(ValueError, match="is the source folder"):
        write_student_edition(NOTEBOOKS_DIR, NOTEBOOKS_DIR)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        write_student_edition(NOTEBOOKS_DIR, tmp_path / "file")


def test_student_command_reports_problems_without_a_traceback(tmp_path, capsys, monkeypatch):
    (tmp_path / "taken").write_text("x")
    status, _, err = cli(capsys, monkeypatch, tmp_path, "student", tmp_path / "taken")
    assert status == 2 and "exists and is not a folder" in err and "Traceback" not in err
    status, out, _ = cli(capsys, monkeypatch, tmp_path, "student", tmp_path / "s", "--with-solutions")
    assert status == 0 and "self-study edition" in out
    assert "<summary>Solution" in (tmp_path / "s" / COURSE[0].name).read_text()


# ---------------------------------------------------------------- grading


def replace_solution(nb, grade_id, source):
    [cell] = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id]
    cell.source = source


def rows_of(path, **kwargs):
    return {r.exercise: (r.passed, r.line) for r in grade_notebook(path, **kwargs)}


@pytest.mark.slow
def test_grading_the_solution_edition_gives_full_marks_and_the_student_edition_zero(tmp_path):
    solved = rows_of(NB01)
    assert len(solved) == 5 and all(passed for passed, _ in solved.values()), solved
    student = tmp_path / NB01.name
    nbformat.write(student_notebook(read(NB01)), student)
    unsolved = rows_of(student)
    assert list(unsolved) == list(solved)
    assert all(not passed and line.startswith("⏳") for passed, line in unsolved.values()), unsolved


@pytest.mark.slow
def test_grading_planted_mistakes_gives_exactly_the_expected_rows(tmp_path):
    nb = student_notebook(read(NB01))
    replace_solution(
        nb, "01-causal-mask", "def my_causal_mask(n_pos):\n    return torch.ones(n_pos, n_pos, dtype=torch.bool).triu()"
    )
    replace_solution(
        nb,
        "01-attention",
        "def my_attention(q, k, v, mask=None):\n    return scaled_dot_product_attention(q, k, v, mask)",
    )
    replace_solution(
        nb,
        "01-split-merge",
        "def my_split_heads(x, n_heads):\n"
        "    return x.reshape(x.size(0), n_heads, x.size(1), -1)\n"
        "def my_merge_heads(z):\n    import not_a_module\n",
    )
    for cell in nb.cells:  # a learner who "fixes" a checker: the course's check cell comes back
        if cell.get("metadata", {}).get("attnkit", {}).get("exercise") == "01-multi-head":
            cell.source = 'print("✅ multi_head_attention: passed")'
    path = tmp_path / "01_attention (1).ipynb"  # a renamed download: found by its exercises
    nbformat.write(nb, path)
    assert rows_of(path) == {
        "01-causal-mask": (
            False,
            "❌ causal_mask: upper triangle: position i would see the positions after "
            "it; keep the lower triangle (tril)",
        ),
        "01-attention": (
            False,
            "❌ scaled_dot_product_attention: your answer calls the kit's own "
            "attnkit.core.attention.scaled_dot_product_attention — write your own to pass",
        ),
        "01-split-heads": (
            False,
            "❌ split_heads: wrong transpose: reshaping straight to (batch, heads, pos, "
            "d_head) mixes positions into heads; view as (batch, pos, heads, d_head), "
            "then transpose(1, 2)",
        ),
        "01-merge-heads": (
            False,
            "❌ merge_heads: your code raised ModuleNotFoundError for z of shape "
            "(2, 3, 5, 4): No module named 'not_a_module'",
        ),
        "01-multi-head": (False, "⏳ multi_head_attention: not implemented yet — fill in the stub above"),
    }


MERGE = "def my_merge_heads(z):\n    return z.transpose(1, 2).reshape(z.size(0), z.size(2), -1)"


def mini_notebook(middle=None, merge=MERGE):
    """Two of notebook 01's exercises, with a cell `middle` between the first exercise and the second."""
    cell = nbformat.v4.new_code_cell
    check = lambda exercise, call: cell(call, metadata={"tags": ["check"], "attnkit": {"exercise": exercise}})  # noqa
    return nbformat.v4.new_notebook(
        cells=[
            cell("import torch\nfrom attnkit.exercises import attention as attention_checks"),
            cell("def my_causal_mask(n_pos):\n    return torch.ones(n_pos, n_pos, dtype=torch.bool).tril()"),
            check("01-causal-mask", "attention_checks.check_causal_mask(my_causal_mask);"),
            *([cell(middle)] if middle else []),
            cell(merge),
            check("01-merge-heads", "attention_checks.check_merge_heads(my_merge_heads);"),
        ]
    )


# The checking process imports torch and every checker before the first cell, so no cell here needs
# more than a few milliseconds; only the endless loop waits the whole limit out (2 s of it).
@pytest.mark.slow
@pytest.mark.parametrize(
    "middle, merge, merge_line",
    [
        ("import not_a_module", MERGE, "✅ merge_heads: passed"),  # an error in a cell: the rest still runs
        ("while True:\n    pass", MERGE, "not reached: cell 4 ran over the 2 s limit and was stopped"),
        ("import os\nos._exit(1)", MERGE, "❌ merge_heads: the learner's process stopped answering in cell 4"),
        (
            None,
            MERGE + "\n)",
            "❌ merge_heads: my_merge_heads is not defined where its check runs — run the cell "
            "that defines it (the first error before it: cell 4, SyntaxError",
        ),
    ],
    ids=["import", "loop", "process-death", "syntax-error"],
)
def test_a_notebook_that_fails_is_graded_as_far_as_it_got(tmp_path, middle, merge, merge_line):
    path = tmp_path / "mini.ipynb"
    nbformat.write(mini_notebook(middle, merge), path)
    rows = rows_of(path, cell_timeout=2)
    assert rows["01-causal-mask"][0] and rows["01-causal-mask"][1].startswith("✅")
    assert not rows["01-merge-heads"][0] if "✅" not in merge_line else rows["01-merge-heads"][0]
    assert rows["01-merge-heads"][1].startswith(merge_line), rows


@pytest.mark.slow
def test_grade_command_writes_a_row_per_exercise_and_never_stops_at_a_bad_notebook(tmp_path, capsys, monkeypatch):
    good, broken, no_checks = tmp_path / "good.ipynb", tmp_path / "broken.ipynb", tmp_path / "plain.ipynb"
    nbformat.write(mini_notebook(), good)
    broken.write_text("{ not json")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), no_checks)
    out = tmp_path / "grades.csv"
    status, stdout, err = cli(
        capsys, monkeypatch, tmp_path, "grade", broken, good, no_checks, "--csv", out, "--no-preflight"
    )
    assert status == 0, err
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    # A file that is not a notebook: a failed row for every exercise of every course notebook it could be.
    every = [e for nb in sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")) for e in exercise_ids(read(nb))]
    assert [(Path(r["learner_file"]).name, r["exercise"], r["passed"]) for r in rows] == [
        *[("broken.ipynb", e, "no") for e in every],
        ("good.ipynb", "01-causal-mask", "yes"),
        ("good.ipynb", "01-attention", "no"),
        ("good.ipynb", "01-split-heads", "no"),
        ("good.ipynb", "01-merge-heads", "yes"),
        ("good.ipynb", "01-multi-head", "no"),
        ("plain.ipynb", "(notebook)", "no"),
    ]
    assert all(r["line"].startswith("could not read the notebook") for r in rows[: len(every)])
    assert "not a course notebook" in rows[-1]["line"]
    assert "its check cell was deleted" in rows[len(every) + 1]["line"]
    assert "good.ipynb: 2/5 exercises passed" in stdout
    assert f"total: 2/{len(every) + 6} exercises passed in 3 notebook(s)" in stdout
    # A re-run keeps what is graded; a table the kit did not write is never touched.
    status, stdout, err = cli(capsys, monkeypatch, tmp_path, "grade", good, "--csv", out)
    assert status == 0 and "1 notebook(s) already in" in stdout, err
    assert "pre-flight" not in err  # nothing left to grade: the environment needs no check
    # A new notebook: the pre-flight grades the course's own solutions of the notebook it is a copy of first.
    named = tmp_path / "alice_01_attention_from_scratch.ipynb"
    named.write_bytes(good.read_bytes())
    status, stdout, err = cli(capsys, monkeypatch, tmp_path, "grade", named, "--csv", out)
    assert status == 0 and "pre-flight" in err, err
    assert f"{named.name}: 2/5 exercises passed" in stdout, stdout
    (tmp_path / "other.csv").write_text("someone's spreadsheet\n")
    status, _, err = cli(capsys, monkeypatch, tmp_path, "grade", good, "--csv", tmp_path / "other.csv")
    assert status == 2 and "not a grades table written by attnkit" in err
    for bad in ("nan", "inf"):
        status, _, err = cli(capsys, monkeypatch, tmp_path, "grade", good, "--cell-timeout", bad)
        assert status == 2 and "--cell-timeout must be a finite number" in err, bad
    # The output path is checked before any notebook runs.
    status, _, err = cli(capsys, monkeypatch, tmp_path, "grade", good, "--csv", tmp_path / "no" / "g.csv")
    assert status == 2 and "folder" in err and "does not exist" in err


def test_grade_refuses_when_it_cannot_find_its_course(tmp_path, capsys, monkeypatch):
    """An install without its notebooks must not grade a class zero: exit 2, where it looked, no CSV."""
    from attnkit.course import grading

    nowhere = tmp_path / "site-packages" / "attnkit" / "notebooks"
    monkeypatch.setattr(grading, "NOTEBOOKS_DIR", nowhere)
    monkeypatch.setattr(grading.require_course, "__defaults__", (nowhere,))
    solved = tmp_path / NB01.name
    solved.write_bytes(NB01.read_bytes())
    status, stdout, err = cli(capsys, monkeypatch, tmp_path, "grade", solved, "--csv", tmp_path / "g.csv")
    assert status == 2, (status, stdout, err)
    assert "no course notebooks" in err and str(nowhere) in err and "Traceback" not in err
    assert not (tmp_path / "g.csv").exists() and not list(tmp_path.glob("*.csv"))


def test_a_submission_is_matched_to_its_course_notebook():
    from attnkit.course.grading import course_notebook

    nb = read(NB01)
    assert course_notebook(Path("x/01_attention_from_scratch.ipynb"), nb) == NB01
    assert course_notebook(Path("alice_01_attention_from_scratch.ipynb"), nbformat.v4.new_notebook()) == NB01
    assert course_notebook(Path("renamed.ipynb"), nb) == NB01  # by its exercises
    assert course_notebook(Path("renamed.ipynb"), nbformat.v4.new_notebook()) is None


def test_summary_lists_every_exercise_that_did_not_pass():
    from attnkit.course.grading import Row

    text = summary(
        [
            Row("a.ipynb", "x", True, "✅ x: passed"),
            Row("a.ipynb", "y", False, "❌ y: wrong axis"),
            Row("b.ipynb", "x", False, "not reached: cell 3 ran over the 2 s limit and was stopped"),
        ]
    )
    assert text.splitlines() == [
        "a.ipynb: 1/2 exercises passed",
        "    ✗ y: ❌ y: wrong axis",
        "b.ipynb: 0/1 exercises passed",
        "    ✗ x: not reached: cell 3 ran over the 2 s limit and was stopped",
        "total: 1/3 exercises passed in 2 notebook(s)",
    ]


@pytest.mark.parametrize("path", COURSE, ids=lambda p: p.name[:2])
def test_the_edition_without_hints_has_none(path):
    nb = student_notebook(read(path), hints=False)
    assert nb.metadata["attnkit"]["hints"] is False
    assert not any("<summary>Hint" in c.source for c in nb.cells if c.cell_type == "markdown")
    checks = [c.source for c in nb.cells if "check" in c.get("metadata", {}).get("tags", [])]
    assert checks and all(s.count("hints=False)") == 1 for s in checks), checks
    assert any("<summary>Hint" in c.source for c in student_notebook(read(path)).cells)  # the default keeps them


def test_a_checker_without_hints_says_only_whether_it_passed(capsys):
    from attnkit.exercises import attention as attention_checks

    wrong = lambda n: torch.ones(n, n, dtype=torch.bool).triu()  # noqa: E731
    assert attention_checks.check_causal_mask(wrong, hints=False) is False
    assert capsys.readouterr().out.strip() == "❌ causal_mask: not right yet (this edition gives no hints)"
    assert attention_checks.check_causal_mask(wrong) is False and "upper triangle" in capsys.readouterr().out
    assert attention_checks.check_causal_mask(lambda n: torch.ones(n, n, dtype=torch.bool).tril(), hints=False) is True
    assert capsys.readouterr().out.startswith("✅")


def test_course_command_writes_an_edition_without_hints(tmp_path, capsys, monkeypatch):
    status, out, err = cli(
        capsys, monkeypatch, tmp_path, "course", tmp_path / "out", "--edition", "student", "--no-hints"
    )
    assert status == 0 and "without hints" in out, err
    for path in COURSE:
        without = read(tmp_path / "out" / path.name)
        assert without.metadata["attnkit"]["hints"] is False
        assert not any("<summary>Hint" in c.source for c in without.cells), path.name
        assert exercise_ids(without) == exercise_ids(read(path))
    status, _, err = cli(capsys, monkeypatch, tmp_path, "course", tmp_path / "c", "--no-hints")
    assert status == 2 and "--no-hints is for the student and self-study editions" in err


# ---------------------------------------------------------------- check cells and messages give no answer


def _answer_names():
    from attnkit.exercises import registry

    return sorted({ref.split(":")[1].split(".")[-1] for e in registry().values() for ref in e.references})


# (a - b) / (c - d): a normalised effect spelled out
FORMULA = re.compile(r"\(\s*\w+\s*-\s*\w+\s*\)\s*/\s*\(\s*\w+\s*-\s*\w+\s*\)")


@pytest.mark.parametrize("path", COURSE, ids=lambda p: p.name[:2])
def test_check_cells_call_the_checker_and_name_no_answer(path):
    for exercise, cell in editions.check_cells(read(path)).items():
        for name in _answer_names():  # my_x and check_x are the learner's and the checker's: not answers
            assert not re.search(rf"(?<!\w){re.escape(name)}\b", cell.source), (exercise, name, cell.source)
        assert not FORMULA.search(cell.source) and "lambda" not in cell.source, (exercise, cell.source)


def test_checker_messages_never_name_the_kits_answer():
    import ast

    names = "|".join(map(re.escape, _answer_names()))
    assert names
    for module in sorted((ROOT / "attnkit" / "exercises").glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found = re.search(
                    rf"\b(attnkit|P|PE|A|patching|positional|hooks|studies|evaluate)\.({names})\b", node.value
                )
                assert not found, f"{module.name}, line {node.lineno}: {node.value!r} names {found.group(0)}"
