"""Replaying the adder's training: what notebook 07 measures at every snapshot.

    snaps = attnkit.load_snapshots("adder")
    row = measure_snapshot(snaps[5])        # one snapshot: loss, exact match, per group, per head
    run = measure_run(snaps)                # every snapshot: lists over steps (what the study stores)
    first_lasting(run["steps"], run["exact_match"], 0.9)   # the step it crosses 0.9 and stays

All over the 10,000 held-out sums. Per snapshot:
  loss          teacher-forced cross-entropy per answer token (</s> included), in nats
  exact_match   greedy exact match; by_group splits it by carries (CARRY_GROUPS)
  digits        greedy per-digit accuracy; tokens: teacher-forced token accuracy (smoother)
  ablation      per head, the points of exact match lost when that head alone is zeroed
                (notebook 04's single-head sweep, computed as exactly as greedy decoding)
  shares        per head and measure, notebook 03's attention share (interp/roles.py), and
  chance        the share a uniform head would get, per kind: lift = share / chance
A head's role at a step is its measure of highest lift (entropy aside), its strength that lift.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..adder.data import PAD, carry_stats, encode_sources, encode_targets, operands_or_test_set
from ..adder.evaluate import PASS, evaluate
from ..core.runtime import analysis_threads
from .ablation import held_out_problems, model_of, plain_matches
from .roles import MEASURES, chance_levels, head_roles
from .sweep import fast_matches

CARRY_GROUPS = ("no carry", "isolated carries", "a carry chain")  # longest chain 0, 1, ≥ 2
ROLE_MEASURES = tuple(m for m in MEASURES if m != "entropy")  # shares of attention; entropy is not one
LOSS_CHUNK = 1024  # problems per summed term of the loss (run in passes of PASS): the study's numbers were summed so


def carry_group(a: np.ndarray, b: np.ndarray, n_digits: int = 3) -> np.ndarray:
    """Per problem, an index into CARRY_GROUPS: no carry, carries that do not chain, a chain."""
    _, longest = carry_stats(a, b, n_digits)
    return np.minimum(longest, 2)


@torch.no_grad()
def teacher_forced_loss(model, a: np.ndarray, b: np.ndarray) -> float:
    """Mean cross-entropy per real answer token, the true prefix fed in (training's loss)."""
    cfg, device = model.cfg, next(model.parameters()).device
    src = encode_sources(a, b, cfg.n_digits, cfg.zero_pad).to(device)
    tgt = encode_targets(a + b, cfg.n_digits, cfg.reverse_output).to(device)
    total, count = 0.0, 0
    for s, t in zip(src.split(LOSS_CHUNK), tgt.split(LOSS_CHUNK)):
        logits = torch.cat([model.eval()(x, y[:, :-1]) for x, y in zip(s.split(PASS), t.split(PASS))])
        gold = t[:, 1:]
        total += float(
            F.cross_entropy(logits.reshape(-1, logits.size(-1)), gold.reshape(-1), ignore_index=PAD, reduction="sum")
        )
        count += int((gold != PAD).sum())
    return total / count


@analysis_threads()
def measure_snapshot(
    adder, a: np.ndarray | None = None, b: np.ndarray | None = None, heads: Sequence[str] | None = None, shares=True
) -> dict:
    """One snapshot's measures (module docstring) on problems (a, b), by default the held-out set;
    the ablation of `heads` only (default: every head), the shares only with `shares`."""
    a, b = operands_or_test_set(a, b)
    model = model_of(adder)
    # row 0: intact; 1 + i: heads[i] removed. Every head: the sweep (interp/sweep.py, the same answers
    # as greedy decoding, faster, but it keeps a base run of every problem: +340 MB); a chosen few:
    # greedy decoding for each (+50 MB), as a notebook's kernel can afford.
    match = fast_matches if heads is None else plain_matches
    heads = list(model.heads if heads is None else heads)
    correct = match(model, held_out_problems(model, a, b), [[]] + [[h] for h in heads], "zero")
    acc = correct.mean(axis=1)
    plain = evaluate(model, a, b)
    group = carry_group(a, b, model.cfg.n_digits)
    out = {
        "step": adder.metrics.get("step", adder.metrics.get("steps")),
        "loss": teacher_forced_loss(model, a, b),
        "exact_match": float(acc[0]),
        "digits": plain["per_digit_accuracy"],
        "tokens": plain["teacher_forced_token_accuracy"],
        "by_group": {g: float(correct[0][group == i].mean()) for i, g in enumerate(CARRY_GROUPS)},
        "ablation": {h: 100 * float(acc[0] - acc[i + 1]) for i, h in enumerate(heads)},
    }
    if shares:
        names = [f"{name}.hook_pattern" for name in model.attention_modules()]
        _, cache = adder.run_with_cache([f"{x}+{y}" for x, y in zip(a.tolist(), b.tolist())], names=names)
        roles, chance = head_roles(adder, cache=cache), chance_levels(cache, model.cfg.reverse_output)
        del cache
        out["shares"] = {m: {h: _number(roles.loc[h, m]) for h in model.heads} for m in ROLE_MEASURES}
        out["chance"] = {k: {m: _number(chance.loc[k, m]) for m in ROLE_MEASURES} for k in chance.index}
    return out


def _number(x) -> float | None:
    """A share as JSON keeps it: NaN (no such keys for this kind) as None."""
    return None if x is None or np.isnan(x) else float(x)


def measure_run(snapshots: Sequence, progress: bool = True) -> dict:
    """Every snapshot measured: {"steps": [...], "loss": [...], "exact_match": [...],
    "by_group": {group: [...]}, "ablation": {head: [...]}, "shares": {measure: {head: [...]}},
    "chance": {kind: {measure: value}}}, lists in step order."""
    rows = [measure_snapshot(s) for s in tqdm(snapshots, desc="snapshots", disable=not progress)]
    heads = list(rows[0]["ablation"])
    return {
        "steps": [r["step"] for r in rows],
        "loss": [r["loss"] for r in rows],
        "exact_match": [r["exact_match"] for r in rows],
        "digits": [r["digits"] for r in rows],
        "tokens": [r["tokens"] for r in rows],
        "by_group": {g: [r["by_group"][g] for r in rows] for g in CARRY_GROUPS},
        "ablation": {h: [r["ablation"][h] for r in rows] for h in heads},
        "shares": {m: {h: [r["shares"][m][h] for r in rows] for h in heads} for m in ROLE_MEASURES},
        "chance": rows[-1]["chance"],  # uniform attention: the same at every step
    }


def lifts(run: dict) -> dict[str, dict[str, list]]:
    """{measure: {head: [share / chance at each step]}} (None where the head's kind has no such keys)."""
    out: dict[str, dict[str, list]] = {}
    for m, per_head in run["shares"].items():
        out[m] = {}
        for h, shares in per_head.items():
            c = run["chance"][h.rsplit(".", 2)[0]][m]
            out[m][h] = [None if s is None or not c else s / c for s in shares]
    return out


def roles(run: dict) -> dict[str, tuple[list[str], list[float]]]:
    """{head: (role at each step, its lift)}: the measure of highest lift."""
    lift = lifts(run)
    out = {}
    for h in run["ablation"]:
        names, values = [], []
        for i in range(len(run["steps"])):
            best = max(
                ((lift[m][h][i], m) for m in ROLE_MEASURES if lift[m][h][i] is not None), default=(float("nan"), "")
            )
            names.append(best[1])
            values.append(best[0])
        out[h] = (names, values)
    return out


def first_lasting(steps: Sequence[int], values: Sequence[float], threshold: float, above: bool = True) -> int | None:
    """The first step from which `values` stays at or above `threshold` (below it, with
    above=False) to the end; None if it is not there at the last step."""
    ok = [(v is not None and (v >= threshold if above else v <= threshold)) for v in values]
    if not ok or not ok[-1]:
        return None
    i = len(ok) - 1
    while i > 0 and ok[i - 1]:
        i -= 1
    return int(steps[i])
