"""How fast does the adder train, and how fast does it evaluate? (issue: the adder)

Wall time from a fresh start to >= 99.9 % greedy exact match on the 10,000 held-out
problems (training plus the final evaluation), for attnkit's transformer in the
assignment's digit order and reversed, against torch.nn.Transformer of the same size
trained the same way (same data stream, optimiser, schedule and stopping rule). Both sides
encode a batch once and reuse the memory at every decoding step, in evaluation and in the
validation that decides when training stops; attnkit also caches the decoder's keys and
values, which nn.TransformerDecoder cannot, so the baseline reruns the decoder over the prefix.

    python benchmarks/bench_adder.py            # everything (a few minutes on 2 cores)
    python benchmarks/bench_adder.py --quick    # evaluation speed only
    python benchmarks/bench_adder.py --quick --before b6c1cdf   # and the fused path of that commit
"""

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from attnkit.adder import Adder
from attnkit.adder.data import BOS, PAD, encode_sources, load_test_set
from attnkit.adder.evaluate import greedy_correct
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.adder.train import AdderTrainConfig, train_adder


class TorchTransformerAdder(nn.Module):
    """The baseline: the same embeddings and sizes around torch.nn.Transformer."""

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.src_pos = nn.Embedding(cfg.max_src_len, cfg.d_model)
        self.tgt_pos = nn.Embedding(cfg.max_tgt_len, cfg.d_model)
        self.transformer = nn.Transformer(
            cfg.d_model,
            cfg.n_heads,
            cfg.n_enc_layers,
            cfg.n_dec_layers,
            cfg.d_ff,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size)

    def encode(self, src):
        """(batch, src_pos) ids -> memory (batch, src_pos, d_model): nn.Transformer.encoder, once."""
        src_x = self.tok_embed(src) + self.src_pos(torch.arange(src.size(1), device=src.device))
        return self.transformer.encoder(src_x, src_key_padding_mask=src == PAD)

    def decode(self, tgt, memory, src_pad):
        """Logits for every position of tgt, reading the given memory (nn.Transformer.decoder)."""
        tgt_x = self.tok_embed(tgt) + self.tgt_pos(torch.arange(tgt.size(1), device=tgt.device))
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), device=tgt.device)
        y = self.transformer.decoder(
            tgt_x, memory, tgt_mask=causal, memory_key_padding_mask=src_pad, tgt_is_causal=True
        )
        return self.unembed(y)

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src), src == PAD)  # what nn.Transformer.forward does

    @torch.no_grad()
    def greedy(self, src):
        """Encode once per batch, as attnkit does; every decoding step reuses the memory. (The
        decoder itself reruns the whole prefix: nn.TransformerDecoder keeps no key/value cache.)"""
        memory, src_pad = self.encode(src), src == PAD
        tgt = torch.full((src.size(0), 1), BOS, device=src.device)
        for _ in range(self.cfg.max_tgt_len - 1):
            tgt = torch.cat([tgt, self.decode(tgt, memory, src_pad)[:, -1:].argmax(-1)], dim=1)
        return tgt[:, 1:]


def time_to_target(cfg: Seq2SeqConfig, train_cfg: AdderTrainConfig, baseline: bool = False) -> dict:
    start = time.perf_counter()
    model = TorchTransformerAdder(cfg) if baseline else None
    result = train_adder(cfg, train_cfg, progress=False, model=model)
    a, b = load_test_set()
    exact = float(greedy_correct(result.model, a, b).mean())
    return {"seconds": time.perf_counter() - start, "steps": result.steps, "exact_match": exact}


def eval_speed(model, repeats: int = 5) -> float:
    a, b = load_test_set()
    greedy_correct(model, a[:1000], b[:1000])  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        greedy_correct(model, a, b)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def linear_calls(model: Seq2SeqTransformer, src: torch.Tensor) -> list:
    """(module, input shape) of every nn.Linear call of one greedy evaluation of `src`, on the hooked
    path (its products are the model's own: the fused path stacks Q, K and V into one)."""
    calls = []
    hooks = [
        m.register_forward_hook(lambda mod, inputs, _: calls.append((mod, inputs[0].shape)))
        for m in model.modules()
        if isinstance(m, nn.Linear)
    ]
    try:
        model._greedy(src, 512)
    finally:
        for hook in hooks:
            hook.remove()
    return calls


def replay(calls: list):
    """(a function that runs those products alone on random inputs of the same shapes, their GFLOP)."""
    inputs = {shape: torch.randn(shape) for _, shape in calls}

    @torch.no_grad()
    def run() -> None:
        for mod, shape in calls:
            nn.functional.linear(inputs[shape], mod.weight, mod.bias)

    return run, sum(2 * inputs[shape].numel() * mod.out_features for mod, shape in calls) / 1e9


def matrix_product_floor(model: Seq2SeqTransformer, repeats: int = 5) -> tuple[float, float]:
    """(seconds, GFLOP) of greedy evaluation's matrix products alone: every nn.Linear call of
    one evaluation of the 10,000 problems is recorded, then replayed on its own (random inputs
    of the same shapes). What evaluation spends beyond this goes to everything else."""
    a, b = load_test_set()
    run, gflop = replay(linear_calls(model, encode_sources(a, b, model.cfg.n_digits, model.cfg.zero_pad)))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return statistics.median(times), gflop


def main_as_it_was(model: Seq2SeqTransformer, src: torch.Tensor) -> torch.Tensor:
    """Greedy decoding as the kit did it before the fused path: every hook point an nn.Module call
    (nn.Module.__call__, not HookPoint's shortcut), chunks of 512."""
    from attnkit.core.hooks import HookPoint

    shortcut = HookPoint.__call__
    HookPoint.__call__ = nn.Module.__call__  # type: ignore[method-assign]
    try:
        return model._greedy(src, 512)
    finally:
        HookPoint.__call__ = shortcut  # type: ignore[method-assign]


def fused_path_at(commit: str):
    """fused_greedy as attnkit/adder/fused.py had it at `commit` (taken from git, imported beside
    today's package: its relative imports resolve to today's modules, which it only borrows from)."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "show", f"{commit}:attnkit/adder/fused.py"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fused_before.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("attnkit.adder.fused_before", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module.fused_greedy


def quick(rounds: int = 5, before: str | None = None) -> None:
    """Evaluation of the 10,000 held-out sums by the committed adder, in one run and in turns:
    the kit's greedy, the kit's code as it was before the fused path, nn.Transformer of the same
    size, and the matrix products alone (the floor); with `before`, also the fused path of that commit."""
    adder = Adder.load(device="cpu")
    model = adder.model.eval()
    a, b = load_test_set()
    src = encode_sources(a, b, model.cfg.n_digits, model.cfg.zero_pad)
    answers = model.greedy(src)
    same = torch.equal(answers, main_as_it_was(model, src))
    if before:
        old_fused = fused_path_at(before)
        print(f"the same 10,000 answers as the fused path at {before}: {torch.equal(answers, old_fused(model, src))}")
    baseline = TorchTransformerAdder(model.cfg).eval()
    floor, gflop = replay(linear_calls(model, src))  # recorded once, replayed every round
    variants = {
        "attnkit greedy": lambda: model.greedy(src),
        "before the fused path": lambda: main_as_it_was(model, src),
        **({f"fused path at {before}": lambda: old_fused(model, src)} if before else {}),
        "nn.Transformer": lambda: baseline.greedy(src),
        "matrix products alone": floor,
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            t = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t)
    floor_s = statistics.median(times["matrix products alone"])
    print(f"torch threads: {torch.get_num_threads()}; {rounds} rounds in turns; {gflop:.1f} GFLOP of products")
    print(f"the same 10,000 answers as before the fused path: {same}")
    for name, ts in times.items():
        median = statistics.median(ts)
        rounds_ratio = ", ".join(f"{t / f:.2f}" for t, f in zip(ts, times["matrix products alone"]))
        print(
            f"{name:24s} median {median:.3f} s (range {min(ts):.3f}-{max(ts):.3f}), "
            f"{median / floor_s:.2f}x the floor (per round: {rounds_ratio})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="evaluation speed only")
    parser.add_argument("--before", metavar="COMMIT", help="with --quick: also the fused path of this commit, in turns")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="seconds, on a tiny scale: it still runs (make bench-smoke)",
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    cfg = Seq2SeqConfig()
    if args.quick or args.smoke:
        return quick(rounds=1 if args.smoke else 5, before=args.before)
    print(f"torch threads: {torch.get_num_threads()}")
    ours, theirs = eval_speed(Seq2SeqTransformer(cfg).eval()), eval_speed(TorchTransformerAdder(cfg).eval())
    print(
        f"greedy evaluation of 10,000 problems: attnkit {ours:.3f} s, nn.Transformer {theirs:.3f} s "
        f"(ratio {ours / theirs:.2f}; goal <= 0.5 s: {'yes' if ours <= 0.5 else 'NO'})"
    )
    floor, gflop = matrix_product_floor(Seq2SeqTransformer(cfg).eval())
    print(
        f"  of which matrix products alone (every nn.Linear call replayed): {floor:.3f} s for {gflop:.1f} GFLOP "
        f"({gflop / floor:.0f} GFLOP/s), {floor / ours:.0%} of attnkit's evaluation"
    )
    runs = [
        ("attnkit, assignment order", cfg, False, 60),
        ("attnkit, reversed output", Seq2SeqConfig(reverse_output=True), False, 20),
        ("nn.Transformer, assignment order", cfg, True, None),
        ("attnkit, operands without leading 0s", Seq2SeqConfig(zero_pad=False), False, None),
    ]
    results = {}
    for name, c, baseline, goal in runs:
        r = results[name] = time_to_target(c, AdderTrainConfig(), baseline)
        verdict = "" if goal is None else f"  goal <= {goal} s: {'yes' if r['seconds'] <= goal else 'NO'}"
        print(
            f"{name:38s} {r['seconds']:6.1f} s  {r['steps']:5d} steps  held-out exact match "
            f"{r['exact_match']:.4f}{verdict}"
        )
    base = results["nn.Transformer, assignment order"]["seconds"]
    print(
        f"ratio attnkit / nn.Transformer (assignment order): "
        f"{results['attnkit, assignment order']['seconds'] / base:.2f}"
    )


if __name__ == "__main__":
    main()
