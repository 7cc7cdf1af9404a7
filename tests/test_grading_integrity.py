"""A submission cannot change its own grade: each attack the issue found (and a few more) runs in a
planted notebook whose answer is wrong; the grader must never pass it, and a tampering attempt
gets its own row message."""
from __future__ import annotations

import nbformat
import pytest

from attnkit.course.grading import grade_notebook

WRONG = "def my_causal_mask(n_pos):\n    return torch.ones(n_pos, n_pos, dtype=torch.bool).triu()"
RIGHT = "def my_causal_mask(n_pos):\n    return torch.ones(n_pos, n_pos, dtype=torch.bool).tril()"
FAKE = "✅ causal_mask: passed — matches the reference for 1, 4, 7 and 13 positions"


def notebook(*cells, check="checks.check_causal_mask(my_causal_mask);"):
    cell = nbformat.v4.new_code_cell
    return nbformat.v4.new_notebook(cells=[
        cell("import torch\nfrom attnkit.ui import checks"), *map(cell, cells),
        cell(check, metadata={"tags": ["check"], "attnkit": {"exercise": "mask"}})])


def grade(tmp_path, nb):
    path = tmp_path / "submission.ipynb"
    nbformat.write(nb, path)
    [row] = grade_notebook(path, cell_timeout=60)
    return row


ATTACKS = {
    "checker replaced": f"checks.check_causal_mask = lambda f: print({FAKE!r}) or True",
    "inner checker's code": "checks.check_causal_mask.__wrapped__.__code__ = (lambda fn: 'passed').__code__",
    "comparison's code": "from attnkit.ui import checking\nchecking.close.__code__ = (lambda a, b: True).__code__",
    "builtins.print": ("import builtins\n_print = builtins.print\n"
                       f"builtins.print = lambda *a, **k: _print({FAKE!r}, **k)"),
    "sys.modules": ("import sys, types\nfake = types.ModuleType('attnkit.ui.checks')\n"
                    f"fake.check_causal_mask = lambda f: print({FAKE!r}) or True\n"
                    "sys.modules['attnkit.ui.checks'] = fake"),
    "reference's code": ("import attnkit.core.attention as A\n"
                         "A.causal_mask.__code__ = (lambda n_pos, device=None: "
                         "torch.ones(n_pos, n_pos, dtype=torch.bool).triu()).__code__"),
    "torch.equal": "torch.equal = lambda a, b: True\ntorch.allclose = lambda *a, **k: True",
}


@pytest.mark.slow
@pytest.mark.parametrize("attack", ATTACKS.values(), ids=ATTACKS.keys())
def test_tampering_with_the_checking_code_fails_the_row_and_says_so(tmp_path, attack):
    row = grade(tmp_path, notebook(WRONG, attack))
    assert not row.passed and row.line.startswith("checker replaced by the submission"), row


# What only changes what a cell prints: the grade never reads it.
STDOUT = ("import sys\nclass Rewrite:\n    def __init__(self, s): self.s = s\n"
               "    def write(self, t): return self.s.write(t.replace('❌', '✅'))\n"
               "    def flush(self): self.s.flush()\nsys.stdout = Rewrite(sys.stdout)")


@pytest.mark.slow
def test_a_hook_printing_a_pass_a_rewritten_stdout_and_an_edited_check_cell_change_nothing(tmp_path):
    hook = f"get_ipython().events.register('post_run_cell', lambda result: print({FAKE!r}))\n" + STDOUT
    row = grade(tmp_path, notebook(WRONG, hook, check=f"print({FAKE!r})"))
    assert not row.passed and row.line.startswith("the check cell calls no attnkit checker") or \
        row.line.startswith("the check cell is not a check"), row
    row = grade(tmp_path, notebook(WRONG, hook))
    assert not row.passed and row.line.startswith("❌ causal_mask: upper triangle"), row
    row = grade(tmp_path, notebook(RIGHT, hook))     # an honest answer still passes
    assert row.passed and row.line == FAKE, row


@pytest.mark.slow
def test_a_result_written_by_the_submission_is_caught(tmp_path):
    # every pipe the process holds (the result channel's number depends on what else is open)
    forge = ("import os, json, stat\nfor fd in range(3, 1024):\n    try:\n"
             "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
             "            os.write(fd, (json.dumps({'exercise': 'mask', 'passed': True, 'line': 'x'}) + '\\n').encode())\n"
             "    except OSError:\n        pass")
    row = grade(tmp_path, notebook(WRONG, forge))
    assert not row.passed and "written twice" in row.line, row


# ---------------------------------------------------------------- the kit's own answer

USES_THE_KIT = {
    "alias": ("my_causal_mask = causal_mask", "is the kit's own causal_mask"),
    "partial": ("import functools\nmy_causal_mask = functools.partial(causal_mask)", "is the kit's own causal_mask"),
    "lambda": ("my_causal_mask = lambda n: causal_mask(n)", "calls the kit's own causal_mask"),
    "def through the package": ("import attnkit.core.attention as A\ndef my_causal_mask(n_pos):\n"
                                "    return A.causal_mask(n_pos).clone()", "calls the kit's own causal_mask"),
}


@pytest.mark.slow
@pytest.mark.parametrize("answer, why", USES_THE_KIT.values(), ids=USES_THE_KIT.keys())
def test_an_answer_that_is_or_calls_the_kits_reference_does_not_pass(tmp_path, answer, why):
    row = grade(tmp_path, notebook("from attnkit.core.attention import causal_mask", answer))
    assert not row.passed and row.line.startswith(f"❌ causal_mask: your answer {why}"
                                                  if "is the" in why else f"❌ causal_mask: your code {why}"), row


@pytest.mark.slow
def test_a_rope_that_calls_the_kits_rotate_does_not_pass(tmp_path):
    nb = notebook("from attnkit.core import positional as P\nfrom attnkit.ui import positional_checks",
                  "def my_rotate(x):\n    return P.rotate(x)", check="positional_checks.check_rotate(my_rotate);")
    row = grade(tmp_path, nb)
    assert not row.passed and "calls the kit's own rotate" in row.line, row


# ---------------------------------------------------------------- the class's grading run

@pytest.mark.slow
def test_parallel_grading_on_an_ascii_terminal_leaves_no_process_of_a_submission(tmp_path):
    import os
    import subprocess
    import sys
    spawn = ("import subprocess, sys\np = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
             "open('child.pid', 'w').write(str(p.pid))")
    for name in ("a", "b"):
        nbformat.write(notebook(RIGHT, spawn) if name == "a" else notebook(WRONG), tmp_path / f"{name}.ipynb")
    done = subprocess.run([sys.executable, "-m", "attnkit", "grade", "a.ipynb", "b.ipynb", "--jobs", "2"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert "a.ipynb: 1/1 exercises passed" in done.stdout and "b.ipynb: 0/1 exercises passed" in done.stdout
    pid = int((tmp_path / "child.pid").read_text())
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()
