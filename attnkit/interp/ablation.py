"""Head ablation: the mechanism the studies share, and the guard that keeps them honest.

    with adder.ablate(["dec.cross.1.2", "enc.self.0.3"], mode="zero"):  # or mode="mean"
        adder.solve(["663+497"])

A removed head's z (its output before W_O) is replaced, for every query position, through a
hook on the module's hook_z (core/head_ablation.py):
  * "zero": by 0;
  * "mean": by its mean z over the held-out set (adder/evaluate.py `mean_z`): the average over
    every real query position (encoder: every non-padding source token; decoder: <s> and each
    answer digit, read with the true answer fed in), per head, shape (heads, d_head).
Every study measures greedy exact match on the held-out set and refuses a model below 99 %
(`check_baseline`): ablating a broken model measures nothing.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..adder.data import PAD, encode_sources, encode_targets, load_test_set
from ..adder.evaluate import mean_z, per_model
from ..core.head_ablation import ablate_heads
from ..core.runtime import analysis_threads

MODES = ("zero", "mean")
MIN_BASELINE = 0.99  # below this, the studies refuse the model (unless forced)
THRESHOLD_POINTS = 1.0  # a head (or set) is prunable when removing it costs < 1 point


class BaselineTooLowError(ValueError):
    """The model is not accurate enough for its ablations to mean anything."""


def model_of(adder):
    return getattr(adder, "model", adder)  # an Adder or a bare Seq2SeqTransformer


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")


def fills_for(model, mode: str):
    """What a removed head outputs: None (zero) or each module's mean z."""
    check_mode(mode)
    return mean_z(model) if mode == "mean" else None


def state_hash(adder) -> str:
    """sha256 of the weights: ties a results file to the checkpoint it was measured on."""
    h = hashlib.sha256()
    for name, t in sorted(model_of(adder).state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


@dataclass
class Problems:
    """Held-out problems as tensors: source ids, decoder input, and the answer it must write."""

    src: Tensor  # (batch, src_pos)
    tgt_in: Tensor  # (batch, tgt_pos - 1): <s> + answer, as fed in under teacher forcing
    gold: Tensor  # (batch, tgt_pos - 1): the tokens to predict; PAD = nothing to predict

    @classmethod
    def from_operands(cls, model, a: np.ndarray, b: np.ndarray) -> Problems:
        model = model_of(model)
        cfg, device = model.cfg, next(model.parameters()).device
        tgt = encode_targets(np.asarray(a) + np.asarray(b), cfg.n_digits, cfg.reverse_output).to(device)
        return cls(encode_sources(a, b, cfg.n_digits, cfg.zero_pad).to(device), tgt[:, :-1], tgt[:, 1:])

    def __len__(self) -> int:
        return len(self.src)


def held_out_problems(model, a=None, b=None) -> Problems:
    if a is None:
        a, b = load_test_set()
    return Problems.from_operands(model, a, b)


@analysis_threads()
@torch.no_grad()
def plain_matches(adder, problems: Problems, configs: Sequence[Sequence[str]], mode: str = "zero") -> np.ndarray:
    """(configs, batch) bool, the reference way: greedy-decode once per ablation."""
    model = model_of(adder)
    fills = fills_for(model, mode)
    out = []
    with model.without_hooks():
        for heads in configs:
            with ablate_heads(model, heads, fills):
                pred = model.greedy(problems.src)
            out.append(((pred == problems.gold) | (problems.gold == PAD)).all(dim=1).cpu().numpy())
    return np.stack(out)


def check_baseline(adder, force: bool = False, threshold: float = MIN_BASELINE) -> float:
    """Greedy exact match on the held-out set; raises below `threshold` unless forced."""
    model = model_of(adder)
    entry = per_model(model)
    if "baseline" not in entry:
        p = held_out_problems(model)
        entry["baseline"] = float(plain_matches(model, p, [[]])[0].mean())
    acc = entry["baseline"]
    if acc < threshold:
        msg = (
            f"this model's greedy exact match on the held-out set is {100 * acc:.2f} %, below {100 * threshold:g} %: "
            f"ablating a broken model measures nothing (its heads are not doing the task yet). "
            f"Train it first (`python -m attnkit train adder`), or pass force=True to measure anyway."
        )
        if not force:
            raise BaselineTooLowError(msg)
        warnings.warn(msg, stacklevel=2)
    return acc
