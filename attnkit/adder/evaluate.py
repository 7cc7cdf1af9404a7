"""Evaluating the adder: greedy exact match (the headline) and what hides behind it.

Greedy decoding feeds the model its own previous digits; teacher forcing feeds it the
true ones. A model can be right on 99 % of tokens under teacher forcing and still get
far fewer whole sums right greedily: one wrong digit derails every digit after it.
"""

from __future__ import annotations

import hashlib
import weakref

import numpy as np
import torch
from torch import Tensor

from ..core.runtime import analysis_threads, model_device
from .data import EOS, PAD, carry_stats, decode_digits, encode_sources, encode_targets, operands_or_test_set
from .model import Seq2SeqTransformer

# Problems per teacher-forced pass over many problems (evaluate, mean_z, run_with_cache, the replay's
# loss): the same logits bit for bit at any size, and as fast at 512 as at 1,024 or 4,096; a pass's
# intermediates stay in a learner's kernel (4,096 peaked 150 MB higher than 1,024, 1,024 20-27 MB
# higher than 512).
PASS = 512
_PER_MODEL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> results that depend on its weights


@torch.no_grad()
def greedy_correct(model: Seq2SeqTransformer, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(batch,) bool: the whole greedily decoded sum, </s> included, is right."""
    cfg = model.cfg
    src = encode_sources(a, b, cfg.n_digits, cfg.zero_pad).to(model_device(model))
    tgt = encode_targets(a + b, cfg.n_digits, cfg.reverse_output)[:, 1:].to(src.device)
    out = model.eval().greedy(src)
    return ((out == tgt) | (tgt == PAD)).all(dim=1).cpu().numpy()


@torch.no_grad()
def predict(model: Seq2SeqTransformer, a: np.ndarray, b: np.ndarray) -> list[str]:
    cfg = model.cfg
    src = encode_sources(a, b, cfg.n_digits, cfg.zero_pad).to(model_device(model))
    out = model.eval().greedy(src).cpu().tolist()
    return [decode_digits(row, cfg.reverse_output) for row in out]


@torch.no_grad()
def evaluate(model: Seq2SeqTransformer, a: np.ndarray, b: np.ndarray) -> dict:
    """Every metric the notebooks report, on problems (a, b)."""
    cfg = model.cfg
    src = encode_sources(a, b, cfg.n_digits, cfg.zero_pad).to(model_device(model))
    tgt = encode_targets(a + b, cfg.n_digits, cfg.reverse_output).to(src.device)
    model.eval()
    out = model.greedy(src)
    gold = tgt[:, 1:]
    real = gold != PAD
    digit = real & (gold != EOS)
    exact = ((out == gold) | ~real).all(dim=1)
    # Teacher forcing: every position sees the true prefix, so errors cannot compound.
    # In passes, as greedy decodes: one pass over 10,000 problems held every activation at once.
    tf_pred = torch.cat([model(s, t[:, :-1]).argmax(-1) for s, t in zip(src.split(PASS), tgt.split(PASS))])
    tf_right = (tf_pred == gold) | ~real
    n_carries, chain = carry_stats(a, b, cfg.n_digits)
    exact_np = exact.cpu().numpy()

    def split(groups: np.ndarray) -> dict:
        return {
            int(g): {"n": int((groups == g).sum()), "exact_match": float(exact_np[groups == g].mean())}
            for g in np.unique(groups)
        }

    return {
        "n": len(a),
        "exact_match": float(exact.float().mean()),
        "per_digit_accuracy": float(((out == gold) & digit).sum() / digit.sum()),
        "teacher_forced_token_accuracy": float(((tf_pred == gold) & real).sum() / real.sum()),
        "teacher_forced_exact_match": float(tf_right.all(dim=1).float().mean()),
        "by_carries": split(n_carries),
        "by_longest_chain": split(chain),
    }


def per_model(model: Seq2SeqTransformer) -> dict:
    """A dict for results that depend on this model's weights (mean z, the baseline); emptied
    when the weights change. The fingerprint is a hash of the weights' bytes (~1 ms): a version
    counter misses writes through `.data` or numpy views."""
    digest = hashlib.blake2b(digest_size=16)
    for p in model.parameters():
        digest.update(p.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    fingerprint = digest.hexdigest()
    entry = _PER_MODEL.get(model)
    if entry is None or entry["fingerprint"] != fingerprint:
        entry = _PER_MODEL[model] = {"fingerprint": fingerprint}
    return entry


@analysis_threads()
@torch.no_grad()
def mean_z(model: Seq2SeqTransformer, a: np.ndarray | None = None, b: np.ndarray | None = None) -> dict:
    """Per attention module, (heads, d_head): each head's mean z over every real query position
    of problems (a, b), by default the held-out set, computed once per model: encoder, every
    non-padding source token; decoder, <s> and each answer digit, read with the true answer fed
    in. What "mean" ablation puts in place of a removed head."""
    entry = per_model(model) if a is None else {}
    if "mean_z" in entry:
        return entry["mean_z"]
    a, b = operands_or_test_set(a, b)
    cfg, device = model.cfg, model_device(model)
    src = encode_sources(a, b, cfg.n_digits, cfg.zero_pad).to(device)
    tgt = encode_targets(np.asarray(a) + np.asarray(b), cfg.n_digits, cfg.reverse_output).to(device)
    names = list(model.attention_modules())
    sums: dict[str, Tensor] = {}
    counts: dict[str, int] = {}
    with model.without_hooks():  # the intact model's z, whatever ablation is active around this call
        for s, t in zip(src.split(PASS), tgt.split(PASS)):
            _, cache = model.run_with_cache(s, t[:, :-1], names=[f"{n}.hook_z" for n in names])
            gold = t[:, 1:]
            for name in names:
                real = (s != PAD) if name.startswith("enc.") else (gold != PAD)  # (batch, q_pos)
                z = cache[f"{name}.hook_z"].double() * real[:, None, :, None]
                sums[name] = sums.get(name, 0) + z.sum(dim=(0, 2))
                counts[name] = counts.get(name, 0) + int(real.sum())
    entry["mean_z"] = {name: (sums[name] / counts[name]).float() for name in names}
    return entry["mean_z"]
