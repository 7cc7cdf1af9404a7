"""What an install brings: the package states ranges (never `==`), whose lower bounds are the versions
the year-old hub environment tests (tests/compat/year-old-hub.txt, `make compat-test`); the lock,
constraints.txt, pins every package this environment holds; environment.yml installs what `make lab`
installs; the license is stated where a university looks for it."""

from __future__ import annotations

import re
import subprocess
import tomllib
from importlib.metadata import distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins(path: Path) -> dict[str, str]:
    """{normalised name: version} of a file of `name==version` lines, each with an optional
    environment marker: the lines whose marker this Python meets."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            [spec] = list(req.specifier)
            assert spec.operator == "==", line
            if req.marker is None or req.marker.evaluate():
                out[normal(req.name)] = spec.version
    return out


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_package_states_ranges_whose_lower_bounds_the_year_old_hub_tests():
    tested = pins(ROOT / "tests/compat/year-old-hub.txt")
    stated = [Requirement(r) for r in PYPROJECT["dependencies"] + PYPROJECT["optional-dependencies"]["lab"]]
    assert "jupyterlab" not in {normal(r.name) for r in map(Requirement, PYPROJECT["dependencies"])}
    for req in stated:
        [spec] = list(req.specifier)  # one lower bound, no upper bound, no exact pin
        assert spec.operator == ">=", req
        assert Version(spec.version) == Version(tested[normal(req.name)]), (req, tested.get(normal(req.name)))


def test_the_lock_pins_every_package_of_this_environment_at_its_installed_version():
    locked = pins(ROOT / "constraints.txt")
    installed = {normal(d.metadata["Name"]): d.version for d in distributions()}
    for name, version in installed.items():
        if name in ("attnkit", "pip"):
            continue
        assert name in locked, f"{name} {version} is installed but not in constraints.txt"
        assert Version(version).public == Version(locked[name]).public, (name, version, locked[name])
    # the lock holds back ipywidgets for VS Code (README): its front-end packages go with it
    assert (locked["ipywidgets"], locked["jupyterlab-widgets"], locked["widgetsnbextension"]) == (
        "8.1.8",
        "3.0.16",
        "4.0.15",
    )


def make_lab_install() -> set[str]:
    """The pip options and requirements of `make lab`'s install, as the Makefile would run it on Linux."""
    shown = subprocess.run(
        ["make", "-n", "-B", "-s", ".venv/.installed-lab", "TORCH_INDEX=https://download.pytorch.org/whl/cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: set[str] = set()
    for command in re.findall(r"pip install ([^\n|]*)", shown):
        words = command.replace("'", "").split()
        for flag in ("-c", "--extra-index-url", "-e"):
            found |= {f"{flag} {words[i + 1]}" for i, w in enumerate(words[:-1]) if w == flag}
    return found


def test_environment_yml_installs_what_make_lab_installs():
    text = (ROOT / "environment.yml").read_text()
    listed = {line.strip()[2:].replace('"', "") for line in text.split("- pip:")[1].splitlines() if line.strip()}
    assert (
        listed
        == make_lab_install()
        == {
            "--extra-index-url https://download.pytorch.org/whl/cpu",
            "-c constraints.txt",
            "-e .[lab]",
        }
    )
    assert "python=3.11" in text


def test_the_kit_is_mit_licensed_and_citable():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert PYPROJECT["license"] == "MIT" and PYPROJECT["license-files"] == ["LICENSE"]
    citation = (ROOT / "CITATION.cff").read_text()
    assert "cff-version: 1.2.0" in citation and "license: MIT" in citation and "title:" in citation


def test_make_lab_opens_the_learners_edition_and_never_the_solutions():
    shown = subprocess.run(["make", "-n", "-s", "lab"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = [line for line in shown.splitlines() if "attnkit course" in line or "jupyter lab" in line]
    assert len(lines) == 2, shown
    write, open_lab = lines
    assert "attnkit course self-study --edition self-study --keep-changed" in write  # never overwrites their work
    assert open_lab.rstrip().endswith(" self-study/") and "notebooks" not in open_lab
