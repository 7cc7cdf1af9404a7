"""Checkpoints and result files: written atomically (several files as one unit), loaded safely
(no pickled code runs), checked loudly (every config key, type and range; finite weights)."""
from __future__ import annotations

import dataclasses
import glob
import io
import json
import math
import os
import sys
import tempfile
import typing
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from ..resources import data_dir

FORMAT_VERSION = 1
# the committed checkpoints and results; ATTNKIT_DATA_DIR points elsewhere (tests swap in broken models)
DATA_DIR = data_dir()


def atomic_write(path: Path, write) -> None:
    """Call write(tmp_path), then rename over `path`: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a committed data file is world-readable
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# Saving several files as one unit (a checkpoint and its report) -------------------------------
# Each file is written in full to a temporary file beside it; then a small journal listing the
# renames is put in place (the commit point) and the renames are done, the primary file last.
# A kill before the journal exists leaves every old file as it was (the orphaned temporaries are
# removed by the next save); a kill after it is rolled forward by the next load or save. So no kill
# leaves a new .pt beside an old .json. One writer per path: two processes saving the same file
# at once are not supported (each would remove the other's temporaries).

def _journal(primary: Path) -> Path:
    return primary.parent / f".{primary.name}.commit"


def _roll_forward(journal: Path) -> None:
    """Finish the renames a journal lists (those already done are skipped), then drop it."""
    try:
        renames = json.loads(journal.read_text())
    except (OSError, ValueError):
        renames = []  # unreadable: the journal is written atomically, so this is another program's file
    for tmp, final in renames:
        try:
            os.replace(tmp, final)
        except FileNotFoundError:
            pass  # renamed already, before the kill
    journal.unlink(missing_ok=True)


def finish_interrupted_save(primary: Path) -> bool:
    """Roll forward a save of `primary` that was killed between its renames; True if there was one."""
    journal = _journal(Path(primary))
    if not journal.exists():
        return False
    _roll_forward(journal)
    return True


def _remove_orphans(path: Path) -> None:
    """Temporaries of `path` left by a killed save (before its commit point)."""
    for orphan in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        orphan.unlink(missing_ok=True)


def write_together(files: list[tuple[Path, bytes]]) -> None:
    """Write every (path, bytes) as one unit: all new or all old, whatever kills the process.
    The last file is the primary one (the checkpoint), renamed last."""
    files = [(Path(p), data) for p, data in files]
    primary = files[-1][0]
    finish_interrupted_save(primary)
    for path, _ in files:
        _remove_orphans(path)
    journal, tmps = _journal(primary), []
    try:
        for path, data in files:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            tmps.append(tmp)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())  # on disk before the journal says "rename it"
            os.chmod(tmp, 0o644)  # mkstemp creates 0600; a committed data file is world-readable
        renames = [[tmp, str(path)] for tmp, (path, _) in zip(tmps, files)]
        atomic_write(journal, lambda t: Path(t).write_text(json.dumps(renames)))  # the commit point
        _roll_forward(journal)
    finally:
        if journal.exists():   # interrupted after the commit point: finish, never half-undo
            _roll_forward(journal)
        for tmp in tmps:       # interrupted before it: the old files stay, the new ones go
            if os.path.exists(tmp):
                os.remove(tmp)


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


def checkpoint_bytes(kind: str, config: dict, state_dict: dict, metrics: dict) -> bytes:
    """The archive, built in memory: byte for byte the same whenever the payload is the same
    (torch.save names its inner folder after the file, and a temporary file's name is random)."""
    payload = {"format_version": FORMAT_VERSION, "kind": kind, "config": _interned(config),
               "state_dict": {sys.intern(k): v for k, v in state_dict.items()}, "metrics": _interned(metrics)}
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getvalue()


def save_checkpoint(path: Path, kind: str, config: dict, state_dict: dict, metrics: dict,
                    report: Optional[tuple[Path, Any]] = None) -> None:
    """Atomically; with `report` (path, JSON object), the checkpoint and its report as one unit."""
    files = [(report[0], json_bytes(report[1]))] if report else []
    write_together(files + [(path, checkpoint_bytes(kind, config, state_dict, metrics))])


class CheckpointWarning(UserWarning):
    """A checkpoint that loads but should not be trusted as is (interrupted, below target)."""


def load_checkpoint(path: Path, kind: str) -> dict:
    """The checkpoint's dict; ValueError if it is missing a part, corrupt or of another kind."""
    path = Path(path)
    if _journal(path).exists():
        try:
            finish_interrupted_save(path)
        except OSError as e:  # e.g. a read-only folder: the old checkpoint is still whole
            warnings.warn(f"a save of {path} was interrupted and cannot be finished ({e}); "
                          "loading the previous checkpoint", CheckpointWarning, stacklevel=2)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a checkpoint file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, not a zip, or holds non-tensor objects
        raise ValueError(f"checkpoint {path} is corrupt or not an attnkit checkpoint: {e}") from e
    if not isinstance(payload, dict) or payload.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"checkpoint {path} is not an attnkit checkpoint (format {FORMAT_VERSION})")
    if payload.get("kind") != kind:
        raise ValueError(f"checkpoint {path} holds a {payload.get('kind')!r} model, not {kind!r}")
    for key, typ in (("config", dict), ("state_dict", dict), ("metrics", dict)):
        if not isinstance(payload.get(key), typ):
            raise ValueError(f"checkpoint {path} has no {key!r} dict (found {type(payload.get(key)).__name__})")
    return payload


def config_from(cls, raw: dict, path: Path, problems: Callable[[Any], list[str]] = lambda cfg: []):
    """cls(**raw), after checking that every field is present with its annotated type (bool,
    int, float, str or a Literal's values) and that `problems(cfg)` finds nothing wrong."""
    names = [f.name for f in dataclasses.fields(cls)]
    unknown, missing = sorted(set(raw) - set(names)), [n for n in names if n not in raw]
    if unknown:
        raise ValueError(f"checkpoint {path} has an unknown config key {unknown}; "
                         f"{cls.__name__} has {names}")
    if missing:
        raise ValueError(f"checkpoint {path}: its config lacks {missing}")
    hints = typing.get_type_hints(cls)
    for name in names:
        if not _has_type(raw[name], hints[name]):
            raise ValueError(f"checkpoint {path}: config {name} = {raw[name]!r} is not a valid "
                             f"{_type_name(hints[name])}")
    cfg = cls(**raw)
    found = problems(cfg)
    if found:
        raise ValueError(f"checkpoint {path}: config {'; '.join(found)}")
    return cfg


def out_of_range(cfg, bounds) -> list[str]:
    """The config fields outside their (name, lo, hi) bounds, and d_model not divisible by n_heads
    (the sanity checks every model's config shares)."""
    found = [f"{name} = {getattr(cfg, name)} is not in {lo} … {hi}" for name, lo, hi in bounds
             if not lo <= getattr(cfg, name) <= hi]
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
            f"checkpoint {path} does not fit this model's config: it was saved with "
            f"{payload.get('config')}. {detail}"
        ) from e


def check_metrics(metrics: dict, path: Path, target: Optional[float] = None) -> None:
    """Warn loudly about a checkpoint marked interrupted or measured below `target` exact match."""
    if metrics.get("interrupted"):
        warnings.warn(f"checkpoint {path} is from an interrupted training run (step "
                      f"{metrics.get('steps', '?')}): it is not a finished model", CheckpointWarning, stacklevel=3)
    score = metrics.get("exact_match")
    if target is not None and isinstance(score, (int, float)) and score < target:
        warnings.warn(f"checkpoint {path} scored {score:.4f} exact match on its test set, below the "
                      f"target {target}: its answers are often wrong", CheckpointWarning, stacklevel=3)
