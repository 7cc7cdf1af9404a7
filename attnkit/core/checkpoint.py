"""Checkpoints and result files: written atomically, loaded safely, checked loudly."""
from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

FORMAT_VERSION = 1
# the committed checkpoints and results; ATTNKIT_DATA_DIR points elsewhere (tests swap in broken models)
DATA_DIR = Path(os.environ.get("ATTNKIT_DATA_DIR") or Path(__file__).resolve().parents[2] / "data")


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


def save_json(path: Path, obj: Any) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(obj, indent=1) + "\n"))


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


def save_checkpoint(path: Path, kind: str, config: dict, state_dict: dict, metrics: dict) -> None:
    """Atomically, and byte for byte the same whenever the payload is the same: the archive is
    built in memory (torch.save names its inner folder after the file, and the temporary
    file's name is random)."""
    payload = {"format_version": FORMAT_VERSION, "kind": kind, "config": _interned(config),
               "state_dict": {sys.intern(k): v for k, v in state_dict.items()}, "metrics": _interned(metrics)}
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(buffer.getvalue()))


def load_checkpoint(path: Path, kind: str) -> dict:
    """The checkpoint's dict; ValueError if it is missing, corrupt or of another kind."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, not a zip, or holds non-tensor objects
        raise ValueError(f"checkpoint {path} is corrupt or not an attnkit checkpoint: {e}") from e
    if not isinstance(payload, dict) or payload.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"checkpoint {path} is not an attnkit checkpoint (format {FORMAT_VERSION})")
    if payload.get("kind") != kind:
        raise ValueError(f"checkpoint {path} holds a {payload.get('kind')!r} model, not {kind!r}")
    return payload


def load_state(model: torch.nn.Module, payload: dict, path: Path) -> None:
    """load_state_dict with an error that says which config the checkpoint belongs to."""
    try:
        model.load_state_dict(payload["state_dict"])
    except RuntimeError as e:
        raise ValueError(
            f"checkpoint {path} does not fit this model's config: it was saved with "
            f"{payload.get('config')}. {str(e).splitlines()[0]}"
        ) from e
