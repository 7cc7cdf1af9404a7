"""The cases and rebuilt mistakes of notebook 03's aligned-share exercise, for its checker
(attnkit.exercises.heatmaps): made-up caches of addition problems (other head counts and operand
lengths than the trained adder's, batch 1), attnkit's own number, and the share computed with
one usual mistake each (off by one, mirrored columns, padding rows counted, ...).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from ..adder.data import EOS, PAD, encode_sources, encode_targets
from ..core.hooks import ActivationCache
from ..interp.roles import row_shares
from .checking import Hint, case_generator, case_rng
from .heatmaps_values import _array, _attempt


def _problem_cache(a: np.ndarray, b: np.ndarray, n_digits: int, n_heads: int, seed: int) -> ActivationCache:
    """A cache laid out as Adder.run_with_cache makes it (zero-padded sources; tgt = <s> and the
    answer's digits, then padding), with random but peaked attention patterns."""
    gen = case_generator(seed)
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
    rng = case_rng(15)
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
