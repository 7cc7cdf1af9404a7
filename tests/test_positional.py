import math

import pytest
import torch

from attnkit import MultiHeadAttention
from attnkit.core.positional import (ENCODINGS, LearnedTable, Positional, RelativeBucketBias, alibi_bias,
                                alibi_slopes, rotate, sinusoidal_shift_matrix, sinusoidal_table)


def test_sinusoidal_table_matches_the_formula():
    pe = sinusoidal_table(50, 16)
    assert pe.shape == (50, 16)
    pos, i = 7, 3  # columns 2i and 2i+1 are sin and cos of pos / 10000^(2i/d)
    angle = pos / 10000 ** (2 * i / 16)
    assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert torch.allclose(pe.norm(dim=1), torch.full((50,), math.sqrt(8)))  # every row on the same sphere


@pytest.mark.parametrize("k", [1, 5, 40])
def test_sinusoidal_shift_is_one_rotation_for_every_position(k):
    d = 32
    pe = sinusoidal_table(300, d).double()
    M = sinusoidal_shift_matrix(k, d)
    torch.testing.assert_close(pe[k:] , pe[:-k] @ M.T, atol=1e-5, rtol=0)  # PE(p + k) = M_k PE(p), all p
    torch.testing.assert_close(M @ M.T, torch.eye(d, dtype=torch.float64))  # orthogonal: a rotation
    blocks = M.reshape(d // 2, 2, d // 2, 2)
    off_diagonal = blocks.sum(dim=(1, 3)) * (1 - torch.eye(d // 2, dtype=torch.float64))
    assert off_diagonal.abs().max() == 0  # block-diagonal: each (sin, cos) pair turns on its own


def test_learned_table_has_rows_up_to_its_size_and_refuses_more():
    table = LearnedTable(256, 8)
    assert table(256).shape == (256, 8)
    assert torch.equal(table(256).detach(), sinusoidal_table(256, 8))  # the default start
    assert not torch.equal(LearnedTable(256, 8, init="random")(256).detach(), sinusoidal_table(256, 8))
    with pytest.raises(ValueError, match="257"):
        table(257)


def test_rope_keeps_norms_and_makes_scores_depend_on_offset_only():
    torch.manual_seed(0)
    q, k = torch.randn(16), torch.randn(16)
    n = 40
    rq = rotate(q.expand(1, 1, n, 16).contiguous())[0, 0]  # the same query at every position
    rk = rotate(k.expand(1, 1, n, 16).contiguous())[0, 0]
    torch.testing.assert_close(rq.norm(dim=-1), q.norm().expand(n))
    scores = rq @ rk.T  # (q_pos, k_pos)
    for offset in (-7, 0, 3, 20):  # every diagonal is constant: only j - i matters
        diag = torch.diagonal(scores, offset)
        torch.testing.assert_close(diag, diag[:1].expand_as(diag), atol=1e-4, rtol=0)


def test_alibi_symmetric_and_directional():
    sym = alibi_bias(6, 4, directional=False)
    torch.testing.assert_close(sym, sym.transpose(1, 2))
    assert sym[0, 0, 3].item() == pytest.approx(-3 * alibi_slopes(4)[0].item())
    d = alibi_bias(6, 4, directional=True)
    above = torch.ones(6, 6, dtype=torch.bool).triu(1)  # keys to the right of the query
    assert torch.isinf(d[0][above]).all() and torch.isinf(d[1][above.T]).all()  # left heads, right heads
    assert torch.isfinite(d[0][~above]).all() and torch.isfinite(d[1][~above.T]).all()
    assert d[0, 3, 2] == 0 and d[1, 3, 4] == 0  # the nearest key on each side gets bias 0
    # The first token of a left-looking head has no left: it falls back on itself, not NaN.
    attn = MultiHeadAttention(8, 4)
    out = attn(torch.randn(2, 6, 8), attn_bias=d)
    assert torch.isfinite(out).all()


def test_relative_buckets_clamp_far_offsets():
    rel = RelativeBucketBias(n_heads=2, n_exact=3)
    b = rel.buckets(10)
    assert b[5, 5] == 4 and b[5, 6] == 5 and b[5, 2] == 1  # exact: offset + 4
    assert b[0, 9] == 8 and b[9, 0] == 0 and b[0, 5] == 8  # beyond ±3: far right / far left


@pytest.mark.parametrize("n_pos", [10, 50, 300])
def test_far_as_one_makes_a_far_bucket_weigh_one_key_at_any_length(n_pos):
    rel = RelativeBucketBias(n_heads=1, n_exact=2)
    bias = rel(n_pos)[0]  # all learned biases 0: only the -log(count) correction
    weights = bias.softmax(-1)
    # Token 0 sees offsets 0, 1, 2 and one far-right bucket: four equal shares, whatever the length.
    assert weights[0, :3].tolist() == pytest.approx([0.25] * 3, abs=1e-5)
    assert weights[0, 3:].sum().item() == pytest.approx(0.25, abs=1e-5)


def test_relative_bias_per_row_equals_unpadded():
    rel = RelativeBucketBias(n_heads=2, n_exact=1)
    torch.nn.init.normal_(rel.bias.weight)
    padded = rel(12, torch.tensor([12, 7]))  # (batch, heads, q, k)
    torch.testing.assert_close(padded[0], rel(12))
    torch.testing.assert_close(padded[1, :, :7, :7], rel(7))


def test_positional_offers_one_kind_of_signal_per_encoding():
    for enc in ENCODINGS:
        p = Positional(enc, d_model=8, n_heads=2)
        signals = [p.table(5) is not None, p.bias(5) is not None, p.rotary is not None]
        assert sum(signals) == (0 if enc == "none" else 1), enc
        assert (p.max_len == 256) == (enc == "learned")
    with pytest.raises(ValueError, match="unknown positional encoding"):
        Positional("absolute", 8, 2)
