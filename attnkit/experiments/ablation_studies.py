"""Every ablation study in both modes, saved to data/ablation_results.json
(`python -m attnkit study ablation`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..adder import CHECKPOINT, Adder
from ..adder.data import load_test_set
from ..core.checkpoint import DATA_DIR, save_json
from ..core.outputs import check_output_file
from ..interp.ablation import MODES, THRESHOLD_POINTS, check_baseline, model_of, state_hash
from ..interp.studies import (
    REMEASURE_POINTS,
    carry_breakdown,
    compare_rankings,
    gradient_importance,
    joint_pruning,
    single_head_sweep,
    sweep_matrix,
)

ABLATION_RESULTS_PATH = DATA_DIR / "ablation_results.json"


def run_studies(
    adder=None, path=ABLATION_RESULTS_PATH, force: bool = False, subset: int = 2000, progress: bool = True
) -> dict:
    """Every study in both modes, saved to data/ablation_results.json (`python -m attnkit study ablation`).
    `path` is checked (a writable .json file path) before any work; an interrupted run writes nothing."""
    from tqdm.auto import tqdm

    path = check_output_file(path, ".json", "results path")
    adder = Adder.load(CHECKPOINT) if adder is None else adder
    model = model_of(adder)
    baseline = check_baseline(model, force)
    n_heads = len(model.heads)
    results: dict[str, Any] = {
        "format_version": 1,
        "state_sha256": state_hash(model),
        "baseline": baseline,
        "n_test": len(load_test_set()[0]),
        "threshold_points": THRESHOLD_POINTS,
        "definitions": {
            "metric": "greedy exact match on data/adder_test.txt (whole answer and </s> right)",
            "zero": "the head's z (before W_O) set to 0 at every query position",
            "mean": "the head's z replaced by its mean over every real query position of the held-out "
            "set (encoder: non-padding source tokens; decoder: <s> and answer digits, teacher-forced)",
            "joint_pruning": f"greedy search on a fixed subset of {subset} held-out problems "
            "(pruning_subset(seed=0)); each prefix of the order re-measured on the full set up to the "
            f"first that costs {REMEASURE_POINTS:g} points on the subset (and on while < 1 point on the full set)",
            "importance": "Michel et al. 2019: mean |dL/dgate| over the held-out set, L2-normalised per layer",
        },
        "modes": {},
    }
    steps = len(MODES) * (n_heads + 3)
    with tqdm(total=steps, desc="ablation studies", disable=not progress) as bar:
        for mode in MODES:
            correct = sweep_matrix(model, mode)
            bar.update(1)
            sweep = single_head_sweep(model, mode, force, correct)
            carries = carry_breakdown(model, mode, force, correct)
            joint = joint_pruning(model, mode, subset, force=force, progress=bar)
            bar.update(1)
            importance = gradient_importance(model, mode, force)
            bar.update(1)
            results["modes"][mode] = {
                "single_head": sweep,
                "joint_pruning": joint,
                "importance": importance,
                "importance_vs_ablation": compare_rankings(importance, sweep),
                "carries": carries,
            }
    results = _rounded(results)
    save_json(path, results)
    return results


def _rounded(obj, digits: int = 6):
    """Floats to `digits` significant digits: the file does not change with float noise."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: _rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v, digits) for v in obj]
    return obj


def load_ablation_results(path=ABLATION_RESULTS_PATH) -> dict:
    if not Path(path).exists():
        raise FileNotFoundError(f"no results at {path}: run `python -m attnkit study ablation`")
    return json.loads(Path(path).read_text())
