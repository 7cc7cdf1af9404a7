"""The speed guard: the kit's hot paths timed against a PyTorch-only baseline of the same run, so
that a slowdown in the kit fails CI whatever the machine's own speed (about half a minute).

    python benchmarks/speed_guard.py                  # exit 1 when a case got slower than committed
    python benchmarks/speed_guard.py --record         # write the ratios of this run as the committed ones
    python benchmarks/speed_guard.py --plant chunk16  # a planted slowdown (chunk16, hook-sleep): must fail

Each case is timed in turns with a baseline that no change to the kit's code can speed up or slow
down, and its ratio (the case's median over the baseline's) is compared with the committed ratio in
speed_guard.json: more than `margin` above it fails (a case over its limit is measured once more, and
the better of the two counts). The margin comes from the spread of repeated runs (speed_guard.json's
"spread" says what was seen). The baselines:
- evaluation: greedy decoding of the same 10,000 held-out sums by torch.nn.Transformer of the same
  size (bench_adder.TorchTransformerAdder): like the kit's path, mostly small kernels, so the ratio
  moves little from one CPU to another (0.18-0.25 on the three machines measured, where its ratio to
  the matrix products alone went from 9.9 to 18);
- every other case: every matrix product of one greedy evaluation of the 10,000 held-out sums,
  replayed with torch alone (bench_adder.matrix_product_floor).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from bench_adder import TorchTransformerAdder, linear_calls, replay  # noqa: E402
from torch import nn  # noqa: E402

import attnkit  # noqa: E402
from attnkit import interp  # noqa: E402
from attnkit.adder.data import PAD, encode_sources, encode_targets, load_test_set  # noqa: E402
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer  # noqa: E402
from attnkit.core.journal import atomic_write  # noqa: E402
from attnkit.interp.ablation import Problems  # noqa: E402

FIGURES = Path(__file__).with_name("speed_guard.json")


def floor_replay(model: Seq2SeqTransformer, src: torch.Tensor):
    """The baseline: the first eighth of the nn.Linear calls of one greedy evaluation, replayed with
    torch alone (an eighth: about as long as the shorter cases, so turns stay cheap)."""
    calls = linear_calls(model, src)
    return replay(calls[: len(calls) // 8])[0]


def nn_transformer_greedy(model: Seq2SeqTransformer, src: torch.Tensor):
    """The evaluation case's baseline: torch.nn.Transformer of the adder's size (seeded weights: its
    speed does not depend on them) decoding `src` greedily, the memory encoded once."""
    torch.manual_seed(0)
    with warnings.catch_warnings():  # nn.Transformer's note that norm_first leaves out nested tensors
        warnings.simplefilter("ignore", UserWarning)
        baseline = TorchTransformerAdder(model.cfg).eval()
    return lambda: baseline.greedy(src)


def evaluation(adder, a, b):
    src = encode_sources(a, b, adder.cfg.n_digits, adder.cfg.zero_pad)
    return lambda: adder.model.greedy(src)


def training_step(adder, a, b):
    """One optimiser step of a fresh adder on 256 sums: every hook point passed, forward and backward."""
    cfg = adder.cfg
    torch.manual_seed(0)
    student = Seq2SeqTransformer(Seq2SeqConfig()).train()
    opt = torch.optim.AdamW(student.parameters(), lr=1e-3)
    src = encode_sources(a[:256], b[:256], cfg.n_digits, cfg.zero_pad)
    tgt = encode_targets(a[:256] + b[:256], cfg.n_digits, cfg.reverse_output)

    def step():
        logits = student(src, tgt[:, :-1])
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=PAD
        )
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def ablation_sweep(adder, a, b):
    """Every single-head ablation (zero) of the 24 heads on 500 held-out sums, the fast sweep."""
    problems = Problems.from_operands(adder.model, a[:500], b[:500])
    configs = [[]] + [[h] for h in adder.heads]
    return lambda: interp.fast_matches(adder, problems, configs, "zero")


def explorer_redraw(adder, a, b):
    """A sample-slider move of notebook 03's explorer (one head of decoder cross-attention)."""
    from attnkit.ui.widgets import AttentionExplorer

    explorer = AttentionExplorer(adder, a[:500], b[:500])
    explorer.show(sample=0, kind="dec.cross", layer=1, head=0)
    moves = iter(range(1, 10**6))

    def redraw():
        explorer.sample.value = next(moves) % 500

    return redraw


def grading_one_notebook(adder, a, b):
    """`attnkit grade` of a solved notebook 01 (every exercise must pass)."""
    from attnkit.course.grading import NOTEBOOKS_DIR, grade_notebook

    folder = tempfile.TemporaryDirectory(prefix="attnkit-guard-")  # removed with `grade`, or at exit
    solved = Path(folder.name) / "01_attention_from_scratch.ipynb"
    nbformat.write(nbformat.read(NOTEBOOKS_DIR / solved.name, as_version=4), solved)

    def grade():
        rows = grade_notebook(solved)
        assert all(r.passed for r in rows), rows

    grade.folder = folder  # type: ignore[attr-defined]
    return grade


CASES = {  # name -> (what builds the callable to time, repeats, what builds its baseline)
    "evaluation": (evaluation, 5, nn_transformer_greedy),
    "training step": (training_step, 10, floor_replay),
    "ablation sweep": (ablation_sweep, 3, floor_replay),
    "explorer redraw": (explorer_redraw, 10, floor_replay),
    "grading one notebook": (grading_one_notebook, 3, floor_replay),
}


def plant(what: str) -> None:
    """Slow the kit down on purpose, to show that the guard fails."""
    if what == "chunk16":
        import attnkit.adder.fused as fused

        fused.chunk_size = lambda model, n_src: 16
    elif what == "hook-sleep":
        from attnkit.core.hooks import HookPoint

        call = HookPoint.__call__

        def sleepy(self, x):
            time.sleep(0.002)
            return call(self, x)

        HookPoint.__call__ = sleepy  # type: ignore[method-assign]


def measure(run, baseline, repeats: int) -> tuple[float, float]:
    """(ratio of medians, the case's median seconds): case and baseline in turns, after a warm-up."""
    run(), baseline()
    ours, base = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        baseline()
        base.append(time.perf_counter() - t)
    return statistics.median(ours) / statistics.median(base), statistics.median(ours)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record", action="store_true", help="write this run's ratios to speed_guard.json")
    parser.add_argument("--plant", choices=["chunk16", "hook-sleep"], help="a planted slowdown (must fail)")
    parser.add_argument("--only", action="append", help="only this case (repeatable)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    committed = json.loads(FIGURES.read_text())
    if args.plant:
        plant(args.plant)
    adder = attnkit.load_pretrained("adder")
    a, b = load_test_set()
    src = encode_sources(a, b, 3, True)
    baselines: dict = {}  # each built once, when a case first needs it
    unknown = set(args.only or []) - set(CASES)
    if unknown:
        parser.error(f"no case {', '.join(sorted(unknown))}; the cases: {', '.join(CASES)}")
    ratios, failed = {}, []
    print(f"{'case':<22} {'seconds':>8} {'ratio':>7} {'committed':>10} {'limit':>7}")
    for name, (build, repeats, against) in CASES.items():
        if args.only and name not in args.only:
            continue
        if against not in baselines:
            baselines[against] = against(adder.model, src)
        run, baseline = build(adder, a, b), baselines[against]
        ratio, seconds = measure(run, baseline, repeats)
        want = committed["ratios"].get(name)
        limit = want * (1 + committed["margin"]) if want else float("inf")
        if ratio > limit and not args.plant:  # a burst of load from elsewhere: one more measurement decides
            ratio, seconds = min((ratio, seconds), measure(run, baseline, repeats))
        ratios[name] = round(ratio, 3)
        verdict = "ok" if ratio <= limit else "SLOWER"
        failed += [name] if ratio > limit else []
        print(f"{name:<22} {seconds:8.3f} {ratio:7.2f} {want or float('nan'):10.2f} {limit:7.2f}  {verdict}")
    if args.record:
        committed["ratios"].update(ratios)
        atomic_write(FIGURES, (json.dumps(committed, indent=2) + "\n").encode())
        print(f"recorded in {FIGURES}")
    if failed and not args.record:
        print(f"slower than committed by more than {committed['margin']:.0%}: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
