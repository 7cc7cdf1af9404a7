"""Interpretability on the kit's models, all through the named hook points of core/hooks.py:
measured head roles (roles.py), ablation (ablation.py: the mechanism and the baseline guard;
sweep.py: many ablations at once; studies.py: sweeps, joint pruning, gradient importance,
carries), activation patching (patching.py) and the measures of a training replay (replay.py)."""

from .ablation import (
    MIN_BASELINE,
    MODES,
    THRESHOLD_POINTS,
    BaselineTooLowError,
    Problems,
    check_baseline,
    held_out_problems,
    model_of,
    plain_matches,
    state_hash,
)
from .studies import (
    CARRY_GROUPS,
    REMEASURE_POINTS,
    carry_breakdown,
    compare_rankings,
    gradient_importance,
    joint_pruning,
    prune_order,
    pruning_subset,
    rank_correlation,
    single_head_sweep,
    sweep_matrix,
)
from .sweep import fast_matches
