"""How many torch threads should the notebooks use when the laptop is busy? (issue 17)

Runs the same work — a short adder training run (the 60-step control of the issue) and a greedy
evaluation of the 10,000 held-out sums — with the notebooks' setting (1 torch thread) and with
torch's default (one thread per core), first on a quiet machine and then while a competing load
(one busy process per core: what a browser, a second kernel or a build do to a laptop) runs.
Each setting is timed in the same run, interleaved, so drift hits both alike.

    python benchmarks/bench_threads.py              # about 2 minutes on 2 cores
    python benchmarks/bench_threads.py --steps 30   # quicker

Measured (60 steps, 10,000 sums; median of 2): on 2 cores of an otherwise idle 16-core machine
(`taskset -c 0,1 ... --load 2 --default 2`), quiet: train 3.8 s on 1 thread vs 2.9 s on 2, evaluate
0.9 vs 0.7 s; under load: train 7.9 vs 27.4 s, evaluate 2.3 vs 5.5 s. One thread costs about a
third more on a quiet machine and is 3.5x faster on a busy one, so the notebooks use one.

Why one thread can win under load: every op of a tiny model (d_model 64) is split over all
threads and waits for the slowest; when another process holds a core, that thread is scheduled
late on every op, so a two-thread run waits on each of its thousands of small ops.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

from attnkit.adder.data import load_test_set
from attnkit.adder.evaluate import greedy_correct
from attnkit.adder.model import Seq2SeqConfig
from attnkit.adder.train import AdderTrainConfig, train_adder
from attnkit.core.runtime import torch_threads

CHOSEN = 1  # what notebooks 02–05 set (torch.set_num_threads(1))
# torch's default: one thread per core. With OMP_NUM_THREADS set (make test sets 1) torch starts with
# that instead, so the core count stands in for the default.
DEFAULT = (os.cpu_count() or 1) if os.environ.get("OMP_NUM_THREADS") else torch.get_num_threads()
BUSY = "while True: pass"  # one core's worth of competing work


def train_seconds(steps: int) -> float:
    cfg = AdderTrainConfig(max_steps=steps, eval_every=10**6, n_val=200)
    start = time.perf_counter()
    train_adder(Seq2SeqConfig(), cfg, progress=False)
    return time.perf_counter() - start


def eval_seconds(model, a, b) -> float:
    start = time.perf_counter()
    greedy_correct(model, a, b)
    return time.perf_counter() - start


def measure(steps: int, repeats: int, model, a, b, default: int = DEFAULT) -> dict:
    """{threads: {"train": [s, ...], "eval": [s, ...]}}, the settings interleaved."""
    times = {n: {"train": [], "eval": []} for n in (CHOSEN, default)}
    for r in range(repeats):
        for n in list(times) if r % 2 == 0 else list(times)[::-1]:  # alternate which goes first
            with torch_threads(n):
                times[n]["train"].append(train_seconds(steps))
                times[n]["eval"].append(eval_seconds(model, a, b))
    return times


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="training steps per run (default 60)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per setting and condition (median)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, help="busy processes (default: one per core)")
    parser.add_argument(
        "--default", type=int, default=DEFAULT, help=f"thread count standing for torch's default (here {DEFAULT})"
    )
    parser.add_argument("--eval-n", type=int, default=None, help="problems to evaluate (default: all 10,000)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="seconds, on a tiny scale: it still runs (make bench-smoke)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.repeats, args.load, args.eval_n = 2, 1, 1, 200
    if os.environ.get("OMP_NUM_THREADS"):
        print(
            f"note: OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} is set; {DEFAULT} threads (one per core) "
            f"stand for torch's default"
        )
    from attnkit.adder import CHECKPOINT, Adder

    model = Adder.load(CHECKPOINT, device="cpu").model
    a, b = load_test_set()
    a, b = a[: args.eval_n], b[: args.eval_n]
    print(
        f"{len(os.sched_getaffinity(0))} CPU cores; torch default {args.default} threads, notebooks use {CHOSEN}; "
        f"{args.steps} training steps and a greedy evaluation of {len(a)} sums per run"
    )
    with torch_threads(CHOSEN):  # warm-up: one-time costs (first calls, allocations) counted in no run
        train_seconds(2)
        eval_seconds(model, a[:100], b[:100])
    results = {"quiet": measure(args.steps, args.repeats, model, a, b, args.default)}
    load = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.load)]
    try:
        time.sleep(0.25)  # let the load reach its cores (a bare `python -c` starts in ~20 ms)
        results[f"loaded ({args.load} busy processes)"] = measure(args.steps, args.repeats, model, a, b, args.default)
    finally:
        for p in load:
            p.kill()
            p.wait()
    print(
        f"\n{'condition':32s} {'work':6s} {f'{CHOSEN} thread':>10s} {f'{args.default} threads':>10s} "
        f"{'default/chosen':>15s}"
    )
    for condition, times in results.items():
        for work in ("train", "eval"):
            chosen, default = (statistics.median(times[n][work]) for n in (CHOSEN, args.default))
            print(f"{condition:32s} {work:6s} {chosen:9.1f}s {default:9.1f}s {default / chosen:14.2f}x")
    return results


if __name__ == "__main__":
    main()
