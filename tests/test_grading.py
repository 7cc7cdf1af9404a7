"""A submission cannot change its own grade, and a class is graded in full: planted submissions of
notebook 01 (its student edition, a blank answer or a wrong one, plus one attack each) are graded by
the real grader and each attack gets a failed row naming the tampering; the kit's own reference
is not the learner's; a class resumes, survives Ctrl-C, bad files and stray processes."""

import csv
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from attnkit.course import gradebook, grading, grading_server
from attnkit.course.editions import student_notebook
from attnkit.course.grading import NOTEBOOKS_DIR, Row, grade_notebook
from attnkit.exercises import attention as attention_checks
from attnkit.exercises import runner

from helpers import children, cli, wait_gone

NB01 = NOTEBOOKS_DIR / "01_attention_from_scratch.ipynb"
WRONG_MASK = "def my_causal_mask(n_pos):\n    return torch.ones(n_pos, n_pos, dtype=torch.bool).triu()"
FAKE = 'lambda *a, **k: print("✅ causal_mask: passed") or True'


def submission(tmp_path, attack: str | list = "", mask=None, name=NB01.name, edit=None, solved=False):
    """Notebook 01's student edition (`solved`: the complete one) with `attack` (or each of a list of
    attacks) run in a cell of its own before the first check (and `mask` as the answer to
    01-causal-mask)."""
    nb = nbformat.read(NB01, as_version=4)
    nb = nb if solved else student_notebook(nb)
    cells = nb.cells
    first_check = next(i for i, c in enumerate(cells) if grading.exercise_of(c))
    if mask:
        [cell] = [c for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "01-causal-mask"]
        cell.source = mask
    for code in reversed([attack] if isinstance(attack, str) else attack):
        if code:
            cells.insert(first_check, nbformat.v4.new_code_cell(code))
    if edit:
        edit(cells)
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def endless_cell(marker: Path) -> str:
    """A cell that never ends, burning a core as a learner's endless loop does; it creates `marker`
    first, so that a test knows when the checking process is in it."""
    return f"open({str(marker)!r}, 'w').close()\nwhile True:\n    pass"


def wait_for(path: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"no {path.name} after {seconds} s"
        time.sleep(0.05)


def rows(path, **kwargs):
    return {r.exercise: r for r in grade_notebook(path, **kwargs)}


# Attacks from notebook 01's cells on the grader as it was when checkers ran beside the learner's code
# (issue 37's red team). Now the learner's code runs in a process of its own: none of them reaches a
# checker, so each submission is graded exactly as the same submission without the attack.
def code(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


ATTACKS = {
    "checker replaced": f"attention_checks.check_causal_mask = {FAKE}",
    "evaluate replaced": code("""
        from attnkit.exercises.checking import Result
        attention_checks.check_causal_mask.evaluate = lambda f: Result('01-causal-mask', True, '✅')"""),
    "builtins.print": "import builtins\nbuiltins.print = lambda *a, **k: None",
    "post_run_cell hook": "get_ipython().events.register('post_run_cell', lambda result: print('✅ passed'))",
    "sys.modules": "import sys, types\nsys.modules['attnkit.exercises.attention'] = types.ModuleType('x')",
    "stdout": "import sys, io\nsys.stdout = io.StringIO()",
    "__code__": "attention_checks.check_causal_mask.__wrapped__.__code__ = (lambda fn: 'passed').__code__",
    "torch.equal": "torch.equal = lambda a, b: True",
    "Tensor.__ne__": "torch.Tensor.__ne__ = lambda a, b: torch.zeros_like(a, dtype=torch.bool)",
    "tracer": "import sys\nsys.settrace(lambda *a: None)",
    "reference's code": code("""
        import attnkit.core.attention as A
        A.causal_mask.__code__ = (lambda n_pos, device=None: torch.ones(n_pos, n_pos, dtype=torch.bool).triu()).__code__
        """),
    "comparison's code": code("""
        from attnkit.exercises import checking
        checking.close.__code__ = (lambda a, b: True).__code__"""),
    "fake Result class": code("""
        from attnkit.exercises import checking
        class R:
            def __init__(self, e, p, line, m=''):
                self.exercise, self.passed, self.line, self.mistake = e, True, line, ''
        checking.Result = R"""),
    "a thread that keeps patching": code("""
        import threading, time
        def patch():
            while True:
                torch.equal = torch.allclose = lambda *a, **k: True
                time.sleep(0.001)
        threading.Thread(target=patch, daemon=True).start()"""),
    "rng restore": code("""
        _real = torch.set_rng_state
        def fake(s):
            torch.equal = lambda a, b: True
            _real(s)
        torch.set_rng_state = fake"""),
    "the report pipe from argv and the token": code("""
        import json, os, sys
        guess = os.environ.get('ATTNKIT_GRADING_JOB')
        for ex in ['01-causal-mask', '01-split-heads', '01-attention', '01-merge-heads', '01-multi-head']:
            line = {'nonce': guess, 'event': 'result', 'exercise': ex, 'passed': True, 'line': '✅', 'mistake': ''}
            try:
                os.write(int(sys.argv[1]), (json.dumps(line) + '\\n').encode())
            except (OSError, ValueError, IndexError):
                pass"""),
    "gc and the stack for a nonce": code("""
        import gc, sys
        nonces = [o for o in gc.get_objects() if isinstance(o, dict) and 'nonce' in o]
        f = sys._getframe()
        while f is not None:
            if isinstance(f.f_locals.get('exercises'), dict):
                f.f_locals['exercises'].clear()
            f = f.f_back
        assert not nonces, nonces"""),
    "memory bomb": code("""
        import torch
        try:  # 64 GiB asked for, 1 GiB at a time (untouched: the limit counts address space, not pages written)
            hog = [torch.empty(2**28) for _ in range(64)]
            open('hog.txt', 'w').write('granted')
        except RuntimeError:
            open('hog.txt', 'w').write('refused')"""),
    "a file-size bomb": code("""
        with open('big.bin', 'wb') as f:
            f.seek(2**31)  # 2 GiB long: the limit counts a file's length, written or sparse
            f.write(b'x')"""),
}
BASELINE: dict = {}


def graded_on_merit(tmp_path, code):
    """The rows of notebook 01 solved but for a wrong mask, with `code` in a cell before the first
    check, and the rows of the same submission without it."""
    if not BASELINE:  # made by whichever test comes first (under -n, on its own worker)
        (tmp_path / "base").mkdir(exist_ok=True)
        base = submission(tmp_path / "base", mask=WRONG_MASK, solved=True)
        BASELINE.update({e: (r.passed, r.line, r.mistake) for e, r in rows(base).items()})
    graded = rows(submission(tmp_path, code, mask=WRONG_MASK, solved=True))
    return {e: (r.passed, r.line, r.mistake) for e, r in graded.items()}, BASELINE


@pytest.mark.slow
def test_the_attacks_from_the_learners_cells_change_nothing(tmp_path):
    """All of them in one submission, each in a cell of its own (one grading, not 19; should this fail,
    graded_on_merit(tmp_path, ATTACKS[name]) tells which)."""
    (tmp_path / "base").mkdir()
    graded, baseline = graded_on_merit(tmp_path, list(ATTACKS.values()))
    assert graded == baseline, (graded, list(ATTACKS))
    big = tmp_path / "big.bin"  # the file-size bomb's: held to the learner's file limit, not 2 GiB long
    assert big.exists() and big.stat().st_size <= runner.FILE_LIMIT, big.stat().st_size
    assert (tmp_path / "hog.txt").read_text() == "refused"  # the memory bomb's: held to the memory limit
    assert baseline["01-causal-mask"][1].startswith("❌ causal_mask: upper triangle"), baseline
    assert [passed for passed, _, _ in baseline.values()] == [False, True, True, True, True], baseline  # honest ones


@pytest.mark.slow
def test_a_lying_tensor_subclass_is_refused_by_name(tmp_path):
    lie = (
        "class Lie(torch.Tensor):\n    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        return True\n"
        "def my_causal_mask(n_pos):\n    return torch.ones(n_pos, n_pos, dtype=torch.bool).triu().as_subclass(Lie)"
    )
    row = rows(submission(tmp_path, mask=lie))["01-causal-mask"]
    assert not row.passed and "is a Lie, expected a torch tensor" in row.line, row


@pytest.mark.slow
def test_writing_on_every_descriptor_ends_the_learners_process_not_the_grade(tmp_path):
    """The only descriptor open in the learner's process is its socket: a forged message on it breaks
    the conversation, and every later exercise fails naming that, never passes."""
    forge = (
        "import os, json\nline = (json.dumps({'value': True, 'event': 'result', 'passed': True}) + '\\n').encode()\n"
        "for fd in range(3, 1024):\n    try:\n        os.write(fd, (8).to_bytes(8, 'little') + b'not json' + line)\n"
        "    except OSError:\n        pass"
    )
    graded = rows(submission(tmp_path, forge, mask=WRONG_MASK.replace("triu", "tril")))
    assert len(graded) == 5 and not any(r.passed for r in graded.values()), graded
    assert all(r.mistake == "process-ended" and "stopped answering" in r.line for r in graded.values()), graded


@pytest.mark.slow
def test_the_learners_process_has_no_network_and_cannot_touch_the_graders_memory(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port, found = listener.getsockname()[1], tmp_path / "found.txt"
    probe = (
        "import os, socket\nopened = []\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n    opened.append('network')\n"
        "except OSError:\n    pass\nme = os.readlink('/proc/self')\n"
        "for pid in [p for p in os.listdir('/proc') if p.isdigit() and p != me]:\n    try:\n"
        "        start = int(open(f'/proc/{pid}/maps').readline().split('-')[0], 16)\n"
        "        with open(f'/proc/{pid}/mem', 'rb') as mem:\n            mem.seek(start)\n            mem.read(1)\n"
        "        opened.append(pid)\n    except (OSError, ValueError):\n        pass\n"
        f"open({str(found)!r}, 'w').write(' '.join(opened))"
    )
    rows(submission(tmp_path, probe))
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()
    readable = set(found.read_text().split())
    # the grader, its server and the checking process are not dumpable: a process of the same user
    # (the learner's) can neither read nor write their memory
    server = grading_server.get()
    assert str(os.getpid()) not in readable and (server is None or str(server.proc.pid) not in readable), readable


@pytest.mark.slow
@pytest.mark.skipif(
    runner.cgroup_dir("probe") is None and os.getuid() == 0, reason="no pids cgroup and root: no process limit here"
)
def test_a_fork_bomb_is_held_to_the_process_limit_and_graded_on_merit(tmp_path):
    graded, baseline = graded_on_merit(tmp_path, "import os\nwhile True:\n    os.fork()")
    assert graded == baseline, graded


@pytest.mark.slow
def test_the_kit_reference_watch_holds_where_the_learners_code_runs(tmp_path):
    """Calls of the kit's reference that slipped past the watch when it ran beside the checker: the
    tracer switched off inside the answer, the call made in another thread, a copy of its code."""
    answers = {
        "switched off": "def my_causal_mask(n_pos):\n    import sys\n    sys.settrace(None)\n"
        "    return causal_mask(n_pos)",
        "in a thread": "def my_causal_mask(n_pos):\n    import threading\n    out = []\n"
        "    t = threading.Thread(target=lambda: out.append(causal_mask(n_pos)))\n"
        "    t.start(); t.join()\n    return out[0]",
        "a copy of its code": "import types\nfrom attnkit.core import attention as A\n"
        "my_causal_mask = types.FunctionType(A.causal_mask.__code__.replace(co_filename='mine.py', co_firstlineno=3), "
        "A.__dict__, 'my_causal_mask', A.causal_mask.__defaults__)",
    }
    for name, answer in answers.items():
        (tmp_path / name).mkdir()
        row = rows(submission(tmp_path / name, mask=answer))["01-causal-mask"]
        assert not row.passed and row.mistake == "kit-reference", (name, row)


@pytest.mark.slow
@pytest.mark.skipif(not grading_server.possible(), reason="no grading server here (not Linux)")
@pytest.mark.skipif(os.environ.get("ATTNKIT_GRADING_SERVER") == "0", reason="the grading server is switched off")
def test_each_notebook_gets_a_fresh_checking_process_from_the_server(tmp_path):
    """The server forks every checking process from the state it had before any submission ran: one
    submission's tampering does not reach the next one's, graded by the same server (had the first
    one's rewritten reference causal_mask survived, the correct mask below would fail)."""
    first = tmp_path / "a"
    first.mkdir()
    assert not any(r.passed for r in rows(submission(first, ATTACKS["reference's code"])).values())
    server = grading_server.get()
    solved = tmp_path / "b"
    solved.mkdir()
    nbformat.write(nbformat.read(NB01, as_version=4), solved / NB01.name)
    graded = rows(solved / NB01.name)
    assert len(graded) == 5 and all(r.passed for r in graded.values()), graded
    assert grading_server.get() is server and server.proc.poll() is None


@pytest.mark.slow
def test_without_the_server_a_process_per_notebook_grades_the_same(tmp_path, monkeypatch):
    """Where there is no grading server (not Linux), each notebook starts its own checking process."""
    path = submission(tmp_path, ATTACKS["builtins.print"], mask=WRONG_MASK)
    served = rows(path)
    monkeypatch.setenv("ATTNKIT_GRADING_SERVER", "0")
    assert grading_server.get() is None
    assert rows(path) == served and [r.mistake for r in served.values()][1:] == ["not-done"] * 4, served


@pytest.mark.slow
def test_an_edited_or_deleted_check_cell_changes_nothing(tmp_path):
    def edit(cells):
        for cell in cells:
            if grading.exercise_of(cell) == "01-causal-mask":
                cell.source = 'print("✅ causal_mask: passed")'
        cells[:] = [c for c in cells if grading.exercise_of(c) != "01-split-heads"]

    graded = rows(submission(tmp_path, mask=WRONG_MASK, edit=edit))
    assert graded["01-causal-mask"].line.startswith("❌ causal_mask: upper triangle")
    deleted = graded["01-split-heads"]
    assert not deleted.passed and deleted.line.startswith("⏳") and "its check cell was deleted" in deleted.line


@pytest.mark.slow
def test_the_kits_own_reference_is_not_the_learners(tmp_path):
    answer = "def my_attention(q, k, v, mask=None):\n    return scaled_dot_product_attention(q, k, v, mask)"

    def edit(cells):
        [cell] = [c for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "01-attention"]
        cell.source = answer

    row = rows(submission(tmp_path, mask="my_causal_mask = causal_mask", edit=edit))
    assert not row["01-attention"].passed and row["01-attention"].mistake == "kit-reference"
    assert "calls the kit's own attnkit.core.attention.scaled_dot_product_attention" in row["01-attention"].line
    assert "is the kit's own attnkit.core.attention.causal_mask" in row["01-causal-mask"].line


def test_is_wraps_subclasses_or_calls_the_reference_in_the_notebook_too(capsys):
    import functools

    from attnkit.core.attention import MultiHeadAttention, scaled_dot_product_attention
    from attnkit.interp import patching

    def calls(q, k, v, mask=None):
        return scaled_dot_product_attention(q, k, v, mask)

    class Sub(MultiHeadAttention):
        pass

    from attnkit.exercises import patching as patching_checks

    for check, answer, word in [
        (attention_checks.check_scaled_dot_product_attention, scaled_dot_product_attention, "is"),
        (attention_checks.check_scaled_dot_product_attention, functools.partial(scaled_dot_product_attention), "wraps"),
        (attention_checks.check_scaled_dot_product_attention, calls, "calls"),
        (attention_checks.check_multi_head_attention, Sub, "subclasses"),
        (patching_checks.check_patch_hook, patching.head_patch_hook, "is"),
    ]:
        assert check(answer) is False
        line = capsys.readouterr().out
        assert f"{word} the kit's own" in line and line.startswith("❌"), line
    # the checker's own comparison with the reference is not the learner's call
    assert attention_checks.check_scaled_dot_product_attention(_own_attention) is True


def _own_attention(q, k, v, mask=None):
    import math

    import torch

    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1)
    if mask is not None:
        weights = weights * mask.any(-1, keepdim=True)
    return weights @ v, weights


@pytest.mark.slow
def test_every_process_a_submission_started_is_gone_when_its_notebook_ends(tmp_path):
    """A started program, a daemon in its own session and a process double-forked from the learner's
    cells each write a heartbeat (as one rewriting the gradebook after the grader would): none beats
    once the notebook's rows are back."""
    beat = "import os, sys, time\nwhile True:\n    open(sys.argv[1], 'a').write('.')\n    time.sleep(0.05)\n"
    (tmp_path / "beat.py").write_text(beat)
    hearts = [tmp_path / f"heart{i}" for i in range(3)]
    spawn = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(tmp_path / 'beat.py')!r}, {str(hearts[0])!r}])\n"
        f"subprocess.Popen([sys.executable, {str(tmp_path / 'beat.py')!r}, {str(hearts[1])!r}],\n"
        "                 start_new_session=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        while True:\n"
        f"            open({str(hearts[2])!r}, 'a').write('.')\n            time.sleep(0.05)\n    os._exit(0)\n"
        f"while not all(os.path.exists(p) for p in {[str(h) for h in hearts]!r}):\n    time.sleep(0.01)"
    )
    rows(submission(tmp_path, spawn))
    assert all(h.exists() for h in hearts)
    time.sleep(0.5)
    sizes = [h.stat().st_size for h in hearts]
    time.sleep(1.5)
    assert [h.stat().st_size for h in hearts] == sizes, "a process of the submission outlived its notebook"


def test_a_file_that_is_not_a_notebook_gets_a_failed_row_per_exercise(tmp_path):
    path = tmp_path / "alice_02_training_the_adder.ipynb"
    path.write_text("{ not json")
    graded = grade_notebook(path)
    assert [r.exercise for r in graded] == ["02-shift", "02-loss", "02-greedy", "02-accuracy"]
    assert all(not r.passed and r.line.startswith("could not read the notebook") for r in graded)
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    every = [
        e
        for nb in sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
        for e in grading.exercise_ids(nbformat.read(nb, as_version=4))
    ]
    assert len(every) == 27 and [(r.exercise, r.passed) for r in grade_notebook(other)] == [(e, False) for e in every]


def test_malformed_check_metadata_does_not_stop_the_class():
    nb = student_notebook(nbformat.read(NB01, as_version=4))
    cell = next(c for c in nb.cells if grading.exercise_of(c) == "01-causal-mask")
    for bad in ("oops", {"exercise": 3}, None):
        cell.metadata["attnkit"] = bad
        items, expected = grading.plan(nb, nbformat.read(NB01, as_version=4))
        assert expected[0] == "01-causal-mask" and items[-1]["exercise"] == "01-causal-mask" and items[-1]["deleted"]


def test_cells_no_exercise_needs_are_not_run():
    nb = nbformat.read(NOTEBOOKS_DIR / "02_training_the_adder.ipynb", as_version=4)
    items, _ = grading.plan(nb, nb)
    sources = [it["source"] for it in items]
    assert not any("train_adder(Seq2SeqConfig()" in s for s in sources)  # the training demo
    assert any("def my_greedy" in s for s in sources)
    nb.cells[[i for i, c in enumerate(nb.cells) if "train_adder(Seq2SeqConfig()" in c.source][0]].source += "\nx = 1"
    items, _ = grading.plan(nb, nbformat.read(NOTEBOOKS_DIR / "02_training_the_adder.ipynb", as_version=4))
    assert any("train_adder(Seq2SeqConfig()" in it["source"] for it in items)  # changed: the learner's, run


# ---------------------------------------------------------------- a class


def fake_grade(failing=None):
    def grade(name, cell_timeout, notebooks_dir):
        if failing and name.endswith(failing):
            raise KeyboardInterrupt
        return [Row(name, "01-causal-mask", True, "✅ ok"), Row(name, "01-attention", False, "❌ no", "x")]

    return grade


def test_rows_are_kept_as_they_come_and_a_rerun_resumes(tmp_path):
    out = tmp_path / "grades.csv"
    names = [str(tmp_path / f"s{i}.ipynb") for i in range(5)]
    with pytest.raises(KeyboardInterrupt):
        gradebook.grade_class(names, out, grade=fake_grade(failing="s3.ipynb"))
    kept = list(csv.DictReader(out.open(encoding="utf-8")))
    files = [r["learner_file"] for r in kept]
    # every notebook graded before the interrupt is kept (s4 too, if the worker got to it), s3 is not
    assert files[:6] == [n for n in names[:3] for _ in range(2)] and names[3] not in files
    assert list(kept[0]) == ["learner_file", "exercise", "passed", "line", "mistake", "learner"]
    all_rows, graded = gradebook.grade_class(names, out, jobs=2, grade=fake_grade())
    assert names[3] in graded and set(graded) <= set(names[3:]) and len(all_rows) == 10
    assert [r.learner_file for r in all_rows][::2] == names  # in the order given
    _, graded = gradebook.grade_class(names, out, regrade=True, grade=fake_grade())
    assert sorted(graded) == names
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a grades table written by attnkit"):
        gradebook.grade_class(names, tmp_path / "notes.csv", grade=fake_grade())


def test_the_table_is_written_with_the_users_umask(tmp_path):
    old = os.umask(0o027)
    try:
        gradebook.write_csv([Row("a", "x", True, "✅")], tmp_path / "g.csv")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "g.csv").stat().st_mode) == 0o640


@pytest.mark.parametrize("value, problem", [("nan", "finite"), ("inf", "finite"), ("2.5", "at least 10")])
def test_cell_timeout_is_validated(tmp_path, capsys, monkeypatch, value, problem):
    status, _, err = cli(capsys, monkeypatch, tmp_path, "grade", NB01, "--cell-timeout", value, "--csv", "g.csv")
    assert status == 2 and problem in err and not (tmp_path / "g.csv").exists()


def test_the_summary_prints_on_an_ascii_terminal():
    text = gradebook.summary([Row("a.ipynb", "x", True, "✅ x: passed — ok"), Row("a.ipynb", "y", False, "❌ y: kᵀ")])
    shown = gradebook.printable(text, "ascii")
    shown.encode("ascii")
    assert "[fail] y: k^T" in shown and gradebook.printable(text, "utf-8") == text


def test_preflight_stops_with_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(gradebook, "KIT_DIR", tmp_path / "elsewhere" / "attnkit")
    with pytest.raises(gradebook.GradingStopped, match="imports attnkit from .*not this kit"):
        gradebook.preflight([str(NB01)], 120, 1)


@pytest.mark.slow
def test_preflight_refuses_an_environment_where_the_solutions_fail(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    nb = nbformat.read(NB01, as_version=4)
    [cell] = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "01-causal-mask"]
    cell.source = WRONG_MASK
    nbformat.write(nb, course / NB01.name)
    with pytest.raises(gradebook.GradingStopped, match="the course's own solutions do not pass .*01-causal-mask"):
        gradebook.preflight([str(tmp_path / NB01.name)], 120, 1, notebooks_dir=course)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_checking_process_ends_itself_when_the_grader_dies(tmp_path):
    """kill -9 of `attnkit grade` leaves nobody to stop an endless cell: its checking process ends itself."""
    marker = tmp_path / "looping"
    looping = submission(tmp_path, endless_cell(marker), name="b_" + NB01.name)
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnkit", "grade", str(looping), "--no-preflight", "--cell-timeout", "300"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    runners: list[int] = []
    served = grading_server.possible() and os.environ.get("ATTNKIT_GRADING_SERVER") != "0"
    expected = 2 if served else 1  # the grading server and its checking process, or a process of its own
    try:
        deadline = time.monotonic() + 120
        while len(runners) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
            runners = [p for r in children(proc.pid, "attnkit.exercises.runner") for p in (r, *children(r))]
        assert len(runners) == expected, f"checking processes found: {runners}"
        wait_for(marker)
        proc.kill()
        proc.wait(timeout=30)
        assert wait_gone(runners, 10), "the checking process outlived its grader"
    finally:  # a failing run leaves no process burning a core
        proc.kill()
        for pid in runners:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.slow
def test_ctrl_c_keeps_what_was_graded(tmp_path):
    done = submission(tmp_path, name="a_" + NB01.name)
    marker = tmp_path / "looping"
    looping = submission(tmp_path, endless_cell(marker), name="b_" + NB01.name)
    out = tmp_path / "grades.csv"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnkit",
            "grade",
            str(done),
            str(looping),
            "--csv",
            str(out),
            "--no-preflight",
            "--cell-timeout",
            "300",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    wait_for(out)  # the first notebook is graded and kept
    wait_for(marker)  # the second is in its endless cell
    start = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - start < 10 and proc.returncode == 130, err
    assert "1 notebook(s) graded in this run are kept" in err and "Traceback" not in err
    assert {r["learner_file"] for r in csv.DictReader(out.open(encoding="utf-8"))} == {str(done)}


def test_the_kits_hash_covers_the_course_notebooks_the_check_cells_come_from(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    for source in grading.course_notebooks():
        shutil.copy(source, course / source.name)
    assert gradebook.kit_hash(course) == gradebook.kit_hash()  # the same files, wherever they lie
    edited = course / NB01.name
    edited.write_text(edited.read_text().replace("✅", "✓", 1))
    assert gradebook.kit_hash(course) != gradebook.kit_hash()


RECORDER = code("""
    import pickle
    import numpy as np
    def _key(args):
        out = []
        for a in args:
            if isinstance(a, torch.Tensor):
                out.append(("tensor", tuple(a.shape), a.detach().numpy().tobytes()))
            elif isinstance(a, np.ndarray):
                out.append(("array", a.shape, a.tobytes()))
            elif isinstance(a, (list, tuple)):
                out.append(_key(a))
            else:
                out.append(a if isinstance(a, (int, float, str, bool, type(None))) else type(a).__name__)
        return pickle.dumps(out)
    _seen = {}
    def _recording(fn):
        def wrapper(*args, **kwargs):
            try:
                _seen[_key(args)] = fn(*args, **kwargs)
            except Exception as e:
                _seen[_key(args)] = e
            if isinstance(_seen[_key(args)], Exception):
                raise _seen[_key(args)]
            return _seen[_key(args)]
        return wrapper
    def _lookup(*args, **kwargs):
        if isinstance(_seen[_key(args)], Exception):
            raise _seen[_key(args)]
        return _seen[_key(args)]
    """)
HARD_CODED = [
    "01-causal-mask",
    "02-shift",
    "03-row-entropy",
    "04-mean-z",
    "05-sinusoidal-table",
    "06-normalised-effect",
]


@pytest.mark.slow
@pytest.mark.parametrize("exercise", HARD_CODED)
def test_an_answer_hard_coded_to_the_notebooks_cases_passes_there_and_fails_the_grade(tmp_path, exercise):
    """A dry run of the notebook's own check records the right answers (here from the solution; a
    learner would take them from the kit); the answer then only looks them up. The notebook's check
    passes it; the grader's hidden cases (fresh values and sizes, from the grading seed) do not."""
    from attnkit.exercises import registry

    [source] = [p for p in grading.course_notebooks() if p.name.startswith(exercise[:2])]
    nb = nbformat.read(source, as_version=4)
    answer = registry()[exercise].answer
    [index] = [i for i, c in enumerate(nb.cells) if grading.exercise_of(c) == exercise]
    checker = registry()[exercise].check
    check = f"__import__({checker.__module__!r}, fromlist=['_']).{checker.__name__}({answer})"
    verdict = tmp_path / "in-the-notebook.txt"
    cheat = f"{RECORDER}\n{answer} = _recording({answer})\n{check}\n{answer} = _lookup\n"
    cheat += f"with open({str(verdict)!r}, 'w') as f:\n    f.write(str({check}))"
    nb.cells.insert(index, nbformat.v4.new_code_cell(cheat))
    # The notebook ends with this exercise's check: what follows only costs time here (the solution
    # edition's full marks are tests/test_course.py's), and the later exercises' rows say "not defined".
    nb.cells = nb.cells[: index + 2]
    nbformat.write(nb, tmp_path / source.name)
    graded = rows(tmp_path / source.name)
    assert verdict.read_text() == "True", "the looked-up answers should pass the notebook's own cases"
    assert not graded[exercise].passed and graded[exercise].mistake == "hidden-case", graded[exercise]
    # the row (and so a feedback page) names no input the grader tried
    assert "right on the notebook's cases, wrong on others the grader tried" in graded[exercise].line
    earlier = list(graded)[: list(graded).index(exercise)]
    assert all(graded[e].passed for e in earlier), graded  # the ones before it on merit: the solutions
