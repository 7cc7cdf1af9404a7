"""Time the attention explorer's redraw after a slider move, against recomputing the patterns.

    python benchmarks/bench_explorer.py [--moves 30] [--n 10000]

The explorer computes every head's pattern on every held-out problem once, in one batched
pass: a sample-slider move then only updates and renders the figure. The baseline recomputes
the patterns on every move — runs the model on that problem again (adder.run_with_cache,
greedy decoding included, on one thread as the explorer does for a typed problem) — and then
draws exactly as the explorer does.
The bar: the explorer's median redraw is at most 150 ms on a laptop CPU. Wall-clock numbers
depend on what else runs on the machine, so the load average and the process CPU time are
printed as well; report both.
"""

import argparse
import os
import statistics
import time

import attnkit
from attnkit.adder import CHECKPOINT, Adder
from attnkit.adder.data import load_test_set
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.core.runtime import torch_threads
from attnkit.ui.attention_plot import AttentionPlot
from attnkit.ui.widgets import ALL_HEADS, AttentionExplorer

BAR_MS = 150.0


def timed(steps, moves: int) -> list[tuple[float, float]]:
    """Median wall and CPU milliseconds of each step(i), i = 1 … moves, after one warm-up call.
    The steps take turns at every i, so a burst of load on a shared machine hits them alike."""
    for step in steps:
        step(0)
    wall, cpu = [[] for _ in steps], [[] for _ in steps]
    for i in range(1, moves + 1):
        for k, step in enumerate(steps):
            w, c = time.perf_counter(), time.process_time()
            step(i)
            wall[k].append((time.perf_counter() - w) * 1e3)
            cpu[k].append((time.process_time() - c) * 1e3)
    return [(statistics.median(w), statistics.median(c)) for w, c in zip(wall, cpu)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=30, help="slider moves to time per view")
    parser.add_argument("--n", type=int, default=10_000, help="held-out problems the explorer loads")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="seconds, on a tiny scale: it still runs (make bench-smoke)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.moves, args.n = 2, 200

    if CHECKPOINT.exists():
        adder, which = attnkit.load_pretrained("adder"), "data/adder.pt"
    else:
        adder, which = Adder(Seq2SeqTransformer(Seq2SeqConfig())), "untrained (data/adder.pt missing)"
    a, b = load_test_set()
    a, b = a[: args.n], b[: args.n]
    start = time.perf_counter()
    explorer = AttentionExplorer(adder, a, b)
    setup = time.perf_counter() - start
    load = os.getloadavg()
    print(
        f"model: {which}; {len(a)} held-out problems; {os.cpu_count()} CPUs, "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min)"
    )
    print(f"explorer set-up (one pass over every problem + head roles): {setup:.2f} s\n")
    print(f"{'view':<34} {'explorer':>17} {'recompute':>17} {'ratio':>7}")
    print(f"{'':<34} {'wall / cpu ms':>17} {'wall / cpu ms':>17}")

    worst = 0.0
    for kind, layer, head in [("dec.cross", 1, 0), ("dec.cross", 1, ALL_HEADS), ("enc.self", 0, 0), ("dec.self", 1, 0)]:
        explorer.show(sample=0, kind=kind, layer=layer, head=head)

        def move(i):  # what a slider move does: set the value, the observer redraws
            explorer.sample.value = i % len(a)

        plot = AttentionPlot()

        def recompute(i):  # the baseline: run the model again on every move, then draw the same way
            i = i % len(a)
            with torch_threads(1):
                _, cache = adder.run_with_cache([f"{a[i]}+{b[i]}"])
            plot.png(plot.figure(cache, 0, kind, layer, None if head == ALL_HEADS else head, adder.cfg.reverse_output))  # noqa: B023 (run in this iteration)

        (ours, ours_cpu), (base, base_cpu) = timed([move, recompute], args.moves)
        worst = max(worst, ours)
        label = f"{kind}.{layer} " + ("all heads (grid)" if head == ALL_HEADS else f"head {head}")
        print(f"{label:<34} {ours:8.1f} / {ours_cpu:6.1f} {base:8.1f} / {base_cpu:6.1f} {base / ours:6.2f}x")
    print(
        f"\nslowest median redraw: {worst:.1f} ms — within {BAR_MS:.0f} ms: {'yes' if worst <= BAR_MS else 'no'}"
        + ("" if load[0] < (os.cpu_count() or 1) else "  (machine busy: the load average exceeds the CPU count)")
    )


if __name__ == "__main__":
    main()
