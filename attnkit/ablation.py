"""Head ablation and pruning: which of the adder's 24 heads matter, alone and together.

    with adder.ablate(["dec.cross.1.2", "enc.self.0.3"], mode="zero"):  # or mode="mean"
        adder.solve(["663+497"])

A removed head's z (its output before W_O) is replaced, for every query position:
  * "zero": by 0;
  * "mean": by its mean z over the held-out set (`mean_z`): the average over every real
    query position (encoder: every non-padding source token; decoder: <s> and each answer
    digit, read with the true answer fed in), per head, shape (heads, d_head).
Every study measures greedy exact match on the held-out set and refuses a model below 99 %
(`check_baseline`): ablating a broken model measures nothing.

Speed (`fast_matches`): a problem is greedily right iff, with the true answer fed in
(teacher forcing), the argmax is right at every position, because then greedy decoding feeds
itself exactly the true prefix. So one decoder pass replaces five decoding steps, every layer's
input is fixed, and an ablation is recomputed only from the first layer it touches (the encoder
runs once for all decoder-head ablations); ablations share batches through per-sample gates.
Where a logit margin is too thin to trust the shortcut, the problem is decoded greedily; the
tests check the result against plain greedy decoding, bit for bit.
"""
from __future__ import annotations

import hashlib
import warnings
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .attention import attention_modules, capture
from .checkpoint import save_json
from .data import DATA_DIR, PAD, carry_stats, encode_sources, encode_targets, load_test_set

MODES = ("zero", "mean")
MIN_BASELINE = 0.99      # below this, the studies refuse the model (unless forced)
THRESHOLD_POINTS = 1.0   # a head (or set) is prunable when removing it costs < 1 point
REMEASURE_POINTS = 5.0   # joint pruning: re-measure prefixes on the full set until the subset loses this
THREADS: Optional[int] = 1  # torch threads while measuring; None: leave torch's setting alone
RESULTS_PATH = DATA_DIR / "ablation_results.json"
CARRY_GROUPS = {"no_carry": "no carry", "carry": "≥ 1 carry", "chain_2plus": "carry chain ≥ 2"}
_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> per-model results


@contextmanager
def threads() -> Iterator[None]:
    """Run with THREADS torch threads (also a decorator). The adder is tiny (d_model 64): a
    second thread gains little on an idle machine, and on a busy one (shared cores, pytest -n 2)
    every op waits for its threads to be scheduled, 3-10x slower (measured on 2 shared cores)."""
    before = torch.get_num_threads()
    if THREADS:
        torch.set_num_threads(THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class BaselineTooLowError(ValueError):
    """The model is not accurate enough for its ablations to mean anything."""


def _model(adder):
    return getattr(adder, "model", adder)  # an Adder or a bare Seq2SeqTransformer


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")


def parse_heads(model, heads: Sequence[str]) -> dict[str, list[int]]:
    """["dec.cross.1.2", ...] -> {"dec.cross.1": [2], ...}; ValueError listing the valid ids."""
    valid = _model(model).heads
    heads = [heads] if isinstance(heads, str) else list(heads)
    unknown = [h for h in heads if h not in valid]
    if unknown:
        raise ValueError(f"unknown head id(s) {unknown}; the valid ids are: {', '.join(valid)}")
    by_module: dict[str, list[int]] = {}
    for h in heads:
        name, index = h.rsplit(".", 1)
        by_module.setdefault(name, []).append(int(index))
    return by_module


def _per_model(model) -> dict:
    """A cache for this model's mean z and baseline, emptied when its weights change."""
    fingerprint = tuple((p.data_ptr(), p._version) for p in model.parameters())
    entry = _CACHE.get(model)
    if entry is None or entry["fingerprint"] != fingerprint:
        entry = _CACHE[model] = {"fingerprint": fingerprint}
    return entry


def state_hash(adder) -> str:
    """sha256 of the weights: ties a results file to the checkpoint it was measured on."""
    h = hashlib.sha256()
    for name, t in sorted(_model(adder).state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


@contextmanager
def _no_gates(model) -> Iterator[dict]:
    """Clear every gate inside the block (the studies start from the intact model)."""
    modules = attention_modules(model)
    saved = {n: (m.gate, m.z_fill) for n, m in modules.items()}
    try:
        for m in modules.values():
            m.gate, m.z_fill = None, None
        yield modules
    finally:
        for n, (gate, fill) in saved.items():
            modules[n].gate, modules[n].z_fill = gate, fill


@dataclass
class Problems:
    """Held-out problems as tensors: source ids, decoder input, and the answer it must write."""
    src: Tensor     # (batch, src_pos)
    tgt_in: Tensor  # (batch, tgt_pos - 1): <s> + answer, as fed in under teacher forcing
    gold: Tensor    # (batch, tgt_pos - 1): the tokens to predict; PAD = nothing to predict

    @classmethod
    def from_operands(cls, model, a: np.ndarray, b: np.ndarray) -> "Problems":
        model = _model(model)
        cfg, device = model.cfg, next(model.parameters()).device
        tgt = encode_targets(np.asarray(a) + np.asarray(b), cfg.n_digits, cfg.reverse_output).to(device)
        return cls(encode_sources(a, b, cfg.n_digits, cfg.zero_pad).to(device), tgt[:, :-1], tgt[:, 1:])

    def __len__(self) -> int:
        return len(self.src)


def _problems(model, a, b) -> Problems:
    if a is None:
        a, b = load_test_set()
    return Problems.from_operands(model, a, b)


@threads()
@torch.no_grad()
def mean_z(adder, a: Optional[np.ndarray] = None, b: Optional[np.ndarray] = None) -> dict[str, Tensor]:
    """Per attention module, (heads, d_head): each head's mean z over every real query
    position of the held-out set (see the module docstring); computed once per model."""
    model = _model(adder)
    entry = _per_model(model) if a is None else {}
    if "mean_z" in entry:
        return entry["mean_z"]
    p = _problems(model, a, b)
    sums, counts = {}, {}
    with _no_gates(model) as modules:
        for src, tgt_in, gold in zip(p.src.split(4096), p.tgt_in.split(4096), p.gold.split(4096)):
            with capture(model) as cache:
                model(src, tgt_in)
            for name in modules:
                real = (src != PAD) if name.startswith("enc.") else (gold != PAD)  # (batch, q_pos)
                z = cache[f"{name}.z"].double() * real[:, None, :, None]
                sums[name] = sums.get(name, 0) + z.sum(dim=(0, 2))
                counts[name] = counts.get(name, 0) + int(real.sum())
    means = {name: (sums[name] / counts[name]).float() for name in sums}
    entry["mean_z"] = means
    return means


@contextmanager
def ablate(adder, heads: Sequence[str], mode: str = "zero") -> Iterator:
    """Remove `heads` inside the block; the model is restored on exit, also on an exception.

    Nested blocks compose: an inner block removes its heads on top of the outer ones.
    """
    _check_mode(mode)
    model = _model(adder)
    by_module = parse_heads(model, heads)
    fills = mean_z(model) if mode == "mean" else None
    modules = attention_modules(model)
    saved = {n: (m.gate, m.z_fill) for n, m in modules.items()}
    try:
        for name, indices in by_module.items():
            m = modules[name]
            keep = torch.ones(m.n_heads, device=m.W_O.weight.device)
            keep[indices] = 0.0
            fill = None if fills is None else fills[name]
            if m.gate is not None:  # an outer ablation: keep its removed heads and their fill
                old = m.z_fill if m.z_fill is not None else torch.zeros(m.n_heads, m.d_head, device=keep.device)
                fill = torch.where(keep[:, None] == 0, 0.0 if fill is None else fill, old)
                keep = m.gate * keep
            m.gate, m.z_fill = keep, fill
        yield adder
    finally:
        for n, (gate, fill) in saved.items():
            modules[n].gate, modules[n].z_fill = gate, fill


# ---------------------------------------------------------------------------------------
# Evaluating many ablations at once
# ---------------------------------------------------------------------------------------

@threads()
@torch.no_grad()
def plain_matches(adder, problems: Problems, configs: Sequence[Sequence[str]], mode: str = "zero") -> np.ndarray:
    """(configs, batch) bool, the reference way: greedy-decode once per ablation."""
    model = _model(adder)
    out = []
    with _no_gates(model):
        for heads in configs:
            with ablate(model, heads, mode):
                pred = model.greedy(problems.src)
            out.append(((pred == problems.gold) | (problems.gold == PAD)).all(dim=1).cpu().numpy())
    return np.stack(out)


def _keep_vectors(model, heads: Sequence[str], device) -> dict[str, Tensor]:
    """{module: (heads,) float, 1 = keep, 0 = removed} for the modules `heads` touch."""
    keep = {}
    for name, idx in parse_heads(model, heads).items():
        keep.setdefault(name, torch.ones(model.cfg.n_heads, device=device))[idx] = 0.0
    return keep


def _module_order(model) -> list[str]:
    """Attention modules in the order the computation reaches them."""
    dec = [f"dec.{kind}.{i}" for i in range(len(model.decoder)) for kind in ("self", "cross")]
    return [f"enc.self.{i}" for i in range(len(model.encoder))] + dec


@torch.no_grad()
def _base_run(model, p: Problems, rows: int, needed: set) -> dict:
    """One run with the gates set now (the base ablation), keeping what a restart needs: the
    input of every layer, the decoder's stream before each cross-attention ("mid"), the z of
    the `needed` modules, the memory, each decoder layer's cross keys and values, the logits."""
    saved: dict[str, list] = {}
    keep = lambda key: lambda mod, args: saved.setdefault(key, []).append(args[0])
    hooks = [layer.register_forward_pre_hook(keep(f"enc{i}")) for i, layer in enumerate(model.encoder)]
    for i, layer in enumerate(model.decoder):
        hooks += [layer.register_forward_pre_hook(keep(f"dec{i}")), layer.ln_cross.register_forward_pre_hook(keep(f"mid{i}"))]
    try:
        for src, tgt_in in zip(p.src.split(rows), p.tgt_in.split(rows)):
            with capture(model) as cache:
                memory = model.encode(src)
                # With (empty) states the decoder still runs every position at once, and leaves
                # each layer's cross-attention keys and values of the memory in them.
                states = [{} for _ in model.decoder]
                logits = model.decode(tgt_in, memory, src == PAD, states)
            for name in needed:
                saved.setdefault(f"z:{name}", []).append(cache[f"{name}.z"])
            saved.setdefault("memory", []).append(memory)
            saved.setdefault("logits", []).append(logits)
            for i, state in enumerate(states):
                saved.setdefault(f"k{i}", []).append(state["cross"][0])
                saved.setdefault(f"v{i}", []).append(state["cross"][1])
    finally:
        for h in hooks:
            h.remove()
    return {key: torch.cat(parts) for key, parts in saved.items()}


def _gated_output(m, z: Tensor) -> Tensor:
    """What module m outputs for heads' values z under its current gates (as in its forward)."""
    if m.gate is not None:
        gate = m.gate.view(-1, m.n_heads, 1, 1)
        fill = 0.0 if m.z_fill is None else m.z_fill.view(1, m.n_heads, 1, m.d_head)
        z = gate * z + (1 - gate) * fill
    return m.W_O(m.merge_heads(z))


def _run_from(model, run: dict, start: Optional[str], r: slice, src_pad: Tensor, k: int) -> Tensor:
    """Logits for k stacked copies of problems r, recomputed from module `start` on (gates set).

    Everything before `start` is the base run's, and so is start's own z before its gate:
    the heads it removes only change what it passes on (the layers' forward, step by step)."""
    rep = lambda t: t[r].repeat(k, *([1] * (t.dim() - 1)))
    if start is None:
        return rep(run["logits"])
    side, kind, layer = start.split(".")
    layer = int(layer)
    if side == "enc":
        enc = model.encoder[layer]
        x = rep(run[f"enc{layer}"]) + _gated_output(enc.self_attn, rep(run[f"z:{start}"]))
        x = x + enc.ff(enc.ln_ff(x))
        for enc_layer in model.encoder[layer + 1:]:
            x = enc_layer(x, src_pad)
        memory, first = model.ln_enc(x), 0
        states = [{} for _ in model.decoder]  # a new memory: new cross keys and values
    else:
        memory, first = rep(run["memory"]), layer + 1
        states = [{"cross": (rep(run[f"k{i}"]), rep(run[f"v{i}"]))} for i in range(len(model.decoder))]
        dec = model.decoder[layer]
        if kind == "self":
            y = rep(run[f"dec{layer}"]) + _gated_output(dec.self_attn, rep(run[f"z:{start}"]))
            y = dec._cross_and_ff(y, memory, src_pad, states[layer]["cross"])
        else:
            y = rep(run[f"mid{layer}"]) + _gated_output(dec.cross_attn, rep(run[f"z:{start}"]))
            y = y + dec.ff(dec.ln_ff(y))
    if first == 0:
        y = rep(run["dec0"])
    for i, dec_layer in enumerate(model.decoder[first:], start=first):
        y = dec_layer(y, memory, src_pad, states[i])
    return model.unembed(model.ln_dec(y))


@threads()
@torch.no_grad()
def fast_matches(adder, problems: Problems, configs: Sequence[Sequence[str]], mode: str = "zero",
                 base: Sequence[str] = (), rows: int = 4096, margin: float = 1e-3) -> np.ndarray:
    """Same as `plain_matches` on [base + c for c in configs] (exactly: see the module
    docstring), several times faster.

    Teacher forcing fixes every layer's input, so each ablation is recomputed only from the
    first attention module its own heads touch; everything before comes from one run with
    `base` removed (the intact model by default). Ablations that start at the same module share
    batches through per-sample gates (batch, heads); problems are grouped by answer length, so
    that no decoder position after </s> is computed. `rows` bounds one batch (problems ×
    ablations); `margin` is the smallest top-1 minus top-2 logit gap trusted to decide a token
    without decoding greedily.
    """
    _check_mode(mode)
    model = _model(adder)
    device = problems.src.device
    fills = mean_z(model) if mode == "mean" else None
    base = list(base)
    order = _module_order(model)
    keeps = [_keep_vectors(model, base + list(heads), device) for heads in configs]  # base and own heads
    own = [_keep_vectors(model, heads, device) for heads in configs]
    starts = [min(k, key=order.index) if k else None for k in own]  # the first module an ablation changes
    out = np.zeros((len(configs), len(problems)), dtype=bool)
    unsure: dict[int, list] = {}  # ablation -> problems to decode greedily
    lengths = (problems.gold != PAD).sum(dim=1)  # real positions: the answer's digits and </s>
    with _no_gates(model) as modules:
        for length in lengths.unique().tolist():
            where = torch.nonzero(lengths == length).squeeze(1)
            if length == 0:  # nothing to predict (only where targets are the model's own, empty answers)
                out[:, where.cpu().numpy()] = True
                continue
            p = Problems(problems.src[where], problems.tgt_in[where, :length], problems.gold[where, :length])
            base_keep = _keep_vectors(model, base, device)
            for name, m in modules.items():
                m.gate = base_keep.get(name)
                m.z_fill = None if fills is None or name not in base_keep else fills[name]
            run = _base_run(model, p, rows, {s for s in starts if s is not None})
            n = len(p)
            chunk = min(n, rows)
            per_block = max(1, rows // chunk)
            for start in sorted(set(starts), key=lambda s: -1 if s is None else order.index(s)):
                group = [i for i, s in enumerate(starts) if s == start]
                for c0 in range(0, len(group), per_block):
                    block = group[c0:c0 + per_block]
                    for r0 in range(0, n, chunk):
                        r = slice(r0, min(n, r0 + chunk))
                        size, k = r.stop - r.start, len(block)
                        for name, m in modules.items():  # ablation j owns rows j*size ... (j+1)*size - 1
                            if any(name in keeps[j] for j in block):
                                ones = torch.ones(m.n_heads, device=device)
                                g = torch.stack([keeps[j].get(name, ones) for j in block])
                                m.gate, m.z_fill = g.repeat_interleave(size, dim=0), None if fills is None else fills[name]
                            else:
                                m.gate, m.z_fill = None, None
                        logits = _run_from(model, run, start, r, (p.src[r] == PAD).repeat(k, 1), k)
                        right, doubt = _decide(logits, p.gold[r].repeat(k, 1), margin)
                        rows_here = where[r].cpu().numpy()
                        for j, cfg in enumerate(block):
                            out[cfg, rows_here] = right[j * size:(j + 1) * size]
                            unsure.setdefault(cfg, []).extend(rows_here[doubt[j * size:(j + 1) * size]].tolist())
    for cfg, idx in unsure.items():  # thin margins: decode those few problems greedily
        if idx:
            sub = Problems(problems.src[idx], problems.tgt_in[idx], problems.gold[idx])
            out[cfg, idx] = plain_matches(model, sub, [base + list(configs[cfg])], mode)[0]
    return out


def _decide(logits: Tensor, gold: Tensor, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Greedy exact match from teacher-forced logits: (right, unsure), each (batch,) bool.
    `gold`'s real positions (not PAD) must come first in each row, as answers do.

    At the first position not cleanly right, greedy decoding has fed itself the true prefix,
    so its logits there are these: a clear wrong argmax means wrong; a thin margin, unsure.
    """
    top = logits.topk(2, dim=-1).values
    sure = (top[..., 0] - top[..., 1]) > margin
    real = gold != PAD
    hit = logits.argmax(-1) == gold
    ok = ~real | (hit & sure)
    bad = ~ok
    first = bad.int().argmax(dim=1, keepdim=True)  # first position not cleanly right
    any_bad = bad.any(dim=1)
    clearly_wrong = (real & ~hit & sure).gather(1, first).squeeze(1)
    right = ~any_bad
    unsure = any_bad & ~clearly_wrong
    return right.cpu().numpy(), unsure.cpu().numpy()


# ---------------------------------------------------------------------------------------
# The studies
# ---------------------------------------------------------------------------------------

def check_baseline(adder, force: bool = False, threshold: float = MIN_BASELINE) -> float:
    """Greedy exact match on the held-out set; raises below `threshold` unless forced."""
    model = _model(adder)
    entry = _per_model(model)
    if "baseline" not in entry:
        p = _problems(model, None, None)
        entry["baseline"] = float(plain_matches(model, p, [[]])[0].mean())
    acc = entry["baseline"]
    if acc < threshold:
        msg = (f"this model's greedy exact match on the held-out set is {100 * acc:.2f} %, below {100 * threshold:g} %: "
               f"ablating a broken model measures nothing (its heads are not doing the task yet). "
               f"Train it first (`python -m attnkit train adder`), or pass force=True to measure anyway.")
        if not force:
            raise BaselineTooLowError(msg)
        warnings.warn(msg, stacklevel=2)
    return acc


def sweep_matrix(adder, mode: str = "zero", problems: Optional[Problems] = None) -> np.ndarray:
    """(1 + heads, batch) bool: row 0 the intact model, row 1 + i with head i removed."""
    model = _model(adder)
    problems = _problems(model, None, None) if problems is None else problems
    return fast_matches(model, problems, [[]] + [[h] for h in model.heads], mode)


def single_head_sweep(adder, mode: str = "zero", force: bool = False,
                      correct: Optional[np.ndarray] = None) -> dict:
    """Remove each head alone: its drop in points, the ranking, critical vs redundant heads."""
    check_baseline(adder, force)
    heads = _model(adder).heads
    correct = sweep_matrix(adder, mode) if correct is None else correct
    acc = correct.mean(axis=1)
    drops = {h: 100 * float(acc[0] - acc[i + 1]) for i, h in enumerate(heads)}
    ranking = sorted(heads, key=lambda h: -drops[h])  # stable: ties keep head order
    redundant = [h for h in heads if drops[h] < THRESHOLD_POINTS]
    return {
        "mode": mode, "n": int(correct.shape[1]), "baseline": float(acc[0]),
        "accuracy": {h: float(acc[i + 1]) for i, h in enumerate(heads)},
        "drop_points": drops, "ranking": ranking,
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
    model = _model(adder)
    removed, remaining = [], list(model.heads)
    curve = [float(fast_matches(model, problems, [[]], mode)[0].mean())]
    while remaining:  # each candidate is recomputed from its own layer on, over a run with `removed` out
        acc = fast_matches(model, problems, [[h] for h in remaining], mode, base=removed).mean(axis=1)
        best = int(np.argmax(acc))  # the first of equals: deterministic
        removed.append(remaining.pop(best))
        curve.append(float(acc[best]))
        if progress is not None:
            progress.update(1)
    return removed, curve


def joint_pruning(adder, mode: str = "zero", subset: int = 2000, seed: int = 0,
                  force: bool = False, progress=None) -> dict:
    """The pruning curve, searched on a fixed subset and re-measured on the full held-out set
    (as far as it stays near the threshold); the largest set of heads removable together at
    < 1 point loss on the full set."""
    check_baseline(adder, force)
    model = _model(adder)
    a, b = load_test_set()
    idx = pruning_subset(subset, seed, len(a))
    order, curve_subset = prune_order(model, Problems.from_operands(model, a[idx], b[idx]), mode, progress)
    # Re-measure on the full set every prefix of the order up to the first that costs
    # REMEASURE_POINTS on the subset, and on until one costs >= 1 point on the full set.
    full_set, full = _problems(model, a, b), []
    end = next((k for k, x in enumerate(curve_subset) if 100 * (curve_subset[0] - x) >= REMEASURE_POINTS), len(order))
    while True:
        full += fast_matches(model, full_set, [order[:k] for k in range(len(full), end + 1)], mode).mean(axis=1).tolist()
        if 100 * (full[0] - full[-1]) >= THRESHOLD_POINTS or end == len(order):
            break
        end = min(len(order), end + 3)
    loss = [100 * (full[0] - x) for x in full]
    largest = max(k for k in range(len(full)) if loss[k] < THRESHOLD_POINTS)
    return {
        "mode": mode, "subset": {"n": len(idx), "seed": seed}, "order": order,
        "accuracy_subset": curve_subset, "accuracy_full": full, "loss_points_full": loss,
        "largest_prunable": largest, "prunable_set": order[:largest],
        "share_prunable_jointly": largest / len(order),
    }


@threads()
def gradient_importance(adder, mode: str = "zero", force: bool = False, a: Optional[np.ndarray] = None,
                        b: Optional[np.ndarray] = None, chunk: int = 2000) -> dict:
    """Michel et al. (2019): I_h = mean over problems of |∂L/∂gate_h| at gate = 1, with L the
    problem's teacher-forced cross-entropy (summed over its answer tokens); then each layer's
    scores divided by their L2 norm. In "mean" mode the gate blends z towards the mean.
    On (a, b), by default the held-out set."""
    check_baseline(adder, force)
    model = _model(adder)
    fills = mean_z(model) if mode == "mean" else None
    p = _problems(model, a, b)
    totals: dict[str, Tensor] = {}
    with _no_gates(model) as modules, torch.enable_grad():
        for src, tgt_in, gold in zip(p.src.split(chunk), p.tgt_in.split(chunk), p.gold.split(chunk)):
            gates = {}
            for name, m in modules.items():  # per-sample gates: each problem's own gradient
                gates[name] = torch.ones(len(src), m.n_heads, device=src.device, requires_grad=True)
                m.gate, m.z_fill = gates[name], None if fills is None else fills[name]
            logits = model(src, tgt_in)
            loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=PAD, reduction="sum")
            grads = torch.autograd.grad(loss, list(gates.values()))  # leaves the weights' .grad alone
            for name, g in zip(gates, grads):
                totals[name] = totals.get(name, 0) + g.abs().double().sum(dim=0)
    raw = {name: t / len(p) for name, t in totals.items()}
    norm = {name: t / t.norm() for name, t in raw.items()}
    flat = lambda d: {f"{name}.{h}": float(t[h]) for name, t in d.items() for h in range(len(t))}
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
        "top_k": k, "top_k_by_importance": top,
        "top_k_overlap_with_critical": len(set(top) & set(sweep["critical"][:k])),
    }


def carry_breakdown(adder, mode: str = "zero", force: bool = False, correct: Optional[np.ndarray] = None) -> dict:
    """Each head's drop on problems with no carry, with carries, and with a carry chain ≥ 2;
    the carry-dependent heads: those that cost ≥ 1 point more with carries than without."""
    check_baseline(adder, force)
    model = _model(adder)
    a, b = load_test_set()
    correct = sweep_matrix(model, mode) if correct is None else correct
    n_carries, chain = carry_stats(a, b, model.cfg.n_digits)
    groups = {"no_carry": n_carries == 0, "carry": n_carries >= 1, "chain_2plus": chain >= 2}
    acc = {g: correct[:, mask].mean(axis=1) for g, mask in groups.items()}
    drops = {h: {g: 100 * float(acc[g][0] - acc[g][i + 1]) for g in groups} for i, h in enumerate(model.heads)}
    gap = {h: d["carry"] - d["no_carry"] for h, d in drops.items()}
    dependent = sorted((h for h in gap if gap[h] >= THRESHOLD_POINTS), key=lambda h: -gap[h])
    return {
        "mode": mode, "groups": {g: {"n": int(m.sum()), "baseline": float(acc[g][0])} for g, m in groups.items()},
        "drop_points": drops, "carry_minus_no_carry": gap, "carry_dependent": dependent,
    }


def run_studies(adder=None, path=RESULTS_PATH, force: bool = False, subset: int = 2000, progress: bool = True) -> dict:
    """Every study in both modes, saved to data/ablation_results.json (`python -m attnkit study ablation`)."""
    from tqdm.auto import tqdm
    from .adder import CHECKPOINT, Adder
    adder = Adder.load(CHECKPOINT) if adder is None else adder
    model = _model(adder)
    baseline = check_baseline(model, force)
    n_heads = len(model.heads)
    results = {
        "format_version": 1, "state_sha256": state_hash(model), "baseline": baseline,
        "n_test": len(load_test_set()[0]), "threshold_points": THRESHOLD_POINTS,
        "definitions": {
            "metric": "greedy exact match on data/adder_test.txt (whole answer and </s> right)",
            "zero": "the head's z (before W_O) set to 0 at every query position",
            "mean": "the head's z replaced by its mean over every real query position of the held-out "
                    "set (encoder: non-padding source tokens; decoder: <s> and answer digits, teacher-forced)",
            "joint_pruning": f"greedy search on a fixed subset of {subset} held-out problems "
                             "(pruning_subset(seed=0)); each prefix of the order re-measured on the full set up to the "
                             f"first that costs {REMEASURE_POINTS:g} points on the subset (and on while < 1 point on the full set)",
            "importance": "Michel et al. 2019: mean |dL/dgate| over the held-out set, L2-normalised per layer",
        },
        "modes": {},
    }
    steps = len(MODES) * (n_heads + 3)
    with tqdm(total=steps, desc="ablation studies", disable=not progress) as bar:
        for mode in MODES:
            correct = sweep_matrix(model, mode)
            bar.update(1)
            sweep = single_head_sweep(model, mode, force, correct)
            carries = carry_breakdown(model, mode, force, correct)
            joint = joint_pruning(model, mode, subset, force=force, progress=bar)
            bar.update(1)
            importance = gradient_importance(model, mode, force)
            bar.update(1)
            results["modes"][mode] = {"single_head": sweep, "joint_pruning": joint, "importance": importance,
                                      "importance_vs_ablation": compare_rankings(importance, sweep),
                                      "carries": carries}
    results = _rounded(results)
    save_json(path, results)
    return results


def _rounded(obj, digits: int = 6):
    """Floats to `digits` significant digits: the file does not change with float noise."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: _rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v, digits) for v in obj]
    return obj


def load_results(path=RESULTS_PATH) -> dict:
    import json
    from pathlib import Path
    if not Path(path).exists():
        raise FileNotFoundError(f"no results at {path}: run `python -m attnkit study ablation`")
    return json.loads(Path(path).read_text())
