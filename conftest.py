"""Every check cell of a notebook run under nbval must print the line its edition promises: ✅ in
the course's own notebooks (their solutions pass every checker), ⏳ in the student edition (every
stub is reported as not done, and nothing raises). nbval --nbval-lax compares no outputs, so this
hook reads the check cells' output itself.

Also: nbval waits 5 s at most between two output messages of a cell once it has run; a training
cell's progress bars send thousands, and a loaded machine can leave a longer gap between two of them
("Timeout of 5 seconds exceeded waiting for output"). The cell's own limit is unchanged.

And every figure a notebook shows is checked against attnkit.ui.figure_policy while it runs: each
kernel starts with an IPython startup file that logs each displayed figure's problems, and the cell
that showed a figure breaking the policy fails. The figures are also saved, as shown, to
artifacts/figures/ (one PNG per figure: notebook, cell) to be looked at.

And the student edition repeats no work the course's own notebook did in the same run: a cell of
build/student that is the same as the solution edition's and depends on no learner's code (no stub,
no name a stub or a cell after it defined, read or changed) computes what it computed there, so it is
skipped, unless a cell that must run needs what it defines. Check cells, stubs and every cell that
reads a learner's name still run (attnkit/course/repeats.py).

And the longest files are handed out first (LONGEST_FIRST): with two workers and one file per
worker at a time (`--dist loadfile`), a long file handed out last runs alone at the end."""

import base64
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

OUTPUT_GAP_S = 60
SOLUTIONS = Path(__file__).resolve().parent / "notebooks"  # the solution edition
# The files that take longest under `make test` (measured on 2 cores), longest first; every other
# file follows in collection order. xdist's own order (most tests first, `--loadscope-reorder`,
# turned off in the Makefile) handed out the one-test browser file, a minute long, last.
LONGEST_FIRST = [
    "tests/test_browser.py",
    "notebooks/02_training_the_adder.ipynb",
    "tests/test_grading.py",
    "tests/test_claims.py",
    "tests/test_site.py",
    "tests/test_course.py",
    "tests/test_widgets.py",
    "notebooks/05_positional_encoding_extrapolation.ipynb",
    "tests/test_robustness.py",
    "tests/test_guards_runs.py",
    "notebooks/04_head_ablation.ipynb",
    "notebooks/06_how_the_adder_carries.ipynb",
    "build/student/06_how_the_adder_carries.ipynb",
    "notebooks/07_watch_it_learn.ipynb",
    "build/student/07_watch_it_learn.ipynb",
    "tests/test_broken_models.py",
]


def pytest_report_header(config):
    """Which of PyTorch's CPU kernel sets this run computes with: float32 results differ between them
    in the last digits (`make test-cpus` runs the float-sensitive tests under each)."""
    import torch

    chosen = os.environ.get("ATEN_CPU_CAPABILITY", "not set: the best this CPU has")
    return f"torch CPU kernels: {torch.backends.cpu.get_cpu_capability()} (ATEN_CPU_CAPABILITY {chosen})"


def _expected_mark(item):
    edition = getattr(item.parent, "nb", {}).get("metadata", {}).get("attnkit", {}).get("edition", "solution")
    return "✅" if edition == "solution" else "⏳"


FIGURES = Path(__file__).resolve().parent / "artifacts" / "figures"
_FIGURE_LOG: dict = {}  # "path", "read": how much of it the cells before have accounted for


def pytest_configure(config):
    """Kernels started from here on (nbval's) load the figure check: IPYTHONDIR's startup file."""
    if not config.getoption("--nbval-lax", default=False) and not config.getoption("--nbval", default=False):
        return
    if config.getoption("numprocesses", default=None) and not hasattr(config, "workerinput"):
        return  # pytest-xdist's controller runs no cells: its workers each set up their own
    home = Path(tempfile.mkdtemp(prefix="attnkit-ipython-"))
    config.add_cleanup(lambda: shutil.rmtree(home, ignore_errors=True))
    startup = home / "profile_default" / "startup"
    startup.mkdir(parents=True)
    log = home / "figures.jsonl"
    log.touch()
    (startup / "00-attnkit-figure-policy.py").write_text(
        f"from attnkit.ui.figure_policy import record_displayed_figures\nrecord_displayed_figures({str(log)!r})\n"
    )
    _FIGURE_LOG.update(path=log, read=0, home=str(home))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """nbval starts a notebook's kernel in its first cell's setup: only that kernel gets the check
    (a kernel another test starts, such as the grader's, logs nothing here)."""
    if not _FIGURE_LOG or not hasattr(item, "cell_num"):
        return (yield)
    before = os.environ.get("IPYTHONDIR")
    os.environ["IPYTHONDIR"] = _FIGURE_LOG["home"]
    try:
        return (yield)
    finally:
        if before is None:
            del os.environ["IPYTHONDIR"]
        else:
            os.environ["IPYTHONDIR"] = before


def _check_figures(item) -> None:
    """Save the cell's PNG outputs to artifacts/figures/; fail it if a figure it showed breaks the policy."""
    pngs = [o["data"]["image/png"] for o in item.test_outputs or [] if "image/png" in o.get("data", {})]
    if pngs:
        FIGURES.mkdir(parents=True, exist_ok=True)
        name = f"{Path(str(item.fspath)).stem}{'-student' if _expected_mark(item) == '⏳' else ''}-cell{item.cell_num}"
        for i, png in enumerate(pngs):
            (FIGURES / f"{name}-{i}.png").write_bytes(base64.b64decode(png))
    if not _FIGURE_LOG:
        return
    with open(_FIGURE_LOG["path"], encoding="utf-8") as log:
        log.seek(_FIGURE_LOG["read"])
        lines = log.read()
        _FIGURE_LOG["read"] = log.tell()
    found = [p for line in lines.splitlines() if line for p in json.loads(line)["problems"]]
    if found:
        pytest.fail(
            "a figure breaks the figure policy (attnkit/ui/figure_policy.py):\n  " + "\n  ".join(found), pytrace=False
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if hasattr(item, "output_timeout"):  # an nbval cell
        item.output_timeout = max(item.output_timeout, OUTPUT_GAP_S)
    result = yield  # a cell that raised has failed already, and this line is not reached
    if hasattr(item, "cell_num"):
        _check_figures(item)
    cell = getattr(item, "cell", None)
    if cell is None or "check" not in cell.get("metadata", {}).get("tags", []):
        return result
    from attnkit.exercises.checking import checker_lines  # here: the xdist controller runs no cell, needs no torch

    lines = checker_lines(item.test_outputs or [])
    exercise = cell.metadata.get("attnkit", {}).get("exercise", "?")
    expected = _expected_mark(item)
    if len(lines) != 1 or not lines[0].startswith(expected):
        pytest.fail(
            f"check cell of exercise {exercise}: expected one line starting with {expected}, got {lines}", pytrace=False
        )
    return result


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected: only what runs counts
def pytest_collection_modifyitems(config, items):
    """The longest files first; skip the student edition's cells that repeat the solution edition's
    work (when both run here)."""
    import nbformat

    from attnkit.course.repeats import cells_that_repeat_the_solution

    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: cells keep their order
    collected = {Path(str(item.fspath)) for item in items if hasattr(item, "cell_num")}
    editions: dict = {}
    for item in items:
        nb = getattr(item.parent, "nb", None)
        if nb is None or nb.get("metadata", {}).get("attnkit", {}).get("edition", "solution") == "solution":
            continue
        path = Path(str(item.fspath))
        if (SOLUTIONS / path.name) not in collected:
            continue  # the solution edition does not run in this session: the student edition runs whole
        if path not in editions:
            solution = nbformat.read(SOLUTIONS / path.name, as_version=4)
            code = lambda nb: [c for c in nb.cells if c.cell_type == "code"]  # noqa: E731
            editions[path] = cells_that_repeat_the_solution(code(nb), code(solution))
        why = editions[path].get(item.cell_num)
        if why:
            item.add_marker(pytest.mark.skip(reason=why))
