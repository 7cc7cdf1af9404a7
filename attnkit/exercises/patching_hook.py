"""The cases of notebook 06's patching hook and the hint that names where a wrong hook put clean_z
(every head or every position, head and position swapped, off by one, only the first sample, ...),
for its checker (attnkit.exercises.patching).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .checking import Hint

# (batch, n_heads, n_pos, d_head, head, pos). Batch 2 first, with head and pos inside z both ways
# and n_heads != n_pos, so that a swap, an off-by-one or the notebook's fixed head 1 / pos 5 show;
# then batch 1, batch 3 at the last position, and a single position; no head width is the notebook's.
_HOOK_CASES = [(2, 6, 7, 5, 3, 4), (1, 4, 5, 16, 1, 2), (3, 2, 7, 3, 0, 6), (2, 3, 1, 4, 2, 0)]


def _a(name: str) -> str:
    return f"{'an' if name[:1] in 'aeiouAEIOU' else 'a'} {name}"


def _cells(mask: Tensor) -> set:
    return {tuple(c) for c in mask.nonzero().tolist()}


def _which_cells(out: Tensor, z: Tensor, clean: Tensor, head: int, pos: int) -> None:
    """Raise the hint that names where the learner's hook put clean_z (out is z's shape, and wrong)."""
    batch = z.size(0)
    from_clean = torch.isclose(out, clean.expand_as(out)).all(-1)  # (batch, heads, pos)
    kept = torch.isclose(out, z).all(-1)
    if not (from_clean | kept).all():
        b, h, p = (~(from_clean | kept)).nonzero()[0].tolist()
        raise Hint(
            f"at sample {b}, head {h}, position {p} your hook returns values that are neither z's nor "
            "clean_z's: copy clean_z[:, head, pos] as it is (assign with =, nothing added or scaled)"
        )
    per_sample = [_cells(from_clean[b]) for b in range(batch)]
    if batch > 1 and per_sample[0] == {(head, pos)} and not any(per_sample[1:]):
        raise Hint(
            f"only the first sample of the batch was patched (z has batch {batch}): index every sample, "
            "z[:, head, pos] = clean_z[:, head, pos]"
        )
    cells = per_sample[0]
    if any(s != cells for s in per_sample):
        raise Hint(
            "the samples of the batch were patched differently: patch every sample the same way, "
            "z[:, head, pos] = clean_z[:, head, pos] (clean_z's batch of 1 broadcasts)"
        )
    n_heads, n_pos = from_clean.shape[1:]
    if cells == {(h, pos) for h in range(n_heads)}:
        raise Hint("you replaced every head at that position: index the head axis too, z[:, head, pos]")
    if cells == {(head, p) for p in range(n_pos)}:
        raise Hint("you replaced every position of that head: index the position axis too, z[:, head, pos]")
    if cells == {(pos, head)}:
        raise Hint("head and position are swapped: z is (batch, heads, pos, d_head), so z[:, head, pos]")
    if len(cells) == 1:
        ((h, p),) = cells
        if h == head and abs(p - pos) == 1:
            raise Hint(
                f"you patched position {p} instead of {pos}: off by one? positions count from 0 — "
                "z[:, head, pos] with pos as given"
            )
        if p == pos and abs(h - head) == 1:
            raise Hint(
                f"you patched head {h} instead of {head}: off by one? heads count from 0 — "
                "z[:, head, pos] with head as given"
            )
        raise Hint(
            f"you patched head {h} at position {p}, but the checker asked for head {head} at position "
            f"{pos}: use the arguments head and pos, not fixed numbers such as the notebook's"
        )
    raise Hint(
        f"your hook put clean_z into {len(cells)} (head, position) cells {sorted(cells)[:4]}: only one "
        f"should change, z[:, {head}, {pos}]"
    )
