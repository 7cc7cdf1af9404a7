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
RUNS_FOLDER = "sortedness-runs"  # every run but the six seed-0 classifiers: seeds 1-2 and the variants
# Trained with the first seed only, beside the max-pool runs of every encoding.
VARIANTS = {"readout-mean": SortednessConfig(encoding="relative", readout="mean"),
            "readout-first": SortednessConfig(encoding="relative", readout="first"),
            "learned-random-init": SortednessConfig(encoding="learned", learned_init="random")}


def checkpoint_path(encoding: str, data_dir: Path = DATA_DIR) -> Path:
    return Path(data_dir) / f"sortedness-{encoding}.pt"


def run_config(name: str) -> SortednessConfig:
    """The config of one run of the experiment: an encoding (max-pool readout) or a variant."""
    if name in ENCODINGS:
        return SortednessConfig(encoding=name)
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
    found = out_of_range(cfg, (("d_model", 1, 4096), ("n_heads", 1, 64), ("n_layers", 1, 48), ("d_ff", 1, 16384),
                               ("max_len", 1, 1 << 16), ("n_exact", 0, 1024)))
    if not found and cfg.encoding == "rope" and (cfg.d_model // cfg.n_heads) % 2:
        found.append(f"rope needs an even d_head, not {cfg.d_model // cfg.n_heads}")
    return found


def _load(path: Path, device: str) -> SortednessClassifier:
    payload = load_checkpoint(path, KIND)
    cfg = config_from(SortednessConfig, payload["config"], path, classifier_config_problems)
    model = SortednessClassifier(cfg)
    load_state(model, payload, path)
    model.metrics = payload["metrics"]  # validation and test accuracies of this very model
    check_metrics(model.metrics, path)
    return model.to(device).eval()


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
            raise ValueError(f"checkpoint {path} holds a classifier with {field}={getattr(model.cfg, field)!r}, "
                             f"not run {name!r} ({field}={getattr(want, field)!r})")
    if model.metrics.get("seed") != seed:
        raise ValueError(f"checkpoint {path} was trained with seed {model.metrics.get('seed')!r}, not {seed}")
    return model
