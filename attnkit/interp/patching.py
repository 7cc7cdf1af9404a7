"""Activation patching: which activation carries the difference between two inputs?

Run the model on a *corrupted* input, but with one activation (one head's z at one position,
say) taken from the run on a *clean* input, and measure how much of the clean behaviour comes
back. The measure is normalised between the two plain runs:

    effect = (metric(patched) - metric(corrupted)) / (metric(clean) - metric(corrupted))

so 1 means "this activation alone restores the clean answer" and 0 "it changes nothing".
The metric is the log-probability of the *clean* answer:
  * adder: the clean sum, teacher-forced (the decoder is fed the clean answer in every run, so
    only the source differs), summed over its tokens; per output position too (`by_output`);
  * sortedness classifier: the clean sequence's own logit for "sorted" (one number).
Everything runs through the hook points (core/hooks.py): run_with_cache on the clean input,
run_with_hooks on the corrupted one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from ..adder.data import PAD, VOCAB, encode_sources, encode_targets, tokens
from ..core.hooks import HookedModel
from ..core.runtime import analysis_threads, model_device

Positions = None | int | Sequence[int]


@dataclass
class PatchSetup:
    """Model inputs of both runs and the metric: what patch() and patch_heads() need of a task."""

    model: HookedModel
    clean: tuple  # forward() arguments, batch 1
    corrupted: tuple
    metric: Callable[[Tensor], Tensor]  # forward output (batch, ...) -> (batch, outputs) log-probs
    labels: dict = field(default_factory=dict)  # "enc"/"dec" -> position labels; "out" -> metric columns


def setup(model, clean, corrupted) -> PatchSetup:
    """An Adder with problems ("555+445", "555+444") or a sortedness classifier with two
    equally long sequences. ValueError for a bad input, and for two inputs the model cannot tell
    apart (nothing to patch: every effect would be 0/0)."""
    if hasattr(model, "solve"):  # the adder
        s = _adder_setup(model, clean, corrupted)
    elif hasattr(model, "predict"):
        s = _classifier_setup(model, clean, corrupted)
    else:
        raise TypeError(f"patching needs an Adder or a sortedness classifier, not {type(model).__name__}")
    if all(torch.equal(a, b) for a, b in zip(s.clean, s.corrupted)):
        raise ValueError(f"clean and corrupted are the same input ({clean!r}): there is no difference to patch")
    return s


def _gap(s: PatchSetup, m_clean: Tensor, m_corrupted: Tensor, what: str = "answer") -> None:
    if float((m_clean - m_corrupted).sum()) == 0:
        raise ValueError(
            f"the model gives the clean {what} the same log-probability on both inputs: "
            "there is no difference for a patch to restore; choose a pair it tells apart"
        )


def _rows_per_batch(s: PatchSetup) -> int:
    """Patched rows per forward pass, so that their attention patterns stay within the classifier's
    memory budget (a 300-token pair would otherwise need ~7 GB at once)."""
    from ..sortedness.model import MEMORY_BUDGET, PATTERN_COPIES

    n_pos = max(t.shape[-1] for t in s.clean)
    heads = max((mod.n_heads for mod in s.model.attention_modules().values()), default=1)
    return max(1, MEMORY_BUDGET // (PATTERN_COPIES * heads * 4 * n_pos**2) - 1)


def _patched_rows(s: PatchSetup, hook_name: str, n_rows: int, put_rows) -> tuple[Tensor, Tensor]:
    """(metric of patched row r, metric of its unpatched baseline), each (n_rows, outputs).
    put_rows(rows) makes the hook that patches rows[i] into batch row i; every batch carries one
    more row, left unpatched, as its own baseline (a batch of one rounds differently)."""
    patched, base, step = [], [], _rows_per_batch(s)
    for start in range(0, n_rows, step):
        rows = torch.arange(start, min(n_rows, start + step))
        inputs = [t.expand(len(rows) + 1, *t.shape[1:]) for t in s.corrupted]
        per = s.metric(s.model.run_with_hooks(*inputs, hooks=[(hook_name, put_rows(rows))]))
        patched.append(per[:-1])
        base.append(per[-1:].expand(len(rows), -1))
    return torch.cat(patched), torch.cat(base)


def _index(value, name: str, size: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a whole number, not {value!r}")
    if not 0 <= value < size:
        raise ValueError(f"{name} {value} is not one of this activation's {what} 0 … {size - 1}")
    return int(value)


def _adder_setup(adder, clean: str, corrupted: str) -> PatchSetup:
    (a, b), (a2, b2) = adder.parse([clean]), adder.parse([corrupted])
    cfg, device = adder.cfg, adder.device
    src = [encode_sources(x, y, cfg.n_digits, cfg.zero_pad).to(device) for x, y in ((a, b), (a2, b2))]
    tgt = encode_targets(a + b, cfg.n_digits, cfg.reverse_output).to(device)  # the clean answer
    tgt_in, gold = tgt[:, :-1], tgt[:, 1:]
    real = gold != PAD
    n_out = int(real.sum())

    def metric(logits: Tensor) -> Tensor:
        logp = logits.log_softmax(-1).gather(-1, gold.expand(len(logits), -1)[..., None])[..., 0]
        return logp[:, :n_out]  # (batch, answer tokens incl. </s>)

    out = [VOCAB[i] for i in gold[0, :n_out].tolist()]
    labels = {
        "enc": tokens(src[0][0].tolist()),
        "dec": tokens(tgt_in[0].tolist()),
        "out": out,
        "enc_corrupted": tokens(src[1][0].tolist()),
    }
    return PatchSetup(adder.model, (src[0], tgt_in), (src[1], tgt_in), metric, labels)


def _classifier_setup(model, clean: Sequence[int], corrupted: Sequence[int]) -> PatchSetup:
    from ..sortedness.data import validate

    clean, corrupted = validate([clean, corrupted], model.length_cap, "the classifier's length cap")
    if len(clean) != len(corrupted):
        raise ValueError(f"patching needs sequences of one length: clean has {len(clean)}, corrupted {len(corrupted)}")
    device = model_device(model)
    x = [torch.tensor([list(s)], device=device) for s in (clean, corrupted)]
    labels = {"enc": [str(v) for v in clean], "out": ["logit(sorted)"]}
    return PatchSetup(model, (x[0],), (x[1],), lambda logit: logit.reshape(-1, 1), labels)


def _selector(activation: Tensor, head: int | None, positions: Positions) -> tuple:
    """Index of what to patch: per-head activations are (batch, heads, pos, ·), the rest (batch, pos, ·)."""
    heads = activation.dim() == 4
    if head is not None and not heads:
        raise ValueError(f"this activation has shape {tuple(activation.shape)}: it has no heads to pick from")
    if head is not None:
        head = _index(head, "head", activation.shape[1], "heads")
    n_pos = activation.shape[2 if heads else 1]
    pos: slice | list[int]
    if positions is None:
        pos = slice(None)
    else:
        if isinstance(positions, (str, bytes)) or not isinstance(positions, (int, np.integer, Sequence, np.ndarray)):
            raise TypeError(f"positions must be a position, a list of positions or None, not {positions!r}")
        listed = [positions] if isinstance(positions, (int, np.integer)) else list(positions)
        if not listed:
            raise ValueError("positions is empty: give at least one position, or None for all")
        pos = [_index(p, "position", n_pos, "positions") for p in listed]
    if heads:
        return (slice(None), slice(None) if head is None else head, pos)
    return (slice(None), pos)


def head_patch_hook(clean_z: Tensor, head: int, pos: int):
    """A hook for a hook_z point that puts one head's clean z at one position into the run:
    notebook 06's exercise, and what patch_heads() does for every head and position at once."""

    def hook(z: Tensor, hook) -> Tensor:
        z = z.clone()
        z[:, head, pos] = clean_z[:, head, pos]
        return z

    return hook


@analysis_threads()
@torch.no_grad()
def patch(
    model, clean, corrupted, hook_name: str, head: int | None = None, positions: Positions = None, source: str = "clean"
) -> float:
    """The normalised effect of patching `hook_name` (one head and/or some positions of it) from
    the `source` run ("clean", or "corrupted" as a sanity check: then it is 0) into the corrupted run."""
    if source not in ("clean", "corrupted"):
        raise ValueError(f"source must be 'clean' or 'corrupted', not {source!r}")
    if not isinstance(hook_name, str):
        raise TypeError(f"hook_name must be a hook point's name (str), not {hook_name!r}")
    s = setup(model, clean, corrupted)
    m = s.model
    _, cache = m.run_with_cache(*(s.clean if source == "clean" else s.corrupted), names=[hook_name])
    value = cache[hook_name]
    sel = _selector(value, head, positions)

    def put(x: Tensor, hook) -> Tensor:  # row 0 patched, row 1 the corrupted baseline in the same batch
        x = x.clone()
        x[:1][sel] = value[sel]
        return x

    m_clean, m_corrupted = s.metric(m(*s.clean)).sum(), s.metric(m(*s.corrupted)).sum()
    _gap(s, m_clean, m_corrupted)
    both = s.metric(m.run_with_hooks(*[t.expand(2, *t.shape[1:]) for t in s.corrupted], hooks=[(hook_name, put)]))
    return float((both[0].sum() - both[1].sum()) / (m_clean - m_corrupted))


@dataclass
class HeadPatching:
    """patch_heads() results: per attention module, each head at each query position."""

    effect: dict[str, np.ndarray]  # module -> (heads, q_pos): normalised effect on the whole answer
    by_output: dict[
        str, np.ndarray
    ]  # module -> (heads, q_pos, outputs): per answer token (NaN: clean = corrupted there)
    clean_metric: np.ndarray  # (outputs,) log-prob of each clean answer token, clean run
    corrupted_metric: np.ndarray  # the same, corrupted run
    labels: dict  # position labels ("enc", "dec") and "out" (answer tokens)

    def strongest(self, n: int = 5) -> list[tuple[str, int, float]]:
        """The n (head id, query position, effect) with the largest |effect| (NaN never ranks)."""
        rows = [
            (f"{name}.{h}", p, float(e[h, p]))
            for name, e in self.effect.items()
            for h in range(e.shape[0])
            for p in range(e.shape[1])
            if np.isfinite(e[h, p])
        ]
        return sorted(rows, key=lambda r: -abs(r[2]))[:n]

    def per_head(self) -> dict[str, float]:
        """Each head's largest effect over its positions (sign kept)."""
        out = {}
        for name, e in self.effect.items():
            for h in range(e.shape[0]):
                out[f"{name}.{h}"] = float(e[h, np.argmax(np.abs(e[h]))])
        return out


@analysis_threads()
@torch.no_grad()
def patch_heads(model, clean, corrupted, modules: Sequence[str] | None = None, min_gap: float = 1e-3) -> HeadPatching:
    """Patch every head's z at every query position, one at a time (one batch per module).
    `min_gap`: per-output effects are NaN where clean and corrupted differ by less than this."""
    if isinstance(min_gap, bool) or not isinstance(min_gap, (int, float)) or not min_gap >= 0:
        raise ValueError(f"min_gap must be a number ≥ 0, not {min_gap!r}")
    s = setup(model, clean, corrupted)
    m = s.model
    known = list(m.attention_modules())
    modules = known if modules is None else ([modules] if isinstance(modules, str) else list(modules))
    unknown = [name for name in modules if name not in known]
    if unknown or not modules:
        raise ValueError(f"unknown attention module(s) {unknown or modules}; this model has {known}")
    _, cache = m.run_with_cache(*s.clean, names=[f"{name}.hook_z" for name in modules])
    m_clean, m_corrupted = s.metric(m(*s.clean))[0], s.metric(m(*s.corrupted))[0]  # (outputs,)
    _gap(s, m_clean, m_corrupted)
    gap = m_clean - m_corrupted
    effect, by_output = {}, {}
    for name in modules:
        z_clean = cache[f"{name}.hook_z"]  # (1, heads, q_pos, d_head)
        n_heads, n_pos = z_clean.shape[1], z_clean.shape[2]
        head_of = torch.arange(n_heads).repeat_interleave(n_pos)  # row r patches head r // n_pos ...
        pos_of = torch.arange(n_pos).repeat(n_heads)  # ... at position r % n_pos

        def put_rows(rows: Tensor, z_clean=z_clean, head_of=head_of, pos_of=pos_of):
            def put(z: Tensor, hook) -> Tensor:
                z = z.clone()
                h, p = head_of[rows], pos_of[rows]
                z[torch.arange(len(rows)), h, p] = z_clean[0, h, p]
                return z

            return put

        per_out, base = _patched_rows(s, f"{name}.hook_z", n_heads * n_pos, put_rows)  # (rows, outputs)
        effect[name] = ((per_out.sum(1) - base.sum(1)) / gap.sum()).reshape(n_heads, n_pos).cpu().numpy()
        per = (per_out - base) / gap
        per[:, gap.abs() < min_gap] = float("nan")
        by_output[name] = per.reshape(n_heads, n_pos, -1).cpu().numpy()
    return HeadPatching(effect, by_output, m_clean.cpu().numpy(), m_corrupted.cpu().numpy(), s.labels)


@analysis_threads()
@torch.no_grad()
def patch_residual(
    model, clean, corrupted, names: Sequence[str] | None = None, output: int | None = None
) -> dict[str, np.ndarray]:
    """Patch the residual stream at each of `names` (default: every layer's hook_resid_post) one
    position at a time: {name: (positions,) normalised effect} on the whole answer, or on answer
    token `output` alone. Read top to bottom, it shows where the difference between the inputs
    lives as it flows through the layers."""
    s = setup(model, clean, corrupted)
    m = s.model
    if names is None:
        names = [n for n in m.hook_names() if n.endswith("hook_resid_post")]
    names = [names] if isinstance(names, str) else list(names)
    _, cache = m.run_with_cache(*s.clean, names=names)  # ValueError naming an unknown hook
    n_out = s.metric(m(*s.clean)).shape[1]
    if output is not None:
        output = _index(output, "output", n_out, "answer tokens")
    pick = (lambda v: v.sum(1)) if output is None else (lambda v: v[:, output])
    m_clean, m_corrupted = pick(s.metric(m(*s.clean)))[0], pick(s.metric(m(*s.corrupted)))[0]
    _gap(s, m_clean, m_corrupted, "answer" if output is None else f"answer token {output}")
    out = {}
    for name in names:
        value = cache[name]  # (1, pos, d_model)
        if value.dim() != 3:
            raise ValueError(
                f"{name} has shape {tuple(value.shape)}: patch_residual patches (batch, pos, d_model) "
                "activations; per-head ones go to patch() or patch_heads()"
            )

        def put_rows(rows: Tensor, value=value):
            def put(x: Tensor, hook) -> Tensor:
                x = x.clone()
                x[torch.arange(len(rows)), rows] = value[0, rows]  # batch row i patches position rows[i]
                return x

            return put

        per_out, base = _patched_rows(s, name, value.shape[1], put_rows)
        out[name] = ((pick(per_out) - pick(base)) / (m_clean - m_corrupted)).cpu().numpy()
    return out


def carry_pair(a: int, b: int, column: int = 0, n_digits: int = 3) -> tuple[str, str] | None:
    """For a problem whose column `column` (0 = units) carries, the same problem with b's digit
    in that column lowered just enough that it does not: ("125+137", "125+134"). Only that one
    carry changes (None when no such b exists, or when the change would alter another carry)."""
    from ..adder.data import carry_stats

    digit_a, digit_b = (a // 10**column) % 10, (b // 10**column) % 10
    carry_in = 0 if column == 0 else int(((a % 10**column) + (b % 10**column)) >= 10**column)
    if digit_a + digit_b + carry_in < 10:
        return None
    new_digit = 9 - digit_a - carry_in
    if new_digit < 0:
        return None
    b2 = b - (digit_b - new_digit) * 10**column
    n_before, _ = carry_stats(np.array([a]), np.array([b]), n_digits)
    n_after, _ = carry_stats(np.array([a]), np.array([b2]), n_digits)
    if n_before[0] - n_after[0] != 1:  # the carry was the only one to go
        return None
    return f"{a}+{b}", f"{a}+{b2}"
