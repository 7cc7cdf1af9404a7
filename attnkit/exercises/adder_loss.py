"""The cases and rebuilt mistakes of notebook 02's teacher-forced loss, for its checker
(attnkit.exercises.adder): recording toy models and batches with other vocabularies and padding ids
than the notebook's, the loss with one common mistake each (not shifted, padding counted, a sum,
softmax before cross_entropy, ...), and the checks that the loss can train (backward, a graph).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..adder.data import EOS, PAD
from .checking import Hint, call, case_generator
from .models import ToySeq2Seq, answers, sums, tiny_adder


def _loss_cases() -> list[tuple[str, Callable[[], Any], Tensor, Tensor, int, int]]:  # recording toy models
    """(name, model builder, src, tgt, pad_id, eos_id)"""
    gen = case_generator(21)
    src_a = torch.randint(3, 9, (3, 5), generator=gen)
    tgt_a = answers([5, 1, 3], 7, [3, 4, 5, 6, 7, 8], bos=1, eos=2, pad=0, seed=22)
    src_b = torch.randint(0, 14, (1, 4), generator=gen)
    tgt_b = answers([2], 6, list(range(14)), bos=14, eos=15, pad=16, seed=23)
    src_c, tgt_c = sums([(663, 497), (5, 5), (12, 30), (999, 1), (450, 550)])
    src_d = torch.randint(0, 12, (4, 6), generator=gen)
    tgt_d = answers([3, 3, 2, 1], 5, [1, 2, 3, 4, 6, 7, 8, 9, 10], bos=0, eos=11, pad=5, seed=24)
    return [
        ("a batch of 3 (vocabulary 9, pad_id 0)", lambda: ToySeq2Seq(9, seed=25), src_a, tgt_a, 0, 2),
        ("a batch of 1 (vocabulary 17, pad_id 16)", lambda: ToySeq2Seq(17, seed=26), src_b, tgt_b, 16, 15),
        ("a small Seq2SeqTransformer (the notebook's ids, pad_id 13)", lambda: tiny_adder(27), src_c, tgt_c, PAD, EOS),
        ("a batch of 4 (vocabulary 12, pad_id 5)", lambda: ToySeq2Seq(12, seed=28), src_d, tgt_d, 5, 11),
    ]


def _loss_value(result) -> tuple[float, bool]:
    """(value, is a tensor with a gradient); Hints for what cannot be a loss."""
    if result is None:
        raise Hint("your function returned None — did you forget `return loss`?")
    if isinstance(result, (tuple, list)):
        raise Hint(f"return the loss alone (one number), not a {type(result).__name__} of {len(result)}")
    if isinstance(result, np.ndarray) or isinstance(result, (int, float, np.number)):
        arr = np.asarray(result, dtype=float)
        if arr.size != 1:
            raise Hint(f"your loss has shape {arr.shape}: reduce it to one number, the mean over real tokens")
        return float(arr.reshape(())), False
    if not isinstance(result, Tensor):
        raise Hint(f"your function returned a {type(result).__name__}, expected the loss as a 0-d tensor")
    if result.numel() != 1:
        raise Hint(
            f"your loss has shape {tuple(result.shape)}: reduce it to one number — the mean over "
            "every real (non-padding) target token, F.cross_entropy's default reduction"
        )
    if not result.is_floating_point():
        raise Hint(f"your loss is a {result.dtype} tensor: a cross-entropy is a float")
    if result.dim() != 0:
        raise Hint(
            f"your loss has shape {tuple(result.shape)}: the task asks for a 0-d tensor, shape () — "
            "F.cross_entropy's mean gives one; drop the extra dimension"
        )
    return float(result.detach().double()), result.requires_grad


def _loss_candidates(model: Any, src: Tensor, tgt: Tensor, pad: int, eos: int) -> list[tuple[float, str]]:
    """The loss with one common mistake each, and the hint that names it."""
    with torch.no_grad():
        logits = model.logits(src, tgt[:, :-1]).double()
        gold = tgt[:, 1:]
        real = gold != pad
        flat_logits, flat_gold = logits.reshape(-1, logits.size(-1)), gold.reshape(-1)
        token_loss = F.cross_entropy(flat_logits, flat_gold, reduction="none").view(gold.shape)
        out = []

        def add(value, hint):
            value = float(value)
            if np.isfinite(value):
                out.append((value, hint))

        full = model.logits(src, tgt).double()
        add(
            F.cross_entropy(full.reshape(-1, full.size(-1)), tgt.reshape(-1), ignore_index=pad),
            "not shifted: each position is scored on the token it reads; the decoder reads tgt[:, :-1] and "
            "predicts the next token, tgt[:, 1:]",
        )
        wrong_way = model.logits(src, tgt[:, 1:]).double()
        add(
            F.cross_entropy(wrong_way.reshape(-1, wrong_way.size(-1)), tgt[:, :-1].reshape(-1), ignore_index=pad),
            "shifted the wrong way: feed tgt[:, :-1] (it starts with <s>) and score against tgt[:, 1:]",
        )
        add(
            token_loss.mean(),
            "padding counted in the loss: pass ignore_index=pad_id to F.cross_entropy (the pad_id argument — "
            "this checker's batches pad with other ids than the notebook's 13), or average over real tokens only",
        )
        from_input = tgt[:, :-1] != pad
        add(
            (token_loss * from_input).sum() / from_input.sum(),
            "padding mask one position off: it comes from the decoder input; take it from the target, "
            "tgt[:, 1:] != pad_id",
        )
        add(
            ((token_loss * real).sum(1) / real.sum(1).clamp(min=1)).mean(),
            "you averaged each row, then the rows: a short answer's tokens then weigh more than a long one's; "
            "take one mean over every real target token of the batch (F.cross_entropy with ignore_index does)",
        )
        add(
            (token_loss * real).sum(),
            "you summed the token losses: take their mean over the real (non-padding) target tokens",
        )
        add(
            (token_loss * real).sum() / real.numel(),
            "padding's loss is zeroed but you divided by every position: divide by the number of real "
            "target tokens, (tgt[:, 1:] != pad_id).sum()",
        )
        scored = real & (gold != eos)
        add(
            (token_loss * scored).sum() / scored.sum(),
            "</s> is not scored: the model must also learn where the answer ends; ignore only padding",
        )
        probs = flat_logits.softmax(-1)
        add(
            F.cross_entropy(probs, flat_gold, ignore_index=pad),
            "softmax applied before F.cross_entropy, which applies log_softmax itself: pass the raw logits",
        )
        add(
            F.nll_loss(flat_logits, flat_gold, ignore_index=pad),
            "F.nll_loss on raw logits: it expects log-probabilities — apply log_softmax(-1) first, "
            "or use F.cross_entropy on the logits",
        )
        add(
            F.nll_loss(probs, flat_gold, ignore_index=pad),
            "F.nll_loss on probabilities: it expects log-probabilities — use log_softmax(-1), not softmax",
        )
        per_position = (token_loss * real).sum(0) / real.sum(0)
        add(
            per_position[real.any(0)].mean(),
            "you averaged each position over the rows, then the positions: take one mean over every real "
            "target token of the batch",
        )
    return out


def _untouched(src_given: Tensor, src: Tensor, tgt_given: Tensor, tgt: Tensor, where: str) -> None:
    """The loss left the batch it was handed as it came (the training loop reuses it)."""
    if not (torch.equal(src_given, src) and torch.equal(tgt_given, tgt)):
        which = "tgt" if not torch.equal(tgt_given, tgt) else "src"
        raise Hint(
            f"your loss wrote into the caller's {which}{where} (an in-place change such as "
            f"{which}[...] = ..., masked_fill_ or +=): the training loop reuses its batch — work on "
            "a copy (.clone()) or index without assigning",
            mistake="writes-caller-batch",
        )


def _trains(model: Any, loss: Tensor, where: str) -> None:
    """The loss does what the training loop needs: loss.backward() works once, there, and its gradient
    reaches every parameter the model used (it is not cut off from the model's graph)."""
    if any(p.grad is not None for p in model.parameters()):
        raise Hint(
            f"your loss already called backward(){where}: the training loop calls loss.backward() "
            "itself (after zero_grad) — return the loss without calling it, or gradients are "
            "counted twice",
            mistake="backward-called",
        )
    if loss.grad_fn is None:
        raise Hint(
            f"the value is right but your loss is cut off from the model's graph{where} (a new tensor "
            "made from the value: torch.tensor(...), .detach(), .item() re-wrapped): training could "
            "not reach the model's weights — return the tensor the computation gives",
            mistake="cut-off-graph",
        )
    try:
        loss.backward()
    except RuntimeError as e:
        raise Hint(
            f"loss.backward() failed on your loss{where} ({str(e).splitlines()[0][:120]}): did your "
            "code already call backward()? The training loop calls it once itself",
            mistake="backward-called",
        ) from None
    if not any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters()):
        raise Hint(
            f"no gradient reaches the model's weights from your loss{where}: it is cut off from the "
            "model's graph (a detached or re-made tensor) — return the tensor the computation gives",
            mistake="cut-off-graph",
        )


def _loss_mistake_everywhere(fn: Callable, message: str) -> bool:
    """Does the learner's loss equal the one with mistake `message` on every case it gets wrong? A
    value can fit a mistake on one batch by chance; the hint names it only when it fits them all."""
    for _name, build, src, tgt, pad, eos in _loss_cases():
        try:
            value, _ = _loss_value(call(fn, build(), src.clone(), tgt.clone(), pad))
        except Hint:
            return False
        with torch.no_grad():
            logits = build().logits(src, tgt[:, :-1])
            ref = float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=pad))
        if np.isclose(value, ref, rtol=1e-4, atol=1e-6):
            continue
        found = {m: v for v, m in _loss_candidates(build(), src, tgt, pad, eos)}
        if message not in found or not np.isclose(value, found[message], rtol=1e-4, atol=1e-6):
            return False
    return True


def _swapped(calls: list[tuple[Tensor, Tensor]], tgt: Tensor) -> bool:
    """Was the model called as model(decoder_input, src)?"""
    return any(
        first.size(1) in (tgt.size(1), tgt.size(1) - 1)
        and (first[:, 0] == tgt[:, 0]).all()
        and not (second[:, 0] == tgt[:, 0]).all()
        for first, second in calls
    )
