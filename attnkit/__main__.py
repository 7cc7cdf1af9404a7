"""Command line: regenerate every committed checkpoint and result file in data/; make the
student edition of the course and grade what comes back.

    python -m attnkit train adder          # data/adder.pt + data/adder.json + data/adder-snapshots.pt
    python -m attnkit train sortedness     # data/sortedness-*.pt, data/sortedness-runs/ + data/sortedness_results.json
    python -m attnkit study ablation       # data/ablation_results.json
    python -m attnkit study replay         # data/adder_replay.json (notebook 07: three seeds' training)
    python -m attnkit course DIR           # a learner's own copy of the course from the installed kit
                                           # (--edition student: stubs for solutions; self-study: each
                                           # solution collapsed under its stub)
    python -m attnkit student DIR          # the notebooks with stubs for solutions (--no-hints: without
                                           # the collapsible hints; --with-solutions:
                                           # each solution kept, collapsed, for self-study)
    python -m attnkit grade NOTEBOOK...    # check each in a process of its own: grades.csv and a summary

--out writes elsewhere (checked before any work starts). Ctrl-C, SIGTERM and SIGHUP stop a
command within a second or two, say what was kept and exit with status 128 + the signal's number
(130 for Ctrl-C); they never replace a file with an unfinished result (an interrupted adder goes
to adder.interrupted.pt beside --out).
"""

import argparse
import os
import signal
import sys
from pathlib import Path

from attnkit.course import skip_the_iri_grammar

skip_the_iri_grammar()  # `student` and `grade` read notebooks: nbformat's import in 0.15 s, not 1 s

INTERRUPTED = 130  # the shell's status for a process stopped by SIGINT
_received = [signal.SIGINT]  # the last stopping signal: the exit status says which one it was


def _as_ctrl_c(signum, frame) -> None:
    _received[0] = signum
    raise KeyboardInterrupt


def handle_stop_signals() -> None:
    """SIGTERM (kill, a job scheduler) and SIGHUP (a closed terminal) stop a command the way Ctrl-C
    does: the same clean-up, the same kept files, a message."""
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _as_ctrl_c)


def interrupted_status() -> int:
    return 128 + int(_received[0])


def say(message: str) -> None:
    """To stderr, where a hung-up terminal may be gone (losing the message must not lose the exit
    status), in whatever its encoding can show (PYTHONIOENCODING=ascii: '?' for the rest)."""
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    try:
        print(message.encode(encoding, "replace").decode(encoding), file=sys.stderr, flush=True)
    except (OSError, ValueError, LookupError):
        pass


# Kernels whose float32 sums round alike on every x86 CPU: PyTorch's unvectorised ("default")
# kernels, and MKL's conditional-numerical-reproducibility mode. Measured: with both, MKL's
# AVX2 and AVX-512 paths train the adder to the same bytes (with ATen's avx2 kernels they do not).
REPRODUCIBLE_KERNELS = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}


def reproducible_kernels() -> None:
    """Run this command again with REPRODUCIBLE_KERNELS in its environment (they are read when
    torch loads), unless they are set already: a choice of the caller's own is kept."""
    missing = {k: v for k, v in REPRODUCIBLE_KERNELS.items() if k not in os.environ}
    if not missing:
        return
    os.environ.update(missing)
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "attnkit", *sys.argv[1:]])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m attnkit", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a committed model from its seed")
    train.add_argument("what", choices=["adder", "sortedness"])
    train.add_argument(
        "--out",
        help="adder: the checkpoint file (.pt; its report goes beside it as .json); "
        "sortedness: the folder for the checkpoints and results",
    )
    train.add_argument("--seed", type=int, default=0, help="adder: train from this seed (other than 0 only with --out)")
    study = sub.add_parser("study", help="run a study and save its results JSON")
    study.add_argument("what", choices=["ablation", "replay"])
    study.add_argument(
        "--out", help="the results file (.json) instead of data/ablation_results.json or data/adder_replay.json"
    )
    course = sub.add_parser("course", help="copy the course notebooks to DIR (a learner's own copy)")
    course.add_argument("dir", help="the folder to write (created if missing)")
    course.add_argument(
        "--edition",
        choices=["complete", "student", "self-study"],
        default="complete",
        help="complete: every solution in place (default); student: stubs for the "
        "solutions; self-study: each solution collapsed under its stub",
    )
    course.add_argument(
        "--no-hints",
        action="store_true",
        help="student/self-study: no hint blocks, and checkers that say only whether an answer passed",
    )
    keep = course.add_mutually_exclusive_group()
    keep.add_argument(
        "--keep-changed",
        action="store_true",
        help="keep each notebook in DIR that differs (the learner's work) and write the rest",
    )
    keep.add_argument("--force", action="store_true", help="overwrite notebooks in DIR that differ")
    student = sub.add_parser("student", help="write the student edition of the notebooks to DIR")
    student.add_argument("dir", help="the folder to write (created if missing)")
    student.add_argument(
        "--with-solutions",
        action="store_true",
        help="keep each solution as a collapsed block under its stub (self-study)",
    )
    student.add_argument("--force", action="store_true", help="overwrite notebooks in DIR that differ")
    student.add_argument(
        "--no-hints", action="store_true", help="no hint blocks, and checkers that say only whether an answer passed"
    )
    grade = sub.add_parser("grade", help="grade submitted notebooks: a CSV row per exercise and a summary")
    grade.add_argument(
        "notebooks",
        nargs="+",
        help="the submitted .ipynb files, or class folders: one folder per learner, named by the learner's id "
        "(subs/ann/01_....ipynb; nbgrader's submitted/ann/ps1/01_....ipynb)",
    )
    grade.add_argument(
        "--csv",
        default="grades.csv",
        help="the table to write (default grades.csv); kept after each notebook, resumed on a re-run",
    )
    grade.add_argument(
        "--cell-timeout",
        type=float,
        default=120,
        help="seconds a cell or check may run before the notebook is stopped (default 120, at least 10)",
    )
    grade.add_argument("--jobs", type=int, default=1, help="notebooks graded at once (default 1; one per core)")
    grade.add_argument(
        "--regrade",
        action="store_true",
        help="grade again the notebooks already in the CSV (by default a re-run skips them)",
    )
    grade.add_argument(
        "--feedback",
        metavar="DIR",
        help="also write a feedback page per learner to DIR (Markdown for an LMS comment box, and HTML)",
    )
    grade.add_argument("--no-hints", action="store_true", help="feedback pages say only whether each exercise passed")
    grade.add_argument(
        "--grading-seed",
        type=int,
        default=0,
        metavar="N",
        help="the seed of the checkers' hidden cases (default 0; keep your own secret so no class knows them)",
    )
    grade.add_argument(
        "--points", metavar="FILE", help="points per exercise: a TOML [points] table (default: each exercise's stars)"
    )
    grade.add_argument("--canvas", metavar="FILE", help="also write the points per learner and notebook for Canvas")
    grade.add_argument("--moodle", metavar="FILE", help="also write the points per learner and notebook for Moodle")
    grade.add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the check that the course's own solutions pass here (run once per environment)",
    )
    args = parser.parse_args(argv)
    if args.command != "grade":  # the grader handles its own signals (course/grading.py)
        handle_stop_signals()
    if args.command == "course":
        return _course(parser, args)
    if args.command == "student":
        return _student(parser, args)
    if args.command == "grade":
        return _grade(parser, args)
    if args.command == "train" and (args.seed != 0 and (args.what != "adder" or args.out is None)):
        parser.error("--seed other than 0 trains the adder into --out (data/adder.pt is seed 0's)")
    if argv is None and args.command == "train" and args.what == "adder":
        reproducible_kernels()  # the command line only: a test calling main(...) keeps its process
    # One CPU thread: float sums split across threads round differently, and the committed
    # files in data/ must come out bit for bit the same on every run of these commands.
    import torch

    torch.set_num_threads(1)
    from .core.allocator import keep_freed_memory

    keep_freed_memory()  # evaluation was half page faults: see core/allocator.py
    from .core.checkpoint import DATA_DIR
    from .core.outputs import check_output_dir, check_output_file

    command = f"{args.command} {args.what}"
    try:  # every output checked before any work starts
        if command == "train adder":
            from .adder import CHECKPOINT
            from .adder.train import check_out_path

            out = check_out_path(CHECKPOINT if args.out is None else args.out)
        elif command == "train sortedness":
            out = check_output_dir(DATA_DIR if args.out is None else args.out, "--out folder")
        else:
            from .experiments.ablation_studies import ABLATION_RESULTS_PATH
            from .experiments.replay_study import REPLAY_RESULTS_PATH

            default = REPLAY_RESULTS_PATH if args.what == "replay" else ABLATION_RESULTS_PATH
            out = check_output_file(default if args.out is None else args.out, ".json", "--out", kind="report")
    except (ValueError, TypeError) as e:
        parser.error(str(e))

    try:
        if command == "train adder":
            _train_adder(out, args.seed)
        elif command == "train sortedness":
            from .experiments.sortedness_runs import run_experiment

            run_experiment(data_dir=out)
        elif command == "study replay":
            from .experiments.replay_study import run_replay_study

            run_replay_study(path=out)
        else:
            from .experiments.ablation_studies import run_studies

            run_studies(path=out)
    except KeyboardInterrupt:
        sortedness = command == "train sortedness"
        kept = "its checkpoints and results stayed as they were" if sortedness else "it stayed as it was"
        say(f"\ninterrupted: nothing new was written to {out}; {kept}")
        sys.exit(interrupted_status())
    except OSError as e:  # e.g. the disk filled up during the run: the message says what was kept
        say(f"\n{command} failed: {e}")
        sys.exit(1)


def _edition_interrupted(e: KeyboardInterrupt, folder) -> None:
    """Ctrl-C (or SIGTERM, SIGHUP) while an edition was written: it is all or nothing, so say which."""
    from .course.editions import EditionWritten

    done = "the whole edition had just been written to" if isinstance(e, EditionWritten) else "nothing was written to"
    say(f"\ninterrupted: {done} {folder} (an edition is written all or nothing)")
    sys.exit(interrupted_status())


def _course(parser, args) -> None:
    from .course.editions import write_edition
    from .resources import notebooks_dir

    try:
        if args.no_hints and args.edition == "complete":
            raise ValueError(
                "--no-hints is for the student and self-study editions (the complete one has its solutions in place)"
            )
        written, kept = write_edition(
            notebooks_dir(), args.dir, args.edition, args.force, args.keep_changed, hints=not args.no_hints
        )
    except (ValueError, OSError) as e:
        parser.error(str(e))
    except KeyboardInterrupt as e:
        _edition_interrupted(e, args.dir)
    print(
        f"wrote the {args.edition} edition{' without hints' if args.no_hints else ''} of {len(written)} "
        f"notebooks to {args.dir}"
    )
    if kept:
        print(f"kept {len(kept)} that you changed: {', '.join(p.name for p in kept)}")


def _student(parser, args) -> None:
    from .course.editions import write_student_edition
    from .resources import notebooks_dir

    try:
        written = write_student_edition(
            notebooks_dir(), args.dir, args.with_solutions, args.force, hints=not args.no_hints
        )
    except (ValueError, OSError) as e:
        parser.error(str(e))
    except KeyboardInterrupt as e:
        _edition_interrupted(e, args.dir)
    kind = "self-study edition (solutions collapsed)" if args.with_solutions else "student edition"
    kind += " without hints" if args.no_hints else ""
    print(f"wrote the {kind} of {len(written)} notebooks to {args.dir}")


def _grade(parser, args) -> None:
    import signal

    from tqdm.auto import tqdm

    from .core.outputs import check_output_file
    from .course.classes import gather
    from .course.gradebook import (
        GradingStopped,
        check_cell_timeout,
        grade_class,
        preflight,
        printable,
        still_to_grade,
        summary,
    )
    from .course.grading import require_course

    try:  # everything checked before any notebook runs
        from .course import grading

        grading.GRADING_SEED = args.grading_seed
        require_course()  # no course found: exit 2 and no CSV, never a class graded zero
        handed_in = gather(args.notebooks)
        if not handed_in.notebooks and not handed_in.missing:
            raise ValueError("no notebook to grade in " + ", ".join(args.notebooks))
        check_cell_timeout(args.cell_timeout)
        if args.jobs < 1:
            raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
        out = check_output_file(args.csv, ".csv", "--csv")
        if args.feedback is not None and Path(args.feedback).exists() and not Path(args.feedback).is_dir():
            raise ValueError(f"--feedback {args.feedback} exists and is not a folder")
        if out.exists():
            from .course.gradebook import read_csv

            read_csv(out)  # a file this kit did not write is never touched
        from .course import lms
        from .course.feedback import exercises

        known = exercises()
        worth = lms.load_points(args.points, known)
        exports = {
            flag: lms.check_export_path(path, "--" + flag)
            for flag, path in (("canvas", args.canvas), ("moodle", args.moodle))
            if path is not None
        }
    except (ValueError, TypeError, OSError) as e:
        parser.error(str(e))

    def stop(signum, frame):  # SIGTERM, SIGHUP: as Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    bar = tqdm(total=len(handed_in.notebooks), desc="grading", unit="notebook")
    graded: list[str] = []
    try:
        _, todo = still_to_grade(handed_in.notebooks, out, args.regrade)
        if todo and not args.no_preflight:  # nothing to grade (a re-run): no need to check the environment
            bar.set_postfix_str("pre-flight: the course's own solutions")
            preflight(todo, args.cell_timeout, args.jobs)
            bar.set_postfix_str("")

        def progress(name: str) -> None:
            graded.append(name)
            bar.update()

        rows, graded = grade_class(
            handed_in.notebooks,
            out,
            args.cell_timeout,
            args.jobs,
            args.regrade,
            progress=progress,
            learner_of=handed_in.learner_of,
            missing=handed_in.missing,
        )
    except KeyboardInterrupt:
        bar.close()
        print(
            f"\ninterrupted: {len(graded)} notebook(s) graded in this run are kept in {out}; grading again "
            "resumes with the others",
            file=sys.stderr,
        )
        sys.exit(INTERRUPTED)
    except GradingStopped as e:
        bar.close()
        print(f"grading stopped: {e}", file=sys.stderr)
        sys.exit(1)
    bar.close()
    if args.feedback is not None:
        from .course.feedback import write_feedback

        try:
            pages = write_feedback(rows, args.feedback, hints=not args.no_hints, worth=worth)
        except (ValueError, OSError) as e:
            print(f"feedback not written: {e} (the grades are in {out})", file=sys.stderr)
            sys.exit(2)
        print(f"feedback: {len(pages) // 2} page(s) in {args.feedback} (Markdown and HTML)")
    by_learner = lms.totals(rows, worth, known)
    for flag, path in exports.items():
        lms.write_export(path, lms.canvas_csv(by_learner) if flag == "canvas" else lms.moodle_csv(by_learner))
        print(f"{flag}: {len(by_learner)} learner(s) in {path}")
    skipped = len(handed_in.notebooks) - len(graded)
    text = (
        summary(rows, worth)
        + (
            f"\n({skipped} notebook(s) already in {out} were not graded again: --regrade grades them again)"
            if skipped
            else ""
        )
        + f"\ntable: {out}"
        + (
            f"\nthe learners' code ran in processes of their own: {', '.join(grading.CONFINED)}"
            if grading.CONFINED
            else ""
        )
    )
    print(printable(text, sys.stdout.encoding))


def _train_adder(out, seed: int = 0) -> None:
    from .adder import train_pretrained
    from .adder.train import interrupted_path

    adder = train_pretrained(out, seed)
    if adder.metrics.get("interrupted"):
        measured = adder.metrics.get("exact_match_on", "the held-out set")
        say(
            f"\ninterrupted at step {adder.metrics['steps']}: {out} stayed as it was; the best model so "
            f"far ({adder.metrics['exact_match']:.2%} exact match on {measured}) is in {interrupted_path(out)}"
        )
        sys.exit(interrupted_status())


if __name__ == "__main__":
    main()
