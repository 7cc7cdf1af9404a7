"""Issue 27, two more planted mistakes: code that reseeds torch's global random numbers (every later
cell then repeats the same 'random' draws) and a max-pool that writes -inf into the caller's scores.
Both passed every checker before (the wrapper put the random state back silently; max_pool handed
the learner a copy and never looked at it again)."""

from __future__ import annotations

import pytest
import torch

from attnkit.exercises import adder as adder_checks
from attnkit.exercises import heatmaps as heatmap_checks
from attnkit.exercises import positional as positional_checks

from helpers import assert_hint, checker_line


def shift(tgt):
    return tgt[:, :-1], tgt[:, 1:]


def shift_reseeding(tgt):
    torch.manual_seed(0)  # "for reproducibility": restarts the notebook's random numbers
    return shift(tgt)


def shift_own_generator(tgt):
    gen = torch.Generator().manual_seed(0)  # a generator of its own: the global one is left alone
    torch.rand(1, generator=gen)
    return shift(tgt)


def shift_drawing(tgt):
    torch.rand(3)  # drawing advances the global generator: that is allowed
    return shift(tgt)


def entropy_reseeding(w):
    torch.manual_seed(1234)
    return -torch.special.xlogy(w, w).sum(-1) / torch.log(torch.tensor(2.0))


def pool_in_place(score, pad):  # right values, but the caller's scores now hold -inf
    return score.masked_fill_(pad, float("-inf")).amax(dim=1)


def pool_copy(score, pad):
    s = score.clone()
    s[pad] = float("-inf")  # writes, but into its own copy
    return s.amax(dim=1)


@pytest.mark.parametrize(
    "check, fn",
    [(adder_checks.check_shift, shift_reseeding), (heatmap_checks.check_row_entropy, entropy_reseeding)],
    ids=["shift", "row_entropy"],
)
def test_code_that_reseeds_the_global_generator_fails_naming_it(check, fn):
    state = torch.get_rng_state()
    assert_hint(check, fn, "torch.manual_seed")
    assert torch.equal(torch.get_rng_state(), state)  # and the learner's random numbers are put back


@pytest.mark.parametrize("fn", [shift, shift_own_generator, shift_drawing], ids=["plain", "own-generator", "draws"])
def test_code_that_leaves_the_seed_alone_passes(fn):
    passed, line = checker_line(adder_checks.check_shift, fn)
    assert passed, line


def test_a_pool_that_writes_into_the_scores_fails_naming_it():
    assert_hint(positional_checks.check_max_pool, pool_in_place, "changed the score or pad it was given")


def test_a_pool_that_writes_into_its_own_copy_passes():
    passed, line = checker_line(positional_checks.check_max_pool, pool_copy)
    assert passed, line


def greedy(model, src, bos_id, eos_id, max_steps):
    tgt = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    for _ in range(max_steps):
        token = model(src, tgt)[:, -1].argmax(-1, keepdim=True)
        tgt = torch.cat([tgt, token], dim=1)
        if (tgt[:, 1:] == eos_id).any(1).all():
            break
    return tgt[:, 1:]


def greedy_reusing_src(model, src, bos_id, eos_id, max_steps):  # right ids, then src used as scratch
    out = greedy(model, src, bos_id, eos_id, max_steps)
    src.fill_(eos_id)
    return out


def test_a_greedy_decoder_that_writes_into_src_fails_naming_it():
    assert_hint(adder_checks.check_greedy, greedy_reusing_src, "changed src in place")


def test_a_greedy_decoder_that_leaves_src_alone_passes():
    passed, line = checker_line(adder_checks.check_greedy, greedy)
    assert passed, line


# The NaN hint of max_pool ("0 · inf is NaN ... instead of multiplying by a mask") only for code whose
# NaNs are those of multiplying by a mask; other NaNs get a hint from what the code really did.


def pool_mask_times_inf(score, pad):  # the mistake the hint names: 0 * -inf = NaN at every real token
    return (score * ~pad + pad * float("-inf")).amax(dim=1)


def pool_nan_fill(score, pad):  # fills with NaN, which amax passes on: no mask multiplied
    return score.masked_fill(pad, float("nan")).amax(dim=1)


def pool_nan_elsewhere(score, pad):  # right fill, then a NaN of its own for one-token sequences
    top = score.masked_fill(pad, float("-inf")).amax(dim=1)
    return top + (score.std(dim=1) * 0 if score.size(1) == 1 else 0)


def test_the_mask_multiplication_hint_fires_for_its_mistake():
    assert_hint(positional_checks.check_max_pool, pool_mask_times_inf, "instead of multiplying by a mask")


@pytest.mark.parametrize(
    "fn, hint",
    [(pool_nan_fill, "padding was filled with NaN"), (pool_nan_elsewhere, "NaN in your result")],
    ids=["nan-fill", "nan-elsewhere"],
)
def test_other_nans_are_not_blamed_on_a_mask(fn, hint):
    passed, line = checker_line(positional_checks.check_max_pool, fn)
    assert not passed and hint in line and "multiplying by a mask" not in line, line
