"""A broken model must fail the suite: each committed checkpoint swapped for an untrained (or
barely trained) one of the same config, saved with attnkit's own save function and carrying its
own true metrics (loading refuses a model that falls short of its stored metrics), so that only
the claims' recomputation against the README's numbers can tell.

  * default tier (`make test`): every claims check of tests/test_claims.py that concerns the
    swapped checkpoint fails on it, in process;
  * ATTNKIT_CLAIMS=1 (`make claims`): with ATTNKIT_DATA_DIR pointing at a copy of data/ holding the
    broken checkpoint, the claims tests fail in a fresh pytest, and so does that checkpoint's
    notebook under nbval (02 and 04: untrained adder; 03: a 150-step adder, ~3 % greedy exact
    match; 05: each of the six sortedness checkpoints untrained in turn).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from test_claims import (
    check_ablation_headlines,
    check_adder_answers,
    check_adder_metrics,
    check_descending_runs,
    check_head_roles,
    check_sortedness_run,
    full_only,
)

from attnkit.adder import Adder
from attnkit.adder.evaluate import evaluate
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.core.checkpoint import CheckpointWarning, load_checkpoint, save_checkpoint
from attnkit.core.positional import ENCODINGS
from attnkit.sortedness import KIND, SEEDS, SortednessClassifier, SortednessConfig, all_runs, load_classifier, run_path

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "data"


def random_weights_adder(seed: int = 1) -> Adder:
    torch.manual_seed(seed)
    return Adder(Seq2SeqTransformer(Seq2SeqConfig()))


def weak_adder(steps: int = 150) -> Adder:
    """What notebook 02 trains in its short demo: ~56 % teacher-forced tokens, ~3 % greedy."""
    from attnkit.adder.train import AdderTrainConfig, train_adder
    from attnkit.core.runtime import torch_threads

    with torch_threads(1):
        run = train_adder(Seq2SeqConfig(), AdderTrainConfig(max_steps=steps, eval_every=50, n_val=1000), progress=False)
    return Adder(run.model.eval())


def untrained_classifier(encoding: str, seed: int = SEEDS[0]) -> SortednessClassifier:
    """Run (encoding, seed)'s config and stored metrics with untrained weights."""
    payload = load_checkpoint(run_path(encoding, seed, COMMITTED), KIND)
    torch.manual_seed(1)
    model = SortednessClassifier(SortednessConfig(**payload["config"])).eval()
    model.metrics = payload["metrics"]
    return model


def broken_data_dir(root: Path, adder: Adder | None = None, encoding: str | None = None, seed: int = SEEDS[0]) -> Path:
    """A copy of data/ with the adder or one sortedness checkpoint, run (encoding, seed), replaced
    by a broken model carrying its own, true metrics (with the committed ones, loading refuses it:
    both tasks re-check their behaviour against the stored metrics)."""
    root.mkdir(parents=True, exist_ok=True)
    for f in COMMITTED.iterdir():
        if f.is_file():
            shutil.copy(f, root / f.name)
        elif f.is_dir():
            shutil.copytree(f, root / f.name, dirs_exist_ok=True)
    if adder is not None:
        # Its own, true metrics: with the committed ones copied over, Adder.load's answer check
        # already refuses it; the claims must catch a model that is honestly worse.
        from attnkit.adder.data import load_test_set

        metrics = {**evaluate(adder.model, *load_test_set()), "steps": 150, "interrupted": False}
        save_checkpoint(root / "adder.pt", "adder", asdict(adder.cfg), adder.model.state_dict(), metrics)
    if encoding is not None:
        from attnkit.sortedness import make_test_sets, make_val_set
        from attnkit.sortedness.train import evaluate_classifier

        committed = load_checkpoint(run_path(encoding, seed, COMMITTED), KIND)
        model = untrained_classifier(encoding, seed)
        metrics = {
            "seed": seed,
            "train": committed["metrics"]["train"],
            "history": [],
            **evaluate_classifier(model, make_val_set(), make_test_sets()),
        }
        save_checkpoint(run_path(encoding, seed, root), KIND, committed["config"], model.state_dict(), metrics)
    return root


# ------------------------------------------------------------------ in process (make test)
@pytest.fixture(scope="module")
def broken_adder(tmp_path_factory):
    """The untrained adder as a learner would meet it: saved and loaded through the checkpoint path
    (loading warns that it scored below the target; the claims must fail on it all the same)."""
    root = broken_data_dir(tmp_path_factory.mktemp("broken-adder"), adder=random_weights_adder())
    with pytest.warns(CheckpointWarning, match="below the target"):
        return Adder.load(root / "adder.pt", device="cpu")


def test_untrained_adder_fails_the_metric_claims(broken_adder):
    with pytest.raises(AssertionError):
        check_adder_metrics(broken_adder.evaluate())


def test_untrained_adder_fails_the_answer_claims(broken_adder):
    with pytest.raises(AssertionError):
        check_adder_answers(broken_adder)


def test_untrained_adder_fails_the_role_claims(broken_adder):
    with pytest.raises(AssertionError):
        check_head_roles(broken_adder)


def test_untrained_adder_fails_the_ablation_claims(broken_adder):
    with pytest.raises(AssertionError):
        check_ablation_headlines(broken_adder)


@pytest.fixture(scope="module")
def val_set():
    """The validation set, made once for the 21 runs below (0.13 s each time)."""
    from attnkit.sortedness import make_val_set

    return make_val_set()


@pytest.mark.parametrize("name, seed", all_runs(), ids=[f"{n}-seed{s}" for n, s in all_runs()])
def test_untrained_classifier_fails_the_sortedness_claims(name, seed, val_set):
    with pytest.raises(AssertionError):
        check_sortedness_run(name, seed, untrained_classifier(name, seed), (val_set, {}))


def test_untrained_relative_model_fails_the_descending_run_claim():
    models = {enc: load_classifier(enc) for enc in ENCODINGS if enc != "relative"}
    models["relative"] = untrained_classifier("relative")
    with pytest.raises(AssertionError):
        check_descending_runs(models)


def test_the_data_dir_override_reaches_every_loader(tmp_path):
    """ATTNKIT_DATA_DIR, set before Python starts (as for a notebook kernel), moves every path."""
    code = (
        "import attnkit.adder.data as d, attnkit.adder.pretrained as p, attnkit.sortedness.pretrained as s, "
        "attnkit.experiments.ablation_studies as a; print(d.TEST_SET_PATH.parent, p.CHECKPOINT.parent, "
        "s.RESULTS_PATH.parent, s.checkpoint_path('alibi').parent, a.ABLATION_RESULTS_PATH.parent)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "ATTNKIT_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [str(tmp_path)] * 5


# ------------------------------------------------------------------ fresh processes (make claims)
def run_pytest(args: list[str], data_dir: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "ATTNKIT_DATA_DIR": str(data_dir), "OMP_NUM_THREADS": "1"}
    env.pop("ATTNKIT_CLAIMS", None)  # the fast claims only
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def failed_cells(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout[-3000:] + proc.stderr[-2000:]


@full_only
def test_claims_tests_fail_with_a_broken_checkpoint_in_the_data_dir(tmp_path):
    root = broken_data_dir(tmp_path / "data", adder=random_weights_adder(), encoding="alibi")
    proc = run_pytest(
        ["tests/test_claims.py", "-k", "adder_metrics or seed0_cells or roles or ablation_headlines"], root
    )
    out = proc.stdout
    assert proc.returncode == 1, failed_cells(proc)
    for name in (
        "test_adder_metrics_recomputed_from_the_checkpoint",
        "test_head_roles_quoted_in_the_readme",
        "test_ablation_headlines_remeasured",
        "test_sortedness_seed0_cells_recomputed_from_the_checkpoint[alibi]",
    ):
        assert f"FAILED tests/test_claims.py::{name}" in out, (name, out[-3000:])
    assert "test_sortedness_seed0_cells_recomputed_from_the_checkpoint[rope]" not in out  # the others still pass


def notebook(prefix: str) -> str:
    return str(next((ROOT / "notebooks").glob(f"{prefix}_*.ipynb")).relative_to(ROOT))


def assert_notebook_fails(path: str, data_dir: Path) -> None:
    """nbval, stopping at the first failing cell: it must be an assert (or the ablation refusal)."""
    proc = run_pytest(["-x", "--nbval-lax", path], data_dir)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, f"{path} passed with a broken checkpoint:\n{out[-3000:]}"
    assert "AssertionError" in out or "BaselineTooLowError" in out, out[-3000:]


@full_only
@pytest.mark.parametrize("prefix", ["02", "04"])
def test_adder_notebooks_fail_with_an_untrained_adder(prefix, tmp_path):
    assert_notebook_fails(notebook(prefix), broken_data_dir(tmp_path / "data", adder=random_weights_adder()))


@full_only
def test_heatmap_notebook_fails_with_a_weak_adder(tmp_path):
    assert_notebook_fails(notebook("03"), broken_data_dir(tmp_path / "data", adder=weak_adder()))


@full_only
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_positional_notebook_fails_with_an_untrained_classifier(encoding, tmp_path):
    assert_notebook_fails(notebook("05"), broken_data_dir(tmp_path / "data", encoding=encoding))


@full_only
@pytest.mark.parametrize("name, seed", [("alibi", 2), ("readout-first", 0)])
def test_positional_notebook_fails_with_an_untrained_run_it_does_not_explore(name, seed, tmp_path):
    """The 15 runs in data/sortedness-runs/ feed only the table, and notebook 05 checks them too."""
    assert_notebook_fails(notebook("05"), broken_data_dir(tmp_path / "data", encoding=name, seed=seed))
