"""Training the adder: seeded, with a progress bar, stopping as soon as the target is met.

Interrupting (Ctrl-C, or the notebook's stop button) keeps the best model so far: the loop
catches KeyboardInterrupt and returns what it has. An unfinished model never replaces the
checkpoint at `out_path`: it goes to a side file, adder.interrupted.pt (see interrupted_path),
marked "interrupted" in its metrics, and loading it warns.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..core.allocator import return_freed_memory
from ..core.checkpoint import checkpoint_bytes, save_checkpoint
from ..core.outputs import check_output_file, check_replaceable
from ..core.runtime import AdamW, TrainResult, warmup_cosine
from .data import PAD, ProblemSampler, encode_sources, encode_targets, load_test_set, make_test_set, problem_keys
from .evaluate import evaluate, greedy_correct
from .model import Seq2SeqConfig, Seq2SeqTransformer
from .snapshots import KIND as SNAPSHOT_KIND
from .snapshots import snapshot_payload, snapshots_path, stored


@dataclass
class AdderTrainConfig:
    seed: int = 0
    batch_size: int = 256
    lr: float = 3e-3
    warmup_steps: int = 50  # linear warm-up ...
    max_steps: int = 1500  # ... then cosine decay to lr/10 at max_steps
    eval_every: int = 50  # greedy check on the validation set
    n_val: int = 2000  # validation problems, disjoint from the held-out test set
    target: float = 0.999  # stop when validation greedy exact match reaches this
    p_short: float = 0.2  # share of operands drawn with fewer digits


def validation_set(n: int, n_digits: int, exclude: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform problems (like the test set) that are not in `exclude`."""
    a, b = make_test_set(n + len(exclude), n_digits, seed=seed + 10_000)
    keep = ~np.isin(problem_keys(a, b, n_digits), exclude)
    return a[keep][:n], b[keep][:n]


def interrupted_path(out_path: Path) -> Path:
    """Where an interrupted run saves: data/adder.pt -> data/adder.interrupted.pt."""
    out_path = Path(out_path)
    return out_path.with_name(f"{out_path.stem}.interrupted{out_path.suffix}")


SAVE_SPACE = 16 << 20  # bytes free needed to save: a checkpoint (~1 MB), its report, temporaries, a side file


def check_out_path(out_path: Path) -> Path:
    """ValueError/TypeError before training when the checkpoint, its report (.json) or the side
    file of an interruption could not be written, when one of them exists and is not the kit's
    own file of that kind (a package.json beside --out package.pt stays), or the disk is full."""
    out_path = check_output_file(out_path, ".pt", "checkpoint path", kind="checkpoint", needed=SAVE_SPACE)
    side = interrupted_path(out_path)
    for sibling, kind in (
        (out_path.with_suffix(".json"), "report"),
        (snapshots_path(out_path), "checkpoint"),
        (side, "checkpoint"),
        (side.with_suffix(".json"), "report"),
    ):
        check_replaceable(sibling, kind, f"{sibling.name} beside the checkpoint:")
    return out_path


def rescue_path(out_path: Path) -> Path:
    """Where a trained model goes when its own folder cannot take it (a full disk, a folder made
    read-only meanwhile): the system's temporary folder."""
    return Path(tempfile.gettempdir()) / f"attnkit-rescued-{os.getpid()}-{Path(out_path).name}"


def train_adder(
    model_cfg: Seq2SeqConfig | None = None,
    train_cfg: AdderTrainConfig | None = None,
    out_path: Path | None = None,
    device: str = "cpu",
    progress: bool = True,
    model: Seq2SeqTransformer | None = None,
    snapshot_steps: Sequence[int] = (),
) -> TrainResult[Seq2SeqTransformer]:
    """Train from scratch (or the given `model`, e.g. torch.nn.Transformer for a baseline); with
    `out_path`, save the checkpoint and its report (.json) there as one unit, or after an
    interruption to interrupted_path(out_path). The path is checked before training starts.
    The configs default to the committed model's (Seq2SeqConfig(), AdderTrainConfig()). With
    `snapshot_steps` (step 0: before any update), the weights at those steps are kept (float16)
    and saved with the checkpoint in snapshots_path(out_path), up to the saved model's step."""
    model_cfg, train_cfg = model_cfg or Seq2SeqConfig(), train_cfg or AdderTrainConfig()
    if out_path is not None:
        out_path = check_out_path(out_path)
    torch.manual_seed(train_cfg.seed)
    model = (model or Seq2SeqTransformer(model_cfg)).to(device)
    n = model_cfg.n_digits
    test_a, test_b = load_test_set() if n == 3 else make_test_set(n_digits=n)
    test_keys = problem_keys(test_a, test_b, n)
    val_a, val_b = validation_set(train_cfg.n_val, n, test_keys, train_cfg.seed)
    sampler = ProblemSampler(
        n, np.concatenate([test_keys, problem_keys(val_a, val_b, n)]), train_cfg.seed, train_cfg.p_short
    )

    def schedule(k: int) -> float:
        return warmup_cosine(k, train_cfg.warmup_steps, train_cfg.max_steps, floor=0.1)

    opt = AdamW(model.parameters(), train_cfg.lr, 0.0, schedule)

    result = TrainResult(model)
    best_acc, best_state, best_step = -1.0, None, 0
    snapshot_at, taken = set(snapshot_steps), []
    if 0 in snapshot_at:
        taken.append((0, stored(model.state_dict())))
    start = time.perf_counter()
    bar = tqdm(range(1, train_cfg.max_steps + 1), desc="training", disable=not progress)
    try:
        for step in bar:
            model.train()
            a, b = sampler.sample(train_cfg.batch_size)
            src = encode_sources(a, b, n, model_cfg.zero_pad).to(device)
            tgt = encode_targets(a + b, n, model_cfg.reverse_output).to(device)
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=PAD)
            opt.zero_grad()
            loss.backward()
            opt.step()
            result.steps = step
            if step in snapshot_at:
                taken.append((step, stored(model.state_dict())))
            if step % train_cfg.eval_every == 0:
                val_acc = float(greedy_correct(model, val_a, val_b).mean())
                # No wall-clock times in the history: saved files must not differ between reruns.
                result.history.append({"step": step, "loss": loss.item(), "val_exact_match": val_acc})
                bar.set_postfix(loss=f"{loss.item():.4f}", val_exact=f"{val_acc:.4f}")
                if val_acc > best_acc:
                    best_acc = val_acc
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                    best_step = step
                if val_acc >= train_cfg.target:
                    break
    except KeyboardInterrupt:
        result.interrupted = True
    finally:
        bar.close()
    if best_state is not None:  # the best validated model, not merely the last one
        model.load_state_dict(best_state)
    return_freed_memory()  # what the steps' graphs used: a learner's kernel would keep it to its end
    result.seconds = time.perf_counter() - start
    if out_path is not None and isinstance(model, Seq2SeqTransformer):
        try:
            metrics = evaluate(model, test_a, test_b)
        except KeyboardInterrupt:  # a finished (or interrupted) model is kept, measured on what we have
            result.interrupted = True
            metrics = {
                "exact_match": max(best_acc, 0.0),
                "exact_match_on": "validation set (the test evaluation was interrupted)"
                if best_acc >= 0
                else "nothing (interrupted before any check)",
            }
        metrics.update(steps=result.steps, interrupted=result.interrupted)
        path = interrupted_path(out_path) if result.interrupted else out_path
        report = {
            "model_config": asdict(model_cfg),
            "train_config": asdict(train_cfg),
            "test_metrics": metrics,
            "history": result.history,
        }
        snapshots = None if result.interrupted or not snapshot_steps else (best_step, taken)
        result.saved_to, result.metrics = _save(path, model, model_cfg, metrics, report, snapshots), metrics
    return result


def _save(
    path: Path,
    model: Seq2SeqTransformer,
    model_cfg: Seq2SeqConfig,
    metrics: dict,
    report: dict,
    snapshots: tuple[int, list] | None = None,
) -> Path:
    """Save the checkpoint and its report (and its snapshots: (final step, [(step, state)])) as
    one unit (the checkpoint renamed last: core/journal.py). When that fails (a full disk), the
    model alone goes to rescue_path instead and the OSError says where; it is lost only when
    that fails too."""
    args = ("adder", asdict(model_cfg), model.state_dict(), metrics)
    try:
        beside = []
        if snapshots is not None:
            payload = snapshot_payload(model_cfg, snapshots[1], snapshots[0], model.state_dict())
            beside.append((snapshots_path(path), checkpoint_bytes(SNAPSHOT_KIND, *payload)))
        save_checkpoint(path, *args, report=(path.with_suffix(".json"), report), beside=beside)
        return path
    except OSError as e:
        rescue = rescue_path(path)
        try:
            save_checkpoint(rescue, *args, report=(rescue.with_suffix(".json"), report))
        except OSError as e2:
            raise OSError(
                e.errno,
                f"could not save the trained model to {path} ({e.strerror or e}), nor to "
                f"{rescue} ({e2.strerror or e2}): it is lost",
            ) from e
        raise OSError(
            e.errno,
            f"could not save the trained model to {path} ({e.strerror or e}); it was kept "
            f"in {rescue} (and its report beside it): move it where it belongs",
        ) from e
