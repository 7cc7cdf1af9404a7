"""attnkit.interp.patching: the normalisation's fixed points, batched sweeps against one-at-a-time
patches, and the carry pairs."""

import numpy as np
import pytest
import torch

from attnkit.adder import CHECKPOINT
from attnkit.adder.data import carry_stats
from attnkit.interp import patching
from attnkit.sortedness import load_classifier

CLEAN, CORRUPTED = "125+137", "125+134"
EPS32 = torch.finfo(torch.float32).eps


def effect_tol(model, clean, corrupted, ulps: int = 16) -> float:
    """How far a normalised effect may stray from its exact value through rounding alone.
    effect = (m_patched - m_corrupted) / (m_clean - m_corrupted), each m a float32 log-prob sum:
    CPU kernels (AVX2, AVX-512) and batch sizes round it differently by a few ulps of its own
    size (seen: 1.4 ulps), and dividing by the gap scales that error by |m| / gap. An untrained
    model's gap is small (0.027 against sums of 11.4 here), so its bound is loose (~1e-3)."""
    s = patching.setup(model, clean, corrupted)
    with torch.no_grad():
        m_clean, m_corrupted = (s.metric(s.model(*x)).sum().item() for x in (s.clean, s.corrupted))
    return ulps * EPS32 * (abs(m_clean) + abs(m_corrupted)) / abs(m_clean - m_corrupted)


def test_patching_everything_restores_the_clean_run_and_nothing_changes_nothing(untrained_adder):
    tol = effect_tol(untrained_adder, CLEAN, CORRUPTED)
    for name in ["hook_memory", "enc.0.hook_resid_pre", "hook_logits"]:  # everything downstream of the source
        assert patching.patch(untrained_adder, CLEAN, CORRUPTED, name) == pytest.approx(1.0, abs=tol)
        assert patching.patch(untrained_adder, CLEAN, CORRUPTED, name, source="corrupted") == pytest.approx(
            0.0, abs=tol
        )
    # the decoder's input is the clean answer in both runs: its embedding carries no difference
    assert patching.patch(untrained_adder, CLEAN, CORRUPTED, "hook_tgt_embed") == pytest.approx(0.0, abs=tol)
    assert patching.patch(untrained_adder, CLEAN, CORRUPTED, "hook_src_embed", positions=[0, 1, 2]) == pytest.approx(
        0.0, abs=tol
    )


def test_the_head_sweep_equals_one_patch_at_a_time(untrained_adder):
    result = patching.patch_heads(untrained_adder, CLEAN, CORRUPTED)
    assert result.effect["enc.self.0"].shape == (4, 7) and result.effect["dec.cross.1"].shape == (4, 5)
    assert result.by_output["dec.cross.1"].shape == (4, 5, 4)  # answer "262</s>": 4 tokens
    assert result.labels["out"] == ["2", "6", "2", "</s>"]
    for name, head, pos in [("enc.self.0", 1, 6), ("dec.cross.1", 3, 2), ("dec.self.0", 0, 1)]:
        one = patching.patch(untrained_adder, CLEAN, CORRUPTED, f"{name}.hook_z", head=head, positions=[pos])
        # two batch sizes, each rounded its own way: twice the bound
        assert result.effect[name][head, pos] == pytest.approx(
            one, abs=2 * effect_tol(untrained_adder, CLEAN, CORRUPTED)
        )
    # decoder self-attention in layer 0 sees only the decoder's input, the same in both runs
    assert np.abs(result.effect["dec.self.0"]).max() < 1e-6
    head_id, pos, value = result.strongest(1)[0]
    name, h = head_id.rsplit(".", 1)
    assert (
        result.effect[name][int(h), pos]
        == value
        == max((e.flat[np.abs(e).argmax()] for e in result.effect.values()), key=abs)
    )


def test_residual_patching_is_complete_at_the_source_and_empty_before_the_difference(untrained_adder):
    res = patching.patch_residual(untrained_adder, CLEAN, CORRUPTED)
    assert set(res) == {
        "enc.0.hook_resid_post",
        "enc.1.hook_resid_post",
        "dec.0.hook_resid_post",
        "dec.1.hook_resid_post",
    }
    # the memory holds everything the decoder learns about the source: all positions together restore it
    assert patching.patch(untrained_adder, CLEAN, CORRUPTED, "hook_memory") == pytest.approx(
        1.0, abs=effect_tol(untrained_adder, CLEAN, CORRUPTED)
    )
    assert res["enc.1.hook_resid_post"].shape == (7,) and res["dec.1.hook_resid_post"].shape == (5,)


def test_classifier_patching():
    clf = load_classifier("rope")
    clean, corrupted = [1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 4, 3, 5, 6, 7, 8]  # sorted vs one swap
    tol = effect_tol(clf, clean, corrupted)
    assert patching.patch(clf, clean, corrupted, "hook_embed") == pytest.approx(1.0, abs=tol)
    assert patching.patch(clf, clean, corrupted, "hook_embed", positions=[0, 1, 5, 6, 7]) == pytest.approx(0.0, abs=tol)
    result = patching.patch_heads(clf, clean, corrupted)
    assert set(result.effect) == {"enc.self.0", "enc.self.1"} and result.effect["enc.self.0"].shape == (4, 8)
    for head, pos in [(2, 3), (0, 2), (3, 4)]:
        one = patching.patch(clf, clean, corrupted, "enc.self.1.hook_z", head=head, positions=pos)
        assert result.effect["enc.self.1"][head, pos] == pytest.approx(one, abs=2 * tol)
    with pytest.raises(ValueError, match="one length"):
        patching.patch(clf, clean, corrupted[:5], "hook_embed")
    with pytest.raises(TypeError, match="Adder or a sortedness classifier"):
        patching.patch(object(), clean, corrupted, "hook_embed")


def test_carry_pairs_remove_exactly_one_carry():
    assert patching.carry_pair(125, 137) == ("125+137", "125+134")
    assert patching.carry_pair(125, 134) is None  # no carry to remove
    assert patching.carry_pair(555, 445) is None  # removing the units carry would also remove the chain
    assert patching.carry_pair(150, 160, column=1) == ("150+160", "150+140")
    rng = np.random.default_rng(0)
    for a, b in rng.integers(0, 1000, (300, 2)):
        for column in range(3):
            pair = patching.carry_pair(int(a), int(b), column)
            if pair is None:
                continue
            (a1, b1), (a2, b2) = (map(int, p.split("+")) for p in pair)
            assert a1 == a2 and b2 < b1 and (b1 - b2) % 10**column == 0 and b1 - b2 < 10 ** (column + 1)
            n1, _ = carry_stats(np.array([a1]), np.array([b1]))
            n2, _ = carry_stats(np.array([a2]), np.array([b2]))
            assert n1[0] - n2[0] == 1


@pytest.mark.skipif(not CHECKPOINT.exists(), reason="needs the committed checkpoint")
def test_on_the_trained_adder_the_units_carry_reaches_the_tens_digit(adder):
    """125+137 = 262 vs 125+134 = 259: the tens digit "6" (answer token 1) is the carry's doing."""
    result = patching.patch_heads(adder, CLEAN, CORRUPTED)
    tens = 1
    assert result.clean_metric[tens] > -0.1 and result.corrupted_metric[tens] < -1.0
    # enc.self.0.1 at b's tens digit (source position 5) reads the units column: alone it restores
    # most of the tens digit; dec.cross.1.3, writing the tens digit (decoder position 1), reads it back.
    assert result.by_output["enc.self.0"][1, 5, tens] > 0.8
    assert result.by_output["dec.cross.1"][3, 1, tens] > 0.8
    # heads that do not look across columns carry nothing of it
    assert np.nanmax(np.abs(result.by_output["dec.self.0"][:, :, tens])) < 0.05
