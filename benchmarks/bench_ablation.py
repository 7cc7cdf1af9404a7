"""Time the whole single-head sweep: the fast path against the plain one-evaluation-per-head loop.

    python benchmarks/bench_ablation.py [--mode zero|mean|both] [--repeats 2] [--threads N]

The sweep is 25 greedy exact-match evaluations of the 10,000 held-out problems (the intact
model, then each of the 24 heads removed alone). The plain loop decodes greedily once per
evaluation; the fast path (attnkit.interp.sweep.fast_matches, built on the hook points) is checked to give the same
(25, 10000) matrix of right/wrong. The bar: the fast sweep in <= 15 s on 2 CPU cores.
Both paths run on one torch thread, as the studies do (core/runtime.torch_threads); try
--threads 2 on an idle machine. Uses data/adder.pt when it exists;
otherwise an untrained model scored against its own answers (so that ablations change
something). Timings depend on what else runs on the machine: the load average is printed
before and after, and the best of --repeats is kept.
"""

import argparse
import os
import time

import numpy as np
import torch

from attnkit import interp
from attnkit.adder import CHECKPOINT, Adder
from attnkit.adder.data import BOS, EOS, PAD, load_test_set
from attnkit.adder.evaluate import mean_z
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.core import runtime
from attnkit.core.allocator import keep_freed_memory


def problems_for(adder):
    a, b = load_test_set()
    p = interp.Problems.from_operands(adder.model, a, b)
    if CHECKPOINT.exists():
        return p, "data/adder.pt, true sums"
    out = adder.model.greedy(p.src)  # untrained: its own answers are the targets
    after_eos = ((out == EOS).cumsum(1) - (out == EOS).long()) > 0
    gold = out.masked_fill(after_eos | ((out == PAD).cumsum(1) > 0), PAD)
    tgt_in = torch.cat([torch.full_like(out[:, :1], BOS), out[:, :-1]], dim=1)
    return interp.Problems(p.src, tgt_in, gold), "UNTRAINED model (no data/adder.pt), scored against its own answers"


def best_of(fn, repeats):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), times, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["zero", "mean", "both"], default="both")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for both paths (default 1, as the studies use; 0: torch's own)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="seconds, on a tiny scale: it still runs (make bench-smoke)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.mode = 1, "zero"
    keep_freed_memory()  # as the CLI does
    runtime.ANALYSIS_THREADS = args.threads or None  # both the plain loop and the fast path run under it
    if CHECKPOINT.exists():
        adder = Adder.load(CHECKPOINT, device="cpu")
    else:
        torch.manual_seed(0)
        adder = Adder(Seq2SeqTransformer(Seq2SeqConfig()))
    problems, what = problems_for(adder)
    if args.smoke:
        problems = interp.Problems(problems.src[:200], problems.tgt_in[:200], problems.gold[:200])
    configs = [[]] + [[h] for h in adder.heads]
    with runtime.analysis_threads():
        n_threads = torch.get_num_threads()
    print(
        f"torch {torch.__version__}, {n_threads} threads, {os.cpu_count()} CPUs; "
        f"load average before: {os.getloadavg()[0]:.2f}"
    )
    print(f"model: {what}; {len(configs)} evaluations x {len(problems)} problems; best of {args.repeats}\n")
    print(f"{'mode':<6} {'plain loop':>11} {'fast sweep':>11} {'speed-up':>9}  {'same':>5}  fast <= 15 s")
    for mode in ["zero", "mean"] if args.mode == "both" else [args.mode]:
        if mode == "mean":
            mean_z(adder.model)  # computed once per model and cached, like the studies do
        plain_s, plain_all, plain = best_of(lambda: interp.plain_matches(adder, problems, configs, mode), args.repeats)  # noqa: B023 (called here)
        fast_s, fast_all, fast = best_of(lambda: interp.fast_matches(adder, problems, configs, mode), args.repeats)  # noqa: B023
        same = bool(np.array_equal(plain, fast))
        print(
            f"{mode:<6} {plain_s:10.2f}s {fast_s:10.2f}s {plain_s / fast_s:8.2f}x  {str(same):>5}  "
            f"{'yes' if fast_s <= 15 else 'NO'}   (all runs: plain {', '.join(f'{t:.2f}' for t in plain_all)};"
            f" fast {', '.join(f'{t:.2f}' for t in fast_all)})"
        )
        if not same:
            raise SystemExit("the fast sweep disagrees with the plain loop")
    print(
        f"\nload average after: {os.getloadavg()[0]:.2f} (on {os.cpu_count()} CPUs: above ~{os.cpu_count()} "
        f"means other work shared the cores and the times are inflated)"
    )


if __name__ == "__main__":
    main()
