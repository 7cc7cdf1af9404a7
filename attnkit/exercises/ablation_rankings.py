"""The cases and rebuilt mistakes of notebook 04's two exercises that rank heads, for their checkers
(attnkit.exercises.ablation): greedy joint pruning's synthetic accuracy functions (heads that back
each other up, ties), and gradient importance's reference gradients of the gates and the scores
its common mistakes give (no abs, one gate per batch, accumulated gradients, a mean loss, ...).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..adder.data import PAD
from ..core.head_ablation import gate_z
from .checking import case_rng, hidden

# ---------------------------------------------------------------- ⭐⭐ greedy joint pruning

PRUNE_ADVICE = (
    (
        "'_Accuracy'",
        "the arguments are (heads, accuracy), in that order: heads is the list, accuracy the function",
    ),
)


class _Accuracy:
    """A synthetic `accuracy(removed)`: each head has its own small cost, and some groups of heads
    back each other up (one alone costs little, the whole group a lot). Records every call."""

    def __init__(self, heads: list[str], costs: list[float], backups: list[tuple[list[int], float]]):
        self.heads, self.costs, self.backups = heads, dict(zip(heads, costs)), backups
        self.calls: list[tuple[str, ...]] = []

    def value(self, removed) -> float:
        gone = set(removed)
        acc = 0.995 - sum(self.costs[h] for h in gone)
        for group, penalty in self.backups:
            if all(self.heads[i] in gone for i in group):
                acc -= penalty
        return acc

    def __call__(self, removed) -> float:
        if isinstance(removed, str):
            raise TypeError(
                f"accuracy() takes the list of removed head ids, not the single string {removed!r}: wrap it in a list"
            )
        try:
            removed = list(removed)
        except TypeError:
            raise TypeError(f"accuracy() takes a list of head ids, not a {type(removed).__name__}") from None
        unknown = [h for h in removed if h not in self.costs]
        if unknown:
            raise ValueError(f"accuracy() got {unknown[0]!r}, which is not one of the heads")
        self.calls.append(tuple(removed))
        return self.value(removed)

    def greedy(self, best=max) -> tuple[list[str], list[float]]:
        removed: list[str] = []
        remaining, curve = list(self.heads), [self.value([])]
        while remaining:
            h = best(remaining, key=lambda h: self.value(removed + [h]))
            removed.append(h)
            remaining.remove(h)
            curve.append(self.value(removed))
        return removed, curve

    def one_shot(self) -> list[str]:
        return sorted(self.heads, key=lambda h: -self.value([h]))


def _pruning_cases() -> list[_Accuracy]:
    seven = [
        "enc.self.0.0",
        "enc.self.0.1",
        "enc.self.0.2",
        "dec.self.0.0",
        "dec.self.0.1",
        "dec.cross.0.0",
        "dec.cross.0.1",
    ]
    five = ["enc.self.1.0", "enc.self.1.1", "enc.self.1.2", "enc.self.1.3", "enc.self.1.4"]
    return [
        # 0 and 1 back each other up; so do 2, 3 and 4: a one-shot ranking removes them together
        _Accuracy(
            seven,
            [0.001, 0.0015, 0.002, 0.0025, 0.0031, 0.04, 0.0035],
            [([0, 1], 0.2), ([2, 3, 4], 0.3), ([5, 6], 0.05)],
        ),
        _Accuracy(five, [0.012, 0.001, 0.0022, 0.03, 0.0013], [([1, 4], 0.1), ([1, 2], 0.06)]),
        _Accuracy(["dec.cross.2.0"], [0.4], []),
        # ties (costs in powers of 2: equal sums are equal floats): the first of equals, in heads' order
        _Accuracy(["dec.self.1.0", "dec.self.1.1", "dec.self.1.2", "dec.self.1.3"], [2**-6, 2**-6, 2**-5, 2**-6], []),
    ]


def _hidden_pruning() -> list[_Accuracy]:
    """At grading time: six heads with costs and a backup pair no notebook used (no two sums tie)."""
    if not hidden(True):
        return []
    rng = case_rng(71)
    heads = [f"enc.self.0.{h}" for h in range(6)]
    costs = [float(c) for c in rng.permutation(6) * 0.004 + rng.uniform(0.0005, 0.0015, 6).round(5)]
    pair = [int(i) for i in rng.choice(6, 2, replace=False)]
    return [_Accuracy(heads, costs, [(sorted(pair), 0.25)])]


# ---------------------------------------------------------------- ⭐⭐⭐ gradient importance

IMPORTANCE_ADVICE = (
    (
        "must match the size",
        "the gate must line up with z (batch, heads, pos, d_head): a (batch, heads) gate as gate[:, :, None, None]",
    ),
    (
        "does not require grad",
        "create the gate with requires_grad=True, and do not run under torch.no_grad()",
    ),
    (
        "not have been used in the graph",
        "the gate never reached the loss: multiply z by it inside the hook on f'{name}.hook_z' "
        "and run the model "
        "with that hook",
    ),
)


def _gate_grads(model, batches, at: float = 1.0, only: str | None = None, ignore_pad: bool = True) -> dict[str, Tensor]:
    """{module: (problems, heads)} each problem's own ∂L(x)/∂ξ_h, gates at `at` (on `only`, or every
    module), L(x) the problem's summed cross-entropy (PAD ignored unless ignore_pad is False)."""
    modules = model.attention_modules()
    out: dict[str, list] = {name: [] for name in modules}
    with model.without_hooks(), torch.enable_grad():
        for src, tgt_in, gold in batches:
            gates = {
                name: torch.full((len(src), m.n_heads), at if only in (None, name) else 1.0, requires_grad=True)
                for name, m in modules.items()
            }
            hooks = [(f"{name}.hook_z", lambda z, hook, g=g: gate_z(z, g)) for name, g in gates.items()]
            logits = model.run_with_hooks(src, tgt_in, hooks=hooks)
            loss = F.cross_entropy(
                logits.flatten(0, 1), gold.flatten(), ignore_index=PAD if ignore_pad else -100, reduction="sum"
            )
            for name, g in zip(gates, torch.autograd.grad(loss, list(gates.values()))):
                out[name].append(g.double())
    return {name: torch.cat(parts) for name, parts in out.items()}


def _importance_mistakes(G: Tensor, sizes: list[int], tokens: list[int]) -> list[tuple[Tensor, str]]:
    """Scores a learner gets by a common mistake, from each problem's gradients G (problems, heads)."""
    n, n_batches = G.size(0), len(sizes)
    per_batch = list(G.split(sizes))
    batch_sums = torch.stack([g.sum(0) for g in per_batch])
    cumulative = batch_sums.cumsum(0)
    shared = "one gate shared by a whole batch: the problems' gradients add up and cancel before the abs"
    hint_shared = (
        f"{shared} — give each problem its own gate, torch.ones(batch, heads, requires_grad=True), "
        f"so that row x of the gradient is problem x's"
    )
    hint_accum = (
        "the gradients accumulate from one batch to the next: gate.grad adds up over .backward() "
        "calls — use a fresh gate for each batch (or set gate.grad = None), or torch.autograd.grad"
    )
    return [
        (
            G.sum(0) / n,
            "you forgot the abs: |∂L/∂ξ| of each problem, so that gradients of opposite sign do not "
            "cancel — .abs() before averaging",
        ),
        (-G.sum(0) / n, "you forgot the abs (and the sign is flipped): take |∂L/∂ξ| of each problem before averaging"),
        ((G.sum(0) / n).abs(), "you took the abs after averaging: take |∂L/∂ξ| of each problem first, then average"),
        (batch_sums.abs().sum(0) / n, hint_shared),
        (batch_sums.abs().mean(0), hint_shared),
        (torch.stack([(g.sum(0) / len(g)).abs() for g in per_batch]).mean(0), hint_shared),
        (cumulative.abs().sum(0) / n, hint_accum),
        (G.cumsum(0).abs().sum(0) / n, hint_accum),
        (
            torch.stack([g.abs().sum(0) / t for g, t in zip(per_batch, tokens)]).sum(0) / n,
            "the loss of a problem is the sum of its tokens' cross-entropies: F.cross_entropy(..., reduction='sum') "
            "— the default 'mean' divides by the batch's number of tokens",
        ),
        (G.abs().sum(0), "you summed over the problems: divide by their number, to get a mean"),
        (
            G.abs().sum(0) / n_batches,
            "you divided by the number of batches: divide by the number of problems (the batches differ in size)",
        ),
        (
            torch.stack([g.abs().mean(0) for g in per_batch]).mean(0),
            "you averaged the batches' means: each problem must count once — sum |∂L/∂ξ| over every problem, "
            "divide by their total number (the batches differ in size)",
        ),
        (
            (G.abs().sum(0) / n) / (G.abs().sum(0) / n).norm(),
            "you normalised the scores (divided by their L2 norm): return the raw mean |∂L/∂ξ|; the per-layer "
            "normalisation comes later, in the study",
        ),
    ]
