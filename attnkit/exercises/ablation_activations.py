"""The hints of notebook 04's two exercises on a head's z, for their checkers
(attnkit.exercises.ablation): what a wrong ablation hook changed (the wrong axis, every head, part
of the batch, a batch mean instead of the reference fill, ...), the advice for errors a hook raises,
and the mean z's advice, wrong shapes and rebuilt mistakes (padding counted, per-problem means, ...).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .ablation_values import _same

# ---------------------------------------------------------------- ⭐ an ablation hook


def _changed_slices(changed: Tensor) -> dict[int, list[int]]:
    """For each axis of a (batch, heads, pos, d_head) bool tensor, the indices where anything changed."""
    return {axis: sorted(set(changed.nonzero()[:, axis].tolist())) for axis in range(changed.dim())}


def _diagnose_hook(got: Tensor, z: Tensor, head: int, fill: Tensor | None) -> str:
    """The hint for a hook whose output is not z with z[:, head] replaced."""
    batch, n_heads, n_pos, d_head = z.shape
    changed = got != z
    if not changed.any():
        return (
            "your hook leaves z unchanged: set head `head`'s z to 0 (fill None) or to fill[head], at every "
            "position, and return z"
        )
    where = _changed_slices(changed)
    if where[1] == list(range(n_heads)) and n_heads > 1:
        if where[2] == [head] and n_pos > 1:
            return (
                f"you replaced position {head} of every head: z is (batch, heads, pos, d_head), so the head "
                f"axis is 1 — z[:, head], not z[:, :, head]"
            )
        if where[3] == [head] and d_head > 1:
            return (
                f"you replaced feature {head} of every head: z is (batch, heads, pos, d_head), so the head "
                f"axis is 1 — z[:, head], not z[..., head]"
            )
        if where[0] == [head] and batch > 1:
            return (
                f"you replaced problem {head} of the batch: z is (batch, heads, pos, d_head), so the head "
                f"axis is 1 — z[:, head], not z[head]"
            )
        return (
            "you changed every head of the layer: only head `head` is removed, z[:, head]; the other heads keep their z"
        )
    if where[1] != [head]:
        wrong = [h for h in where[1] if h != head]
        return f"you changed head(s) {wrong}, but head {head} was asked for (heads are 0-based: head h is z[:, h])"
    if where[0] != list(range(batch)) or where[2] != list(range(n_pos)):
        return (
            "only part of the head was replaced: replace it for every problem of the batch and at every "
            "query position, z[:, head] = ..."
        )
    mine = got[:, head]
    if fill is None:
        return f"head {head} should be exactly 0 at every position (zero ablation), not other values"
    if _same(mine, torch.zeros_like(mine)):
        return (
            "with fill given, head `head` should become fill[head] (its reference mean z) at every "
            "position — you put 0 there (that is zero ablation)"
        )
    batch_means = [z[:, head].mean(dim=(0, 1)), z[:, head].mean(dim=1, keepdim=True), z[:, head].mean(dim=0)]
    if any(_same(mine, m.expand_as(mine)) for m in batch_means):
        return (
            "you used this batch's own mean of the head: use fill[head], the reference mean computed once "
            "on the held-out set — a batch's own mean changes with the batch, and on one problem it "
            "keeps most of that problem's information"
        )
    if _same(mine, fill.mean(dim=0).expand_as(mine)):
        return "you averaged fill over the heads: fill[head] is head `head`'s own mean vector (d_head numbers)"
    if _same(mine, fill[head].mean().expand_as(mine)):
        return (
            "you averaged fill[head] into one number: put the whole vector fill[head] (d_head numbers) at "
            "every position"
        )
    if _same(mine, z[:, head] + fill[head]):
        return "you added fill[head] to the head's z: replace z[:, head] by fill[head] instead"
    for other in range(n_heads):
        if other != head and _same(mine, fill[other].expand_as(mine)):
            return f"you put fill[{other}] in head {head}: use the removed head's own mean, fill[head]"
    return f"head {head} should be fill[head] at every position and in every problem of the batch"


HOOK_ADVICE = (
    (
        "must match the size",
        "z[:, head] is (batch, pos, d_head): assign 0.0 or fill[head], shape "
        "(d_head,), which broadcasts over the batch and positions (fill itself is "
        "(heads, d_head))",
    ),
    ("expand", "z[:, head] is (batch, pos, d_head): assign 0.0 or fill[head], shape (d_head,)"),
    ("out of bounds", "z is (batch, heads, pos, d_head): the head is z[:, head]"),
    ("is ambiguous", "test `fill is None`, not `if fill:` — a tensor of many numbers is neither True nor False"),
    (
        "unexpected keyword argument 'hook'",
        "the model calls a hook as hook(z, hook=point), TransformerLens's way: name its second argument `hook`",
    ),
)


# ---------------------------------------------------------------- ⭐⭐ the mean z

MEAN_Z_ADVICE = (
    (
        "shape of the mask",
        "real is (batch, pos) but z is (batch, heads, pos, d_head): z.transpose(1, 2)[real] "
        "gives the real positions' vectors, (n_real, heads, d_head)",
    ),
    (
        "must match the size",
        "real is (batch, pos) and z is (batch, heads, pos, d_head): line them up with real[:, None, :, None]",
    ),
)


def _mean_z_shapes(batch: int, n_heads: int, n_pos: int, d_head: int) -> list[tuple[tuple, str]]:
    """Wrong shapes of a mean z, each with the hint that names its mistake."""
    return [  # the first that fits names the mistake (two can coincide, e.g. batch = heads)
        ((n_heads,), "you averaged d_head away too: keep one vector per head, shape (heads, d_head)"),
        (
            (n_pos, d_head),
            "you averaged over the heads: average over the batch and position axes (0 and 2), keep the head axis",
        ),
        ((batch, n_heads, d_head), "you kept the batch axis: average over every problem's positions too"),
        ((n_heads, n_pos, d_head), "you kept the position axis: average over the positions too"),
        ((batch, n_pos, d_head), "you averaged over the heads: average over the batch and position axes (0 and 2)"),
    ]


def _mean_z_mistakes(z: Tensor, real: Tensor, per_problem: Tensor) -> list[tuple[Tensor, str]]:
    """Each head's mean z computed with one common mistake each (per_problem: the mean of each
    problem's own mean), and the hint that names it."""
    batch, n_pos = real.shape
    zd, mask = z.double(), real[:, None, :, None].double()
    return [
        (zd.mean(dim=(0, 2)), "padding positions counted: average only where real is True"),
        (
            (zd * mask).sum(dim=(0, 2)) / (batch * n_pos),
            "divided by every position, padding included: divide by the number of real positions, real.sum()",
        ),
        (
            per_problem,
            "you averaged each problem's mean: a problem with more real positions must weigh more — "
            "sum z over every real position of every problem, then divide by their total number",
        ),
        (
            (zd * (1 - mask)).sum(dim=(0, 2)) / (~real).sum().clamp(min=1),
            "the mask is inverted: real is True at real tokens, so keep those and drop the others",
        ),
    ]
