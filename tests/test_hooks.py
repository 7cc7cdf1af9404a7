"""attnkit.core.hooks: hook names, the cache, temporary hooks, thread safety."""

import threading

import numpy as np
import pytest
import torch

from attnkit.adder.data import BOS, PAD, encode_sources
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.core.head_ablation import ablate_heads
from attnkit.core.hooks import ActivationCache, HookedModel, HookPoint
from attnkit.sortedness import SortednessClassifier, SortednessConfig

ATTENTION_HOOKS = ("hook_q", "hook_k", "hook_v", "hook_scores", "hook_pattern", "hook_z", "hook_result")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Seq2SeqTransformer(Seq2SeqConfig()).eval()


@pytest.fixture(scope="module")
def batch():
    src = encode_sources(np.array([663, 5, 999]), np.array([497, 5, 1]), 3)
    tgt = torch.tensor([[BOS, 1, 1, 6, 0], [BOS, 1, 0, 12, PAD], [BOS, 1, 0, 0, 0]])
    return src, tgt


def test_hook_names_cover_every_layer_and_attention_kind(model):
    names = model.hook_names()
    expected = {
        f"{m}.{h}"
        for m in ["enc.self.0", "enc.self.1", "dec.self.0", "dec.cross.0", "dec.self.1", "dec.cross.1"]
        for h in ATTENTION_HOOKS
    }
    expected |= {f"enc.{i}.hook_{x}" for i in range(2) for x in ("resid_pre", "resid_mid", "mlp_out", "resid_post")}
    expected |= {
        f"dec.{i}.hook_{x}"
        for i in range(2)
        for x in ("resid_pre", "resid_mid", "resid_cross", "mlp_out", "resid_post")
    }
    expected |= {"hook_src_embed", "hook_memory", "hook_tgt_embed", "hook_logits"}
    assert set(names) == expected and len(names) == len(expected)  # and no name twice
    clf = SortednessClassifier(SortednessConfig())
    assert {"enc.self.1.hook_pattern", "enc.0.hook_resid_post", "hook_embed", "hook_token_score"} <= set(
        clf.hook_names()
    )
    assert clf.heads[0] == "enc.self.0.0" and len(clf.heads) == 8


def test_cache_equals_the_modules_outputs(model, batch):
    src, tgt = batch
    logits, cache = model.run_with_cache(src, tgt)
    assert isinstance(cache, ActivationCache) and set(cache) == set(model.hook_names())
    torch.testing.assert_close(cache["hook_logits"], logits, rtol=0, atol=0)
    # each module output recomputed by hand from the cached input of its layer
    layer = model.encoder[1]
    x = cache["enc.1.hook_resid_pre"]
    attn_out = layer.self_attn(layer.ln_attn(x), key_padding_mask=src == PAD)
    torch.testing.assert_close(cache["enc.self.1.hook_result"], attn_out, rtol=0, atol=0)
    torch.testing.assert_close(cache["enc.1.hook_resid_mid"], x + attn_out, rtol=0, atol=0)
    z, pattern, v = cache["dec.cross.0.hook_z"], cache["dec.cross.0.hook_pattern"], cache["dec.cross.0.hook_v"]
    torch.testing.assert_close(z, pattern @ v, rtol=0, atol=1e-6)
    torch.testing.assert_close(
        pattern,
        cache["dec.cross.0.hook_scores"].softmax(-1) * (src != PAD)[:, None, None, :].any(-1, keepdim=True),
        rtol=0,
        atol=1e-6,
    )
    torch.testing.assert_close(cache["hook_memory"], model.encode(src), rtol=0, atol=0)
    assert cache["dec.self.0.hook_pattern"].triu(1).abs().max() == 0  # causal
    assert not any(p.fns for p in model.hook_points().values())


def test_cache_to_and_labelled_head_views(model, batch):
    _, cache = model.run_with_cache(*batch, names=["dec.cross.1.hook_pattern", "enc.self.0.hook_z"])
    assert set(cache) == {"dec.cross.1.hook_pattern", "enc.self.0.hook_z"}
    cache.labels = {"enc": [list("663+497")] * 3, "dec": [["<s>", "1", "1", "6", "0"]] * 3}
    table = cache.head("dec.cross.1.hook_pattern", head=2, sample=0)
    assert list(table.index) == ["<s>", "1", "1", "6", "0"] and list(table.columns) == list("663+497")
    np.testing.assert_allclose(table.to_numpy(), cache["dec.cross.1.hook_pattern"][0, 2].numpy())
    assert cache.head("enc.self.0.hook_z", 1).shape == (7, 16)
    assert cache.to("cpu")["enc.self.0.hook_z"].device.type == "cpu"
    with pytest.raises(KeyError, match="dec.cross.1.hook_pattern"):
        cache["dec.cross.1.pattern"]  # the message points at the real name


def test_hooks_replace_activations_and_are_removed_after_an_exception(model, batch):
    src, tgt = batch
    clean = model(src, tgt)
    zero = lambda x, hook: torch.zeros_like(x)
    changed = model.run_with_hooks(src, tgt, hooks=[("dec.1.hook_mlp_out", zero)])
    assert not torch.equal(changed, clean)
    with pytest.raises(RuntimeError, match="boom"):
        with model.hooks([("enc.self.0.hook_pattern", zero)]):
            raise RuntimeError("boom")
    with pytest.raises(ValueError, match="unknown hook name"):
        model.run_with_hooks(src, tgt, hooks=[("enc.self.9.hook_z", zero)])

    def fails(x, hook):
        raise ValueError("inside a hook")

    with pytest.raises(ValueError, match="inside a hook"):
        model.run_with_hooks(src, tgt, hooks=[("hook_logits", fails)])
    assert not any(p.fns for p in model.hook_points().values())
    torch.testing.assert_close(model(src, tgt), clean, rtol=0, atol=0)


class Twice(HookedModel, torch.nn.Module):
    """A model whose forward passes one hook point twice (as incremental decoding would)."""

    def __init__(self):
        super().__init__()
        self.hook_x = HookPoint()
        self.name_hooks()

    def forward(self, x):
        return self.hook_x(self.hook_x(x) + 1)


def test_hook_firing_twice_in_one_cached_run_is_refused():
    with pytest.raises(RuntimeError, match="hook_x fired twice"):
        Twice().run_with_cache(torch.zeros(2))
    twice = Twice()
    assert twice.run_with_hooks(torch.zeros(2), hooks=[("hook_x", lambda x, hook: x * 2)]).tolist() == [2.0, 2.0]


def test_without_hooks_sets_attached_hooks_aside(model, batch):
    src, tgt = batch
    clean = model(src, tgt)
    with ablate_heads(model, ["dec.cross.1.0", "enc.self.0.2"]):
        ablated = model(src, tgt)
        with model.without_hooks():
            torch.testing.assert_close(model(src, tgt), clean, rtol=0, atol=0)
        torch.testing.assert_close(model(src, tgt), ablated, rtol=0, atol=0)
    assert not torch.equal(ablated, clean)


def test_another_threads_forward_waits_while_hooks_are_attached(model, batch):
    src, tgt = batch
    clean = model(src, tgt)
    seen, started = {}, threading.Event()

    def other():
        started.set()
        seen["out"] = model(src, tgt)  # must wait for the block below to end

    with ablate_heads(model, model.heads):  # every head removed
        t = threading.Thread(target=other)
        t.start()
        started.wait()
        t.join(timeout=0.5)
        assert t.is_alive()  # blocked on the model's lock, not running with the ablation
    t.join()
    torch.testing.assert_close(seen["out"], clean, rtol=0, atol=0)


# ---------------------------------------------------------------- what carries over from TransformerLens


def test_transformerlens_style_snippets_run_as_written(model, batch):
    """Hooks as a TransformerLens user writes them: fn(activation, hook) called with hook= as a
    keyword, hook.name, fwd_hooks=, names_filter= (a predicate) and TL's 'hook_attn_scores'."""
    src, tgt = batch
    seen = []

    def zero_head(z, hook):  # TL: z[:, :, head]; here the head axis is 1
        seen.append(hook.name)
        z = z.clone()
        z[:, 1] = 0.0
        return z

    def keyword_only(pattern, *, hook):  # works only when called with hook= as a keyword
        seen.append(hook.name)

    out = model.run_with_hooks(
        src, tgt, fwd_hooks=[("dec.cross.1.hook_z", zero_head), ("dec.cross.1.hook_pattern", keyword_only)]
    )
    assert seen == ["dec.cross.1.hook_pattern", "dec.cross.1.hook_z"]
    with ablate_heads(model, ["dec.cross.1.1"]):
        assert torch.allclose(out, model(src, tgt), atol=1e-6)

    _, cache = model.run_with_cache(src, tgt, names_filter=lambda name: name.endswith("hook_pattern"))
    assert set(cache) == {n for n in model.hook_names() if n.endswith("hook_pattern")}
    _, cache = model.run_with_cache(src, tgt, names_filter="dec.cross.1.hook_attn_scores")
    assert list(cache) == ["dec.cross.1.hook_scores"]
    assert torch.equal(cache["dec.cross.1.hook_attn_scores"], cache["dec.cross.1.hook_scores"])
    z = model.run_with_cache(src, tgt, names=["enc.self.0.hook_z"])[1]["enc.self.0.hook_z"]
    assert z.shape == (src.size(0), model.cfg.n_heads, src.size(1), model.cfg.d_model // model.cfg.n_heads)


def test_a_hook_that_cannot_take_hook_as_a_keyword_is_refused_before_running(model, batch):
    src, tgt = batch
    calls = []

    def positional_only(z, point):
        calls.append(1)

    with pytest.raises(TypeError, match=r"called as fn\(activation, hook=point\)"):
        model.run_with_hooks(src, tgt, hooks=[("enc.self.0.hook_z", positional_only)])
    assert not calls and not model.hook_points()["enc.self.0.hook_z"].fns
    with pytest.raises(ValueError, match="names or names_filter"):
        model.run_with_cache(src, tgt, names=["hook_logits"], names_filter="hook_logits")


def test_the_other_transformerlens_idioms_work_alike(model, batch, adder):
    """A name predicate in fwd_hooks, TL's context manager model.hooks(fwd_hooks=...), and
    names_filter on Adder.run_with_cache (the three that differed from TransformerLens 3.9)."""
    src, tgt = batch
    seen = []
    model.run_with_hooks(
        src, tgt, fwd_hooks=[(lambda name: name.endswith("hook_pattern"), lambda x, hook: seen.append(hook.name))]
    )
    assert seen == [n for n in model.hook_names() if n.endswith("hook_pattern")]
    assert not any(p.fns for p in model.hook_points().values())

    def zero_head(z, hook):
        z = z.clone()
        z[:, 1] = 0.0
        return z

    with model.hooks(fwd_hooks=[("dec.cross.1.hook_z", zero_head)]):
        hooked = model(src, tgt)
    with ablate_heads(model, ["dec.cross.1.1"]):
        assert torch.equal(hooked, model(src, tgt))
    assert not any(p.fns for p in model.hook_points().values())
    with pytest.raises(TypeError, match="a string or a predicate on names"):
        model.run_with_hooks(src, tgt, fwd_hooks=[(3, zero_head)])

    answers, cache = adder.run_with_cache(
        ["663+497", "5+5"], names_filter=lambda name: name.endswith("cross.1.hook_pattern")
    )
    assert answers == ["1160", "10"] and set(cache) == {"dec.cross.1.hook_pattern", "src", "tgt"}
    _, cache = adder.run_with_cache(["663+497"], names_filter="enc.self.0.hook_z")
    assert set(cache) == {"enc.self.0.hook_z", "src", "tgt"}
