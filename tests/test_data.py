import numpy as np
import pytest
import torch

from attnkit.adder.data import (
    BOS,
    EOS,
    PAD,
    ProblemSampler,
    carry_stats,
    decode_digits,
    encode_sources,
    encode_targets,
    load_test_set,
    make_test_set,
    parse_problem,
    problem_keys,
    tokens,
)


def test_digit_ids_are_digits_and_pad_is_not_a_digit():
    src = encode_sources(np.array([5, 663]), np.array([5, 497]), 3)  # zero-padded by default
    assert src[0].tolist() == [0, 0, 5, 10, 0, 0, 5]
    assert src[1].tolist() == [6, 6, 3, 10, 4, 9, 7]
    unpadded = encode_sources(np.array([5, 663]), np.array([5, 497]), 3, zero_pad=False)
    assert unpadded[0].tolist() == [5, 10, 5, PAD, PAD, PAD, PAD]
    assert unpadded[1].tolist() == src[1].tolist()
    assert PAD not in range(10)


@pytest.mark.parametrize("reverse, body", [(False, [1, 1, 6, 0]), (True, [0, 6, 1, 1])])
def test_targets_have_bos_eos_and_padding(reverse, body):
    tgt = encode_targets(np.array([1160, 10]), 3, reverse)
    assert tgt[0].tolist() == [BOS, *body, EOS]
    assert tgt[1].tolist()[:4] == [BOS, *([1, 0] if not reverse else [0, 1]), EOS]
    assert tgt[1].tolist()[4:] == [PAD, PAD]
    assert decode_digits(tgt[0, 1:].tolist(), reverse) == "1160"


@pytest.mark.parametrize("bad", ["12a+3", "1+", "", "1-2", "+5", "1+2+3", "1000+1"])
def test_parse_problem_names_the_bad_problem(bad):
    with pytest.raises(ValueError, match=repr(bad).replace("+", r"\+")):
        parse_problem(bad, 3)


def test_parse_problem_accepts_spaces_and_leading_zeros():
    assert parse_problem(" 663 + 497 ") == (663, 497)
    assert parse_problem("007+0999") == (7, 999)


def test_carry_stats_counts_carries_and_chains():
    n, longest = carry_stats(np.array([555, 123, 999, 190]), np.array([445, 456, 1, 10]))
    assert n.tolist() == [3, 0, 3, 1]  # 190+10: only 9+1 carries
    assert longest.tolist() == [3, 0, 3, 1]
    n, longest = carry_stats(np.array([509]), np.array([191]))  # 9+1 carries, 0+9+1 carries, 5+1+1 no
    assert n.tolist() == [2] and longest.tolist() == [2]


def test_committed_test_set_is_the_generated_one():
    a, b = load_test_set()
    ga, gb = make_test_set()
    assert len(a) == 10_000 and (a == ga).all() and (b == gb).all()
    assert len(np.unique(problem_keys(a, b, 3))) == 10_000


def test_sampler_never_draws_a_held_out_problem_and_is_seeded():
    a, b = load_test_set()
    held_out = problem_keys(a, b, 3)
    sa, sb = ProblemSampler(3, held_out, seed=1).sample(50_000)
    assert not np.isin(problem_keys(sa, sb, 3), held_out).any()
    again = ProblemSampler(3, held_out, seed=1).sample(50_000)
    assert (again[0] == sa).all() and (again[1] == sb).all()
    assert (sa < 10).mean() > 0.03  # short operands are not vanishingly rare


def test_tokens_drop_padding():
    assert tokens([5, 10, 5, PAD]) == ["5", "+", "5"]


def carries_by_hand(x: int, y: int, n_digits: int = 3) -> tuple[int, int]:
    """Column addition on strings: (number of carries, longest run of consecutive carries)."""
    xs, ys = str(x).zfill(n_digits)[::-1], str(y).zfill(n_digits)[::-1]
    carry, count, run, longest = 0, 0, 0, 0
    for p in range(n_digits):
        carry = int(int(xs[p]) + int(ys[p]) + carry >= 10)
        count += carry
        run = run + 1 if carry else 0
        longest = max(longest, run)
    return count, longest


def test_carry_chains_are_consecutive_carries_not_all_carries():
    # 101+909: units carry, tens do not, hundreds carry: two carries, longest chain 1
    n, longest = carry_stats(np.array([101, 990, 909, 0, 5]), np.array([909, 10, 91, 0, 5]))
    assert n.tolist() == [2, 2, 3, 0, 1]
    assert longest.tolist() == [1, 2, 3, 0, 1]


def test_carry_stats_agree_with_column_addition_by_hand():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 1000, 3000), rng.integers(0, 1000, 3000)
    n, longest = carry_stats(a, b)
    by_hand = np.array([carries_by_hand(x, y) for x, y in zip(a.tolist(), b.tolist())])
    assert (n == by_hand[:, 0]).all() and (longest == by_hand[:, 1]).all()
    assert set(longest.tolist()) == {0, 1, 2, 3} and (n != longest).any()


def test_targets_round_trip_through_decode_for_every_length():
    sums = np.array([0, 7, 10, 99, 100, 999, 1000, 1998])
    for reverse in (False, True):
        tgt = encode_targets(sums, 3, reverse)
        assert [decode_digits(row[1:], reverse) for row in tgt.tolist()] == [str(s) for s in sums.tolist()]
        ends = (tgt == EOS).int().argmax(1)
        assert ends.tolist() == [len(str(s)) + 1 for s in sums.tolist()]
        assert ((tgt == PAD) == (torch.arange(tgt.size(1)) > ends[:, None])).all()
