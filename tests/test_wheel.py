"""The kit as an administrator installs it: build the sdist and a wheel from it (and a wheel
straight from the tree, which must hold the same files), install that wheel into a fresh venv
outside the repository (with the lock, constraints.txt), and from there: load every model, hash
what grading reads, walk the instructor's path (`attnkit course`, `attnkit student`, `attnkit grade`
on per-learner folders, each giving what the clone gives; `grade` refusing when its course is gone)
and run notebook 03 top to bottom in a kernel of that venv. Then the wheel goes into an
environment built like a year-old hub: tests/test_wheel_hub.py (a file of its own, so that `make
wheel-test`'s two workers build the two environments at once).

Slow (minutes: pip installs torch and JupyterLab into two fresh venvs), so it runs only with
ATTNKIT_WHEEL=1: `make wheel-test` (CI runs it).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    os.environ.get("ATTNKIT_WHEEL") != "1", reason="builds and installs the wheel (minutes): make wheel-test"
)


def run(cmd, **kw):
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{cmd} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def clean_env(**extra) -> dict:
    """No trace of this checkout: no PYTHONPATH, no data override, no venv of ours."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "ATTNKIT_DATA_DIR", "VIRTUAL_ENV", "JUPYTER_PATH", "PYTHONHOME")
    }
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def fresh_copy(dest: Path) -> Path:
    """The checkout as a fresh clone would have it (tracked and new files, links kept as links),
    with none of the build/ or egg-info that an earlier build left behind to leak into this one."""
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_symlink() or source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name, follow_symlinks=False)
    return dest


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    """(the wheel built from the sdist, the wheel built from the tree)"""
    tree, out = fresh_copy(tmp_path_factory.mktemp("tree")), tmp_path_factory.mktemp("dist")
    sdist = run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))",
            out / "sdist",
        ],
        cwd=tree,
    ).split()[-1]
    for source, folder in ((out / "sdist" / sdist, "from-sdist"), (tree, "from-tree")):
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", out / folder, source])
    return tuple(next((out / folder).glob("attnkit-*.whl")) for folder in ("from-sdist", "from-tree"))


@pytest.fixture(scope="module")
def venv(wheels, tmp_path_factory):
    """A fresh venv, outside the repository, with the wheel and JupyterLab (its lab extra) installed
    at the lock's versions, as the README tells an instructor to."""
    where = tmp_path_factory.mktemp("site")
    assert ROOT not in where.parents
    run([sys.executable, "-m", "venv", where / "venv"], env=clean_env())
    pip = [where / "venv/bin/python", "-m", "pip", "install", "--quiet", "-c", ROOT / "constraints.txt"]
    run([*pip, f"{wheels[0]}[lab]"], env=clean_env())
    return where


def shipped(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {
            n.removeprefix("attnkit/") for n in z.namelist() if n.startswith(("attnkit/data/", "attnkit/notebooks/"))
        }


def test_the_wheel_carries_every_committed_model_result_and_notebook(wheels):
    committed = run(["git", "ls-files", "data", "notebooks"], cwd=ROOT).split()
    expected = {p for p in committed if p.startswith("data/") or Path(p).name[:2].isdigit()}
    assert {"data/adder.pt", "data/adder_test.txt", "notebooks/03_attention_heatmaps.ipynb"} <= expected
    assert shipped(wheels[0]) == expected
    assert shipped(wheels[1]) == expected
    with zipfile.ZipFile(wheels[0]) as z:  # real files, not links
        assert z.read("attnkit/data/adder.pt") == (ROOT / "data/adder.pt").read_bytes()


# sequences for the sortedness models: sorted ones, and each with one adjacent swap
SEQUENCES = [sorted((7 * i + 13 * j) % 100 for j in range(8 + i % 9)) for i in range(32)]
SEQUENCES += [
    s[: i % len(s)] + [s[i % len(s) + 1], s[i % len(s)]] + s[i % len(s) + 2 :]
    for i, s in enumerate(SEQUENCES)
    if i % len(s) + 1 < len(s)
]
ANSWERS = """
import json, sys, attnkit
from attnkit.core.checkpoint import DATA_DIR
from attnkit.course.gradebook import kit_hash
from attnkit.course.grading import NOTEBOOKS_DIR
sequences = json.loads(sys.argv[1])
answers = {"module": attnkit.__file__, "data": str(DATA_DIR), "notebooks": str(NOTEBOOKS_DIR),
           "kit_hash": kit_hash(), "course": sorted(p.name for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")),
           "adder": attnkit.load_pretrained("adder").solve(["663+497", "5+5", "999+1", "0+0", "123+877"])}
snapshots = attnkit.load_snapshots("adder")  # notebook 07's: from the wheel's own data, checked on load
answers["snapshots"] = {str(step): s.solve(["348+276"])[0] for step, s in zip(snapshots.steps, snapshots)}
from attnkit.experiments.replay_study import REPLAY_RESULTS_PATH, load_replay
answers["replay"] = str(REPLAY_RESULTS_PATH)
answers["replay_seeds"] = sorted(load_replay(adder=snapshots[-1])["seeds"])
for name in attnkit.PRETRAINED[1:]:
    answers[name] = [bool(b) for b in attnkit.load_pretrained(name).predict(sequences)]
print(json.dumps(answers))
"""


def test_the_installed_kit_loads_every_model_from_its_own_files(venv, tmp_path):
    sequences = json.dumps(SEQUENCES)
    answers = json.loads(run([venv / "venv/bin/python", "-c", ANSWERS, sequences], cwd=venv, env=clean_env()))
    kit = Path(answers["module"]).parent
    assert kit.is_relative_to(venv / "venv/lib") and kit.name == "attnkit"
    for key in ("module", "data", "notebooks", "replay"):
        assert Path(answers.pop(key)).is_relative_to(kit), f"{key} found outside the installed kit"
    assert len(answers["snapshots"]) == 16 and answers["snapshots"]["400"] == "624" != answers["snapshots"]["0"]
    # the same files give the same answers as the checkout's kit (same torch, same CPU: same bits)
    ours = json.loads(run([sys.executable, "-c", ANSWERS, sequences], cwd=tmp_path, env=clean_env()))
    for key in ("module", "data", "notebooks", "replay"):
        assert Path(ours.pop(key)).is_relative_to(ROOT)
    import attnkit

    # what grading reads (code, the adder's files, the course notebooks) is the same, byte for byte
    assert answers["course"] == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert answers.pop("kit_hash") == ours.pop("kit_hash") and answers.pop("course") == ours.pop("course")
    assert answers.pop("replay_seeds") == ours.pop("replay_seeds") == ["0", "1", "2"]
    assert set(answers) == {*attnkit.PRETRAINED, "snapshots"}
    assert answers["adder"] == ["1160", "10", "1000", "0", "1000"]
    assert answers == ours


def run_notebook(venv: Path, notebook: Path) -> None:
    """Run `notebook` top to bottom in a kernel of `venv`'s Python (whatever "python3" kernels this
    machine has elsewhere) and assert that every check cell printed ✅ and no ❌."""
    spec = notebook.parent / "jupyter/kernels/attnkit-wheel"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [str(venv / "bin/python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "attnkit", "language": "python"}))
    ran = notebook.with_name("ran-" + notebook.name)
    run(
        [
            venv / "bin/jupyter",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--output",
            ran.name,
            "--ExecutePreprocessor.kernel_name=attnkit-wheel",
            "--ExecutePreprocessor.timeout=600",
            notebook,
        ],
        cwd=notebook.parent,
        env=clean_env(JUPYTER_PATH=str(notebook.parent / "jupyter")),
    )
    nb = nbformat.read(ran, as_version=4)
    checks = [c for c in nb.cells if "check" in c.get("metadata", {}).get("tags", [])]
    assert checks, f"{notebook.name} has no check cells"
    for cell in checks:
        text = "".join(
            o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )
        assert text.startswith("✅") and "❌" not in text, (notebook.name, cell.metadata.get("attnkit"), text)


def test_a_learner_gets_the_course_and_notebook_03_runs_top_to_bottom(venv):
    course = venv / "course"
    run([venv / "venv/bin/attnkit", "course", course], cwd=venv, env=clean_env())
    names = sorted(p.name for p in course.glob("*.ipynb"))
    assert names == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    run_notebook(venv / "venv", course / "03_attention_heatmaps.ipynb")
    saved = sorted(p.name for p in (course / "artifacts").iterdir())  # its figures, in the learner's folder
    assert saved and all(p.endswith((".png", ".svg")) for p in saved), saved


NB01 = "01_attention_from_scratch.ipynb"


def instructor_path(attnkit: list, where: Path) -> dict:
    """The instructor's commands with one install of the kit (`attnkit` is how to call it), in `where`:
    the student and self-study editions, then a solved and a blank notebook 01 in per-learner
    folders, graded. {file name: bytes} of what they wrote, and the grades' rows."""
    env = clean_env()
    run([*attnkit, "course", "handout", "--edition", "student"], cwd=where, env=env)
    run([*attnkit, "student", "student"], cwd=where, env=env)
    run([*attnkit, "course", "self-study", "--edition", "self-study"], cwd=where, env=env)
    run([*attnkit, "course", "complete"], cwd=where, env=env)
    for learner, edition in (("ann", "complete"), ("ben", "handout")):  # solved, and blank as handed out
        (where / "submissions" / learner).mkdir(parents=True)
        shutil.copy(where / edition / NB01, where / "submissions" / learner / NB01)
    # cal hands in the kit's own attention as his answer: the installed kit must know its own code
    cheat = nbformat.read(where / "complete" / NB01, as_version=4)
    [cell] = [c for c in cheat.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "01-attention"]
    cell.source = "my_attention = scaled_dot_product_attention"
    (where / "submissions" / "cal").mkdir()
    nbformat.write(cheat, where / "submissions" / "cal" / NB01)
    grading = run([*attnkit, "grade", "submissions"], cwd=where, env=env)  # the class folder
    with open(where / "grades.csv", encoding="utf-8", newline="") as f:
        rows = [(r["learner_file"], r["exercise"], r["passed"], r["mistake"], r["learner"]) for r in csv.DictReader(f)]
    files = {
        str(p.relative_to(where)): p.read_bytes()
        for folder in ("handout", "student", "self-study", "complete")
        for p in sorted((where / folder).glob("*.ipynb"))
    }
    return {"files": files, "rows": rows, "summary": grading}


def test_the_instructors_path_from_the_wheel_gives_what_the_clone_gives(venv, tmp_path):
    (tmp_path / "wheel").mkdir(), (tmp_path / "clone").mkdir()
    wheel = instructor_path([venv / "venv/bin/attnkit"], tmp_path / "wheel")
    clone = instructor_path([sys.executable, "-m", "attnkit"], tmp_path / "clone")
    assert wheel["files"] == clone["files"] and len(wheel["files"]) == 4 * len(list((ROOT / "notebooks").glob("0*")))
    assert wheel["rows"] == clone["rows"]
    ann, ben, cal = ([r for r in wheel["rows"] if r[0].startswith(f"submissions/{n}/")] for n in ("ann", "ben", "cal"))
    assert len(ann) == len(ben) == len(cal) == 5 and len(wheel["rows"]) == 15
    assert all(r[2] == "yes" for r in ann), ann  # solved: every exercise passes
    assert all(r[2] == "no" and r[3] == "not-done" for r in ben), ben  # blank: every exercise still to do
    assert [r[1:4] for r in cal if r[2] == "no"] == [("01-attention", "no", "kit-reference")], cal
    assert [r[4] for r in ann + ben + cal] == ["ann"] * 5 + ["ben"] * 5 + ["cal"] * 5  # each row names its learner
    assert "total: 9/15 exercises passed in 3 notebook(s)" in wheel["summary"]


def test_the_installed_grader_refuses_when_its_course_is_gone(venv, tmp_path):
    kit = run([venv / "venv/bin/python", "-c", "import attnkit; print(attnkit.__file__)"], cwd=venv, env=clean_env())
    notebooks = Path(kit.strip()).parent / "notebooks"
    assert notebooks.is_relative_to(venv / "venv"), notebooks  # only the installed copy is moved away
    submission = tmp_path / "ann" / NB01
    submission.parent.mkdir()
    shutil.copy(ROOT / "notebooks" / NB01, submission)
    notebooks.rename(notebooks.with_name("notebooks-away"))
    try:
        out = subprocess.run(
            [venv / "venv/bin/attnkit", "grade", submission, "--csv", tmp_path / "grades.csv"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=clean_env(),
        )
    finally:
        notebooks.with_name("notebooks-away").rename(notebooks)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "no course notebooks" in out.stderr and str(notebooks) in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "grades.csv").exists()
