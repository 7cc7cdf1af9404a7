"""The sortedness task: is a sequence of integers 0–99 sorted? A testbed for positional encodings.

data.py (sequences, negatives, padding), model.py (the classifier), train.py (training and
evaluating one model), pretrained.py (the committed classifiers and results). The experiment
over every encoding × seed lives in attnkit/experiments/sortedness_runs.py.
"""

from .data import (
    N_VALUES,
    NEGATIVES,
    TEST_LENGTHS,
    TRAIN_LENGTHS,
    DataConfig,
    is_sorted,
    labelled_set,
    make_test_sets,
    make_train_set,
    make_val_set,
    pad_batch,
    shuffle_rows,
    sorted_non_constant,
    sorted_sequences,
    swap_one_pair,
    validate,
)
from .model import SortednessClassifier, SortednessConfig, value_angle
from .pretrained import (
    KIND,
    RESULTS_PATH,
    RUNS_FOLDER,
    SEEDS,
    VARIANTS,
    all_runs,
    checkpoint_path,
    load_classifier,
    load_results,
    load_run,
    run_config,
    run_path,
)
from .train import SortednessTrainConfig, accuracy_by_kind, evaluate_classifier, train_classifier, train_config
