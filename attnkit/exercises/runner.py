"""The checking process of `attnkit grade`: python -I -m attnkit.exercises.runner FD.

It first forks the learner's process (learner_process), which keeps nothing but a socket to it,
takes its limits (memory, CPU, processes; a user, PID and network namespace of its own where the
platform allows) and runs the submission's cells in a plain IPython shell (magics work, nothing is
displayed). Then it reads one job from stdin — the cells to run, in order, and where each exercise
is checked. At an exercise's place it calls the kit's checker itself, here, on a boundary.Remote of
the learner's object: the submission's code never runs in this process, so nothing it does can
reach a checker, its comparisons or the report. Reports go, as JSON lines carrying the job's nonce,
to the pipe FD.

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


def run_job(report_fd: int, job_source, linger: bool = False) -> None:
    """Run the job read from `job_source`, reporting to `report_fd`; never returns. The learner's
    process is forked first, before the job (and its nonce) is read, and holds only its socket.
    `linger`: once reported, close the report and wait to be killed (the grader finds what the
    submission left running among this process's descendants first)."""
    import socket

    ours, theirs = socket.socketpair()
    learner_process(theirs, keep_fd=theirs.fileno())
    theirs.close()
    not_dumpable()  # the learner's process cannot read or trace this one's memory
    report = os.fdopen(report_fd, "w", buffering=1, encoding="utf-8")
    job = json.loads(job_source.readline())
    nonce = job["nonce"]

    def send(**message) -> None:
        report.write(json.dumps({"nonce": nonce, **message}) + "\n")

    from . import checking, registry
    from .boundary import BoundaryError, Session, recv

    exercises = registry()
    checking.GRADING_SEED = int(
        job.get("grading_seed", 0)
    )  # here only: the learner's process tries the notebook's cases
    session = Session(ours)
    try:
        confined, _ = recv(ours)  # sent before any of the submission's code ran there
    except BoundaryError:
        confined = {}
    send(event="ready", confined=confined.get("confined", []))
    # Never the submission's folder on sys.path here: a module a library imports lazily must not come
    # from it (only the learner's process imports from there).
    ended = ""  # why the learner's process is gone, once it is
    for item in job["items"]:
        if item.get("exercise"):
            exercise = exercises[item["exercise"]]
            send(event="check", index=item["index"], exercise=exercise.id)
            result = _check(exercise, session, ended, checking)
            if result.mistake == "process-ended" and not ended:
                ended = result.line.split(": ", 1)[-1]
            send(
                event="result", exercise=result.exercise, passed=result.passed, line=result.line, mistake=result.mistake
            )
            if not item.get("run_source"):
                continue
        send(event="cell", index=item["index"])
        if ended:
            continue
        try:
            outcome = session.run(item["source"])
        except BoundaryError as e:
            ended = f"the learner's process stopped answering in cell {item['index'] + 1} ({e}: {_WHY})"
            send(event="error", index=item["index"], error=ended)
            continue
        checking.GRADING_LAST_ERROR[:] = [outcome["error"] if not outcome["not_implemented"] else ""]
        if outcome["error"]:
            send(event="error", index=item["index"], error=outcome["error"])
    send(event="done")
    report.flush()
    if linger:
        import time

        report.close()
        while True:  # the grader kills this process; exit_with_the_grader ends it if the grader is gone
            time.sleep(60)
    os._exit(0)


_WHY = "an exit, a crash, over its limits"


def _check(exercise, session, ended: str, checking):
    """The exercise's Result on the learner's object, asked of the learner's process."""
    from .boundary import BoundaryError

    Result = checking.Result
    try:
        if ended:
            raise BoundaryError(ended)
        answer = session.get(exercise.answer)
        # First the notebook's own cases (the same line the learner saw), then, for an answer that
        # passed them, the hidden ones: fresh values and sizes drawn from the grading seed.
        seed, checking.GRADING_SEED = checking.GRADING_SEED, None
        result = exercise.evaluate(answer)
        checking.GRADING_SEED = seed
        if result.passed and seed is not None:
            hidden = exercise.evaluate(answer)
            if not hidden.passed:  # the line names no grading-time input: it may go to the learner
                line = (
                    f"❌ {exercise.title}: right on the notebook's cases, wrong on others the grader tried — "
                    "an answer must work for any input, not only the notebook's"
                )
                return Result(exercise.id, False, line, "hidden-case")
        return result
    except KeyError:
        return Result(
            exercise.id,
            False,
            f"❌ {exercise.title}: {exercise.answer} is not defined where its check runs — run the cell that "
            "defines it",
            "not-defined",
        )
    except BoundaryError as e:
        why = (
            ended
            or f"the learner's process stopped answering while it was checked ({e}: an exit, a crash, over its limits)"
        )
        return Result(exercise.id, False, f"❌ {exercise.title}: {why}", "process-ended")


# ---------------------------------------------------------------- the learner's process

MEMORY_LIMIT = 4 * 2**30  # bytes of address space for the learner's process (torch maps about 0.8 GiB)
CPU_LIMIT = 30 * 60  # s of CPU time in all (the grader's wall-clock limit per cell comes first)
PROCESS_LIMIT = 64  # processes the submission may run at once (a cgroup, else RLIMIT_NPROC)
FILE_LIMIT = 2**30  # bytes of one file it writes


def _prctl(option: int, value: int) -> bool:
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def not_dumpable() -> None:
    _prctl(4, 0)  # PR_SET_DUMPABLE: no ptrace, no /proc/PID/mem for a process of the same user


def cgroup_dir(token: str):
    """The pids cgroup (v1) of one job, where this machine lets us make one; else None."""
    from pathlib import Path

    root = Path("/sys/fs/cgroup/pids")
    return root / f"attnkit-{token}" if root.is_dir() and os.access(root, os.W_OK) else None


def _unshare() -> list[str]:
    """A user, PID and network namespace of its own, where the platform allows: what it got."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    user, pid, net = 0x10000000, 0x20000000, 0x40000000
    for flags, got in ((user | pid | net, ["own user namespace", "own PID namespace", "no network"]),
                       (pid | net, ["own PID namespace", "no network"])):  # fmt: skip
        if libc.unshare(flags) == 0:
            return got
    return []


def learner_process(sock, keep_fd: int) -> int:
    """Fork the learner's process: it closes every descriptor but its socket, takes its limits and
    namespaces, says what it got, and then runs cells and answers the checking process (boundary.
    serve_learner) until the socket closes. Returns its pid in the parent; never returns in it."""
    import resource
    import signal

    pid = os.fork()
    if pid:
        return pid
    try:
        os.closerange(3, keep_fd)
        os.closerange(keep_fd + 1, 65536)
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: it dies with the checking process
        confined = []
        limits = [
            (resource.RLIMIT_AS, MEMORY_LIMIT, f"{MEMORY_LIMIT >> 30} GiB of memory"),
            (resource.RLIMIT_CPU, CPU_LIMIT, f"{CPU_LIMIT // 60} min of CPU"),
            (resource.RLIMIT_FSIZE, FILE_LIMIT, None),
            (resource.RLIMIT_CORE, 0, None),
        ]
        for limit, value, what in limits:
            try:
                resource.setrlimit(limit, (value, value))
                confined += [what] if what else []
            except (ValueError, OSError):
                pass
        token = os.environ.get("ATTNKIT_GRADING_JOB", "")
        group = cgroup_dir(token) if token else None
        try:
            assert group is not None
            group.mkdir(exist_ok=True)
            (group / "pids.max").write_text(str(PROCESS_LIMIT))
            (group / "cgroup.procs").write_text(str(os.getpid()))
            confined.append(f"{PROCESS_LIMIT} processes (cgroup)")
        except (AssertionError, OSError):
            resource.setrlimit(resource.RLIMIT_NPROC, (PROCESS_LIMIT, PROCESS_LIMIT))  # not for root
            confined.append(f"{PROCESS_LIMIT} processes (RLIMIT_NPROC{', not for root' if os.getuid() == 0 else ''})")
        namespaces = _unshare()
        if "own PID namespace" in namespaces:
            # The next child is the namespace's first process: when it ends, every process of the
            # submission ends with it, however it forked or detached.
            child = os.fork()
            if child:
                sock.close()
                _, status = os.waitpid(child, 0)
                os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
            _prctl(1, signal.SIGKILL)
        from .boundary import send, serve_learner

        send(sock, {"confined": namespaces + confined})
        serve_learner(sock, _shell())
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


def _shell():
    """A plain IPython shell: magics work, nothing is displayed, no history is written."""
    import numpy as np
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    np.random.seed()  # numpy's global generator, fresh as in a new process (random reseeds itself)
    config = Config()
    config.HistoryManager.enabled = False  # no history database: nothing written, nothing shared
    shell = InteractiveShell.instance(config=config, colors="NoColor")
    # Nothing is displayed here: %matplotlib (inline needs a kernel's GUI loop) does nothing.
    shell.register_magic_function(lambda line: None, "line", "matplotlib")
    sys.path.append(os.getcwd())  # a learner's helper module there imports; it cannot shadow the kit's
    return shell


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

    registry()  # every checker module, torch with them
    not_dumpable()  # a submission cannot read or write this process's memory
    import attnkit.ui.widgets  # noqa: F401  (and matplotlib: what the course's notebooks import besides, 0.35 s a job)

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
            _job(json.loads(message), report_fd, job_fd, stderr_fd)
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


def _job(request: dict, report_fd: int, job_fd: int, stderr_fd: int) -> None:
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
        # Its parent is the server, which kills its jobs when the grader is gone; should the server go
        # first, this process is orphaned and ends itself.
        exit_with_the_grader(os.getppid())
        run_job(report_fd, os.fdopen(job_fd, encoding="utf-8"), linger=True)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


if __name__ == "__main__":
    main()
