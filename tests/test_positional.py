import math

import pytest
import torch

from attnkit import MultiHeadAttention
from attnkit.core.positional import (
    ENCODINGS,
    LearnedTable,
    Positional,
    RelativeBucketBias,
    alibi_bias,
    alibi_slopes,
    rotate,
    sinusoidal_shift_matrix,
    sinusoidal_table,
)


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
    torch.testing.assert_close(pe[k:], pe[:-k] @ M.T, atol=1e-5, rtol=0)  # PE(p + k) = M_k PE(p), all p
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


# ---------------------------------------------------------------- direction and sign of every scheme
def test_alibi_slopes_are_the_papers_geometric_sequence():
    assert alibi_slopes(4).tolist() == [2**-2, 2**-4, 2**-6, 2**-8]
    assert alibi_slopes(8).tolist() == [2.0 ** (-k) for k in range(1, 9)]


def test_symmetric_alibi_penalises_distance_on_both_sides_equally():
    n, slopes = 9, alibi_slopes(4)
    bias = alibi_bias(n, 4, directional=False)
    for h in range(4):
        for i in range(n):
            for j in range(n):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * abs(j - i))
    assert (bias <= 0).all()


def test_directional_alibi_left_heads_see_only_the_left_and_penalise_distance():
    """Even heads look left (keys j < i), odd heads right (j > i); each pair shares one slope; the
    nearest allowed key gets 0 and every further key slope·(distance − 1) less: never more."""
    n, n_heads = 10, 4
    bias = alibi_bias(n, n_heads, directional=True)
    pair_slopes = alibi_slopes(n_heads // 2).repeat_interleave(2)  # [2^-4, 2^-4, 2^-8, 2^-8]
    for h in range(n_heads):
        left = h % 2 == 0
        for i in range(n):
            assert bias[h, i, i].item() == -30.0  # itself: only a last resort
            for j in range(n):
                if j == i:
                    continue
                allowed = j < i if left else j > i
                if not allowed:
                    assert bias[h, i, j].item() == float("-inf"), (h, i, j)
                else:
                    expected = -pair_slopes[h].item() * (abs(j - i) - 1)
                    assert bias[h, i, j].item() == pytest.approx(expected), (h, i, j)
    # Content-free attention of a left head at query 5: the nearest left key takes the most
    # weight and the weights fall with distance; nothing to the right.
    w = bias[0, 5].softmax(-1)
    assert w[6:].sum() == 0 and (w[:5].diff() > 0).all() and w[4] > w[5]


def test_rope_turns_each_pair_forward_by_position_times_frequency():
    """x at position p, as a complex number per (even, odd) pair, is multiplied by e^{i p ω_k}:
    (1, 0) at position p becomes (cos pω, sin pω) — counter-clockwise, not the other way."""
    d, n = 8, 12
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    x = torch.randn(1, 1, n, d)
    out = rotate(x)[0, 0].double()
    z = torch.complex(x[0, 0, :, 0::2].double(), x[0, 0, :, 1::2].double())
    turned = z * torch.exp(1j * torch.arange(n, dtype=torch.float64)[:, None] * omega)
    torch.testing.assert_close(out[:, 0::2], turned.real, atol=1e-5, rtol=0)
    torch.testing.assert_close(out[:, 1::2], turned.imag, atol=1e-5, rtol=0)
    e0 = torch.zeros(1, 1, 3, d)
    e0[..., 0] = 1
    assert rotate(e0)[0, 0, 1, :2].tolist() == pytest.approx([math.cos(1.0), math.sin(1.0)], abs=1e-6)


def test_rope_score_is_q_dot_k_turned_by_the_offset():
    """q at i, k at j: rotate(q)_i · rotate(k)_j = Re(conj(q) k e^{i (j - i) ω}) summed over pairs."""
    d, n = 16, 20
    torch.manual_seed(1)
    q, k = torch.randn(d, dtype=torch.float64), torch.randn(d, dtype=torch.float64)
    rq = rotate(q.float().expand(1, 1, n, d).contiguous())[0, 0].double()
    rk = rotate(k.float().expand(1, 1, n, d).contiguous())[0, 0].double()
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    zq, zk = torch.complex(q[0::2], q[1::2]), torch.complex(k[0::2], k[1::2])
    for i, j in [(0, 0), (3, 7), (7, 3), (0, 19), (19, 0), (10, 11)]:
        expected = (zq.conj() * zk * torch.exp(1j * (j - i) * omega)).real.sum()
        assert (rq[i] @ rk[j]).item() == pytest.approx(expected.item(), abs=1e-4), (i, j)
    # An offset and its negative differ (a rotation has a direction), so order is visible.
    assert abs((rq[3] @ rk[7]) - (rq[7] @ rk[3])) > 1e-3


@pytest.mark.parametrize("n_exact", [1, 3])
def test_relative_bucket_boundaries_on_both_sides(n_exact):
    rel = RelativeBucketBias(n_heads=1, n_exact=n_exact)
    n = 12
    b = rel.buckets(n)
    far_left, far_right = 0, 2 * n_exact + 2
    for i in range(n):
        for j in range(n):
            off = j - i
            if off < -n_exact:
                assert b[i, j] == far_left, (i, j)
            elif off > n_exact:
                assert b[i, j] == far_right, (i, j)
            else:
                assert b[i, j] == off + n_exact + 1, (i, j)  # exact: one bucket per offset
    assert len(torch.unique(b)) == 2 * n_exact + 3


def test_relative_bias_reads_its_bucket_and_counts_far_keys_exactly():
    """Bias(i, j) = scale·w[bucket(j - i)] − log(number of keys sharing i's far bucket), the count
    taken by brute force on both sides, also for a padded row."""
    n_exact, n = 2, 11
    rel = RelativeBucketBias(n_heads=2, n_exact=n_exact)
    with torch.no_grad():
        rel.bias.weight.copy_(torch.arange(2 * (2 * n_exact + 3), dtype=torch.float32).view(-1, 2) / 10)
    for length in (n, 7):
        out = rel(n, torch.tensor([length, n]))[0]  # (heads, q, k), row of real length `length`
        buckets = rel.buckets(n)
        for i in range(length):
            left = [j for j in range(length) if j - i < -n_exact]
            right = [j for j in range(length) if j - i > n_exact]
            for j in range(length):
                count = len(left) if j in left else len(right) if j in right else 1
                for h in range(2):
                    expected = rel.scale * rel.bias.weight[buckets[i, j], h].item() - math.log(count)
                    assert out[h, i, j].item() == pytest.approx(expected, abs=1e-5), (length, i, j, h)


def test_sinusoidal_even_columns_are_sines_odd_columns_cosines():
    pe = sinusoidal_table(5, 4)
    assert pe[0].tolist() == [0.0, 1.0, 0.0, 1.0]  # position 0: sin 0 = 0, cos 0 = 1
    assert pe[1, 0].item() == pytest.approx(math.sin(1.0)) and pe[1, 2].item() == pytest.approx(math.sin(0.01))
