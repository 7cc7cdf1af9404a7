"""The cases and rebuilt mistakes of notebook 05's two exercises about -inf fills, for their checkers
(attnkit.exercises.positional): the directional ALiBi bias (symmetric ALiBi, left and right swapped,
slopes per head or tiled, the sign, the off-by-one, the diagonal) and the max-pool readout over real
tokens (padding counted, filled with 0, mean or sum pooling, an argmax).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from torch import Tensor

from ..core import positional
from .checking import call, case_generator
from .positional_values import _close, _join

# ---------------------------------------------------------------- 4. the directional ALiBi bias


def _pair_slopes(n_heads: int) -> Tensor:
    return positional.alibi_slopes((n_heads + 1) // 2).double().repeat_interleave(2)[:n_heads]


def _slope_variants(H: int) -> dict[str, tuple[Tensor, str]]:
    pairs = (H + 1) // 2
    variants = {
        "right": (_pair_slopes(H), ""),
        "per head": (
            positional.alibi_slopes(H).double(),
            "each head got its own slope (alibi_slopes(n_heads)): a left head and the right head after "
            "it share one — alibi_slopes(n_pairs) with n_pairs = (n_heads + 1) // 2, each repeated "
            "twice (repeat_interleave(2)[:n_heads])",
        ),
        "tiled": (
            positional.alibi_slopes(pairs).double().repeat(2)[:H],
            "slopes tiled (a, b, a, b) instead of paired (a, a, b, b): use repeat_interleave(2), so that "
            "heads 2h and 2h+1 share slope h",
        ),
        "reversed": (
            _pair_slopes(H).flip(0),
            "slopes in reverse order: the steepest, 2^(-8/n_pairs), goes to the first pair and 2^-8 to the last",
        ),
        "n = heads": (
            (2.0 ** (-8.0 * torch.arange(1, pairs + 1, dtype=torch.float64) / H)).repeat_interleave(2)[:H],
            "slopes computed with n = n_heads in 2^(-8h/n): the formula runs over the pairs, "
            "n = n_pairs = (n_heads + 1) // 2, so that the last pair gets 2^-8",
        ),
        "pairs + 1": (
            positional.alibi_slopes(H // 2 + 1).double().repeat_interleave(2)[:H],
            "one pair too many for an even head count: n_pairs = (n_heads + 1) // 2, "
            "which is n_heads / 2 when n_heads is even",
        ),
        "single": (
            torch.full((H,), 2.0**-8, dtype=torch.float64),
            "every head has the same slope: the pairs get 2^(-8/n), 2^(-16/n), …, 2^-8 with n the number of pairs",
        ),
    }
    return variants


def _alibi_value(n: int, slopes: Tensor, sign: int = 1, minus_one: bool = True) -> Tensor:
    """(heads, q, k) values at every entry: -sign·slope·(|j - i| - 1 if minus_one else |j - i|)."""
    distance = (torch.arange(n)[None, :] - torch.arange(n)[:, None]).abs().double()
    return -sign * slopes[:, None, None] * (distance - 1 if minus_one else distance)


def _alibi_blocked(n: int, H: int, left_even: bool = True) -> Tensor:
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    right_keys, left_keys = offset > 0, offset < 0
    even, odd = (right_keys, left_keys) if left_even else (left_keys, right_keys)
    return torch.stack([even if h % 2 == 0 else odd for h in range(H)])


def _alibi_mistakes(got: Tensor, n: int, H: int) -> str:
    """Name what is wrong, in order: blocked keys, the diagonal, then the values of allowed keys."""
    blocked, ref_blocked = got < -1e4, _alibi_blocked(n, H)
    diag = torch.eye(n, dtype=torch.bool).expand(H, n, n)
    if n > 1 and not blocked.any():
        off = ~diag
        if any(
            _close(got[off], _alibi_value(n, s, 1, one)[off])
            for (s, _), one in itertools.product(_slope_variants(H).values(), (False, True))
        ):
            return (
                "symmetric ALiBi (-slope·|j - i| on both sides) cannot tell left from right: attnkit's is "
                "directional — heads 0, 2, … see only keys j < i, heads 1, 3, … only keys j > i; give the "
                "other side -inf"
            )
        return (
            "no key is blocked: heads 0, 2, … see only keys to the left (j < i) and heads 1, 3, … only keys "
            "to the right (j > i); give the other side -inf"
        )
    if not torch.equal(blocked, ref_blocked):
        if torch.equal(blocked, ref_blocked | diag):
            return (
                "the token itself is blocked: give the diagonal -30 instead of -inf — a last resort, so that "
                "the first token of a left head (it has no left) still attends somewhere; with -inf its row "
                "is all -inf and the softmax gives NaN"
            )
        if torch.equal(blocked & ~diag, _alibi_blocked(n, H, left_even=False)):
            return (
                "left and right swapped: heads 0, 2, … look left — block the keys j > i (to the right of "
                "query i) — and heads 1, 3, … look right, blocking j < i"
            )
        if H > 1 and all(torch.equal(blocked[h] & ~diag[0], ref_blocked[0]) for h in range(H)):
            return "every head looks left: the odd heads (1, 3, …) look right — block their keys j < i instead"
        if H > 1 and all(torch.equal(blocked[h] & ~diag[0], ref_blocked[1]) for h in range(H)):
            return "every head looks right: the even heads (0, 2, …) look left — block their keys j > i instead"
        h, i, j = (blocked != ref_blocked).nonzero()[0].tolist()
        side = "left (keys j < i)" if h % 2 == 0 else "right (keys j > i)"
        return (
            f"head {h}, query {i}, key {j} should be {'blocked (-inf)' if ref_blocked[h, i, j] else 'allowed'}: "
            f"head {h} looks {side} only, and the token itself gets -30"
        )
    values = got[diag]
    if not _close(values, torch.full_like(values, -30.0)):
        if _close(values, torch.zeros_like(values)):
            return (
                "the token itself gets bias 0, as much as its nearest neighbour: give the diagonal -30, a last "
                "resort used only when a token has nothing on its side (the first token of a left head)"
            )
        if _close(values, _alibi_value(n, _pair_slopes(H))[diag]):
            return (
                "the diagonal follows the formula (-slope·(0 - 1) = +slope): overwrite it with -30 "
                "(masked_fill(j == i, -30.0))"
            )
        return "the diagonal (each token itself) should be -30 in every head"
    allowed = ~ref_blocked & ~diag
    if not allowed.any():
        return ""
    for (_name, (slopes, slope_hint)), sign, minus_one in itertools.product(
        _slope_variants(H).items(), (1, -1), (True, False)
    ):
        if _close(got[allowed], _alibi_value(n, slopes, sign, minus_one)[allowed]):
            sign_hint = (
                ("sign flipped: the bias falls with distance, -slope·(|j - i| - 1), so farther keys get less weight")
                if sign < 0
                else ""
            )
            one_hint = (
                (
                    "off by one: the nearest allowed key (|j - i| = 1) gets 0, so the bias is "
                    "-slope·(|j - i| - 1), not -slope·|j - i|"
                )
                if not minus_one
                else ""
            )
            mistakes = [h for h in (slope_hint, sign_hint, one_hint) if h]
            if mistakes:
                return _join(mistakes)
    ref = _alibi_value(n, _pair_slopes(H))
    h, i, j = (~torch.isclose(got, ref, atol=1e-5) & allowed).nonzero()[0].tolist()
    return (
        f"head {h}, query {i}, key {j}: your bias is {got[h, i, j].item():.4g}, expected "
        f"{ref[h, i, j].item():.4g} = -slope·(|j - i| - 1) with head {h}'s slope "
        f"{_pair_slopes(H)[h].item():.4g} (pair {h // 2} of alibi_slopes((n_heads + 1) // 2))"
    )


def _runs(fn: Callable, *args) -> bool:
    """Does the learner's code return without raising on these arguments? (A probe for a hint.)"""
    try:
        call(fn, *args)
    except Exception:
        return False
    return True


# ---------------------------------------------------------------- 5. the max-pool readout


def _pool_cases() -> list[tuple[Tensor, Tensor]]:
    gen = case_generator(11)
    # Real scores below 0 in most rows (so a padding left at 0 would win); padding scores large,
    # so that a max that forgets the padding shows.
    score = -1 - torch.rand(3, 5, generator=gen)
    score[0, 2] = 0.5  # one violation in the first row
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] + [True] * 4])
    score = score.masked_fill(pad, 5.0)
    single = (torch.tensor([[-0.25]], dtype=torch.float64), torch.tensor([[False]]))  # float64 in, float64 out
    wide = torch.randn(2, 7, generator=gen)
    wide_pad = torch.zeros(2, 7, dtype=torch.bool)
    wide_pad[1, 4:] = True
    # Extreme values, ties and columns that are padding in every row: real scores of -1e12 (a padding
    # fill of -1e9 would beat them), two equal maxima in row 1, the last two columns all padding.
    extreme = torch.tensor([[-3e12, -1e12, 7.0, 9.0], [-5e12, -2e12, -2e12, 9.0]])
    extreme_pad = torch.tensor([[False, False, True, True], [False, False, False, True]])
    return [(score, pad), single, (wide, wide_pad), (extreme, extreme_pad)]


def _pool_candidates(score: Tensor, pad: Tensor, ref: Tensor) -> list[tuple[Tensor, str]]:
    """The usual wrong readouts of `score` with padding `pad` (ref: the right one), each with its hint."""
    s, real = score.double(), ~pad
    return [
        (
            s.masked_fill(real, float("-inf")).amax(1),
            "pad is True at padding, so fill the scores where pad is True — masked_fill(pad, float('-inf')), "
            "not masked_fill(~pad, ...)",
        ),
        (
            -ref,
            "sign flipped: return the max itself (the kit's model returns its negative as the 'sorted' logit; "
            "here the readout is the 'unsorted' score)",
        ),
        (
            s.amax(1),
            "padding counted: its scores can be anything, so fill them with -inf before the max — "
            "score.masked_fill(pad, float('-inf')).amax(dim=1)",
        ),
        (
            (s * real).amax(1),
            "padding became 0, which beats a row whose real scores are all negative: fill "
            "the padding with -inf instead of multiplying by the mask",
        ),
        (
            (s * real).sum(1) / real.sum(1),
            "that is mean pooling over the real tokens: one violation counts 1/L — take the max over the real tokens",
        ),
        (s.mean(1), "that is mean pooling (with the padding counted too): take the max over the real tokens"),
        ((s * real).sum(1), "that is a sum over the tokens: take the max over the real tokens"),
        (s.sum(1), "that is a sum over the tokens: take the max over the real tokens"),
        (
            s.masked_fill(pad, float("-inf")).argmax(1).double(),
            "those are the positions of the maxima (argmax): return the maximum scores themselves",
        ),
    ]
