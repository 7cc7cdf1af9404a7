"""Many ablations at once: greedy exact match under each, several times faster than decoding.

A problem is greedily right iff, with the true answer fed in (teacher forcing), the argmax is
right at every position, because then greedy decoding feeds itself exactly the true prefix.
So one decoder pass replaces five decoding steps, every layer's input is fixed, and an
ablation is recomputed only from the first attention module it touches: a base run caches,
through the hook points, each layer's residual stream, the needed modules' z, the memory and
the cross-attention keys and values, and the replay resumes from there with the model's own
methods (MultiHeadAttention.finish, EncoderLayer.finish, DecoderLayer.after_self/after_cross,
encode_from, decode_from). Ablations that start at the same module share a batch through
per-sample gates on hook_z. Where a logit margin is too thin to trust the shortcut, the problem
is decoded greedily; the tests check the result against plain greedy decoding, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from ..adder.data import PAD
from ..core.head_ablation import ablate_heads, gate_z, keep_vectors
from ..core.runtime import analysis_threads
from .ablation import Problems, fills_for, model_of, plain_matches


def _base_run(model, p: Problems, rows: int, starts: set) -> dict:
    """One teacher-forced run as the model stands (the base ablation's hooks attached), keeping,
    per hook name, what a replay from each of `starts` needs (and nothing more: the explorer's
    replays all start at one module, and every residual stream kept was 4 MB per 2,000 problems);
    the decoder runs with (empty) incremental-decoding states, as greedy decoding does, so the
    cross-attention keys and values are the ones it uses."""
    names: set[str] = set()
    for start in starts:  # what _run_from reads
        if start is None:
            names.add("hook_logits")
            continue
        side, kind, layer = start.split(".")
        names.add(f"{start}.hook_z")
        if side == "enc":
            names |= {f"enc.{layer}.hook_resid_pre", "dec.0.hook_resid_pre"}
        else:
            names |= {"hook_memory", f"dec.{layer}.hook_resid_{'pre' if kind == 'self' else 'mid'}"}
            names |= {f"dec.cross.{i}.hook_{kv}" for i in range(len(model.decoder)) for kv in "kv"}
    saved: dict[str, list] = {}

    def keep(x, hook):
        saved.setdefault(hook.name, []).append(x)

    with model.hooks([(name, keep) for name in sorted(names)]):
        for src, tgt_in in zip(p.src.split(rows), p.tgt_in.split(rows)):
            memory = model.encode(src)
            model.decode(tgt_in, memory, src == PAD, [{} for _ in model.decoder])
    return {key: torch.cat(parts) for key, parts in saved.items()}


def _run_from(model, run: dict, start: str | None, r: slice, src_pad: Tensor, k: int) -> Tensor:
    """Logits for k stacked copies of problems r, recomputed from attention module `start` on
    (the hooks attached now act on every module recomputed, `start` included)."""

    def rep(t):
        return t[r].repeat(k, *([1] * (t.dim() - 1)))

    if start is None:
        return rep(run["hook_logits"])
    side, kind, layer_name = start.split(".")
    layer = int(layer_name)
    z = rep(run[f"{start}.hook_z"])  # start's own heads, before this replay's hooks act on them
    if side == "enc":
        enc = model.encoder[layer]
        x = enc.finish(rep(run[f"enc.{layer}.hook_resid_pre"]), enc.self_attn.finish(z))
        memory = model.encode_from(x, layer + 1, src_pad)
        # a new memory: every decoder layer projects new cross keys and values
        return model.decode_from(rep(run["dec.0.hook_resid_pre"]), 0, memory, src_pad, [{} for _ in model.decoder])
    memory = rep(run["hook_memory"])
    states = [
        {"cross": (rep(run[f"dec.cross.{i}.hook_k"]), rep(run[f"dec.cross.{i}.hook_v"]))}
        for i in range(len(model.decoder))
    ]
    dec = model.decoder[layer]
    if kind == "self":
        y = dec.after_self(
            rep(run[f"dec.{layer}.hook_resid_pre"]), dec.self_attn.finish(z), memory, src_pad, states[layer]["cross"]
        )
    else:
        y = dec.after_cross(rep(run[f"dec.{layer}.hook_resid_mid"]), dec.cross_attn.finish(z))
    return model.decode_from(y, layer + 1, memory, src_pad, states)


def _gate_hooks(model, keeps: list[dict], block: list[int], size: int, fills) -> list:
    """hook_z hooks giving ablation j its own gates on rows j*size ... (j+1)*size - 1."""
    hooks = []
    for name, m in model.attention_modules().items():
        if any(name in keeps[j] for j in block):
            ones = torch.ones(m.n_heads, device=m.W_O.weight.device)
            gate = torch.stack([keeps[j].get(name, ones) for j in block]).repeat_interleave(size, dim=0)
            fill = None if fills is None else fills[name]
            hooks.append((f"{name}.hook_z", lambda z, hook, gate=gate, fill=fill: gate_z(z, gate, fill)))
    return hooks


@analysis_threads()
@torch.no_grad()
def fast_matches(
    adder,
    problems: Problems,
    configs: Sequence[Sequence[str]],
    mode: str = "zero",
    base: Sequence[str] = (),
    rows: int = 4096,
    margin: float = 1e-3,
) -> np.ndarray:
    """Same as `plain_matches` on [base + c for c in configs] (exactly: see the module
    docstring), several times faster.

    Each ablation is recomputed only from the first attention module its own heads touch;
    everything before comes from one run with `base` removed (the intact model by default).
    Problems are grouped by answer length, so that no decoder position after </s> is computed.
    `rows` bounds one batch (problems × ablations); `margin` is the smallest top-1 minus top-2
    logit gap trusted to decide a token without decoding greedily.
    """
    model = model_of(adder)
    fills = fills_for(model, mode)
    device = problems.src.device
    base = list(base)
    order = list(model.attention_modules())  # the order the computation reaches them
    keeps = [keep_vectors(model, base + list(heads), device) for heads in configs]  # base and own heads
    starts = [min(keep_vectors(model, heads), key=order.index) if heads else None for heads in configs]
    out = np.zeros((len(configs), len(problems)), dtype=bool)
    unsure: dict[int, list] = {}  # ablation -> problems to decode greedily
    lengths = (problems.gold != PAD).sum(dim=1)  # real positions: the answer's digits and </s>
    with model.without_hooks():
        for length in lengths.unique().tolist():
            where = torch.nonzero(lengths == length).squeeze(1)
            if length == 0:  # nothing to predict (only where targets are the model's own, empty answers)
                out[:, where.cpu().numpy()] = True
                continue
            p = Problems(problems.src[where], problems.tgt_in[where, :length], problems.gold[where, :length])
            with ablate_heads(model, base, fills):
                run = _base_run(model, p, rows, set(starts))
            n = len(p)
            chunk = min(n, rows)
            per_block = max(1, rows // chunk)
            for start in sorted(set(starts), key=lambda s: -1 if s is None else order.index(s)):
                group = [i for i, s in enumerate(starts) if s == start]
                for c0 in range(0, len(group), per_block):
                    block = group[c0 : c0 + per_block]
                    for r0 in range(0, n, chunk):
                        r = slice(r0, min(n, r0 + chunk))
                        size, k = r.stop - r.start, len(block)
                        with model.hooks(_gate_hooks(model, keeps, block, size, fills)):
                            logits = _run_from(model, run, start, r, (p.src[r] == PAD).repeat(k, 1), k)
                        right, doubt = _decide(logits, p.gold[r].repeat(k, 1), margin)
                        rows_here = where[r].cpu().numpy()
                        for j, cfg in enumerate(block):
                            out[cfg, rows_here] = right[j * size : (j + 1) * size]
                            unsure.setdefault(cfg, []).extend(rows_here[doubt[j * size : (j + 1) * size]].tolist())
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
