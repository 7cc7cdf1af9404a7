"""The grading server (Linux): one `python -I -m attnkit.exercises.runner --serve FD` per grading run,
started at the first notebook with the grader's environment of that moment. It imports torch,
IPython and every checker once and forks each notebook's checking process from that state
(runner.serve), so a notebook does not spend a second and a half importing them. File descriptors
travel over a socketpair; the grader gets a pidfd for each forked process. Where it is not possible
(not Linux), fails or dies, or ATTNKIT_GRADING_SERVER=0: a fresh process per notebook (grading.py).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

STARTUP_LIMIT = 180.0  # s for a checking process to import torch and the kit, on a loaded machine


def base_env() -> dict:
    """The environment of every checking process (a job adds its token and IPython folder)."""
    return {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "MPLBACKEND": "Agg",
        "PYTHONIOENCODING": "utf-8",
    }


class Forked:
    """A checking process the server forked, with what run_plan and kill_job use of a Popen. Not
    our child, so no waitpid: its pidfd becomes readable when it exits (the server reaps it)."""

    def __init__(self, pid: int, pidfd: int):
        self.pid, self._pidfd, self.returncode = pid, pidfd, None

    def poll(self):
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self.returncode = -signal.SIGKILL  # exited; its status went to the server, its parent
        return self.returncode

    def wait(self, timeout: float | None = None):
        if self.poll() is None and not select.select([self._pidfd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired("checking process", timeout or 0)
        return self.poll()

    def close(self) -> None:
        os.close(self._pidfd)


class Server:
    """The server process and the socket its requests and answers travel on."""

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "attnkit.exercises.runner", "--serve", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=base_env(),
            start_new_session=True,
        )
        theirs.close()
        ours.settimeout(STARTUP_LIMIT)
        self.control, self.lock = ours, threading.Lock()

    def fork(self, request: dict, fds: list[int]) -> Forked:
        with self.lock:  # one request and its answer at a time (the grader's pool threads share it)
            socket.send_fds(self.control, [json.dumps(request).encode()], fds)
            message, pidfds, _, _ = socket.recv_fds(self.control, 64, 1)
        if not message or len(pidfds) != 1:
            for fd in pidfds:
                os.close(fd)
            raise OSError("the grading server did not start a checking process")
        return Forked(int(message), pidfds[0])

    def stop(self) -> None:
        self.control.close()  # the server ends when its socket closes
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_SERVER: dict = {"server": None, "failed": False}
_LOCK = threading.Lock()


def possible() -> bool:
    """Fork, pidfds and passing file descriptors over a socket: Linux (not macOS or Windows)."""
    return sys.platform == "linux" and hasattr(os, "pidfd_open")


def get() -> Server | None:
    """The grading server, started on first use; None where it is not possible, has failed, or
    ATTNKIT_GRADING_SERVER=0 asks for a process per notebook."""
    if not possible() or os.environ.get("ATTNKIT_GRADING_SERVER") == "0" or _SERVER["failed"]:
        return None
    with _LOCK:
        if _SERVER["server"] is None:
            try:
                _SERVER["server"] = Server()
            except OSError:
                _SERVER["failed"] = True
                return None
            atexit.register(stop)
        return _SERVER["server"]


def stop() -> None:
    """Stop the server; a process per notebook from here on."""
    with _LOCK:
        server, _SERVER["server"] = _SERVER["server"], None
        if server is not None:
            _SERVER["failed"] = True
            server.stop()


def start(folder: Path, write_end: int, stderr, job_env: dict):
    """(a checking process forked for this job, the pipe its job is written to), or None where there
    is no server (or it died or would not answer: stopped, and None from then on)."""
    server = get()
    if server is None:
        return None
    job_out, job_in = os.pipe()
    try:
        forked = server.fork({"folder": str(folder), "env": job_env}, [write_end, job_out, stderr.fileno()])
    except OSError:
        os.close(job_in)
        stop()
        return None
    finally:
        os.close(job_out)  # the child has its own copy
    return forked, open(job_in, "wb")
