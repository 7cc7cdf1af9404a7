"""Is a sequence of integers 0–99 sorted (non-decreasing)? The data of a length-extrapolation testbed.

Train on lengths 8–16, test up to 256. Two kinds of negatives, always reported apart:
  * "shuffle": a random shuffle of a sorted sequence — at long lengths almost every
    neighbouring pair is out of order, so these are trivially unsorted;
  * "hard": a sorted sequence with one adjacent pair swapped — a single violation
    the model must find among L - 1 pairs. This is the real test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

N_VALUES = 100  # values 0 … 99
TRAIN_LENGTHS = tuple(range(8, 17))  # 8 … 16
TEST_LENGTHS = TRAIN_LENGTHS + (32, 64, 128, 256)
NEGATIVES = ("hard", "shuffle")


def sorted_sequences(
    rng: np.random.Generator, n: int, length: int, p_narrow: float = 0.0, max_width: int = 30
) -> np.ndarray:
    """(n, length) sorted rows. A share p_narrow draws from a narrow window [lo, lo + w],
    w ≤ max_width, so neighbouring distinct values mostly differ by 1 — as they do at
    length 256, where 256 values share 0–99. The rest draw from all of 0–99."""
    width = np.where(rng.random(n) < p_narrow, rng.integers(1, max_width + 1, n), N_VALUES - 1)
    lo = rng.integers(0, N_VALUES - width)  # window start, inclusive
    values = lo[:, None] + np.floor(rng.random((n, length)) * (width[:, None] + 1)).astype(np.int64)
    return np.sort(values, axis=1)


def swap_one_pair(rng: np.random.Generator, seqs: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Hard negatives: swap one adjacent pair (i, i+1) with x_i < x_{i+1}, chosen uniformly
    among such pairs, or with probability ∝ weights[i] (length - 1,) when given.

    Every row must have such a pair (not be constant); the result has exactly one descent."""
    strict = np.diff(seqs, axis=1) > 0  # (n, length - 1)
    if not strict.any(axis=1).all():
        raise ValueError("a constant sequence cannot be made unsorted by one swap")
    w = strict * (1.0 if weights is None else np.asarray(weights, dtype=float)[None])
    cum = np.cumsum(w, axis=1)
    i = (cum > rng.random(len(seqs))[:, None] * cum[:, -1:]).argmax(axis=1)
    out, rows = seqs.copy(), np.arange(len(seqs))
    out[rows, i], out[rows, i + 1] = seqs[rows, i + 1], seqs[rows, i]
    return out


def shuffle_rows(rng: np.random.Generator, seqs: np.ndarray) -> np.ndarray:
    """Shuffle negatives: each non-constant row permuted at random until it is unsorted."""
    out = rng.permuted(seqs, axis=1)
    while (again := is_sorted(out)).any():  # rare beyond length 8
        out[again] = rng.permuted(out[again], axis=1)
    return out


def is_sorted(seqs: np.ndarray) -> np.ndarray:
    return np.all(np.diff(seqs, axis=1) >= 0, axis=1)


def sorted_non_constant(rng: np.random.Generator, n: int, length: int, p_narrow: float = 0.0) -> np.ndarray:
    """sorted_sequences() redrawing constant rows: every row can then be made unsorted."""
    seqs = sorted_sequences(rng, n, length, p_narrow)
    while (flat := seqs[:, 0] == seqs[:, -1]).any():  # a constant row has no negative
        seqs[flat] = sorted_sequences(rng, int(flat.sum()), length, p_narrow)
    return seqs


def labelled_set(
    rng: np.random.Generator,
    n_pos: int,
    n_hard: int,
    n_shuffle: int,
    length: int,
    p_narrow: float = 0.0,
    pair_weights: np.ndarray | None = None,
):
    """Sorted rows (label 1), then hard and shuffle negatives (label 0) of one length.
    Returns (rows, labels, kind) with kind 0 = sorted, 1 = hard, 2 = shuffle."""
    pos = sorted_non_constant(rng, n_pos, length, p_narrow)
    hard = swap_one_pair(rng, sorted_non_constant(rng, n_hard, length, p_narrow), pair_weights)
    shuf = shuffle_rows(rng, sorted_non_constant(rng, n_shuffle, length, p_narrow))
    rows = list(pos) + list(hard) + list(shuf)
    kind = np.repeat([0, 1, 2], [n_pos, n_hard, n_shuffle])
    return rows, (kind == 0).astype(np.float32), kind


@dataclass(frozen=True)  # shared as a default argument: never changed in place (replace() makes a new one)
class DataConfig:
    seed: int = 0  # one fixed data set for every encoding and model seed
    n_train: int = 10_000  # balanced: half sorted, half negatives
    n_val: int = 2_000  # lengths 8–16, test-like values (0–99): 1,000 sorted, 500 hard, 500 shuffle
    n_test: int = 500  # per length and negative kind: 250 sorted + 250 negatives
    p_hard: float = 0.8  # share of training negatives that are hard (the rest shuffles)
    p_narrow: float = 0.5  # share of training rows drawn from a narrow value window (small gaps)
    even_pairs: bool = True  # swap late pairs more often: they exist only in long rows (see make_train_set)


def make_train_set(cfg: DataConfig = DataConfig()):
    """n_train rows of lengths 8–16 (equal counts per length), balanced, mostly hard negatives.

    With a uniform swap, pair 14 (positions 14, 15) exists only in length-16 rows and gets
    about a tenth of the swaps pair 0 gets. A model with absolute positions learns each
    position on its own and then misses late swaps; `even_pairs` weights pair i by
    1 / (number of training lengths that have it), which evens the counts out (not exactly:
    pair 14 still gets about a third of pair 0's)."""
    rng = np.random.default_rng(cfg.seed)
    rows, labels = [], []
    per_len = cfg.n_train // len(TRAIN_LENGTHS)
    have_pair = np.array([sum(L - 1 > i for L in TRAIN_LENGTHS) for i in range(max(TRAIN_LENGTHS) - 1)])
    for i, length in enumerate(TRAIN_LENGTHS):
        n = per_len + (1 if i < cfg.n_train % len(TRAIN_LENGTHS) else 0)
        n_neg = n // 2
        n_hard = round(n_neg * cfg.p_hard)
        weights = 1.0 / have_pair[: length - 1] if cfg.even_pairs else None
        r, y, _ = labelled_set(rng, n - n_neg, n_hard, n_neg - n_hard, length, cfg.p_narrow, weights)
        rows += r
        labels.append(y)
    return rows, np.concatenate(labels)


def make_val_set(cfg: DataConfig = DataConfig()):
    """Like the test sets (values from all of 0–99) at lengths 8–16; returns (rows, labels, kind)."""
    rng = np.random.default_rng(cfg.seed + 1)
    lengths = rng.choice(TRAIN_LENGTHS, cfg.n_val)
    kinds = np.repeat([0, 1, 2], [cfg.n_val // 2, cfg.n_val // 4, cfg.n_val - cfg.n_val // 2 - cfg.n_val // 4])
    rows = []
    for length, k in zip(lengths, kinds):
        r, _, _ = labelled_set(rng, int(k == 0), int(k == 1), int(k == 2), int(length))
        rows += r
    return rows, (kinds == 0).astype(np.float32), kinds


def make_test_sets(cfg: DataConfig = DataConfig(), lengths: Sequence[int] = TEST_LENGTHS):
    """{length: (rows (n, L) array, labels, kind)}: 250 sorted, 250 hard, 250 shuffle per length."""
    out = {}
    for length in lengths:
        rng = np.random.default_rng([cfg.seed + 2, length])
        half = cfg.n_test // 2
        rows, y, kind = labelled_set(rng, half, half, half, length)
        out[length] = (np.stack(rows), y, kind)
    return out


def pad_batch(seqs: Sequence[Sequence[int]], device=None) -> tuple[Tensor, Tensor]:
    """Ragged rows -> tokens (batch, L) and pad (batch, L), True = padding."""
    n_pos = max(len(s) for s in seqs)
    tokens = np.zeros((len(seqs), n_pos), dtype=np.int64)
    pad = np.ones((len(seqs), n_pos), dtype=bool)
    for i, s in enumerate(seqs):
        tokens[i, : len(s)], pad[i, : len(s)] = s, False
    return torch.from_numpy(tokens).to(device), torch.from_numpy(pad).to(device)


def validate(seqs, max_len: int | None, limit: str | None = None) -> list[list[int]]:
    """Lists of ints 0–99, each non-empty and no longer than max_len; ValueError naming the
    culprit. `limit` says where max_len comes from (default: the encoding's position table)."""
    if isinstance(seqs, (str, bytes)) or not hasattr(seqs, "__len__"):
        raise ValueError(f"expected a list of sequences of integers, got {seqs!r}")
    if len(seqs) == 0:
        raise ValueError("expected at least one sequence, got an empty list")
    out = []
    for i, s in enumerate(seqs):
        if isinstance(s, (str, bytes)) or not hasattr(s, "__len__"):
            raise ValueError(f"sequence {i} ({s!r}) is not a list of integers")
        if len(s) == 0:
            raise ValueError(f"sequence {i} is empty; a sequence needs at least one value")
        if max_len is not None and len(s) > max_len:
            raise ValueError(
                f"sequence {i} has length {len(s)}, longer than "
                + (
                    f"{limit} allows ({max_len} positions)"
                    if limit
                    else f"this encoding supports ({max_len} positions)"
                )
            )
        for v in s:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"sequence {i} holds {v!r}, which is not an integer")
            if not 0 <= v < N_VALUES:
                raise ValueError(f"sequence {i} holds {v}, outside the values 0–{N_VALUES - 1}")
        out.append([int(v) for v in s])
    return out
