"""Checkers for notebook 04's exercises (head ablation), in the style of checks.py: one printed
line, ✅ or a hint naming the likely mistake, never a traceback; True when passed.

They test on the checker's own material, never the notebook's: random z tensors, a tiny
seeded encoder-decoder (3 heads per layer, 1 + 2 layers, d_head 4), and synthetic accuracy
functions with heads that back each other up. Global RNG state is left as it was.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..adder.data import PAD
from ..core.hooks import HookPoint, ablate_heads, gate_z
from .checking import GENERAL_ADVICE, Hint, call, checker, refuse_list, require_tensor, wrote_into_activation
from .models import sum_batches, tiny_ablation_model


def _learner(fn: Callable, *args, context: str = "", advice: tuple = (), **kwargs):
    """checking.call, with this exercise's own advice first: ((fragment of the message, advice), ...)."""
    if not callable(fn):
        raise Hint(f"expected a function, got a {type(fn).__name__}: pass the function itself, without calling it")
    return call(fn, *args, context=context, advice=tuple(advice) + GENERAL_ADVICE, **kwargs)


def _randn(*shape: int, gen: torch.Generator) -> Tensor:
    return torch.randn(*shape, generator=gen)


def _same(a: Tensor, b: Tensor, tol: float = 1e-5) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=tol, rtol=tol)


def _array(x, what: str) -> np.ndarray:
    """A learner's numbers (tensor, numpy array, list) as a float64 array, or a hint."""
    if x is None:
        raise Hint(f"your {what} returned None — did you forget `return`?")
    refuse_list(x, f"{what}'s result")
    if isinstance(x, Tensor):
        x = x.detach().cpu()
    try:
        out = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError, RuntimeError):
        raise Hint(f"your {what} returned a {type(x).__name__}, expected a tensor of numbers") from None
    return out


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


@checker(
    "ablation_hook",
    "04-ablation-hook",
    "my_ablation_hook",
    references=(
        "attnkit.core.hooks:gate_z",
        "attnkit.core.hooks:ablate_heads",
    ),
)
@torch.no_grad()
def check_ablation_hook(make_hook: Callable) -> str:
    """`make_hook(head, fill=None)` -> hook(z, hook) returning z (batch, heads, pos, d_head) with
    z[:, head] replaced by 0 (fill None) or by fill[head] (fill: (heads, d_head), a mean z)."""
    gen = torch.Generator().manual_seed(40)
    point = HookPoint()
    point.name = "enc.self.0.hook_z"
    cases = [(2, 3, 5, 6, 1), (1, 5, 3, 4, 4), (3, 2, 7, 5, 0), (2, 6, 1, 3, 2)]  # batch, heads, pos, d_head, head
    for batch, n_heads, n_pos, d_head, head in cases:
        for mode in ("zero", "mean"):
            z = _randn(batch, n_heads, n_pos, d_head, gen=gen)
            fill = None if mode == "zero" else _randn(n_heads, d_head, gen=gen)
            given = None if fill is None else fill.clone()
            shape = (batch, n_heads, n_pos, d_head)
            where = f" ({mode} ablation of head {head}, z of shape {shape})"
            hook = _learner(make_hook, head, given, context=" when making the hook" + where)
            if not callable(hook):
                raise Hint(f"my_ablation_hook should return a function hook(z, hook), not a {type(hook).__name__}")
            mine = z.clone()
            out = _learner(hook, mine, hook=point, context=where, advice=HOOK_ADVICE)
            if given is not None and fill is not None and not torch.equal(given, fill):
                raise Hint(
                    "your hook changed `fill` in place: it is the reference mean, shared by every run — "
                    "copy from it (fill[head]) without writing to it"
                )
            if not torch.equal(mine, z):
                raise wrote_into_activation("z[:, head] = ...")
            if out is None:
                raise Hint(
                    "your hook returned None: the value a hook returns replaces the activation — return the new z"
                )
            if not isinstance(out, Tensor):
                raise Hint(f"the hook must return a torch tensor of z's shape {shape}, not a {type(out).__name__}")
            if tuple(out.shape) == (batch, n_pos, d_head):
                raise Hint(
                    "you returned only the head's slice z[:, head]: return the whole z, with that slice replaced"
                )
            if tuple(out.shape) != shape:
                raise Hint(f"the hook must return z's shape {shape}, got {tuple(out.shape)}")
            if out.dtype != z.dtype:  # the module's output projection multiplies it with float32 weights
                raise Hint(
                    f"your hook returns {out.dtype} for a z of {z.dtype}: keep z's dtype (no .double(), and "
                    "a fill from torch.tensor(..., dtype=z.dtype) or z.new_zeros)",
                    mistake="wrong-dtype",
                )
            want = z.clone()
            want[:, head] = 0.0 if fill is None else fill[head]
            if not _same(out, want):
                raise Hint(_diagnose_hook(out.detach(), z, head, fill) + where)

    # The same hooks inside the kit's own mechanism: run_with_hooks on a tiny model vs ablate_heads.
    model = tiny_ablation_model(4)
    ((src, tgt_in, _),) = sum_batches(model, [3], seed=4)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        fills = {name: torch.randn(m.n_heads, m.d_head) for name, m in model.attention_modules().items()}
    for name, head, fill in [("dec.cross.1", 2, None), ("enc.self.0", 0, fills["enc.self.0"])]:
        hook = _learner(make_hook, head, None if fill is None else fill.clone(), context=" when making the hook")
        got = _learner(
            lambda: model.run_with_hooks(src, tgt_in, hooks=[(f"{name}.hook_z", hook)]),
            context=f" inside model.run_with_hooks on {name}.hook_z",
            advice=HOOK_ADVICE,
        )
        with ablate_heads(model, [f"{name}.{head}"], None if fill is None else fills):
            want = model(src, tgt_in)
        if not (isinstance(got, Tensor) and _same(got, want, 1e-4)):
            raise Hint(
                f"your hook works on a lone tensor but not inside model.run_with_hooks on {name}.hook_z: "
                "it must only use its z argument and what my_ablation_hook was given"
            )
    return "zero and mean ablation of one head, 2 to 6 heads, batch 1 to 3, and inside run_with_hooks"


# ---------------------------------------------------------------- ⭐⭐ the mean z


@checker("mean_z", "04-mean-z", "my_mean_z", references=("attnkit.adder.evaluate:mean_z",))
@torch.no_grad()
def check_mean_z(fn: Callable) -> str:
    """`fn(z, real)` -> (heads, d_head): each head's mean z over every real query position,
    z (batch, heads, pos, d_head), real (batch, pos) bool."""
    gen = torch.Generator().manual_seed(41)
    # (real lengths, heads, pos, d_head); the last has a problem of padding only and two all-padding columns
    cases = [([6, 2, 4, 5], 3, 6, 5), ([3], 2, 4, 7), ([1, 5, 2], 5, 5, 3), ([3, 0, 2], 2, 5, 4)]
    for lengths, n_heads, n_pos, d_head in cases:
        batch = len(lengths)
        z = _randn(batch, n_heads, n_pos, d_head, gen=gen) + 2.0  # not centred: padding shifts the mean
        real = torch.arange(n_pos)[None, :] < torch.tensor(lengths)[:, None]
        z_in, real_in = z.clone(), real.clone()
        where = f" (z of shape {tuple(z.shape)}, {int(real.sum())} real positions)"
        got = _learner(
            fn,
            z_in,
            real_in,
            context=where,
            advice=(
                (
                    "shape of the mask",
                    "real is (batch, pos) but z is (batch, heads, pos, d_head): z.transpose(1, 2)[real] "
                    "gives the real positions' vectors, (n_real, heads, d_head)",
                ),
                (
                    "must match the size",
                    "real is (batch, pos) and z is (batch, heads, pos, d_head): line them up with "
                    "real[:, None, :, None]",
                ),
            ),
        )
        if not (torch.equal(z_in, z) and torch.equal(real_in, real)):
            raise Hint("your function changed its input in place (e.g. z *= ...): compute on a copy")
        require_tensor(got, "function's result")  # it is the `fill` of a hook, assigned into z
        got = _array(got, "function")
        shape = (n_heads, d_head)
        wrong_shapes = [  # the first that fits names the mistake (two can coincide, e.g. batch = heads)
            ((n_heads,), "you averaged d_head away too: keep one vector per head, shape (heads, d_head)"),
            (
                (n_pos, d_head),
                "you averaged over the heads: average over the batch and position axes (0 and 2), keep the head axis",
            ),
            ((batch, n_heads, d_head), "you kept the batch axis: average over every problem's positions too"),
            ((n_heads, n_pos, d_head), "you kept the position axis: average over the positions too"),
            ((batch, n_pos, d_head), "you averaged over the heads: average over the batch and position axes (0 and 2)"),
        ]
        if got.shape != shape:
            for wrong_shape, hint in wrong_shapes:
                if got.shape == wrong_shape:
                    raise Hint(hint + where)
            raise Hint(f"your result has shape {got.shape}, expected (heads, d_head) = {shape}{where}")
        mask = real[:, None, :, None].double()
        zd = z.double()
        want = (zd * mask).sum(dim=(0, 2)) / real.sum()
        got_t = torch.from_numpy(got)
        if torch.allclose(got_t, want, atol=1e-5, rtol=1e-5):
            continue
        per_problem = ((zd * mask).sum(dim=2) / mask.sum(dim=2)).mean(dim=0)
        if torch.isnan(got_t).any():
            if torch.equal(torch.isnan(got_t), torch.isnan(per_problem)) and 0 in lengths:  # 0 / 0 for that problem
                raise Hint(
                    "NaN in your result: a problem here has no real position, and its own mean is 0 / 0 — "
                    "divide the sum over every problem by the total number of real positions, real.sum()" + where
                )
            raise Hint(f"NaN in your result{where}, where every head's mean is a finite number")
        wrong = [
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
        for candidate, message in wrong:
            if torch.allclose(got_t, candidate, atol=1e-5, rtol=1e-5):
                raise Hint(message + where)
        ratio = (got_t / want).flatten()
        if torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-4) and abs(ratio[0] - 1) > 1e-3:
            raise Hint(
                f"your mean is {ratio[0]:.3g} × the right one: divide the sum by the number of real "
                f"positions, real.sum() — each counted once, not once per head or per feature" + where
            )
        raise Hint(
            "your mean differs from each head's average z over the real positions: sum z where real is "
            "True over the batch and position axes, divide by real.sum()" + where
        )
    return "each head's mean over the real positions, for batch 1 to 4, 2 to 5 heads, ragged padding"


# ---------------------------------------------------------------- ⭐⭐ greedy joint pruning


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


@checker("prune_order", "04-prune-order", "my_prune_order", references=("attnkit.interp.studies:prune_order",))
def check_prune_order(fn: Callable) -> str:
    """`fn(heads, accuracy)` -> (order, curve): greedy backward elimination — at each step remove
    the remaining head whose removal, on top of those already removed, leaves the highest
    accuracy; until no head is left. curve[k] = accuracy with order[:k] removed (len n + 1)."""
    for acc in _pruning_cases():
        heads, n = list(acc.heads), len(acc.heads)
        given = list(heads)
        where = f" ({n} head{'s' if n > 1 else ''})"
        result = _learner(
            fn,
            given,
            acc,
            context=where,
            advice=(
                (
                    "'_Accuracy'",
                    "the arguments are (heads, accuracy), in that order: heads is the list, accuracy the function",
                ),
            ),
        )
        if given != heads:
            raise Hint(
                "your function changed the `heads` list it was given (remaining = heads, then "
                ".remove?): work on a copy, remaining = list(heads)"
            )
        if result is None:
            raise Hint("your function returned None — did you forget `return order, curve`?")
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise Hint(f"return a pair (order, curve), not a {type(result).__name__}")
        order, curve = result
        if isinstance(order, (str, bytes)) or not hasattr(order, "__iter__"):
            raise Hint(f"order should be a list of head ids, not a {type(order).__name__}")
        order = list(order)
        if any(not isinstance(h, str) for h in order):
            raise Hint("order should list the head ids themselves (the strings in `heads`), not indices")
        want_order, want_curve = acc.greedy()
        repeated = [h for i, h in enumerate(order) if h in order[:i]]
        if repeated:
            raise Hint(
                f"head {repeated[0]} is removed twice: take each removed head out of the remaining candidates{where}"
            )
        if order != want_order:
            k = next((i for i, (a, b) in enumerate(zip(order, want_order)) if a != b), len(order))
            if k < len(order) and order[k] in acc.costs and acc.value(order[: k + 1]) == acc.value(want_order[: k + 1]):
                raise Hint(
                    f"after removing {order[:k]}, {order[k]} and {want_order[k]} leave the same accuracy: on a tie "
                    f"take the first of equals in the order of `heads` ({want_order[k]}), as max() does — a `>=` "
                    f"comparison or a sort keeps the last{where}",
                    mistake="prune-tie",
                )
            if k == len(order) and len(order) < n:
                raise Hint(
                    f"you stopped after {len(order)} of {n} heads: keep removing until no head is left "
                    f"(the end of the curve is the model with every head removed){where}"
                )
            if order == acc.greedy(best=min)[0] or order == acc.one_shot()[::-1]:
                raise Hint(
                    "you removed the head whose removal hurts most: remove the one that leaves the "
                    "highest accuracy (max, not min)" + where
                )
            if order == acc.one_shot():
                if sum(len(c) == 1 for c in acc.calls) > n + 1:  # singletons again after the first step
                    raise Hint(
                        "you evaluated each candidate alone: evaluate it together with the heads already "
                        "removed, accuracy(removed + [h]) — heads back each other up" + where
                    )
                raise Hint(
                    "you ranked the heads once, by their single-head accuracy: after every removal, "
                    "re-evaluate each remaining head on top of those already removed — heads back each "
                    "other up, so the ranking changes" + where
                )
            got_acc = acc.value(order[: k + 1]) if k < len(order) else float("nan")
            raise Hint(
                f"after removing {order[:k]}, remove {want_order[k]} next (accuracy "
                f"{acc.value(want_order[: k + 1]):.4f} with it removed too); you removed "
                f"{order[k] if k < len(order) else 'nothing'} ({got_acc:.4f}){where}"
            )
        try:
            curve = [float(x) for x in (curve.tolist() if hasattr(curve, "tolist") else curve)]
        except (TypeError, ValueError):
            raise Hint(
                f"curve should be a list of {n + 1} accuracies (numbers): one before any removal and one after each"
            ) from None
        close = lambda xs, ys: len(xs) == len(ys) and np.allclose(xs, ys, atol=1e-9, rtol=0)
        if close(curve, want_curve):
            continue
        if close(curve, want_curve[1:]):
            raise Hint(
                f"curve should start with the intact model's accuracy, accuracy([]), then one value after "
                f"each removal: {n + 1} values for {n} heads{where}"
            )
        if close(curve, want_curve[:-1]):
            raise Hint(
                f"curve misses the last step: one value before any removal and one after each, {n + 1} values{where}"
            )
        if close(curve, [want_curve[0] - x for x in want_curve]) or close(
            curve, [100 * (want_curve[0] - x) for x in want_curve]
        ):
            raise Hint("curve should hold accuracies, not drops: curve[k] = accuracy(order[:k])" + where)
        if close(curve[1:], [acc.value([h]) for h in order]):
            raise Hint(
                "curve[k] is the accuracy with the first k heads removed together, accuracy(order[:k]), "
                "not with head k removed alone" + where
            )
        raise Hint(f"curve should be [accuracy(order[:k]) for k = 0 … {n}]; yours differs{where}")
    return "greedy order and curve on 7, 5, 4 and 1 heads, with heads that back each other up and ties"


# ---------------------------------------------------------------- ⭐⭐⭐ gradient importance


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


@checker(
    "head_importance",
    "04-head-importance",
    "my_head_importance",
    references=("attnkit.interp.studies:gradient_importance",),
)
def check_head_importance(fn: Callable) -> str:
    """`fn(model, name, batches)` -> (heads,): the mean over every problem of |∂L(x)/∂ξ_h| at
    ξ = 1, the gate ξ multiplying head h's z at `name`.hook_z; L(x) = the problem's summed
    cross-entropy, PAD ignored; batches: (src, tgt_in, gold) triples."""
    model = tiny_ablation_model(7)
    sizes = [3, 1, 5]
    batches = sum_batches(model, sizes, seed=7)
    tokens = [int((gold != PAD).sum()) for _, _, gold in batches]
    grads = _gate_grads(model, batches)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    n_heads = model.cfg.n_heads
    for name in ("enc.self.0", "dec.cross.1"):
        where = f" (module {name}, {n_heads} heads, batches of {sizes[0]}, {sizes[1]} and {sizes[2]} problems)"
        given = [tuple(t.clone() for t in b) for b in batches]
        result = _learner(
            fn,
            model,
            name,
            given,
            context=where,
            advice=(
                (
                    "must match the size",
                    "the gate must line up with z (batch, heads, pos, d_head): a (batch, heads) "
                    "gate as gate[:, :, None, None]",
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
            ),
        )
        if any(p.fns for p in model.hook_points().values()):
            raise Hint(
                "your code left a hook attached to the model: use model.run_with_hooks(..., hooks=[...]) "
                "or `with model.hooks(...)`, which always detach them"
            )
        if any(not torch.equal(v, state[k]) for k, v in model.state_dict().items()):
            raise Hint(
                "your code changed the model's weights (an optimizer step?): only the gates need a "
                "gradient, and nothing is updated"
            )
        if model.training:
            raise Hint("your code left the model in training mode: call model.eval() again (or never leave it)")
        frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
        if frozen:  # training the model afterwards would silently leave these weights as they are
            raise Hint(
                f"your code left {len(frozen)} of the model's weights with requires_grad=False ({frozen[0]}, ...): "
                "only the gate needs a gradient, but the weights must stay trainable — don't switch them off, "
                "or switch them back on before returning",
                mistake="global-state",
            )
        changed = [i for i, (b, g) in enumerate(zip(batches, given)) if not all(map(torch.equal, b, g))]
        if changed:
            raise Hint(
                f"your code wrote into the caller's batch {changed[0]} (src, tgt_in or gold, e.g. "
                "gold[gold == PAD] = -100): the study reuses its batches — pass ignore_index=PAD, or work on a copy",
                mistake="writes-caller-batch",
            )
        require_tensor(result, "function's result")
        got = _array(result, "function")
        if got.shape != (n_heads,):
            if got.size == n_heads:
                raise Hint(
                    f"your scores have shape {got.shape}: return one number per head, shape ({n_heads},)" + where
                )
            adder = " (not the notebook's adder, which has 4 heads per layer)" if got.shape == (4,) else ""
            raise Hint(
                f"your scores have shape {got.shape}, expected ({n_heads},) — one per head of `name` in "
                f"the `model` passed in{adder}{where}"
            )
        got_t = torch.from_numpy(got)
        G = grads[name]
        want = G.abs().mean(0)
        close = lambda x: torch.allclose(got_t, x, rtol=2e-3, atol=1e-6 * float(want.abs().max()))
        if close(want):
            continue
        for candidate, hint in _importance_mistakes(G, sizes, tokens):
            if close(candidate):
                raise Hint(hint + where)
        others = [m for m in grads if m != name and close(grads[m].abs().mean(0))]
        if others:
            raise Hint(
                f"these are the scores of {others[0]}: gate the hook point f'{{name}}.hook_z' of the "
                f"module you were given{where}"
            )
        if close(_gate_grads(model, batches, at=0.0, only=name)[name].abs().mean(0)):
            raise Hint(
                "the gradient is taken at ξ = 1 (every head on): start the gates at torch.ones, not zeros" + where
            )
        if close(_gate_grads(model, batches, ignore_pad=False)[name].abs().mean(0)):
            raise Hint(
                "padding counted in the loss: gold is PAD after the answer's </s>, so pass "
                "ignore_index=PAD to F.cross_entropy" + where
            )
        raise Hint(
            f"your scores {np.round(got, 4).tolist()} differ from the mean |∂L/∂ξ| "
            f"{np.round(want.numpy(), 4).tolist()}: "
            f"a gate ξ (ones, requires_grad) multiplies each head's z at f'{{name}}.hook_z', and the "
            f"gradient is the gate's, not a weight's{where}"
        )
    return "mean |∂L/∂ξ| per head on two modules of a 3-head model, over batches of 3, 1 and 5 problems"
