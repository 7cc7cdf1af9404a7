"""What several test modules share: one torch thread, the system's Chromium (or a skip, never
a skip under CI), and reading an exercise checker's one line."""

import contextlib
import io
import os
import signal
from pathlib import Path

import pytest
import torch

# A test run started in the background by a shell without job control inherits SIGINT ignored, and
# every process a test starts would inherit that too, so the Ctrl-C tests could not interrupt them.
# A handler (unlike SIG_IGN) is reset to the default in a new program: each child gets a terminal's.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="module")
def adder():
    """The committed, trained adder from data/ on the CPU, loaded once per test module (tests that
    need an untrained one, test_patching and test_ablation, define their own)."""
    from attnkit.adder import Adder

    return Adder.load(device="cpu")


@pytest.fixture(scope="module")
def one_thread():
    """The kit's models are tiny: one thread is as fast, and far faster when the cores are shared."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def chromium() -> str:
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return str(CHROMIUM)
    message = (
        f"Chromium not found at {CHROMIUM}: `make test` installs it (apt-get install chromium), "
        f"or set CHROMIUM=/path/to/chromium"
    )
    if in_ci():
        pytest.fail(message + " — CI must run the browser tests")
    pytest.skip(message)
