"""A small encoder–decoder transformer built on attnkit's own attention (pre-LayerNorm
blocks, core/blocks.py), with named hook points everywhere (core/hooks.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..core.attention import MultiHeadAttention
from ..core.blocks import EncoderLayer, FeedForward
from ..core.hooks import HookedModel, HookPoint, model_lock
from .data import BOS, PAD, VOCAB_SIZE, src_len, tgt_len
from .fused import can_fuse, fused_greedy


@dataclass(frozen=True)  # shared as a default argument: never changed in place (replace() makes a new one)
class Seq2SeqConfig:
    n_digits: int = 3  # operands 0 … 10**n_digits - 1
    reverse_output: bool = False  # emit the sum least-significant digit first
    zero_pad: bool = True  # operands written with n_digits digits: "5+5" is read as "005+005"
    d_model: int = 64  # residual stream width
    n_heads: int = 4  # heads per attention layer
    n_enc_layers: int = 2
    n_dec_layers: int = 2
    d_ff: int = 256  # hidden width of each feed-forward block
    dropout: float = 0.0  # the task is noise-free: dropout only slows it down

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    @property
    def max_src_len(self) -> int:
        return src_len(self.n_digits)

    @property
    def max_tgt_len(self) -> int:
        return tgt_len(self.n_digits)


class DecoderLayer(nn.Module):
    """y -> + causal self-attention -> + cross-attention over the memory -> + feed-forward,
    with hook points "dec.L.hook_resid_pre", "hook_resid_mid" (after self-attention),
    "hook_resid_cross" (after cross-attention), "hook_mlp_out", "hook_resid_post"."""

    def __init__(self, cfg: Seq2SeqConfig, index: int):
        super().__init__()
        self.ln_self, self.ln_cross, self.ln_ff = (nn.LayerNorm(cfg.d_model) for _ in range(3))
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.self_attn.name = f"dec.self.{index}"
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.cross_attn.name = f"dec.cross.{index}"
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.name = f"dec.{index}"
        self.hook_resid_pre, self.hook_resid_mid, self.hook_resid_cross = HookPoint(), HookPoint(), HookPoint()
        self.hook_mlp_out, self.hook_resid_post = HookPoint(), HookPoint()

    def forward(self, y: Tensor, memory: Tensor, src_pad: Tensor, state: dict | None = None) -> Tensor:
        """`state`, when given, holds this layer's keys and values from earlier decoding
        steps, so that `y` need only be the newest position (incremental decoding)."""
        y = self.hook_resid_pre(y)
        h = self.ln_self(y)
        if state is None:
            # Causal: output digit t may only look at <s> and the digits before it, as at inference.
            return self.after_self(y, self.self_attn(h, causal=True), memory, src_pad)
        k, v = self.self_attn.project_kv(h)
        if "self" in state:
            k, v = torch.cat([state["self"][0], k], dim=2), torch.cat([state["self"][1], v], dim=2)
        state["self"] = (k, v)
        attn_out = self.self_attn(h, kv=(k, v), causal=True)
        if "cross" not in state:  # the memory never changes: project it once
            # contiguous once, rather than copied by every step's matrix product
            state["cross"] = tuple(t.contiguous() for t in self.cross_attn.project_kv(memory))
        return self.after_self(y, attn_out, memory, src_pad, state["cross"])

    def after_self(self, y: Tensor, attn_out: Tensor, memory: Tensor, src_pad: Tensor, cross_kv=None) -> Tensor:
        """The rest of the layer once its self-attention output is known (a replay restarts here)."""
        y = self.hook_resid_mid(y + attn_out)
        return self.after_cross(y, self.cross_attn(self.ln_cross(y), memory, key_padding_mask=src_pad, kv=cross_kv))

    def after_cross(self, y: Tensor, attn_out: Tensor) -> Tensor:
        """The rest of the layer once its cross-attention output is known (a replay restarts here)."""
        y = self.hook_resid_cross(y + attn_out)
        return self.hook_resid_post(y + self.hook_mlp_out(self.ff(self.ln_ff(y))))


class Seq2SeqTransformer(HookedModel, nn.Module):
    """Encoder reads "a+b"; decoder writes <s> digits </s>, one token at a time."""

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        # Learned absolute positions, one table per side: the sequences are at most 7
        # and 6 tokens long, and a learned table is the quickest to train here.
        self.src_pos = nn.Embedding(cfg.max_src_len, cfg.d_model)
        self.tgt_pos = nn.Embedding(cfg.max_tgt_len, cfg.d_model)
        self.encoder = nn.ModuleList(
            EncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, i, cfg.dropout) for i in range(cfg.n_enc_layers)
        )
        self.decoder = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.n_dec_layers))
        self.ln_enc, self.ln_dec = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size)
        self.hook_src_embed, self.hook_memory = HookPoint(), HookPoint()
        self.hook_tgt_embed, self.hook_logits = HookPoint(), HookPoint()
        self.name_hooks()

    def encode(self, src: Tensor) -> Tensor:
        """(batch, src_pos) ids -> memory (batch, src_pos, d_model)"""
        pos = torch.arange(src.size(1), device=src.device)
        x = self.hook_src_embed(self.tok_embed(src) + self.src_pos(pos))
        return self.encode_from(x, 0, src == PAD)

    def encode_from(self, x: Tensor, first: int, src_pad: Tensor) -> Tensor:
        """The encoder from layer `first` on, given its residual stream x (its hook_resid_pre)."""
        for layer in self.encoder[first:]:
            x = layer(x, src_pad)
        return self.hook_memory(self.ln_enc(x))

    def decode(
        self, tgt: Tensor, memory: Tensor, src_pad: Tensor, states: list | None = None, start: int = 0
    ) -> Tensor:
        """(batch, tgt_pos) ids -> logits (batch, tgt_pos, vocab) for the next token.

        With `states` (one dict per layer), `tgt` holds only positions start, start+1, ...
        """
        pos = torch.arange(start, start + tgt.size(1), device=tgt.device)
        y = self.hook_tgt_embed(self.tok_embed(tgt) + self.tgt_pos(pos))
        return self.decode_from(y, 0, memory, src_pad, states)

    def decode_from(self, y: Tensor, first: int, memory: Tensor, src_pad: Tensor, states: list | None = None) -> Tensor:
        """The decoder from layer `first` on, given its residual stream y (its hook_resid_pre)."""
        for i, layer in enumerate(self.decoder[first:], start=first):
            y = layer(y, memory, src_pad, None if states is None else states[i])
        return self.hook_logits(self.unembed(self.ln_dec(y)))

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.decode(tgt, self.encode(src), src == PAD)

    @torch.no_grad()
    def greedy(self, src: Tensor, chunk: int | None = None) -> Tensor:
        """Batched greedy decoding: (batch, src_pos) -> (batch, tgt_pos - 1) ids after <s>.

        The encoder runs once; each step feeds only the newest token through the decoder,
        reusing every layer's keys and values. With no hook attached (and no padding), the fused
        path of fused.py computes the same answers without a module call per activation; otherwise
        every hook point is passed, in chunks of `chunk` problems (512 by default).
        """
        with model_lock(self):  # no other thread's hooks come and go mid-answer
            if can_fuse(self, src, PAD):
                return fused_greedy(self, src, chunk)
            return self._greedy(src, chunk or 512)

    def _greedy(self, src: Tensor, chunk: int) -> Tensor:
        outs = []
        for s in src.split(chunk):
            memory, src_pad = self.encode(s), s == PAD
            states: list[dict] = [{} for _ in self.decoder]
            token = torch.full((s.size(0), 1), BOS, dtype=torch.long, device=s.device)
            out = []
            for t in range(self.cfg.max_tgt_len - 1):
                token = self.decode(token, memory, src_pad, states, start=t)[:, -1:].argmax(-1)
                out.append(token)
            outs.append(torch.cat(out, dim=1))
        return torch.cat(outs)
