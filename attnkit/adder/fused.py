"""Greedy decoding written for speed: the same model and the same answers as the hooked path of
`Seq2SeqTransformer.greedy`, without its per-activation module calls.

The hooked path calls a module for every activation (so that a hook can see or replace it); with
no hook attached those calls are pure overhead, and on a CPU a decoding step of a few hundred
problems is mostly overhead. Here each layer does its matrix products directly: Q, K and V in one
product (W_Q pre-scaled by 1/√d_head), keys and values written into a cache allocated once, the
written-out softmax of core/attention.py for the encoder's short rows. The decoder keeps its
keys and values position-major, (position, ..., batch, heads): a step's scores, softmax and weighted
sum then reduce over the outermost axis, along rows thousands of floats long, where the model's own
(batch, heads, position, d_head) layout would reduce rows of 5-16 floats (half the decoder's time).
`greedy` takes this path only when
nothing could see the difference: no hook attached, no padding in the sources, evaluation mode.
`tests/test_adder.py` holds it to the hooked path's answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.attention import MultiHeadAttention, softmax_short_rows
from .data import BOS

if TYPE_CHECKING:
    from ..core.blocks import EncoderLayer
    from .model import DecoderLayer, Seq2SeqTransformer

# Problems decoded at once: as many as fit this many bytes of activations. Larger chunks call
# fewer kernels (faster) and hold more memory, which a learner's kernel keeps once glibc gave it.
CHUNK_BYTES = 16 * 2**20
# The encoder's feed-forward block runs over a chunk's tokens in slices whose (tokens, d_ff) hidden
# layer takes this many bytes: a slice stays in a core's cache (2 MB of L2 here) from the first
# product through GELU to the second, which takes half the time of one pass over 6,272 tokens.
FF_SLICE_BYTES = 2**20


def chunk_size(model: Seq2SeqTransformer, n_src: int) -> int:
    """Problems per chunk for CHUNK_BYTES: the residual stream, its Q, K, V and the scores, and a
    (n_src, d_ff) hidden layer per problem (more than the feed-forward slices hold: a bound)."""
    cfg = model.cfg
    floats = n_src * (cfg.d_ff + 6 * cfg.d_model + cfg.n_heads * n_src)
    return max(64, CHUNK_BYTES // (4 * floats))


def _layer_norm(ln: nn.LayerNorm, x: Tensor) -> Tensor:
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


def _feed_forward(ff: nn.Sequential, x: Tensor) -> Tensor:
    first, second = cast(nn.Linear, ff[0]), cast(nn.Linear, ff[2])
    return F.linear(F.gelu(F.linear(x, first.weight, first.bias)), second.weight, second.bias)


def _scaled_q(attn: MultiHeadAttention) -> tuple[Tensor, Tensor]:
    """W_Q and its bias scaled by 1/√d_head: the scores come out scaled, one product fewer."""
    scale = attn.d_head**-0.5
    return attn.W_Q.weight * scale, attn.W_Q.bias * scale


def _qkv(attn: MultiHeadAttention) -> tuple[Tensor, Tensor]:
    """W_Q (scaled), W_K and W_V stacked: one matrix product instead of three."""
    w_q, b_q = _scaled_q(attn)
    return torch.cat([w_q, attn.W_K.weight, attn.W_V.weight]), torch.cat([b_q, attn.W_K.bias, attn.W_V.bias])


def _attend(q: Tensor, keys: Tensor, values: Tensor) -> Tensor:
    """One decoding step's attention, position-major. q (batch, heads, d_head), scaled; keys
    (pos, d_head, batch, heads); values (pos, batch, heads, d_head) -> z (batch, heads * d_head).
    Every sum runs over an outer axis: the softmax over positions is written out along axis 0."""
    scores = (keys * q.permute(2, 0, 1).contiguous()).sum(1)  # (pos, batch, heads)
    weights = (scores - scores.amax(0)).exp_()
    weights /= weights.sum(0)
    return (weights.unsqueeze(-1) * values).sum(0).flatten(1)


def _out(attn: MultiHeadAttention, z: Tensor) -> Tensor:
    return F.linear(z, attn.W_O.weight, attn.W_O.bias)


@torch.no_grad()
def fused_greedy(model: Seq2SeqTransformer, src: Tensor, chunk: int | None = None) -> Tensor:
    """(batch, src_pos) ids with no padding -> (batch, tgt_pos - 1) greedy ids after <s>."""
    cfg = model.cfg
    n_heads, d_head, steps = cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.max_tgt_len - 1
    encoder, decoder = cast(list["EncoderLayer"], list(model.encoder)), cast(list["DecoderLayer"], list(model.decoder))
    enc_qkv = [_qkv(layer.self_attn) for layer in encoder]
    dec_qkv = [_qkv(layer.self_attn) for layer in decoder]
    cross_q = [_scaled_q(layer.cross_attn) for layer in decoder]
    cross_kv = [  # W_K and W_V stacked: the memory's keys and values in one product
        (torch.cat([m.W_K.weight, m.W_V.weight]), torch.cat([m.W_K.bias, m.W_V.bias]))
        for m in (layer.cross_attn for layer in decoder)
    ]
    ff_rows = max(64, FF_SLICE_BYTES // (4 * cfg.d_ff))
    outs = []
    for s in src.split(chunk or chunk_size(model, src.size(1))):
        batch, n_src = s.shape
        x = model.tok_embed(s) + model.src_pos.weight[:n_src]
        for enc, (w, bias) in zip(encoder, enc_qkv):
            qkv = F.linear(_layer_norm(enc.ln_attn, x), w, bias).view(batch, n_src, 3, n_heads, d_head)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (batch, heads, pos, d_head)
            z = softmax_short_rows(q @ k.transpose(-2, -1)) @ v
            x += _out(enc.self_attn, z.transpose(1, 2).reshape(batch, n_src, cfg.d_model))
            for tokens in x.view(-1, cfg.d_model).split(ff_rows):  # views of x: updated in place
                tokens += _feed_forward(enc.ff, _layer_norm(enc.ln_ff, tokens))
        memory = _layer_norm(model.ln_enc, x)
        cross = []  # per layer: keys (src_pos, d_head, batch, heads) and values (src_pos, batch, heads, d_head)
        for w, bias in cross_kv:
            kv = F.linear(memory, w, bias).view(batch, n_src, 2, n_heads, d_head)
            cross.append((kv[:, :, 0].permute(1, 3, 0, 2).contiguous(), kv[:, :, 1].transpose(0, 1).contiguous()))
        cache = [  # the decoder's own keys and values, laid out as the memory's, written one step at a time
            (memory.new_empty((steps, d_head, batch, n_heads)), memory.new_empty((steps, batch, n_heads, d_head)))
            for _ in decoder
        ]
        token = torch.full((batch,), BOS, dtype=torch.long, device=s.device)
        out = s.new_empty((batch, steps))
        for t in range(steps):
            y = model.tok_embed(token) + model.tgt_pos.weight[t]  # (batch, d_model): the newest position
            for layer, (w, bias), (keys, values), (cross_keys, cross_values), (w_q, b_q) in zip(
                decoder, dec_qkv, cache, cross, cross_q
            ):
                qkv = F.linear(_layer_norm(layer.ln_self, y), w, bias).view(batch, 3, n_heads, d_head)
                keys[t], values[t] = qkv[:, 1].permute(2, 0, 1), qkv[:, 2]
                y = y + _out(layer.self_attn, _attend(qkv[:, 0], keys[: t + 1], values[: t + 1]))
                q = F.linear(_layer_norm(layer.ln_cross, y), w_q, b_q).view(batch, n_heads, d_head)
                y = y + _out(layer.cross_attn, _attend(q, cross_keys, cross_values))
                y = y + _feed_forward(layer.ff, _layer_norm(layer.ln_ff, y))
            token = F.linear(_layer_norm(model.ln_dec, y), model.unembed.weight, model.unembed.bias).argmax(-1)
            out[:, t] = token
        outs.append(out)
    return torch.cat(outs)


def can_fuse(model: Seq2SeqTransformer, src: Tensor, pad: int) -> bool:
    """Whether nothing could tell the fused path from the hooked one: evaluation mode, no attnkit
    hook and no PyTorch module hook attached, and no padding in the sources (its mask is left out)."""
    if model.training or any(p.fns for p in model.hook_points().values()):
        return False
    if any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()):
        return False
    return not bool((src == pad).any())
