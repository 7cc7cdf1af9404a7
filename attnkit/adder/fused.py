"""Greedy decoding written for speed: the same model and the same answers as the hooked path of
`Seq2SeqTransformer.greedy`, without its per-activation module calls.

The hooked path calls a module for every activation (so that a hook can see or replace it); with
no hook attached those calls are pure overhead, and on a CPU a decoding step of a few hundred
problems is mostly overhead. Here each layer does its matrix products directly: Q, K and V in one
product (W_Q pre-scaled by 1/√d_head), keys and values written into a cache allocated once, the
written-out softmax of core/attention.py for the short rows. `greedy` takes this path only when
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


def chunk_size(model: Seq2SeqTransformer, n_src: int) -> int:
    """Problems per chunk for CHUNK_BYTES: the encoder's feed-forward block is the widest moment
    (a (n_src, d_ff) hidden layer beside the residual stream, its Q, K, V and the scores)."""
    cfg = model.cfg
    floats = n_src * (cfg.d_ff + 6 * cfg.d_model + cfg.n_heads * n_src)
    return max(64, CHUNK_BYTES // (4 * floats))


def _layer_norm(ln: nn.LayerNorm, x: Tensor) -> Tensor:
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


def _feed_forward(ff: nn.Sequential, x: Tensor) -> Tensor:
    first, second = cast(nn.Linear, ff[0]), cast(nn.Linear, ff[2])
    return F.linear(F.gelu(F.linear(x, first.weight, first.bias)), second.weight, second.bias)


def _qkv(attn: MultiHeadAttention) -> tuple[Tensor, Tensor]:
    """W_Q (scaled by 1/√d_head), W_K and W_V stacked: one matrix product instead of three."""
    scale = attn.d_head**-0.5
    return (
        torch.cat([attn.W_Q.weight * scale, attn.W_K.weight, attn.W_V.weight]),
        torch.cat([attn.W_Q.bias * scale, attn.W_K.bias, attn.W_V.bias]),
    )


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
    outs = []
    for s in src.split(chunk or chunk_size(model, src.size(1))):
        batch, n_src = s.shape
        x = model.tok_embed(s) + model.src_pos.weight[:n_src]
        for enc, (w, bias) in zip(encoder, enc_qkv):
            qkv = F.linear(_layer_norm(enc.ln_attn, x), w, bias).view(batch, n_src, 3, n_heads, d_head)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (batch, heads, pos, d_head)
            z = softmax_short_rows(q @ k.transpose(-2, -1)) @ v
            x = x + _out(enc.self_attn, z.transpose(1, 2).reshape(batch, n_src, cfg.d_model))
            x = x + _feed_forward(enc.ff, _layer_norm(enc.ln_ff, x))
        memory = _layer_norm(model.ln_enc, x)
        cross = [  # the memory's keys and values, (batch, heads, src_pos, d_head), projected once
            tuple(
                F.linear(memory, m.weight, m.bias).view(batch, n_src, n_heads, d_head).transpose(1, 2).contiguous()
                for m in (layer.cross_attn.W_K, layer.cross_attn.W_V)
            )
            for layer in decoder
        ]
        cache = [s.new_empty((2, batch, n_heads, steps, d_head), dtype=memory.dtype) for _ in decoder]
        token = torch.full((batch,), BOS, dtype=torch.long, device=s.device)
        out = s.new_empty((batch, steps))
        for t in range(steps):
            y = model.tok_embed(token) + model.tgt_pos.weight[t]  # (batch, d_model): the newest position
            for layer, (w, bias), kv, (ck, cv) in zip(decoder, dec_qkv, cache, cross):
                q, k, v = F.linear(_layer_norm(layer.ln_self, y), w, bias).view(batch, 3, n_heads, d_head).unbind(1)
                kv[0, :, :, t], kv[1, :, :, t] = k, v
                weights = softmax_short_rows((q.unsqueeze(2) * kv[0, :, :, : t + 1]).sum(-1))  # (batch, heads, t+1)
                z = (weights.unsqueeze(-1) * kv[1, :, :, : t + 1]).sum(2)
                y = y + _out(layer.self_attn, z.reshape(batch, cfg.d_model))
                q = F.linear(_layer_norm(layer.ln_cross, y), layer.cross_attn.W_Q.weight, layer.cross_attn.W_Q.bias)
                scores = (q.view(batch, n_heads, 1, d_head) * ck).sum(-1)  # (batch, heads, src_pos)
                weights = softmax_short_rows(scores * d_head**-0.5)
                z = (weights.unsqueeze(-1) * cv).sum(2)
                y = y + _out(layer.cross_attn, z.reshape(batch, cfg.d_model))
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
