"""Notebook 04's checkers: correct solutions written differently pass; planted mistakes get their
own hint; whatever a learner hands over gives one line (❌ or ⏳) and False, never a traceback."""

import functools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnkit.adder.data import PAD
from attnkit.core.head_ablation import gate_z
from attnkit.exercises import ablation as ablation_checks
from attnkit.exercises import models as check_models

from helpers import assert_hint, checker_line

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "04_head_ablation.ipynb"
STUB = 'raise NotImplementedError("your code here")'


def run(check, fn):
    return checker_line(check, fn)


def never_raises(check, things):
    for thing in things:
        ok, line = run(check, thing)
        assert ok is False and line[0] in "❌⏳", line


def solutions() -> dict:
    """The notebook's solution cells, run (the source notebook is the solution edition)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    namespace = {"torch": torch}
    for cell in cells:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            exec("".join(cell["source"]), namespace)
    return namespace


def stub(*args, **kwargs):
    raise NotImplementedError("your code here")


def weird_inputs():
    """What a learner might hand any checker by mistake."""

    class Plain:  # a class that is not an nn.Module, and whose instances are not callable
        def __init__(self, *args):
            pass

    def generator(*args):
        yield 1

    return [
        None,
        [1, 2, 3],
        np.zeros(3),
        torch.zeros(3),
        Plain,
        generator,
        (lambda: 0),
        (lambda *a: None),
        (lambda *a: [0.0] * 3),
        (lambda *a: np.zeros((2, 2))),
        "my_function",
        3,
    ]


def test_notebook_solutions_pass_and_stubs_wait():
    ns = solutions()
    for check, name in [
        (ablation_checks.check_ablation_hook, "my_ablation_hook"),
        (ablation_checks.check_mean_z, "my_mean_z"),
        (ablation_checks.check_prune_order, "my_prune_order"),
        (ablation_checks.check_head_importance, "my_head_importance"),
    ]:
        assert run(check, ns[name])[0], name
        ok, line = run(check, stub)
        assert not ok and line.startswith("⏳"), line
    source = NOTEBOOK.read_text()
    assert (
        source.count("### BEGIN SOLUTION") == 4
        and "from attnkit.exercises import ablation as ablation_checks" in source
    )


def test_notebook_exercise_cells(capsys):
    """Each exercise: a ⭐ title with the task and a Hint, the solution cell (nbgrader metadata), then
    one checker call; the stubbed solution cell (as the student edition has it) makes the checker wait."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    found = []
    for i, cell in enumerate(cells):
        meta = cell["metadata"].get("nbgrader")
        if not meta or not meta.get("solution"):  # check cells are nbgrader tests
            continue
        title, source, check = "".join(cells[i - 1]["source"]), "".join(cell["source"]), cells[i + 1]
        assert title.startswith("### ⭐") and " Exercise: " in title.splitlines()[0], title
        assert "<details><summary>Hint</summary>\n\n" in title and title.rstrip().endswith("</details>")
        assert meta == {
            "grade": False,
            "grade_id": meta["grade_id"],
            "locked": False,
            "schema_version": 3,
            "solution": True,
            "task": False,
        }
        assert (check["metadata"]["tags"], check["metadata"]["attnkit"]) == (["check"], {"exercise": meta["grade_id"]})
        call = "".join(check["source"]).strip()
        assert call.startswith("ablation_checks.check_") and call.endswith(");") and "\n" not in call, call
        lines, stubbed, inside = source.splitlines(), [], False
        for line in lines:
            if line.strip() == "### BEGIN SOLUTION":
                inside = True
                stubbed.append(line[: len(line) - len(line.lstrip())] + STUB)
            elif line.strip() == "### END SOLUTION":
                inside = False
            elif not inside:
                stubbed.append(line)
        namespace = {"torch": torch, "ablation_checks": ablation_checks}
        exec("\n".join(stubbed), namespace)
        assert eval(call.rstrip(";"), namespace) is False
        line = capsys.readouterr().out.strip()
        assert len(line.splitlines()) == 1 and line.startswith("⏳"), line
        found.append(meta["grade_id"])
    assert found == ["04-ablation-hook", "04-mean-z", "04-prune-order", "04-head-importance"]


# ---------------------------------------------------------------- ablation hook


def hook_clone(head, fill=None):
    def hook(z, hook):
        z = z.clone()
        z[:, head] = 0.0 if fill is None else fill[head]
        return z

    return hook


def hook_in_place(head, fill=None):  # changes z in place and returns nothing: refused (z must stay as it came)
    def hook(z, hook):
        z[:, head] = 0 if fill is None else fill[head]

    return hook


def hook_gate(head, fill=None):  # the kit's own blend, with a keep vector
    def hook(z, hook):
        keep = torch.ones(z.size(1))
        keep[head] = 0
        return gate_z(z, keep, fill)

    return hook


class HookClass:  # a callable class instead of a closure
    def __init__(self, head, fill=None):
        self.head, self.fill = head, fill

    def __call__(self, z, hook):
        mask = (torch.arange(z.size(1)) == self.head)[None, :, None, None]
        value = torch.zeros_like(z) if self.fill is None else self.fill[None, :, None, :].expand_as(z)
        return torch.where(mask, value, z)


def hook_partial(head, fill=None):  # TransformerLens style: a hook with extra arguments and partial
    def ablate(z, hook, head, fill):
        out = z.clone()
        out[:, head, :, :] = torch.zeros(z.shape[-1]) if fill is None else fill[head].clone()
        return out

    return functools.partial(ablate, head=head, fill=fill)


def hook_mistake(edit, returns=True, clone=True):
    """A hook factory whose hook applies edit(z, head, fill) to z."""

    def make(head, fill=None):
        def hook(z, hook):
            if clone:
                z = z.clone()
            edit(z, head, fill)
            return z if returns else None

        return hook

    return make


def _set(z, index, value):
    z[index] = value


def test_ablation_hook_correct_variants():
    for good in (hook_clone, HookClass, hook_partial):
        assert run(ablation_checks.check_ablation_hook, good)[0], good
    passed, line = run(ablation_checks.check_ablation_hook, hook_in_place)  # issue 27: z must stay as it came
    assert not passed and "your hook wrote into the z it was handed" in line, line
    passed, line = run(ablation_checks.check_ablation_hook, hook_gate)  # the kit's own gate_z does the work
    assert not passed and "calls the kit's own attnkit.core.head_ablation.gate_z" in line, line


def test_ablation_hook_mistakes():
    value = lambda fill, head: 0.0 if fill is None else fill[head]
    mistakes = {
        hook_mistake(lambda z, h, f: _set(z, (slice(None), slice(None), h), value(f, h))): "position 1 of every head",
        hook_mistake(lambda z, h, f: _set(z, h, value(f, h))): "not z[head]",
        hook_mistake(lambda z, h, f: _set(z, (Ellipsis, h), 0.0)): "not z[..., head]",
        hook_mistake(lambda z, h, f: z.zero_()): "every head of the layer",
        hook_mistake(lambda z, h, f: _set(z, (slice(None), h), value(f, h)), returns=False): "your hook returned None",
        hook_mistake(lambda z, h, f: _set(z, (slice(None), h), 0.0)): "you put 0 there",
        hook_mistake(
            lambda z, h, f: _set(z, (slice(None), h), z[:, h].mean(dim=(0, 1)) if f is not None else 0.0)
        ): "this batch's own mean",
        hook_mistake(
            lambda z, h, f: _set(z, (slice(None), h), z[:, h].mean(dim=1, keepdim=True) if f is not None else 0.0)
        ): "this batch's own mean",
        hook_mistake(
            lambda z, h, f: _set(z, (slice(None), h), f.mean(0) if f is not None else 0.0)
        ): "averaged fill over the heads",
        hook_mistake(
            lambda z, h, f: _set(z, (slice(None), h), f[h].mean() if f is not None else 0.0)
        ): "into one number",
        hook_mistake(lambda z, h, f: _set(z, (slice(None), h - 1), value(f, h - 1))): "heads are 0-based",
        hook_mistake(lambda z, h, f: _set(z, (slice(None), h, 0), value(f, h))): "only part of the head",
        hook_mistake(lambda z, h, f: _set(z, (0, h), value(f, h))): "only part of the head",
        hook_mistake(
            lambda z, h, f: z[:, h].add_(f[h]) if f is not None else _set(z, (slice(None), h), 0.0)
        ): "you added fill[head]",
        hook_mistake(
            lambda z, h, f: _set(z, (slice(None), h), f[(h + 1) % len(f)] if f is not None else 0.0)
        ): "use the removed head's own mean",
        hook_mistake(lambda z, h, f: None): "leaves z unchanged",
        (lambda head, fill=None: lambda z, hook: z[:, head] * 0): "only the head's slice",
        (lambda head, fill=None: lambda z, hook: z.numpy()): "torch tensor",
        (lambda head, fill=None: torch.zeros(3)): "should return a function",
        (lambda head, fill=None: lambda z: z): "TypeError",  # hook without `hook` arg
        hook_mistake(lambda z, h, f: _set(z, (slice(None), h), 0.0 if f is None else f)): "fill[head], shape (d_head,)",
        hook_mistake(lambda z, h, f: _set(z, (slice(None), h), f[h] if f else 0.0)): "`fill is None`",
        hook_mistake(
            lambda z, h, f: (
                _set(z, (slice(None), h), 0.0)
                if f is None
                # a "running mean" in fill
                else (_set(f, h, z[:, h].mean(dim=(0, 1))), _set(z, (slice(None), h), f[h]))
            )
        ): "changed `fill` in place",
    }
    for fn, hint in mistakes.items():
        assert_hint(ablation_checks.check_ablation_hook, fn, hint)


def test_ablation_hook_never_raises():
    never_raises(
        ablation_checks.check_ablation_hook,
        weird_inputs()
        + [
            lambda fill, head: hook_clone(head, fill),  # arguments swapped
            lambda head: hook_clone(head),  # no fill argument
            lambda head, fill=None: lambda z, hook: [z],  # a list
            lambda head, fill=None: lambda z, hook: (x for x in z),
        ],
    )


# ---------------------------------------------------------------- mean z


def mean_mask(z, real):
    return (z * real[:, None, :, None]).sum(dim=(0, 2)) / real.sum()


def mean_index(z, real):
    return z.transpose(1, 2)[real].mean(dim=0)


def mean_numpy(z, real):
    zn, r = z.numpy(), real.numpy()
    return torch.from_numpy(np.einsum("bhpd,bp->hd", zn, r.astype(zn.dtype)) / r.sum())  # the hook's fill: a tensor


def mean_loop(z, real):
    total, count = torch.zeros(z.size(1), z.size(3)), 0
    for b in range(z.size(0)):
        for p in range(z.size(2)):
            if real[b, p]:
                total += z[b, :, p]
                count += 1
    return total / count


def test_mean_z_correct_variants():
    for good in (mean_mask, mean_index, mean_numpy, mean_loop):
        assert run(ablation_checks.check_mean_z, good)[0], good


def test_mean_z_mistakes():
    def in_place(z, real):
        z *= real[:, None, :, None]
        return z.sum(dim=(0, 2)) / real.sum()

    mistakes = {
        (lambda z, real: z.mean(dim=(0, 2))): "padding positions counted",
        (lambda z, real: (z * real[:, None, :, None]).sum(dim=(0, 2)) / real.numel()): "divided by every position",
        (
            lambda z, real: ((z * real[:, None, :, None]).sum(2) / real.sum(1)[:, None, None]).mean(0)
        ): "averaged each problem's mean",
        (lambda z, real: (z * ~real[:, None, :, None]).sum(dim=(0, 2)) / (~real).sum()): "mask is inverted",
        (lambda z, real: z.mean(dim=(0, 1))): "averaged over the heads",
        (lambda z, real: (z * real[:, None, :, None]).sum(2) / real.sum(1)[:, None, None]): "kept the batch axis",
        (lambda z, real: mean_mask(z, real).mean(-1)): "averaged d_head away",
        (
            lambda z, real: (z * real[:, None, :, None]).sum(dim=(0, 2)) / real[:, None, :, None].expand_as(z).sum()
        ): "× the right one",
        (lambda z, real: (z * real[:, None, :, None]).sum(0) / real.sum()): "kept the position axis",
        (lambda z, real: z[real].mean(0)): "z.transpose(1, 2)[real]",
        (lambda z, real: (z * real[:, None, None, :]).sum(dim=(0, 2)) / real.sum()): "real[:, None, :, None]",
        (lambda z, real: None): "forget `return`",
        in_place: "changed its input in place",
        (lambda z, real: mean_mask(z, real) + 0.1): "differs from each head's average",
    }
    for fn, hint in mistakes.items():
        assert_hint(ablation_checks.check_mean_z, fn, hint)


def test_mean_z_never_raises():
    never_raises(
        ablation_checks.check_mean_z,
        weird_inputs() + [lambda real, z: mean_mask(z, real), lambda z: z.mean(0), lambda z, real: "mean"],
    )


# ---------------------------------------------------------------- greedy joint pruning


def prune_max(heads, accuracy):
    removed, remaining, curve = [], list(heads), [accuracy([])]
    while remaining:
        best = max(remaining, key=lambda h: accuracy(removed + [h]))
        removed.append(best)
        remaining.remove(best)
        curve.append(accuracy(removed))
    return removed, curve


def prune_numpy(heads, accuracy):  # numpy argmax, sets for the removed heads, arrays returned
    removed, order, curve = set(), [], [accuracy(set())]
    for _ in range(len(heads)):
        candidates = [h for h in heads if h not in removed]
        scores = np.array([accuracy(removed | {h}) for h in candidates])
        i = int(np.argmax(scores))
        removed.add(candidates[i])
        order.append(candidates[i])
        curve.append(scores[i])
    return tuple(order), np.array(curve)


def prune_recursive(heads, accuracy, removed=()):
    if not heads:
        return [], [accuracy(list(removed))]
    scored = sorted(heads, key=lambda h: -accuracy(list(removed) + [h]))  # stable: first of equals
    best = scored[0]
    order, curve = prune_recursive([h for h in heads if h != best], accuracy, tuple(removed) + (best,))
    return [best] + order, [accuracy(list(removed))] + curve


def test_prune_order_correct_variants():
    for good in (prune_max, prune_numpy, prune_recursive):
        assert run(ablation_checks.check_prune_order, good)[0], good


def test_prune_order_mistakes():
    def one_shot(heads, accuracy):
        order = sorted(heads, key=lambda h: -accuracy([h]))
        return order, [accuracy(order[:k]) for k in range(len(order) + 1)]

    def alone_each_step(heads, accuracy):
        removed, remaining, curve = [], list(heads), [accuracy([])]
        while remaining:
            best = max(remaining, key=lambda h: accuracy([h]))
            removed.append(best)
            remaining.remove(best)
            curve.append(accuracy(removed))
        return removed, curve

    def most_important(heads, accuracy):
        removed, remaining, curve = [], list(heads), [accuracy([])]
        while remaining:
            best = min(remaining, key=lambda h: accuracy(removed + [h]))
            removed.append(best)
            remaining.remove(best)
            curve.append(accuracy(removed))
        return removed, curve

    def stops_early(heads, accuracy):
        removed, remaining, curve = [], list(heads), [accuracy([])]
        while len(remaining) > 1:
            best = max(remaining, key=lambda h: accuracy(removed + [h]))
            removed.append(best)
            remaining.remove(best)
            curve.append(accuracy(removed))
        return removed, curve

    def stops_at_a_drop(heads, accuracy):
        removed, remaining, curve = [], list(heads), [accuracy([])]
        while remaining:
            best = max(remaining, key=lambda h: accuracy(removed + [h]))
            if curve[0] - accuracy(removed + [best]) > 0.01:
                break
            removed.append(best)
            remaining.remove(best)
            curve.append(accuracy(removed))
        return removed, curve

    def duplicates(heads, accuracy):
        removed, curve = [], [accuracy([])]
        for _ in heads:
            best = max(heads, key=lambda h: accuracy(removed + [h]))
            removed.append(best)
            curve.append(accuracy(removed))
        return removed, curve

    def mutates(heads, accuracy):
        removed, curve = [], [accuracy([])]
        while heads:
            best = max(heads, key=lambda h: accuracy(removed + [h]))
            removed.append(best)
            heads.remove(best)
            curve.append(accuracy(removed))
        return removed, curve

    def shifted(f):
        return lambda heads, accuracy: (lambda o, c: (o, f(o, c, accuracy)))(*prune_max(heads, accuracy))

    mistakes = {
        one_shot: "ranked the heads once",
        alone_each_step: "evaluated each candidate alone",
        most_important: "max, not min",
        stops_early: "stopped after 6 of 7",
        stops_at_a_drop: "keep removing until no head is left",
        duplicates: "removed twice",
        mutates: "changed the `heads` list",
        shifted(lambda o, c, a: c[1:]): "start with the intact model's accuracy",
        shifted(lambda o, c, a: c[:-1]): "misses the last step",
        shifted(lambda o, c, a: [c[0] - x for x in c]): "not drops",
        shifted(lambda o, c, a: [c[0]] + [a([h]) for h in o]): "not with head k removed alone",
        shifted(lambda o, c, a: [round(x, 2) for x in c]): "yours differs",
        (lambda heads, accuracy: (list(range(len(heads))), [0.0] * (len(heads) + 1))): "not indices",
        (lambda heads, accuracy: None): "forget `return order, curve`",
        (lambda heads, accuracy: prune_max(heads, accuracy)[0]): "return a pair (order, curve)",
        (lambda heads, accuracy: (sorted(heads), [0.0])): "remove",
        (lambda heads, accuracy: ([accuracy(h) for h in heads], [])): "not the single string",
        (lambda accuracy, heads: prune_max(heads, accuracy)): "in that order",
    }
    for fn, hint in mistakes.items():
        assert_hint(ablation_checks.check_prune_order, fn, hint)


def test_prune_order_never_raises():
    never_raises(
        ablation_checks.check_prune_order,
        weird_inputs()
        + [
            lambda accuracy, heads: prune_max(heads, accuracy),  # arguments swapped
            lambda heads, accuracy: ("order", "curve"),
            lambda heads, accuracy: (prune_max(heads, accuracy)[0], None),
            lambda heads, accuracy: ([{"a": 1}], [0.0]),
            lambda heads, accuracy: (prune_max(heads, accuracy)[0], ["x"] * (len(heads) + 1)),
        ],
    )


def test_pruning_cases_have_no_ties_but_the_tie_case_and_punish_one_shot():
    *plain, tied = ablation_checks._pruning_cases()
    for acc in plain:
        removed, remaining = [], list(acc.heads)
        while len(remaining) > 1:
            values = sorted((acc.value(removed + [h]) for h in remaining), reverse=True)
            assert values[0] - values[1] > 1e-4
            best = max(remaining, key=lambda h: acc.value(removed + [h]))
            removed.append(best)
            remaining.remove(best)
    # the last case ties exactly at its first two steps: the first of equals is not the last of them
    assert tied.greedy()[0] == ["dec.self.1.0", "dec.self.1.1", "dec.self.1.3", "dec.self.1.2"]
    assert tied.value(["dec.self.1.0"]) == tied.value(["dec.self.1.3"])
    first, second = ablation_checks._pruning_cases()[:2]
    for acc in (first, second):
        assert acc.greedy()[0] != acc.one_shot() and acc.greedy()[0] != acc.greedy(best=min)[0]


# ---------------------------------------------------------------- gradient importance


def importance_autograd(model, name, batches):
    n_heads = model.attention_modules()[name].n_heads
    total, count = torch.zeros(n_heads), 0
    for src, tgt_in, gold in batches:
        gate = torch.ones(len(src), n_heads, requires_grad=True)
        logits = model.run_with_hooks(src, tgt_in, hooks=[(f"{name}.hook_z", lambda z, hook: gate_z(z, gate))])
        loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=PAD, reduction="sum")
        total += torch.autograd.grad(loss, gate)[0].abs().sum(0)
        count += len(src)
    return total / count


def importance_per_problem(model, name, batches):
    """One problem at a time, one shared gate, .backward() and the gradient zeroed each time."""
    n_heads = model.attention_modules()[name].n_heads
    gate = torch.ones(n_heads, requires_grad=True)
    scores = []
    with model.hooks([(f"{name}.hook_z", lambda z, hook: z * gate.view(1, -1, 1, 1))]):
        for src, tgt_in, gold in batches:
            for i in range(len(src)):
                logits = model(src[i : i + 1], tgt_in[i : i + 1])
                real = gold[i] != PAD
                loss = -logits[0].log_softmax(-1)[real].gather(1, gold[i][real][:, None]).sum()
                gate.grad = None
                loss.backward()
                scores.append(gate.grad.abs().numpy().copy())
    return torch.from_numpy(np.mean(scores, axis=0))  # computed in numpy, handed back as a tensor


def importance_backward(model, name, batches):
    """Per-problem gates and .backward(); the learner's model gradients are left for the checker."""
    grads = []
    for src, tgt_in, gold in batches:
        gate = torch.ones(len(src), model.cfg.n_heads, requires_grad=True)

        def hook(z, hook):
            return torch.einsum("bhpd,bh->bhpd", z, gate)

        logits = model.run_with_hooks(src, tgt_in, hooks=[(f"{name}.hook_z", hook)])
        losses = F.cross_entropy(logits.transpose(1, 2), gold, ignore_index=PAD, reduction="none").sum(1)
        losses.sum().backward()
        grads.append(gate.grad.abs())
    return torch.cat(grads).mean(0)


def importance_on_pattern(model, name, batches):
    """The gate on the pattern instead of z: z = pattern @ v, so the gradient is the same."""
    total, n = 0.0, 0
    for src, tgt_in, gold in batches:
        gate = torch.ones(len(src), model.cfg.n_heads, requires_grad=True)
        logits = model.run_with_hooks(
            src, tgt_in, hooks=[(f"{name}.hook_pattern", lambda p, hook: p * gate[:, :, None, None])]
        )
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), gold.reshape(-1), ignore_index=PAD, reduction="sum")
        total = total + torch.autograd.grad(loss, gate)[0].abs().sum(0)
        n += len(src)
    return total / n


def test_head_importance_correct_variants():
    for good in (importance_autograd, importance_per_problem, importance_backward, importance_on_pattern):
        assert run(ablation_checks.check_head_importance, good)[0], good


def test_head_importance_refuses_a_list():  # one type rule (issue 27): "Return a (heads,) tensor"
    passed, line = run(ablation_checks.check_head_importance, lambda m, n, b: importance_backward(m, n, b).tolist())
    assert not passed and "is a list, expected a torch tensor" in line, line


def importance_variant(
    *,
    shared=False,
    absolute=True,
    accumulate=False,
    reduction="sum",
    divide="problems",
    at=1.0,
    ignore_pad=True,
    normalise=False,
    module=None,
    abs_after=False,
):
    """The reference with one planted mistake."""

    def fn(model, name, batches):
        name = module or name
        n_heads = model.cfg.n_heads
        per_batch, count = [], 0
        gate = torch.full((n_heads,), at, requires_grad=True)
        for src, tgt_in, gold in batches:
            if not (shared and accumulate):
                gate = torch.full((n_heads,) if shared else (len(src), n_heads), at, requires_grad=True)
            shape = (1, -1, 1, 1) if shared else (len(src), -1, 1, 1)
            logits = model.run_with_hooks(
                src, tgt_in, hooks=[(f"{name}.hook_z", lambda z, hook: z * gate.view(*shape))]
            )
            loss = F.cross_entropy(
                logits.flatten(0, 1), gold.flatten(), ignore_index=PAD if ignore_pad else -100, reduction=reduction
            )
            loss.backward()
            g = gate.grad.clone()
            g = g.abs() if absolute and not abs_after else g
            per_batch.append(g if shared else g.sum(0))
            count += len(src)
        total = torch.stack(per_batch).sum(0)
        if divide == "problems":
            out = total / count
        elif divide == "batches":
            out = total / len(batches)
        elif divide == "batch means":
            out = torch.stack([s / len(b[0]) for s, b in zip(per_batch, batches)]).mean(0)
        else:
            out = total
        out = out.abs() if abs_after else out
        return out / out.norm() if normalise else out

    return fn


def test_head_importance_mistakes():
    def hook_left_attached(model, name, batches):
        model.hook_points()[f"{name}.hook_z"].add(lambda z, hook: z)
        return importance_autograd(model, name, batches)

    def optimizer_step(model, name, batches):
        out = importance_autograd(model, name, batches)
        with torch.no_grad():
            model.unembed.bias.add_(0.1)
        return out

    def train_mode(model, name, batches):
        model.train()
        return importance_autograd(model, name, batches)

    def weight_gradient(model, name, batches):
        model.zero_grad()
        for src, tgt_in, gold in batches:
            F.cross_entropy(
                model(src, tgt_in).flatten(0, 1), gold.flatten(), ignore_index=PAD, reduction="sum"
            ).backward()
        module = model.attention_modules()[name]
        return module.W_O.weight.grad.view(module.d_model, module.n_heads, module.d_head).abs().sum((0, 2))

    def no_requires_grad(model, name, batches):
        src, tgt_in, gold = batches[0]
        gate = torch.ones(len(src), model.cfg.n_heads)
        hook = lambda z, hook: z * gate[:, :, None, None]
        logits = model.run_with_hooks(src, tgt_in, hooks=[(f"{name}.hook_z", hook)])
        return torch.autograd.grad(F.cross_entropy(logits.flatten(0, 1), gold.flatten()), gate)[0].abs().mean(0)

    def gate_unused(model, name, batches):  # the hook returns a new tensor that is then thrown away
        src, tgt_in, gold = batches[0]
        gate = torch.ones(len(src), model.cfg.n_heads, requires_grad=True)
        logits = model.run_with_hooks(src, tgt_in, hooks=[(f"{name}.hook_z", lambda z, hook: None)])
        loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), reduction="sum") + 0 * gate.sum().detach()
        return torch.autograd.grad(loss, [gate, model.unembed.bias])[0].abs().mean(0)

    mistakes = {
        importance_variant(absolute=False): "forgot the abs",
        importance_variant(abs_after=True): "abs after averaging",
        importance_variant(shared=True): "one gate shared by a whole batch",
        importance_variant(shared=True, accumulate=True): "gradients accumulate",
        importance_variant(reduction="mean"): "reduction='sum'",
        importance_variant(divide="none"): "summed over the problems",
        importance_variant(divide="batches"): "number of batches",
        importance_variant(divide="batch means"): "averaged the batches' means",
        importance_variant(normalise=True): "normalised the scores",
        importance_variant(at=0.0): "taken at ξ = 1",
        no_requires_grad: "requires_grad=True",
        gate_unused: "never reached the loss",
        importance_variant(ignore_pad=False): "padding counted",
        importance_variant(module="dec.cross.1"): "scores of dec.cross.1",
        hook_left_attached: "left a hook attached",
        optimizer_step: "changed the model's weights",
        train_mode: "training mode",
        weight_gradient: "not a weight's",
        (lambda model, name, batches: torch.zeros(4)): "not the notebook's adder",
        (lambda model, name, batches: torch.zeros(1, 3)): "one number per head",
        (lambda model, name, batches: None): "forget `return`",
    }
    for fn, hint in mistakes.items():
        assert_hint(ablation_checks.check_head_importance, fn, hint)


def test_head_importance_never_raises():
    never_raises(
        ablation_checks.check_head_importance,
        weird_inputs()
        + [
            lambda name, model, batches: importance_autograd(model, name, batches),  # arguments swapped
            lambda model, batches: 0,
            lambda model, name, batches: {"h": 1},
            lambda model, name, batches: ["a", "b", "c"],
        ],
    )


def test_importance_mistakes_are_told_apart():
    """Every planted-mistake score differs from the right one by far more than the tolerance."""
    model = check_models.tiny_ablation_model(7)
    sizes = [3, 1, 5]
    batches = check_models.sum_batches(model, sizes, seed=7)
    tokens = [int((gold != PAD).sum()) for _, _, gold in batches]
    grads = ablation_checks._gate_grads(model, batches)
    for name, G in grads.items():
        want = G.abs().mean(0)
        for candidate, hint in ablation_checks._importance_mistakes(G, sizes, tokens):
            assert ((candidate - want).abs() / want.abs().max()).max() > 0.05, (name, hint)


@pytest.mark.parametrize(
    "check",
    [
        ablation_checks.check_ablation_hook,
        ablation_checks.check_mean_z,
        ablation_checks.check_prune_order,
        ablation_checks.check_head_importance,
    ],
)
def test_a_checker_bug_is_one_line(check, monkeypatch):
    """Even an exception in the checker itself (here: a broken helper) prints one ❌ line."""
    monkeypatch.setattr(ablation_checks, "_same", lambda *a, **k: 1 / 0)
    monkeypatch.setattr(ablation_checks, "_array", lambda *a, **k: 1 / 0)
    monkeypatch.setattr(ablation_checks, "_pruning_cases", lambda: 1 / 0)
    ok, line = run(
        check,
        solutions()[
            {
                ablation_checks.check_ablation_hook: "my_ablation_hook",
                ablation_checks.check_mean_z: "my_mean_z",
                ablation_checks.check_prune_order: "my_prune_order",
                ablation_checks.check_head_importance: "my_head_importance",
            }[check]
        ],
    )
    assert not ok and line.startswith("❌")
