"""The fused greedy path (attnkit/adder/fused.py) gives the hooked path's answers, and is taken only
when nothing could tell the two apart."""

import numpy as np
import pytest
import torch

from attnkit.adder.data import PAD, encode_sources, load_test_set
from attnkit.adder.fused import can_fuse, chunk_size, fused_greedy
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer


@pytest.fixture(scope="module")
def held_out_src(adder):
    a, b = load_test_set()
    return encode_sources(a, b, adder.model.cfg.n_digits, adder.model.cfg.zero_pad)


def test_the_fused_path_gives_the_hooked_paths_answers_on_every_held_out_sum(adder, held_out_src):
    model = adder.model.eval()
    assert can_fuse(model, held_out_src, PAD)
    hooked = model._greedy(held_out_src, 512)
    assert torch.equal(model.greedy(held_out_src), hooked)
    assert torch.equal(fused_greedy(model, held_out_src[:999], chunk=100), hooked[:999])  # chunks change nothing


@pytest.mark.parametrize(
    "cfg", [Seq2SeqConfig(n_heads=2, n_enc_layers=1, n_dec_layers=3, d_ff=32), Seq2SeqConfig(n_digits=5)]
)
def test_the_fused_path_follows_any_configuration(cfg):
    torch.manual_seed(0)
    model = Seq2SeqTransformer(cfg).eval()
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 10**cfg.n_digits, 300), rng.integers(0, 10**cfg.n_digits, 300)
    src = encode_sources(a, b, cfg.n_digits, cfg.zero_pad)
    assert torch.equal(fused_greedy(model, src), model._greedy(src, 512))


def test_anything_the_fused_path_would_skip_sends_greedy_down_the_hooked_path(adder, held_out_src):
    model, src = adder.model.eval(), held_out_src[:50]
    seen = []
    with model.hooks([("dec.cross.0.hook_pattern", lambda x, hook: seen.append(x.shape))]):
        assert not can_fuse(model, src, PAD)
        model.greedy(src)
    assert len(seen) == model.cfg.max_tgt_len - 1  # the hook saw every decoding step
    handle = model.unembed.register_forward_hook(lambda *args: seen.append("torch hook"))
    try:
        assert not can_fuse(model, src, PAD)
        model.greedy(src)
    finally:
        handle.remove()
    assert seen[-1] == "torch hook"
    padded = encode_sources(np.array([5, 12]), np.array([7, 30]), 3, zero_pad=False)
    assert bool((padded == PAD).any()) and not can_fuse(model, padded, PAD)
    model.train()
    try:
        assert not can_fuse(model, src, PAD)
    finally:
        model.eval()
    assert can_fuse(model, src, PAD)


def test_a_chunk_holds_a_bounded_amount_of_memory(adder):
    cfg = adder.model.cfg
    per_problem = 4 * cfg.max_src_len * (cfg.d_ff + 6 * cfg.d_model + cfg.n_heads * cfg.max_src_len)
    assert (
        512 <= chunk_size(adder.model, cfg.max_src_len)
        and chunk_size(adder.model, cfg.max_src_len) * per_problem <= 16 * 2**20
    )
