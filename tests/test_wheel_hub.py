"""The kit's wheel added to an environment built like a year-old hub (tests/compat/year-old-hub.txt):
installing it must change none of that environment's packages, and notebooks 01 and 03 must pass
every check there. Beside tests/test_wheel.py (its wheel and helpers), in a file of its own so that
`make wheel-test` builds this environment on one worker while the other builds the fresh venv.
`make compat-test` runs this file alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from test_wheel import NB01, ROOT, clean_env, pytestmark, run, run_notebook, wheels  # noqa: F401 (fixture, mark)


def installed(python: Path) -> dict:
    """{normalised name: version} of every package in that environment."""
    listed = json.loads(run([python, "-m", "pip", "list", "--format", "json"], env=clean_env()))
    return {p["name"].lower().replace("_", "-"): p["version"] for p in listed}


def test_the_wheel_changes_nothing_in_a_year_old_hub_and_notebooks_01_and_03_pass_there(wheels, tmp_path_factory):  # noqa: F811
    """An environment built like a year-old hub image (the oldest release of each series the kit
    states as its lower bound); the kit's wheel is added as an instructor adds it to a hub."""
    where = tmp_path_factory.mktemp("old-hub")
    hub = where / "venv"
    run([sys.executable, "-m", "venv", hub], env=clean_env())
    run([hub / "bin/python", "-m", "pip", "install", "--quiet", "-r", ROOT / "tests/compat/year-old-hub.txt"])
    before = installed(hub / "bin/python")
    pinned = [
        line.split("==")
        for line in (ROOT / "tests/compat/year-old-hub.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    ]
    for name, version in pinned:  # the environment is what it claims to be
        assert before[name.lower()].split("+")[0] == version, (name, before[name.lower()])
    run([hub / "bin/python", "-m", "pip", "install", "--quiet", wheels[0]], env=clean_env())
    after = installed(hub / "bin/python")
    changed = {n: (v, after.get(n)) for n, v in before.items() if after.get(n) != v}
    assert not changed, f"installing the kit changed the hub's packages: {changed}"
    assert set(after) - set(before) == {"attnkit"}, set(after) - set(before)
    course = where / "course"
    run([hub / "bin/attnkit", "course", course], cwd=where, env=clean_env())
    for name in (NB01, "03_attention_heatmaps.ipynb"):
        run_notebook(hub, course / name)
