"""Issue 27, the rest: inputs the notebooks never use (ties in greedy decoding, all-padding columns,
float64 inputs), the type rule for what a model computes with (a torch tensor of the dtype the task
states: numpy arrays and float64 results refused where the model would break on them), and hints
that name a mistake only when the code has it on every batch it gets wrong. For each, wrong
solutions that passed before (or got a hint naming a mistake they do not have) and correct
variants, written differently, that must pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnkit.core import positional
from attnkit.exercises import ablation as ablation_checks
from attnkit.exercises import adder as adder_checks
from attnkit.exercises import heatmaps as heatmap_checks
from attnkit.exercises import positional as positional_checks

from helpers import assert_hint, assert_passes, checker_line

# ---------------------------------------------------------------- greedy decoding: ties


def greedy_with(pick):
    """A correct greedy loop whose token choice is `pick(last_logits) -> (batch,) ids`."""

    def my_greedy(model, src, bos_id, eos_id, max_steps):
        fed = torch.full((src.size(0), 1), bos_id)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for _ in range(max_steps):
            token = pick(model(src, fed)[:, -1])
            fed = torch.cat([fed, token[:, None].long()], dim=1)
            done |= token == eos_id
            if done.all():
                break
        return fed[:, 1:]

    return my_greedy


GREEDY_TIES_WRONG = {
    "topk": lambda logits: logits.topk(1, dim=-1).indices[:, 0],  # on CPU a tie goes to a later id
    "highest id": lambda logits: logits.size(-1) - 1 - logits.flip(-1).argmax(-1),
}

GREEDY_TIES_RIGHT = {
    "argmax": lambda logits: logits.argmax(-1),
    "max indices": lambda logits: logits.max(dim=-1).indices,
    "softmax then argmax": lambda logits: logits.softmax(-1).argmax(-1),
    "numpy argmax": lambda logits: torch.from_numpy(logits.detach().numpy().argmax(-1)),
    "stable sort": lambda logits: logits.sort(dim=-1, descending=True, stable=True).indices[:, 0],
    "int32 ids": lambda logits: logits.argmax(-1).int(),
}


@pytest.mark.parametrize("name", GREEDY_TIES_WRONG)
def test_greedy_that_breaks_ties_towards_another_id_fails_naming_the_tie(name):
    assert_hint(adder_checks.check_greedy, greedy_with(GREEDY_TIES_WRONG[name]), "a tie goes to the lowest id")


@pytest.mark.parametrize("name", GREEDY_TIES_RIGHT)
def test_greedy_that_breaks_ties_like_argmax_passes(name):
    assert_passes(adder_checks.check_greedy, greedy_with(GREEDY_TIES_RIGHT[name]))


# ---------------------------------------------------------------- hints confirmed on every batch


def exact(p, g, pad):
    return ((p == g) | (g == pad)).all(1).float().mean()


def token(p, g, pad):
    return ((p == g) & (g != pad)).sum() / (g != pad).sum()


def test_a_token_accuracy_of_zero_is_not_blamed_on_integer_division():
    """0 is what `//` gives on the first batch, but this code returns 0 on every batch, also where
    `//` gives 1: the hint says what differs instead of naming a mistake the code does not have."""
    passed, line = checker_line(adder_checks.check_accuracies, lambda p, g, pad: (exact(p, g, pad), torch.tensor(0.0)))
    assert not passed and "integer division" not in line, line
    assert "your token_accuracy is 0, expected 0.8333" in line, line


def test_integer_division_is_still_named_when_the_code_does_it():
    fn = lambda p, g, pad: (exact(p, g, pad), ((p == g) & (g != pad)).sum() // (g != pad).sum())  # noqa: E731
    assert_hint(adder_checks.check_accuracies, fn, "integer division")


def test_a_hard_coded_pad_is_named_though_it_is_right_on_the_notebooks_batch():
    """Right where pad_id is 13, padding counted elsewhere: confirmed on every batch it gets wrong."""
    assert_hint(
        adder_checks.check_accuracies, lambda p, g, pad: (exact(p, g, 13), token(p, g, 13)), "the notebook's 13"
    )


def test_all_padding_columns_count_for_nothing():
    """Padding columns with junk in pred (a batch decoded to max_steps), a row with nothing right."""
    pred, gold, pad = adder_checks._accuracy_cases()[-1]
    assert (gold[:, -3:] == pad).all() and (pred[:, -3:] != pad).all()
    assert (float(exact(pred, gold, pad)), float(token(pred, gold, pad))) == (pytest.approx(2 / 3), 0.75)
    assert_passes(adder_checks.check_accuracies, lambda p, g, pad: (exact(p, g, pad).item(), token(p, g, pad).item()))


def flat_ce(logits, target, **kwargs):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1), **kwargs)


def loss_summed_on_one_batch(model, src, tgt, pad_id):
    """Summed on the batch of 3, twice the mean elsewhere: no one mistake explains it."""
    if len(tgt) == 3:
        return flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=pad_id, reduction="sum")
    return 2 * flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=pad_id)


def loss_summed(model, src, tgt, pad_id):
    return flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=pad_id, reduction="sum")


def loss_pad_13(model, src, tgt, pad_id):  # right on the notebook's batch only
    return flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=13)


def test_a_loss_that_fits_a_mistake_on_one_batch_only_is_told_what_differs():
    passed, line = checker_line(adder_checks.check_teacher_forcing_loss, loss_summed_on_one_batch)
    assert not passed and "you summed" not in line and "expected" in line, line


@pytest.mark.parametrize(
    "fn, hint", [(loss_summed, "you summed the token losses"), (loss_pad_13, "padding counted in the loss")]
)
def test_a_loss_mistake_made_on_every_batch_is_named(fn, hint):
    assert_hint(adder_checks.check_teacher_forcing_loss, fn, hint)


# ---------------------------------------------------------------- tensors of the task's dtype (notebook 05)


def rope(x):
    d = x.shape[-1]
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    angles = torch.arange(x.shape[-2], dtype=x.dtype)[:, None] * omega
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * angles.cos() - x2 * angles.sin(), x1 * angles.sin() + x2 * angles.cos()], -1).flatten(-2)


def rope_float64_angles(x):  # angles in float64 (np.arange, or dtype=torch.float64): a float32 x comes back float64
    d = x.shape[-1]
    angles = torch.from_numpy(np.arange(x.shape[-2])[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d))
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * angles.cos() - x2 * angles.sin(), x1 * angles.sin() + x2 * angles.cos()], -1).flatten(-2)


def rope_always_float32(x):
    return rope(x.float())


ROTATE_WRONG = [
    (lambda x: rope(x).numpy(), "is a numpy array"),
    (rope_float64_angles, "is torch.float64, expected torch.float32"),
    (rope_always_float32, "is torch.float32, expected torch.float64"),
]
ROTATE_RIGHT = [rope, lambda x: rope(x.double()).to(x.dtype), lambda x: rope_float64_angles(x).to(x.dtype)]


@pytest.mark.parametrize("fn, hint", ROTATE_WRONG)
def test_rotate_must_return_a_tensor_of_xs_dtype(fn, hint):
    assert_hint(positional_checks.check_rotate, fn, hint)


@pytest.mark.parametrize("fn", ROTATE_RIGHT)
def test_rotate_variants_that_keep_xs_dtype_pass(fn):
    assert_passes(positional_checks.check_rotate, fn)


def alibi(n_pos, n_heads, dtype=None):
    offset = (torch.arange(n_pos)[None, :] - torch.arange(n_pos)[:, None]).to(dtype or torch.float32)
    slopes = positional.alibi_slopes((n_heads + 1) // 2).repeat_interleave(2)[:n_heads].to(offset.dtype)
    bias = -slopes[:, None, None] * (offset.abs() - 1)
    left = (torch.arange(n_heads) % 2 == 0)[:, None, None]
    blocked = torch.where(left, offset > 0, offset < 0)
    bias = bias.masked_fill(blocked, float("-inf"))
    return bias.masked_fill(torch.eye(n_pos, dtype=torch.bool), -30.0)


ALIBI_WRONG = [
    (lambda n, h: alibi(n, h).numpy(), "is a numpy array"),
    (lambda n, h: alibi(n, h, torch.float64), "is torch.float64, expected torch.float32"),
    (lambda n, h: alibi(n, h).tolist(), "is a list, expected a torch tensor"),
]


@pytest.mark.parametrize("fn, hint", ALIBI_WRONG)
def test_alibi_must_return_a_float32_tensor(fn, hint):
    assert_hint(positional_checks.check_alibi_bias, fn, hint)


@pytest.mark.parametrize("fn", [alibi, lambda n, h: alibi(n, h, torch.float64).float()])
def test_alibi_float32_variants_pass(fn):
    assert_passes(positional_checks.check_alibi_bias, fn)


def pool(score, pad):
    return score.masked_fill(pad, float("-inf")).amax(dim=1)


MAX_POOL_WRONG = [
    (lambda s, p: pool(s, p).numpy(), "is a numpy array"),
    (lambda s, p: torch.tensor([row[~m].max().item() for row, m in zip(s, p)]), "expected torch.float64"),
    (lambda s, p: pool(s, p).double(), "is torch.float64, expected torch.float32"),
]


@pytest.mark.parametrize("fn, hint", MAX_POOL_WRONG)
def test_max_pool_must_return_a_tensor_of_scores_dtype(fn, hint):
    assert_hint(positional_checks.check_max_pool, fn, hint)


@pytest.mark.parametrize(
    "fn",
    [pool, lambda s, p: torch.stack([row[~m].max() for row, m in zip(s, p)]), lambda s, p: pool(s.double(), p).to(s)],
)
def test_max_pool_variants_in_scores_dtype_pass(fn):
    assert_passes(positional_checks.check_max_pool, fn)


# The checkers' own references keep the dtype they ask for (else no learner could pass).
def test_the_kits_references_keep_the_dtypes_the_checkers_ask_for():
    assert positional.rotate(torch.randn(2, 3, 4, dtype=torch.float64)).dtype == torch.float64
    assert positional.rotate(torch.randn(2, 3, 4)).dtype == torch.float32
    assert positional.alibi_bias(5, 3).dtype == torch.get_default_dtype()


# ---------------------------------------------------------------- notebook 04: tensors, and a problem of padding only


def mean_z(z, real):
    return z.transpose(1, 2)[real].mean(0)


def mean_z_einsum(z, real):
    return torch.einsum("bhpd,bp->hd", z, real.to(z.dtype)) / real.sum()


def mean_z_per_problem_kept_finite(z, real):  # each problem's mean, empty problems dropped: still per problem
    sums, counts = (z * real[:, None, :, None]).sum(2), real.sum(1)
    kept = counts > 0
    return (sums[kept] / counts[kept, None, None]).mean(0)


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda z, real: mean_z(z, real).numpy(), "is a numpy array, expected a torch tensor"),
        (mean_z_per_problem_kept_finite, "you averaged each problem's mean"),
        # NaN for another reason than an empty problem: the hint says what differs, not "divide by real.sum()"
        (lambda z, real: mean_z(z, real) * torch.where(real.all(), 1.0, float("nan")), "where every head's mean is"),
    ],
)
def test_mean_z_must_be_a_tensor_and_right_with_an_empty_problem(fn, hint):
    assert_hint(ablation_checks.check_mean_z, fn, hint)


@pytest.mark.parametrize("fn", [mean_z, mean_z_einsum, lambda z, real: torch.from_numpy(mean_z(z, real).numpy())])
def test_mean_z_tensor_variants_pass(fn):
    assert_passes(ablation_checks.check_mean_z, fn)


def test_head_importance_must_be_a_tensor():
    from test_exercises_ablation import importance_per_problem

    assert_passes(ablation_checks.check_head_importance, importance_per_problem)
    assert_hint(
        ablation_checks.check_head_importance,
        lambda *a: importance_per_problem(*a).numpy(),
        "is a numpy array, expected a torch",
    )


# ---------------------------------------------------------------- notebook 03: an index is an int; hints confirmed


def typical(values, means):
    defined = ~np.isnan(means)
    distance = np.abs(values[:, defined] - means[defined]).mean(axis=1)
    return np.argmin(np.where(np.isnan(distance), np.inf, distance))


@pytest.mark.parametrize(
    "fn",
    [typical, lambda v, m: int(typical(v, m)), lambda v, m: torch.tensor(typical(v, m))],
    ids=["numpy integer", "int", "0-d long tensor"],
)
def test_typical_sample_integer_indices_pass(fn):
    assert_passes(heatmap_checks.check_typical_sample, fn)


@pytest.mark.parametrize(
    "fn",
    [
        lambda v, m: float(typical(v, m)),
        lambda v, m: np.float64(typical(v, m)),
        lambda v, m: torch.tensor(1.0) * typical(v, m),
    ],
    ids=["float", "numpy float", "float tensor"],
)
def test_typical_sample_float_index_is_refused(fn):
    assert_hint(heatmap_checks.check_typical_sample, fn, "return the index as an int")


def test_typical_sample_constant_pick_is_not_blamed_on_a_mistake_it_does_not_make():
    passed, line = checker_line(heatmap_checks.check_typical_sample, lambda v, m: 0)
    assert not passed and "you picked sample 0" in line and "but sample" in line, line


def test_typical_sample_argmax_is_still_named():
    def farthest(values, means):
        defined = ~np.isnan(means)
        distance = np.abs(values[:, defined] - means[defined]).mean(axis=1)
        return int(np.argmax(np.where(np.isnan(distance), -np.inf, distance)))

    assert_hint(heatmap_checks.check_typical_sample, farthest, "*farthest*")


def aligned_first_problem_on_40_only(cache, head):
    """The first problem only on the 40-problem cache, 0.9 × the right share elsewhere: no single mistake."""
    if len(cache["tgt"]) == 40:
        return heatmap_checks._aligned_variant(cache, head, first_only=True)
    return 0.9 * heatmap_checks._aligned_variant(cache, head)


def test_aligned_share_hint_needs_the_mistake_on_every_case():
    passed, line = checker_line(heatmap_checks.check_aligned_share, aligned_first_problem_on_40_only)
    assert not passed and "first problem only" not in line and "expected" in line, line
    assert_hint(
        heatmap_checks.check_aligned_share,
        lambda c, h: heatmap_checks._aligned_variant(c, h, first_only=True),
        "first problem only",
    )
    assert_passes(heatmap_checks.check_aligned_share, lambda c, h: heatmap_checks._aligned_variant(c, h))


def ablation_hook(head, fill=None):
    def hook(z, hook):
        z = z.clone()
        z[:, head] = 0.0 if fill is None else fill[head]
        return z

    return hook


def ablation_hook_float64(head, fill=None):  # the values are right, the dtype is not
    def hook(z, hook):
        z = z.double().clone()
        z[:, head] = 0.0 if fill is None else fill[head].double()
        return z

    return hook


def ablation_hook_where(head, fill=None):  # a different valid way: a mask, in z's dtype
    def hook(z, hook):
        value = z.new_zeros(z.shape[-1]) if fill is None else fill[head].to(z.dtype)
        mask = (torch.arange(z.size(1)) == head)[None, :, None, None]
        return torch.where(mask, value, z)

    return hook


def test_ablation_hook_must_keep_zs_dtype():
    assert_hint(ablation_checks.check_ablation_hook, ablation_hook_float64, "keep z's dtype")
    assert_passes(ablation_checks.check_ablation_hook, ablation_hook)
    assert_passes(ablation_checks.check_ablation_hook, ablation_hook_where)


def prune(heads, accuracy, better=lambda a, b: a > b):
    removed, remaining, curve = [], list(heads), [accuracy([])]
    while remaining:
        best = remaining[0]
        for h in remaining[1:]:
            if better(accuracy(removed + [h]), accuracy(removed + [best])):
                best = h
        removed.append(best)
        remaining.remove(best)
        curve.append(accuracy(removed))
    return removed, curve


def test_prune_order_ties_go_to_the_first_of_equals():
    assert_hint(ablation_checks.check_prune_order, lambda h, a: prune(h, a, lambda x, y: x >= y), "first of equals")
    assert_hint(
        ablation_checks.check_prune_order,
        lambda h, a: prune(h[::-1], a),  # the candidates taken in reverse order: a tie keeps the last
        "first of equals",
    )
    assert_passes(ablation_checks.check_prune_order, prune)
    assert_passes(
        ablation_checks.check_prune_order,  # max() keeps the first of equals
        lambda heads, acc: (lambda order: (order, [acc(order[:k]) for k in range(len(order) + 1)]))(
            _max_order(heads, acc)
        ),
    )


def _max_order(heads, accuracy):
    removed, remaining = [], list(heads)
    while remaining:
        best = max(remaining, key=lambda h: accuracy(removed + [h]))
        removed.append(best)
        remaining.remove(best)
    return removed


# ---------------------------------------------------------------- symptom hints backed by a probe


def test_alibi_nan_away_from_a_mask_is_located_not_blamed_on_0_times_inf():
    def nan_on_the_diagonal(n, h):
        bias = alibi(n, h)
        return bias.masked_fill(torch.eye(n, dtype=torch.bool), float("nan"))  # e.g. a log of a negative number

    passed, line = checker_line(positional_checks.check_alibi_bias, nan_on_the_diagonal)
    assert not passed and "0 · inf" not in line and "at [h=0, i=0, j=0], where the bias is -30" in line, line

    def times_mask(n, h):  # the mistake the hint names: NaN on every allowed key
        allowed = ~alibi(n, h).isinf()
        return alibi(n, h).masked_fill(~allowed, 0.0) * allowed + (~allowed) * float("-inf")

    assert_hint(positional_checks.check_alibi_bias, times_mask, "0 · inf is NaN")


def test_alibi_odd_head_advice_only_when_an_even_count_runs():
    def pairs_from_half(n, h):  # h // 2 slopes: fails for an odd head count only
        slopes = positional.alibi_slopes(h // 2).repeat_interleave(2)
        return alibi(n, h) + 0 * slopes[:, None, None]

    assert_hint(positional_checks.check_alibi_bias, pairs_from_half, "the last head is a left head without a partner")

    def fails_on_even_lengths(n, h):
        if n % 2 == 0:
            raise ValueError("n_pos must be odd")
        return alibi(n, h)

    passed, line = checker_line(positional_checks.check_alibi_bias, fails_on_even_lengths)
    assert not passed and "n_pos must be odd" in line and "without a partner" not in line, line


def test_greedy_writing_one_token_throughout_is_told_what_the_model_gives():
    def constant(model, src, bos_id, eos_id, max_steps):
        model(src, torch.full((len(src), 1), bos_id))
        return torch.full((len(src), max_steps), 3)

    passed, line = checker_line(adder_checks.check_greedy, constant)
    assert not passed and "you wrote 3 at every step, but" in line, line


# ---------------------------------------------------------------- importance leaves the model and batches alone


def importance(model, name, batches, *, freeze=False, restore=True, write_gold=False):
    from attnkit.adder.data import PAD
    from attnkit.core.head_ablation import gate_z

    n_heads = model.attention_modules()[name].n_heads
    params = list(model.parameters())
    if freeze:  # only the gates need a gradient: faster, but the weights must come back trainable
        for p in params:
            p.requires_grad_(False)
    try:
        total, count = torch.zeros(n_heads), 0
        for src, tgt_in, gold in batches:
            if write_gold:
                gold[gold == PAD] = -100  # F.cross_entropy's default ignore_index, written into the caller's gold
            gate = torch.ones(len(src), n_heads, requires_grad=True)
            logits = model.run_with_hooks(src, tgt_in, hooks=[(f"{name}.hook_z", lambda z, hook: gate_z(z, gate))])
            ignore = -100 if write_gold else PAD
            loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=ignore, reduction="sum")
            total += torch.autograd.grad(loss, gate)[0].abs().sum(0)
            count += len(src)
        return total / count
    finally:
        if freeze and restore:
            for p in params:
                p.requires_grad_(True)


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        (dict(freeze=True, restore=False), "requires_grad=False"),
        (dict(write_gold=True), "wrote into the caller's batch"),
    ],
    ids=["weights left frozen", "gold written"],
)
def test_head_importance_must_leave_the_model_trainable_and_the_batches_alone(kwargs, hint):
    assert_hint(ablation_checks.check_head_importance, lambda m, n, b: importance(m, n, b, **kwargs), hint)


@pytest.mark.parametrize("kwargs", [dict(), dict(freeze=True, restore=True)], ids=["plain", "frozen then restored"])
def test_head_importance_variants_that_leave_things_alone_pass(kwargs):
    assert_passes(ablation_checks.check_head_importance, lambda m, n, b: importance(m, n, b, **kwargs))


def loss_in_eval_mode(model, src, tgt, pad_id):
    model.eval()  # "no dropout while measuring": the training loop then trains without dropout
    return flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=pad_id)


def loss_mode_restored(model, src, tgt, pad_id):
    was_training = model.training
    model.train()
    try:
        return flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=pad_id)
    finally:
        model.train(was_training)


def test_a_loss_must_leave_the_models_mode_as_it_came():
    assert_hint(adder_checks.check_teacher_forcing_loss, loss_in_eval_mode, "switched the model to evaluation mode")
    assert_passes(adder_checks.check_teacher_forcing_loss, loss_mode_restored)


def loss_of_shape_one(model, src, tgt, pad_id):
    return flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=pad_id).reshape(1)  # (1,), not ()


def loss_squeezed(model, src, tgt, pad_id):
    return flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=pad_id).reshape(1).squeeze(0)


def test_a_loss_is_a_0d_tensor_as_the_task_states():
    assert_hint(adder_checks.check_teacher_forcing_loss, loss_of_shape_one, "0-d tensor")
    assert_passes(adder_checks.check_teacher_forcing_loss, loss_squeezed)
