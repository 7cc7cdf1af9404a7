"""The trained adder as learners and scripts use it: solve, look inside, ablate.

adder = attnkit.load_pretrained("adder")
adder.solve(["663+497", "5+5"])                 # ["1160", "10"]
answers, cache = adder.run_with_cache(["663+497"])
cache["dec.cross.1.hook_pattern"]               # (batch, heads, q_pos, k_pos)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from ..core.checkpoint import check_metrics, config_from, load_checkpoint, load_state, out_of_range
from ..core.head_ablation import ablate_heads
from ..core.hooks import ActivationCache
from ..core.runtime import default_device, eval_threads
from .data import BOS, DATA_DIR, EOS, PAD, decode_digits, encode_sources, load_test_set, parse_problem, tokens
from .evaluate import PASS, evaluate, greedy_correct, mean_z, predict
from .model import Seq2SeqConfig, Seq2SeqTransformer

CHECKPOINT = DATA_DIR / "adder.pt"
ABLATION_MODES = ("zero", "mean")
TARGET = 0.999  # exact match training aims for (AdderTrainConfig.target); below it, loading warns
SELF_CHECK_N = 256  # sample sums checked at load (a fraction of a second)
SELF_CHECK_SLACK = 0.2  # how far below its stored exact match the sample may fall (other sums, other CPU)
# Problems per pass of cache_passes (head_roles): half of evaluation's PASS, because a measure's pass
# comes on top of what a notebook already holds: notebook 04's peak 442 -> 431 MB, 2 % slower.
MEASURE_PASS = PASS // 2


def measured_accuracy(metrics: dict, key: str, path: Path) -> float:
    """metrics[key] as an accuracy, or ValueError: a missing, non-numeric or out-of-range value is
    not what the kit stores, so the file was edited."""
    value = metrics.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(
            f"checkpoint {path}: its metrics hold {key} = {value!r}, not an accuracy 0 … 1 "
            "(the kit always stores one): the file was edited"
        )
    return float(value)


def self_check(model: Seq2SeqTransformer) -> float:
    """Greedy exact match on SELF_CHECK_N fixed sums with operands of every length."""
    rng = np.random.default_rng(0)
    digits = rng.integers(1, model.cfg.n_digits + 1, size=(2, SELF_CHECK_N))
    a, b = rng.integers(0, 10**digits)
    with eval_threads(SELF_CHECK_N):
        return float(greedy_correct(model, a, b).mean())


class Adder:
    def __init__(self, model: Seq2SeqTransformer, metrics: dict | None = None):
        self.model = model.eval()
        self.cfg = model.cfg
        self.metrics = metrics or {}  # test metrics stored with the checkpoint

    @classmethod
    def load(cls, path: Path = CHECKPOINT, device: str | None = None) -> Adder:
        """The adder saved at `path`. ValueError when the file is corrupt, of another task, has a
        config key missing, mistyped or out of range, NaN weights, or a config that does not give
        the answers the file's metrics promise (e.g. reverse_output flipped by hand);
        CheckpointWarning when it is marked interrupted or scored below TARGET."""
        payload = load_checkpoint(path, kind="adder")
        cfg = config_from(Seq2SeqConfig, payload["config"], path, adder_config_problems)
        model = Seq2SeqTransformer(cfg)
        load_state(model, payload, path)
        adder = cls(model.to(device or default_device()), payload["metrics"])
        adder._check_answers(path)
        check_metrics(adder.metrics, path, TARGET)
        return adder

    def _check_answers(self, path: Path) -> None:
        """The file's metrics promise an exact match; a quick sample of sums of every length must
        come close (within SELF_CHECK_SLACK), whatever the metrics hold: a stored value that is not
        an accuracy is refused. A config flag flipped by hand (reverse_output, zero_pad) loads
        without any shape error and gives wrong sums: the error names the flag that disagrees."""
        stored = measured_accuracy(self.metrics, "exact_match", path)
        quick = self_check(self.model)
        if quick >= stored - SELF_CHECK_SLACK:
            return
        raise ValueError(
            f"checkpoint {path}: its model is right on only {quick:.0%} of {SELF_CHECK_N} sample sums, "
            f"though its metrics say {stored:.2%}: {self._disagreement(stored)}"
        )

    def _disagreement(self, stored: float) -> str:
        """Which config flag disagrees with the weights: the one whose flip gives the promised answers."""
        for flags in (("reverse_output",), ("zero_pad",), ("reverse_output", "zero_pad")):
            other = replace(self.cfg, **{f: not getattr(self.cfg, f) for f in flags})
            model = Seq2SeqTransformer(other).to(self.device)
            model.load_state_dict(self.model.state_dict())
            if self_check(model.eval()) >= stored - SELF_CHECK_SLACK:
                said = ", ".join(f"{f}={getattr(self.cfg, f)}" for f in flags)
                meant = ", ".join(f"{f}={getattr(other, f)}" for f in flags)
                return f"its config says {said}, but the weights were trained with {meant}"
        return f"the config ({asdict(self.cfg)}) or the weights do not fit the metrics"

    def save(self, path: Path, metrics: dict | None = None) -> None:
        from ..core.checkpoint import save_checkpoint

        save_checkpoint(path, "adder", asdict(self.cfg), self.model.state_dict(), metrics or self.metrics)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def heads(self) -> list[str]:
        """The 24 head ids: "enc.self.L.H", "dec.self.L.H", "dec.cross.L.H" (0-based)."""
        return self.model.heads

    def parse(self, problems: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(problems, str):
            raise ValueError(f"give a list of problems, e.g. [{problems!r}], not a single string")
        if isinstance(problems, (bytes, bytearray)):
            raise TypeError("give a list of str problems such as ['5+5'], not bytes (decode them first)")
        if not isinstance(problems, Iterable):
            raise TypeError(f"give a list of problems such as ['663+497', '5+5'], not {type(problems).__name__}")
        pairs = [parse_problem(p, self.cfg.n_digits) for p in problems]
        a = np.array([x for x, _ in pairs], dtype=np.int64)
        b = np.array([y for _, y in pairs], dtype=np.int64)
        return a, b

    def solve(self, problems: Sequence[str]) -> list[str]:
        """Batched greedy decoding: ["663+497", "5+5"] -> ["1160", "10"]."""
        a, b = self.parse(problems)
        if not len(a):
            return []
        with eval_threads(len(a)):
            return predict(self.model, a, b)

    def evaluate(self, a: np.ndarray | None = None, b: np.ndarray | None = None) -> dict:
        """Every metric on (a, b) — equal-length 1-D arrays (or lists) of whole numbers
        0 … 10**n_digits - 1; the committed held-out set by default."""
        if a is None and b is None:
            a, b = load_test_set()
        else:
            a, b = operands(a, "a", self.cfg.n_digits), operands(b, "b", self.cfg.n_digits)
            if len(a) != len(b):
                raise ValueError(f"a and b must be equally long, got {len(a)} and {len(b)} operands")
        with eval_threads(len(a)):
            return evaluate(self.model, a, b)

    @torch.no_grad()
    def run_with_cache(
        self,
        problems: Sequence[str],
        names: Sequence[str] | None = None,
        names_filter: Sequence[str] | str | Callable[[str], bool] | None = None,
    ) -> tuple[list[str], ActivationCache]:
        """The model's answers, and the activations (every hook point by default, or `names`, or
        `names_filter`: TransformerLens's keyword, a name, a list of names or a predicate on names)
        while it wrote them; the cache also holds the inputs "src" and "tgt" and token labels.

        The decoder is fed the model's own greedy output, so the decoder activations are
        exactly the ones it used to produce its answer (causality makes one pass enough).
        """
        answers, src, tgt, passes = self.cache_passes(problems, names, names_filter)
        # Each activation is written into its place in one tensor for all problems.
        cache = ActivationCache({})
        for rows, chunk in passes:
            for name, x in chunk.items():
                if name not in cache.store:
                    cache.store[name] = x.new_empty((len(src),) + x.shape[1:])
                cache.store[name][rows] = x
        cache.store["src"], cache.store["tgt"] = src, tgt
        cache.labels = {"enc": [tokens(row) for row in src.tolist()], "dec": [tokens(row) for row in tgt.tolist()]}
        return answers, cache

    @torch.no_grad()
    def cache_passes(
        self,
        problems: Sequence[str],
        names: Sequence[str] | None = None,
        names_filter: Sequence[str] | str | Callable[[str], bool] | None = None,
    ) -> tuple[list[str], torch.Tensor, torch.Tensor, Iterator[tuple[slice, dict]]]:
        """run_with_cache one pass of MEASURE_PASS problems at a time, for a measure that needs no
        whole cache (head_roles): (answers, src, tgt, passes); passes yields (rows, activations)
        per pass, the activations of problems[rows] by name."""
        a, b = self.parse(problems)
        src = encode_sources(a, b, self.cfg.n_digits, self.cfg.zero_pad).to(self.device)
        out = self.model.greedy(src)
        tgt = torch.cat([torch.full_like(out[:, :1], BOS), out[:, :-1]], dim=1)
        # Decoder inputs from the first </s> on (that </s> included) become padding: the answer had
        # ended with the output before it, and nothing the model wrote there is part of it.
        ended = (tgt == EOS).cumsum(dim=1) > 0
        tgt = tgt.masked_fill(ended, PAD)
        # The answers are decoded from `out`: a second greedy pass would double the cost.
        answers = [decode_digits(row, self.cfg.reverse_output) for row in out.cpu().tolist()]

        def passes() -> Iterator[tuple[slice, dict]]:
            # In chunks, as greedy decodes: one pass over 10,000 problems held every intermediate of
            # the whole batch at once (hundreds of MB a learner's kernel kept long after).
            for start in range(0, len(src), MEASURE_PASS):
                rows = slice(start, start + MEASURE_PASS)
                with torch.no_grad():  # not the decorator's: a generator runs after this method returned
                    _, chunk = self.model.run_with_cache(src[rows], tgt[rows], names=names, names_filter=names_filter)
                yield rows, chunk.store

        return answers, src.cpu(), tgt.cpu(), passes()

    def labels(self, cache: ActivationCache, index: int) -> tuple[list[str], list[str]]:
        """Token labels (source, decoder input) of sample `index` in a run_with_cache cache."""
        return tokens(cache["src"][index].tolist()), tokens(cache["tgt"][index].tolist())

    @contextmanager
    def ablate(self, heads: Sequence[str], mode: str = "zero") -> Iterator[Adder]:
        """Remove `heads` inside the block; the model is restored on exit, also on an exception.

        A removed head's z (its output before W_O) is replaced at every query position by 0
        ("zero") or by its mean over the held-out set ("mean", see evaluate.mean_z). Blocks nest.

        Threads: while a block is open, the model's lock is held (core/hooks.py), so another
        thread's solve / evaluate / run_with_cache on this model waits until the block closes
        and then sees the intact model; only code in the block's own thread sees the ablation."""
        if mode not in ABLATION_MODES:
            raise ValueError(f"mode must be one of {ABLATION_MODES}, not {mode!r}")
        fills = mean_z(self.model) if mode == "mean" else None
        with ablate_heads(self.model, heads, fills):
            yield self


def operands(x, name: str, n_digits: int) -> np.ndarray:
    """`x` as a 1-D int64 array of operands 0 … 10**n_digits - 1; TypeError/ValueError naming `name`."""
    if x is None:
        raise TypeError(f"{name} is missing: give both a and b, or neither (the held-out set)")
    if isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be an array of whole numbers, not {type(x).__name__}")
    arr = np.asarray(x)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise TypeError(f"{name} must hold whole numbers, not {arr.dtype} values")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one operand per problem), not of shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: there is nothing to evaluate")
    bad = (arr < 0) | (arr >= 10**n_digits)
    if bad.any():
        raise ValueError(
            f"{name}[{int(bad.argmax())}] = {arr[bad.argmax()]} is outside the operands "
            f"this model adds (0 … {10**n_digits - 1})"
        )
    return arr.astype(np.int64)


def adder_config_problems(cfg: Seq2SeqConfig) -> list[str]:
    """What is out of range in an adder config (the bounds are sanity checks, far above the kit's
    sizes, so that a bad file fails here and not deep in torch or after a huge allocation)."""
    found = out_of_range(
        cfg,
        (
            ("n_digits", 1, 9),
            ("d_model", 1, 4096),
            ("n_heads", 1, 64),
            ("n_enc_layers", 1, 48),
            ("n_dec_layers", 1, 48),
            ("d_ff", 1, 16384),
        ),
    )
    if not 0 <= cfg.dropout < 1:
        found.append(f"dropout = {cfg.dropout} is not in [0, 1)")
    return found


def train_pretrained(path: Path = CHECKPOINT, seed: int = 0) -> Adder:
    """Reproduce the committed checkpoint: `python -m attnkit train adder`. After an interruption
    the model (metrics["interrupted"] True) is saved beside `path`, never over it (train.py)."""
    from .snapshots import SNAPSHOT_STEPS
    from .train import AdderTrainConfig, train_adder

    result = train_adder(
        Seq2SeqConfig(),
        AdderTrainConfig(seed=seed),
        out_path=path,
        device=default_device(),
        snapshot_steps=SNAPSHOT_STEPS,
    )
    return Adder(result.model, result.metrics)
