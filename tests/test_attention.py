"""attnkit.attention against PyTorch's own attention, to 1e-5 in float32 and 1e-9 in float64."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnkit.core.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from attnkit.core.head_ablation import gate_z

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-9, rtol=1e-9)}
DTYPES = [torch.float32, torch.float64]

# (batch, heads, q_pos, k_pos, d_head): batch size 1, a single key, odd widths, q_pos != k_pos
SHAPES = [(4, 4, 7, 7, 16), (1, 2, 5, 9, 8), (3, 1, 6, 1, 5), (2, 3, 1, 4, 7), (1, 1, 1, 1, 1)]


def torch_weights(q, k, mask=None):
    """PyTorch's attention weights: its fused attention applied to the identity as values."""
    eye = torch.eye(k.size(-2), dtype=q.dtype).expand(*k.shape[:-1], k.size(-2))
    return F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)


def random_qkv(batch, heads, q_pos, k_pos, d_head, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, heads, n, d_head, generator=g, dtype=dtype) for n in (q_pos, k_pos, k_pos)]


def padding_mask(batch, k_pos, seed=0):
    """(batch, k_pos) True = padding; each sequence keeps at least its first key."""
    lengths = torch.randint(1, k_pos + 1, (batch,), generator=torch.Generator().manual_seed(seed))
    return torch.arange(k_pos) >= lengths[:, None]


# ---------------------------------------------------------------- scaled dot-product attention


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_torch_sdpa(shape, dtype):
    q, k, v = random_qkv(*shape, dtype)
    out, w = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TOL[dtype])
    torch.testing.assert_close(w, torch_weights(q, k), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_torch_sdpa_with_padding_mask(shape, dtype):
    batch, heads, q_pos, k_pos, d_head = shape
    q, k, v = random_qkv(*shape, dtype, seed=1)
    mask = ~padding_mask(batch, k_pos)[:, None, None, :]  # True = may attend
    out, w = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL[dtype])
    torch.testing.assert_close(w, torch_weights(q, k, mask), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_pos", [1, 2, 7, 16])
def test_matches_torch_sdpa_causal(n_pos, dtype):
    q, k, v = random_qkv(2, 4, n_pos, n_pos, 16, dtype, seed=2)
    out, w = scaled_dot_product_attention(q, k, v, causal_mask(n_pos))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), **TOL[dtype])
    assert (w.triu(1) == 0).all()


def test_causal_mask_is_lower_triangle():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]


@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_row_gives_zeros_not_nan(dtype):
    q, k, v = random_qkv(2, 2, 3, 4, 8, dtype, seed=3)
    for t in (q, k, v):
        t.requires_grad_(True)
    mask = torch.ones(2, 1, 3, 4, dtype=torch.bool)
    mask[0, 0, 1] = False  # query 1 of sequence 0 may attend to nothing
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert not out.isnan().any() and not w.isnan().any()
    assert (out[0, :, 1] == 0).all() and (w[0, :, 1] == 0).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL[dtype])
    out.sum().backward()
    assert all(t.grad.isfinite().all() for t in (q, k, v))


@pytest.mark.parametrize("k_pos", [1, 7, 64, 257])
def test_one_query_decoding_step_matches_torch_with_masks_and_gradients(k_pos):
    """A decoding step (one query) takes its own path: products summed, a written-out softmax."""
    q, k, v = (t.requires_grad_(True) for t in random_qkv(3, 2, 1, k_pos, 8, torch.float64, seed=6))
    mask = ~padding_mask(3, k_pos, seed=6)[:, None, None, :]
    mask[2] = False  # the third sequence's query may attend to nothing
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert (out[2] == 0).all() and (w[2] == 0).all() and not out.isnan().any()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL[torch.float64])
    attention = lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0]  # noqa: E731
    assert torch.autograd.gradcheck(attention, (q, k, v), fast_mode=True)


def test_bias_is_added_to_the_scores():
    q, k, v = random_qkv(2, 3, 5, 6, 8, torch.float64, seed=4)
    bias = torch.randn(3, 5, 6, dtype=torch.float64)
    out, _ = scaled_dot_product_attention(q, k, v, bias=bias)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bias), **TOL[torch.float64])


def test_gradcheck():
    q, k, v = (t.requires_grad_(True) for t in random_qkv(1, 2, 3, 4, 5, torch.float64, seed=5))
    mask = torch.tensor([[True, True, False, True]] * 2 + [[False] * 4])  # the last row fully masked
    attention = lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)  # noqa: E731
    assert torch.autograd.gradcheck(attention, (q, k, v), fast_mode=True)


# ---------------------------------------------------------------- multi-head attention


def copied_pair(d_model, n_heads, dtype, seed=0):
    """Our MultiHeadAttention and nn.MultiheadAttention with the same weights."""
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(d_model, n_heads, batch_first=True).to(dtype).eval()
    nn.init.normal_(theirs.in_proj_bias)  # PyTorch starts its biases at zero: make them count
    nn.init.normal_(theirs.out_proj.bias)
    ours = MultiHeadAttention(d_model, n_heads).to(dtype).eval()
    with torch.no_grad():
        for W, weight, bias in zip(
            (ours.W_Q, ours.W_K, ours.W_V), theirs.in_proj_weight.chunk(3), theirs.in_proj_bias.chunk(3)
        ):
            W.weight.copy_(weight)
            W.bias.copy_(bias)
        ours.W_O.weight.copy_(theirs.out_proj.weight)
        ours.W_O.bias.copy_(theirs.out_proj.bias)
    return ours, theirs


def run_both(ours, theirs, x_q, x_kv=None, key_padding_mask=None, causal=False):
    """(our output, our pattern), (their output, their per-head weights)"""
    x_kv = x_q if x_kv is None else x_kv
    attn_mask = None
    if causal:  # theirs: True = may NOT attend
        attn_mask = ~causal_mask(x_q.size(1))
    seen = {}
    remove = ours.hook_pattern.add(lambda pattern, hook: seen.setdefault("pattern", pattern))
    try:
        out = ours(x_q, None if x_kv is x_q else x_kv, key_padding_mask=key_padding_mask, causal=causal)
    finally:
        remove()
    their_out, their_w = theirs(
        x_q,
        x_kv,
        x_kv,
        key_padding_mask=key_padding_mask,
        attn_mask=attn_mask,
        need_weights=True,
        average_attn_weights=False,
    )
    return (out, seen["pattern"]), (their_out, their_w)


# (batch, q_pos, k_pos, d_model, n_heads): d_model 24 and 12 are not powers of two
MHA_CASES = [(4, 7, 7, 64, 4), (1, 5, 5, 24, 4), (3, 6, 9, 12, 3), (2, 4, 1, 8, 2), (1, 1, 1, 6, 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", MHA_CASES)
def test_matches_nn_multihead_attention(case, dtype):
    batch, q_pos, k_pos, d_model, n_heads = case
    ours, theirs = copied_pair(d_model, n_heads, dtype)
    g = torch.Generator().manual_seed(1)
    x_q = torch.randn(batch, q_pos, d_model, generator=g, dtype=dtype)
    x_kv = torch.randn(batch, k_pos, d_model, generator=g, dtype=dtype) if k_pos != q_pos else None
    pad = padding_mask(batch, k_pos)
    for kwargs in (dict(), dict(key_padding_mask=pad)):
        (out, w), (their_out, their_w) = run_both(ours, theirs, x_q, x_kv, **kwargs)
        torch.testing.assert_close(out, their_out, **TOL[dtype])
        torch.testing.assert_close(w, their_w, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_nn_multihead_attention_causal_with_padding(dtype):
    ours, theirs = copied_pair(24, 4, dtype, seed=2)
    x = torch.randn(3, 6, 24, dtype=dtype)
    pad = padding_mask(3, 6, seed=3)
    (out, w), (their_out, their_w) = run_both(ours, theirs, x, key_padding_mask=pad, causal=True)
    torch.testing.assert_close(out, their_out, **TOL[dtype])
    torch.testing.assert_close(w, their_w, **TOL[dtype])


def test_multi_head_gradcheck():
    ours, _ = copied_pair(6, 2, torch.float64)
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    pad = torch.tensor([[False, False, True], [False, False, False]])
    assert torch.autograd.gradcheck(lambda x: ours(x, key_padding_mask=pad, causal=True), (x,), fast_mode=True)


def test_d_model_must_divide_into_heads():
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadAttention(10, 3)


def test_split_then_merge_is_identity():
    m = MultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    assert m.split_heads(x).shape == (2, 3, 5, 4)
    assert torch.equal(m.split_heads(x)[:, 1], x[..., 4:8])  # head 1 holds features 4..7
    assert torch.equal(m.merge_heads(m.split_heads(x)), x)


def test_incremental_decoding_with_cached_kv_matches_full_causal():
    m = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    full = m(x, causal=True)
    k, v = m.project_kv(x)
    last = m(x[:, -2:], kv=(k, v), causal=True)  # the last two queries against all five keys
    torch.testing.assert_close(last, full[:, -2:])


def test_hook_points_see_every_head_and_detach_exactly():
    m = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    seen = []
    remove = [
        m.hook_pattern.add(lambda t, hook: seen.append(t.shape)),
        m.hook_z.add(lambda t, hook: seen.append(t.shape)),
    ]
    m(x)
    assert seen == [(2, 4, 5, 5), (2, 4, 5, 4)]
    for r in remove:
        r()
    m(x)
    assert len(seen) == 2 and not m.hook_pattern.fns and not m.hook_z.fns


def test_gate_zero_removes_a_head_before_W_O():
    m = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    seen = {}
    remove = m.hook_z.add(lambda z, hook: seen.setdefault("z", z))
    m(x)
    remove()
    m.hook_z.add(lambda z, hook: gate_z(z, torch.tensor([1.0, 0.0, 1.0, 1.0])))
    z = seen["z"].clone()
    z[:, 1] = 0
    torch.testing.assert_close(m(x), m.W_O(m.merge_heads(z)))
