"""Where models run and how they train: device, CPU threads, the optimiser, the learning-rate
schedule and what a training run returns. Shared by the adder and the sortedness classifier."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import torch


def default_device() -> str:
    """Where new models go: the GPU when PyTorch finds one, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@contextmanager
def torch_threads(n: int | None = 1) -> Iterator[None]:
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


ANALYSIS_THREADS: int | None = 1  # torch threads for measuring (sweeps, roles, mean z); None: torch's own


@contextmanager
def analysis_threads() -> Iterator[None]:
    """torch_threads(ANALYSIS_THREADS), read when the block starts (a benchmark may change it)."""
    with torch_threads(ANALYSIS_THREADS):
        yield


SMALL_BATCH = 512  # below this many rows an answer takes milliseconds: a second thread only adds overhead
_eval_lock = threading.Lock()
_eval_depth = 0  # nested or concurrent eval_threads blocks: the first sets, the last restores
_eval_before = 1


def usable_cores() -> int:
    """CPU cores this process may run on (a container or taskset may allow fewer than exist)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def eval_threads_for(n_rows: int) -> int | None:
    """The thread rule of solve / evaluate / predict: 1 thread below SMALL_BATCH rows, else half
    the usable cores, at most 2 (and at least 1); None (torch's setting untouched) when
    OMP_NUM_THREADS is set, since then the user chose. torch's default is a thread per core, so
    two processes side by side each run every core's worth of threads and wait on each other;
    with half the cores each, two never oversubscribe the machine, and the kit's matrices are too
    small for a third thread to pay. Greedy answers do not depend on the thread count (checked
    on the 10,000 held-out sums with 1, 2, 4 and 16 threads)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    return 1 if n_rows < SMALL_BATCH else min(2, max(1, usable_cores() // 2))


@contextmanager
def eval_threads(n_rows: int) -> Iterator[None]:
    """torch_threads(eval_threads_for(n_rows)), safe when several Python threads evaluate at
    once (torch's thread count is one setting per process: only the outermost block restores it)."""
    global _eval_depth, _eval_before
    n = eval_threads_for(n_rows)
    with _eval_lock:
        if _eval_depth == 0:
            _eval_before = torch.get_num_threads()
            if n:
                torch.set_num_threads(n)
        _eval_depth += 1
    try:
        yield
    finally:
        with _eval_lock:
            _eval_depth -= 1
            if _eval_depth == 0:
                torch.set_num_threads(_eval_before)


class AdamW:
    """torch.optim.AdamW with a learning-rate schedule, its update bit for bit, without torch.optim
    on the CPU and CUDA. Making or stepping any torch.optim optimizer imports torch._dynamo (sympy,
    torch.distributed): 70 MB that a learner's kernel keeps, and 1.7 s, for a model of 1 MB. Here
    the same fused kernel (torch._fused_adamw_, what fused=True calls: one kernel updates every
    parameter, and the committed results depend on its last bits) runs on the same state.

    `schedule(k)` scales `lr` at the k-th update (0-based), as LambdaLR(opt, schedule) stepped
    after each update does. On other devices torch.optim.AdamW does the update.
    """

    def __init__(self, params, lr: float, weight_decay: float, schedule=lambda k: 1.0, betas=(0.9, 0.999), eps=1e-8):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.weight_decay, self.schedule, self.betas, self.eps = lr, weight_decay, schedule, betas, eps
        self.updates = 0
        device = self.params[0].device if self.params else torch.device("cpu")
        self.fallback = None
        # no fused kernel on other devices; a torch older than the lock's may lack the op (a hub's own torch)
        if device.type not in ("cpu", "cuda") or not hasattr(torch, "_fused_adamw_"):
            self.fallback = torch.optim.AdamW(self.params, lr=lr, weight_decay=weight_decay, betas=betas, eps=eps)
        # AdamW's state, created as fused=True creates it: a float32 step count beside each parameter
        self.step_counts = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        lr = self.lr * self.schedule(self.updates)  # LambdaLR: base_lr * lambda(last_epoch)
        self.updates += 1
        if self.fallback is not None:
            self.fallback.param_groups[0]["lr"] = lr
            self.fallback.step()
            return
        # only parameters with a gradient, in order, as torch.optim.AdamW groups them
        have = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not have:
            return
        steps = [self.step_counts[i] for i in have]
        torch._foreach_add_(steps, 1)
        torch._fused_adamw_(
            [self.params[i] for i in have],
            [self.params[i].grad for i in have],
            [self.exp_avgs[i] for i in have],
            [self.exp_avg_sqs[i] for i in have],
            [],
            steps,
            amsgrad=False,
            lr=lr,
            beta1=self.betas[0],
            beta2=self.betas[1],
            weight_decay=self.weight_decay,
            eps=self.eps,
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )


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


Model = TypeVar("Model", bound=torch.nn.Module)


@dataclass
class TrainResult(Generic[Model]):
    model: Model
    history: list = field(default_factory=list)  # one dict per logged step (no wall times: files must not change)
    steps: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    saved_to: Path | None = None  # where the checkpoint went (a side file after an interruption)
    metrics: dict = field(default_factory=dict)  # the test metrics saved with it
