"""What several test modules import: reading an exercise checker's one line, the system's
Chromium and axe-core's accessibility rules run in it, and processes read from /proc. Fixtures live
in conftest.py (pytest finds them by name); plain functions and constants live here, so no test
imports conftest (the repository has two conftest.py files, and `import conftest` gets whichever of
them pytest happened to load last)."""

import contextlib
import functools
import io
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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


# axe-core's WCAG 2.0 and 2.1 rules at levels A and AA (issue 40: the site and the explorers meet WCAG 2.1 AA)
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
AXE_FAILING = ("serious", "critical")  # the impacts a test fails on; "minor" and "moderate" are reported only


@functools.cache
def axe_source() -> str:
    """axe-core's browser script (docs/build_site.py fetches its pinned tarball with npm once, into build/),
    to inject into a page: page.add_script_tag(content=axe_source()), then run_axe(page)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_site", ROOT / "docs" / "build_site.py")
    assert spec and spec.loader
    build_site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_site)
    return build_site.axe_script()


def run_axe(page, context: str | None = None) -> list[dict]:
    """axe-core's WCAG 2.0/2.1 A and AA rules on `page` (or on the elements the selector `context`
    picks), injected if the page lacks it. The serious and critical violations: each {"id", "impact",
    "help", "targets": a CSS selector per failing element}."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(content=axe_source())
    return page.evaluate(
        """async ([context, tags, failing]) => {
            // preload fetches the stylesheets again, which a file:// page may not (its orientation rule then
            // reads the styles in the document only)
            const result = await axe.run(context ? {include: [context]} : document, {
                runOnly: {type: "tag", values: tags},
                resultTypes: ["violations"],
                preload: location.protocol !== "file:",
            });
            return result.violations.filter(v => failing.includes(v.impact)).map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                targets: v.nodes.map(n => n.target.flat().join(" >>> ")),
            }));
        }""",
        [context, AXE_TAGS, list(AXE_FAILING)],
    )


def axe_report(violations: list[dict]) -> str:
    """One line per rule: its id, impact, how many elements fail it, and the first few of them."""
    return "\n".join(
        f"  {v['id']} ({v['impact']}) x{len(v['targets'])}: {v['help']}; e.g. {', '.join(v['targets'][:3])}"
        for v in violations
    )


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def checker_line(check, code) -> tuple[bool, str]:
    """(passed, the line) of `check(code)`, asserting what every checker promises: exactly one line,
    starting ✅ exactly when it returns True (else ❌ or ⏳), and the global random state left alone."""
    import torch  # here: the test runner's xdist controller imports this module and runs no test

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


def cpu_seconds(pid: int) -> float:
    """The CPU time process `pid` has used (user and system); 0 once it is gone. Reads /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# A training worker past importing torch and the kit (0.8 CPU-s here) and into its first steps: a
# measure of work, not of time, so that a busy machine does not signal a worker still importing.
TRAINING_CPU_SECONDS = 1.5


def wait_training(pids, timeout: float = 120) -> None:
    """Wait until every process in `pids` has used TRAINING_CPU_SECONDS of CPU (or has ended)."""
    deadline = time.monotonic() + timeout
    while any(alive(p) and cpu_seconds(p) < TRAINING_CPU_SECONDS for p in pids):
        assert time.monotonic() < deadline, f"workers still starting after {timeout} s"
        time.sleep(0.05)


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
