"""Checkers for notebook 02's exercises (training and measuring the adder), in the style of
checks.py: one printed line, ✅ or a hint naming the likely mistake, never a traceback; True
when passed.

The checkers run the learner's code on their own batches — other vocabularies, padding ids,
batch sizes and lengths than the notebook's — and, for the loss and greedy decoding, on small
models of their own: a toy seq2seq model that records what it is fed, a tiny freshly
initialised Seq2SeqTransformer and the committed adder. Code written for the notebook's one
batch, its PAD = 13 or its globals does not pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..adder.data import BOS, EOS, PAD, encode_targets
from .checking import Hint, NotDone, call, checker, refuse_list
from .models import ToySeq2Seq, answers, committed_adder, sums, tiny_adder


def _learner(fn: Callable, *args, signature: str, context: str = ""):
    """checking.call, with the exercise's signature named when the learner's own one differs."""
    if not callable(fn):
        raise Hint(f"pass your function itself, {signature.split('(')[0]}, not a {type(fn).__name__}")
    return call(fn, *args, context=context, signature=signature)


def _ids_tensor(x, what: str) -> Tensor:
    """A torch tensor of integer token ids (the exercise's type; numpy arrays, lists and floats are
    refused: the model's embedding takes long ids), as torch.long."""
    if x is None:
        raise Hint(f"your {what} is None — did you forget `return`?")
    refuse_list(x, what)
    if not isinstance(x, Tensor):
        raise Hint(
            f"your {what} is a {type(x).__name__}, expected a torch tensor of token ids (torch.long)"
            + (" — torch.as_tensor(...) converts it" if isinstance(x, (np.ndarray, list, tuple)) else ""),
            mistake="not-a-tensor",
        )
    x = x.detach().cpu()
    if x.is_floating_point():
        whole = bool(torch.isfinite(x).all()) and torch.equal(x, x.round())
        raise Hint(
            f"your {what} is a {x.dtype} tensor"
            + (" of whole numbers" if whole else " of non-integer values")
            + ": token ids are integers, torch.long"
            + (" (.long(), or keep argmax's dtype)" if whole else " (an argmax, not logits)"),
            mistake="ids-not-integers",
        )
    if x.dtype == torch.bool or x.is_complex():
        raise Hint(f"your {what} is a {x.dtype} tensor, expected token ids (torch.long)", mistake="ids-not-integers")
    return x.long()


def _pair(result, what: str, names: tuple[str, str]):
    if result is None:
        raise Hint(f"{what} returned None — did you forget `return {names[0]}, {names[1]}`?")
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        kind = f"a {type(result).__name__}" + (f" of {len(result)}" if isinstance(result, (tuple, list)) else "")
        raise Hint(f"{what} should return a pair ({names[0]}, {names[1]}), not {kind}")
    return result


def _same(a: Tensor, b: Tensor) -> bool:
    return tuple(a.shape) == tuple(b.shape) and torch.equal(a.long(), b.long())


# ---------------------------------------------------------------- 1. the teacher-forcing shift


def _shift_cases() -> list[Tensor]:
    digits = list(range(10))
    return [
        answers([5, 2, 3], 7, [3, 4, 5, 6, 7, 8], bos=1, eos=2, pad=0, seed=11),  # batch 3, 7 positions
        answers([2], 5, list(range(4, 17)), bos=17, eos=18, pad=19, seed=12),  # batch 1, padded
        sums([(663, 497), (5, 5), (0, 0), (999, 999), (45, 55)])[1],  # the notebook's ids
        answers([7, 1, 4, 7], 9, digits, bos=10, eos=11, pad=12, seed=13),  # batch 4, 9 positions
        answers([1, 0], 3, [5, 6], bos=0, eos=1, pad=2, seed=14),  # 3 positions, <s></s>
    ]


@checker("shift", "02-shift", "my_shift")
def check_shift(fn: Callable) -> str:
    """`fn(tgt)` -> (decoder_input, target) = (tgt[:, :-1], tgt[:, 1:])."""
    for tgt in _shift_cases():
        batch, n_pos = tgt.shape
        where = f" for tgt of shape ({batch}, {n_pos})"
        given = tgt.clone()
        result = _learner(fn, given, signature="my_shift(tgt)", context=where)
        if not torch.equal(given, tgt):
            raise Hint("your function changed tgt in place: return slices of it and leave tgt as it was")
        dec, target = _pair(result, "my_shift", ("decoder_input", "target"))
        dec, target = _ids_tensor(dec, "decoder_input"), _ids_tensor(target, "target")
        ref_in, ref_out = tgt[:, :-1], tgt[:, 1:]
        if _same(dec, ref_in) and _same(target, ref_out):
            continue
        if _same(dec, ref_out) and _same(target, ref_in):
            raise Hint(
                "shifted the wrong way: the decoder reads <s> and the tokens before the last "
                "(tgt[:, :-1]) and must predict the next ones (tgt[:, 1:])"
            )
        if _same(dec, tgt) and _same(target, tgt):
            raise Hint(
                "you returned tgt unshifted: the model would predict each token from itself; "
                "decoder_input = tgt[:, :-1], target = tgt[:, 1:]"
            )
        if any(_same(x, y) for x, y in ((target, tgt.roll(-1, 1)), (dec, tgt.roll(1, 1)), (target, tgt.roll(1, 1)))):
            raise Hint(
                "torch.roll wraps around: the last token comes back at the other end; "
                "slice instead — tgt[:, :-1] and tgt[:, 1:]"
            )
        if _same(dec, tgt[:-1]) or _same(target, tgt[1:]) or _same(dec, tgt[1:]) or _same(target, tgt[:-1]):
            raise Hint("you sliced the rows (the batch axis): shift along the positions, tgt[:, :-1] and tgt[:, 1:]")
        if _same(target, dec) and _same(target, ref_out):
            raise Hint(
                "your decoder input equals the target: the model would read the very token it must "
                "predict; the decoder reads every token but the last, tgt[:, :-1] (starting with <s>)"
            )
        if _same(target, dec):
            raise Hint(
                "your target equals the decoder input: the model would learn to copy its input; "
                "the target is the input shifted one step left — tgt[:, 1:]"
            )
        if _same(dec, ref_in):
            raise Hint(
                f"decoder_input is right but target is not{where}: the target is every token but "
                "the first, tgt[:, 1:] (the </s> included)"
            )
        if _same(target, ref_out):
            raise Hint(
                f"target is right but decoder_input is not{where}: the decoder reads every token "
                "but the last, tgt[:, :-1] (starting with <s>)"
            )
        shapes = f"{tuple(dec.shape)} and {tuple(target.shape)}"
        if (tuple(dec.shape), tuple(target.shape)) != (tuple(ref_in.shape),) * 2:
            raise Hint(
                f"{where.strip()} you return shapes {shapes}, expected {tuple(ref_in.shape)} each: "
                "slice off one position — tgt[:, :-1] and tgt[:, 1:] work for any length, no fixed numbers"
            )
        raise Hint(f"{where.strip()} decoder_input should be tgt[:, :-1] and target tgt[:, 1:]")
    return "decoder input tgt[:, :-1] and target tgt[:, 1:] for batches of 1 to 5 rows and 3 to 9 positions"


# ---------------------------------------------------------------- 2. the teacher-forced loss


def _loss_cases() -> list[tuple[str, Callable[[], Any], Tensor, Tensor, int, int]]:  # recording toy models
    """(name, model builder, src, tgt, pad_id, eos_id)"""
    gen = torch.Generator().manual_seed(21)
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


@checker("teacher_forcing_loss", "02-loss", "my_teacher_forcing_loss")
def check_teacher_forcing_loss(fn: Callable) -> str:
    """`fn(model, src, tgt, pad_id)` -> mean cross-entropy of model(src, tgt[:, :-1]) against tgt[:, 1:],
    padding ignored."""
    signature = "my_teacher_forcing_loss(model, src, tgt, pad_id)"
    for name, build, src, tgt, pad, eos in _loss_cases():
        model = build()
        where = f" on {name}"
        src_given, tgt_given = src.clone(), tgt.clone()
        try:
            result = _learner(fn, model, src_given, tgt_given, pad, signature=signature, context=where)
        except NotDone:
            raise
        except Hint as hint:
            _untouched(src_given, src, tgt_given, tgt, where)  # the error may come from the ids it wrote
            if _swapped(model.calls, tgt):
                raise Hint("model called with its arguments swapped: it takes model(src, decoder_input)") from None
            if "AttributeError" in str(hint) and ("ToySeq2Seq" in str(hint) or "Recording" in str(hint)):
                raise Hint(f"{hint} — this model only has model(src, tgt) -> logits") from None
            if "Expected target size" in str(hint) or "Expected input batch_size" in str(hint):
                raise Hint(
                    f"{hint} — F.cross_entropy wants (N, vocab) logits and (N,) targets: flatten with "
                    "logits.reshape(-1, logits.size(-1)) and target.reshape(-1)"
                ) from None
            raise
        _untouched(src_given, src, tgt_given, tgt, where)
        if not model.training:  # every model here is handed over in training mode, as the training loop has it
            raise Hint(
                f"your loss switched the model to evaluation mode (model.eval()){where}: the training loop "
                "trains it in training mode (dropout on) — leave the mode as it came",
                mistake="global-state",
            )
        value, has_grad = _loss_value(result)
        with torch.no_grad():
            logits = model.logits(src, tgt[:, :-1])
            ref = float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=pad))
        if np.isclose(value, ref, rtol=1e-4, atol=1e-6):
            if not has_grad:
                raise Hint(
                    "the value is right, but it is not a tensor with a gradient (.item(), numpy, "
                    "or torch.no_grad()?): return the tensor F.cross_entropy gives, so that training "
                    "can call loss.backward()"
                )
            _trains(model, result, where)
            continue
        if not model.calls:
            raise Hint(
                f"your loss never called the model it was given{where}: compute the logits with "
                "model(src, decoder_input), not with a model from the notebook"
            )
        if _swapped(model.calls, tgt):
            raise Hint("model called with its arguments swapped: it takes model(src, decoder_input)")
        if not np.isfinite(value):
            raise Hint(
                f"your loss is {value}{where}, expected {ref:.4f}: something in it is not finite — a mean "
                "over zero tokens (0 / 0) or the log of a probability of 0 gives that"
            )
        for candidate, message in _loss_candidates(model, src, tgt, pad, eos):
            if np.isclose(value, candidate, rtol=1e-4, atol=1e-6) and _loss_mistake_everywhere(fn, message):
                raise Hint(message)
        raise Hint(
            f"{where.strip()} your loss is {value:.4f}, expected {ref:.4f}: the mean cross-entropy of "
            "model(src, tgt[:, :-1]) against tgt[:, 1:], over the tokens that are not pad_id"
        )
    return (
        "mean cross-entropy of the next token, padding ignored — on 4 vocabularies, batches of 1 to 5, "
        "and a Seq2SeqTransformer"
    )


# ---------------------------------------------------------------- 3. exact match and token accuracy


def _accuracy_cases() -> list[tuple[Tensor, Tensor, int]]:
    """(pred, gold, pad_id); the first is the hand-made batch that tells every mistake apart."""
    gold_a = torch.tensor([[1, 2, 3, 4, 9], [5, 9, 7, 7, 7], [3, 3, 9, 7, 7], [2, 9, 7, 7, 7]])
    pred_a = torch.tensor([[1, 2, 3, 4, 9], [5, 9, 1, 2, 3], [3, 4, 9, 9, 7], [2, 8, 7, 7, 7]])
    gold_b, pred_b = torch.tensor([[4, 6, 8, 0, 0]]), torch.tensor([[4, 6, 8, 8, 1]])  # batch 1, right
    gold_c = encode_targets(np.array([1160, 10, 0]), 3)[:, 1:]  # the notebook's ids
    pred_c = torch.tensor([[1, 1, 6, 0, EOS], [1, 0, EOS, EOS, 3], [1, EOS, PAD, PAD, PAD]])
    gen = torch.Generator().manual_seed(31)
    lengths = torch.tensor([6, 2, 4, 1, 5, 3, 6])
    gold_d = torch.randint(3, 11, (7, 6), generator=gen)
    gold_d[torch.arange(6) >= lengths[:, None]] = 2
    pred_d = torch.where(torch.rand(7, 6, generator=gen) < 0.8, gold_d, torch.randint(0, 11, (7, 6), generator=gen))
    # Columns that are padding in every row (a batch decoded to max_steps), junk in pred there, and a
    # row with nothing right: exact match 2/3, token accuracy 6/8.
    gold_e = torch.tensor([[3, 1, 4, 2, 0, 0, 0], [5, 2, 0, 0, 0, 0, 0], [9, 2, 0, 0, 0, 0, 0]])
    pred_e = torch.tensor([[3, 1, 4, 2, 8, 8, 8], [7, 7, 7, 7, 7, 7, 7], [9, 2, 2, 2, 2, 2, 2]])
    return [(pred_a, gold_a, 7), (pred_b, gold_b, 0), (pred_c, gold_c, PAD), (pred_d, gold_d, 2), (pred_e, gold_e, 0)]


def _number(x, what: str, batch: int, n_pos: int) -> float:
    if x is None:
        raise Hint(f"your {what} is None — did you forget to return it?")
    if isinstance(x, Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bool and x.numel() == 1:
            raise Hint(f"your {what} is a bool: return the share of rows (or tokens) that are right, a number")
        if x.numel() != 1:
            shape = tuple(x.shape)
            if x.dim() == 1 and x.numel() == batch:
                raise Hint(f"your {what} has one value per row {shape}: average it over the rows too (.float().mean())")
            if shape == (batch, n_pos):
                raise Hint(f"your {what} has one value per token {shape}: reduce it to one number, a share")
            raise Hint(f"your {what} has shape {shape}: return one number, a share between 0 and 1")
        x = x.double().item()
    elif isinstance(x, np.ndarray):
        if x.size != 1:
            raise Hint(f"your {what} has shape {x.shape}: return one number, a share between 0 and 1")
        x = x.reshape(()).item()
    if isinstance(x, (bool, np.bool_)):
        raise Hint(f"your {what} is a bool: return the share of rows (or tokens) that are right, a number")
    if not isinstance(x, (int, float, np.number)):
        raise Hint(f"your {what} is a {type(x).__name__}, expected a number between 0 and 1")
    return float(x)


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


def _same_number(a: float, b: float) -> bool:
    return bool(np.isclose(a, b, equal_nan=True))


@checker("accuracies", "02-accuracy", "my_accuracies")
def check_accuracies(fn: Callable) -> str:
    """`fn(pred, gold, pad_id)` -> (exact_match, token_accuracy), two numbers in [0, 1]."""
    signature = "my_accuracies(pred, gold, pad_id)"
    cases = _accuracy_cases()
    results = []
    for pred, gold, pad in cases:
        batch, n_pos = gold.shape
        where = f" on a batch of {batch} padded with {pad}"
        p, g = pred.clone(), gold.clone()
        result = _learner(fn, p, g, pad, signature=signature, context=where)
        if not (torch.equal(p, pred) and torch.equal(g, gold)):
            raise Hint("your function changed pred or gold in place: compute on copies, or without assigning into them")
        exact, token = _pair(result, "my_accuracies", ("exact_match", "token_accuracy"))
        results.append((_number(exact, "exact_match", batch, n_pos), _number(token, "token_accuracy", batch, n_pos)))

    def reference(pred: Tensor, gold: Tensor, pad: int) -> tuple[float, float]:
        right, real = pred == gold, gold != pad
        return float((right | ~real).all(1).double().mean()), float((right & real).sum() / real.sum())

    refs = [reference(*case) for case in cases]
    for (pred, gold, pad), (exact, token), (ref_exact, ref_token) in zip(cases, results, refs):
        where = f" on a batch of {gold.size(0)} padded with {pad}"
        ok_exact, ok_token = np.isclose(exact, ref_exact), np.isclose(token, ref_token)
        if ok_exact and ok_token:
            continue
        if np.isclose(exact, ref_token) and np.isclose(token, ref_exact) and not ok_exact:
            raise Hint("the two are swapped: return (exact_match, token_accuracy), in that order")
        if np.isclose(exact, 100 * ref_exact) and np.isclose(token, 100 * ref_token) and ref_token:
            raise Hint("you return percentages: return shares between 0 and 1")
        what, k = ("token_accuracy", 1) if not ok_token else ("exact_match", 0)
        value, ref = (token, ref_token) if not ok_token else (exact, ref_exact)
        # A mistake is named only when it gives the learner's number on every batch their code gets
        # wrong, not on this one alone (a 0 is also what `//` gives; one value can fit two mistakes).
        wrong_on = [j for j, (got, want) in enumerate(zip(results, refs)) if not np.isclose(got[k], want[k])]
        recomputed = [dict((m, v) for v, m in _accuracy_mistakes(*cases[j], what)) for j in wrong_on]
        for candidate, message in _accuracy_mistakes(pred, gold, pad, what):
            if np.isfinite(candidate) and np.isclose(value, candidate):
                if all(_same_number(results[j][k], r[message]) for j, r in zip(wrong_on, recomputed)):
                    raise Hint(message)
        raise Hint(
            f"{where.strip()} (pred {pred.tolist()}, gold {gold.tolist()}) your {what} is {value:.4g}, expected "
            f"{ref:.4g}: "
            + (
                "right real tokens / real tokens (real: gold != pad_id)"
                if what == "token_accuracy"
                else "the share of rows whose every real token is right"
            )
        )
    return "exact match and token accuracy on 5 batches (1 to 7 rows, padding ignored, all-padding columns)"


# ---------------------------------------------------------------- 4. greedy decoding


def _greedy_cases() -> list[tuple[str, Callable[[], Any], Tensor, int, int, int]]:  # recording toy models
    """(name, model builder, src, bos_id, eos_id, max_steps); a builder may give None (skipped)."""

    def ids(high: int, shape: tuple[int, int], seed: int) -> Tensor:
        return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))

    src_b, _ = sums([(5, 5), (663, 497), (0, 0), (999, 999), (45, 55)])
    # Seeds picked so that rows end at different steps and some never do (tests/test_adder_checks.py).
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


def _first_eos(row: Tensor, eos: int) -> int:
    """Tokens up to and including the first </s> (all of them when there is none)."""
    hits = (row == eos).nonzero()
    return int(hits[0]) + 1 if len(hits) else len(row)


@checker("greedy_decoding", "02-greedy", "my_greedy", references=("attnkit.adder.model:Seq2SeqTransformer.greedy",))
def check_greedy(fn: Callable) -> str:
    """`fn(model, src, bos_id, eos_id, max_steps)` -> (batch, n) token ids after <s>, n <= max_steps,
    each the argmax of model(src, <s> + the tokens before it)[:, -1]; it may stop once every row has
    written eos_id. Tokens after a row's first eos_id are not checked."""
    signature = "my_greedy(model, src, bos_id, eos_id, max_steps)"
    n_cases = 0
    for name, build, src, bos, eos, max_steps in _greedy_cases():
        model = build()
        if model is None:  # the committed checkpoint could not be loaded here
            continue
        n_cases += 1
        batch = src.size(0)
        where = f" on {name}"
        given = src.clone()  # the caller's batch: the learner must leave it as it came
        try:
            result = _learner(fn, model, given, bos, eos, max_steps, signature=signature, context=where)
        except NotDone:
            raise
        except Hint as hint:
            text = str(hint)
            if "AttributeError" in text and ("ToySeq2Seq" in text or "Recording" in text):
                raise Hint(
                    f"{text} — this model only has model(src, tgt) -> logits (no .greedy, .cfg, "
                    ".encode): write the loop yourself"
                ) from None
            if "rows but the decoder input has" in text or "must match the size" in text:
                raise Hint(
                    f"{text} — the decoder input must be built from src's batch: <s> and the model's "
                    "own tokens (teacher-forced targets or a variable from the notebook?)"
                ) from None
            if "decoder input has" in text and "positions, more than" in text:
                raise Hint(f"{text} — did you decode more than max_steps tokens, or not stop at max_steps?") from None
            raise
        if not torch.equal(given, src):
            raise Hint(
                f"your function changed src in place{where}: the caller decodes, scores and trains on the "
                "same batch — write into a tensor of your own (torch.full, torch.cat), never into src"
            )
        if isinstance(result, (list, tuple)) and result and all(isinstance(t, Tensor) for t in result):
            raise Hint(
                f"you returned a {type(result).__name__} of tensors: join them into one (batch, steps) "
                "tensor, e.g. torch.cat(tokens, dim=1)"
            )
        out = _ids_tensor(result, "output")
        if out.dim() == 3 and out.size(-1) == 1:
            raise Hint(f"your output has shape {tuple(out.shape)}: return (batch, steps) — squeeze the last axis")
        if out.dim() != 2:
            raise Hint(f"your output has shape {tuple(out.shape)}{where}: return (batch, steps), one row per problem")
        if out.size(0) != batch:
            if out.size(1) == batch:
                raise Hint(f"your output has shape {tuple(out.shape)}: transposed? return (batch, steps)")
            raise Hint(f"your output has {out.size(0)} rows{where}, expected {batch}: one row per row of src")
        n = out.size(1)
        if n == 0:
            raise Hint("your output has no tokens: decode at least until every row writes eos_id")
        if n > max_steps:
            if (out[:, 0] == bos).all():
                raise Hint("your output starts with <s>: return only the generated tokens (drop column 0)")
            raise Hint(f"your output has {n} tokens per row{where}: at most max_steps = {max_steps}")
        if not model.calls:
            raise Hint("your code never called the model it was given: each step runs model(src, decoder_input)")
        for first, second in model.calls:
            if (second[:, 0] != bos).any():
                if all(fed.size(1) == 1 for _, fed in model.calls):
                    raise Hint(
                        "you fed the decoder only the newest token: feed the whole sequence so far, <s> "
                        "and every token written (the kit's key/value cache is what lets it skip that)"
                    )
                if (first[:, 0] == bos).all() and first.size(0) == batch:
                    raise Hint("model called with its arguments swapped: it takes model(src, decoder_input)")
                raise Hint("the decoder input must start with <s> (bos_id), then the tokens written so far")
            if second.size(1) > max_steps + 1:
                raise Hint(f"you fed the decoder {second.size(1)} positions: decode at most max_steps tokens")
        with torch.no_grad():
            vocab = model.logits(src[:1], torch.full((1, 1), bos, dtype=torch.long)).size(-1)
        if (out < 0).any() or (out >= vocab).any():
            raise Hint(
                "your output holds ids outside the vocabulary: return token ids, the argmax over the "
                "vocabulary (dim=-1), not positions or scores"
            )

        # Each checked token must be the argmax given <s> and the learner's own earlier tokens.
        with torch.no_grad():
            fed = torch.cat([torch.full((batch, 1), bos, dtype=torch.long), out[:, :-1]], dim=1)
            logits = model.logits(src, fed).double()
        best, top = logits.argmax(-1), logits.amax(-1)
        mine = logits.gather(-1, out[:, :, None].clamp(0, vocab - 1))[..., 0]
        # A token within rounding of the top logit (not an exact tie) is the argmax too: code that
        # takes the argmax of softmax(logits) may see two near-equal logits as one probability.
        near = (mine < top) & (top - mine <= 1e-6 * top.abs().clamp(min=1))
        ends = [_first_eos(out[r], eos) for r in range(batch)]
        for r in range(batch):
            wrong = ((out[r, : ends[r]] != best[r, : ends[r]]) & ~near[r, : ends[r]]).nonzero()
            if not len(wrong):
                continue
            t = int(wrong[0])
            if mine[r, t] == top[r, t]:  # an exact tie, broken the other way: the first differing step says so
                tied = (logits[r, t] == top[r, t]).nonzero()[:, 0].tolist()
                raise Hint(
                    f"{where.strip()}, row {r}, step {t}: the model's last-position logits tie between ids "
                    f"{', '.join(map(str, tied))} and you wrote {int(out[r, t])}: a tie goes to the lowest id, "
                    "as logits.argmax(dim=-1) gives it (topk and sorting may pick another)",
                    mistake="greedy-tie",
                )
            if (out[:, 0] == bos).all():
                raise Hint("your output starts with <s>: return only the generated tokens (drop column 0)")
            mistakes = [
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
            ]
            for mode, message in mistakes:
                candidate = _reference_greedy(model, src, bos, n, mode)
                if _same(out[r, : ends[r]], candidate[r, : ends[r]]):
                    raise Hint(message)
            if len(set(out[r, : ends[r]].tolist())) == 1 and ends[r] > 2:  # no mistake above matched: say what differs
                raise Hint(
                    f"{where.strip()}, row {r}: you wrote {int(out[r, 0])} at every step, but given <s> and your "
                    f"earlier tokens the model's last-position logits peak at {int(best[r, t])} at step {t} — "
                    "append each step's argmax to the decoder input and read the logits of the last position"
                )
            raise Hint(
                f"{where.strip()}, row {r}, step {t}: you wrote {int(out[r, t])}, but given <s> and your "
                f"earlier tokens the model's last-position logits peak at {int(best[r, t])} — each step "
                "appends argmax(logits[:, -1], dim=-1), no sampling"
            )

        # Long enough: every row until its </s>, or max_steps tokens.
        unfinished = [r for r in range(batch) if eos not in out[r].tolist()]
        if n < max_steps and unfinished:
            r = unfinished[0]
            first_end = min((ends[k] for k in range(batch) if out[k, ends[k] - 1] == eos), default=None)
            if first_end == n:  # the first </s> of any row came at the last step
                k = next(k for k in range(batch) if ends[k] == n and out[k, n - 1] == eos)
                raise Hint(
                    f"you stopped when row {k} wrote </s>, but row {r} had not finished: "
                    "keep a per-row flag (finished |= token == eos_id) and stop only when every row "
                    "has finished, or after max_steps tokens"
                )
            raise Hint(
                f"you returned {n} tokens per row{where}, but row {r} has not written </s>: decode "
                f"until every row has, or max_steps = {max_steps} tokens (off by one in the loop?)"
            )
    return (
        f"matches greedy decoding on {n_cases} models (toy ones and the committed adder), batches of 1 to 5, "
        "rows ending at different steps, ties going to the lowest id"
    )
