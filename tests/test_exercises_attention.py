"""Notebook 01's checkers: correct code written several ways passes; each planted mistake gets its own
hint; nothing a learner can hand over makes a checker raise or print more than one line."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnkit.core.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from attnkit.exercises import attention as attention_checks

from helpers import checker_line


def run_check(check, code):
    return checker_line(check, code)


def stub(*args, **kwargs):
    raise NotImplementedError("your code here")


# ---------------------------------------------------------------- scaled dot-product attention


def sdpa(
    q,
    k,
    v,
    mask=None,
    *,
    scale=None,
    axis=-1,
    invert=False,
    fill_after=False,
    fill=None,
    ignore_mask=False,
    zero_empty_rows=True,
    after_softmax=False,
    dropout=False,
):
    """A learner's attention, with at most one planted mistake switched on."""
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * (1 if after_softmax else scale)
    if mask is not None and invert:
        mask = ~mask
    if mask is not None and not (fill_after or ignore_mask):
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min if fill is None else fill)
    weights = scores.softmax(dim=axis)
    if after_softmax:
        weights = weights * scale
    if dropout:
        weights = F.dropout(weights, 0.1)
    if mask is not None and fill_after:
        weights = weights * mask
    if mask is not None and zero_empty_rows and not (fill_after or ignore_mask):
        weights = weights * mask.any(-1, keepdim=True)
    return weights @ v, weights


def einsum_attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = F.softmax(scores, dim=-1).nan_to_num(0.0)  # -inf with a fix-up
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def fused_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = (
        torch.where(mask.any(-1, keepdim=True), scores.softmax(-1), 0.0) if mask is not None else scores.softmax(-1)
    )
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)
    return out, weights


def loop_attention(q, k, v, mask=None):
    q_pos, k_pos = q.shape[-2], k.shape[-2]
    weights = torch.zeros(*q.shape[:-1], k_pos)
    m = torch.ones(q.shape[:-1] + (k_pos,), dtype=torch.bool) if mask is None else mask.expand(*q.shape[:-1], k_pos)
    for i in range(q_pos):
        s = (q[..., i : i + 1, :] * k).sum(-1) / math.sqrt(q.shape[-1])  # (..., k_pos)
        s = torch.where(m[..., i, :], s, torch.tensor(-1e30))
        w = torch.exp(s - s.max(-1, keepdim=True).values)
        weights[..., i, :] = w / w.sum(-1, keepdim=True) * m[..., i, :].any(-1, keepdim=True)
    return weights @ v, weights


def numpy_attention(q, k, v, mask=None):
    qn, kn, vn = q.numpy(), k.numpy(), v.numpy()
    s = qn @ np.swapaxes(kn, -1, -2) / np.sqrt(qn.shape[-1])
    if mask is not None:
        s = np.where(mask.numpy(), s, -1e30)
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    if mask is not None:
        w = w * mask.numpy().any(-1, keepdims=True)
    return torch.from_numpy(w @ vn), torch.from_numpy(w)


@pytest.mark.parametrize("fn", [sdpa, einsum_attention, fused_attention, loop_attention, numpy_attention])
def test_correct_attention_written_differently_passes(fn):
    assert run_check(attention_checks.check_scaled_dot_product_attention, fn)[0]


@pytest.mark.parametrize(
    "mistake, hint",
    [
        (dict(axis=-2), "the columns of your weights sum to 1"),
        (dict(scale=1.0), "scores not scaled: divide q @ kᵀ by sqrt(d_head)"),
        (dict(scale=1 / 16), "scores divided by d_head"),
        (dict(scale=4.0), "scores multiplied by sqrt(d_head)"),
        (dict(scale=1 / 4), "take d_head from the input"),  # hard-coded for the first case's d_head=16
        (dict(scale=1 / math.sqrt(3)), "take d_head from the input"),  # the notebook's global d_head
        (dict(after_softmax=True), "you divided after the softmax"),
        (dict(dropout=True), "dropout left on?"),
        (dict(invert=True), "mask inverted"),
        (dict(ignore_mask=True), "your mask is ignored"),
        (dict(fill_after=True), "masked after the softmax?"),
        (dict(fill=0.0), "filling with 0 still leaves exp(0) = 1"),
        (dict(fill=float("-inf"), zero_empty_rows=False), "NaN × 0 is still NaN"),
        (dict(fill=float("-inf")), "NaN × 0 is still NaN"),  # the zeroing alone cannot clean a NaN
        (dict(zero_empty_rows=False), "attends evenly to every key"),
    ],
)
def test_planted_attention_mistakes_get_their_hint(mistake, hint):
    passed, line = run_check(
        attention_checks.check_scaled_dot_product_attention, lambda q, k, v, mask=None: sdpa(q, k, v, mask, **mistake)
    )
    assert not passed and hint in line, line


def test_following_the_nan_hint_leads_to_a_pass():
    # -inf and NaN: the hint offers two ways out; each one passes (no loop back to the same hint).
    def with_finfo(q, k, v, mask=None):
        return sdpa(q, k, v, mask)

    def with_nan_to_num(q, k, v, mask=None):
        out, w = sdpa(q, k, v, mask, fill=float("-inf"), zero_empty_rows=False)
        w = w.nan_to_num(0.0)
        return w @ v, w

    assert run_check(attention_checks.check_scaled_dot_product_attention, with_finfo)[0]
    assert run_check(attention_checks.check_scaled_dot_product_attention, with_nan_to_num)[0]


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda q, k, v, mask=None: sdpa(q, k, v, mask.bool()), "if mask is not None"),
        (lambda q, k, v, mask=None: q @ k.transpose(-2, -1), "return a pair (output, weights)"),
        (lambda q, k, v, mask=None: sdpa(q, k, v, mask)[::-1], "output and weights swapped"),
        (lambda q, k, v, mask=None: sdpa(k, q, v[..., : q.size(-2), :], mask), "q and k swapped?"),
        (
            lambda q, k, v, mask=None: ((q @ k.T / 4).softmax(-1) @ v, (q @ k.T / 4).softmax(-1)),
            "k.T reverses every axis",
        ),
        (lambda q, k, v: sdpa(q, k, v), "arguments differ from the exercise's"),
        (lambda q, k, v, mask=None: None, "return a pair"),
        (lambda q, k, v, mask=None: tuple(t.numpy() for t in sdpa(q, k, v, mask)), "numpy array"),
        (lambda q, k, v, mask=None: (sdpa(q, k, v, mask)[0].tolist(), sdpa(q, k, v, mask)[1]), "is a list"),
        (None, "expected a function or class, got a NoneType"),
        (stub, "⏳"),
    ],
)
def test_anything_a_learner_hands_over_gives_one_line(fn, hint):
    passed, line = run_check(attention_checks.check_scaled_dot_product_attention, fn)
    assert not passed and hint in line, line


def test_checker_leaves_the_global_random_state_alone(capsys):
    torch.manual_seed(3)
    expected = torch.rand(3)
    torch.manual_seed(3)
    attention_checks.check_scaled_dot_product_attention(sdpa)
    attention_checks.check_multi_head_attention(MultiHeadAttention)
    assert torch.equal(torch.rand(3), expected)
    capsys.readouterr()


# ---------------------------------------------------------------- causal mask

BUFFER = torch.ones(8, 8, dtype=torch.bool).tril()


@pytest.mark.parametrize(
    "mask_fn",
    [
        lambda n: torch.tril(torch.ones(n, n)).bool(),
        lambda n: torch.arange(n)[:, None] >= torch.arange(n),
        lambda n: torch.tensor([[j <= i for j in range(n)] for i in range(n)]),
    ],
)
def test_correct_causal_masks_pass(mask_fn):
    assert run_check(attention_checks.check_causal_mask, mask_fn)[0]


@pytest.mark.parametrize(
    "mask_fn, hint",
    [
        (lambda n: torch.ones(n, n, dtype=torch.bool).triu(), "upper triangle"),
        (lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1), "off by one — the diagonal is excluded"),
        (lambda n: torch.ones(n, n, dtype=torch.bool).triu(1), "mask inverted"),
        (lambda n: torch.ones(n, n, dtype=torch.bool).tril(1), "off by one: position i may not see position i+1"),
        (lambda n: torch.ones(n, n, dtype=torch.bool), "every entry is True, so nothing is masked"),
        (lambda n: torch.zeros(n, n, dtype=torch.bool), "every entry is False, so every key is blocked"),
        (lambda n: torch.ones(n, n).tril(), "return a bool tensor"),
        (lambda n: torch.ones(n, n, dtype=torch.long).tril(), "dtype torch.int64"),
        (lambda n: torch.full((n, n), float("-inf")).triu(1), "not an additive mask"),
        (lambda n: torch.ones(n, n + 1, dtype=torch.bool).tril(), "has shape (4, 5), expected (4, 4)"),
        (lambda n: BUFFER[:n, :n], "has shape (8, 8), expected (13, 13)"),  # a fixed buffer passes up to 8
        (lambda n: np.tril(np.ones((n, n), dtype=bool)), "numpy array"),
        (lambda n: [[j <= i for j in range(n)] for i in range(n)], "is a list"),
        (lambda n: None, "forget `return`"),
        (lambda: causal_mask(4), "arguments differ"),
        (stub, "⏳"),
    ],
)
def test_planted_causal_mask_mistakes_get_their_hint(mask_fn, hint):
    passed, line = run_check(attention_checks.check_causal_mask, mask_fn)
    assert not passed and hint in line, line


# ---------------------------------------------------------------- head split and merge


def split_heads(x, n_heads):
    batch, n_pos, d_model = x.shape
    return x.view(batch, n_pos, n_heads, d_model // n_heads).transpose(1, 2)


def merge_heads(z):
    batch, n_heads, n_pos, d_head = z.shape
    return z.transpose(1, 2).reshape(batch, n_pos, n_heads * d_head)


@pytest.mark.parametrize(
    "split",
    [
        split_heads,
        lambda x, h: x.reshape(*x.shape[:2], h, -1).permute(0, 2, 1, 3),
        lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
        lambda x, h: torch.stack([x[..., i * (x.size(-1) // h) : (i + 1) * (x.size(-1) // h)] for i in range(h)], 1),
    ],
)
def test_correct_splits_pass(split):
    assert run_check(attention_checks.check_split_heads, split)[0]


@pytest.mark.parametrize(
    "split, hint",
    [
        (lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "wrong transpose"),
        (lambda x, h: x.view(x.size(0), x.size(1), h, -1), "forgot transpose(1, 2)"),
        (lambda x, h: x.view(x.size(0), x.size(1), h, -1).flip(2).transpose(1, 2), "wrong values"),
        (
            lambda x, h: x.view(x.size(0), x.size(1), h, 4).transpose(1, 2),
            "not from the notebook's globals",
        ),  # d_head 4
        (lambda x, h: x.view(x.size(0), x.size(1), 3, -1).transpose(1, 2), "expected (1, 5, 7, 3)"),  # a global n_heads
        (lambda x, h: x.view(x.size(0), x.size(1), -1, h).permute(0, 3, 1, 2), "wrong values"),  # split the wrong way
        (lambda h, x: split_heads(x, h), "arguments in the wrong order"),
        (lambda x, h: split_heads(x, h).numpy(), "numpy array"),
        (lambda x, h: list(split_heads(x, h)), "is a list"),
        (lambda x, h: None, "forget `return`"),
        (stub, "⏳"),
    ],
)
def test_planted_split_mistakes_get_their_hint(split, hint):
    passed, line = run_check(attention_checks.check_split_heads, split)
    assert not passed and hint in line, line


@pytest.mark.parametrize(
    "merge",
    [
        merge_heads,
        lambda z: z.permute(0, 2, 1, 3).contiguous().view(z.size(0), z.size(2), -1),
        lambda z: torch.cat(z.unbind(1), dim=-1),
        lambda z: torch.cat([z[:, h] for h in range(z.size(1))], dim=-1),
    ],
)
def test_correct_merges_pass(merge):
    assert run_check(attention_checks.check_merge_heads, merge)[0]


@pytest.mark.parametrize(
    "merge, hint",
    [
        (lambda z: z.reshape(z.size(0), z.size(2), -1), "wrong transpose"),
        (lambda z: z.transpose(1, 2).view(z.size(0), z.size(2), -1), "use .reshape"),
        (lambda z: torch.cat(z.unbind(1)[::-1], dim=-1), "head 0 first"),
        (lambda z: z.transpose(1, 2), "expected (2, 5, 12)"),
        (lambda z: torch.cat(z.unbind(1), dim=1), "expected (2, 5, 12)"),
        (
            lambda z: z.transpose(1, 2).reshape(z.size(0), 5, -1),
            "not from fixed numbers or the notebook's globals",
        ),  # a fixed n_pos
        (lambda z, n_heads: merge_heads(z), "arguments differ"),
        (lambda z: merge_heads(z).numpy(), "numpy array"),
        (lambda z: None, "forget `return`"),
        (stub, "⏳"),
    ],
)
def test_planted_merge_mistakes_get_their_hint(merge, hint):
    passed, line = run_check(attention_checks.check_merge_heads, merge)
    assert not passed and hint in line, line


# ---------------------------------------------------------------- multi-head attention

N_HEADS = 3  # a notebook-style global a learner might use by mistake


class LearnerMHA(nn.Module):
    """A learner's multi-head attention, with at most one planted mistake switched on."""

    mistake = ""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        width = d_model // n_heads if self.mistake == "per-head width" else d_model
        self.W_Q, self.W_K, self.W_V = (nn.Linear(d_model, width) for _ in range(3))
        if self.mistake != "no W_O":
            self.W_O = nn.Linear(d_model, d_model)

    def forward(self, x, key_padding_mask=None):
        batch, n_pos, d_model = x.shape
        n_heads = N_HEADS if self.mistake == "global n_heads" else self.n_heads
        if self.mistake == "straight split":
            split = lambda t: t.reshape(batch, n_heads, n_pos, -1)  # noqa: E731
        else:
            split = lambda t: split_heads(t, n_heads)  # noqa: E731
        q, k, v = split(self.W_Q(x)), split(self.W_K(x)), split(self.W_V(x))
        if self.mistake == "d_model scale":
            q = q * math.sqrt(q.size(-1)) / math.sqrt(d_model)
        if self.mistake == "no scale":
            q = q * math.sqrt(q.size(-1))
        mask = None
        if key_padding_mask is not None and self.mistake != "padding ignored":
            mask = key_padding_mask if self.mistake == "padding inverted" else ~key_padding_mask
            mask = mask[:, None, None, :]
        z, _ = scaled_dot_product_attention(q, k, v, mask)
        if self.mistake == "dropout":
            z = F.dropout(z, 0.1)
        merged = merge_heads(z)
        return merged if self.mistake in ("unused W_O", "no W_O") else self.W_O(merged)


def learner_with(mistake):
    return type("Planted", (LearnerMHA,), {"mistake": mistake})


class LoopMHA(nn.Module):
    """Correct, written head by head with F.scaled_dot_product_attention; returns (output, None)."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.h = n_heads
        self.W_Q, self.W_K, self.W_V, self.W_O = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, key_padding_mask=None):
        d_head = x.size(-1) // self.h
        mask = None if key_padding_mask is None else ~key_padding_mask[:, None, :]
        heads = []
        for i in range(self.h):
            cut = slice(i * d_head, (i + 1) * d_head)
            q, k, v = self.W_Q(x)[..., cut], self.W_K(x)[..., cut], self.W_V(x)[..., cut]
            heads.append(F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
        return self.W_O(torch.cat(heads, -1)), None


class KwargsMHA(LearnerMHA):
    def forward(self, x, **kwargs):  # padding passed through by name
        return super().forward(x, **kwargs)


@pytest.mark.parametrize("cls", [LearnerMHA, LoopMHA, KwargsMHA])
def test_correct_multi_head_attention_passes(cls):
    assert run_check(attention_checks.check_multi_head_attention, cls)[0]


class SwappedArgs(LearnerMHA):
    def __init__(self, n_heads, d_model):
        super().__init__(d_model, n_heads)


class OtherPaddingName(LearnerMHA):
    def forward(self, x, mask=None):  # named otherwise, and ignored
        return super().forward(x)


class NoSuper(nn.Module):
    def __init__(self, d_model, n_heads):
        self.W_Q = nn.Linear(d_model, d_model)


class PlainClass:
    def __init__(self, d_model, n_heads):
        self.n_heads = n_heads

    def __call__(self, x, key_padding_mask=None):
        return x


class Stub(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        raise NotImplementedError("your code here")

    def forward(self, x, key_padding_mask=None):
        raise NotImplementedError("your code here")


class ForwardStub(nn.Module):  # the unfilled notebook-01 layout: __init__ done, forward not
    def __init__(self, d_model, n_heads):
        super().__init__()

    def forward(self, x, key_padding_mask=None):
        raise NotImplementedError("your code here")


@pytest.mark.parametrize(
    "cls, hint",
    [
        (learner_with("unused W_O"), "missing W_O"),
        (learner_with("no W_O"), "missing W_O"),
        (learner_with("straight split"), "heads split with the wrong transpose"),
        (learner_with("d_model scale"), "scaled by 1/sqrt(d_model)"),
        (learner_with("no scale"), "scores not scaled by 1/sqrt(d_head)"),
        (learner_with("padding inverted"), "key_padding_mask is True at padding"),
        (learner_with("padding ignored"), "key_padding_mask ignored"),
        (learner_with("per-head width"), "each projection covers all heads at once"),
        (learner_with("global n_heads"), "n_heads=2"),
        (learner_with("dropout"), "dropout left on?"),
        (SwappedArgs, "arguments swapped?"),
        (OtherPaddingName, "forward has no key_padding_mask argument (it has 'mask')"),
        (NoSuper, "call super().__init__() first"),
        (PlainClass, "not an nn.Module"),
        (LearnerMHA(12, 3), "pass the class itself"),
        (Stub, "⏳"),
        (ForwardStub, "⏳"),
    ],
)
def test_planted_multi_head_mistakes_get_their_hint(cls, hint):
    passed, line = run_check(attention_checks.check_multi_head_attention, cls)
    assert not passed and hint in line, line


def test_what_a_learners_code_prints_stays_out_of_the_one_line():
    def chatty(n_pos):
        print("debug: building a mask of", n_pos)
        return torch.ones(n_pos, n_pos, dtype=torch.bool).tril()

    assert run_check(attention_checks.check_causal_mask, chatty)[0]


@pytest.fixture
def shell():
    """A real IPython shell, as a notebook's kernel runs cells (removed afterwards)."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    yield ip
    InteractiveShell.clear_instance()


def test_a_solution_cell_that_did_not_run_is_named_not_reported_as_a_stub(shell):
    """Student edition: the stub is defined; the learner's solution cell has a SyntaxError (or an
    IndentationError, or raises), so the stub is still what the check cell gets."""
    stub = 'def my_causal_mask(n_pos):\n    raise NotImplementedError("your code here")'
    assert not shell.run_cell(stub).error_in_exec
    for broken, error in [
        ("def my_causal_mask(n_pos):\nreturn 1", "IndentationError"),
        ("def my_causal_mask(n_pos)\n    return 1", "SyntaxError"),
        ("import torch\nundefined_name + 1\ndef my_causal_mask(n_pos): pass", "NameError"),
    ]:
        shell.run_cell(broken)
        passed, line = checker_line(attention_checks.check_causal_mask, shell.user_ns["my_causal_mask"])
        assert not passed and line.startswith("❌") and error in line and "not defined yet" in line, line
    shell.run_cell(stub)  # a stub cell that ran cleanly: the usual ⏳
    passed, line = checker_line(attention_checks.check_causal_mask, shell.user_ns["my_causal_mask"])
    assert not passed and line.startswith("⏳"), line
    shell.run_cell('raise NotImplementedError("your code here")')  # a stub raising at the top level
    passed, line = checker_line(attention_checks.check_causal_mask, shell.user_ns["my_causal_mask"])
    assert line.startswith("⏳"), line


@pytest.mark.parametrize(
    "check, answer, word",
    [
        (attention_checks.check_causal_mask, causal_mask, "is"),
        (attention_checks.check_multi_head_attention, MultiHeadAttention, "is"),
        (attention_checks.check_causal_mask, lambda n: causal_mask(n), "calls"),
        (attention_checks.check_split_heads, lambda x, h: MultiHeadAttention(x.size(-1), h).split_heads(x), "calls"),
    ],
    ids=["mask", "mha", "mask-lambda", "split-method"],
)
def test_the_kits_own_answer_does_not_pass(check, answer, word):
    passed, line = run_check(check, answer)
    assert not passed and f"{word} the kit's own attnkit.core.attention." in line, line
