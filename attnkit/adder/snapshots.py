"""Snapshots of the adder's training run, so that notebook 07 can replay how it learned.

    snaps = attnkit.load_snapshots("adder")
    snaps.steps            # [0, 10, 20, ..., 400]: the training steps they were taken at
    snaps[3]               # an Adder with the weights after step snaps.steps[3] (built when asked for)
    snaps[-1]              # the committed adder itself: data/adder.pt

`python -m attnkit train adder` writes data/adder-snapshots.pt together with data/adder.pt (one
unit: core/journal.py). It holds the weights at every step of SNAPSHOT_STEPS the run reached,
in float16 to halve the wheel's data (a replay measures these rounded weights, and says so), and
the digest of the final weights: the last snapshot is not stored twice, it is the checkpoint, and
loading refuses a snapshot file that belongs to another checkpoint.

A snapshot's Adder is kept only while something uses it (a weak reference): building one takes
about 7 ms, holding all of them 1 MB each, which a learner's kernel paid twice in notebook 07
(its own snapshots and the progress checker's).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch

from ..core.checkpoint import load_checkpoint
from .data import DATA_DIR
from .model import Seq2SeqConfig, Seq2SeqTransformer

KIND = "adder-snapshots"
# Dense early, where the loss falls fastest and the sums come in; sparser once it is learned.
SNAPSHOT_STEPS = (0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 225, 250, 300, 350, 400, 450, 500, 600, 800, 1000)
STORED_DTYPE = torch.float16


def snapshots_path(checkpoint: Path) -> Path:
    """data/adder.pt -> data/adder-snapshots.pt"""
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(f"{checkpoint.stem}-snapshots{checkpoint.suffix}")


def weights_digest(state: dict[str, torch.Tensor]) -> str:
    """sha256 of a state dict's names and float32 bytes: ties the snapshots to their checkpoint."""
    import hashlib

    h = hashlib.sha256()
    for name, t in sorted(state.items()):
        h.update(name.encode())
        h.update(t.detach().cpu().float().contiguous().numpy().tobytes())
    return h.hexdigest()


def stored(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict as a snapshot keeps it (float16 copies)."""
    return {name: t.detach().to("cpu", STORED_DTYPE, copy=True) for name, t in state.items()}


def snapshot_payload(
    model_cfg: Seq2SeqConfig, taken: list[tuple[int, dict]], final_step: int, final_state: dict
) -> tuple[dict, dict, dict]:
    """(config, state_dict, metrics) of the snapshot file: the snapshots taken before final_step
    (later ones belong to no saved model) and the digest of the final weights."""
    earlier = [(step, state) for step, state in taken if step < final_step]
    weights = {f"step{step}.{name}": t for step, state in earlier for name, t in state.items()}
    metrics = {"steps": [step for step, _ in earlier] + [final_step], "final_weights": weights_digest(final_state)}
    return asdict(model_cfg), weights, metrics


class Snapshots(Sequence):
    """The snapshots of one training run, oldest first; each an Adder built when asked for and kept
    while it is in use (the final one, the checkpoint, always)."""

    def __init__(self, checkpoint: Path | None = None, device: str | None = None):
        from .pretrained import CHECKPOINT, Adder

        checkpoint = Path(checkpoint or CHECKPOINT)
        path = snapshots_path(checkpoint)
        payload = load_checkpoint(path, kind=KIND)
        self.final = Adder.load(checkpoint, device)
        if payload["config"] != asdict(self.final.cfg):
            raise ValueError(f"{path} holds snapshots of a model with another config than {checkpoint}")
        steps = payload["metrics"].get("steps")
        if not (
            isinstance(steps, list)
            and steps
            and all(isinstance(s, int) and not isinstance(s, bool) for s in steps)
            and steps == sorted(set(steps))
            and steps[0] >= 0
        ):
            raise ValueError(f"{path}: its steps {steps!r} are not increasing training steps (the file was edited)")
        if payload["metrics"].get("final_weights") != weights_digest(self.final.model.state_dict()):
            raise ValueError(
                f"{path} belongs to another checkpoint than {checkpoint} (the final weights differ): "
                "retrain both with python -m attnkit train adder"
            )
        names = list(self.final.model.state_dict())
        expected = {f"step{step}.{name}" for step in steps[:-1] for name in names}
        if set(payload["state_dict"]) != expected:
            raise ValueError(f"{path}: its weights do not match its steps {steps} (the file was edited)")
        self.path, self.final_path, self.steps, self.device = path, checkpoint, steps, self.final.device
        self._weights, self._names = payload["state_dict"], names
        self._built: weakref.WeakValueDictionary = weakref.WeakValueDictionary({len(steps) - 1: self.final})

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i):  # an Adder (a list of them for a slice)
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"snapshots are indexed by position (0 … {len(self) - 1}), not {type(i).__name__}")
        if not -len(self) <= i < len(self):
            raise IndexError(f"snapshot {i} of {len(self)} (steps {self.steps[0]} … {self.steps[-1]})")
        i %= len(self)
        adder = self._built.get(i)  # one lookup: an entry can vanish between two
        if adder is None:
            adder = self._built[i] = self._build(i)
        return adder

    def at_step(self, step: int):
        """The snapshot taken after training step `step` (ValueError naming the steps there are)."""
        if step not in self.steps:
            raise ValueError(f"no snapshot at step {step}: the snapshots are at steps {self.steps}")
        return self[self.steps.index(step)]

    def _build(self, i: int):
        from .pretrained import Adder

        step = self.steps[i]
        model = Seq2SeqTransformer(self.final.cfg)
        state = {name: self._weights[f"step{step}.{name}"].float() for name in self._names}
        model.load_state_dict(state)
        return Adder(model.to(self.device), {"step": step})

    def __repr__(self) -> str:
        return f"Snapshots({len(self)} of {self.path.name}: steps {self.steps})"


def load_snapshots(checkpoint: Path | None = None) -> Snapshots:
    return Snapshots(checkpoint or DATA_DIR / "adder.pt")
