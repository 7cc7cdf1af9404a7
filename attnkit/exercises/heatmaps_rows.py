"""The cases and rebuilt mistakes of notebook 03's two exercises on rows of numbers, for their
checkers (attnkit.exercises.heatmaps): attention patterns of several shapes for the row entropy
(with its reference in bits), and measures for the typical sample, with the usual wrong picks
(the farthest sample, squared or signed differences, the samples' own mean, ...).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from torch import Tensor

from .checking import case_generator, case_rng


def _entropy_bits(w: Tensor) -> Tensor:
    """-sum w log2 w over the key axis, 0 log 0 = 0 (as attnkit.interp.roles computes it)."""
    return -torch.special.xlogy(w, w).sum(-1) / math.log(2)


def _entropy_cases() -> list[tuple[str, Tensor]]:
    gen = case_generator(303)
    # 4-D like cache["enc.self.0.hook_pattern"]: sample 1 has two padded keys (weight exactly 0),
    # plus a one-hot row, a row uniform over all 7 keys and a row of zeros (a query that sees nothing).
    logits = torch.randn(2, 3, 5, 7, generator=gen) * 2
    logits[1, :, :, 5:] = -math.inf
    a = logits.softmax(-1)
    a[0, 0, 0] = torch.eye(7)[2]
    a[0, 1, 4] = 1 / 7
    a[1, 2, 3] = 0.0
    # 2-D like one head of dec.self on one problem: causal, so row 0 is all on key 0.
    b = (
        (torch.randn(6, 6, generator=gen, dtype=torch.float64) * 2)
        .masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), -math.inf)
        .softmax(-1)
    )
    # batch 1, 5 heads, 4 queries, 9 keys (none of them the notebook's sizes); key 7 never seen.
    logits = torch.randn(1, 5, 4, 9, generator=gen) * 3
    logits[..., 7] = -math.inf
    c = logits.softmax(-1)
    # 3-D (heads, q_pos, k_pos), peaked rows
    d = (torch.randn(3, 4, 11, generator=gen) * 4).softmax(-1)
    return [
        ("4-D (batch, heads, q_pos, k_pos) pattern with zero weights, a one-hot row and a row of zeros", a),
        ("2-D (q_pos, k_pos) causal pattern", b),
        ("batch-1 pattern with 5 heads and 9 keys", c),
        ("3-D (heads, q_pos, k_pos) pattern", d),
    ]


def _row_text(w: Tensor) -> str:
    shown = ", ".join(f"{x:.2f}" for x in w[:8].tolist()) + (", …" if len(w) > 8 else "")
    return f"[{shown}]"


def _typical_distance(values: np.ndarray, means: np.ndarray) -> np.ndarray:
    """Per sample, the mean absolute difference to `means` over the measures `means` defines;
    inf for a sample that lacks one of them (as attnkit.interp.roles.roles_from_cache)."""
    defined = ~np.isnan(means)
    dist = np.abs(values[:, defined] - means[defined]).mean(1)
    return np.where(np.isnan(dist), np.inf, dist)


def _typical_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = case_rng(3)
    # A: a decoder cross-attention head: prev and diag undefined (NaN for every sample), 14 samples.
    means = np.array([0.05, 0.62, 0.18, np.nan, np.nan, 0.40])
    defined = ~np.isnan(means)
    n = 14
    # mostly above the averages, so that the samples' own average is not `means`
    diffs = rng.uniform(0.12, 0.4, (n, defined.sum())) * rng.choice([-1, 1], (n, defined.sum()), p=[0.2, 0.8])
    values = np.full((n, 6), np.nan)
    values[:, defined] = np.clip(means[defined] + diffs, 0, 1)
    values[:, 0] = means[0] + np.abs(diffs[:, 0])  # shares stay >= 0
    values[2, defined] = means[defined]  # perfect on what it has ...
    values[2, 2] = np.nan  # ... but no carry row: cannot be typical
    values[6, defined] = means[defined] + [0.3, 0, 0, 0]  # mean |diff| 0.075: the typical one
    values[9, defined] = means[defined] + [0.1, -0.1, 0.1, -0.1]  # mean |diff| 0.1, but closer squared
    values[4, defined] = means[defined] + [0.5, 0.35, 0.5, 0.55]  # the farthest
    values[12, defined] = means[defined] + [-0.04, -0.3, -0.15, -0.3]  # the most below the averages
    a = (
        "14 samples of a cross-attention head (prev and diag NaN for every sample; sample 2 has no carry row)",
        values,
        means,
    )
    # B: a single sample, 4 measures, nothing missing.
    b = ("a single sample with 4 measures", np.array([[0.2, 0.5, 0.1, 0.7]]), np.array([0.3, 0.4, 0.2, 0.6]))
    # C: 23 samples, 5 measures all defined, three samples missing one (sample 0 among them).
    means = rng.uniform(0.1, 0.9, 5)
    values = np.clip(means + rng.normal(0, 0.25, (23, 5)), 0, 1)
    values[[0, 11, 17], [1, 3, 4]] = np.nan
    c = ("23 samples with 5 measures, samples 0, 11 and 17 missing one", values, means)
    return [a, b, c]


def _typical_mistakes(values: np.ndarray, means: np.ndarray) -> list[tuple[int, str]]:
    """The sample each common mistake picks, and the hint that names it."""
    dist = _typical_distance(values, means)
    defined = ~np.isnan(means)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diff = values[:, defined] - means[defined]
        finite = lambda d: np.where(np.isnan(d), np.inf, d)
        return [
            (
                int(np.argmax(np.where(np.isinf(dist), -np.inf, dist))),
                "you picked the sample *farthest* from the head's averages: the typical one has the smallest "
                "distance (argmin, not argmax)",
            ),
            (
                int(np.argmin(finite((diff**2).mean(1)))),  # also the Euclidean distance's pick
                "you used squared differences (or the Euclidean distance): the notebook's distance is the mean "
                "*absolute* difference (np.abs), which a single large difference does not dominate",
            ),
            (
                int(np.argmin(finite(diff.mean(1)))),
                "you averaged signed differences, so errors in opposite directions cancel: take np.abs of the "
                "differences before averaging",
            ),
            (
                int(np.argmin(finite(np.abs(values[:, defined] - np.nanmean(values[:, defined], 0)).mean(1)))),
                "you compared with the average of `values` over the samples: compare with `means`, the head's "
                "averages over every counted row (what the roles table shows)",
            ),
        ]
