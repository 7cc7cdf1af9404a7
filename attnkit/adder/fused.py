"""Greedy decoding written for speed: the same model and the same answers as the hooked path of
`Seq2SeqTransformer.greedy`, without its per-activation module calls.

The hooked path calls a module for every activation (so that a hook can see or replace it); with
no hook attached those calls are pure overhead, and on a CPU a decoding step of a few hundred
problems is mostly overhead. Here each layer does its matrix products directly:
- Q, K and V in one product (W_Q pre-scaled by 1/√d_head); residual updates in place (x.addmm_).
- The first layer of the encoder and of the decoder read a table instead of a product: their input
  is the embedding of a (position, token) pair, so their Q, K and V take one of
  positions × vocabulary values, computed once per call. The encoder's first layer goes further:
  its scores are one of pairs² values per head, read from a table too, and its V is gathered
  straight into the (batch, heads, pos, d_head) layout its weighted sum reads (no Q·K product, no
  copy of q, k or v for that layer).
- The decoder works feature-major: its Q, K and V come out as (d_head, heads, batch), and its
  cache of keys and values as (position, d_head, heads, batch). A step's scores, softmax and
  weighted sum then reduce over outer axes along rows thousands of floats long, where the model's
  own (batch, heads, position, d_head) layout would reduce rows of 5-16 floats.
- A chunk's large outputs go into buffers allocated for the first chunk and reused by the rest
  (out=): a fresh buffer page-faults on first touch, which took as long as the copy itself.
`greedy` takes this path only when nothing could see the difference: no hook attached, no padding
in the sources, evaluation mode. `tests/test_fused.py` holds it to the hooked path's answers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple, cast

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


class _Buffers:
    """Tensors allocated for the first (largest) chunk and handed out again, as views of the
    size asked for, to every later one."""

    def __init__(self, like: Tensor):
        self.like = like
        self.flat: dict[str, Tensor] = {}

    def get(self, name: str, *shape: int) -> Tensor:
        n = math.prod(shape)
        if name not in self.flat or self.flat[name].numel() < n:
            self.flat[name] = self.like.new_empty(n)
        return self.flat[name][:n].view(shape)


class _DecoderWeights(NamedTuple):
    """One decoder layer's weights for the feature-major layout: every Q, K and V row in the order
    (d_head, heads), and W_O's columns to match; biases as columns where a product is (rows, batch)."""

    qkv: tuple[Tensor, Tensor]
    out: tuple[Tensor, Tensor]
    cross_q: tuple[Tensor, Tensor]
    cross_kv: tuple[Tensor, Tensor]
    cross_out: tuple[Tensor, Tensor]


def _layer_norm(ln: nn.LayerNorm, x: Tensor) -> Tensor:
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


def _add_feed_forward(ff: nn.Sequential, ln: nn.LayerNorm, x: Tensor) -> Tensor:
    """x += ff(ln(x)), in place: the second product adds straight into x."""
    first, second = cast(nn.Linear, ff[0]), cast(nn.Linear, ff[2])
    hidden = F.gelu(F.linear(_layer_norm(ln, x), first.weight, first.bias))
    return x.addmm_(hidden, second.weight.t()).add_(second.bias)


def _scaled_q(attn: MultiHeadAttention) -> tuple[Tensor, Tensor]:
    """W_Q and its bias scaled by 1/√d_head: the scores come out scaled, one product fewer."""
    scale = attn.d_head**-0.5
    return attn.W_Q.weight * scale, attn.W_Q.bias * scale


def _qkv(attn: MultiHeadAttention) -> tuple[Tensor, Tensor]:
    """W_Q (scaled), W_K and W_V stacked: one matrix product instead of three."""
    w_q, b_q = _scaled_q(attn)
    return torch.cat([w_q, attn.W_K.weight, attn.W_V.weight]), torch.cat([b_q, attn.W_K.bias, attn.W_V.bias])


def _decoder_weights(layer: DecoderLayer, n_heads: int) -> _DecoderWeights:
    d_model = layer.self_attn.W_O.weight.size(0)
    # feature-major rows: row d * heads + h is head h's feature d (the model's own order is h * d_head + d)
    rows = torch.arange(d_model, device=layer.self_attn.W_O.weight.device).view(n_heads, -1).t().reshape(-1)
    w, b = _qkv(layer.self_attn)
    w_q, b_q = _scaled_q(layer.cross_attn)
    cross = layer.cross_attn
    return _DecoderWeights(
        qkv=(
            w.view(3, d_model, d_model)[:, rows].reshape(3 * d_model, d_model),
            b.view(3, d_model)[:, rows].reshape(-1, 1),
        ),
        out=(layer.self_attn.W_O.weight[:, rows].t(), layer.self_attn.W_O.bias),
        cross_q=(w_q[rows], b_q[rows].view(-1, 1)),
        cross_kv=(
            torch.cat([cross.W_K.weight[rows], cross.W_V.weight[rows]]),
            torch.cat([cross.W_K.bias[rows], cross.W_V.bias[rows]]).view(-1, 1),
        ),
        cross_out=(cross.W_O.weight[:, rows].t(), cross.W_O.bias),
    )


def _attend(q: Tensor, keys: Tensor, values: Tensor, scratch: Tensor) -> Tensor:
    """One decoding step's attention, feature-major. q (d_head, heads, batch), scaled; keys and
    values (pos, d_head, heads, batch); scratch a buffer of at least their shape -> z
    (d_head * heads, batch). Every sum runs over an outer axis: the softmax over positions is
    written out along axis 0."""
    products = scratch[: keys.size(0)]
    scores = torch.mul(keys, q, out=products).sum(1)  # (pos, heads, batch)
    weights = (scores - scores.amax(0)).exp_()
    weights /= weights.sum(0)
    return torch.mul(weights.unsqueeze(1), values, out=products).sum(0).flatten(0, 1)


@torch.no_grad()
def fused_greedy(model: Seq2SeqTransformer, src: Tensor, chunk: int | None = None) -> Tensor:
    """(batch, src_pos) ids with no padding -> (batch, tgt_pos - 1) greedy ids after <s>."""
    cfg = model.cfg
    d_model, n_heads, steps = cfg.d_model, cfg.n_heads, cfg.max_tgt_len - 1
    d_head, vocab = d_model // n_heads, cfg.vocab_size
    encoder, decoder = cast(list["EncoderLayer"], list(model.encoder)), cast(list["DecoderLayer"], list(model.decoder))
    enc_qkv = [_qkv(layer.self_attn) for layer in encoder]
    dec = [_decoder_weights(layer, n_heads) for layer in decoder]
    # The tables: row position * vocab + token is that pair's embedding, and the first layer's Q, K, V of it
    # (pos + token here as in the model: floating-point addition commutes, so the rows are the model's own)
    src_embedded = (model.src_pos.weight[:, None] + model.tok_embed.weight).flatten(0, 1)
    src_qkv = F.linear(_layer_norm(encoder[0].ln_attn, src_embedded), *enc_qkv[0])
    # ... and from those the first layer's scores of every two pairs and its V, head by head:
    # (heads * pairs * pairs,) and (heads * pairs, d_head)
    n_pairs = src_qkv.size(0)
    q0, k0, v0 = src_qkv.view(n_pairs, 3, n_heads, d_head).permute(1, 2, 0, 3)
    src_scores, src_v = (q0 @ k0.transpose(-2, -1)).flatten(), v0.reshape(-1, d_head)
    src_heads = torch.arange(0, n_heads * n_pairs, n_pairs, device=src.device).view(1, -1, 1)
    tgt_embedded = (model.tgt_pos.weight[:steps, None] + model.tok_embed.weight).flatten(0, 1)
    w, bias = dec[0].qkv
    tgt_qkv = torch.addmm(bias, w, _layer_norm(decoder[0].ln_self, tgt_embedded).t())  # a column per pair
    ff_rows = max(64, FF_SLICE_BYTES // (4 * cfg.d_ff))
    buffers = _Buffers(src_embedded)
    outs = []
    for s in src.split(chunk or chunk_size(model, src.size(1))):
        batch, n_src = s.shape
        ids = (s + torch.arange(0, n_src * vocab, vocab, device=s.device)).flatten()
        x = torch.index_select(src_embedded, 0, ids, out=buffers.get("x", batch * n_src, d_model))
        for i, (enc, (w, bias)) in enumerate(zip(encoder, enc_qkv)):
            if i == 0:  # scores (batch, heads, pos, pos) and v (batch, heads, pos, d_head) from the tables
                rows = (src_heads + ids.view(batch, 1, n_src)).flatten()  # head h's row of each token's pair
                v = torch.index_select(src_v, 0, rows, out=buffers.get("v", rows.numel(), d_head))
                # flat index into src_scores: (h * pairs + query pair) * pairs + key pair
                pairs = (rows * n_pairs).view(batch, n_heads, n_src, 1) + ids.view(batch, 1, 1, n_src)
                z = softmax_short_rows(torch.take(src_scores, pairs)) @ v.view(batch, n_heads, n_src, d_head)
            else:
                qkv = buffers.get("qkv", batch * n_src, 3 * d_model)
                torch.addmm(bias, _layer_norm(enc.ln_attn, x), w.t(), out=qkv)
                # q, k and v, each (batch, heads, pos, d_head)
                q, k, v = qkv.view(batch, n_src, 3, n_heads, d_head).permute(2, 0, 3, 1, 4)
                z = softmax_short_rows(q @ k.transpose(-2, -1)) @ v
            x.addmm_(z.transpose(1, 2).reshape(-1, d_model), enc.self_attn.W_O.weight.t()).add_(enc.self_attn.W_O.bias)
            for tokens in x.split(ff_rows):  # views of x: updated in place
                _add_feed_forward(enc.ff, enc.ln_ff, tokens)
        memory = _layer_norm(model.ln_enc, x).view(batch, n_src, d_model).transpose(0, 1).contiguous()
        cross = []  # per layer: the memory's keys and values, each (src_pos, d_head, heads, batch)
        for i, weights in enumerate(dec):
            kv = buffers.get(f"cross {i}", n_src, 2 * d_model, batch)
            w, bias = weights.cross_kv
            torch.baddbmm(bias, w.expand(n_src, -1, -1), memory.transpose(1, 2), out=kv)
            cross.append(kv.view(n_src, 2, d_head, n_heads, batch).unbind(1))
        scratch = buffers.get("scratch", max(n_src, steps), d_head, n_heads, batch)
        # per layer, the Q, K and V of every step: (step, 3, d_head, heads, batch), each step's written once
        caches = [buffers.get(f"cache {i}", steps, 3, d_head, n_heads, batch) for i in range(len(decoder))]
        token = torch.full((batch,), BOS, dtype=torch.long, device=s.device)
        out = s.new_empty((batch, steps))
        for t in range(steps):
            ids = token + t * vocab
            y = F.embedding(ids, tgt_embedded)  # (batch, d_model): the newest position
            for i, (layer, weights, cache, (cross_keys, cross_values)) in enumerate(zip(decoder, dec, caches, cross)):
                if i == 0:
                    torch.index_select(tgt_qkv, 1, ids, out=cache[t].view(3 * d_model, batch))
                else:
                    w, bias = weights.qkv
                    torch.addmm(bias, w, _layer_norm(layer.ln_self, y).t(), out=cache[t].view(3 * d_model, batch))
                z = _attend(cache[t, 0], cache[: t + 1, 1], cache[: t + 1, 2], scratch)
                y.addmm_(z.t(), weights.out[0]).add_(weights.out[1])
                w, bias = weights.cross_q
                q = torch.addmm(bias, w, _layer_norm(layer.ln_cross, y).t()).view(d_head, n_heads, batch)
                y.addmm_(_attend(q, cross_keys, cross_values, scratch).t(), weights.cross_out[0]).add_(
                    weights.cross_out[1]
                )
                _add_feed_forward(layer.ff, layer.ln_ff, y)
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
