import numpy as np
import torch

from attnkit.adder.data import BOS, PAD, encode_sources
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer


def small_model(seed=0):
    torch.manual_seed(seed)
    return Seq2SeqTransformer(Seq2SeqConfig(d_model=32, n_heads=4, d_ff=64)).eval()


def test_incremental_greedy_equals_rerunning_the_whole_prefix():
    model = small_model()
    rng = np.random.default_rng(0)
    src = encode_sources(rng.integers(0, 1000, 300), rng.integers(0, 1000, 300), 3)
    with torch.no_grad():
        memory, pad = model.encode(src), src == PAD
        tgt = torch.full((300, 1), BOS)
        for _ in range(model.cfg.max_tgt_len - 1):
            tgt = torch.cat([tgt, model.decode(tgt, memory, pad)[:, -1:].argmax(-1)], dim=1)
    assert torch.equal(model.greedy(src, chunk=64), tgt[:, 1:])


def test_one_forward_pass_yields_every_heads_pattern():
    model = small_model()
    src = encode_sources(np.array([5, 663]), np.array([5, 497]), 3, zero_pad=False)  # "5+5" + padding
    tgt = torch.tensor([[BOS, 1, 0, 12, PAD], [BOS, 1, 1, 6, 0]])
    _, cache = model.run_with_cache(src, tgt)
    assert len(model.heads) == 24 and model.heads[0] == "enc.self.0.0" and "dec.cross.1.3" in model.heads
    for kind in ["enc.self", "dec.self", "dec.cross"]:
        for layer in range(2):
            pattern = cache[f"{kind}.{layer}.hook_pattern"]
            k_pos = src.size(1) if kind != "dec.self" else tgt.size(1)
            assert pattern.shape == (2, 4, src.size(1) if kind == "enc.self" else tgt.size(1), k_pos)
            torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))
    # padding in the source is never attended to; the decoder never looks ahead
    assert cache["enc.self.0.hook_pattern"][0, :, :, 3:].abs().max() == 0
    assert cache["dec.cross.1.hook_pattern"][0, :, :, 3:].abs().max() == 0
    assert cache["dec.self.0.hook_pattern"].triu(1).abs().max() == 0
    assert not any(point.fns for point in model.hook_points().values())  # the cache's hooks are gone
