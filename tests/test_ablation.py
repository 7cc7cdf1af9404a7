"""attnkit.interp (ablation, sweep, studies): the context manager, the mean, the refusal, and the fast
sweep's exactness.

Most tests use an untrained model. Its answers are wrong, so where an accuracy must move,
the targets are the intact model's own greedy answers: the intact model then scores 100 %
and every ablation that changes an answer shows up.
"""

import numpy as np
import pytest
import torch

from attnkit import interp
from attnkit.adder import CHECKPOINT, Adder
from attnkit.adder.data import BOS, EOS, PAD, carry_stats, load_test_set
from attnkit.adder.evaluate import mean_z
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.core.head_ablation import gate_z
from attnkit.interp.sweep import _decide

pytestmark = pytest.mark.usefixtures("one_thread")


def untrained(seed=0, **cfg) -> Adder:
    torch.manual_seed(seed)
    return Adder(Seq2SeqTransformer(Seq2SeqConfig(**cfg)))


def own_answers(model, a, b) -> interp.Problems:
    """Problems whose targets are the intact model's greedy answers (up to its first </s>)."""
    p = interp.Problems.from_operands(model, a, b)
    out = model.greedy(p.src)
    after_eos = ((out == EOS).cumsum(1) - (out == EOS).long()) > 0
    gold = out.masked_fill(after_eos | ((out == PAD).cumsum(1) > 0), PAD)
    return interp.Problems(p.src, torch.cat([torch.full_like(out[:, :1], BOS), out[:, :-1]], dim=1), gold)


@pytest.fixture(scope="module")
def small():
    a, b = load_test_set()
    return a[:400], b[:400]


def no_hooks(model) -> bool:
    return not any(point.fns for point in model.hook_points().values())


def z_cache(model, p):
    """Every attention module's z in one teacher-forced pass: {"enc.self.0": (batch, heads, q_pos, d_head)}."""
    names = list(model.attention_modules())
    with torch.no_grad():
        _, cache = model.run_with_cache(p.src, p.tgt_in, names=[f"{n}.hook_z" for n in names])
    return {n: cache[f"{n}.hook_z"] for n in names}


def test_ablate_restores_the_model_even_when_the_body_raises(untrained_adder, small):
    src = interp.Problems.from_operands(untrained_adder.model, *small).src[:20]
    before = untrained_adder.model.greedy(src)
    with pytest.raises(RuntimeError, match="boom"):
        with untrained_adder.ablate(["dec.cross.1.2", "enc.self.0.3"], mode="mean"):
            assert untrained_adder.model.hook_points()["dec.cross.1.hook_z"].fns
            raise RuntimeError("boom")
    assert no_hooks(untrained_adder.model)
    assert torch.equal(untrained_adder.model.greedy(src), before)


def test_unknown_head_id_lists_the_valid_ones(untrained_adder):
    with pytest.raises(ValueError) as e:
        with untrained_adder.ablate(["dec.cross.2.0"]):
            pass
    message = str(e.value)
    assert "dec.cross.2.0" in message and all(h in message for h in untrained_adder.heads)
    with pytest.raises(ValueError, match="zero"):
        with untrained_adder.ablate(["dec.cross.1.0"], mode="median"):
            pass
    assert no_hooks(untrained_adder.model)


def test_zero_ablation_zeroes_that_heads_z_and_changes_the_output(untrained_adder, small):
    p = interp.Problems.from_operands(untrained_adder.model, *small)
    clean = z_cache(untrained_adder.model, p)
    with torch.no_grad(), untrained_adder.ablate(["dec.cross.1.2"]):
        cut = z_cache(untrained_adder.model, p)
        ablated = untrained_adder.model(p.src, p.tgt_in)
    logits = untrained_adder.model(p.src, p.tgt_in).detach()
    z, z0 = cut["dec.cross.1"], clean["dec.cross.1"]
    assert torch.all(z[:, 2] == 0) and z0[:, 2].abs().sum() > 0
    assert torch.equal(z[:, [0, 1, 3]], z0[:, [0, 1, 3]])  # the other heads are untouched
    assert torch.equal(cut["dec.cross.0"], clean["dec.cross.0"])  # and so is the layer before
    assert not torch.allclose(ablated, logits)


def test_mean_mode_outputs_the_mean_z_over_real_positions(untrained_adder, small):
    a, b = small
    means = mean_z(untrained_adder.model, a, b)
    p = interp.Problems.from_operands(untrained_adder.model, a, b)
    cache = z_cache(untrained_adder.model, p)
    real = p.gold != PAD  # decoder rows: <s> and each answer digit
    expected = cache["dec.self.0"].permute(1, 0, 2, 3)[:, real].mean(dim=1)  # (heads, d_head)
    torch.testing.assert_close(means["dec.self.0"], expected)
    real_src = p.src != PAD
    torch.testing.assert_close(means["enc.self.1"], cache["enc.self.1"].permute(1, 0, 2, 3)[:, real_src].mean(1))

    held_out = mean_z(untrained_adder.model)  # the definition used by mode="mean": the whole held-out set
    assert mean_z(untrained_adder.model) is held_out  # computed once per model
    with torch.no_grad(), untrained_adder.ablate(["enc.self.1.3", "dec.self.0.1"], mode="mean"):
        cut = z_cache(untrained_adder.model, p)
        assert mean_z(untrained_adder.model) is held_out  # asked inside an ablation: still the intact model's
    assert torch.equal(cut["enc.self.1"][:, 3], held_out["enc.self.1"][3].expand_as(cut["enc.self.1"][:, 3]))
    assert torch.equal(cut["dec.self.0"][:, 1], held_out["dec.self.0"][1].expand_as(cut["dec.self.0"][:, 1]))


def test_nested_ablations_compose_and_unwind(untrained_adder, small):
    p = interp.Problems.from_operands(untrained_adder.model, *small)
    with untrained_adder.ablate(["dec.self.1.0"], mode="mean"):
        with untrained_adder.ablate(["dec.self.1.2"]):
            z = z_cache(untrained_adder.model, p)["dec.self.1"]
        assert len(untrained_adder.model.hook_points()["dec.self.1.hook_z"].fns) == 1  # the inner block's hook is gone
    assert torch.all(z[:, 2] == 0)
    assert torch.equal(z[:, 0], mean_z(untrained_adder.model)["dec.self.1"][0].expand_as(z[:, 0]))
    assert no_hooks(untrained_adder.model)


def test_blocks_exiting_in_crossed_order_restore_exactly(untrained_adder, small):
    p = interp.Problems.from_operands(untrained_adder.model, *small)
    clean = z_cache(untrained_adder.model, p)
    inner_heads = ["dec.self.1.2", "enc.self.0.1"]
    with untrained_adder.ablate(inner_heads, mode="mean"):
        inner_only = z_cache(untrained_adder.model, p)
    outer, inner = untrained_adder.ablate(["dec.self.1.0"]), untrained_adder.ablate(inner_heads, mode="mean")
    outer.__enter__()
    inner.__enter__()
    try:
        outer.__exit__(None, None, None)  # the outer block ends first: only the inner heads stay removed
        z = z_cache(untrained_adder.model, p)
        assert all(torch.equal(z[n], inner_only[n]) for n in z)
    finally:
        inner.__exit__(None, None, None)
    assert no_hooks(untrained_adder.model)
    after = z_cache(untrained_adder.model, p)
    assert all(torch.equal(after[n], clean[n]) for n in clean)


def test_a_broken_model_is_refused_unless_forced(untrained_adder):
    with pytest.raises(interp.BaselineTooLowError, match=r"below 99 %.*force=True"):
        interp.check_baseline(untrained_adder)
    with pytest.raises(interp.BaselineTooLowError):
        interp.single_head_sweep(untrained_adder)
    with pytest.raises(interp.BaselineTooLowError):
        interp.joint_pruning(untrained_adder)
    with pytest.warns(UserWarning, match="measures nothing"):
        assert interp.check_baseline(untrained_adder, force=True) < 0.99


@pytest.mark.slow  # 15-20 s each: the plain loop is the slow baseline
@pytest.mark.parametrize("mode", interp.MODES)
def test_the_fast_sweep_equals_the_plain_loop_exactly(untrained_adder, small, mode):
    p = own_answers(untrained_adder.model, small[0][:250], small[1][:250])
    configs = [[]] + [[h] for h in untrained_adder.heads]
    configs += [untrained_adder.heads[::5], ["dec.cross.1.0", "dec.self.0.3"]]
    plain = interp.plain_matches(untrained_adder, p, configs, mode)
    assert plain[0].all() and 0 < plain[1:].mean() < 1  # the ablations really change answers
    np.testing.assert_array_equal(interp.fast_matches(untrained_adder, p, configs, mode), plain)
    # Small batches (several blocks, several row chunks) and the greedy fallback alone agree too.
    np.testing.assert_array_equal(interp.fast_matches(untrained_adder, p, configs, mode, rows=150), plain)
    base = ["dec.self.0.1", "enc.self.1.2"]  # ablations on top of others (joint pruning's steps)
    np.testing.assert_array_equal(
        interp.fast_matches(untrained_adder, p, configs[:9], mode, base=base),
        interp.plain_matches(untrained_adder, p, [base + c for c in configs[:9]], mode),
    )
    some = [0, 1, 9, 17, 25, 26]
    np.testing.assert_array_equal(
        interp.fast_matches(untrained_adder, p, [configs[i] for i in some], mode, margin=float("inf")), plain[some]
    )


def test_decide_trusts_only_clear_margins():
    gold = torch.tensor([[1, 2, PAD], [1, 2, PAD], [1, 2, PAD], [1, 2, PAD]])
    logits = torch.zeros(4, 3, 14)
    logits[:, 0, 1] = logits[:, 1, 2] = 5.0  # all right ...
    logits[1, 0, 3] = 9.0  # ... but row 1 is clearly wrong at position 0
    logits[2, 1, 7] = 5.0 - 1e-5  # row 2: a near tie where it matters
    logits[3, 0, 3] = 9.0  # row 3: clearly wrong first; a later tie is irrelevant
    logits[3, 1, 7] = 5.0
    right, unsure = _decide(logits, gold, margin=1e-3)
    assert right.tolist() == [True, False, False, False]
    assert unsure.tolist() == [False, False, True, False]


def test_joint_pruning_removes_the_least_harmful_head_each_time():
    tiny = untrained(seed=1, n_heads=2, n_enc_layers=1, n_dec_layers=1, d_model=32)
    a, b = load_test_set()
    p = own_answers(tiny.model, a[:300], b[:300])
    order, curve = interp.prune_order(tiny, p, "zero")
    assert sorted(order) == sorted(tiny.heads) and len(curve) == len(order) + 1 and curve[0] == 1.0
    removed = []
    for step, head in enumerate(order):  # brute force with the plain loop, step by step
        remaining = [h for h in tiny.heads if h not in removed]
        acc = interp.plain_matches(tiny, p, [removed + [h] for h in remaining], "zero").mean(axis=1)
        assert head == remaining[int(np.argmax(acc))] and curve[step + 1] == acc.max()
        removed.append(head)


def test_gradient_importance_is_the_mean_absolute_gate_gradient(untrained_adder, small):
    a, b = small
    with pytest.warns(UserWarning):
        imp = interp.gradient_importance(untrained_adder, "zero", force=True, a=a[:50], b=b[:50])
    assert len(imp["raw"]) == 24 and all(v >= 0 for v in imp["raw"].values())
    layer = [imp["normalised"][f"dec.cross.0.{h}"] for h in range(4)]
    assert np.linalg.norm(layer) == pytest.approx(1.0)
    # One problem by finite differences: the loss as head dec.cross.0.1's gate leaves 1.
    p = interp.Problems.from_operands(untrained_adder.model, a[:1], b[:1])
    with pytest.warns(UserWarning):
        one = interp.gradient_importance(untrained_adder, "zero", force=True, a=a[:1], b=b[:1])

    def loss(g):
        gate = torch.tensor([1.0, g, 1.0, 1.0])
        logits = untrained_adder.model.run_with_hooks(
            p.src, p.tgt_in, hooks=[("dec.cross.0.hook_z", lambda z, hook: gate_z(z, gate))]
        )
        return torch.nn.functional.cross_entropy(logits[0], p.gold[0], ignore_index=PAD, reduction="sum").item()

    with torch.no_grad():
        fd = abs(loss(1 + 1e-2) - loss(1 - 1e-2)) / 2e-2
    assert one["raw"]["dec.cross.0.1"] == pytest.approx(fd, rel=1e-2)
    assert no_hooks(untrained_adder.model)


def test_rank_correlation():
    assert interp.rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert interp.rank_correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert interp.rank_correlation([1, 2, 3, 4], [0, 0, 1, 1]) == pytest.approx(0.894427, abs=1e-6)  # ties


def test_sweep_and_carry_bookkeeping_on_a_known_matrix(untrained_adder):
    a, b = load_test_set()
    n_carries, chain = carry_stats(a, b)
    correct = np.ones((25, len(a)), dtype=bool)
    correct[1, :100] = False  # enc.self.0.0 breaks 100 problems: 1 point
    correct[24, n_carries >= 1] = False  # dec.cross.1.3 breaks every carry problem
    with pytest.warns(UserWarning):
        sweep = interp.single_head_sweep(untrained_adder, force=True, correct=correct)
        carries = interp.carry_breakdown(untrained_adder, force=True, correct=correct)
    assert sweep["baseline"] == 1.0 and sweep["ranking"][:2] == ["dec.cross.1.3", "enc.self.0.0"]
    assert sweep["critical"] == ["dec.cross.1.3", "enc.self.0.0"]
    assert sweep["share_prunable_one_at_a_time"] == 22 / 24
    assert carries["carry_dependent"][0] == "dec.cross.1.3"
    assert carries["drop_points"]["dec.cross.1.3"] == {"no_carry": 0.0, "carry": 100.0, "chain_2plus": 100.0}


@pytest.mark.slow
@pytest.mark.skipif(not CHECKPOINT.exists(), reason="needs the committed checkpoint data/adder.pt")
def test_fast_equals_plain_on_the_trained_adder(adder):
    a, b = load_test_set()
    p = interp.Problems.from_operands(adder.model, a[::40], b[::40])  # 250 problems across the set
    configs = [[]] + [[h] for h in adder.heads]
    for mode in interp.MODES:
        np.testing.assert_array_equal(
            interp.fast_matches(adder, p, configs, mode), interp.plain_matches(adder, p, configs, mode)
        )


def test_the_explorer_reports_errors_inside_itself(untrained_adder):
    from attnkit.ui.widgets import AblationExplorer

    explorer = AblationExplorer(untrained_adder, n_problems=200)  # untrained: refused, said in the widget
    assert "99 %" in explorer.output.value and all(t.disabled for t in explorer.toggles.values())
    with pytest.warns(UserWarning, match="measures nothing"):
        forced = AblationExplorer(untrained_adder, n_problems=200, force=True)
    assert len(forced.toggles) == 24 and forced.result["exact_match"] == 0.0
    forced.set_removed(["dec.cross.1.2"], mode="mean")
    assert forced.result["removed"] == ["dec.cross.1.2"] and forced.result["mode"] == "mean"
    assert no_hooks(untrained_adder.model)
    forced.problem.value = "12+"  # malformed: a message, not a traceback
    assert "⚠" in forced.output.value
