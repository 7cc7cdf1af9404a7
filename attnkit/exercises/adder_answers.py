"""The cases and rebuilt mistakes of notebook 02's exercises on answer tokens, for their checkers
(attnkit.exercises.adder): the batches for the teacher-forcing shift, the accuracies (with one common
mistake each: padding counted, per-row means, integer division, ...) and greedy decoding (toy models
whose rows end at different steps or whose logits tie, the committed adder, and greedy decoding
rebuilt with its usual mistakes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..adder.data import BOS, EOS, PAD, encode_targets
from .checking import case_generator
from .models import ToySeq2Seq, answers, committed_adder, sums


def _shift_cases() -> list[Tensor]:
    digits = list(range(10))
    return [
        answers([5, 2, 3], 7, [3, 4, 5, 6, 7, 8], bos=1, eos=2, pad=0, seed=11),  # batch 3, 7 positions
        answers([2], 5, list(range(4, 17)), bos=17, eos=18, pad=19, seed=12),  # batch 1, padded
        sums([(663, 497), (5, 5), (0, 0), (999, 999), (45, 55)])[1],  # the notebook's ids
        answers([7, 1, 4, 7], 9, digits, bos=10, eos=11, pad=12, seed=13),  # batch 4, 9 positions
        answers([1, 0], 3, [5, 6], bos=0, eos=1, pad=2, seed=14),  # 3 positions, <s></s>
    ]


def _accuracy_cases() -> list[tuple[Tensor, Tensor, int]]:
    """(pred, gold, pad_id); the first is the hand-made batch that tells every mistake apart."""
    gold_a = torch.tensor([[1, 2, 3, 4, 9], [5, 9, 7, 7, 7], [3, 3, 9, 7, 7], [2, 9, 7, 7, 7]])
    pred_a = torch.tensor([[1, 2, 3, 4, 9], [5, 9, 1, 2, 3], [3, 4, 9, 9, 7], [2, 8, 7, 7, 7]])
    gold_b, pred_b = torch.tensor([[4, 6, 8, 0, 0]]), torch.tensor([[4, 6, 8, 8, 1]])  # batch 1, right
    gold_c = encode_targets(np.array([1160, 10, 0]), 3)[:, 1:]  # the notebook's ids
    pred_c = torch.tensor([[1, 1, 6, 0, EOS], [1, 0, EOS, EOS, 3], [1, EOS, PAD, PAD, PAD]])
    gen = case_generator(31)
    lengths = torch.tensor([6, 2, 4, 1, 5, 3, 6])
    gold_d = torch.randint(3, 11, (7, 6), generator=gen)
    gold_d[torch.arange(6) >= lengths[:, None]] = 2
    pred_d = torch.where(torch.rand(7, 6, generator=gen) < 0.8, gold_d, torch.randint(0, 11, (7, 6), generator=gen))
    # Columns that are padding in every row (a batch decoded to max_steps), junk in pred there, and a
    # row with nothing right: exact match 2/3, token accuracy 6/8.
    gold_e = torch.tensor([[3, 1, 4, 2, 0, 0, 0], [5, 2, 0, 0, 0, 0, 0], [9, 2, 0, 0, 0, 0, 0]])
    pred_e = torch.tensor([[3, 1, 4, 2, 8, 8, 8], [7, 7, 7, 7, 7, 7, 7], [9, 2, 2, 2, 2, 2, 2]])
    return [(pred_a, gold_a, 7), (pred_b, gold_b, 0), (pred_c, gold_c, PAD), (pred_d, gold_d, 2), (pred_e, gold_e, 0)]


def _accuracy_mistakes(pred: Tensor, gold: Tensor, pad: int, what: str) -> list[tuple[float, str]]:
    """`what` ("token_accuracy" or "exact_match") computed with one common mistake each, and its hint."""
    right, real = pred == gold, gold != pad
    batch = gold.size(0)
    if what == "token_accuracy":
        pad_hint = " (the pad_id argument: these batches pad with other ids than the notebook's 13)"
        per_row = (right & real).sum(1).double() / real.sum(1)
        wrong: list[tuple[Any, str]] = [
            (
                right.double().mean(),
                "padding counted in the token accuracy: score only positions where gold is not pad_id" + pad_hint,
            ),
            (
                per_row.mean(),
                "you averaged each row's accuracy, then the rows: a short answer's tokens then "
                "weigh more; divide the number of right real tokens by the number of real tokens",
            ),
            (
                (right & (pred != pad)).sum() / (pred != pad).sum(),
                "the padding mask comes from pred: take it from gold (gold != pad_id), the true answer",
            ),
            ((right & real).sum(), "you return the number of right tokens: divide by the number of real tokens"),
            (
                (right & real).sum() // real.sum(),
                "integer division: // rounds down to 0 — use / (on a float, e.g. .float() or .sum().item())",
            ),
            ((right & real).sum() / real.sum() * 100, "you return percentages: return shares between 0 and 1"),
            (
                (right | ~real).all(1).double().mean(),
                "your token accuracy is the exact match: count right tokens, not right rows",
            ),
        ]
    else:
        wrong = [
            (
                right.all(1).double().mean(),
                "padding counted in the exact match: a row is right when every "
                "position where gold is not pad_id is right — ((pred == gold) | (gold == pad_id)).all(dim=1)",
            ),
            (
                (right & real).sum() / real.sum(),
                "your exact match is per token: it asks whether a whole row is right "
                "(.all over its positions), then takes the share of such rows",
            ),
            (
                (right & real).any(1).double().mean(),
                "a row is exactly right only if every real token is right: use .all, not .any",
            ),
            (
                (right | ~real).all(0).double().mean(),
                "exact match over the wrong axis: .all(dim=1) — over each "
                "row's positions — then the mean over the rows",
            ),
            ((right | ~real).all(1).sum(), "you return the number of right rows: divide by the number of rows"),
            (
                (right | ~real).all(1).sum() // batch,
                "integer division: // rounds down to 0 — use / (on a float, e.g. .float().mean())",
            ),
        ]
    return [(float(value), message) for value, message in wrong]


def _greedy_cases() -> list[tuple[str, Callable[[], Any], Tensor, int, int, int]]:  # recording toy models
    """(name, model builder, src, bos_id, eos_id, max_steps); a builder may give None (skipped)."""

    def ids(high: int, shape: tuple[int, int], seed: int) -> Tensor:
        # Never the grader's hidden seeds: these cases keep a margin between the best two logits (a
        # tie broken differently by another float path would fail a right answer).
        return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))

    src_b, _ = sums([(5, 5), (663, 497), (0, 0), (999, 999), (45, 55)])
    # Seeds picked so that rows end at different steps and some never do (tests/test_exercises_adder.py).
    return [
        (
            "a batch of 4 (vocabulary 11, bos_id 9, eos_id 10, max_steps 7)",
            lambda: ToySeq2Seq(11, seed=96),
            ids(9, (4, 4), 41),
            9,
            10,
            7,
        ),
        ("the committed adder on 5+5, 663+497, 0+0, 999+999, 45+55 (max_steps 5)", committed_adder, src_b, BOS, EOS, 5),
        (
            "a batch of 1 (vocabulary 7, bos_id 0, eos_id 6, max_steps 5)",
            lambda: ToySeq2Seq(7, seed=15),
            ids(7, (1, 3), 44),
            0,
            6,
            5,
        ),
        (
            "a batch of 3 (vocabulary 13, bos_id 3, eos_id 0, max_steps 9)",
            lambda: ToySeq2Seq(13, seed=15),
            ids(13, (3, 5), 43),
            3,
            0,
            9,
        ),
        (  # logits rounded to whole numbers: exact ties, which go to the lowest id (torch.argmax's rule)
            "a batch of 3 whose logits tie (vocabulary 10, bos_id 8, eos_id 9, max_steps 6)",
            lambda: ToySeq2Seq(10, seed=22, step=1.0),
            ids(10, (3, 4), 22),
            8,
            9,
            6,
        ),
    ]


def _reference_greedy(model: Any, src: Tensor, bos: int, n_steps: int, mode: str = "right") -> Tensor:
    """Greedy decoding, or one of its common mistakes (mode), with the model's unrecorded forward."""
    with torch.no_grad():
        fed = torch.full((src.size(0), 1), bos, dtype=torch.long)
        out = []
        for _ in range(n_steps):
            if mode == "bos_only":
                logits = model.logits(src, fed[:, :1])[:, -1]
            elif mode == "newest_only":
                logits = model.logits(src, fed[:, -1:])[:, -1]
            elif mode == "positions":  # argmax over the positions axis, then the last column
                logits = model.logits(src, fed).argmax(1)[:, -1:]
            else:
                logits = model.logits(src, fed)[:, -1]
            token = logits if mode == "positions" else logits.argmax(-1, keepdim=True)
            out.append(token)
            fed = torch.cat([fed, token], dim=1)
        return torch.cat(out, dim=1)


# _reference_greedy's modes other than "right", each with the hint that names it (a tuple: read-only)
_GREEDY_MISTAKES = (
    (
        "bos_only",
        "every step gives the same token: append each step's argmax to the decoder input "
        "and read the logits of the last position, logits[:, -1]",
    ),
    (
        "newest_only",
        "you fed the decoder only the newest token: feed the whole sequence so far, "
        "<s> and every token written (the kit's key/value cache is what lets it skip that)",
    ),
    (
        "positions",
        "argmax over the wrong axis: take the last position's logits, logits[:, -1] "
        "(batch, vocab), and their argmax over the vocabulary, dim=-1",
    ),
)


def _first_eos(row: Tensor, eos: int) -> int:
    """Tokens up to and including the first </s> (all of them when there is none)."""
    hits = (row == eos).nonzero()
    return int(hits[0]) + 1 if len(hits) else len(row)
