"""The trained adder as learners and scripts use it: solve, look inside, ablate.

    adder = attnkit.load_pretrained("adder")
    adder.solve(["663+497", "5+5"])                 # ["1160", "10"]
    answers, cache = adder.run_with_cache(["663+497"])
    cache["dec.cross.1.hook_pattern"]               # (batch, heads, q_pos, k_pos)
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Iterator, Optional, Sequence

import numpy as np
import torch

from ..core.checkpoint import load_checkpoint, load_state
from ..core.hooks import ActivationCache, ablate_heads
from ..core.runtime import default_device
from .data import BOS, DATA_DIR, EOS, PAD, decode_digits, encode_sources, load_test_set, parse_problem, tokens
from .evaluate import evaluate, mean_z, predict
from .model import Seq2SeqConfig, Seq2SeqTransformer

CHECKPOINT = DATA_DIR / "adder.pt"
ABLATION_MODES = ("zero", "mean")


class Adder:
    def __init__(self, model: Seq2SeqTransformer, metrics: Optional[dict] = None):
        self.model = model.eval()
        self.cfg = model.cfg
        self.metrics = metrics or {}  # test metrics stored with the checkpoint

    @classmethod
    def load(cls, path: Path = CHECKPOINT, device: Optional[str] = None) -> "Adder":
        payload = load_checkpoint(path, kind="adder")
        try:
            cfg = Seq2SeqConfig(**payload["config"])
        except TypeError as e:
            raise ValueError(f"checkpoint {path} has an unknown config {payload['config']}: {e}") from e
        model = Seq2SeqTransformer(cfg)
        load_state(model, payload, path)
        return cls(model.to(device or default_device()), payload.get("metrics"))

    def save(self, path: Path, metrics: Optional[dict] = None) -> None:
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
        pairs = [parse_problem(p, self.cfg.n_digits) for p in problems]
        a = np.array([x for x, _ in pairs], dtype=np.int64)
        b = np.array([y for _, y in pairs], dtype=np.int64)
        return a, b

    def solve(self, problems: Sequence[str]) -> list[str]:
        """Batched greedy decoding: ["663+497", "5+5"] -> ["1160", "10"]."""
        a, b = self.parse(problems)
        return predict(self.model, a, b) if len(a) else []

    def evaluate(self, a: Optional[np.ndarray] = None, b: Optional[np.ndarray] = None) -> dict:
        """Every metric on (a, b); the committed held-out set by default."""
        if a is None:
            a, b = load_test_set()
        return evaluate(self.model, a, b)

    @torch.no_grad()
    def run_with_cache(self, problems: Sequence[str], names: Optional[Sequence[str]] = None
                       ) -> tuple[list[str], ActivationCache]:
        """The model's answers, and the activations (every hook point by default, or `names`)
        while it wrote them; the cache also holds the inputs "src" and "tgt" and token labels.

        The decoder is fed the model's own greedy output, so the decoder activations are
        exactly the ones it used to produce its answer (causality makes one pass enough).
        """
        a, b = self.parse(problems)
        src = encode_sources(a, b, self.cfg.n_digits, self.cfg.zero_pad).to(self.device)
        out = self.model.greedy(src)
        tgt = torch.cat([torch.full_like(out[:, :1], BOS), out[:, :-1]], dim=1)
        # Positions after the first </s> are padding: nothing was generated there.
        ended = (tgt == EOS).cumsum(dim=1) > 0
        tgt = tgt.masked_fill(ended, PAD)
        _, cache = self.model.run_with_cache(src, tgt, names=names)
        cache.store["src"], cache.store["tgt"] = src.cpu(), tgt.cpu()
        cache.labels = {"enc": [tokens(row) for row in src.tolist()], "dec": [tokens(row) for row in tgt.tolist()]}
        # The answers are decoded from `out`: a second greedy pass would double the cost.
        return [decode_digits(row, self.cfg.reverse_output) for row in out.cpu().tolist()], cache

    def labels(self, cache: ActivationCache, index: int) -> tuple[list[str], list[str]]:
        """Token labels (source, decoder input) of sample `index` in a run_with_cache cache."""
        return tokens(cache["src"][index].tolist()), tokens(cache["tgt"][index].tolist())

    @contextmanager
    def ablate(self, heads: Sequence[str], mode: str = "zero") -> Iterator["Adder"]:
        """Remove `heads` inside the block; the model is restored on exit, also on an exception.

        A removed head's z (its output before W_O) is replaced at every query position by 0
        ("zero") or by its mean over the held-out set ("mean", see evaluate.mean_z). Blocks nest;
        while one is open, other threads' use of this model waits (core/hooks.py)."""
        if mode not in ABLATION_MODES:
            raise ValueError(f"mode must be one of {ABLATION_MODES}, not {mode!r}")
        fills = mean_z(self.model) if mode == "mean" else None
        with ablate_heads(self.model, heads, fills):
            yield self


def train_pretrained(path: Path = CHECKPOINT) -> Adder:
    """Reproduce the committed checkpoint: `python -m attnkit train adder`."""
    from .train import AdderTrainConfig, train_adder
    result = train_adder(Seq2SeqConfig(), AdderTrainConfig(), out_path=path, device=default_device())
    return Adder(result.model)
