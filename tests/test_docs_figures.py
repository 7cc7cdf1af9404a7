"""The README's pictures in docs/ are up to date with what they show.

docs/make_figures.py (`make figures`) draws them from the committed checkpoints and results, and
records in docs/figures.json the sha256 of each picture's inputs: the data files, the source of the
code that draws it, and the script. Here the inputs are hashed again: a picture whose inputs
changed since it was drawn is stale, and so is a PNG replaced by hand.
"""

import hashlib
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RECORD = json.loads((DOCS / "figures.json").read_text())["figures"]
sys.path.insert(0, str(DOCS))
import make_figures  # noqa: E402  (docs/ is not a package)

REDRAW = "run `make figures` and commit docs/"


def test_every_picture_is_recorded_and_drawn_by_the_script():
    assert set(RECORD) == set(make_figures.FIGURES)
    assert {p.name for p in DOCS.glob("*.png")} == set(RECORD), f"PNGs in docs/ and figures.json differ: {REDRAW}"


@pytest.mark.parametrize("name", sorted(RECORD))
def test_picture_is_small_and_as_drawn(name):
    png = DOCS / name
    assert png.stat().st_size <= 200_000, f"{name}: {png.stat().st_size} bytes, over 200 kB"
    assert hashlib.sha256(png.read_bytes()).hexdigest() == RECORD[name]["png"], (
        f"{name} is not the picture docs/make_figures.py drew: {REDRAW}"
    )


@pytest.mark.parametrize("name", sorted(RECORD))
def test_picture_is_not_older_than_its_inputs(name):
    recorded, now = RECORD[name]["inputs"], make_figures.inputs_of(name)
    changed = sorted(f for f in set(recorded) | set(now) if recorded.get(f) != now.get(f))
    assert not changed, f"docs/{name} is older than {changed}: {REDRAW}"


def test_readme_shows_every_picture():
    readme = (ROOT / "README.md").read_text()
    shown = set(re.findall(r"docs/([\w-]+\.png)", readme))
    assert set(RECORD) <= shown, f"pictures not in the README: {sorted(set(RECORD) - shown)}"
