"""Does the kit work on a GPU, and what does the GPU buy? (the kit uses one when PyTorch finds one)

On a machine with a CUDA GPU: the committed adder and classifiers run on the GPU and give the
CPU's answers and accuracies; greedy evaluation is timed on both; the adder (both digit orders)
and one sortedness model are trained on the GPU from scratch.

    python benchmarks/check_gpu.py
"""

import time

import torch
from bench_adder import eval_speed

from attnkit import sortedness
from attnkit.adder import Adder
from attnkit.adder.data import EDGE_CASES, load_test_set
from attnkit.adder.evaluate import greedy_correct
from attnkit.adder.model import Seq2SeqConfig
from attnkit.adder.train import AdderTrainConfig, train_adder
from attnkit.core.positional import ENCODINGS
from attnkit.experiments import sortedness_runs


def main() -> None:
    if not torch.cuda.is_available():
        print("check_gpu: PyTorch finds no CUDA GPU here, nothing to check (run it on a machine with one)")
        return
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, {torch.get_num_threads()} CPU threads")
    a, b = load_test_set()
    cpu, gpu = Adder.load(device="cpu"), Adder.load()  # the default: the GPU when there is one
    assert gpu.device.type == "cuda"
    m_cpu, m_gpu = cpu.evaluate(), gpu.evaluate()
    for key in ("exact_match", "per_digit_accuracy", "teacher_forced_token_accuracy"):
        print(f"adder {key:30s} CPU {m_cpu[key]:.4f}  GPU {m_gpu[key]:.4f}")
    problems = [f"{x}+{y}" for x, y in zip(a, b)]
    differ = sum(x != y for x, y in zip(cpu.solve(problems), gpu.solve(problems)))
    print(
        f"adder: answers that differ between CPU and GPU: {differ} of {len(problems)}; "
        f"edge cases on the GPU: {gpu.solve(EDGE_CASES)}"
    )
    heads = ["dec.cross.1.0", "enc.self.0.1"]
    with cpu.ablate(heads), gpu.ablate(heads):
        print(
            f"adder without {heads}: exact match CPU {cpu.evaluate()['exact_match']:.4f}, "
            f"GPU {gpu.evaluate()['exact_match']:.4f}"
        )
    t_cpu, t_gpu = eval_speed(cpu.model), eval_speed(gpu.model)  # greedy_correct ends with .cpu(): waits for the GPU
    print(f"greedy evaluation of 10,000 problems: CPU {t_cpu:.3f} s, GPU {t_gpu:.3f} s (ratio {t_cpu / t_gpu:.1f})")

    for name, cfg in [("assignment order", Seq2SeqConfig()), ("reversed output", Seq2SeqConfig(reverse_output=True))]:
        t = time.perf_counter()
        result = train_adder(cfg, AdderTrainConfig(), device="cuda", progress=False)
        exact = float(greedy_correct(result.model, a, b).mean())
        print(
            f"adder trained on the GPU, {name}: {time.perf_counter() - t:.1f} s, {result.steps} steps, "
            f"held-out exact match {exact:.4f}"
        )

    val_set, test_sets = sortedness.make_val_set(), sortedness.make_test_sets()
    for encoding in ENCODINGS:
        model = sortedness.load_classifier(encoding, device="cuda")
        got = sortedness.evaluate_classifier(model, val_set, test_sets)
        gap = max(abs(got[neg][n] - model.metrics[neg][n]) for neg in sortedness.NEGATIVES for n in test_sets)
        print(f"sortedness {encoding:10s} on the GPU: largest accuracy gap to the committed (CPU) results {gap:.4f}")
    t = time.perf_counter()
    # the very function each run of `python -m attnkit train sortedness` calls
    metrics, _, _ = sortedness_runs._train_and_evaluate(
        sortedness.SortednessConfig(encoding="relative"), 0, sortedness.make_train_set(), val_set, test_sets, "cuda"
    )
    cpu_runs = sortedness.load_results()["encodings"]["relative"]
    print(
        f"sortedness, relative, seed 0, trained on the GPU: {time.perf_counter() - t:.1f} s; validation (hard) "
        f"{metrics['val']['hard']:.3f}, length 256 {metrics['hard'][256]:.3f} "
        f"(CPU seeds: {cpu_runs['val']['hard']['seeds']}, {cpu_runs['hard'][256]['seeds']})"
    )


if __name__ == "__main__":
    main()
