"""Checkers for notebook 03's exercises (a head's role, read from numbers), in the style of
checks.py: one printed line, ✅ or a hint naming the likely mistake, never a traceback; True only
on a pass. Each runs the learner's function on small made-up patterns and caches of several
shapes (batch 1, head counts and operand lengths other than the trained adder's).

    heatmap_checks.check_row_entropy(my_row_entropy)
    heatmap_checks.check_typical_sample(my_typical_sample)
    heatmap_checks.check_aligned_share(my_aligned_share)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..adder.data import EOS, PAD, encode_sources, encode_targets
from ..core.hooks import ActivationCache
from ..interp.roles import row_shares
from .checking import Hint, NotDone, call, checker, refuse_list


def _attempt(fn: Callable, *args, context: str = "", shapes: str = "", axes: bool = False):
    """checking.call (numpy's warnings silenced too), after saying what to pass when `fn` is not a
    function; `axes` and `shapes` add this exercise's advice for index and broadcasting errors."""
    if isinstance(fn, type):
        raise Hint(
            f"you passed a class ({fn.__name__}): write a function (def ...) and pass it, e.g. check(my_function)"
        )
    if not callable(fn):
        what = "None" if fn is None else f"a {type(fn).__name__}"
        raise Hint(f"pass your function itself, e.g. check(my_function), not {what}")
    advice = [
        (
            fragment,
            "write it for any number of leading axes: count axes from the end (dim=-1 is the key "
            "axis) and don't unpack a fixed number of sizes",
        )
        for fragment in ("out of range", "too many indices", "to unpack")
        if axes
    ]
    advice += [
        (fragment, shapes) for fragment in ("must match the size", "could not be broadcast", "shape mismatch") if shapes
    ]
    with np.errstate(all="ignore"):
        return call(fn, *args, context=context, advice=advice)


def _array(x, expected: str) -> np.ndarray:
    """The learner's result as a float64 array; a Hint when it cannot be one."""
    if x is None:
        raise Hint("your function returned None — did you forget `return`?")
    try:
        if isinstance(x, Tensor):
            x = x.detach().cpu().double().numpy()
        arr = np.asarray(x, dtype=float)
    except Exception:
        raise Hint(f"your function returned a {type(x).__name__}, expected {expected}") from None
    return arr


def _close(got: np.ndarray, want, atol: float = 1e-5) -> bool:
    want = np.asarray(want, dtype=float)
    return got.shape == want.shape and bool(np.allclose(got, want, atol=atol, rtol=1e-4))


# ---------------------------------------------------------------- entropy of each row


def _entropy_bits(w: Tensor) -> Tensor:
    """-sum w log2 w over the key axis, 0 log 0 = 0 (as attnkit.interp.roles computes it)."""
    return -torch.special.xlogy(w, w).sum(-1) / math.log(2)


def _entropy_cases() -> list[tuple[str, Tensor]]:
    gen = torch.Generator().manual_seed(303)
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


def _typical_distance(values: np.ndarray, means: np.ndarray) -> np.ndarray:
    """Per sample, the mean absolute difference to `means` over the measures `means` defines;
    inf for a sample that lacks one of them (as attnkit.interp.roles.roles_from_cache)."""
    defined = ~np.isnan(means)
    dist = np.abs(values[:, defined] - means[defined]).mean(1)
    return np.where(np.isnan(dist), np.inf, dist)


def _typical_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(3)
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


def _index(out, n_samples: int, n_measures: int) -> int:
    """The learner's answer as an index: an int (Python's, numpy's or a 0-d integer tensor), or a Hint."""
    if isinstance(out, (bool, np.bool_)) or (isinstance(out, Tensor) and out.dtype == torch.bool):
        raise Hint("your function returned a bool: return the index of the typical sample (an int)")
    got = _array(out, "one int, the index of a sample")
    if got.size != 1:
        if got.shape == (n_samples,):
            raise Hint(
                f"you returned {n_samples} values (one distance per sample?): return the index of the "
                "smallest, e.g. int(np.argmin(distance))"
            )
        if got.shape == (n_measures,):
            raise Hint("you returned a row of measures: return the index of the sample, not its values")
        raise Hint(f"you returned an array of shape {got.shape}: return one int, the index of a sample")
    got = got.reshape(())
    if not (np.isfinite(got) and float(got).is_integer()):
        raise Hint(f"you returned {float(got):g}: return the index of a sample, an int from 0 to {n_samples - 1}")
    if (
        isinstance(out, (float, np.floating))
        or getattr(out, "dtype", None) in (np.float32, np.float64)
        or (isinstance(out, Tensor) and out.is_floating_point())
    ):  # an index must index: values[3.0] fails
        raise Hint(
            f"you returned {float(got):g} as a float ({getattr(out, 'dtype', type(out).__name__)}): return the "
            "index as an int (int(...), or np.argmin's own integer), so that values[i] works",
            mistake="index-not-int",
        )
    i = int(got)
    if not 0 <= i < n_samples:
        raise Hint(
            f"you returned {i}, but there are {n_samples} samples (rows of `values`): return the index "
            f"of a row, from 0 to {n_samples - 1}"
        )
    return i


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


def _problem_cache(a: np.ndarray, b: np.ndarray, n_digits: int, n_heads: int, seed: int) -> ActivationCache:
    """A cache laid out as Adder.run_with_cache makes it (zero-padded sources; tgt = <s> and the
    answer's digits, then padding), with random but peaked attention patterns."""
    gen = torch.Generator().manual_seed(seed)
    src = encode_sources(a, b, n_digits, zero_pad=True)  # (batch, 2 n_digits + 1)
    tgt = encode_targets(a + b, n_digits)[:, :-1]  # <s> digits </s> pad, cut
    tgt = tgt.masked_fill(tgt == EOS, PAD)  # as run_with_cache leaves it
    batch, s, t = len(a), src.size(1), tgt.size(1)
    store = {}
    for layer in range(2):
        for name, (q, k) in (("enc.self", (s, s)), ("dec.self", (t, t)), ("dec.cross", (t, s))):
            logits = torch.randn(batch, n_heads, q, k, generator=gen) * 2.5
            if name == "dec.self":
                logits = logits.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), -math.inf)
            store[f"{name}.{layer}.hook_pattern"] = logits.softmax(-1)
    store["src"], store["tgt"] = src, tgt
    return ActivationCache(store)


def _aligned_cases() -> list[tuple[str, ActivationCache, str]]:
    rng = np.random.default_rng(15)
    edge = [(663, 497), (5, 5), (0, 0), (999, 1), (45, 55), (7, 8), (500, 500), (12, 34)]
    a = np.array([x for x, _ in edge] + list(rng.integers(0, 1000, 32)))
    b = np.array([y for _, y in edge] + list(rng.integers(0, 1000, 32)))
    cases = [
        ("40 three-digit problems, 3 heads per layer", _problem_cache(a, b, 3, 3, seed=9), "dec.cross.1.2"),
        (
            "one problem, 5+5, 5 heads per layer",
            _problem_cache(np.array([5]), np.array([5]), 3, 5, seed=2),
            "dec.cross.0.4",
        ),
    ]
    for n_digits, n, heads, head, seed in ((2, 17, 2, "dec.cross.1.0", 3), (4, 9, 6, "dec.cross.0.3", 4)):
        a, b = rng.integers(0, 10 ** rng.integers(1, n_digits + 1, n)), rng.integers(0, 10**n_digits, n)
        cases.append(
            (
                f"{n} {n_digits}-digit problems, {heads} heads per layer",
                _problem_cache(a, b, n_digits, heads, seed),
                head,
            )
        )
    return cases


def _aligned_variant(
    cache,
    head: str,
    *,
    shift: int = 0,
    fixed_len: bool = False,
    keys: str = "ab",
    mirrored: bool = False,
    key_mean: bool = False,
    rows: str = "counted",
    per_problem: bool = False,
    first_only: bool = False,
    all_heads: bool = False,
) -> float:
    """The aligned share, or what a learner's code computes with one mistake switched on."""
    kind, layer, h = head.rsplit(".", 2)
    pattern = cache[f"{kind}.{layer}.hook_pattern"].double()
    pattern = pattern.mean(1) if all_heads else pattern[:, int(h)]  # (batch, q_pos, k_pos)
    src, tgt = cache["src"], cache["tgt"]
    if first_only:
        pattern, src, tgt = pattern[:1], src[:1], tgt[:1]
    n_digits = (src.size(1) - 1) // 2
    n = torch.full((len(tgt),), n_digits + 1) if fixed_len else (tgt[:, 1:] < 10).sum(1)
    t = torch.arange(tgt.size(1))
    place = n[:, None] - 1 - (t - shift)  # the place value position t writes
    counted = (place >= 0) & (place < n_digits) & (tgt != PAD)
    p = place.clamp(0, n_digits - 1)
    a_key = p if mirrored else n_digits - 1 - p
    b_key = n_digits + 1 + p if mirrored else 2 * n_digits - p
    on_a, on_b = pattern.gather(2, a_key[..., None])[..., 0], pattern.gather(2, b_key[..., None])[..., 0]
    share = {"ab": on_a + on_b, "a": on_a, "b": on_b}[keys] / (2 if key_mean else 1)
    share = share * counted
    if per_problem:
        return float((share.sum(1) / counted.sum(1)).mean())
    over = {"counted": counted, "real": tgt != PAD, "all": torch.ones_like(counted)}[rows]
    return float(share.sum() / over.sum())


def _aligned_contradicted(fn: Callable, mistake: dict) -> bool:
    """Does the learner's code, on another case, give a wrong number that this mistake does not give?
    One number can fit a mistake by chance; the hint names it only when no case says otherwise."""
    for _label, cache, head in _aligned_cases():
        try:
            got = _array(_attempt(fn, cache, head), "one number")
        except Hint:
            continue  # a case the code cannot run on says nothing about this mistake
        if got.size != 1:
            continue
        share = float(got.reshape(()))
        close = lambda x: math.isclose(share, x, rel_tol=1e-4, abs_tol=1e-5)
        if not close(_aligned_reference(cache, head)) and not close(_aligned_variant(cache, head, **mistake)):
            return True
    return False


def _aligned_reference(cache, head: str) -> float:
    """attnkit's own number: the mean of roles.row_shares over every counted row."""
    return float(np.nanmean(row_shares(cache, head, "aligned")["share"]))


ALIGNED_EXAMPLE = (
    "e.g. 663+497 → 1160: decoder position 0 writes the thousands digit (no column: left out), "
    "1 the hundreds (keys 0 and 4), 2 the tens (keys 1 and 5), 3 the units (keys 2 and 6), "
    "4 writes </s> (left out)"
)


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
