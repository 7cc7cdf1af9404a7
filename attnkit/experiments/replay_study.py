"""The adder's training replayed on three seeds, saved to data/adder_replay.json
(`python -m attnkit study replay`, about 20 minutes on 2 cores): notebook 07's curves and grids.

Seed 0 is the committed run: its snapshots (data/adder-snapshots.pt, the last one data/adder.pt).
Seeds 1 and 2 are trained again here, into a temporary folder, with `python -m attnkit train adder
--seed N` (the same reproducible kernels), measured, and only their measures are kept: the
notebook's claims about order and timing are checked on all three (tests/test_claims.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from ..adder.snapshots import Snapshots, snapshots_path, weights_digest
from ..core.checkpoint import DATA_DIR, save_json
from ..interp.replay import measure_run
from .ablation_studies import _rounded  # floats to 6 significant digits: files stable under float noise

REPLAY_RESULTS_PATH = DATA_DIR / "adder_replay.json"
SEEDS = (0, 1, 2)


def train_seed(seed: int, folder: Path) -> Path:
    """The adder trained from `seed` with its snapshots, in `folder`: the checkpoint's path."""
    out = Path(folder) / f"adder-seed{seed}.pt"
    command = [sys.executable, "-m", "attnkit", "train", "adder", "--seed", str(seed), "--out", str(out)]
    done = subprocess.run(command, check=False)
    if done.returncode == 130:
        raise KeyboardInterrupt
    if done.returncode:
        raise RuntimeError(f"training seed {seed} failed (exit status {done.returncode}): {' '.join(command)}")
    return out


def run_replay_study(path: Path = REPLAY_RESULTS_PATH, seeds=SEEDS, progress: bool = True) -> dict:
    """Measure every snapshot of each seed's run and save the results (atomically, at the end)."""
    runs = {}
    committed = Snapshots()
    runs["0"] = measure_run(committed, progress)
    with tempfile.TemporaryDirectory(prefix="attnkit-replay-") as tmp:
        for seed in seeds:
            if seed == 0:
                continue
            runs[str(seed)] = measure_run(Snapshots(train_seed(seed, Path(tmp))), progress)
    results = {
        "checkpoint_weights": weights_digest(committed.final.model.state_dict()),
        "snapshots": snapshots_path(Path("data/adder.pt")).name,
        "n": 10_000,
        "seeds": _rounded(runs),
    }
    save_json(path, results)
    return results


def load_replay(path: Path = REPLAY_RESULTS_PATH, adder=None) -> dict:
    """The saved study; with `adder`, ValueError unless it was measured on that model's run."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no results at {path}: run `python -m attnkit study replay`")
    try:
        results = json.loads(path.read_text())
        runs = results["seeds"]
        ok = all(isinstance(run.get("steps"), list) and run["steps"] for run in runs.values())
    except (ValueError, KeyError, AttributeError, TypeError) as e:
        raise ValueError(f"{path} is not the replay study's results (edited or damaged): {e}") from None
    if not ok or "0" not in runs:
        raise ValueError(f"{path} is not the replay study's results: a run without steps, or no seed 0")
    if adder is not None and results.get("checkpoint_weights") != weights_digest(adder.model.state_dict()):
        raise ValueError(f"{path} was measured on another adder than this one: run `python -m attnkit study replay`")
    return results
