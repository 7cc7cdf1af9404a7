"""Checkers for notebook 03's exercises (a head's role, read from numbers), as every checker in
attnkit/exercises: one printed line, ✅ or a hint naming the likely mistake, never a traceback;
True only on a pass. Each runs the learner's function on small made-up patterns and caches of several
shapes (batch 1, head counts and operand lengths other than the trained adder's).

    heatmap_checks.check_row_entropy(my_row_entropy)
    heatmap_checks.check_typical_sample(my_typical_sample)
    heatmap_checks.check_aligned_share(my_aligned_share)

The checkers are here, where the notebook imports them; what they share lives beside them:
heatmaps_values (calling the learner's code, reading its result), heatmaps_rows (the row entropy's
and the typical sample's cases and mistakes) and heatmaps_aligned (the aligned share's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .checking import Hint, NotDone, checker, refuse_list
from .heatmaps_aligned import (
    ALIGNED_EXAMPLE,
    _aligned_cases,
    _aligned_contradicted,
    _aligned_reference,
    _aligned_variant,
)
from .heatmaps_rows import (
    _entropy_bits,
    _entropy_cases,
    _row_text,
    _typical_cases,
    _typical_distance,
    _typical_mistakes,
)
from .heatmaps_values import _array, _attempt, _close, _index

# ---------------------------------------------------------------- entropy of each row


@checker("row_entropy", "03-row-entropy", "my_row_entropy")
def check_row_entropy(fn: Callable) -> str:
    """`fn(pattern)`: (..., q_pos, k_pos) weights -> (..., q_pos) entropy of each row in bits."""
    for label, w in _entropy_cases():
        shape, k = tuple(w.shape), w.shape[-1]
        original = w.clone()
        out = _attempt(fn, w, context=f" on a {label}, shape {shape}", axes=True)
        if not torch.equal(w, original):
            raise Hint(
                "your function changed the pattern it was given (in place, e.g. w[w == 0] = 1 or "
                "w.log_()): in the notebook that would overwrite the cache; compute on a copy instead"
            )
        refuse_list(out, "output")
        got = _array(out, f"a tensor of shape {shape[:-1]}")
        want = _entropy_bits(w).numpy()
        expected = shape[:-1]
        if got.shape != expected:
            if got.shape == expected + (1,):
                raise Hint(
                    f"your output has shape {got.shape}: a trailing axis of size 1 — sum over the keys "
                    f"without keepdim, to get {expected}"
                )
            if got.shape == shape:
                raise Hint(
                    "you returned one value per weight (the terms −w·log2 w): sum them over the keys, "
                    "dim=-1, to get one entropy per row"
                )
            if got.shape == shape[:-2] + (k,) and shape[-2] != k:
                raise Hint(
                    f"your output has shape {got.shape}, one value per key: you summed over the query "
                    "axis; a row is one query, so sum over the keys (dim=-1)"
                )
            if got.shape == shape[:-2] and len(shape) > 2:
                raise Hint(
                    f"your output has shape {got.shape}, one value per head: you also reduced over the "
                    f"queries; return one entropy per row, shape {expected}"
                )
            if got.shape == ():
                raise Hint(
                    f"you returned one number for the whole pattern: return one entropy per row "
                    f"(per query), shape {expected}"
                )
            raise Hint(
                f"your output has shape {got.shape}, expected {expected} (one entropy per query row) "
                f"for a pattern of shape {shape}"
            )
        bad = ~np.isfinite(got)
        if bad.any():
            zero_row = (w == 0).all(-1).numpy()
            naive = -(w.double() * w.double().log2()).sum(-1).numpy()  # the w * log2(w) mistake, exactly?
            if (
                (bad & ~zero_row).any()
                and np.array_equal(np.isnan(got), np.isnan(naive))
                and np.array_equal(np.isinf(got), np.isinf(naive))
                and np.allclose(got[~bad], naive[~bad], atol=1e-4, rtol=1e-4)
            ):
                raise Hint(
                    "NaN or inf where some weights are 0 (padding, the causal mask): 0·log 0 must count "
                    "as 0 (its limit), but w * log2(w) gives 0·(−inf) = NaN there — use "
                    "torch.special.xlogy(w, w) / np.log(2), or torch.where(w > 0, w * w.log2(), 0.0)"
                )
            if not (bad & ~zero_row).any():
                raise Hint(
                    "NaN on a row of zeros (a query that may see nothing): its entropy is 0 — don't "
                    "divide by the row's sum (the rows of a pattern already sum to 1), and count 0·log 0 as 0"
                )
            flat_w, flat_bad = w.reshape(-1, k), bad.reshape(-1)
            i = int(np.argmax(flat_bad & ~zero_row.reshape(-1)))
            raise Hint(
                f"on a {label}: for the row {_row_text(flat_w[i])} you return {got.reshape(-1)[i]}, expected "
                f"{want.reshape(-1)[i]:.4g} bits (−Σ w·log2 w over its keys, with 0·log 0 = 0)"
            )
        if _close(got, want, atol=1e-4):
            continue
        rows_t = _entropy_bits(w.transpose(-1, -2)).numpy()
        wrong = [
            (
                want * math.log(2),
                "your entropy is in nats (natural log): the notebook's is in bits — use log2, or divide by np.log(2)",
            ),
            (want * math.log10(2), "your entropy uses log10: the notebook's is in bits — use log2"),
            (-want, "the sign is flipped: H = −Σ w·log2 w, which is ≥ 0"),
            (-want * math.log(2), "the sign is flipped and the log is natural: H = −Σ w·log2 w, in bits"),
            (want / k, "you averaged over the keys: the entropy sums −w·log2 w over a row's keys"),
            (
                want / math.log2(k),
                "you scaled by log2(n_keys) to [0, 1]: return plain bits (a uniform row over n keys has log2(n) bits)",
            ),
            (rows_t, "you summed over the query axis: a row is one query, so sum over the keys (dim=-1)"),
            (
                _entropy_bits(w.softmax(-1)).numpy(),
                "you applied a softmax again: the pattern already is the "
                "weights (each row sums to 1); take the entropy of the row itself",
            ),
        ]
        for candidate, message in wrong:
            if _close(got, candidate, atol=1e-4):
                raise Hint(message)
        flat_w, flat_got, flat_want = w.reshape(-1, k), got.reshape(-1), want.reshape(-1)
        i = int(np.argmax(np.abs(flat_got - flat_want)))
        raise Hint(
            f"on a {label}: for the row {_row_text(flat_w[i])} you return {flat_got[i]:.4g} bits, "
            f"expected {flat_want[i]:.4g} (−Σ w·log2 w over its keys, with 0·log 0 = 0)"
        )
    return "−Σ w·log2 w per row, in bits, for 2-D, 3-D and 4-D patterns, with zero weights and rows of zeros"


# ---------------------------------------------------------------- typical sample


@checker("typical_sample", "03-typical-sample", "my_typical_sample")
def check_typical_sample(fn: Callable) -> str:
    """`fn(values, means)` -> int: the sample whose measures are closest to the head's averages."""
    cases = _typical_cases()
    picks = []
    for label, values, means in cases:
        v, m = values.copy(), means.copy()
        out = _attempt(fn, v, m, context=f" on {label} (values {values.shape}, means {means.shape})")
        if not (np.array_equal(v, values, equal_nan=True) and np.array_equal(m, means, equal_nan=True)):
            raise Hint(
                "your function changed `values` or `means` in place (e.g. values[np.isnan(values)] = ...): "
                "the caller's arrays must stay as they are; work on a copy"
            )
        picks.append(_index(out, *values.shape))
    wants = [int(np.argmin(_typical_distance(values, means))) for _, values, means in cases]
    wrong_on = [c for c, (i, want) in enumerate(zip(picks, wants)) if i != want]
    for (label, values, means), i, want in zip(cases, picks, wants):
        if i == want:
            continue
        dist = _typical_distance(values, means)
        defined = ~np.isnan(means)
        if np.isnan(values[i, defined]).any():
            raise Hint(
                f"you picked sample {i}, which lacks a measure the head has (NaN in `values`): np.argmin "
                "takes the first NaN, and nanmean/nansum score the missing measure as a perfect match — "
                "give such samples distance np.inf so they are never picked"
            )
        # One index can be a mistake's pick by chance: the hint names a mistake only when it picks what
        # the learner picked on every case the learner gets wrong.
        recomputed = {c: dict((m, k) for k, m in _typical_mistakes(*cases[c][1:])) for c in wrong_on}
        for candidate, message in _typical_mistakes(values, means):
            if i == candidate and all(recomputed[c].get(message) == picks[c] for c in wrong_on):
                raise Hint(message)
        all_nan = ""
        if np.isnan(means).any() and i == 0:
            all_nan = (
                " — if all your distances are NaN, np.argmin returns 0: the measures the head's kind lacks "
                "are NaN in `means` (and in every sample), so leave those columns out"
            )
        raise Hint(
            f"on {label}: you picked sample {i} (mean absolute difference {dist[i]:.3f} over the measures the "
            f"head has), but sample {want} is closer ({dist[want]:.3f}){all_nan}"
        )
    return "mean absolute difference over the head's measures, samples lacking one skipped, 1 to 23 samples"


# ---------------------------------------------------------------- share on the aligned column


@checker("aligned_share", "03-aligned-share", "my_aligned_share", references=("attnkit.interp.roles:row_shares",))
def check_aligned_share(fn: Callable) -> str:
    """`fn(cache, head)` -> float: a dec.cross head's mean weight on the aligned column over every
    counted row of every problem (roles.head_roles' "aligned")."""
    for number, (label, cache, head) in enumerate(_aligned_cases()):
        saved = {k: v.clone() for k, v in cache.items()}
        try:
            out = _attempt(
                fn,
                cache,
                head,
                context=f" on my_aligned_share(cache, {head!r}) with {label}",
                shapes='cache["dec.cross.L.hook_pattern"] is (batch, heads, q_pos, k_pos), one head '
                'is pattern[:, h] (batch, q_pos, k_pos), and cache["tgt"] is (batch, q_pos)',
            )
        except NotDone:
            raise
        except Hint as hint:
            if number < 2:
                raise
            raise Hint(
                f"{hint} — the 3-digit cases passed: take n_digits from the cache, "
                "cache['src'].shape[1] == 2*n_digits + 1, instead of fixed sizes or positions"
            ) from None
        if not all(torch.equal(cache.store[k], v) for k, v in saved.items()):
            raise Hint(
                "your function changed the cache in place (e.g. tgt[tgt == 13] = 0 or a pattern): "
                "the notebook's cache must stay as it is — work on copies (.clone())"
            )
        got = _array(out, "one number (a float)")
        batch, t = cache["tgt"].shape
        if got.size != 1:
            if got.shape == (batch,) and batch > 1:
                raise Hint(
                    f"you returned one share per problem ({batch} values): return one number, the mean "
                    "over every counted row of every problem"
                )
            if got.shape == (batch, t):
                raise Hint(
                    "you returned one share per decoder position: return one number, their mean over the "
                    "counted rows (writing a digit that has a column) of every problem"
                )
            raise Hint(f"you returned an array of shape {got.shape}: return one number (a float)")
        share = float(got.reshape(()))
        want = _aligned_reference(cache, head)
        if math.isclose(share, want, rel_tol=1e-4, abs_tol=1e-5):
            continue
        if not math.isfinite(share):
            raise Hint(
                f"your share is {share}: a mean over no rows (0/0)? Every problem has at least its units "
                "row; count rows where the position writes a digit of place 0 … n_digits-1"
            )
        close = lambda x: math.isclose(share, x, rel_tol=1e-4, abs_tol=1e-5)
        kind, layer, h = head.rsplit(".", 2)
        others = [f"dec.cross.{i}.{j}" for i in range(2) for j in range(cache[f"dec.cross.{i}.hook_pattern"].size(1))]
        for other in others:
            if other != head and close(_aligned_reference(cache, other)):
                raise Hint(
                    f"you measured {other}, not {head}: the head id '{head}' is the pattern "
                    f"cache['{kind}.{layer}.hook_pattern'] at index {h} of axis 1 ([:, {h}])"
                )
        wrong: list[tuple[dict[str, Any], str]] = [
            (
                dict(all_heads=True),
                "you averaged over every head of the layer: take one head, pattern[:, h], "
                "with h the head id's last number",
            ),
            (
                dict(first_only=True),
                "you measured the first problem only: a role is the mean over every problem "
                "of the cache (one heatmap is not enough — §5)",
            ),
            (
                dict(shift=1),
                "off by one: decoder position t *reads* tgt[t] but *writes* the answer's digit t "
                f"(the row labelled 6→0 writes 0) — {ALIGNED_EXAMPLE}",
            ),
            (
                dict(shift=-1),
                f"off by one: decoder position t writes the answer's digit t, not t+1 — {ALIGNED_EXAMPLE}",
            ),
            (
                dict(fixed_len=True),
                "you took every answer as n_digits+1 digits long, but 5+5 = 10 has 2: the place "
                "position t writes depends on that problem's answer length (its digit tokens "
                "in cache['tgt'], or len(str(a+b)))",
            ),
            (
                dict(mirrored=True),
                "place values count from the right: a's place-p digit is at source position "
                "n_digits-1-p and b's at 2*n_digits-p (units last, as in 663+497)",
            ),
            (
                dict(keys="a"),
                "you counted only operand a's digit: the aligned column is both operands' digits of "
                "the place being written, a's and b's",
            ),
            (
                dict(keys="b"),
                "you counted only operand b's digit: the aligned column is both operands' digits of "
                "the place being written, a's and b's",
            ),
            (
                dict(key_mean=True),
                "you averaged the two digits' weights: the share is their *sum* (how much of the "
                "row's attention lands on the column)",
            ),
            (
                dict(rows="real"),
                "you averaged over rows that have no aligned column (the thousands digit, </s>) "
                "as if their share were 0: leave them out of the mean",
            ),
            (
                dict(rows="all"),
                "you averaged over every decoder position, padding and rows without an aligned "
                "column included: take the mean over the counted rows only",
            ),
            (
                dict(per_problem=True),
                "you averaged each problem first, then the problems: problems have different "
                "numbers of counted rows (5+5 has 2, 663+497 has 3); the measure is the mean "
                "over every counted row of every problem, pooled",
            ),
        ]
        for mistake, message in wrong:
            if close(_aligned_variant(cache, head, **mistake)) and not _aligned_contradicted(fn, mistake):
                raise Hint(message)
        if number >= 2:  # the 3-digit cases passed
            raise Hint(
                f"right for 3-digit operands, but on {label} you return {share:.4f}, expected {want:.4f}: "
                "take n_digits from the source width, cache['src'].shape[1] == 2*n_digits + 1, instead of "
                "fixed positions"
            )
        raise Hint(
            f"on {label}, {head}: you return {share:.4f}, expected {want:.4f} — count the rows that write a "
            f"digit of place p < n_digits and sum the weight on a's and b's place-p digits; {ALIGNED_EXAMPLE}"
        )
    return (
        "matches attnkit.interp.roles on 1 to 40 problems of 2, 3 and 4 digits, 2 to 6 heads per layer, "
        "short answers included"
    )
