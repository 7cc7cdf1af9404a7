"""Positional encodings: how a transformer learns where a token is.

Attention itself is blind to order: permute the tokens and every output is permuted
the same way. Each scheme below gives the model position in one of three places:

  * added to the token embeddings (absolute): "sinusoidal", "learned";
  * added to the attention scores as a bias that depends on the offset j - i
    (relative): "alibi", "relative" (a T5-style bucketed bias);
  * rotating queries and keys so that q·k depends on the offset (relative): "rope".

"none" gives no position at all: the encoder then sees a multiset of values.
`Positional` bundles the choice behind one interface; the model asks it for an
additive table, an attention bias and a rotary function, and uses what it gets.
"""

from __future__ import annotations

import math
import typing
from typing import Literal

import torch
from torch import Tensor, nn

Encoding = Literal["sinusoidal", "learned", "none", "alibi", "rope", "relative"]
ENCODINGS: tuple[Encoding, ...] = typing.get_args(Encoding)


def as_encoding(name: str) -> Encoding:
    """`name` if it is one of ENCODINGS, else a ValueError that lists them."""
    for encoding in ENCODINGS:
        if name == encoding:
            return encoding
    raise ValueError(f"unknown positional encoding {name!r}; choose one of {ENCODINGS}")


# ---------------------------------------------------------------------------- sinusoidal
def sinusoid_frequencies(d_model: int, base: float = 10000.0) -> Tensor:
    """(d_model/2,) angular frequencies ω_i = base^(-2i/d_model), fastest first."""
    if d_model % 2:
        raise ValueError(f"sinusoidal encodings need an even width, got {d_model}")
    return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def sinusoidal_table(n_pos: int, d_model: int, base: float = 10000.0) -> Tensor:
    """(n_pos, d_model): PE[p, 2i] = sin(p·ω_i), PE[p, 2i+1] = cos(p·ω_i) (Vaswani et al.).

    Defined for every position, so there is no longest length; whether a model makes
    good use of positions it never saw is another matter (see notebook 05).
    """
    angles = torch.arange(n_pos, dtype=torch.float64)[:, None] * sinusoid_frequencies(d_model, base)
    table = torch.stack([angles.sin(), angles.cos()], dim=-1)  # (n_pos, d_model/2, 2): (sin, cos) pairs
    return table.reshape(n_pos, d_model).float()


def sinusoidal_shift_matrix(k: int, d_model: int, base: float = 10000.0) -> Tensor:
    """(d_model, d_model) block-diagonal M_k with PE(p + k) = M_k · PE(p) for every p.

    Each (sin, cos) pair is a point on a circle turning at speed ω_i; moving k steps
    turns it by k·ω_i, whatever p is:  [sin(p+k)ω, cos(p+k)ω] = R(kω) [sin pω, cos pω].
    """
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i, w in enumerate(sinusoid_frequencies(d_model, base)):
        c, s = math.cos(k * w), math.sin(k * w)
        M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    return M


# ---------------------------------------------------------------------------- learned
class LearnedTable(nn.Module):
    """An embedding row per position, sized for the longest test length (`max_len`).

    Rows that training never reaches keep their initial values: the model sees them for
    the first time at test. Longer than `max_len` is a clear error rather than a silent
    clamp (which would make many tokens share one position).

    init="sinusoidal" starts from the sinusoidal table, then every row trains freely;
    init="random" draws rows at the same scale (RMS 1/√2). Both are measured in the
    notebook: from a random start the model did not learn the order in range.
    """

    def __init__(self, max_len: int, d_model: int, init: Literal["sinusoidal", "random"] = "sinusoidal"):
        super().__init__()
        self.max_len = max_len
        start = sinusoidal_table(max_len, d_model) if init == "sinusoidal" else torch.randn(max_len, d_model) * 0.5**0.5
        self.table = nn.Parameter(start)  # (max_len, d_model)

    def forward(self, n_pos: int) -> Tensor:
        if n_pos > self.max_len:
            raise ValueError(
                f"the learned position table has {self.max_len} rows; "
                f"a sequence of length {n_pos} is longer than it supports"
            )
        return self.table[:n_pos]


# ---------------------------------------------------------------------------- ALiBi
def alibi_slopes(n_heads: int) -> Tensor:
    """(heads,) the ALiBi paper's geometric slopes 2^(-8/n), 2^(-16/n), …, 2^(-8)."""
    return 2.0 ** (-8.0 * torch.arange(1, n_heads + 1) / n_heads)


def alibi_bias(n_pos: int, n_heads: int, directional: bool = True, device=None) -> Tensor:
    """(heads, q_pos, k_pos) additive bias -slope·|j - i|.

    Symmetric ALiBi cannot tell left from right: with no other position signal the
    encoder gives a sequence and its reverse the same answer, and a sorted sequence
    reversed is unsorted. `directional` (the default) lets the even heads see only
    keys strictly to the left and the odd heads only keys strictly to the right,
    each pair sharing one slope, so every direction has a steep and a gentle head.
    Blocked keys get -inf; a key at the first allowed offset gets bias 0.
    """
    offset = (torch.arange(n_pos, device=device)[None, :] - torch.arange(n_pos, device=device)[:, None]).float()
    if not directional:
        return -alibi_slopes(n_heads).to(device)[:, None, None] * offset.abs()
    slopes = alibi_slopes(n_heads // 2 + n_heads % 2).repeat_interleave(2)[:n_heads].to(device)
    bias = -slopes[:, None, None] * (offset.abs() - 1)  # the nearest allowed key gets bias 0
    blocked = torch.stack([offset > 0, offset < 0])  # left heads block j > i, right heads j < i
    bias = bias.masked_fill(blocked[torch.arange(n_heads) % 2], float("-inf"))
    # The token itself is a last resort (-30: e^-30 ≈ 1e-13) so that the first token of a
    # left-looking head, which has no left, still attends somewhere instead of giving NaN.
    return bias.masked_fill(offset == 0, -30.0)


# ---------------------------------------------------------------------------- RoPE
def rotate(x: Tensor, base: float = 10000.0) -> Tensor:
    """RoPE: turn each (even, odd) pair of x's last axis by pos·ω_i.  x: (..., pos, d_head).

    A rotation keeps norms, and R(pω)q · R(p'ω)k = q · R((p'-p)ω)k: after rotating
    both, the score depends on positions only through the offset p' - p.
    """
    n_pos, d_head = x.shape[-2], x.shape[-1]
    angles = torch.arange(n_pos, device=x.device, dtype=torch.float32)[:, None] * sinusoid_frequencies(d_head, base).to(
        x.device, torch.float32
    )  # (pos, d_head/2)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


# ---------------------------------------------------------------------------- T5-style buckets
class RelativeBucketBias(nn.Module):
    """A learned bias per head for each offset bucket: exact offsets -n_exact … n_exact,
    then one shared "far left" and one shared "far right" bucket.

    T5 uses log-spaced buckets up to a maximum distance; here every distance beyond
    a few tokens shares one bucket, so a model trained at length 16 has already
    learned the bias for every offset it will meet at length 256: no offset is new.

    That alone does not make the computation length-free: a far bucket holds ≤ 12 keys
    at length 16 but 252 at length 256, and the softmax weight it takes grows with the
    count. With `far_as_one` each key in a bucket gets bias - log(keys in the bucket),
    so a bucket weighs the same however many keys share it: at any length the head
    sees its few exact neighbours plus one "far left" and one "far right" average.
    """

    def __init__(self, n_heads: int, n_exact: int = 3, far_as_one: bool = True, scale: float = 8.0):
        super().__init__()
        self.n_exact, self.far_as_one = n_exact, far_as_one
        self.bias = nn.Embedding(2 * n_exact + 3, n_heads)  # bucket -> one bias per head (÷ scale)
        nn.init.zeros_(self.bias.weight)  # start as plain content attention
        # A sharp look at one neighbour needs biases near ±10, but Adam moves a parameter by
        # about lr (1e-3) per step: storing bias/scale lets them get there in a few hundred steps.
        self.scale = scale

    def buckets(self, n_pos: int, device=None) -> Tensor:
        """(q_pos, k_pos) bucket index of the offset j - i (0 = far left, last = far right)."""
        pos = torch.arange(n_pos, device=device)
        offset = (pos[None, :] - pos[:, None]).clamp(-self.n_exact - 1, self.n_exact + 1)
        return offset + self.n_exact + 1

    def forward(self, n_pos: int, lengths: Tensor | None = None) -> Tensor:
        """(heads, q_pos, k_pos); (batch, heads, q_pos, k_pos) when `lengths` (batch,) of
        padded rows is given, because the number of real keys in a far bucket depends on it."""
        device = self.bias.weight.device
        b = self.scale * self.bias(self.buckets(n_pos, device)).permute(2, 0, 1)  # (heads, q_pos, k_pos)
        if not self.far_as_one:
            return b
        lengths = torch.tensor([n_pos], device=device) if lengths is None else lengths.to(device)
        i = torch.arange(n_pos, device=device)[None, :, None]  # query position
        j = torch.arange(n_pos, device=device)[None, None, :]  # key position
        n_left = (i - self.n_exact).clamp(min=1)  # keys j < i - n_exact
        n_right = (lengths[:, None, None] - 1 - i - self.n_exact).clamp(min=1)  # i + n_exact < j < length
        count = torch.where(j < i - self.n_exact, n_left, torch.where(j > i + self.n_exact, n_right, 1))
        out = b[None] - count.float().log()[:, None]  # (batch, heads, q_pos, k_pos)
        return out if out.size(0) > 1 or lengths.numel() > 1 else out[0]


# ---------------------------------------------------------------------------- one interface
class Positional(nn.Module):
    """The chosen encoding behind one interface the model calls once per forward pass.

    table(n_pos): (n_pos, d_model) to add to the embeddings, or None;
    bias(n_pos):  (heads, q_pos, k_pos) — or (batch, heads, q_pos, k_pos) — to add to
                  the attention scores, or None;
    rotary:       a function for MultiHeadAttention to apply to q and k, or None.
    """

    def __init__(
        self,
        encoding: Encoding,
        d_model: int,
        n_heads: int,
        max_len: int = 256,
        n_exact: int = 3,
        far_as_one: bool = True,
        alibi_directional: bool = True,
        learned_init: Literal["sinusoidal", "random"] = "sinusoidal",
    ):
        super().__init__()
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown positional encoding {encoding!r}; choose one of {ENCODINGS}")
        self.encoding, self.d_model, self.n_heads = encoding, d_model, n_heads
        self.max_len = max_len if encoding == "learned" else None  # None: any length
        self.alibi_directional = alibi_directional
        self.learned = LearnedTable(max_len, d_model, learned_init) if encoding == "learned" else None
        self.relative = RelativeBucketBias(n_heads, n_exact, far_as_one) if encoding == "relative" else None
        self.rotary = rotate if encoding == "rope" else None

    def table(self, n_pos: int) -> Tensor | None:
        if self.encoding == "sinusoidal":
            return sinusoidal_table(n_pos, self.d_model)
        if self.learned is not None:
            return self.learned(n_pos)
        return None

    def bias(self, n_pos: int, lengths: Tensor | None = None, device=None) -> Tensor | None:
        """lengths (batch,): the real length of each padded row, for the far-bucket counts."""
        if self.encoding == "alibi":
            return alibi_bias(n_pos, self.n_heads, self.alibi_directional, device)
        if self.relative is not None:
            return self.relative(n_pos, lengths)
        return None
