"""Evaluating the adder: greedy exact match (the headline) and what hides behind it.

Greedy decoding feeds the model its own previous digits; teacher forcing feeds it the
true ones. A model can be right on 99 % of tokens under teacher forcing and still get
far fewer whole sums right greedily: one wrong digit derails every digit after it.
"""
from __future__ import annotations

import numpy as np
import torch

from .data import EOS, PAD, carry_stats, decode_digits, encode_sources, encode_targets
from .model import Seq2SeqTransformer


def default_device() -> str:
    """Where new models go: the GPU when PyTorch finds one, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


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
    tf_pred = model(src, tgt[:, :-1]).argmax(-1)
    tf_right = (tf_pred == gold) | ~real
    n_carries, chain = carry_stats(a, b, cfg.n_digits)
    exact_np = exact.cpu().numpy()

    def split(groups: np.ndarray) -> dict:
        return {int(g): {"n": int((groups == g).sum()), "exact_match": float(exact_np[groups == g].mean())}
                for g in np.unique(groups)}

    return {
        "n": len(a),
        "exact_match": float(exact.float().mean()),
        "per_digit_accuracy": float(((out == gold) & digit).sum() / digit.sum()),
        "teacher_forced_token_accuracy": float(((tf_pred == gold) & real).sum() / real.sum()),
        "teacher_forced_exact_match": float(tf_right.all(dim=1).float().mean()),
        "by_carries": split(n_carries),
        "by_longest_chain": split(chain),
    }
