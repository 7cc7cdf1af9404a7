"""What several test modules import: reading an exercise checker's one line, the system's
Chromium, and processes read from /proc. Fixtures live in conftest.py (pytest finds them by name);
plain functions and constants live here, so no test imports conftest (the repository has two
conftest.py files, and `import conftest` gets whichever of them pytest happened to load last)."""

import contextlib
import io
import os
import time
from pathlib import Path

import torch

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# headless as root, on a machine whose network is closed: no sandbox, no background connections
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def checker_line(check, code) -> tuple[bool, str]:
    """(passed, the line) of `check(code)`, asserting what every checker promises: exactly one line,
    starting ✅ exactly when it returns True (else ❌ or ⏳), and the global random state left alone."""
    state = torch.get_rng_state()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        passed = check(code)
    lines = printed.getvalue().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0][:1] in ("✅", "❌", "⏳") and passed is lines[0].startswith("✅"), (passed, lines)
    assert torch.equal(torch.get_rng_state(), state), "the checker moved the global random numbers"
    return passed, lines[0]


def assert_hint(check, code, hint: str) -> None:
    """`check(code)` fails with a line that contains `hint`."""
    passed, line = checker_line(check, code)
    assert passed is False and line.startswith("❌"), line
    assert hint in line, line


def assert_passes(check, code) -> None:
    passed, line = checker_line(check, code)
    assert passed is True and line.startswith("✅"), line


def assert_hint_chain(check, chain) -> None:
    """Following each hint leads on, never back: chain is [(code, hint or None for a pass)], and
    every failing step's line contains its hint and differs from every line before it."""
    seen = []
    for code, hint in chain:
        passed, line = checker_line(check, code)
        if hint is None:
            assert passed, line
        else:
            assert not passed and hint in line and line not in seen, line
            seen.append(line)


def alive(pid: int) -> bool:
    """Is process `pid` running (not gone, not a zombie)? Reads /proc."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids, seconds: float) -> bool:
    """Wait up to `seconds` for every process in `pids` to be gone; True if they all are."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


def children(pid: int, command: str = "") -> list[int]:
    """The child processes of `pid`, started from any of its threads, whose command line contains
    `command`. Reads /proc."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for kid in kids:
            try:
                if command in Path(f"/proc/{kid}/cmdline").read_text(errors="replace"):
                    found.append(int(kid))
            except OSError:
                continue
    return found


def cli(capsys, monkeypatch, cwd, *args):
    """`python -m attnkit ARGS` in this process (the happy paths and refusals need no interpreter of
    their own): (exit status, stdout, stderr). The signal handlers it installs are put back."""
    import signal

    from attnkit.__main__ import main

    monkeypatch.chdir(cwd)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    capsys.readouterr()
    try:
        main([str(a) for a in args])
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    out, err = capsys.readouterr()
    return status, out, err
