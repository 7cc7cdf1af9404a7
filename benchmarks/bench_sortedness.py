"""Time the pieces of `python -m attnkit train sortedness` on this machine.

    python benchmarks/bench_sortedness.py            # ~1 minute: 100 training steps per encoding + one evaluation

The full experiment trains 21 models (6 encodings × 3 seeds + 3 variants) for 2,000 steps each, on one
thread; multiply the per-step time below by 2,000 × 21 and add 21 evaluations for an estimate.
"""
import time

import torch

from attnkit.positional import ENCODINGS
from attnkit.sortedness import (DataConfig, SortednessConfig, TrainConfig, evaluate, make_test_sets, make_train_set,
                                make_val_set, train_classifier)


def main(steps: int = 100) -> None:
    torch.set_num_threads(1)  # as run_experiment does on CPU
    start = time.perf_counter()
    data = DataConfig()
    train_set, val_set, tests = make_train_set(data), make_val_set(data), make_test_sets(data)
    print(f"data sets: {time.perf_counter() - start:.2f} s")
    per_step = {}
    for enc in ENCODINGS:
        result = train_classifier(SortednessConfig(encoding=enc), TrainConfig(steps=steps), train_set,
                                  device="cpu", progress=False)
        per_step[enc] = result.seconds / steps
        t = time.perf_counter()
        evaluate(result.model, val_set, tests)
        print(f"{enc:10s} {1000 * per_step[enc]:6.1f} ms/step   evaluation {time.perf_counter() - t:5.2f} s")
    mean = sum(per_step.values()) / len(per_step)
    print(f"estimated full experiment (21 models × 2,000 steps, without evaluation): {21 * 2000 * mean / 60:.1f} min")


if __name__ == "__main__":
    main()
