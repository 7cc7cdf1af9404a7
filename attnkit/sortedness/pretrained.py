"""The committed classifiers and results in data/: where they live and how they load."""
from __future__ import annotations

import json
from pathlib import Path

from ..core.checkpoint import DATA_DIR, load_checkpoint, load_state
from ..core.positional import ENCODINGS
from .model import SortednessClassifier, SortednessConfig

RESULTS_PATH = DATA_DIR / "sortedness_results.json"
SEEDS = (0, 1, 2)
KIND = "sortedness"  # checkpoint kind, checked on load


def checkpoint_path(encoding: str, data_dir: Path = DATA_DIR) -> Path:
    return Path(data_dir) / f"sortedness-{encoding}.pt"


def _int_keys(obj):
    """JSON turns the length keys into strings; give them back as ints."""
    if isinstance(obj, dict):
        return {int(k) if isinstance(k, str) and k.isdigit() else k: _int_keys(v) for k, v in obj.items()}
    return obj


def load_results(path: Path = RESULTS_PATH) -> dict:
    """The committed results: results["encodings"]["relative"]["hard"][256]["mean"]."""
    import json
    return _int_keys(json.loads(Path(path).read_text()))


def load_classifier(encoding: str, data_dir: Path = DATA_DIR, device: str = "cpu") -> SortednessClassifier:
    """The committed classifier for one encoding (trained with seed 0)."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; choose one of {ENCODINGS}")
    path = checkpoint_path(encoding, data_dir)
    payload = load_checkpoint(path, KIND)
    model = SortednessClassifier(SortednessConfig(**payload["config"]))
    load_state(model, payload, path)
    model.metrics = payload["metrics"]  # validation and test accuracies of this very model
    return model.to(device).eval()
