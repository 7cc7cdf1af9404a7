"""The kit as an administrator installs it: build the sdist and a wheel from it (and a wheel
straight from the tree, which must hold the same files), install that wheel into a fresh venv
outside the repository, and from there load every model, copy the course with `attnkit course`
and run notebook 03 top to bottom in a kernel of that venv.

Slow (149 s and 260 s in two runs on 2 shared cores, most of it pip installing torch and JupyterLab from its
cache), so it runs only with ATTNKIT_WHEEL=1: `make wheel-test`.
"""

from __future__ import annotations

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
    """A fresh venv, outside the repository, with the wheel (and its pinned dependencies) installed."""
    where = tmp_path_factory.mktemp("site")
    assert ROOT not in where.parents
    run([sys.executable, "-m", "venv", where / "venv"], env=clean_env())
    run([where / "venv/bin/python", "-m", "pip", "install", "--quiet", wheels[0]], env=clean_env())
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
from attnkit.course.grading import NOTEBOOKS_DIR
sequences = json.loads(sys.argv[1])
answers = {"module": attnkit.__file__, "data": str(DATA_DIR), "notebooks": str(NOTEBOOKS_DIR),
           "adder": attnkit.load_pretrained("adder").solve(["663+497", "5+5", "999+1", "0+0", "123+877"])}
for name in attnkit.PRETRAINED[1:]:
    answers[name] = [bool(b) for b in attnkit.load_pretrained(name).predict(sequences)]
print(json.dumps(answers))
"""


def test_the_installed_kit_loads_every_model_from_its_own_files(venv, tmp_path):
    sequences = json.dumps(SEQUENCES)
    answers = json.loads(run([venv / "venv/bin/python", "-c", ANSWERS, sequences], cwd=venv, env=clean_env()))
    site = venv / "venv/lib"
    for key in ("module", "data", "notebooks"):
        assert Path(answers.pop(key)).is_relative_to(site), f"{key} found outside the installed kit"
    # the same files give the same answers as the checkout's kit (same torch, same CPU: same bits)
    ours = json.loads(run([sys.executable, "-c", ANSWERS, sequences], cwd=tmp_path, env=clean_env()))
    for key in ("module", "data", "notebooks"):
        assert Path(ours.pop(key)).is_relative_to(ROOT)
    import attnkit

    assert set(answers) == set(attnkit.PRETRAINED)
    assert answers["adder"] == ["1160", "10", "1000", "0", "1000"]
    assert answers == ours


def test_a_learner_gets_the_course_and_notebook_03_runs_top_to_bottom(venv):
    course = venv / "course"
    run([venv / "venv/bin/attnkit", "course", course], cwd=venv, env=clean_env())
    names = sorted(p.name for p in course.glob("*.ipynb"))
    assert names == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    # a kernel of the installed venv, whatever "python3" kernels this machine has elsewhere
    spec = venv / "jupyter/kernels/attnkit-wheel"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(venv / "venv/bin/python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "attnkit (wheel)",
                "language": "python",
            }
        )
    )
    env = clean_env(JUPYTER_PATH=str(venv / "jupyter"))
    run(
        [
            venv / "venv/bin/jupyter",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--output",
            "ran.ipynb",
            "--ExecutePreprocessor.kernel_name=attnkit-wheel",
            "--ExecutePreprocessor.timeout=600",
            course / "03_attention_heatmaps.ipynb",
        ],
        cwd=course,
        env=env,
    )
    nb = nbformat.read(course / "ran.ipynb", as_version=4)
    checks = [c for c in nb.cells if "check" in c.get("metadata", {}).get("tags", [])]
    assert checks, "notebook 03 has no check cells"
    for cell in checks:
        text = "".join(
            o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )
        assert text.startswith("✅") and "❌" not in text, (cell.metadata.get("attnkit"), text)
