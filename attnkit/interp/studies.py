"""The ablation studies: each head removed alone, heads pruned jointly, gradient importance,
and which heads carries depend on. Each measures greedy exact match on the held-out set and
refuses a model below 99 % (ablation.check_baseline). `python -m attnkit study ablation` runs
them all and saves data/ablation_results.json (experiments/ablation_studies.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..adder.data import PAD, carry_stats, load_test_set
from ..core.head_ablation import gate_z
from ..core.runtime import analysis_threads
from .ablation import THRESHOLD_POINTS, Problems, check_baseline, fills_for, held_out_problems, model_of
from .sweep import fast_matches

REMEASURE_POINTS = 5.0  # joint pruning: re-measure prefixes on the full set until the subset loses this
CARRY_GROUPS = {"no_carry": "no carry", "carry": "≥ 1 carry", "chain_2plus": "carry chain ≥ 2"}


def sweep_matrix(adder, mode: str = "zero", problems: Problems | None = None) -> np.ndarray:
    """(1 + heads, batch) bool: row 0 the intact model, row 1 + i with head i removed."""
    model = model_of(adder)
    problems = held_out_problems(model) if problems is None else problems
    return fast_matches(model, problems, [[]] + [[h] for h in model.heads], mode)


def single_head_sweep(adder, mode: str = "zero", force: bool = False, correct: np.ndarray | None = None) -> dict:
    """Remove each head alone: its drop in points, the ranking, critical vs redundant heads."""
    check_baseline(adder, force)
    heads = model_of(adder).heads
    correct = sweep_matrix(adder, mode) if correct is None else correct
    acc = correct.mean(axis=1)
    drops = {h: 100 * float(acc[0] - acc[i + 1]) for i, h in enumerate(heads)}
    ranking = sorted(heads, key=lambda h: -drops[h])  # stable: ties keep head order
    redundant = [h for h in heads if drops[h] < THRESHOLD_POINTS]
    return {
        "mode": mode,
        "n": int(correct.shape[1]),
        "baseline": float(acc[0]),
        "accuracy": {h: float(acc[i + 1]) for i, h in enumerate(heads)},
        "drop_points": drops,
        "ranking": ranking,
        "critical": [h for h in ranking if drops[h] >= THRESHOLD_POINTS],
        "redundant": redundant,
        "share_prunable_one_at_a_time": len(redundant) / len(heads),
    }


def pruning_subset(n: int = 2000, seed: int = 0, total: int = 10_000) -> np.ndarray:
    """The fixed subset of the held-out set that the joint-pruning search runs on."""
    return np.sort(np.random.default_rng(seed).choice(total, size=min(n, total), replace=False))


def prune_order(adder, problems: Problems, mode: str = "zero", progress=None) -> tuple[list[str], list[float]]:
    """Greedy joint pruning: remove, one at a time, the head whose removal hurts least
    (re-measured after every removal). Returns the order and the accuracy after each step."""
    model = model_of(adder)
    removed: list[str] = []
    remaining = list(model.heads)
    curve = [float(fast_matches(model, problems, [[]], mode)[0].mean())]
    while remaining:  # each candidate is recomputed from its own layer on, over a run with `removed` out
        acc = fast_matches(model, problems, [[h] for h in remaining], mode, base=removed).mean(axis=1)
        best = int(np.argmax(acc))  # the first of equals: deterministic
        removed.append(remaining.pop(best))
        curve.append(float(acc[best]))
        if progress is not None:
            progress.update(1)
    return removed, curve


def joint_pruning(
    adder, mode: str = "zero", subset: int = 2000, seed: int = 0, force: bool = False, progress=None
) -> dict:
    """The pruning curve, searched on a fixed subset and re-measured on the full held-out set
    (as far as it stays near the threshold); the largest set of heads removable together at
    < 1 point loss on the full set."""
    check_baseline(adder, force)
    model = model_of(adder)
    a, b = load_test_set()
    idx = pruning_subset(subset, seed, len(a))
    order, curve_subset = prune_order(model, Problems.from_operands(model, a[idx], b[idx]), mode, progress)
    # Re-measure on the full set every prefix of the order up to the first that costs
    # REMEASURE_POINTS on the subset, and on until one costs >= 1 point on the full set.
    full_set, full = held_out_problems(model, a, b), list[float]()
    end = next((k for k, x in enumerate(curve_subset) if 100 * (curve_subset[0] - x) >= REMEASURE_POINTS), len(order))
    while True:
        full += (
            fast_matches(model, full_set, [order[:k] for k in range(len(full), end + 1)], mode).mean(axis=1).tolist()
        )
        if 100 * (full[0] - full[-1]) >= THRESHOLD_POINTS or end == len(order):
            break
        end = min(len(order), end + 3)
    loss = [100 * (full[0] - x) for x in full]
    largest = max(k for k in range(len(full)) if loss[k] < THRESHOLD_POINTS)
    return {
        "mode": mode,
        "subset": {"n": len(idx), "seed": seed},
        "order": order,
        "accuracy_subset": curve_subset,
        "accuracy_full": full,
        "loss_points_full": loss,
        "largest_prunable": largest,
        "prunable_set": order[:largest],
        "share_prunable_jointly": largest / len(order),
    }


@analysis_threads()
def gradient_importance(
    adder,
    mode: str = "zero",
    force: bool = False,
    a: np.ndarray | None = None,
    b: np.ndarray | None = None,
    chunk: int = 2000,
) -> dict:
    """Michel et al. (2019): I_h = mean over problems of |∂L/∂gate_h| at gate = 1, with L the
    problem's teacher-forced cross-entropy (summed over its answer tokens); then each layer's
    scores divided by their L2 norm. In "mean" mode the gate blends z towards the mean.
    On (a, b), by default the held-out set."""
    check_baseline(adder, force)
    model = model_of(adder)
    fills = fills_for(model, mode)
    p = held_out_problems(model, a, b)
    totals: dict[str, Tensor] = {}
    modules = model.attention_modules()
    with model.without_hooks(), torch.enable_grad():
        for src, tgt_in, gold in zip(p.src.split(chunk), p.tgt_in.split(chunk), p.gold.split(chunk)):
            # per-sample gates on every hook_z: each problem's own gradient
            gates = {
                name: torch.ones(len(src), m.n_heads, device=src.device, requires_grad=True)
                for name, m in modules.items()
            }
            hooks = [
                (f"{name}.hook_z", lambda z, hook, g=g, f=None if fills is None else fills[name]: gate_z(z, g, f))
                for name, g in gates.items()
            ]
            logits = model.run_with_hooks(src, tgt_in, hooks=hooks)
            loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=PAD, reduction="sum")
            grads = torch.autograd.grad(loss, list(gates.values()))  # leaves the weights' .grad alone
            for name, g in zip(gates, grads):
                totals[name] = totals.get(name, 0) + g.abs().double().sum(dim=0)
    raw = {name: t / len(p) for name, t in totals.items()}
    norm = {name: t / t.norm() for name, t in raw.items()}

    def flat(d):
        return {f"{name}.{h}": float(t[h]) for name, t in d.items() for h in range(len(t))}

    return {"mode": mode, "raw": flat(raw), "normalised": flat(norm)}


def rank_correlation(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: the Pearson correlation of the ranks (ties share their mean rank)."""

    def ranks(v):
        v = np.asarray(v, dtype=float)
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for value in np.unique(v):  # ties: the mean of their ranks
            r[v == value] = r[v == value].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def compare_rankings(importance: dict, sweep: dict) -> dict:
    """How well gradient importance predicts the ablation drop, head by head."""
    heads = list(sweep["drop_points"])
    drops = [sweep["drop_points"][h] for h in heads]
    k = max(1, len(sweep["critical"]))
    top = sorted(heads, key=lambda h: -importance["normalised"][h])[:k]
    return {
        "spearman_normalised": rank_correlation([importance["normalised"][h] for h in heads], drops),
        "spearman_raw": rank_correlation([importance["raw"][h] for h in heads], drops),
        "top_k": k,
        "top_k_by_importance": top,
        "top_k_overlap_with_critical": len(set(top) & set(sweep["critical"][:k])),
    }


def carry_breakdown(adder, mode: str = "zero", force: bool = False, correct: np.ndarray | None = None) -> dict:
    """Each head's drop on problems with no carry, with carries, and with a carry chain ≥ 2;
    the carry-dependent heads: those that cost ≥ 1 point more with carries than without."""
    check_baseline(adder, force)
    model = model_of(adder)
    a, b = load_test_set()
    correct = sweep_matrix(model, mode) if correct is None else correct
    n_carries, chain = carry_stats(a, b, model.cfg.n_digits)
    groups = {"no_carry": n_carries == 0, "carry": n_carries >= 1, "chain_2plus": chain >= 2}
    acc = {g: correct[:, mask].mean(axis=1) for g, mask in groups.items()}
    drops = {h: {g: 100 * float(acc[g][0] - acc[g][i + 1]) for g in groups} for i, h in enumerate(model.heads)}
    gap = {h: d["carry"] - d["no_carry"] for h, d in drops.items()}
    dependent = sorted((h for h in gap if gap[h] >= THRESHOLD_POINTS), key=lambda h: -gap[h])
    return {
        "mode": mode,
        "groups": {g: {"n": int(m.sum()), "baseline": float(acc[g][0])} for g, m in groups.items()},
        "drop_points": drops,
        "carry_minus_no_carry": gap,
        "carry_dependent": dependent,
    }
