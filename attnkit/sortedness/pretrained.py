"""The committed classifiers and results in data/: where they live and how they load."""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..core.checkpoint import DATA_DIR, check_metrics, config_from, load_checkpoint, load_state, out_of_range
from ..core.positional import ENCODINGS, as_encoding
from .data import TRAIN_LENGTHS, labelled_set
from .model import SortednessClassifier, SortednessConfig

RESULTS_PATH = DATA_DIR / "sortedness_results.json"
SEEDS = (0, 1, 2)
KIND = "sortedness"  # checkpoint kind, checked on load
RUNS_FOLDER = "sortedness-runs"  # every run but the six seed-0 classifiers: seeds 1-2 and the variants
# Trained with the first seed only, beside the max-pool runs of every encoding.
VARIANTS = {
    "readout-mean": SortednessConfig(encoding="relative", readout="mean"),
    "readout-first": SortednessConfig(encoding="relative", readout="first"),
    "learned-random-init": SortednessConfig(encoding="learned", learned_init="random"),
}


def checkpoint_path(encoding: str, data_dir: Path = DATA_DIR) -> Path:
    return Path(data_dir) / f"sortedness-{encoding}.pt"


def run_config(name: str) -> SortednessConfig:
    """The config of one run of the experiment: an encoding (max-pool readout) or a variant."""
    if name in ENCODINGS:
        return SortednessConfig(encoding=as_encoding(name))
    if name in VARIANTS:
        return VARIANTS[name]
    raise ValueError(f"unknown run {name!r}; choose an encoding {ENCODINGS} or a variant {tuple(VARIANTS)}")


def run_path(name: str, seed: int, data_dir: Path = DATA_DIR) -> Path:
    """Where the experiment keeps a run's checkpoint: the seed-0 classifier of each encoding in
    data/ (the ones the notebooks load), every other run in data/sortedness-runs/."""
    run_config(name)  # a known run
    if name in ENCODINGS and seed == SEEDS[0]:
        return checkpoint_path(name, data_dir)
    return Path(data_dir) / RUNS_FOLDER / f"{name}-seed{seed}.pt"


def all_runs() -> list[tuple[str, int]]:
    """(name, seed) of every run in the committed results, in the experiment's order."""
    return [(enc, seed) for enc in ENCODINGS for seed in SEEDS] + [(name, SEEDS[0]) for name in VARIANTS]


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
    found = out_of_range(
        cfg,
        (
            ("d_model", 1, 4096),
            ("n_heads", 1, 64),
            ("n_layers", 1, 48),
            ("d_ff", 1, 16384),
            ("max_len", 1, 1 << 16),
            ("n_exact", 0, 1024),
        ),
    )
    if not found and cfg.encoding == "rope" and (cfg.d_model // cfg.n_heads) % 2:
        found.append(f"rope needs an even d_head, not {cfg.d_model // cfg.n_heads}")
    return found


def _load(path: Path, device: str) -> SortednessClassifier:
    payload = load_checkpoint(path, KIND)
    cfg = config_from(SortednessConfig, payload["config"], path, classifier_config_problems)
    model = SortednessClassifier(cfg)
    load_state(model, payload, path)
    model.metrics = payload["metrics"]  # validation and test accuracies of this very model
    passed = json.dumps(payload["checksum"], sort_keys=True)  # config, metrics and weights, verified
    if passed not in _PASSED:  # a file loaded again (notebooks do) is checked once per process
        check_behaviour(model.eval(), path)
        _PASSED.add(passed)
    check_metrics(model.metrics, path)
    return model.to(device).eval()


# The load-time check: a fixed sample like the validation set (sorted rows and one-swap negatives,
# lengths 8–16) and one at length 64, where the relative schemes' far-offset settings show.
CHECK_LENGTH, CHECK_ROWS = 64, 256  # rows per class in range; half as many at CHECK_LENGTH
_PASSED: set = set()  # checksums of the files whose behaviour was checked
CHECK_SLACK = 0.08  # below the stored accuracy by more: refused (seeds, CPUs move it ~0.02)


@functools.lru_cache(maxsize=1)
def _check_sets() -> list[tuple[object, list, np.ndarray]]:
    rng = np.random.default_rng(12345)
    rows, labels = [], []
    for length in TRAIN_LENGTHS:
        r, y, _ = labelled_set(rng, CHECK_ROWS // len(TRAIN_LENGTHS), CHECK_ROWS // len(TRAIN_LENGTHS), 0, length)
        rows += r
        labels.append(y)
    half = CHECK_ROWS // 2
    long_rows, long_y, _ = labelled_set(rng, half, half, 0, CHECK_LENGTH)
    return [("val", rows, np.concatenate(labels)), (CHECK_LENGTH, long_rows, long_y)]


def _balanced_accuracy(model: SortednessClassifier, rows, labels: np.ndarray) -> float:
    right = (model.probabilities(rows) > 0.5) == (labels > 0.5)
    return float((right[labels > 0.5].mean() + right[labels < 0.5].mean()) / 2)


def _shortfall(model: SortednessClassifier, metrics: dict, path: Path) -> str | None:
    """None, or how the model falls short of its stored hard-negative accuracies on the check sets."""
    stored = {
        "val": (metrics.get("val") or {}).get("hard") if isinstance(metrics.get("val"), dict) else None,
        CHECK_LENGTH: (metrics.get("hard") or {}).get(CHECK_LENGTH) if isinstance(metrics.get("hard"), dict) else None,
    }
    for where, rows, labels in _check_sets():
        value = stored[where]
        key = "val.hard" if where == "val" else f"hard[{where}]"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(
                f"checkpoint {path}: its metrics hold {key} = {value!r}, not an accuracy 0 … 1 "
                "(the kit always stores one): the file was edited"
            )
        if model.length_cap < max(len(r) for r in rows):
            continue
        quick = _balanced_accuracy(model, rows, labels)
        if quick < value - CHECK_SLACK:
            return f"it scores {quick:.3f} on a check sample where its metrics say {key} = {value:.3f}"
    return None


# The config fields a hand edit can flip without changing any weight's shape.
FLIPPABLE = {
    "readout": ("max", "mean", "first"),
    "far_as_one": (True, False),
    "alibi_directional": (True, False),
    "encoding": ("sinusoidal", "none", "alibi", "rope", "relative"),
    "n_exact": tuple(range(1, 9)),
}


def check_behaviour(model: SortednessClassifier, path: Path) -> None:
    """ValueError when the classifier does not do what its stored metrics say (about 0.1 s): the
    config disagrees with the weights (the message names the field) or the metrics were edited."""
    metrics = model.metrics
    wrong = _shortfall(model, metrics, path)
    if wrong is None:
        return
    for field, values in FLIPPABLE.items():
        for value in values:
            if value == getattr(model.cfg, field):
                continue
            try:
                other = SortednessClassifier(replace(model.cfg, **cast(dict[str, Any], {field: value})))
                other.load_state_dict(model.state_dict())
            except (RuntimeError, ValueError):
                continue  # the weights do not even fit this config
            if _shortfall(other.eval(), metrics, path) is None:
                raise ValueError(
                    f"checkpoint {path}: {wrong}; its config says {field}={getattr(model.cfg, field)!r}, "
                    f"but the weights were trained with {field}={value!r}"
                )
    raise ValueError(f"checkpoint {path}: {wrong}: its config or weights do not fit its metrics")


def load_classifier(encoding: str, data_dir: Path = DATA_DIR, device: str = "cpu") -> SortednessClassifier:
    """The committed classifier for one encoding (trained with seed 0). ValueError when the file
    is corrupt, of another task or encoding, has a bad config or NaN weights; CheckpointWarning
    when it is marked interrupted."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; choose one of {ENCODINGS}")
    path = checkpoint_path(encoding, data_dir)
    model = _load(path, device)
    if model.cfg.encoding != encoding:
        raise ValueError(f"checkpoint {path} holds a {model.cfg.encoding!r} classifier, not {encoding!r}")
    return model


def load_run(name: str, seed: int, data_dir: Path = DATA_DIR, device: str = "cpu") -> SortednessClassifier:
    """Any run of the committed experiment (`all_runs()`), checked to be that run: its encoding,
    readout, table initialisation and seed. Errors as load_classifier."""
    path, want = run_path(name, seed, data_dir), run_config(name)
    model = _load(path, device)
    for field in ("encoding", "readout", "learned_init"):
        if getattr(model.cfg, field) != getattr(want, field):
            raise ValueError(
                f"checkpoint {path} holds a classifier with {field}={getattr(model.cfg, field)!r}, "
                f"not run {name!r} ({field}={getattr(want, field)!r})"
            )
    if model.metrics.get("seed") != seed:
        raise ValueError(f"checkpoint {path} was trained with seed {model.metrics.get('seed')!r}, not {seed}")
    return model
