"""Every check cell of a notebook run under nbval must print the line its edition promises: ✅ in
the course's own notebooks (their solutions pass every checker), ⏳ in the student edition (every
stub is reported as not done, and nothing raises). nbval --nbval-lax compares no outputs, so this
hook reads the check cells' output itself.

Also: nbval waits 5 s at most between two output messages of a cell once it has run; a training
cell's progress bars send thousands, and a loaded machine can leave a longer gap between two of them
("Timeout of 5 seconds exceeded waiting for output"). The cell's own limit is unchanged."""
import pytest

OUTPUT_GAP_S = 60

from attnkit.exercises.checking import checker_lines


def _expected_mark(item):
    edition = getattr(item.parent, "nb", {}).get("metadata", {}).get("attnkit", {}).get("edition", "solution")
    return "✅" if edition == "solution" else "⏳"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if hasattr(item, "output_timeout"):  # an nbval cell
        item.output_timeout = max(item.output_timeout, OUTPUT_GAP_S)
    result = yield  # a cell that raised has failed already, and this line is not reached
    cell = getattr(item, "cell", None)
    if cell is None or "check" not in cell.get("metadata", {}).get("tags", []):
        return result
    lines = checker_lines(item.test_outputs or [])
    exercise = cell.metadata.get("attnkit", {}).get("exercise", "?")
    expected = _expected_mark(item)
    if len(lines) != 1 or not lines[0].startswith(expected):
        pytest.fail(f"check cell of exercise {exercise}: expected one line starting with {expected}, got {lines}",
                    pytrace=False)
    return result
