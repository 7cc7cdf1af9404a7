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

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Union

import numpy as np
import torch
from torch import Tensor

from ..adder.data import PAD, VOCAB, encode_sources, encode_targets, tokens
from ..core.runtime import analysis_threads, model_device

Positions = Union[None, int, Sequence[int]]


@dataclass
class PatchSetup:
    """Model inputs of both runs and the metric: what patch() and patch_heads() need of a task."""
    model: torch.nn.Module                    # a HookedModel
    clean: tuple                              # forward() arguments, batch 1
    corrupted: tuple
    metric: Callable[[Tensor], Tensor]        # forward output (batch, ...) -> (batch, outputs) log-probs
    labels: dict = field(default_factory=dict)  # "enc"/"dec" -> position labels; "out" -> metric columns


def setup(model, clean, corrupted) -> PatchSetup:
    """An Adder with problems ("555+445", "555+444") or a sortedness classifier with two
    equally long sequences."""
    if hasattr(model, "solve"):  # the adder
        return _adder_setup(model, clean, corrupted)
    if hasattr(model, "predict"):
        return _classifier_setup(model, clean, corrupted)
    raise TypeError(f"patching needs an Adder or a sortedness classifier, not {type(model).__name__}")


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
    labels = {"enc": tokens(src[0][0].tolist()), "dec": tokens(tgt_in[0].tolist()), "out": out,
              "enc_corrupted": tokens(src[1][0].tolist())}
    return PatchSetup(adder.model, (src[0], tgt_in), (src[1], tgt_in), metric, labels)


def _classifier_setup(model, clean: Sequence[int], corrupted: Sequence[int]) -> PatchSetup:
    if len(clean) != len(corrupted):
        raise ValueError(f"patching needs sequences of one length: clean has {len(clean)}, corrupted {len(corrupted)}")
    device = model_device(model)
    x = [torch.tensor([list(s)], device=device) for s in (clean, corrupted)]
    labels = {"enc": [str(v) for v in clean], "out": ["logit(sorted)"]}
    return PatchSetup(model, (x[0],), (x[1],), lambda logit: logit.reshape(-1, 1), labels)


def _selector(activation: Tensor, head: Optional[int], positions: Positions) -> tuple:
    """Index of what to patch: per-head activations are (batch, heads, pos, ·), the rest (batch, pos, ·)."""
    pos = slice(None) if positions is None else ([positions] if isinstance(positions, int) else list(positions))
    if activation.dim() == 4:
        return (slice(None), slice(None) if head is None else head, pos)
    if head is not None:
        raise ValueError(f"this activation has shape {tuple(activation.shape)}: it has no heads to pick from")
    return (slice(None), pos)


def head_patch_hook(clean_z: Tensor, head: int, pos: int):
    """A hook for a hook_z point that puts one head's clean z at one position into the run:
    notebook 06's exercise, and what patch_heads() does for every head and position at once."""
    def hook(z: Tensor, hook_point) -> Tensor:
        z = z.clone()
        z[:, head, pos] = clean_z[:, head, pos]
        return z
    return hook


@analysis_threads()
@torch.no_grad()
def patch(model, clean, corrupted, hook_name: str, head: Optional[int] = None, positions: Positions = None,
          source: str = "clean") -> float:
    """The normalised effect of patching `hook_name` (one head and/or some positions of it) from
    the `source` run ("clean", or "corrupted" as a sanity check: then it is 0) into the corrupted run."""
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
    both = s.metric(m.run_with_hooks(*[t.expand(2, *t.shape[1:]) for t in s.corrupted], hooks=[(hook_name, put)]))
    return float((both[0].sum() - both[1].sum()) / (m_clean - m_corrupted))


@dataclass
class HeadPatching:
    """patch_heads() results: per attention module, each head at each query position."""
    effect: dict[str, np.ndarray]      # module -> (heads, q_pos): normalised effect on the whole answer
    by_output: dict[str, np.ndarray]   # module -> (heads, q_pos, outputs): per answer token (NaN: clean = corrupted there)
    clean_metric: np.ndarray           # (outputs,) log-prob of each clean answer token, clean run
    corrupted_metric: np.ndarray       # the same, corrupted run
    labels: dict                       # position labels ("enc", "dec") and "out" (answer tokens)

    def strongest(self, n: int = 5) -> list[tuple[str, int, float]]:
        """The n (head id, query position, effect) with the largest |effect|."""
        rows = [(f"{name}.{h}", p, float(e[h, p])) for name, e in self.effect.items()
                for h in range(e.shape[0]) for p in range(e.shape[1])]
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
def patch_heads(model, clean, corrupted, modules: Optional[Sequence[str]] = None, min_gap: float = 1e-3) -> HeadPatching:
    """Patch every head's z at every query position, one at a time (one batch per module).
    `min_gap`: per-output effects are NaN where clean and corrupted differ by less than this."""
    s = setup(model, clean, corrupted)
    m = s.model
    modules = list(m.attention_modules()) if modules is None else list(modules)
    _, cache = m.run_with_cache(*s.clean, names=[f"{name}.hook_z" for name in modules])
    m_clean, m_corrupted = s.metric(m(*s.clean))[0], s.metric(m(*s.corrupted))[0]  # (outputs,)
    gap = m_clean - m_corrupted
    effect, by_output = {}, {}
    for name in modules:
        z_clean = cache[f"{name}.hook_z"]                       # (1, heads, q_pos, d_head)
        n_heads, n_pos = z_clean.shape[1], z_clean.shape[2]
        rows = n_heads * n_pos
        head_of = torch.arange(n_heads).repeat_interleave(n_pos)  # row r patches head r // n_pos ...
        pos_of = torch.arange(n_pos).repeat(n_heads)              # ... at position r % n_pos

        def put(z: Tensor, hook, z_clean=z_clean, head_of=head_of, pos_of=pos_of) -> Tensor:
            z = z.clone()
            r = torch.arange(len(head_of))
            z[r, head_of, pos_of] = z_clean[0, head_of, pos_of]
            return z

        # one more row, left unpatched: the corrupted baseline computed in the same batch, so that
        # a patch that changes nothing gives exactly 0 (a batch of one rounds differently)
        inputs = [t.expand(rows + 1, *t.shape[1:]) for t in s.corrupted]
        per_out = s.metric(m.run_with_hooks(*inputs, hooks=[(f"{name}.hook_z", put)]))  # (rows + 1, outputs)
        per_out, base = per_out[:-1], per_out[-1]
        total = (per_out.sum(1) - base.sum()) / gap.sum()
        effect[name] = total.reshape(n_heads, n_pos).cpu().numpy()
        per = (per_out - base) / gap
        per[:, gap.abs() < min_gap] = float("nan")
        by_output[name] = per.reshape(n_heads, n_pos, -1).cpu().numpy()
    return HeadPatching(effect, by_output, m_clean.cpu().numpy(), m_corrupted.cpu().numpy(), s.labels)


@analysis_threads()
@torch.no_grad()
def patch_residual(model, clean, corrupted, names: Optional[Sequence[str]] = None,
                   output: Optional[int] = None) -> dict[str, np.ndarray]:
    """Patch the residual stream at each of `names` (default: every layer's hook_resid_post) one
    position at a time: {name: (positions,) normalised effect} on the whole answer, or on answer
    token `output` alone. Read top to bottom, it shows where the difference between the inputs
    lives as it flows through the layers."""
    s = setup(model, clean, corrupted)
    m = s.model
    if names is None:
        names = [n for n in m.hook_names() if n.endswith("hook_resid_post")]
    _, cache = m.run_with_cache(*s.clean, names=names)
    pick = (lambda v: v.sum(1)) if output is None else (lambda v: v[:, output])
    m_clean, m_corrupted = pick(s.metric(m(*s.clean)))[0], pick(s.metric(m(*s.corrupted)))[0]
    out = {}
    for name in names:
        value = cache[name]                                      # (1, pos, d_model)
        n_pos = value.shape[1]

        def put(x: Tensor, hook, value=value) -> Tensor:
            x = x.clone()
            r = torch.arange(x.shape[1])
            x[r, r] = value[0, r]  # row r patches position r
            return x

        inputs = [t.expand(n_pos + 1, *t.shape[1:]) for t in s.corrupted]  # + an unpatched baseline row
        per = pick(s.metric(m.run_with_hooks(*inputs, hooks=[(name, put)])))
        out[name] = ((per[:-1] - per[-1]) / (m_clean - m_corrupted)).cpu().numpy()
    return out


def carry_pair(a: int, b: int, column: int = 0, n_digits: int = 3) -> Optional[tuple[str, str]]:
    """For a problem whose column `column` (0 = units) carries, the same problem with b's digit
    in that column lowered just enough that it does not: ("125+137", "125+134"). Only that one
    carry changes (None when no such b exists, or when the change would alter another carry)."""
    from ..adder.data import carry_stats
    digit_a, digit_b = (a // 10 ** column) % 10, (b // 10 ** column) % 10
    carry_in = 0 if column == 0 else int(((a % 10 ** column) + (b % 10 ** column)) >= 10 ** column)
    if digit_a + digit_b + carry_in < 10:
        return None
    new_digit = 9 - digit_a - carry_in
    if new_digit < 0:
        return None
    b2 = b - (digit_b - new_digit) * 10 ** column
    n_before, _ = carry_stats(np.array([a]), np.array([b]), n_digits)
    n_after, _ = carry_stats(np.array([a]), np.array([b2]), n_digits)
    if n_before[0] - n_after[0] != 1:  # the carry was the only one to go
        return None
    return f"{a}+{b}", f"{a}+{b2}"
