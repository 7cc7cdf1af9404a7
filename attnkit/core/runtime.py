"""Where models run and how they train: device, CPU threads, the optimiser, the learning-rate
schedule and what a training run returns. Shared by the adder and the sortedness classifier."""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Optional

import torch


def default_device() -> str:
    """Where new models go: the GPU when PyTorch finds one, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@contextmanager
def torch_threads(n: Optional[int] = 1) -> Iterator[None]:
    """Run with `n` torch threads inside the block (also a decorator); None leaves torch's
    setting alone. The kit's models are tiny (d_model 64): a second thread gains little on an
    idle machine, and on a busy one (shared cores, pytest -n 2) every op waits for its threads
    to be scheduled, several times slower."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


ANALYSIS_THREADS: Optional[int] = 1  # torch threads for measuring (sweeps, roles, mean z); None: torch's own


@contextmanager
def analysis_threads() -> Iterator[None]:
    """torch_threads(ANALYSIS_THREADS), read when the block starts (a benchmark may change it)."""
    with torch_threads(ANALYSIS_THREADS):
        yield


def adamw(params, lr: float, weight_decay: float, device) -> torch.optim.AdamW:
    """AdamW, fused where PyTorch has the kernel (CPU, CUDA): one kernel updates every parameter
    instead of a dozen small ops each. Its last bits differ from the per-parameter loop's, so
    the committed results depend on it."""
    fused = torch.device(device).type in ("cpu", "cuda")
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused or None)


def warmup_cosine(step: int, warmup: int, total: int, floor: float = 0.0) -> float:
    """Learning-rate factor: linear warm-up over `warmup` steps, then a cosine from 1 down to
    `floor` at step `total` (a decaying rate settles the last errors)."""
    if step < warmup:
        return (step + 1) / warmup
    span = max(1, total - warmup)
    if floor == 0.0:
        # π·(step - warmup) is rounded before the division here, after it below: the same curve
        # to 1e-16, but the committed checkpoints were trained with these exact bits.
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / span))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / span)))


@dataclass
class TrainResult:
    model: torch.nn.Module
    history: list = field(default_factory=list)   # one dict per logged step (no wall times: files must not change)
    steps: int = 0
    seconds: float = 0.0
    interrupted: bool = False
