"""Time attnkit's from-scratch attention against PyTorch's, forward + backward.

    python benchmarks/bench_attention.py [--repeats 11] [--threads 1]

The kit's sizes are the adder's: batch 256, 4 heads, 7 source / 6 target positions (16 for
the sortedness classifier), d_head 16. The bar: the kit's attention must not be what makes
training slow, so at those sizes it should be within 2x of PyTorch's fused kernel.
Numbers depend on the machine and on what else runs on it; report both.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from attnkit.core.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention

KIT_SIZES = [(256, 4, 7, 16), (256, 4, 16, 16)]  # (batch, heads, pos, d_head)
LARGER = [(16, 8, 128, 64)]


def compare_ms(ours, theirs, repeats: int, inner: int = 3) -> tuple[float, float]:
    """Median ms per call of two steps, timed alternately so that a busy machine slows both alike."""
    for step in (ours, theirs):
        step()  # warm-up
    times = {ours: [], theirs: []}
    for _ in range(repeats):
        for step in (ours, theirs):
            start = time.perf_counter()
            for _ in range(inner):
                step()
            times[step].append((time.perf_counter() - start) / inner * 1e3)
    return statistics.median(times[ours]), statistics.median(times[theirs])


def fwd_bwd(fn, *inputs):
    def step():
        for t in inputs:
            t.grad = None
        out = fn(*inputs)
        out.sum().backward()

    return step


def bench_sdpa(batch, heads, n_pos, d_head, causal, repeats):
    q, k, v = (torch.randn(batch, heads, n_pos, d_head, requires_grad=True) for _ in range(3))
    mask = causal_mask(n_pos) if causal else None
    return compare_ms(
        fwd_bwd(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0], q, k, v),
        fwd_bwd(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v),
        repeats,
    )


def bench_mha(batch, heads, n_pos, d_head, causal, repeats):
    d_model = heads * d_head
    ours_m, theirs_m = MultiHeadAttention(d_model, heads), nn.MultiheadAttention(d_model, heads, batch_first=True)
    x = torch.randn(batch, n_pos, d_model, requires_grad=True)
    pad = torch.arange(n_pos) >= torch.randint(1, n_pos + 1, (batch, 1))  # True = padding
    attn_mask = ~causal_mask(n_pos) if causal else None  # theirs: True = blocked
    return compare_ms(
        fwd_bwd(lambda x: ours_m(x, key_padding_mask=pad, causal=causal), x),
        fwd_bwd(lambda x: theirs_m(x, x, x, key_padding_mask=pad, attn_mask=attn_mask, need_weights=False)[0], x),
        repeats,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (default: torch's own); 1 gives steadier numbers on a busy machine",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="seconds, on a tiny scale: it still runs (make bench-smoke)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeats = 2
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; forward + backward, median ms\n")
    print(f"{'what':<44} {'attnkit':>9} {'PyTorch':>9} {'ratio':>6}")
    kit_ratios = {"sdpa": [], "mha": []}
    rows = [("sdpa", bench_sdpa, "F.scaled_dot_product_attention"), ("mha", bench_mha, "nn.MultiheadAttention")]
    for kind, bench, reference in rows:
        print(f"-- vs {reference}" + (" (padding mask, need_weights=False)" if kind == "mha" else ""))
        for size in KIT_SIZES + ([] if args.smoke else LARGER):
            for causal in (False, True):
                ours, theirs = bench(*size, causal, args.repeats)
                batch, heads, n_pos, d_head = size
                label = f"{kind} b={batch} h={heads} pos={n_pos} d_head={d_head}{' causal' if causal else ''}"
                print(f"{label:<44} {ours:9.3f} {theirs:9.3f} {ours / theirs:5.2f}x")
                if size in KIT_SIZES:
                    kit_ratios[kind].append(ours / theirs)
    print()
    for kind, reference in (("sdpa", "the fused kernel"), ("mha", "nn.MultiheadAttention, whole layer as in training")):
        worst = max(kit_ratios[kind])
        print(f"at the kit's sizes, vs {reference}: worst {worst:.2f}x — within 2x: {'yes' if worst <= 2 else 'no'}")


if __name__ == "__main__":
    main()
