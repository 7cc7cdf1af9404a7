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
    exit_with_the_grader(os.getppid())
    report = os.fdopen(int(sys.argv[1]), "w", buffering=1, encoding="utf-8")
    job = json.loads(sys.stdin.readline())
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
    snapshot = Snapshot(shell)
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
    os._exit(0)  # the submission's atexit handlers and threads do not get a say


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
