"""The pre-LayerNorm encoder layer shared by the adder and the sortedness classifier.

Pre-LayerNorm (LayerNorm before each sub-layer, as in GPT-2): it trains reliably at a high
learning rate without warm-up tricks, which is what lets the kit's models train in minutes.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from .attention import MultiHeadAttention
from .hooks import HookPoint


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model), nn.Dropout(dropout))


class EncoderLayer(nn.Module):
    """x -> x + self-attention(LN(x)) -> + feed-forward(LN(·)), with hook points on the
    residual stream: "enc.L.hook_resid_pre", "hook_resid_mid", "hook_mlp_out", "hook_resid_post"."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, index: int, dropout: float = 0.0):
        super().__init__()
        self.ln_attn, self.ln_ff = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.self_attn.name = f"enc.self.{index}"
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.name = f"enc.{index}"
        self.hook_resid_pre, self.hook_resid_mid = HookPoint(), HookPoint()
        self.hook_mlp_out, self.hook_resid_post = HookPoint(), HookPoint()

    def forward(
        self, x: Tensor, pad: Tensor, bias: Tensor | None = None, rotary: Callable[[Tensor], Tensor] | None = None
    ) -> Tensor:
        x = self.hook_resid_pre(x)
        return self.finish(x, self.self_attn(self.ln_attn(x), key_padding_mask=pad, attn_bias=bias, rotary=rotary))

    def finish(self, x: Tensor, attn_out: Tensor) -> Tensor:
        """The rest of the layer once its attention output is known: a replay that changes only
        this layer's heads (interp/sweep.py) restarts here."""
        x = self.hook_resid_mid(x + attn_out)
        return self.hook_resid_post(x + self.hook_mlp_out(self.ff(self.ln_ff(x))))
