"""Run a kit checker on a learner's definition and capture its one line."""
from __future__ import annotations

import contextlib
import io


def run_checker(exercise: str, checker_name: str, checker, learner) -> tuple[str, str]:
    """(why the kit's own solution was used, or "", the checker's line)."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        try:
            checker(learner)
        except BaseException as e:  # SystemExit, KeyboardInterrupt from the learner's code: a failed check
            return "", f"❌ {checker_name.removeprefix('check_')}: your code raised {type(e).__name__}"
    lines = printed.getvalue().strip().splitlines()
    return "", (lines[-1] if lines else "the checker printed nothing")
