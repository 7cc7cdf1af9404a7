"""Checkers for notebook 02's exercises (training and measuring the adder), as every checker in
attnkit/exercises: one printed line, ✅ or a hint naming the likely mistake, never a traceback;
True when passed.

The checkers run the learner's code on their own batches — other vocabularies, padding ids,
batch sizes and lengths than the notebook's — and, for the loss and greedy decoding, on small
models of their own: a toy seq2seq model that records what it is fed, a tiny freshly
initialised Seq2SeqTransformer and the committed adder. Code written for the notebook's one
batch, its PAD = 13 or its globals does not pass.

The checkers are here, where the notebook imports them; what they share lives beside them:
adder_values (reading a learner's result), adder_loss (the loss's cases and rebuilt mistakes) and
adder_answers (the shift's, the accuracies' and greedy decoding's cases and rebuilt mistakes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .adder_answers import (
    _GREEDY_MISTAKES,
    _accuracy_cases,
    _accuracy_mistakes,
    _first_eos,
    _greedy_cases,
    _reference_greedy,
    _shift_cases,
)
from .adder_loss import (
    _loss_candidates,
    _loss_cases,
    _loss_mistake_everywhere,
    _loss_value,
    _swapped,
    _trains,
    _untouched,
)
from .adder_values import _ids_tensor, _learner, _number, _pair, _same, _same_number
from .checking import Hint, NotDone, checker

# ---------------------------------------------------------------- 1. the teacher-forcing shift


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
            for mode, message in _GREEDY_MISTAKES:
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
