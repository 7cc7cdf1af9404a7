"""The checking process of `attnkit grade`: python -I -m attnkit.exercises.runner FD.

It reads one job from stdin — the submission's cells to run, in order, and where each exercise is
checked — then imports every checker and snapshots what they rely on (integrity.Snapshot) BEFORE
the submission's first cell runs. Cells run in a plain IPython shell (magics work, nothing is
displayed). At an exercise's place the runner itself calls the kit's checker on the learner's
object (the check cell's code is not what grades), comparing the snapshot before and after: any
change is reported as tampering and never as a pass. Reports go, as JSON lines carrying the job's
nonce, to the pipe FD; stdout and stderr are the submission's and nobody reads them.

The grader, not this process, keeps time: it kills the whole process group when a cell or check
runs over its limit, and every process the submission started when the notebook ends; should the
grader die, this process ends itself (exit_with_the_grader).

On Linux the grader starts this module once per grading run as a server (`--serve FD`, serve()):
it imports torch, IPython and every checker once, then forks one checking process per notebook
(`_job`), which runs exactly as above from that fresh state, so a notebook's checking process no
longer spends a second and a half importing torch. A forked checking process is a child subreaper
(the processes a submission double-forks stay its descendants, where the grader finds and kills
them), and it waits to be killed once it has reported.
"""

from __future__ import annotations

import json
import os
import sys


def exit_with_the_grader(grader: int, every: float = 0.5) -> None:
    """The grader keeps time: if it dies (kill -9, a crash, a closed laptop lid), nobody would stop an
    endless cell, so this process ends itself once it has another parent. A daemon thread, started
    before the submission runs, with its own references to what it calls."""
    import threading
    import time

    getppid, sleep, exit_now = os.getppid, time.sleep, os._exit

    def watch() -> None:
        while getppid() == grader:
            sleep(every)
        exit_now(3)

    threading.Thread(target=watch, name="attnkit-grader-watch", daemon=True).start()


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]))
    exit_with_the_grader(os.getppid())
    run_job(int(sys.argv[1]), sys.stdin)


def run_job(report_fd: int, job_source, linger: bool = False, base=None) -> None:
    """Run the job read from `job_source`, reporting to `report_fd`; never returns. `linger`: once
    reported, close the report and wait to be killed (the grader finds what the submission left
    running among this process's descendants first). `base`: the server's integrity.Snapshot, taken
    before it forked this process (what it read is not read again)."""
    report = os.fdopen(report_fd, "w", buffering=1, encoding="utf-8")
    job = json.loads(job_source.readline())
    nonce = job["nonce"]

    def send(**message) -> None:
        report.write(json.dumps({"nonce": nonce, **message}) + "\n")

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from . import registry
    from .checking import Result, first_line, one_line
    from .integrity import Snapshot, describe

    exercises = registry()
    evaluate = {e.id: e.evaluate for e in exercises.values()}  # held here before the submission runs
    config = Config()
    config.HistoryManager.enabled = False  # no history database: nothing written, nothing shared
    shell = InteractiveShell.instance(config=config, colors="NoColor")
    # Nothing is displayed here: %matplotlib (inline needs a kernel's GUI loop) does nothing.
    shell.register_magic_function(lambda line: None, "line", "matplotlib")  # type: ignore[arg-type]  # IPython's decorator hides the signature
    sys.path.append(job["folder"])  # a learner's helper module there imports; it cannot shadow the kit's
    snapshot = Snapshot(shell, base)
    send(event="ready")

    for item in job["items"]:
        if item.get("exercise"):
            exercise = exercises[item["exercise"]]
            send(event="check", index=item["index"], exercise=exercise.id)
            result = _check(
                exercise, evaluate[exercise.id], shell.user_ns, snapshot, Result, one_line, describe, first_line
            )
            send(
                event="result", exercise=result.exercise, passed=result.passed, line=result.line, mistake=result.mistake
            )
            if not item.get("run_source"):
                continue
        send(event="cell", index=item["index"])
        outcome = shell.run_cell(item["source"], store_history=False, silent=True)
        error = outcome.error_before_exec or outcome.error_in_exec
        if error is not None:
            send(event="error", index=item["index"], error=first_line(error))
    send(event="done")
    report.flush()
    if linger:
        import time

        report.close()
        while True:  # the grader kills this process; exit_with_the_grader ends it if the grader is gone
            time.sleep(60)
    os._exit(0)  # the submission's atexit handlers and threads do not get a say


# ---------------------------------------------------------------- the server (Linux)


def _become_subreaper() -> None:
    """prctl(PR_SET_CHILD_SUBREAPER): orphaned descendants are reparented here, not to init."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _children() -> set[int]:
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                found.update(int(pid) for pid in f.read().split())
        except OSError:
            continue
    return found


def serve(control_fd: int) -> None:
    """Import once, then fork a checking process for each request on the control socket: a JSON
    {"folder", "env"} with three file descriptors (report pipe, job pipe, stderr); the answer is the
    child's pid with a pidfd for it. Ends when the grader closes the socket or dies."""
    import select
    import signal
    import socket

    from IPython.core.interactiveshell import InteractiveShell  # noqa: F401  (imported here once, for every job)
    from traitlets.config import Config  # noqa: F401

    from . import registry
    from .integrity import Snapshot

    registry()  # every checker module, torch with them
    import attnkit.ui.widgets  # noqa: F401  (and matplotlib: what the course's notebooks import besides, 0.35 s a job)

    base = Snapshot()  # read once here: a checking process forked from this state reads only what is new
    grader = os.getppid()
    _become_subreaper()
    control = socket.socket(fileno=control_fd)
    jobs: set[int] = set()
    while os.getppid() == grader:
        while True:  # reap finished checking processes
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            jobs.discard(pid)
        for stray in _children() - jobs:  # a job's orphan reparented here: nothing but jobs runs here
            try:
                os.kill(stray, signal.SIGKILL)
            except OSError:
                pass
        if not select.select([control], [], [], 0.5)[0]:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(control, 65536, 3)
        except OSError:
            break
        if not message:
            break  # the grader is done
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            control.close()
            report_fd, job_fd, stderr_fd = fds
            _job(json.loads(message), report_fd, job_fd, stderr_fd, base=base)
        for fd in fds:
            os.close(fd)
        jobs.add(pid)
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(control, [str(pid).encode()], [pidfd])
        except OSError:
            break
        finally:
            os.close(pidfd)
    for pid in jobs:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(0)


def _job(request: dict, report_fd: int, job_fd: int, stderr_fd: int, base=None) -> None:
    """In the forked child: become what `python -I -m attnkit.exercises.runner FD` would be (its own
    session, the submission's folder, the job's environment, stdout discarded), then run the job."""
    try:
        os.setsid()
        _become_subreaper()
        os.chdir(request["folder"])
        os.environ.update(request["env"])
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(stderr_fd, 2)
        os.close(devnull)
        os.close(stderr_fd)
        sys.argv = [sys.argv[0], str(report_fd)]  # as the one-job runner's
        import numpy as np

        np.random.seed()  # numpy's global generator, fresh as in a new process (random reseeds itself)
        # Its parent is the server, which kills its jobs when the grader is gone; should the server go
        # first, this process is orphaned and ends itself.
        exit_with_the_grader(os.getppid())
        run_job(report_fd, os.fdopen(job_fd, encoding="utf-8"), linger=True, base=base)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


def _check(exercise, evaluate, namespace, snapshot, Result, one_line, describe, first_line):
    """The exercise's Result on the learner's object, or the tampering found around it."""
    tampered = describe(snapshot.changes())
    if tampered:
        return Result(exercise.id, False, f"❌ {exercise.title}: {tampered}", "tampering")
    if exercise.answer not in namespace:
        return Result(
            exercise.id,
            False,
            f"❌ {exercise.title}: {exercise.answer} is not defined where its "
            "check runs — run the cell that defines it",
            "not-defined",
        )
    try:
        result = evaluate(namespace[exercise.answer])
    except BaseException as e:  # SystemExit, KeyboardInterrupt from the learner's code
        result = Result(exercise.id, False, one_line(f"❌ {exercise.title}: your code raised {first_line(e)}"), "error")
    tampered = describe(snapshot.changes())
    if tampered:
        return Result(exercise.id, False, f"❌ {exercise.title}: {tampered}", "tampering")
    if type(result) is not Result or result.exercise != exercise.id:
        return Result(
            exercise.id,
            False,
            f"❌ {exercise.title}: tampering: the checker's result was forged by the submission — not graded as passed",
            "tampering",
        )
    return result


if __name__ == "__main__":
    main()
