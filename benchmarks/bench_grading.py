"""How long a class takes to grade: copies of the course's solution and student notebooks (half the
students hand in the solutions, half the untouched student edition), every course notebook each,
graded with --jobs 2 and, in the same run, the first students one at a time (the baseline), once
with the grading server forking each checking process (Linux) and once with a fresh process per
notebook (ATTNKIT_GRADING_SERVER=0, as elsewhere); the time for 100 students extrapolated from each
run's time per notebook. Goal: 100 students x every notebook of the course in at most 60 minutes
on 2 cores.

    .venv/bin/python benchmarks/bench_grading.py [--students 10] [--jobs 2]
    .venv/bin/python benchmarks/bench_grading.py --students 4 --before 155b0e3

--before COMMIT grades the same class, in turns, with the kit of that commit (taken from git into a
folder of its own) and with this one, each in a process of its own with --jobs: the ratio of the
two is what a change of the grader's design costs (155b0e3: the learner's code still ran beside
the checkers).

Prints seconds, the speed-up of --jobs over the baseline, and the 100-student extrapolation.
On a shared machine the absolute numbers move with the load; the ratio, measured in the same run,
less so.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

os.environ.setdefault("OMP_NUM_THREADS", "1")
from attnkit.course.editions import student_notebook  # noqa: E402
from attnkit.course.gradebook import grade_class  # noqa: E402
from attnkit.course.grading import NOTEBOOKS_DIR, course_notebooks  # noqa: E402

COURSE = len(course_notebooks(NOTEBOOKS_DIR))  # notebooks a learner hands in


def make_class(folder: Path, students: int, prefix: str = "") -> list[str]:
    paths = []
    for source in course_notebooks(NOTEBOOKS_DIR):
        if not source.name.startswith(prefix):
            continue
        nb = nbformat.read(source, as_version=4)
        editions = {"solution": nb, "student": student_notebook(nb)}
        for s in range(students):
            kind = "solution" if s % 2 == 0 else "student"
            path = folder / f"student{s:03d}_{source.name}"
            nbformat.write(editions[kind], path)
            paths.append(str(path))
    return sorted(paths)


def timed(paths: list[str], out: Path, jobs: int) -> tuple[float, list]:
    start = time.perf_counter()
    rows, _ = grade_class(paths, out, jobs=jobs)
    return time.perf_counter() - start, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--baseline-students",
        type=int,
        default=2,
        help="students graded one at a time for the baseline (its per-notebook time)",
    )
    parser.add_argument("--before", metavar="COMMIT", help="compare with the grader of this commit, in turns")
    parser.add_argument("--rounds", type=int, default=2, help="turns of --before")
    parser.add_argument(
        "--smoke", action="store_true", help="one student's notebook 01, to check that it still runs (make bench-smoke)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.students, args.baseline_students = 1, 1
    folder = Path(tempfile.mkdtemp(prefix="attnkit-bench-grading-"))
    try:
        paths = make_class(folder, args.students, "01" if args.smoke else "")
        if args.before:
            sys.exit(compare(args.before, paths, folder, args.jobs, args.rounds))
        n = len(paths)
        print(
            f"{args.students} students x {n // args.students} notebooks = {n} notebooks; {os.cpu_count()} CPUs visible"
        )
        baseline = [p for p in paths if int(Path(p).name[7:10]) < args.baseline_students]
        os.environ["ATTNKIT_GRADING_SERVER"] = "0"
        spawned, rows_spawned = timed(baseline, folder / "spawned.csv", 1)
        del os.environ["ATTNKIT_GRADING_SERVER"]
        base, rows_base = timed(baseline, folder / "sequential.csv", 1)
        assert rows_spawned == rows_base, "a process per notebook graded differently from the server"
        fast, rows = timed(paths, folder / "parallel.csv", args.jobs)
        passed = sum(r.passed for r in rows)
        same = {(r.learner_file, r.exercise, r.passed) for r in rows_base}
        assert same <= {(r.learner_file, r.exercise, r.passed) for r in rows}, "the two runs graded differently"
        expected = sum(1 for r in rows if int(Path(r.learner_file).name[7:10]) % 2 == 0)
        print(f"{passed} of {len(rows)} exercises passed ({expected} expected: the solution copies)")
        for name, seconds, count in [
            (f"a process per notebook, sequential, {len(baseline)} notebooks", spawned, len(baseline)),
            (f"sequential, {len(baseline)} notebooks", base, len(baseline)),
            (f"--jobs {args.jobs}, {n} notebooks", fast, n),
        ]:
            per = seconds / count
            print(
                f"{name:48s} {seconds:7.1f} s, {per:5.2f} s per notebook -> 100 students x {COURSE} notebooks: "
                f"{per * 100 * COURSE / 60:6.1f} min"
            )
        print(f"speed-up of the grading server over a process per notebook: {spawned / base:.2f}x")
        print(
            f"speed-up of --jobs {args.jobs} over the baseline, per notebook: "
            f"{(base / len(baseline)) / (fast / n):.2f}x"
        )
        goal = fast / n * 100 * COURSE / 60
        print(f"goal (<= 60 min for 100 students on 2 cores): {'met' if goal <= 60 else 'NOT met'} ({goal:.1f} min)")
        sys.exit(0 if passed == expected else 1)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


GRADE = """import sys, time
from attnkit.course.gradebook import grade_class
start = time.perf_counter()
rows, _ = grade_class(sys.argv[2:], sys.argv[1], jobs={jobs})
print(time.perf_counter() - start, sum(r.passed for r in rows), len(rows))
"""


def compare(commit: str, paths: list[str], folder: Path, jobs: int, rounds: int) -> int:
    """Grade `paths` with the kit of `commit` and with this one, in turns; print the ratio."""
    repo = Path(__file__).resolve().parents[1]
    before = folder / "before"
    before.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", commit, "attnkit", "data", "notebooks"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
    times: dict[str, list[float]] = {"before": [], "now": []}
    for r in range(rounds):
        for name, root in (("before", before), ("now", repo)):
            out = folder / f"{name}{r}.csv"
            env = {**os.environ, "PYTHONPATH": str(root)}
            done = subprocess.run([sys.executable, "-c", GRADE.format(jobs=jobs), str(out), *paths], env=env, cwd=root,
                                  capture_output=True, text=True, check=True)  # fmt: skip
            seconds, passed, n = done.stdout.split()[-3:]
            times[name].append(float(seconds))
            print(f"round {r + 1}, {name:6s} ({commit if name == 'before' else 'this tree'}): {float(seconds):6.1f} s, "
                  f"{passed} of {n} exercises passed")  # fmt: skip
    ratio = min(times["now"]) / min(times["before"])
    per = min(times["now"]) / len(paths)
    print(f"this grader / {commit}'s, best of {rounds}: {ratio:.2f}x (goal <= 1.5x); "
          f"100 students x {COURSE} notebooks with --jobs {jobs}: {per * 100 * COURSE / 60:.1f} min")  # fmt: skip
    return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    main()
