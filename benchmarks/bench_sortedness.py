"""Time the pieces of `python -m attnkit train sortedness` on this machine.

    python benchmarks/bench_sortedness.py            # ~1 minute: 100 training steps per encoding + one evaluation

The full experiment trains 21 models (6 encodings × 3 seeds + 3 variants) for 2,000 steps each (2,400 for
the sinusoidal and learned tables), on one thread, in one worker process per core; the estimate below adds
the evaluations. Last, the evaluation at length 256 with freed memory kept in the process (what attnkit
does in the CLI and the experiment runner, core/allocator.py) against glibc's initial thresholds, which
hand it back to the OS.
"""

import sys
import time

import torch

from attnkit.core.allocator import keep_freed_memory
from attnkit.core.positional import ENCODINGS
from attnkit.sortedness import (
    DataConfig,
    SortednessConfig,
    SortednessTrainConfig,
    accuracy_by_kind,
    evaluate_classifier,
    make_test_sets,
    make_train_set,
    make_val_set,
    train_classifier,
    train_config,
)


def main(steps: int = 100, repeats: int = 3, encodings=ENCODINGS) -> None:
    torch.set_num_threads(1)  # as run_experiment does on CPU
    start = time.perf_counter()
    data = DataConfig()
    train_set, val_set, tests = make_train_set(data), make_val_set(data), make_test_sets(data)
    print(f"data sets: {time.perf_counter() - start:.2f} s")
    per_model = {}
    for enc in encodings:
        cfg = SortednessConfig(encoding=enc)
        result = train_classifier(cfg, SortednessTrainConfig(steps=steps), train_set, device="cpu", progress=False)
        t = time.perf_counter()
        evaluate_classifier(result.model, val_set, tests)
        evaluation = time.perf_counter() - t
        per_model[enc] = result.seconds / steps * train_config(cfg, 0).steps + evaluation
        print(f"{enc:10s} {1000 * result.seconds / steps:6.1f} ms/step   evaluation {evaluation:5.2f} s")
    runs = 3 * sum(per_model.values())  # the 18 encoding × seed runs, on one core
    print(f"estimated 18 encoding × seed runs: {runs / 60:.1f} min on one core, {runs / 120:.1f} min on two workers")

    def eval_256(model) -> float:
        t = time.perf_counter()
        accuracy_by_kind(model, *tests[256])
        return time.perf_counter() - t

    model = result.model
    eval_256(model)  # warm-up
    keep_freed_memory(True)  # as the CLI does (without it, this measured whatever glibc's own thresholds had become)
    kept = min(eval_256(model) for _ in range(repeats))
    keep_freed_memory(False)
    returned = min(eval_256(model) for _ in range(repeats))
    keep_freed_memory(True)
    print(
        f"evaluation at length 256 (750 rows): freed memory kept {kept:.2f} s, handed back to the OS "
        f"{returned:.2f} s (ratio {returned / kept:.2f})"
    )


if __name__ == "__main__":
    # --smoke: a few seconds on a tiny scale, to check that it still runs (make bench-smoke)
    main(steps=2, repeats=1, encodings=["alibi"]) if "--smoke" in sys.argv[1:] else main()
