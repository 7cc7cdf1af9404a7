"""The committed classifiers and results in data/: where they live and how they load."""
from __future__ import annotations

import json
from pathlib import Path

from ..core.checkpoint import DATA_DIR, check_metrics, config_from, load_checkpoint, load_state, out_of_range
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


def classifier_config_problems(cfg: SortednessConfig) -> list[str]:
    """What is out of range in a sortedness config (sanity bounds, far above the kit's sizes)."""
    found = out_of_range(cfg, (("d_model", 1, 4096), ("n_heads", 1, 64), ("n_layers", 1, 48), ("d_ff", 1, 16384),
                               ("max_len", 1, 1 << 16), ("n_exact", 0, 1024)))
    if not found and cfg.encoding == "rope" and (cfg.d_model // cfg.n_heads) % 2:
        found.append(f"rope needs an even d_head, not {cfg.d_model // cfg.n_heads}")
    return found


def load_classifier(encoding: str, data_dir: Path = DATA_DIR, device: str = "cpu") -> SortednessClassifier:
    """The committed classifier for one encoding (trained with seed 0). ValueError when the file
    is corrupt, of another task or encoding, has a bad config or NaN weights; CheckpointWarning
    when it is marked interrupted."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; choose one of {ENCODINGS}")
    path = checkpoint_path(encoding, data_dir)
    payload = load_checkpoint(path, KIND)
    cfg = config_from(SortednessConfig, payload["config"], path, classifier_config_problems)
    if cfg.encoding != encoding:
        raise ValueError(f"checkpoint {path} holds a {cfg.encoding!r} classifier, not {encoding!r}")
    model = SortednessClassifier(cfg)
    load_state(model, payload, path)
    model.metrics = payload["metrics"]  # validation and test accuracies of this very model
    check_metrics(model.metrics, path)
    return model.to(device).eval()
