"""Head ablation through the hook points (core/hooks.py): a head is removed by a hook on its
module's hook_z that replaces the head's slice of z by 0 (zero ablation) or by a fill, its mean z
(mean ablation), before W_O mixes the heads."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor


def gate_z(z: Tensor, gate: Tensor, fill: Tensor | None = None) -> Tensor:
    """Blend each head's z towards `fill`: gate 1 keeps the head, 0 replaces it (by 0 when fill
    is None). z (batch, heads, pos, d_head); gate (heads,) or (batch, heads), float (a gradient
    can flow through it); fill (heads, d_head)."""
    n_heads = z.size(1)
    g = gate.view(-1, n_heads, 1, 1)
    f = 0.0 if fill is None else fill.view(1, n_heads, 1, z.size(-1))
    return g * z + (1 - g) * f


def heads_by_module(valid: Sequence[str], heads) -> dict[str, list[int]]:
    """["dec.cross.1.2", ...] -> {"dec.cross.1": [2], ...}; ValueError listing the valid ids."""
    if isinstance(heads, str):
        heads = [heads]
    if not isinstance(heads, Iterable):
        raise TypeError(f"heads must be a list of head ids like 'dec.cross.1.2', not {heads!r}")
    heads = list(heads)
    unknown = [h for h in heads if h not in valid]
    if unknown:
        raise ValueError(f"unknown head id(s) {unknown}; the valid ids are: {', '.join(valid)}")
    out: dict[str, list[int]] = {}
    for h in heads:
        name, index = h.rsplit(".", 1)
        out.setdefault(name, []).append(int(index))
    return out


def keep_vectors(model, heads, device=None) -> dict[str, Tensor]:
    """{attention module: (heads,) float, 1 = keep, 0 = removed} for the modules `heads` touch."""
    keep: dict[str, Tensor] = {}
    modules = model.attention_modules()
    for name, idx in heads_by_module(model.heads, heads).items():
        keep.setdefault(name, torch.ones(modules[name].n_heads, device=device))[idx] = 0.0
    return keep


@contextmanager
def ablate_heads(model, heads, fills: Mapping[str, Tensor] | None = None) -> Iterator:
    """Remove `heads` inside the block by a hook on each touched module's hook_z: its z is
    replaced by 0, or by fills[module] (heads, d_head) when given (mean ablation). Blocks nest
    (an inner block removes its heads on top of the outer ones) and always restore the model."""
    device = next(model.parameters()).device
    hooks = []
    for name, keep in keep_vectors(model, heads, device).items():
        fill = None if fills is None else fills[name]
        hooks.append((f"{name}.hook_z", lambda z, hook, keep=keep, fill=fill: gate_z(z, keep, fill)))
    with model.hooks(hooks):
        yield model
