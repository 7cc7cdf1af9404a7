"""Planted mistakes of issue 27: for each kind of mistake that broke training yet passed a checker, a
wrong solution that must fail with the hint naming it, and correct variants (different but valid code)
that must pass. Every case also goes through helpers.checker_line: one line, the RNG left alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnkit.exercises import adder as adder_checks
from attnkit.exercises import patching as patching_checks

from helpers import assert_hint, checker_line


def flat_ce(logits, target, **kwargs):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1), **kwargs)


def loss(model, src, tgt, pad_id):
    return flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=pad_id)


# ---------------------------------------------------------------- losses that do not train


def loss_backward_inside(model, src, tgt, pad_id):
    value = loss(model, src, tgt, pad_id)
    value.backward()  # the caller's loop calls it again
    return value


def loss_backward_retained(model, src, tgt, pad_id):
    value = loss(model, src, tgt, pad_id)
    value.backward(retain_graph=True)  # backward works again, but the gradient is counted twice
    return value


def loss_rewrapped(model, src, tgt, pad_id):
    return torch.tensor(loss(model, src, tgt, pad_id).item(), requires_grad=True)


def loss_detached(model, src, tgt, pad_id):
    return loss(model, src, tgt, pad_id).detach().requires_grad_()


def loss_writes_targets(model, src, tgt, pad_id):
    logits = model(src, tgt[:, :-1])
    target = tgt[:, 1:]  # a view of the caller's tgt
    target[target == pad_id] = -100  # F.cross_entropy's default ignore_index: right value
    return flat_ce(logits, target)


def loss_writes_targets_first(model, src, tgt, pad_id):
    tgt[tgt == pad_id] = -100  # the model then reads -100 in the decoder input and fails
    return flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:])


def loss_grad_off(model, src, tgt, pad_id):
    torch.set_grad_enabled(False)  # left off for the rest of the notebook
    logits = model(src, tgt[:, :-1])
    torch.set_grad_enabled(True)
    value = flat_ce(logits, tgt[:, 1:], ignore_index=pad_id)
    torch.set_grad_enabled(False)
    return value


def loss_float64(model, src, tgt, pad_id):
    torch.set_default_dtype(torch.float64)
    return loss(model, src, tgt, pad_id)


def loss_threads(model, src, tgt, pad_id):
    torch.set_num_threads(torch.get_num_threads() + 1)
    return loss(model, src, tgt, pad_id)


WRONG_LOSSES = [
    (loss_backward_inside, "already called backward()"),
    (loss_backward_retained, "already called backward()"),
    (loss_rewrapped, "cut off from the model's graph"),
    (loss_detached, "cut off from the model's graph"),
    (loss_writes_targets, "wrote into the caller's tgt"),
    (loss_writes_targets_first, "wrote into the caller's tgt"),
    (loss_grad_off, "left torch's grad mode changed"),
    (loss_float64, "left torch's default dtype changed"),
    (loss_threads, "left torch's number of threads changed"),
]


def loss_clone_then_write(model, src, tgt, pad_id):
    target = tgt[:, 1:].clone()
    target[target == pad_id] = -100
    return flat_ce(model(src, tgt[:, :-1]), target)


def loss_no_grad_block_for_counting(model, src, tgt, pad_id):
    with torch.no_grad():  # a block that ends: grad mode comes back
        n_real = int((tgt[:, 1:] != pad_id).sum())
    token = F.cross_entropy(model(src, tgt[:, :-1]).transpose(1, 2), tgt[:, 1:], reduction="none")
    return (token * (tgt[:, 1:] != pad_id)).sum() / n_real


def loss_float64_locally(model, src, tgt, pad_id):
    logits = model(src, tgt[:, :-1]).double()  # a dtype for one tensor, not the default
    return flat_ce(logits, tgt[:, 1:], ignore_index=pad_id).float()


CORRECT_LOSSES = [loss, loss_clone_then_write, loss_no_grad_block_for_counting, loss_float64_locally]


@pytest.fixture(autouse=True)
def torch_state_restored():
    """A planted mistake that escapes the checker must not break the tests after it."""
    state = (torch.is_grad_enabled(), torch.get_default_dtype(), torch.get_num_threads())
    yield
    assert (torch.is_grad_enabled(), torch.get_default_dtype(), torch.get_num_threads()) == state, (
        "the checker left torch's global state changed"
    )
    torch.set_grad_enabled(state[0])
    torch.set_default_dtype(state[1])
    torch.set_num_threads(state[2])


@pytest.mark.parametrize("fn, hint", WRONG_LOSSES, ids=[f.__name__ for f, _ in WRONG_LOSSES])
def test_a_loss_that_does_not_train_fails_with_its_hint(fn, hint):
    assert_hint(adder_checks.check_teacher_forcing_loss, fn, hint)


@pytest.mark.parametrize("fn", CORRECT_LOSSES, ids=[f.__name__ for f in CORRECT_LOSSES])
def test_losses_that_train_pass(fn):
    passed, line = checker_line(adder_checks.check_teacher_forcing_loss, fn)
    assert passed, line


# ---------------------------------------------------------------- global state, in any checker


def shift(tgt):
    return tgt[:, :-1], tgt[:, 1:]


def shift_then(change):
    def my_shift(tgt):
        change()
        return shift(tgt)

    return my_shift


@pytest.mark.parametrize(
    "change, hint",
    [
        (lambda: torch.set_grad_enabled(False), "grad mode changed (True -> False)"),
        (lambda: torch.no_grad().__enter__(), "grad mode changed"),
        (lambda: torch.set_default_dtype(torch.float64), "default dtype changed (torch.float32 -> torch.float64)"),
        (lambda: torch.set_num_threads(torch.get_num_threads() + 1), "number of threads changed"),
    ],
    ids=["grad-off", "no_grad-entered", "float64", "threads"],
)
def test_the_shared_wrapper_names_and_restores_a_changed_global_state(change, hint):
    assert_hint(adder_checks.check_shift, shift_then(change), hint)


# ---------------------------------------------------------------- ids: one type rule


@pytest.mark.parametrize(
    "fn, hint",
    [
        (
            lambda tgt: (tgt[:, :-1].float(), tgt[:, 1:].float()),
            "float32 tensor of whole numbers: token ids are integers",
        ),
        (lambda tgt: (tgt[:, :-1].double(), tgt[:, 1:]), "float64 tensor of whole numbers"),
        (lambda tgt: (np.asarray(tgt[:, :-1]), np.asarray(tgt[:, 1:])), "is a ndarray, expected a torch tensor"),
        (lambda tgt: (tgt[:, :-1].tolist(), tgt[:, 1:].tolist()), "is a list, expected a torch tensor"),
    ],
    ids=["float32", "float64", "numpy", "list"],
)
def test_ids_are_long_tensors(fn, hint):
    assert_hint(adder_checks.check_shift, fn, hint)


@pytest.mark.parametrize(
    "fn",
    [
        shift,
        lambda tgt: (tgt[:, :-1].to(torch.int32), tgt[:, 1:].to(torch.int32)),  # integers of another width
        lambda tgt: (tgt.narrow(1, 0, tgt.size(1) - 1).contiguous(), tgt[:, 1:].clone()),
    ],
    ids=["slices", "int32", "narrow-contiguous"],
)
def test_integer_id_tensors_pass(fn):
    passed, line = checker_line(adder_checks.check_shift, fn)
    assert passed, line


# ---------------------------------------------------------------- hooks leave the activation alone


def hook_in_place_return(clean_z, head, pos):
    def hook(z, hook):
        z[:, head, pos] = clean_z[:, head, pos]
        return z

    return hook


def hook_in_place_none(clean_z, head, pos):
    def hook(z, hook):
        z[:, head, pos] = clean_z[0, head, pos]

    return hook


def hook_copy_(clean_z, head, pos):
    def hook(z, hook):
        z[:, head, pos].copy_(clean_z[0, head, pos].expand_as(z[:, head, pos]))
        return z.clone()

    return hook


def hook_clone(clean_z, head, pos):
    def hook(z, hook):
        z = z.clone()
        z[:, head, pos] = clean_z[:, head, pos]
        return z

    return hook


def hook_where(clean_z, head, pos):
    def hook(z, hook):
        mask = torch.zeros(z.shape[1:3], dtype=torch.bool)
        mask[head, pos] = True
        return torch.where(mask[None, :, :, None], clean_z.expand_as(z), z)

    return hook


def hook_cat(clean_z, head, pos):
    def hook(z, hook):
        rows = [z[:, :, :pos], clean_z[:, :, pos : pos + 1].expand(z.size(0), -1, -1, -1), z[:, :, pos + 1 :]]
        patched = torch.cat(rows, dim=2)  # every head at pos from clean_z ...
        keep = torch.arange(z.size(1)) != head  # ... then the other heads back from z
        patched[:, keep, pos] = z[:, keep, pos]
        return patched

    return hook


@pytest.mark.parametrize(
    "make_hook",
    [hook_in_place_return, hook_in_place_none, hook_copy_],
    ids=["in-place-return", "in-place-none", "copy_"],
)
def test_a_hook_that_writes_into_its_activation_fails(make_hook):
    assert_hint(patching_checks.check_patch_hook, make_hook, "your hook wrote into the z it was handed")


@pytest.mark.parametrize("make_hook", [hook_clone, hook_where, hook_cat], ids=["clone", "where", "cat"])
def test_hooks_that_leave_z_alone_pass(make_hook):
    passed, line = checker_line(patching_checks.check_patch_hook, make_hook)
    assert passed, line


# ---------------------------------------------------------------- hints confirmed by the code's behaviour

from attnkit.exercises import heatmaps as heatmap_checks  # noqa: E402
from attnkit.interp.patching import carry_pair  # noqa: E402


def entropy_naive(w):  # the mistake the xlogy hint names: 0 * log2(0) = NaN
    return -(w * w.log2()).sum(-1)


def entropy_xlogy_then_divided(w):  # uses xlogy; its inf comes from dividing by "no zero weight"
    return -torch.special.xlogy(w, w).sum(-1) / np.log(2) / (w > 0).all(-1)


def entropy_xlogy(w):
    return -torch.special.xlogy(w, w).sum(-1) / np.log(2)


def entropy_where(w):
    return -torch.where(w > 0, w * w.clamp_min(1e-30).log2(), torch.zeros_like(w)).sum(-1)


def test_the_xlogy_hint_fires_for_its_mistake():
    assert_hint(heatmap_checks.check_row_entropy, entropy_naive, "use torch.special.xlogy")


def test_code_that_already_uses_xlogy_is_not_told_to_use_it():
    passed, line = checker_line(heatmap_checks.check_row_entropy, entropy_xlogy_then_divided)
    assert not passed and "xlogy" not in line and "you return nan, expected -0 bits" in line, line


@pytest.mark.parametrize("fn", [entropy_xlogy, entropy_where], ids=["xlogy", "where"])
def test_correct_entropies_pass(fn):
    passed, line = checker_line(heatmap_checks.check_row_entropy, fn)
    assert passed, line


def pair_gt_10(a, b):  # the mistake the hint names: > 10 instead of >= 10
    return None if a % 10 + b % 10 <= 10 else carry_pair(a, b, 0)


def pair_gt_11(a, b):  # another threshold: "> 10 instead of >= 10" would mislead
    return None if a % 10 + b % 10 <= 11 else carry_pair(a, b, 0)


def test_the_threshold_hint_fires_for_its_mistake():
    assert_hint(patching_checks.check_carry_pair, pair_gt_10, "test a % 10 + b % 10 >= 10, not > 10")


def test_the_threshold_hint_is_not_given_to_other_code():
    passed, line = checker_line(patching_checks.check_carry_pair, pair_gt_11)
    assert not passed and "not > 10" not in line and "expected ('125+135', " in line, line


# ---------------------------------------------------------------- one type rule: lists refused everywhere

from attnkit.exercises import positional as positional_checks  # noqa: E402


@pytest.mark.parametrize(
    "check, fn",
    [
        (adder_checks.check_shift, lambda tgt: (tgt[:, :-1].tolist(), tgt[:, 1:])),
        (heatmap_checks.check_row_entropy, lambda w: entropy_xlogy(w).tolist()),
        (positional_checks.check_sinusoidal_table, lambda n, d: [[0.0] * d for _ in range(n)]),
    ],
    ids=["shift", "row_entropy", "sinusoidal_table"],
)
def test_lists_are_refused_with_one_message(check, fn):
    assert_hint(check, fn, "is a list, expected a torch tensor — build it with torch operations")


# ---------------------------------------------------------------- notebook 04's ablation hook, the same rule

from attnkit.exercises import ablation as ablation_checks  # noqa: E402


def ablate_in_place_return(head, fill=None):
    def hook(z, hook):
        z[:, head] = 0.0 if fill is None else fill[head]
        return z

    return hook


def ablate_clone(head, fill=None):
    def hook(z, hook):
        z = z.clone()
        z[:, head] = 0.0 if fill is None else fill[head]
        return z

    return hook


def ablate_mask(head, fill=None):
    def hook(z, hook):
        keep = (torch.arange(z.size(1)) != head).to(z.dtype)[None, :, None, None]
        replacement = torch.zeros_like(z) if fill is None else fill[None, :, None, :].expand_as(z)
        return z * keep + replacement * (1 - keep)

    return hook


def test_an_ablation_hook_that_writes_into_z_fails():
    assert_hint(ablation_checks.check_ablation_hook, ablate_in_place_return, "your hook wrote into the z it was handed")


@pytest.mark.parametrize("make_hook", [ablate_clone, ablate_mask], ids=["clone", "mask"])
def test_ablation_hooks_that_leave_z_alone_pass(make_hook):
    passed, line = checker_line(ablation_checks.check_ablation_hook, make_hook)
    assert passed, line


# ---------------------------------------------------------------- inputs the notebook never uses


def pool_fill_minus_1e9(score, pad):  # right on the notebook's scores, wrong below -1e9
    return score.masked_fill(pad, -1e9).amax(dim=1)


def pool_real_columns_only(score, pad):  # drops the columns that are padding in every row, then pools
    keep = ~pad.all(0)
    return score[:, keep].masked_fill(pad[:, keep], float("-inf")).amax(dim=1)


def pool_sorted(score, pad):  # ties: the sort's order among equal maxima does not matter
    return score.masked_fill(pad, float("-inf")).sort(dim=1, descending=True).values[:, 0]


def test_a_finite_padding_fill_fails_on_extreme_scores():
    assert_hint(
        positional_checks.check_max_pool, pool_fill_minus_1e9, "filled with a finite number that beats scores this low"
    )


@pytest.mark.parametrize("fn", [pool_real_columns_only, pool_sorted], ids=["real-columns", "sorted-ties"])
def test_pools_correct_on_all_padding_columns_and_ties_pass(fn):
    passed, line = checker_line(positional_checks.check_max_pool, fn)
    assert passed, line
