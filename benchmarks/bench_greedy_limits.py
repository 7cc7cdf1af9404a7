"""How fast can greedy evaluation of the adder get on this CPU, in plain (eager) PyTorch?

The adder issue asks for greedy evaluation of the 10,000 held-out problems in <= 0.5 s on
2 CPU cores. This measures, in one run, on the committed checkpoint:

  * the package's `Seq2SeqTransformer.greedy` (what `evaluate` and `solve` use): with no hook
    attached, the fused path of attnkit/adder/fused.py (no module calls, one matrix product for
    Q, K and V, a key/value cache allocated once);
  * the hooked path, `_greedy`, which every hook point passes (what runs when a hook is attached).
    It must give the same 10,000 answers (checked);
  * the matrix products alone: every nn.Linear call of one evaluation, replayed on its own;
  * with --compile, also the package's greedy with encode and decode through torch.compile
    (Inductor: needs a C++ compiler; compiling takes minutes, and the growing key/value cache
    makes it recompile at each decoding step until dynamo's recompile limit, with warnings).

    python benchmarks/bench_greedy_limits.py [--compile]
"""

import argparse
import copy
import statistics
import time

import torch
from bench_adder import matrix_product_floor

from attnkit.adder import Adder
from attnkit.adder.data import encode_sources, load_test_set


def compiled_copy(model):
    """A copy of the model whose encode and decode go through torch.compile: its own greedy()
    loop then calls the compiled ones."""
    compiled = copy.deepcopy(model)
    compiled.encode, compiled.decode = torch.compile(compiled.encode), torch.compile(compiled.decode)
    return compiled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile (slow to compile)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="seconds, on a tiny scale: it still runs (make bench-smoke)",
    )
    args = parser.parse_args()
    model = Adder.load(device="cpu").model
    a, b = load_test_set()
    src = encode_sources(a, b, model.cfg.n_digits, model.cfg.zero_pad)
    same = torch.equal(model._greedy(src, 512), model.greedy(src))
    print(f"torch threads: {torch.get_num_threads()}; the hooked path gives the same 10,000 answers: {same}")
    variants = {"package greedy": lambda: model.greedy(src), "hooked path": lambda: model._greedy(src, 512)}
    if args.compile:
        compiled = compiled_copy(model)
        t = time.perf_counter()
        same = torch.equal(compiled.greedy(src), model.greedy(src))
        print(f"torch.compile: {time.perf_counter() - t:.0f} s to compile and run once; same answers: {same}")
        variants["torch.compile"] = lambda: compiled.greedy(src)
    times = {name: [] for name in variants}
    for _ in range(1 if args.smoke else 11):  # interleaved: this machine's speed drifts between runs
        for name, run in variants.items():
            t = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t)
    floor, gflop = matrix_product_floor(model)
    base = statistics.median(times["package greedy"])
    for name, ts in times.items():
        print(
            f"{name:20s} median {statistics.median(ts):.3f} s (min {min(ts):.3f}), "
            f"ratio to the package {statistics.median(ts) / base:.2f}"
        )
    print(
        f"{'matrix products':20s} {floor:.3f} s for {gflop:.1f} GFLOP ({gflop / floor:.0f} GFLOP/s): "
        f"the floor for any float32 code that computes these products"
    )


if __name__ == "__main__":
    main()
