"""Checkers for notebook 04's exercises (head ablation), as every checker in attnkit/exercises: one printed
line, ✅ or a hint naming the likely mistake, never a traceback; True when passed.

They test on the checker's own material, never the notebook's: random z tensors, a tiny
seeded encoder-decoder (3 heads per layer, 1 + 2 layers, d_head 4), and synthetic accuracy
functions with heads that back each other up. Global RNG state is left as it was.

The checkers are here, where the notebook imports them; what they share lives beside them:
ablation_values (calling the learner's code, reading its result), ablation_activations (the hook's
and the mean z's hints) and ablation_rankings (pruning's and gradient importance's cases and mistakes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from ..adder.data import PAD
from ..core.head_ablation import ablate_heads
from ..core.hooks import HookPoint
from .ablation_activations import HOOK_ADVICE, MEAN_Z_ADVICE, _diagnose_hook, _mean_z_mistakes, _mean_z_shapes
from .ablation_rankings import (
    IMPORTANCE_ADVICE,
    PRUNE_ADVICE,
    _gate_grads,
    _hidden_pruning,
    _importance_mistakes,
    _pruning_cases,
)
from .ablation_values import _array, _learner, _randn, _same
from .checking import Hint, case_generator, checker, require_tensor, wrote_into_activation
from .models import sum_batches, tiny_ablation_model

# ---------------------------------------------------------------- ⭐ an ablation hook


@checker(
    "ablation_hook",
    "04-ablation-hook",
    "my_ablation_hook",
    references=(
        "attnkit.core.head_ablation:gate_z",
        "attnkit.core.head_ablation:ablate_heads",
    ),
)
@torch.no_grad()
def check_ablation_hook(make_hook: Callable) -> str:
    """`make_hook(head, fill=None)` -> hook(z, hook) returning z (batch, heads, pos, d_head) with
    z[:, head] replaced by 0 (fill None) or by fill[head] (fill: (heads, d_head), a mean z)."""
    gen = case_generator(40)
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
    gen = case_generator(41)
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
            advice=MEAN_Z_ADVICE,
        )
        if not (torch.equal(z_in, z) and torch.equal(real_in, real)):
            raise Hint("your function changed its input in place (e.g. z *= ...): compute on a copy")
        require_tensor(got, "function's result")  # it is the `fill` of a hook, assigned into z
        got = _array(got, "function")
        shape = (n_heads, d_head)
        wrong_shapes = _mean_z_shapes(batch, n_heads, n_pos, d_head)
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
        for candidate, message in _mean_z_mistakes(z, real, per_problem):
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


@checker("prune_order", "04-prune-order", "my_prune_order", references=("attnkit.interp.studies:prune_order",))
def check_prune_order(fn: Callable) -> str:
    """`fn(heads, accuracy)` -> (order, curve): greedy backward elimination — at each step remove
    the remaining head whose removal, on top of those already removed, leaves the highest
    accuracy; until no head is left. curve[k] = accuracy with order[:k] removed (len n + 1)."""
    for acc in _pruning_cases() + _hidden_pruning():
        heads, n = list(acc.heads), len(acc.heads)
        given = list(heads)
        where = f" ({n} head{'s' if n > 1 else ''})"
        result = _learner(
            fn,
            given,
            acc,
            context=where,
            advice=PRUNE_ADVICE,
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
            advice=IMPORTANCE_ADVICE,
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
