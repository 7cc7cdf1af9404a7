"""Checkpoints and result files: written atomically (several files as one unit), loaded safely
(no pickled code runs), checked loudly (every config key, type and range; finite weights)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import stat
import sys
import typing
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from ..resources import data_dir
from . import journal

FORMAT_VERSION = 1
# the committed checkpoints and results; ATTNKIT_DATA_DIR points elsewhere (tests swap in broken models)
DATA_DIR = data_dir()


# Saving several files as one unit (a checkpoint and its report): core/journal.py.
write_together = journal.write_together
JournalRefused = journal.JournalRefused


def finish_interrupted_save(primary: Path) -> bool:
    """Roll forward a save of `primary` that was killed between its renames; True if there was one.
    JournalRefused for a journal attnkit did not write (nothing is renamed)."""
    primary = Path(primary)
    with journal.folder_lock(primary.parent):
        return journal.roll_forward(primary)


def json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1) + "\n").encode()


def save_json(path: Path, obj: Any) -> None:
    write_together([(path, json_bytes(obj))])


def _interned(obj: Any) -> Any:
    """The same structure with every string interned. Pickle writes a string once and refers back
    to it when the *same object* recurs, so equal payloads built differently (e.g. in a worker
    process) would give different bytes; interned, equal strings are one object."""
    if isinstance(obj, str):
        return sys.intern(obj)
    if isinstance(obj, dict):
        return {_interned(k): _interned(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_interned(x) for x in obj)
    return obj


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(obj: Any) -> bytes:
    """One byte string per structure: keys tagged with their type (32 and "32" differ) and sorted."""

    def tagged(x: Any) -> Any:
        if isinstance(x, dict):
            return {f"{type(k).__name__}:{k}": tagged(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [tagged(v) for v in x]
        return x

    return json.dumps(tagged(obj), sort_keys=True, separators=(",", ":"), default=repr).encode()


def _tensor_digest(t: torch.Tensor) -> str:
    t = t.detach().cpu().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return _digest(f"{t.dtype}{tuple(t.shape)}".encode() + raw)


def checksum(config: dict, state_dict: dict, metrics: dict) -> dict:
    """SHA-256 of the config, of the metrics and of each weight (its dtype, shape and bytes):
    separate, so that a mismatch can say which part was changed."""
    return {
        "config": _digest(_canonical(config)),
        "metrics": _digest(_canonical(metrics)),
        "weights": {
            name: _tensor_digest(v) if isinstance(v, torch.Tensor) else "not a tensor" for name, v in state_dict.items()
        },
    }


def checkpoint_bytes(kind: str, config: dict, state_dict: dict, metrics: dict) -> bytes:
    """The archive, built in memory: byte for byte the same whenever the payload is the same
    (torch.save names its inner folder after the file, and a temporary file's name is random).
    It carries a checksum of config, metrics and weights, verified on load."""
    payload = {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "config": _interned(config),
        "state_dict": {sys.intern(k): v for k, v in state_dict.items()},
        "metrics": _interned(metrics),
        "checksum": _interned(checksum(config, state_dict, metrics)),
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getvalue()


def save_checkpoint(
    path: Path,
    kind: str,
    config: dict,
    state_dict: dict,
    metrics: dict,
    report: tuple[Path, Any] | None = None,
    beside: Sequence[tuple[Path, bytes]] = (),
) -> None:
    """Atomically; with `report` (path, JSON object) and `beside` (more files: path, bytes), the
    checkpoint and those as one unit (the checkpoint renamed last)."""
    files = [(report[0], json_bytes(report[1]))] if report else []
    write_together(files + list(beside) + [(path, checkpoint_bytes(kind, config, state_dict, metrics))])


class CheckpointWarning(UserWarning):
    """A checkpoint that loads but should not be trusted as is (interrupted, below target)."""


def _read_payload(path: Path) -> dict:
    """The archive's dict, read without running pickled code; ValueError for anything else."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint at {path}") from None
    if stat.S_ISDIR(mode):
        raise ValueError(f"{path} is a directory, not a checkpoint file")
    if not stat.S_ISREG(mode):  # a named pipe would block the read forever, a device never end
        raise ValueError(f"{path} is not a regular file (a named pipe, socket or device): not a checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, not a zip, or holds non-tensor objects
        raise ValueError(f"checkpoint {path} is corrupt or not an attnkit checkpoint: {e}") from e
    if not isinstance(payload, dict) or payload.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"checkpoint {path} is not an attnkit checkpoint (format {FORMAT_VERSION})")
    return payload


def verify_checksum(payload: dict, path: Path) -> None:
    """ValueError naming what changed since the file was saved: its config, metrics or a weight."""
    stored = payload.get("checksum")
    if stored is None:
        raise ValueError(
            f"checkpoint {path} has no checksum: it was saved by an older attnkit or edited. "
            f"If you trust it, re-save it: python -m attnkit.core.checkpoint {path}"
        )
    if not (isinstance(stored, dict) and isinstance(stored.get("weights"), dict)):
        raise ValueError(f"checkpoint {path}: its checksum is malformed (the file was edited)")
    now = checksum(payload["config"], payload["state_dict"], payload["metrics"])
    for part in ("config", "metrics"):
        if stored.get(part) != now[part]:
            raise ValueError(
                f"checkpoint {path}: its {part} was changed after it was saved "
                f"(checksum mismatch); the file cannot be trusted"
            )
    if set(stored["weights"]) != set(now["weights"]):
        diff = sorted(set(stored["weights"]) ^ set(now["weights"]))[:3]
        raise ValueError(f"checkpoint {path}: weights were added or removed after it was saved ({diff})")
    changed = [name for name in now["weights"] if stored["weights"][name] != now["weights"][name]]
    if changed:
        raise ValueError(
            f"checkpoint {path}: weight {changed[0]!r} was changed after it was saved (checksum "
            f"mismatch{f', and {len(changed) - 1} more' if len(changed) > 1 else ''}); "
            "the file is damaged or edited"
        )


def load_checkpoint(path: Path, kind: str) -> dict:
    """The checkpoint's dict; ValueError if it is missing a part, corrupt, edited (its checksum)
    or of another kind. A save of it that was killed between renames is finished first."""
    path = Path(path)
    if os.path.lexists(journal.journal_path(path)):
        try:
            finish_interrupted_save(path)
        except JournalRefused as e:
            warnings.warn(
                f"{e}: it was ignored (nothing renamed); delete it if you do not know where it came from",
                CheckpointWarning,
                stacklevel=2,
            )
        except OSError as e:  # e.g. a read-only folder: the old checkpoint is still whole
            warnings.warn(
                f"a save of {path} was interrupted and cannot be finished ({e}); loading the previous checkpoint",
                CheckpointWarning,
                stacklevel=2,
            )
    payload = _read_payload(path)
    if payload.get("kind") != kind:
        raise ValueError(f"checkpoint {path} holds a {payload.get('kind')!r} model, not {kind!r}")
    for key, typ in (("config", dict), ("state_dict", dict), ("metrics", dict)):
        if not isinstance(payload.get(key), typ):
            raise ValueError(f"checkpoint {path} has no {key!r} dict (found {type(payload.get(key)).__name__})")
    verify_checksum(payload, path)
    return payload


def resave(path: Path) -> None:
    """Re-save a trusted checkpoint of an older attnkit with a checksum: the same kind, config,
    weights (byte for byte) and metrics. Refuses a file whose checksum is there and wrong."""
    path = Path(path)
    payload = _read_payload(path)
    if "checksum" in payload:
        verify_checksum(payload, path)
    kind, config, weights, metrics = (payload.get(key) for key in ("kind", "config", "state_dict", "metrics"))
    if not (
        isinstance(kind, str) and isinstance(config, dict) and isinstance(weights, dict) and isinstance(metrics, dict)
    ):
        raise ValueError(f"checkpoint {path} lacks a kind, config, state_dict or metrics")
    write_together([(path, checkpoint_bytes(kind, config, weights, metrics))])


def config_from(cls, raw: dict, path: Path, problems: Callable[[Any], list[str]] = lambda cfg: []):
    """cls(**raw), after checking that every field is present with its annotated type (bool,
    int, float, str or a Literal's values) and that `problems(cfg)` finds nothing wrong."""
    names = [f.name for f in dataclasses.fields(cls)]
    unknown, missing = sorted(set(raw) - set(names)), [n for n in names if n not in raw]
    if unknown:
        raise ValueError(f"checkpoint {path} has an unknown config key {unknown}; {cls.__name__} has {names}")
    if missing:
        raise ValueError(f"checkpoint {path}: its config lacks {missing}")
    hints = typing.get_type_hints(cls)
    for name in names:
        if not _has_type(raw[name], hints[name]):
            raise ValueError(
                f"checkpoint {path}: config {name} = {raw[name]!r} is not a valid {_type_name(hints[name])}"
            )
    cfg = cls(**raw)
    found = problems(cfg)
    if found:
        raise ValueError(f"checkpoint {path}: config {'; '.join(found)}")
    return cfg


def out_of_range(cfg, bounds) -> list[str]:
    """The config fields outside their (name, lo, hi) bounds, and d_model not divisible by n_heads
    (the sanity checks every model's config shares)."""
    found = [
        f"{name} = {getattr(cfg, name)} is not in {lo} … {hi}"
        for name, lo, hi in bounds
        if not lo <= getattr(cfg, name) <= hi
    ]
    if not found and cfg.d_model % cfg.n_heads:
        found.append(f"d_model = {cfg.d_model} is not divisible by n_heads = {cfg.n_heads}")
    return found


def _has_type(value: Any, hint: Any) -> bool:
    if typing.get_origin(hint) is typing.Literal:
        return any(type(value) is type(v) and value == v for v in typing.get_args(hint))
    if hint is bool:
        return type(value) is bool
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    return True


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(hint)))
    return getattr(hint, "__name__", str(hint))


def load_state(model: torch.nn.Module, payload: dict, path: Path) -> None:
    """load_state_dict, after checking every weight is a finite tensor, with an error that says
    which config the checkpoint belongs to."""
    for name, value in payload["state_dict"].items():
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"checkpoint {path}: weight {name!r} is a {type(value).__name__}, not a tensor")
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise ValueError(f"checkpoint {path}: weight {name!r} holds NaN or infinite values")
    try:
        model.load_state_dict(payload["state_dict"])
    except RuntimeError as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        detail = " ".join(lines[1:3] or lines[:1])[:500]  # the first missing/mismatched weights, not all 50
        raise ValueError(
            f"checkpoint {path} does not fit this model's config: it was saved with {payload.get('config')}. {detail}"
        ) from e


def check_metrics(metrics: dict, path: Path, target: float | None = None) -> None:
    """Warn loudly about a checkpoint marked interrupted or measured below `target` exact match."""
    if metrics.get("interrupted"):
        warnings.warn(
            f"checkpoint {path} is from an interrupted training run (step "
            f"{metrics.get('steps', '?')}): it is not a finished model",
            CheckpointWarning,
            stacklevel=3,
        )
    score = metrics.get("exact_match")
    if target is not None and isinstance(score, (int, float)) and score < target:
        warnings.warn(
            f"checkpoint {path} scored {score:.4f} exact match on its test set, below the "
            f"target {target}: its answers are often wrong",
            CheckpointWarning,
            stacklevel=3,
        )


if __name__ == "__main__":  # python -m attnkit.core.checkpoint FILE.pt ...: add checksums
    for name in sys.argv[1:]:
        resave(Path(name))
        print(f"re-saved {name} with a checksum")
