"""Is a sequence of integers 0–99 sorted (non-decreasing)? A length-extrapolation testbed.

Train on lengths 8–16, test up to 256. Two kinds of negatives, always reported apart:
  * "shuffle": a random shuffle of a sorted sequence — at long lengths almost every
    neighbouring pair is out of order, so these are trivially unsorted;
  * "hard": a sorted sequence with one adjacent pair swapped — a single violation
    the model must find among L - 1 pairs. This is the real test.

Data, the encoder classifier, its training, and the experiment over every encoding ×
seed that writes the committed checkpoints and results (`python -m attnkit train sortedness`).
"""
from __future__ import annotations

import math
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm

from .attention import MultiHeadAttention
from .checkpoint import load_checkpoint, load_state, save_checkpoint, save_json
from .evaluate import default_device
from .positional import ENCODINGS, Encoding, Positional
from .train import adamw

N_VALUES = 100                       # values 0 … 99
TRAIN_LENGTHS = tuple(range(8, 17))  # 8 … 16
TEST_LENGTHS = TRAIN_LENGTHS + (32, 64, 128, 256)
NEGATIVES = ("hard", "shuffle")


# ---------------------------------------------------------------------------- data
def sorted_sequences(rng: np.random.Generator, n: int, length: int, p_narrow: float = 0.0,
                     max_width: int = 30) -> np.ndarray:
    """(n, length) sorted rows. A share p_narrow draws from a narrow window [lo, lo + w],
    w ≤ max_width, so neighbouring distinct values mostly differ by 1 — as they do at
    length 256, where 256 values share 0–99. The rest draw from all of 0–99."""
    width = np.where(rng.random(n) < p_narrow, rng.integers(1, max_width + 1, n), N_VALUES - 1)
    lo = rng.integers(0, N_VALUES - width)                 # window start, inclusive
    values = lo[:, None] + np.floor(rng.random((n, length)) * (width[:, None] + 1)).astype(np.int64)
    return np.sort(values, axis=1)


def swap_one_pair(rng: np.random.Generator, seqs: np.ndarray, weights: Optional[np.ndarray] = None) -> np.ndarray:
    """Hard negatives: swap one adjacent pair (i, i+1) with x_i < x_{i+1}, chosen uniformly
    among such pairs, or with probability ∝ weights[i] (length - 1,) when given.

    Every row must have such a pair (not be constant); the result has exactly one descent."""
    strict = np.diff(seqs, axis=1) > 0                     # (n, length - 1)
    if not strict.any(axis=1).all():
        raise ValueError("a constant sequence cannot be made unsorted by one swap")
    w = strict * (1.0 if weights is None else np.asarray(weights, dtype=float)[None])
    cum = np.cumsum(w, axis=1)
    i = (cum > rng.random(len(seqs))[:, None] * cum[:, -1:]).argmax(axis=1)
    out, rows = seqs.copy(), np.arange(len(seqs))
    out[rows, i], out[rows, i + 1] = seqs[rows, i + 1], seqs[rows, i]
    return out


def shuffle_rows(rng: np.random.Generator, seqs: np.ndarray) -> np.ndarray:
    """Shuffle negatives: each non-constant row permuted at random until it is unsorted."""
    out = rng.permuted(seqs, axis=1)
    while (again := is_sorted(out)).any():                 # rare beyond length 8
        out[again] = rng.permuted(out[again], axis=1)
    return out


def is_sorted(seqs: np.ndarray) -> np.ndarray:
    return (np.diff(seqs, axis=1) >= 0).all(axis=1)


def sorted_non_constant(rng: np.random.Generator, n: int, length: int, p_narrow: float = 0.0) -> np.ndarray:
    """sorted_sequences() redrawing constant rows: every row can then be made unsorted."""
    seqs = sorted_sequences(rng, n, length, p_narrow)
    while (flat := seqs[:, 0] == seqs[:, -1]).any():       # a constant row has no negative
        seqs[flat] = sorted_sequences(rng, int(flat.sum()), length, p_narrow)
    return seqs


def labelled_set(rng: np.random.Generator, n_pos: int, n_hard: int, n_shuffle: int, length: int,
                 p_narrow: float = 0.0, pair_weights: Optional[np.ndarray] = None):
    """Sorted rows (label 1), then hard and shuffle negatives (label 0) of one length.
    Returns (rows, labels, kind) with kind 0 = sorted, 1 = hard, 2 = shuffle."""
    pos = sorted_non_constant(rng, n_pos, length, p_narrow)
    hard = swap_one_pair(rng, sorted_non_constant(rng, n_hard, length, p_narrow), pair_weights)
    shuf = shuffle_rows(rng, sorted_non_constant(rng, n_shuffle, length, p_narrow))
    rows = list(pos) + list(hard) + list(shuf)
    kind = np.repeat([0, 1, 2], [n_pos, n_hard, n_shuffle])
    return rows, (kind == 0).astype(np.float32), kind


@dataclass
class DataConfig:
    seed: int = 0            # one fixed data set for every encoding and model seed
    n_train: int = 10_000    # balanced: half sorted, half negatives
    n_val: int = 2_000       # lengths 8–16, test-like values (0–99): 1,000 sorted, 500 hard, 500 shuffle
    n_test: int = 500        # per length and negative kind: 250 sorted + 250 negatives
    p_hard: float = 0.8      # share of training negatives that are hard (the rest shuffles)
    p_narrow: float = 0.5    # share of training rows drawn from a narrow value window (small gaps)
    even_pairs: bool = True  # swap late pairs more often: they exist only in long rows (see make_train_set)


def make_train_set(cfg: DataConfig = DataConfig()):
    """n_train rows of lengths 8–16 (equal counts per length), balanced, mostly hard negatives.

    With a uniform swap, pair 14 (positions 14, 15) exists only in length-16 rows and gets
    about a tenth of the swaps pair 0 gets. A model with absolute positions learns each
    position on its own and then misses late swaps; `even_pairs` weights pair i by
    1 / (number of training lengths that have it), which evens the counts out (not exactly:
    pair 14 still gets about a third of pair 0's)."""
    rng = np.random.default_rng(cfg.seed)
    rows, labels = [], []
    per_len = cfg.n_train // len(TRAIN_LENGTHS)
    have_pair = np.array([sum(L - 1 > i for L in TRAIN_LENGTHS) for i in range(max(TRAIN_LENGTHS) - 1)])
    for i, length in enumerate(TRAIN_LENGTHS):
        n = per_len + (1 if i < cfg.n_train % len(TRAIN_LENGTHS) else 0)
        n_neg = n // 2
        n_hard = round(n_neg * cfg.p_hard)
        weights = 1.0 / have_pair[:length - 1] if cfg.even_pairs else None
        r, y, _ = labelled_set(rng, n - n_neg, n_hard, n_neg - n_hard, length, cfg.p_narrow, weights)
        rows += r
        labels.append(y)
    return rows, np.concatenate(labels)


def make_val_set(cfg: DataConfig = DataConfig()):
    """Like the test sets (values from all of 0–99) at lengths 8–16; returns (rows, labels, kind)."""
    rng = np.random.default_rng(cfg.seed + 1)
    lengths = rng.choice(TRAIN_LENGTHS, cfg.n_val)
    kinds = np.repeat([0, 1, 2], [cfg.n_val // 2, cfg.n_val // 4, cfg.n_val - cfg.n_val // 2 - cfg.n_val // 4])
    rows = []
    for length, k in zip(lengths, kinds):
        r, _, _ = labelled_set(rng, int(k == 0), int(k == 1), int(k == 2), int(length))
        rows += r
    return rows, (kinds == 0).astype(np.float32), kinds


def make_test_sets(cfg: DataConfig = DataConfig(), lengths: Sequence[int] = TEST_LENGTHS):
    """{length: (rows (n, L) array, labels, kind)}: 250 sorted, 250 hard, 250 shuffle per length."""
    out = {}
    for length in lengths:
        rng = np.random.default_rng([cfg.seed + 2, length])
        half = cfg.n_test // 2
        rows, y, kind = labelled_set(rng, half, half, half, length)
        out[length] = (np.stack(rows), y, kind)
    return out


def pad_batch(seqs: Sequence[Sequence[int]], device=None) -> tuple[Tensor, Tensor]:
    """Ragged rows -> tokens (batch, L) and pad (batch, L), True = padding."""
    n_pos = max(len(s) for s in seqs)
    tokens = np.zeros((len(seqs), n_pos), dtype=np.int64)
    pad = np.ones((len(seqs), n_pos), dtype=bool)
    for i, s in enumerate(seqs):
        tokens[i, :len(s)], pad[i, :len(s)] = s, False
    return torch.from_numpy(tokens).to(device), torch.from_numpy(pad).to(device)


# ---------------------------------------------------------------------------- model
@dataclass
class SortednessConfig:
    encoding: Encoding = "relative"            # how the model knows where a token is
    readout: Literal["max", "mean", "first"] = "max"  # how the per-token scores become one answer
    d_model: int = 64                          # residual stream width
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128                            # hidden width of each feed-forward block
    value_feature: bool = True                 # add the value's angle on an arc (a built-in order)
    max_len: int = 256                         # learned table rows: the longest test length
    n_exact: int = 3                           # relative buckets: offsets -3 … 3 exact, the rest far left/right
    far_as_one: bool = True                    # relative: a far bucket weighs as one key at any length
    alibi_directional: bool = True             # ALiBi heads look only left or only right (see positional.py)
    learned_init: Literal["sinusoidal", "random"] = "sinusoidal"  # the learned table's starting rows


def value_angle(tokens: Tensor) -> Tensor:
    """(batch, L) values -> (batch, L, 2): (cos θ, sin θ), θ from π/4 (value 0) to 3π/4 (99).

    Why a point on an arc and not value/99 itself: LayerNorm divides each token by its
    norm, so a feature that is mostly "value/99 · w" comes out as ±w and the size of the
    value is lost. On the arc the norm is the same for every value, LayerNorm keeps it,
    and cos θ still falls steadily with the value (by ≥ 0.011 per step), so the model can
    test x_i > x_j with one subtraction."""
    theta = math.pi / 4 + (math.pi / 2) * tokens.float() / (N_VALUES - 1)
    return torch.stack([theta.cos(), theta.sin()], dim=-1)


class EncoderLayer(nn.Module):
    """Pre-LayerNorm self-attention + feed-forward, passing the encoding's bias/rotary."""

    def __init__(self, cfg: SortednessConfig, index: int):
        super().__init__()
        self.ln_attn, self.ln_ff = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads)
        self.self_attn.name = f"enc.self.{index}"
        self.ff = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model))

    def forward(self, x: Tensor, pad: Tensor, bias: Optional[Tensor], rotary) -> Tensor:
        x = x + self.self_attn(self.ln_attn(x), key_padding_mask=pad, attn_bias=bias, rotary=rotary)
        return x + self.ff(self.ln_ff(x))


class SortednessClassifier(nn.Module):
    """Values -> encoder -> a violation score per token -> pooled over positions -> "sorted" logit."""

    def __init__(self, cfg: SortednessConfig = SortednessConfig()):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(N_VALUES, cfg.d_model)
        nn.init.normal_(self.embed.weight, std=0.02)  # small (GPT-2's init): order, not identity, first
        # A learned table of 100 values knows nothing of their order. value_feature hands the
        # model "3 < 4" for free: see value_angle(). Comparing neighbours becomes linear.
        self.value_dir = nn.Linear(2, cfg.d_model, bias=False) if cfg.value_feature else None
        if self.value_dir is not None:
            # Norm ≈ √d_model, above the position tables' √(d_model/2): with the default (3× smaller)
            # init the absolute encodings spent most of training before they used the values at all.
            nn.init.normal_(self.value_dir.weight, std=1.0)
        self.pos = Positional(cfg.encoding, cfg.d_model, cfg.n_heads, cfg.max_len, cfg.n_exact,
                              cfg.far_as_one, cfg.alibi_directional, cfg.learned_init)
        self.layers = nn.ModuleList(EncoderLayer(cfg, i) for i in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, 1)

    @property
    def max_len(self) -> Optional[int]:
        """The longest sequence this encoding supports; None = any length."""
        return self.pos.max_len

    def forward(self, tokens: Tensor, pad: Optional[Tensor] = None) -> Tensor:
        """tokens (batch, L) values 0–99, pad (batch, L) True = padding -> logits (batch,)."""
        n_pos = tokens.size(1)
        pad = torch.zeros_like(tokens, dtype=torch.bool) if pad is None else pad
        x = self.embed(tokens)                                   # (batch, L, d_model)
        if self.value_dir is not None:
            x = x + self.value_dir(value_angle(tokens))
        table = self.pos.table(n_pos)
        if table is not None:
            x = x + table.to(x.device)
        lengths = (~pad).sum(1) if pad.any() else None            # None: every row is full length
        bias = self.pos.bias(n_pos, lengths, tokens.device)       # ([batch,] heads, L, L) or None
        for layer in self.layers:
            x = layer(x, pad, bias, self.pos.rotary)
        # Each token scores "a violation is here" (batch, L); pooling over positions makes
        # it one "the sequence is unsorted" logit, and its negative is the "sorted" logit.
        score = self.head(self.ln_f(x)).squeeze(-1)
        if self.cfg.readout == "max":      # "is there a violation anywhere?": one token decides
            pooled = score.masked_fill(pad, float("-inf")).amax(dim=1)
        elif self.cfg.readout == "mean":   # one violating token moves the answer by 1/L only
            keep = (~pad).float()
            pooled = (score * keep).sum(1) / keep.sum(1)
        else:                              # "first": token 0 must gather the whole answer
            pooled = score[:, 0]
        return -pooled

    @torch.no_grad()
    def predict(self, seqs: Sequence[Sequence[int]], batch_size: int = 256) -> list[bool]:
        """True = sorted (non-decreasing). ValueError names any bad input."""
        seqs = validate(seqs, self.max_len)
        return [bool(p > 0.5) for p in self.probabilities(seqs, batch_size)]

    @torch.no_grad()
    def probabilities(self, seqs: Sequence[Sequence[int]], batch_size: int = 256) -> np.ndarray:
        """P(sorted) for each row (rows are not validated: use predict for user input)."""
        self.eval()
        device = next(self.parameters()).device
        order = np.argsort([len(s) for s in seqs], kind="stable")  # similar lengths share a batch
        out = np.empty(len(seqs))
        n_pos = max(len(s) for s in seqs)
        step = max(1, batch_size * 16 // max(16, n_pos))  # keep (batch, heads, L, L) patterns small
        for i in range(0, len(seqs), step):
            idx = order[i:i + step]
            tokens, pad = pad_batch([seqs[j] for j in idx], device)
            out[idx] = torch.sigmoid(self(tokens, pad)).double().cpu().numpy()
        return out


def validate(seqs, max_len: Optional[int]) -> list[list[int]]:
    """Lists of ints 0–99, each non-empty and no longer than max_len; ValueError naming the culprit."""
    if isinstance(seqs, (str, bytes)) or not hasattr(seqs, "__len__"):
        raise ValueError(f"expected a list of sequences of integers, got {seqs!r}")
    if len(seqs) == 0:
        raise ValueError("expected at least one sequence, got an empty list")
    out = []
    for i, s in enumerate(seqs):
        if isinstance(s, (str, bytes)) or not hasattr(s, "__len__"):
            raise ValueError(f"sequence {i} ({s!r}) is not a list of integers")
        if len(s) == 0:
            raise ValueError(f"sequence {i} is empty; a sequence needs at least one value")
        if max_len is not None and len(s) > max_len:
            raise ValueError(f"sequence {i} has length {len(s)}, longer than this encoding "
                             f"supports ({max_len} positions)")
        for v in s:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"sequence {i} holds {v!r}, which is not an integer")
            if not 0 <= v < N_VALUES:
                raise ValueError(f"sequence {i} holds {v}, outside the values 0–{N_VALUES - 1}")
        out.append([int(v) for v in s])
    return out


# ---------------------------------------------------------------------------- training
@dataclass
class TrainConfig:
    seed: int = 0            # model initialisation and batch order
    steps: int = 2000        # optimizer steps (~25 epochs of the 10,000 rows; see train_config)
    batch_size: int = 128    # rows per step, all of one length (so nothing is padded)
    lr: float = 3e-3         # peak, after a short warm-up, cosine-decayed to 0 (see train_config)
    warmup_steps: int = 50
    weight_decay: float = 0.0
    shift: bool = True       # add a random constant to each training row (keeps it in 0–99): same label


@dataclass
class TrainResult:
    model: SortednessClassifier
    history: list = field(default_factory=list)  # {"step", "loss", "acc"} of the training batches
    seconds: float = 0.0


def train_config(model_cfg: SortednessConfig, seed: int) -> TrainConfig:
    """The experiment's training settings: 2,000 steps at a peak lr of 3e-3, except for the
    absolute tables, which learn every position on its own and get 2,400 steps. At 2,000
    steps one sinusoidal seed stopped at 0.934 in range (2,400: ≥ 0.98 on all three).
    A learned table also trains at 2e-3: at 3e-3 its rows keep moving under the attention
    that is trying to use them, and one seed stayed just under 97 % in range (at 2e-3 the
    relative schemes, on the other hand, learned their neighbour biases less sharply)."""
    if model_cfg.encoding == "learned":
        return TrainConfig(seed=seed, lr=2e-3, steps=2400)
    if model_cfg.encoding == "sinusoidal":
        return TrainConfig(seed=seed, steps=2400)
    return TrainConfig(seed=seed)


def lr_factor(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    return 0.5 * (1 + math.cos(math.pi * (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)))


def train_classifier(model_cfg: SortednessConfig = SortednessConfig(), train_cfg: TrainConfig = TrainConfig(),
                     train_set=None, device: Optional[str] = None, progress: bool = True) -> TrainResult:
    """Train on `train_set` (rows, labels) — by default make_train_set() — for train_cfg.steps."""
    device = device or default_device()
    rows, labels = train_set if train_set is not None else make_train_set()
    torch.manual_seed(train_cfg.seed)
    rng = np.random.default_rng(train_cfg.seed)
    model = SortednessClassifier(model_cfg).to(device)
    opt = adamw(model.parameters(), train_cfg.lr, train_cfg.weight_decay, device)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, train_cfg))
    all_tokens, _ = pad_batch(rows)                         # (n, 16): pad once, index per step
    lengths = np.array([len(r) for r in rows])
    lo, hi = np.array([r.min() for r in rows]), np.array([r.max() for r in rows])
    result, start = TrainResult(model), time.perf_counter()
    batches: list = []
    model.train()
    for step in tqdm(range(train_cfg.steps), desc=f"{model_cfg.encoding} seed {train_cfg.seed}",
                     disable=not progress, leave=False):
        if not batches:  # a fresh epoch: every batch holds one length, so nothing is padded
            batches = [chunk for L in np.unique(lengths)
                       for chunk in np.array_split(rng.permutation(np.flatnonzero(lengths == L)),
                                                   max(1, round((lengths == L).sum() / train_cfg.batch_size)))]
            batches = [batches[i] for i in rng.permutation(len(batches))]
        idx = batches.pop()
        tokens = all_tokens[idx, :lengths[idx[0]]]
        if train_cfg.shift:  # sortedness ignores a common offset; the model must not memorise values
            tokens = tokens + torch.from_numpy(rng.integers(-lo[idx], N_VALUES - hi[idx]))[:, None]
        tokens, pad = tokens.to(device), None
        y = torch.from_numpy(labels[idx]).to(device)
        logits = model(tokens, pad)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % 50 == 0 or step == train_cfg.steps - 1:
            acc = ((logits > 0).float() == y).float().mean().item()
            result.history.append({"step": step, "loss": loss.item(), "acc": acc})
    result.seconds = time.perf_counter() - start
    model.eval()
    return result


def accuracy_by_kind(model: SortednessClassifier, rows, labels: np.ndarray, kind: np.ndarray) -> dict:
    """{"hard": acc, "shuffle": acc}: accuracy on (sorted + that negative kind), each class
    weighted equally, so 0.5 is chance and "call everything unsorted" scores 0.5 too."""
    correct = (model.probabilities(rows) > 0.5) == (labels > 0.5)
    pos = correct[kind == 0].mean()
    return {name: float((pos + correct[kind == k].mean()) / 2) for k, name in ((1, "hard"), (2, "shuffle"))}


# ---------------------------------------------------------------------------- experiment
DATA_DIR = Path(__file__).resolve().parent.parent / "data"
RESULTS_PATH = DATA_DIR / "sortedness_results.json"
SEEDS = (0, 1, 2)
KIND = "sortedness"  # checkpoint kind, checked on load


def checkpoint_path(encoding: str, data_dir: Path = DATA_DIR) -> Path:
    return Path(data_dir) / f"sortedness-{encoding}.pt"


def evaluate(model: SortednessClassifier, val_set, test_sets) -> dict:
    """{"val": {"hard", "shuffle"}, "hard": {length: acc}, "shuffle": {length: acc}}"""
    by_len = {length: accuracy_by_kind(model, *t) for length, t in test_sets.items()}
    return {"val": accuracy_by_kind(model, *val_set),
            **{neg: {length: acc[neg] for length, acc in by_len.items()} for neg in NEGATIVES}}


def spread(values: list[float]) -> dict:
    v = np.array(values)
    return {"mean": float(v.mean()), "std": float(v.std()), "min": float(v.min()), "max": float(v.max()),
            "seeds": [float(x) for x in v]}


def _train_and_evaluate(cfg: SortednessConfig, seed: int, train_set, val_set, test_sets,
                        device: str, steps: Optional[int] = None) -> tuple[dict, dict, dict]:
    """One run of the experiment: (metrics, train config, CPU state dict). Module-level so
    that a worker process can run it; on CPU it uses one thread (see run_experiment)."""
    if device == "cpu":
        torch.set_num_threads(1)
    train_cfg = train_config(cfg, seed)
    if steps is not None:
        train_cfg = replace(train_cfg, steps=steps)
    result = train_classifier(cfg, train_cfg, train_set, device, progress=False)
    state = {k: v.cpu() for k, v in result.model.state_dict().items()}
    return evaluate(result.model, val_set, test_sets), asdict(train_cfg), {"state": state, "history": result.history}


def run_experiment(encodings: Sequence[str] = ENCODINGS, seeds: Sequence[int] = SEEDS,
                   variants: bool = True, data_dir: Path = DATA_DIR, device: Optional[str] = None,
                   workers: Optional[int] = None, steps: Optional[int] = None, data: DataConfig = DataConfig(),
                   progress: bool = True) -> dict:
    """Train every encoding × seed (max-pool readout); save data/sortedness_results.json and one
    checkpoint per encoding (its first seed). `variants` adds, with the first seed: the relative
    encoding with mean-pool and first-token readouts, and a randomly initialised learned table.

    Deterministic: on CPU every run uses one thread, because summation order — and so the last
    bits of every weight — depends on the thread count. One thread is also the fastest way to
    train matrices this small, so the runs go to `workers` processes (default: one per CPU core);
    each run seeds itself, so the results do not depend on the number of workers.
    `steps` and `data` shrink it for a quick trial run (the committed files use the defaults)."""
    device = device or default_device()
    if workers is None:
        workers = 1 if device != "cpu" else max(1, min(os.cpu_count() or 1, 4))
    train_set, val_set, test_sets = make_train_set(data), make_val_set(data), make_test_sets(data)
    runs = [(enc, SortednessConfig(encoding=enc), seed) for enc in encodings for seed in seeds]
    if variants:
        runs += [("readout-mean", SortednessConfig(encoding="relative", readout="mean"), seeds[0]),
                 ("readout-first", SortednessConfig(encoding="relative", readout="first"), seeds[0]),
                 ("learned-random-init", SortednessConfig(encoding="learned", learned_init="random"), seeds[0])]
    per_run: dict = {}
    start, done_after = time.perf_counter(), {}  # (name, seed) -> seconds from the start
    bar = tqdm(total=len(runs), desc=f"sortedness experiment ({workers} worker{'s' * (workers > 1)})",
               disable=not progress)

    def record(name: str, cfg: SortednessConfig, seed: int, outcome) -> None:
        metrics, train_cfg, trained = outcome
        per_run[name, seed], done_after[name, seed] = metrics, time.perf_counter() - start
        bar.update()
        bar.set_postfix_str(f"{name} seed {seed}: val hard {metrics['val']['hard']:.3f}, "
                            f"hard@256 {metrics['hard'][max(test_sets)]:.3f}")
        if name in encodings and seed == seeds[0]:
            save_checkpoint(checkpoint_path(name, data_dir), KIND, asdict(cfg), trained["state"],
                            {"seed": seed, "train": train_cfg, "history": trained["history"], **metrics})

    shared = (train_set, val_set, test_sets, device, steps)  # every run's arguments after (cfg, seed)
    threads = torch.get_num_threads()
    try:
        if workers == 1:
            for name, cfg, seed in runs:
                record(name, cfg, seed, _train_and_evaluate(cfg, seed, *shared))
        else:
            # "spawn": a fresh interpreter per worker, the same on Linux, macOS and Windows
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(_train_and_evaluate, cfg, seed, *shared): (name, cfg, seed)
                           for name, cfg, seed in runs}
                for future in as_completed(futures):
                    record(*futures[future], future.result())
    finally:
        torch.set_num_threads(threads)
        bar.close()

    def collect(name: str, its_seeds: Sequence[int]) -> dict:
        runs_of = [per_run[name, s] for s in its_seeds]
        out = {"val": {neg: spread([r["val"][neg] for r in runs_of]) for neg in NEGATIVES}}
        for neg in NEGATIVES:
            out[neg] = {length: spread([r[neg][length] for r in runs_of]) for length in test_sets}
        return out

    results = {
        "setup": {"data": asdict(data), "model": asdict(SortednessConfig()), "train": asdict(TrainConfig()),
                  "train_learned": asdict(train_config(SortednessConfig(encoding="learned"), seeds[0])),
                  "seeds": list(seeds), "test_lengths": list(test_sets), "train_lengths": list(TRAIN_LENGTHS)},
        "encodings": {enc: collect(enc, seeds) for enc in encodings},
        "variants": {name: collect(name, [seed]) for name, _, seed in runs if name not in encodings},
    }
    save_json(Path(data_dir) / RESULTS_PATH.name, results)
    if progress:
        main_runs = max(t for (name, _), t in done_after.items() if name in encodings)
        print(f"sortedness experiment: {len(runs)} models in {time.perf_counter() - start:.0f} s "
              f"(its {len(encodings) * len(seeds)} encoding × seed runs done after {main_runs:.0f} s)")
    return results


def _int_keys(obj):
    """JSON turns the length keys into strings; give them back as ints."""
    if isinstance(obj, dict):
        return {int(k) if isinstance(k, str) and k.isdigit() else k: _int_keys(v) for k, v in obj.items()}
    return obj


def load_results(path: Path = RESULTS_PATH) -> dict:
    """The committed results: results["encodings"]["relative"]["hard"][256]["mean"]."""
    import json
    return _int_keys(json.loads(Path(path).read_text()))


def load_pretrained(encoding: str, data_dir: Path = DATA_DIR, device: str = "cpu") -> SortednessClassifier:
    """The committed classifier for one encoding (trained with seed 0)."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; choose one of {ENCODINGS}")
    path = checkpoint_path(encoding, data_dir)
    payload = load_checkpoint(path, KIND)
    model = SortednessClassifier(SortednessConfig(**payload["config"]))
    load_state(model, payload, path)
    model.metrics = payload["metrics"]  # validation and test accuracies of this very model
    return model.to(device).eval()
