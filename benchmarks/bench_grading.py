"""Can `python -m attnkit grade` grade a class of 100 (notebooks 01-06) in an hour on 2 cores? (issue 22)

Makes copies of the course for N students — half the course's own solution notebooks (every
exercise passes), half the student edition from `python -m attnkit student` (stubs: every exercise
pending) — and grades them twice in the same run: sequentially (the function `grade --jobs 1`
calls, one notebook after another, each timed) and with the command `grade --jobs 2`. It prints the
seconds per course notebook, the ratio of the two, and the extrapolation to 100 students x 6
notebooks on 2 cores (plus one pre-flight, measured here too) against the 60-minute goal.

    python benchmarks/bench_grading.py                  # 10 students: about 15 minutes on 2 cores
    python benchmarks/bench_grading.py --students 4     # quicker, a rougher extrapolation

Both runs see the same machine, so the ratio holds under load; the absolute seconds do not (say
whether other work shared the CPU when you quote them).

Measured (--students 2, 2 cores heavily shared with other sessions' tests): 12.0 s per notebook
sequentially, 6.3 s with --jobs 2 (1.89x), pre-flight 80 s; extrapolated 64 min for 100 x 6 (goal 60).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from attnkit.course.grading import NOTEBOOKS_DIR, grade_notebook, preflight

GOAL_MINUTES, CLASS, CORES = 60, 100, 2


def make_class(root: Path, students: int) -> list[Path]:
    """students/NN/<course notebook>.ipynb: even students hand in the solutions, odd ones the stubs."""
    edition = root / "student-edition"
    subprocess.run([sys.executable, "-m", "attnkit", "student", str(edition)], check=True, capture_output=True)
    course = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    paths = []
    for student in range(students):
        folder = root / "students" / f"{student:02d}"
        folder.mkdir(parents=True)
        for source in course:
            shutil.copyfile(source if student % 2 == 0 else edition / source.name, folder / source.name)
            paths.append(folder / source.name)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=10, help="copies of the course to grade (default 10)")
    args = parser.parse_args()
    if args.students < 2:
        parser.error("--students must be at least 2 (one solution, one student edition)")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_class(Path(tmp), args.students)
        start = time.monotonic()
        preflight(paths, jobs=CORES)
        preflight_s = time.monotonic() - start
        print(f"pre-flight (--jobs {CORES}): {preflight_s:.1f} s")

        seconds, sequential_rows = defaultdict(list), []
        start = time.monotonic()
        for path in paths:
            t = time.monotonic()
            sequential_rows += grade_notebook(path)
            seconds[path.name].append(time.monotonic() - t)
            print(f"  {path.parent.name}/{path.name}: {seconds[path.name][-1]:.1f} s", flush=True)
        sequential_s = time.monotonic() - start

        table = Path(tmp) / "grades.csv"
        start = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "attnkit",
                "grade",
                *map(str, paths),
                "--jobs",
                str(CORES),
                "--csv",
                str(table),
                "--no-preflight",
            ],
            check=True,
            capture_output=True,
        )
        parallel_s = time.monotonic() - start
        parallel_rows = {
            (r["learner_file"], r["exercise"]): r["passed"] == "yes"
            for r in csv.DictReader(table.open(encoding="utf-8"))
        }

    # The two runs must agree, and give what was handed in: solutions pass, stubs do not.
    wrong = [
        row
        for row in sequential_rows
        if not row.passed
        == (int(Path(row.learner_file).parent.name) % 2 == 0)
        == parallel_rows.get((row.learner_file, row.exercise))
    ]
    n = len(paths)
    print(
        f"rows: {len(sequential_rows)}, not as expected or differing between the runs: {len(wrong)}",
        *wrong[:5],
        sep="\n",
    )
    print(
        f"\n{args.students} students x {n // args.students} notebooks = {n} notebooks "
        f"(half solutions, half student edition)"
    )
    print(f"{'notebook':<42} {'solution s':>10} {'student s':>10}")
    for name, times in sorted(seconds.items()):
        print(f"{name:<42} {sum(times[0::2]) / len(times[0::2]):>10.1f} {sum(times[1::2]) / len(times[1::2]):>10.1f}")
    print(f"sequential (--jobs 1): {sequential_s:.0f} s, {sequential_s / n:.1f} s per notebook")
    print(
        f"parallel   (--jobs {CORES}): {parallel_s:.0f} s, {parallel_s / n:.1f} s per notebook; "
        f"speed-up {sequential_s / parallel_s:.2f}x"
    )
    whole = CLASS * (n // args.students)
    minutes = (preflight_s + parallel_s / n * whole) / 60
    print(
        f"extrapolated: {CLASS} students x {n // args.students} notebooks on {CORES} cores = {minutes:.0f} min "
        f"(goal {GOAL_MINUTES} min: {'met' if minutes <= GOAL_MINUTES else 'NOT met'}); "
        f"sequentially {(preflight_s + sequential_s / n * whole) / 60:.0f} min"
    )


if __name__ == "__main__":
    main()
