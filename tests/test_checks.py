"""attnkit.checks: the right implementation passes; each planted mistake gets its own hint."""
import math

import pytest
import torch
from torch import nn

from attnkit.ui import checks
from attnkit.core.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention


def run_check(capsys, check, code):
    """(passed, the one line printed)"""
    passed = check(code)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1, lines
    return passed, lines[0]


# ---------------------------------------------------------------- scaled dot-product attention

def sdpa(q, k, v, mask=None, *, scale=None, axis=-1, invert=False, fill_after=False, nan_rows=False,
         ignore_mask=False, uniform_rows=False):
    """A learner's attention, with at most one planted mistake switched on."""
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None and invert:
        mask = ~mask
    if mask is not None and not (fill_after or ignore_mask):
        scores = scores.masked_fill(~mask, float("-inf") if nan_rows else torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=axis)
    if mask is not None and fill_after:
        weights = weights * mask
    if mask is not None and not (nan_rows or uniform_rows or fill_after or ignore_mask):
        weights = weights * mask.any(-1, keepdim=True)
    return weights @ v, weights


def test_reference_passes(capsys):
    passed, line = run_check(capsys, checks.check_scaled_dot_product_attention, scaled_dot_product_attention)
    assert passed and line.startswith("✅")


def test_a_correct_learner_version_passes(capsys):
    assert run_check(capsys, checks.check_scaled_dot_product_attention, sdpa)[0]


@pytest.mark.parametrize("mistake, hint", [
    (dict(axis=-2), "rows of your weights do not sum to 1: softmax over the wrong axis?"),
    (dict(scale=1.0), "scores not scaled by 1/sqrt(d_head)?"),
    (dict(scale=1 / 16), "scores divided by d_head"),
    (dict(invert=True), "mask inverted"),
    (dict(ignore_mask=True), "your mask is ignored"),
    (dict(fill_after=True), "masked after the softmax?"),
    (dict(nan_rows=True), "NaN in the output: a fully masked row?"),
    (dict(uniform_rows=True), "attends evenly to every key"),
])
def test_planted_attention_mistakes_get_their_hint(capsys, mistake, hint):
    passed, line = run_check(capsys, checks.check_scaled_dot_product_attention,
                             lambda q, k, v, mask=None: sdpa(q, k, v, mask, **mistake))
    assert not passed
    assert line.startswith("❌") and hint in line, line


def test_attention_exceptions_become_hints(capsys):
    def unguarded(q, k, v, mask=None):  # forgets that mask may be None
        return sdpa(q, k, v, mask.bool())

    passed, line = run_check(capsys, checks.check_scaled_dot_product_attention, unguarded)
    assert not passed and "raised AttributeError with mask=None" in line and "if mask is not None" in line

    passed, line = run_check(capsys, checks.check_scaled_dot_product_attention,
                             lambda q, k, v, mask=None: q @ k.transpose(-2, -1))
    assert not passed and "return a pair (output, weights)" in line

    passed, line = run_check(capsys, checks.check_scaled_dot_product_attention,
                             lambda q, k, v, mask=None: sdpa(q, k, v, mask)[::-1])
    assert not passed and "your output has shape (2, 3, 4, 5), expected (2, 3, 4, 6)" in line


def test_unfilled_stub_says_not_implemented(capsys):
    def stub(q, k, v, mask=None):
        raise NotImplementedError

    passed, line = run_check(capsys, checks.check_scaled_dot_product_attention, stub)
    assert not passed and line.startswith("⏳") and "not implemented yet" in line


# ---------------------------------------------------------------- causal mask

@pytest.mark.parametrize("mask_fn, hint", [
    (lambda n: torch.ones(n, n, dtype=torch.bool).triu(), "upper triangle"),
    (lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1), "off by one — the diagonal is excluded"),
    (lambda n: torch.ones(n, n, dtype=torch.bool).triu(1), "mask inverted"),
    (lambda n: torch.ones(n, n, dtype=torch.bool).tril(1), "off by one: position i may not see position i+1"),
    (lambda n: torch.ones(n, n).tril(), "return a bool tensor"),
    (lambda n: torch.full((n, n), float("-inf")).triu(1), "not an additive mask"),
    (lambda n: torch.ones(n, n + 1, dtype=torch.bool).tril(), "has shape (4, 5), expected (4, 4)"),
])
def test_planted_causal_mask_mistakes_get_their_hint(capsys, mask_fn, hint):
    passed, line = run_check(capsys, checks.check_causal_mask, mask_fn)
    assert not passed and hint in line, line


def test_causal_mask_reference_passes(capsys):
    assert run_check(capsys, checks.check_causal_mask, causal_mask)[0]


# ---------------------------------------------------------------- head split and merge

def split_heads(x, n_heads):
    batch, n_pos, d_model = x.shape
    return x.view(batch, n_pos, n_heads, d_model // n_heads).transpose(1, 2)


def merge_heads(z):
    batch, n_heads, n_pos, d_head = z.shape
    return z.transpose(1, 2).reshape(batch, n_pos, n_heads * d_head)


def test_split_and_merge_pass(capsys):
    assert run_check(capsys, checks.check_split_heads, split_heads)[0]
    assert run_check(capsys, checks.check_merge_heads, merge_heads)[0]


@pytest.mark.parametrize("split, hint", [
    (lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "wrong transpose"),
    (lambda x, h: x.view(x.size(0), x.size(1), h, -1), "forgot transpose(1, 2)"),
    (lambda x, h: x.view(x.size(0), x.size(1), h, -1).flip(2).transpose(1, 2), "wrong values"),
])
def test_planted_split_mistakes_get_their_hint(capsys, split, hint):
    passed, line = run_check(capsys, checks.check_split_heads, split)
    assert not passed and hint in line, line


@pytest.mark.parametrize("merge, hint", [
    (lambda z: z.reshape(z.size(0), z.size(2), -1), "wrong transpose"),
    (lambda z: z.transpose(1, 2).view(z.size(0), z.size(2), -1), "use .reshape"),
])
def test_planted_merge_mistakes_get_their_hint(capsys, merge, hint):
    passed, line = run_check(capsys, checks.check_merge_heads, merge)
    assert not passed and hint in line, line


# ---------------------------------------------------------------- multi-head attention

class LearnerMHA(nn.Module):
    """A learner's multi-head attention, with at most one planted mistake switched on."""
    mistake = ""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.W_Q, self.W_K, self.W_V = (nn.Linear(d_model, d_model) for _ in range(3))
        if self.mistake != "no W_O":
            self.W_O = nn.Linear(d_model, d_model)

    def forward(self, x, key_padding_mask=None):
        batch, n_pos, d_model = x.shape
        if self.mistake == "straight split":
            split = lambda t: t.reshape(batch, self.n_heads, n_pos, -1)  # noqa: E731
        else:
            split = lambda t: split_heads(t, self.n_heads)  # noqa: E731
        q, k, v = split(self.W_Q(x)), split(self.W_K(x)), split(self.W_V(x))
        if self.mistake == "d_model scale":
            q = q * math.sqrt(q.size(-1)) / math.sqrt(d_model)
        mask = None
        if key_padding_mask is not None:
            mask = key_padding_mask if self.mistake == "padding inverted" else ~key_padding_mask
            mask = mask[:, None, None, :]
        z, _ = scaled_dot_product_attention(q, k, v, mask)
        merged = merge_heads(z)
        return merged if self.mistake in ("unused W_O", "no W_O") else self.W_O(merged)


def learner_with(mistake):
    return type("Planted", (LearnerMHA,), {"mistake": mistake})


def test_multi_head_attention_passes(capsys):
    assert run_check(capsys, checks.check_multi_head_attention, LearnerMHA)[0]
    assert run_check(capsys, checks.check_multi_head_attention, MultiHeadAttention)[0]


@pytest.mark.parametrize("mistake, hint", [
    ("unused W_O", "missing W_O"),
    ("no W_O", "missing W_O"),
    ("straight split", "heads split with the wrong transpose"),
    ("d_model scale", "scaled by 1/sqrt(d_model)"),
    ("padding inverted", "key_padding_mask is True at padding"),
])
def test_planted_multi_head_mistakes_get_their_hint(capsys, mistake, hint):
    passed, line = run_check(capsys, checks.check_multi_head_attention, learner_with(mistake))
    assert not passed and hint in line, line


def test_multi_head_stub_says_not_implemented(capsys):
    class Stub(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()

        def forward(self, x, key_padding_mask=None):
            raise NotImplementedError

    passed, line = run_check(capsys, checks.check_multi_head_attention, Stub)
    assert not passed and "not implemented yet" in line
