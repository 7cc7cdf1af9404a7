"""attnkit/resources.py (the kit's files, found through importlib.resources) and `attnkit course`
(a learner's own copy of the course). The installed wheel itself: tests/test_wheel.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attnkit.__main__ import main
from attnkit.course.editions import write_edition
from attnkit.resources import data_dir, notebooks_dir

ROOT = Path(__file__).resolve().parents[1]
COURSE = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_in_a_clone_the_package_folders_are_the_repositorys_data_and_notebooks(monkeypatch):
    # attnkit/data and attnkit/notebooks are symlinks, so `make data` still writes data/
    assert (ROOT / "attnkit/data").is_symlink() and (ROOT / "attnkit/notebooks").is_symlink()
    monkeypatch.delenv("ATTNKIT_DATA_DIR", raising=False)
    assert data_dir() == ROOT / "data" and notebooks_dir() == ROOT / "notebooks"
    monkeypatch.setenv("ATTNKIT_DATA_DIR", "/somewhere/else")
    assert data_dir() == Path("/somewhere/else")


def test_the_kit_finds_its_files_from_any_working_folder(tmp_path):
    code = (
        "from attnkit.core.checkpoint import DATA_DIR; import attnkit; attnkit.load_pretrained('adder'); "
        "print(DATA_DIR)"
    )
    env = {k: v for k, v in os.environ.items() if k != "ATTNKIT_DATA_DIR"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == ROOT / "data"


def read(path):
    return nbformat.read(path, as_version=4)


def test_course_copies_the_complete_edition_and_never_overwrites_a_changed_notebook(tmp_path, capsys):
    out = tmp_path / "course"
    main(["course", str(out)])
    assert sorted(p.name for p in out.iterdir()) == COURSE
    for name in COURSE:  # the course as written: every solution in place
        assert read(out / name) == read(ROOT / "notebooks" / name)
    main(["course", str(out)])  # the same again: nothing to lose, nothing changes

    mine = out / COURSE[2]
    mine.write_text(mine.read_text() + " ")  # the learner's work
    (out / COURSE[0]).unlink()  # a notebook the learner deleted
    with pytest.raises(SystemExit):
        main(["course", str(out)])
    assert "differs from the edition" in capsys.readouterr().err
    assert not (out / COURSE[0]).exists(), "refused, so nothing at all was written"

    main(["course", str(out), "--keep-changed"])
    assert mine.read_text().endswith(" ") and (out / COURSE[0]).exists()
    assert f"kept 1 that you changed: {COURSE[2]}" in capsys.readouterr().out
    main(["course", str(out), "--force"])
    assert not mine.read_text().endswith(" ")


def test_course_editions_on_request(tmp_path):
    main(["course", str(tmp_path / "s"), "--edition", "student"])
    main(["course", str(tmp_path / "self"), "--edition", "self-study"])
    student, self_study = read(tmp_path / "s" / COURSE[0]), read(tmp_path / "self" / COURSE[0])
    assert student.metadata.attnkit.edition == "student" and self_study.metadata.attnkit.edition == "self-study"
    assert any('raise NotImplementedError("your code here")' in c.source for c in student.cells)
    assert sum("<summary>Solution</summary>" in c.source for c in self_study.cells) > 0
    with pytest.raises(ValueError, match="unknown edition 'teacher'"):
        write_edition(ROOT / "notebooks", tmp_path / "t", "teacher")


def test_course_never_writes_through_a_link_or_over_a_folder(tmp_path):
    out, elsewhere = tmp_path / "course", tmp_path / "elsewhere.ipynb"
    out.mkdir()
    elsewhere.write_text("someone else's file")
    (out / COURSE[0]).symlink_to(elsewhere)
    (out / COURSE[1]).mkdir()
    with pytest.raises(ValueError, match="differs from the edition"):
        write_edition(ROOT / "notebooks", out, "complete")
    written, kept = write_edition(ROOT / "notebooks", out, "complete", keep_changed=True)
    assert sorted(p.name for p in kept) == COURSE[:2] and len(written) == len(COURSE) - 2
    assert elsewhere.read_text() == "someone else's file" and (out / COURSE[0]).is_symlink()
