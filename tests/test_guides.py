"""The guides cannot go stale: every shell command of docs/instructors.md runs, in order, in a
temporary folder (`attnkit` standing for `python -m attnkit`, two learners' notebook 01 handed in),
and does what the guide says; the README stays a front page; every relative link of the README and
the guides resolves, its anchor included."""

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attnkit.course.editions import student_notebook
from attnkit.course.feedback import exercises
from attnkit.course.gradebook import COLUMNS
from attnkit.course.grading import NOTEBOOKS_DIR

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "instructors.md"
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
NB01 = "01_attention_from_scratch.ipynb"
README_WORDS = 1_000  # counted outside fenced code blocks

# A shell block, with the comment above it that says why the test does not run it, if any.
BLOCK = re.compile(r"(?:<!--\s*(not run[^>]*?)\s*-->\s*\n)?^```(sh|bash)\n(.*?)^```", re.M | re.S)


def shell_blocks(text: str) -> list[tuple[str | None, str]]:
    """(why it is not run, or None; the commands) for each ```sh / ```bash block, in order."""
    return [(m.group(1), m.group(3)) for m in BLOCK.finditer(text)]


def test_the_guide_says_why_a_command_is_not_run():
    blocks = shell_blocks(GUIDE.read_text(encoding="utf-8"))
    skipped = [(why, cmd) for why, cmd in blocks if why is not None]
    assert len(blocks) - len(skipped) >= 5, "the test would run almost nothing"
    for why, cmd in skipped:
        assert re.fullmatch(r"not run by the test: \S.{10,}", why), f"no reason given above: {cmd}"
        # only what needs make (the suite, a hub, nbgrader) or a wheel build is left out
        assert re.match(r"(sudo )?make |pip ", cmd), f"a command the test could run is left out: {cmd}"


@pytest.mark.slow  # grades three notebooks and runs the pre-flight twice: about half a minute
def test_every_command_of_the_instructors_guide_runs(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    # What two learners handed in: ann the solved notebook, ben the student edition untouched.
    solved = nbformat.read(NOTEBOOKS_DIR / NB01, as_version=4)
    for learner, nb in (("ann", solved), ("ben", student_notebook(solved))):
        (tmp_path / "subs" / learner).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "subs" / learner / NB01)
    prelude = f'set -euo pipefail\nattnkit() {{ "{sys.executable}" -m attnkit "$@"; }}\n'
    env = {**os.environ, "HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"}
    for why, commands in shell_blocks(GUIDE.read_text(encoding="utf-8")):
        if why is not None:
            continue
        done = subprocess.run(
            ["bash", "-c", prelude + commands], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{commands}\nexit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"

    # Step 2 and 3: the student edition, handed out and in a learner's home.
    course = sorted(p.name for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    for folder in (tmp_path / "handout", home / "attnkit-course"):
        assert sorted(p.name for p in folder.glob("*.ipynb")) == course
        assert "### BEGIN SOLUTION" not in (folder / NB01).read_text(encoding="utf-8")
    # Step 5: a row per exercise, ann's all passed, ben's none; the class folder names the learners.
    with open(tmp_path / "grades.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == COLUMNS
    by = {learner: [r["passed"] for r in rows if r["learner"] == learner] for learner in ("ann", "ben")}
    assert len(by["ann"]) == len(by["ben"]) == 5 and len(rows) == 10
    assert set(by["ann"]) == {"yes"} and set(by["ben"]) == {"no"}
    with open(tmp_path / "week1.csv", encoding="utf-8") as f:
        week = list(csv.DictReader(f))
    assert sorted({Path(r["learner_file"]).parent.name for r in week}) == ["ann", "ben"]
    assert [r["passed"] for r in week] == [r["passed"] for r in rows]
    # Step 6: points (01-multi-head worth 5), feedback pages and both LMS files.
    canvas = list(csv.reader((tmp_path / "canvas.csv").open(encoding="utf-8")))
    assert canvas[0][3] == "SIS Login ID" and [r[3] for r in canvas[2:]] == ["ann", "ben"]
    stars = {e: s for e, (_, _, s) in exercises().items() if e.startswith("01-")}
    possible = f"{sum(stars.values()) - stars['01-multi-head'] + 5:g}"
    assert [r[5] for r in canvas[1:]] == [possible, possible, "0"], canvas
    assert (tmp_path / "feedback" / "ann.md").exists() and (tmp_path / "feedback" / "ben.html").exists()
    assert "ann" in (tmp_path / "moodle.csv").read_text(encoding="utf-8")
    shutil.rmtree(tmp_path / "subs")  # the learners' notebooks: nothing of them kept by the test


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    words = len(prose.split())
    assert words <= README_WORDS, f"README.md has {words} words outside code blocks, over {README_WORDS}"
    for guide in ("docs/learners.md", "docs/instructors.md", "CONTRIBUTING.md", "docs/RESULTS.md"):
        assert f"]({guide}" in text, f"the README does not link {guide}"


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_the_guides_resolves(page):
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not checked offline
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    assert not broken, f"{page.name}: broken links {broken}"


def test_the_readme_links_every_guide_that_exists():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        if page.exists() and page.parent.name == "docs":
            assert f"](docs/{page.name}" in readme, f"the README does not link docs/{page.name}"
