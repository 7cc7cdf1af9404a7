"""Issue 23, long commands: SIGTERM and SIGHUP handled like Ctrl-C, workers that end with their
parent, a finished model kept through an interrupted evaluation or a failed save, editions written
all or nothing. Subprocess cases send real signals; tests write to tmp_path only."""

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_robustness import ENV, ROOT, SIGNAL_AT_STEP_3, assert_kept, previous, run_script, spawned_workers  # noqa: F401

from attnkit.__main__ import main
from attnkit.adder import Adder
from attnkit.adder import train as adder_train
from attnkit.adder.model import Seq2SeqConfig
from attnkit.adder.train import AdderTrainConfig, interrupted_path, train_adder
from attnkit.core.checkpoint import CheckpointWarning
from attnkit.course import editions
from attnkit.course.grading import NOTEBOOKS_DIR

from helpers import alive, wait_gone, wait_training

pytestmark = pytest.mark.usefixtures("one_thread")
SMALL = Seq2SeqConfig(d_model=16, d_ff=32, n_heads=2, n_enc_layers=1, n_dec_layers=1)
QUICK = AdderTrainConfig(max_steps=2, eval_every=1, n_val=64)


# ---------------------------------------------------------------- train adder under signals ----


@pytest.mark.parametrize("sig, status", [("SIGTERM", 143), ("SIGHUP", 129)])
def test_sigterm_and_sighup_in_train_adder_act_like_ctrl_c(previous, sig, status):  # noqa: F811 (a fixture)
    done = run_script(SIGNAL_AT_STEP_3, previous, sig)
    assert done.returncode == status, done.stderr[-2000:]
    assert_kept(previous)
    side = previous.with_name("adder.interrupted.pt")
    assert "interrupted at step" in done.stderr and str(side) in done.stderr
    with pytest.warns(CheckpointWarning, match="interrupted"):
        assert Adder.load(side, device="cpu").metrics["steps"] < 5


def test_ctrl_c_during_the_final_evaluation_keeps_the_finished_model(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(adder_train, "evaluate", interrupted)
    result = train_adder(SMALL, QUICK, out_path=tmp_path / "a.pt", progress=False)
    assert result.interrupted and result.saved_to == interrupted_path(tmp_path / "a.pt")
    assert not (tmp_path / "a.pt").exists()
    assert "validation set" in result.metrics["exact_match_on"]
    with pytest.warns(CheckpointWarning):
        kept = Adder.load(result.saved_to, device="cpu")
    for k, v in result.model.state_dict().items():
        assert torch.equal(kept.model.state_dict()[k], v)


def failing_saves(real, fail_in):
    def save(path, *args, **kwargs):
        if any(str(path).startswith(str(folder)) for folder in fail_in):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, *args, **kwargs)

    return save


def test_a_failed_final_save_keeps_the_model_in_the_temporary_folder_and_says_where(tmp_path, monkeypatch):
    rescue_dir = tmp_path / "tmp"
    rescue_dir.mkdir()
    monkeypatch.setattr(adder_train.tempfile, "gettempdir", lambda: str(rescue_dir))
    monkeypatch.setattr(adder_train, "save_checkpoint", failing_saves(adder_train.save_checkpoint, [tmp_path / "out"]))
    (tmp_path / "out").mkdir()
    with pytest.raises(OSError, match="No space left on device.*it was kept in .*attnkit-rescued") as error:
        train_adder(SMALL, QUICK, out_path=tmp_path / "out" / "a.pt", progress=False)
    rescued = list(rescue_dir.glob("attnkit-rescued-*-a.pt"))
    assert len(rescued) == 1 and str(rescued[0]) in str(error.value) and rescued[0].with_suffix(".json").exists()
    with pytest.warns(CheckpointWarning, match="below the target"):
        Adder.load(rescued[0], device="cpu")
    assert list((tmp_path / "out").iterdir()) == []


def test_when_no_save_works_the_message_says_the_model_is_lost(tmp_path, monkeypatch):
    monkeypatch.setattr(adder_train.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(adder_train, "save_checkpoint", failing_saves(adder_train.save_checkpoint, [tmp_path]))
    with pytest.raises(OSError, match="nor to .*: it is lost"):
        train_adder(SMALL, QUICK, out_path=tmp_path / "a.pt", progress=False)


def test_the_cli_reports_a_failed_save_without_a_traceback(tmp_path, monkeypatch, capsys):
    def train_pretrained(out, seed=0):
        raise OSError(errno.ENOSPC, f"could not save the trained model to {out}; it was kept in /tmp/x.pt")

    import attnkit.adder as adder_pkg

    monkeypatch.setattr(adder_pkg, "train_pretrained", train_pretrained)
    with pytest.raises(SystemExit) as stop:
        main(["train", "adder", "--out", str(tmp_path / "a.pt")])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and "train adder failed" in err and "kept in /tmp/x.pt" in err


# ---------------------------------------------------------------- train sortedness -------------

WORKERS_RUNNING = """
import sys
from attnkit.experiments.sortedness_runs import run_experiment
from attnkit.sortedness.data import DataConfig
run_experiment(encodings=("alibi", "none"), seeds=(0,), variants=False, data_dir=sys.argv[1], workers=2,
               steps=100_000, data=DataConfig(n_train=200, n_val=50, n_test=20), progress=False)
"""


def start_with_workers(out: Path):
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKERS_RUNNING, str(out)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline, workers = time.monotonic() + 120, []
    while time.monotonic() < deadline and proc.poll() is None and len(workers) < 2:
        time.sleep(0.2)
        workers = spawned_workers(proc.pid)
    assert proc.poll() is None and len(workers) == 2, proc.stderr.read() if proc.poll() is not None else ""
    wait_training(workers)
    return proc, workers


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads worker processes from /proc")
def test_workers_end_when_their_parent_is_killed(tmp_path):
    proc, workers = start_with_workers(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert wait_gone(workers, 10), "workers went on training under PID 1"
    finally:
        for w in workers:
            if alive(w):
                os.kill(w, signal.SIGKILL)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads worker processes from /proc")
def test_sigterm_to_train_sortedness_stops_it_and_its_workers(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    script = WORKERS_RUNNING.replace(
        "from attnkit.experiments",
        "from attnkit.__main__ import handle_stop_signals\nhandle_stop_signals()\nfrom attnkit.experiments",
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(out)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline, workers = time.monotonic() + 120, []
        while time.monotonic() < deadline and proc.poll() is None and len(workers) < 2:
            time.sleep(0.2)
            workers = spawned_workers(proc.pid)
        wait_training(workers)
        proc.send_signal(signal.SIGTERM)  # to the parent only, as `kill` does
        proc.wait(timeout=30)
        assert wait_gone(workers, 10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr.read()
    assert list(out.iterdir()) == []


# ---------------------------------------------------------------- editions ---------------------


def old_edition(out: Path) -> dict:
    out.mkdir()
    for nb in sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")):
        (out / nb.name).write_text("an older edition\n")
    return {p.name: p.read_text() for p in out.iterdir()}


def test_a_signal_while_the_edition_is_renamed_is_held_until_it_is_complete(tmp_path, monkeypatch):
    out = tmp_path / "student"
    old_edition(out)
    real, renamed = os.replace, []

    def replace(src, dst):
        real(src, dst)
        renamed.append(dst)
        if len(renamed) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C between the 2nd and the 3rd notebook

    monkeypatch.setattr(editions.os, "replace", replace)
    with pytest.raises(editions.EditionWritten):
        editions.write_student_edition(NOTEBOOKS_DIR, out, force=True)
    assert len(renamed) == len(list(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")))
    assert all(p.read_text() != "an older edition\n" for p in out.iterdir())
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_a_signal_while_the_temporaries_are_written_leaves_the_old_edition(tmp_path, monkeypatch):
    out = tmp_path / "student"
    before = old_edition(out)
    real_open, opened = open, []

    def open_(path, mode="r", *args, **kwargs):
        if mode == "x":
            opened.append(path)
            if len(opened) == 3:
                raise KeyboardInterrupt
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", open_)
    with pytest.raises(KeyboardInterrupt):
        editions.write_student_edition(NOTEBOOKS_DIR, out, force=True)
    monkeypatch.undo()
    assert {p.name: p.read_text() for p in out.iterdir()} == before  # no mix, no temporary


def test_the_edition_follows_the_umask(tmp_path):
    old = os.umask(0o002)
    try:
        editions.write_student_edition(NOTEBOOKS_DIR, tmp_path / "student")
    finally:
        os.umask(old)
    assert {oct(p.stat().st_mode & 0o777) for p in (tmp_path / "student").iterdir()} == {"0o664"}


def test_ctrl_c_in_the_student_command_prints_a_message_not_a_traceback(tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(editions, "write_student_edition", interrupted)
    with pytest.raises(SystemExit) as stop:
        main(["student", str(tmp_path / "s")])
    assert stop.value.code == 130
    assert "interrupted: nothing was written to" in capsys.readouterr().err


def test_messages_print_on_an_ascii_only_terminal(monkeypatch):
    import io

    from attnkit import __main__ as cli

    raw = io.BytesIO()
    monkeypatch.setattr(cli.sys, "stderr", io.TextIOWrapper(raw, encoding="ascii"))
    cli.say("interrupted: 99.95 % … kept ✅")
    cli.sys.stderr.flush()
    assert raw.getvalue() == b"interrupted: 99.95 % ? kept ?\n"
