"""Issue 23, inside the models: hook return values, NaN from hooks, other threads during hooks and
ablations, stale cached statistics, every patching argument, one length cap, patching's memory."""

import threading
import time
import warnings

import numpy as np
import pytest
import torch

from attnkit.adder.evaluate import mean_z
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.core.hooks import HookPoint, HookWarning
from attnkit.interp import patching
from attnkit.sortedness import SortednessClassifier, SortednessConfig, load_classifier
from attnkit.sortedness import model as sortedness_model

pytestmark = pytest.mark.usefixtures("one_thread")
CLEAN, CORRUPTED = "125+137", "125+134"


@pytest.fixture(scope="module")
def clf():
    return load_classifier("alibi")


def sources(adder, problems):
    from attnkit.adder.data import encode_sources

    a, b = adder.parse(problems)
    return encode_sources(a, b, adder.cfg.n_digits, adder.cfg.zero_pad)


# ---------------------------------------------------------------- hook return values -----------


def broadcast_row(z, hook):
    return z[:1].mean(2, keepdim=True)  # (1, heads, 1, d_head): broadcasts silently


def as_double(z, hook):
    return z.double()


def zero(z, hook):
    return 0


def as_list(z, hook):
    return z.tolist()


@pytest.mark.parametrize(
    "fn, error, message",
    [
        (broadcast_row, ValueError, r"hook 'broadcast_row' on enc.self.0.hook_z returned a \(1, 4, 1, 16\)"),
        (as_double, ValueError, "returned a .* torch.float64 tensor"),
        (zero, TypeError, "hook 'zero' on enc.self.0.hook_z returned int"),
        (as_list, TypeError, "returned list"),
    ],
)
def test_a_hook_must_return_the_activations_shape_and_dtype(adder, fn, error, message):
    src = sources(adder, [CLEAN])
    tgt = torch.zeros(1, 5, dtype=torch.long)
    with pytest.raises(error, match=message):
        adder.model.run_with_hooks(src, tgt, hooks=[("enc.self.0.hook_z", fn)])
    assert adder.solve(["123+456"]) == ["579"]  # the hook was removed after the error


def test_a_hook_that_fills_nan_is_reported(adder):
    src = sources(adder, ["123+456"])
    with pytest.warns(HookWarning, match="hook 'fill' on enc.0.hook_resid_post put NaN"):

        def fill(x, hook):
            return torch.full_like(x, float("nan"))

        adder.model.run_with_hooks(src, torch.zeros(1, 5, dtype=torch.long), hooks=[("enc.0.hook_resid_post", fill)])


def test_non_finite_values_already_there_are_not_blamed_on_the_hook():
    point = HookPoint()
    x = torch.tensor([[0.0, float("-inf")]])  # e.g. scores masked with -inf before the hook
    with warnings.catch_warnings(), point.hooked(lambda s, hook: s.clone()):
        warnings.simplefilter("error", HookWarning)
        assert torch.equal(point(x), x)


# ---------------------------------------------------------------- threads ----------------------


def test_encode_in_another_thread_waits_for_an_ablation_and_sees_the_intact_model(adder):
    src = sources(adder, ["663+497"])
    intact = adder.model.encode(src)
    seen, started = [], threading.Event()

    def other():
        started.set()
        seen.append(adder.model.encode(src))

    with adder.ablate(adder.heads):
        worker = threading.Thread(target=other)
        worker.start()
        started.wait()
        time.sleep(0.3)
        assert not seen, "encode ran through the ablated model"
    worker.join(10)
    assert torch.equal(seen[0], intact)


def test_mean_z_is_recomputed_after_weights_change_in_place(tmp_path):
    torch.manual_seed(0)
    model = Seq2SeqTransformer(Seq2SeqConfig(d_model=16, d_ff=32)).eval()
    before = mean_z(model)["enc.self.0"].clone()
    dict(model.named_parameters())["encoder.0.self_attn.W_V.weight"].data.mul_(2)  # no version bump
    after = mean_z(model)["enc.self.0"]
    assert not torch.allclose(before, after)
    assert mean_z(model) is mean_z(model)  # unchanged weights: cached


# ---------------------------------------------------------------- patching arguments -----------


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"source": "clen"}, ValueError, "source must be 'clean' or 'corrupted', not 'clen'"),
        ({"head": -1}, ValueError, "head -1 is not one of this activation's heads 0 … 3"),
        ({"head": 7}, ValueError, "head 7 is not one of"),
        ({"head": True}, TypeError, "head must be a whole number"),
        ({"head": 1.0}, TypeError, "head must be a whole number"),
        ({"positions": 99}, ValueError, "position 99 is not one of this activation's positions 0 … 6"),
        ({"positions": [-1]}, ValueError, "position -1 is not one of"),
        ({"positions": []}, ValueError, "positions is empty"),
        ({"positions": "0"}, TypeError, "positions must be"),
    ],
)
def test_every_patch_argument_is_checked(adder, kwargs, error, message):
    with pytest.raises(error, match=message):
        patching.patch(adder, CLEAN, CORRUPTED, "enc.self.0.hook_z", **kwargs)


def test_a_patch_hook_name_must_be_a_hook(adder):
    with pytest.raises(ValueError, match="unknown hook name"):
        patching.patch(adder, CLEAN, CORRUPTED, "enc.self.0.hook_zz")
    with pytest.raises(TypeError, match="hook_name must be"):
        patching.patch(adder, CLEAN, CORRUPTED, 3)


@pytest.mark.parametrize(
    "corrupted, message", [([1, 2, 300, 4], "holds 300, outside the values 0–99"), ([1, 2, -3, 4], "holds -3, outside")]
)
def test_classifier_patching_checks_its_tokens(clf, corrupted, message):
    with pytest.raises(ValueError, match=message):
        patching.patch_heads(clf, [1, 2, 3, 4], corrupted)


@pytest.mark.parametrize("call", ["patch", "patch_heads", "patch_residual"])
def test_identical_inputs_are_refused_not_divided_by_zero(adder, call):
    args = {"patch": ("hook_memory",), "patch_heads": (), "patch_residual": ()}[call]
    with pytest.raises(ValueError, match="same input"):
        getattr(patching, call)(adder, CLEAN, CLEAN, *args)


def test_inputs_the_model_cannot_tell_apart_are_refused():
    model = SortednessClassifier(SortednessConfig(encoding="alibi")).eval()
    torch.nn.init.zeros_(model.head.weight)  # every input gets the same logit: a gap of exactly 0
    with pytest.raises(ValueError, match="same log-probability on both inputs"):
        patching.patch(model, [1, 2, 3], [1, 3, 2], "hook_embed")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"modules": ["enc.self.9"]}, "unknown attention module"),
        ({"modules": []}, "unknown attention module"),
        ({"min_gap": -1}, "min_gap must be"),
        ({"min_gap": "big"}, "min_gap must be"),
    ],
)
def test_patch_heads_checks_its_arguments(adder, kwargs, message):
    with pytest.raises(ValueError, match=message):
        patching.patch_heads(adder, CLEAN, CORRUPTED, **kwargs)


def test_patch_residual_checks_its_output_and_names(adder):
    with pytest.raises(ValueError, match="output 9 is not one of this activation's answer tokens 0 … 3"):
        patching.patch_residual(adder, CLEAN, CORRUPTED, output=9)
    with pytest.raises(ValueError, match="per-head ones go to patch"):
        patching.patch_residual(adder, CLEAN, CORRUPTED, names=["enc.self.0.hook_z"])


def test_strongest_never_ranks_nan():
    result = patching.HeadPatching({"m": np.array([[np.nan, 0.2], [-0.5, np.nan]])}, {}, np.zeros(1), np.zeros(1), {})
    assert result.strongest(3) == [("m.1", 0, -0.5), ("m.0", 1, 0.2)]


# ---------------------------------------------------------------- length cap and memory --------


@pytest.mark.parametrize("entry", ["forward", "run_with_cache", "run_with_hooks"])
def test_one_length_cap_for_every_classifier_entry_point(clf, entry):
    tokens = torch.zeros(1, 16_000, dtype=torch.long)
    call = {
        "forward": lambda: clf(tokens),
        "run_with_cache": lambda: clf.run_with_cache(tokens),
        "run_with_hooks": lambda: clf.run_with_hooks(tokens, hooks=[]),
    }[entry]
    with pytest.raises(ValueError, match="16000 tokens are longer than this classifier takes: 4096"):
        call()


def test_patching_splits_its_rows_to_stay_within_the_memory_budget(clf, monkeypatch):
    clean = list(range(0, 40, 2))
    corrupted = clean[:5] + [clean[6], clean[5]] + clean[7:]
    whole = patching.patch_heads(clf, clean, corrupted)
    calls = []
    real = clf.run_with_hooks
    monkeypatch.setattr(clf, "run_with_hooks", lambda *a, **k: calls.append(a[0].shape[0]) or real(*a, **k))
    # a budget for about 10 rows of 20 tokens at a time
    monkeypatch.setattr(sortedness_model, "MEMORY_BUDGET", 11 * sortedness_model.PATTERN_COPIES * 4 * 4 * 20**2)
    split = patching.patch_heads(clf, clean, corrupted)
    assert max(calls) <= 11 and len(calls) >= 2 * 8  # two modules, 80 rows each, in batches of ≤ 10 + 1
    for name in whole.effect:
        np.testing.assert_allclose(split.effect[name], whole.effect[name], atol=1e-5)


def test_a_sortedness_classifier_refuses_too_long_inputs_before_allocating():
    model = SortednessClassifier(SortednessConfig(encoding="learned", max_len=32))
    with pytest.raises(ValueError, match="set by its position table"):
        model(torch.zeros(2, 33, dtype=torch.long))
