"""A small encoder–decoder transformer built on attnkit's own attention.

Pre-LayerNorm blocks (LayerNorm before each sub-layer, as in GPT-2): they train
reliably at a high learning rate without warm-up tricks, which is what lets the
adder train in under a minute on a laptop CPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention, attention_modules
from .data import BOS, PAD, VOCAB_SIZE, src_len, tgt_len


@dataclass
class Seq2SeqConfig:
    n_digits: int = 3             # operands 0 … 10**n_digits - 1
    reverse_output: bool = False  # emit the sum least-significant digit first
    zero_pad: bool = True         # operands written with n_digits digits: "5+5" is read as "005+005"
    d_model: int = 64             # residual stream width
    n_heads: int = 4              # heads per attention layer
    n_enc_layers: int = 2
    n_dec_layers: int = 2
    d_ff: int = 256               # hidden width of each feed-forward block
    dropout: float = 0.0          # the task is noise-free: dropout only slows it down

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    @property
    def max_src_len(self) -> int:
        return src_len(self.n_digits)

    @property
    def max_tgt_len(self) -> int:
        return tgt_len(self.n_digits)


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model), nn.Dropout(dropout))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: Seq2SeqConfig, index: int):
        super().__init__()
        self.ln_attn, self.ln_ff = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.self_attn.name = f"enc.self.{index}"
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)

    def forward(self, x: Tensor, src_pad: Tensor) -> Tensor:
        x = x + self.self_attn(self.ln_attn(x), key_padding_mask=src_pad)
        return x + self.ff(self.ln_ff(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: Seq2SeqConfig, index: int):
        super().__init__()
        self.ln_self, self.ln_cross, self.ln_ff = (nn.LayerNorm(cfg.d_model) for _ in range(3))
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.self_attn.name = f"dec.self.{index}"
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.cross_attn.name = f"dec.cross.{index}"
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)

    def forward(self, y: Tensor, memory: Tensor, src_pad: Tensor, state: Optional[dict] = None) -> Tensor:
        """`state`, when given, holds this layer's keys and values from earlier decoding
        steps, so that `y` need only be the newest position (incremental decoding)."""
        h = self.ln_self(y)
        if state is None:
            # Causal: output digit t may only look at <s> and the digits before it, as at inference.
            y = y + self.self_attn(h, causal=True)
            return self._cross_and_ff(y, memory, src_pad, None)
        k, v = self.self_attn.project_kv(h)
        if "self" in state:
            k, v = torch.cat([state["self"][0], k], dim=2), torch.cat([state["self"][1], v], dim=2)
        state["self"] = (k, v)
        y = y + self.self_attn(h, kv=(k, v), causal=True)
        if "cross" not in state:  # the memory never changes: project it once
            # contiguous once, rather than copied by every step's matrix product
            state["cross"] = tuple(t.contiguous() for t in self.cross_attn.project_kv(memory))
        return self._cross_and_ff(y, memory, src_pad, state["cross"])

    def _cross_and_ff(self, y: Tensor, memory: Tensor, src_pad: Tensor, kv) -> Tensor:
        y = y + self.cross_attn(self.ln_cross(y), memory, key_padding_mask=src_pad, kv=kv)
        return y + self.ff(self.ln_ff(y))


class Seq2SeqTransformer(nn.Module):
    """Encoder reads "a+b"; decoder writes <s> digits </s>, one token at a time."""

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        # Learned absolute positions, one table per side: the sequences are at most 7
        # and 6 tokens long, and a learned table is the quickest to train here.
        self.src_pos = nn.Embedding(cfg.max_src_len, cfg.d_model)
        self.tgt_pos = nn.Embedding(cfg.max_tgt_len, cfg.d_model)
        self.encoder = nn.ModuleList(EncoderLayer(cfg, i) for i in range(cfg.n_enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.n_dec_layers))
        self.ln_enc, self.ln_dec = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size)

    @property
    def heads(self) -> list[str]:
        """Every head's id, "kind.layer.head", e.g. "dec.cross.1.2" (0-based)."""
        return [f"{name}.{h}" for name, m in attention_modules(self).items() for h in range(m.n_heads)]

    def encode(self, src: Tensor) -> Tensor:
        """(batch, src_pos) ids -> memory (batch, src_pos, d_model)"""
        pos = torch.arange(src.size(1), device=src.device)
        x = self.tok_embed(src) + self.src_pos(pos)
        src_pad = src == PAD
        for layer in self.encoder:
            x = layer(x, src_pad)
        return self.ln_enc(x)

    def decode(self, tgt: Tensor, memory: Tensor, src_pad: Tensor,
               states: Optional[list] = None, start: int = 0) -> Tensor:
        """(batch, tgt_pos) ids -> logits (batch, tgt_pos, vocab) for the next token.

        With `states` (one dict per layer), `tgt` holds only positions start, start+1, ...
        """
        pos = torch.arange(start, start + tgt.size(1), device=tgt.device)
        y = self.tok_embed(tgt) + self.tgt_pos(pos)
        for i, layer in enumerate(self.decoder):
            y = layer(y, memory, src_pad, None if states is None else states[i])
        return self.unembed(self.ln_dec(y))

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.decode(tgt, self.encode(src), src == PAD)

    @torch.no_grad()
    def greedy(self, src: Tensor, chunk: int = 2048) -> Tensor:
        """Batched greedy decoding: (batch, src_pos) -> (batch, tgt_pos - 1) ids after <s>.

        The encoder runs once; each step feeds only the newest token through the decoder,
        reusing every layer's keys and values (chunks of 2048 stay in the CPU's cache).
        """
        outs = []
        for s in src.split(chunk):
            memory, src_pad = self.encode(s), s == PAD
            states = [{} for _ in self.decoder]
            token = torch.full((s.size(0), 1), BOS, dtype=torch.long, device=s.device)
            out = []
            for t in range(self.cfg.max_tgt_len - 1):
                token = self.decode(token, memory, src_pad, states, start=t)[:, -1:].argmax(-1)
                out.append(token)
            outs.append(torch.cat(out, dim=1))
        return torch.cat(outs)
