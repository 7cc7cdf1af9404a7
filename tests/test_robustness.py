"""Issue 13: nothing lost, nothing silently wrong — interrupts and kills (in subprocesses), output
paths, bad checkpoints, bad data, threads. Every case asserts the specific error or the kept file.
Tests write to tmp_path only; data/ is read, never written."""

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import attnkit
from attnkit.__main__ import main
from attnkit.adder import Adder
from attnkit.adder import data as adder_data
from attnkit.adder.data import EDGE_CASES, load_test_set
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.core import checkpoint as ck
from attnkit.core import outputs, runtime
from attnkit.core.checkpoint import CheckpointWarning, checkpoint_bytes, json_bytes, load_checkpoint, save_checkpoint
from attnkit.sortedness import load_classifier

from helpers import alive, children, wait_training

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
TRUTH = [str(sum(map(int, p.split("+")))) for p in EDGE_CASES]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def payload():
    return load_checkpoint(DATA / "adder.pt", "adder")


def write_adder(path, payload, config=None, state=None, metrics=None, **changes):
    """A copy of the committed adder with its config, weights or metrics changed."""
    cfg = {**payload["config"], **changes} if config is None else config
    save_checkpoint(
        path,
        "adder",
        cfg,
        payload["state_dict"] if state is None else state,
        payload["metrics"] if metrics is None else metrics,
    )
    return path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ---------------------------------------------------------------- interrupts and kills ---------


def run_script(script: str, *args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# Training with a signal sent to itself when the 3rd batch is drawn: a deterministic kill point.
SIGNAL_AT_STEP_3 = """
import os, signal, sys
from attnkit.adder import train
real = train.ProblemSampler.sample
calls = []
def sample(self, n):
    calls.append(n)
    if len(calls) == 3:
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))
    return real(self, n)
train.ProblemSampler.sample = sample
from attnkit.__main__ import main
main(["train", "adder", "--out", sys.argv[1]])
"""


@pytest.fixture
def previous(tmp_path):
    """A previous checkpoint and report at the output path (copies of the committed ones)."""
    for name in ("adder.pt", "adder.json"):
        (tmp_path / name).write_bytes((DATA / name).read_bytes())
    return tmp_path / "adder.pt"


def assert_kept(out: Path):
    assert out.read_bytes() == (DATA / "adder.pt").read_bytes()
    assert out.with_suffix(".json").read_bytes() == (DATA / "adder.json").read_bytes()


def test_ctrl_c_in_train_adder_keeps_the_previous_checkpoint_and_exits_130(previous):
    done = run_script(SIGNAL_AT_STEP_3, previous, "SIGINT")
    assert done.returncode == 130, done.stderr[-2000:]
    assert_kept(previous)
    side = previous.with_name("adder.interrupted.pt")
    assert "interrupted at step" in done.stderr and str(previous) in done.stderr and str(side) in done.stderr
    assert side.with_suffix(".json").exists() and leftovers(previous.parent) == []
    with pytest.warns(CheckpointWarning, match="interrupted"):
        unfinished = Adder.load(side, device="cpu")
    assert unfinished.metrics["interrupted"] and unfinished.metrics["steps"] < 5


def test_kill_9_during_training_leaves_the_previous_files_and_no_temporaries(previous):
    done = run_script(SIGNAL_AT_STEP_3, previous, "SIGKILL")
    assert done.returncode == -signal.SIGKILL
    assert_kept(previous)
    assert sorted(p.name for p in previous.parent.iterdir()) == ["adder.json", "adder.pt"]


# save_checkpoint(report=...) in a subprocess killed at a chosen point of the save
KILL_DURING_SAVE = """
import os, signal, sys
import torch
from attnkit.core import checkpoint as ck
out, point = sys.argv[1], sys.argv[2]
real_replace, real_fsync = os.replace, os.fsync
def replace(src, dst):
    real_replace(src, dst)
    if point == "between-renames" and str(dst).endswith(".json"):
        os.kill(os.getpid(), signal.SIGKILL)   # the report renamed, the checkpoint not yet
def fsync(fd):
    real_fsync(fd)
    if point == "writing":
        os.kill(os.getpid(), signal.SIGKILL)   # the first temporary written, nothing renamed
os.replace, os.fsync = replace, fsync
state = {"w": torch.full((256, 1024), 2.0)}    # a 1 MB checkpoint
ck.save_checkpoint(out, "adder", {"new": True}, state, {"run": "new"},
                   report=(out.replace(".pt", ".json"),
                           {"model_config": {}, "train_config": {}, "test_metrics": "new"}))
"""


def report(run: str) -> dict:
    """A report with the keys of the kit's own (a journal may replace only the kit's files)."""
    return {"model_config": {}, "train_config": {}, "test_metrics": run}


def old_pair(tmp_path):
    out = tmp_path / "m.pt"
    save_checkpoint(
        out, "adder", {"new": False}, {"w": torch.ones(2)}, {"run": "old"}, report=(tmp_path / "m.json", report("old"))
    )
    return out, out.read_bytes()


def test_kill_9_between_the_two_renames_is_rolled_forward_by_the_next_load(tmp_path):
    out, _ = old_pair(tmp_path)
    assert run_script(KILL_DURING_SAVE, out, "between-renames").returncode == -signal.SIGKILL
    assert json.loads((tmp_path / "m.json").read_text()) == report("new")  # the report is new ...
    assert (tmp_path / ".m.pt.commit").exists()  # ... and the journal says so
    payload = load_checkpoint(out, "adder")  # finishes the save
    assert payload["metrics"] == {"run": "new"} and payload["config"] == {"new": True}
    assert leftovers(tmp_path) == []


def test_kill_9_while_writing_keeps_the_old_pair_and_the_next_save_removes_the_temporary(tmp_path):
    out, old_bytes = old_pair(tmp_path)
    assert run_script(KILL_DURING_SAVE, out, "writing").returncode == -signal.SIGKILL
    assert out.read_bytes() == old_bytes and json.loads((tmp_path / "m.json").read_text()) == report("old")
    assert [p for p in leftovers(tmp_path) if p.endswith(".tmp")]  # the killed save's temporary
    assert load_checkpoint(out, "adder")["metrics"] == {"run": "old"}
    old_pair(tmp_path)
    assert leftovers(tmp_path) == []


def test_ctrl_c_during_the_save_before_the_commit_point_keeps_the_old_pair(tmp_path, monkeypatch):
    out, old_bytes = old_pair(tmp_path)

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(ck.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(out, "adder", {}, {"w": torch.zeros(2)}, {"run": "new"}, report=(tmp_path / "m.json", {}))
    assert out.read_bytes() == old_bytes and leftovers(tmp_path) == []


def test_ctrl_c_after_the_commit_point_finishes_the_save(tmp_path, monkeypatch):
    out, _ = old_pair(tmp_path)
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if str(dst).endswith("m.json") and len([c for c in calls if str(c).endswith("m.json")]) == 1:
            raise KeyboardInterrupt  # the first rename of the report, after the journal is in place
        real(src, dst)

    monkeypatch.setattr(ck.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(
            out, "adder", {}, {"w": torch.zeros(2)}, {"run": "new"}, report=(tmp_path / "m.json", report("new"))
        )
    assert load_checkpoint(out, "adder")["metrics"] == {"run": "new"}
    assert json.loads((tmp_path / "m.json").read_text()) == report("new") and leftovers(tmp_path) == []


def spawned_workers(pid: int) -> list[int]:
    return children(pid, "spawn_main")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads worker processes from /proc")
def test_ctrl_c_to_the_process_group_stops_train_sortedness_and_its_workers(tmp_path):
    out = tmp_path / "out"
    (out).mkdir()
    previous = (DATA / "sortedness-alibi.pt").read_bytes()  # the kit's own: it may be replaced (not by Ctrl-C)
    (out / "sortedness-alibi.pt").write_bytes(previous)
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnkit", "train", "sortedness", "--out", str(out)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    # run_experiment's default worker count: one process on a GPU, else up to 4
    expected = 1 if torch.cuda.is_available() else min(os.cpu_count() or 1, 4)
    err_chunks: list = []
    reader = threading.Thread(target=lambda: err_chunks.extend(iter(lambda: proc.stderr.read(64), "")), daemon=True)
    reader.start()
    try:
        deadline, workers = time.monotonic() + 120, []
        while (
            time.monotonic() < deadline
            and proc.poll() is None
            and ("sortedness experiment" not in "".join(err_chunks) or (expected > 1 and len(workers) < expected))
        ):
            time.sleep(0.2)  # until its progress bar is up and its workers run
            workers = spawned_workers(proc.pid)
        assert proc.poll() is None and len(workers) == (expected if expected > 1 else 0)
        wait_training(workers or [proc.pid])  # the runs are training now (on a GPU, in the process itself)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends Ctrl-C
        sent = time.monotonic()
        proc.wait(timeout=30)
        stopped_after = time.monotonic() - sent
        reader.join(timeout=5)
        err = "".join(err_chunks)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    print(f"train sortedness stopped {stopped_after:.2f} s after Ctrl-C")
    assert stopped_after < 10, stopped_after  # ~1 s on a quiet machine
    assert "interrupted: nothing new was written" in err
    assert not any(alive(w) for w in workers)
    assert sorted(p.name for p in out.iterdir()) == ["sortedness-alibi.pt"]
    assert (out / "sortedness-alibi.pt").read_bytes() == previous


def test_an_interrupted_sequential_experiment_writes_nothing(tmp_path, monkeypatch):
    from attnkit.experiments import sortedness_runs
    from attnkit.sortedness.data import DataConfig

    calls = []

    def train(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    real = sortedness_runs.train_classifier
    monkeypatch.setattr(sortedness_runs, "train_classifier", train)
    with pytest.raises(KeyboardInterrupt):
        sortedness_runs.run_experiment(
            encodings=("alibi", "learned"),
            seeds=(0,),
            variants=False,
            data_dir=tmp_path,
            workers=1,
            steps=2,
            progress=False,
            data=DataConfig(n_train=200, n_val=20, n_test=4),
        )
    assert len(calls) == 2 and list(tmp_path.iterdir()) == []  # the finished first run was not written alone


def test_an_interrupted_ablation_study_writes_nothing(tmp_path, monkeypatch):
    from attnkit.experiments import ablation_studies

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ablation_studies, "check_baseline", lambda model, force: {})
    monkeypatch.setattr(ablation_studies, "sweep_matrix", interrupted)
    (tmp_path / "r.json").write_text("{}\n")
    with pytest.raises(KeyboardInterrupt):
        ablation_studies.run_studies(
            Adder(Seq2SeqTransformer(Seq2SeqConfig(d_model=16, d_ff=32))), path=tmp_path / "r.json", progress=False
        )
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"] and (tmp_path / "r.json").read_text() == "{}\n"


# ---------------------------------------------------------------- output paths -----------------


def cli_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def no_work(monkeypatch):
    """Fails the test if any command starts its work: every output error must come first."""

    def work(*args, **kwargs):
        raise AssertionError("work started before the output was checked")

    import attnkit.adder
    import attnkit.experiments.ablation_studies as studies
    import attnkit.experiments.sortedness_runs as runs

    monkeypatch.setattr(attnkit.adder, "train_pretrained", work)
    monkeypatch.setattr(runs, "run_experiment", work)
    monkeypatch.setattr(studies, "run_studies", work)


@pytest.mark.parametrize(
    "command, out, message",
    [
        ("train adder", "m.json", "must end in '.pt'"),  # was: checkpoint overwritten by its own report
        ("train adder", "", "is empty"),  # was: data/adder.pt rewritten
        ("train adder", "   ", "is empty"),
        ("train adder", "folder.pt", "is a directory"),
        ("train adder", "missing/m.pt", "does not exist"),
        ("train adder", "afile/m.pt", "is not a folder"),  # a path under a file
        ("train adder", "clash/adder.pt", "not a regular file"),  # its report's path is a directory
        ("train sortedness", "afile", "is not a folder"),
        ("train sortedness", "missing/deeper", "not an existing folder"),
        ("study ablation", "r.pt", "must end in '.json'"),
        ("study ablation", "folder.json", "is a directory"),
        ("study ablation", "afile/r.json", "is not a folder"),
    ],
)
def test_bad_outputs_are_refused_before_any_work(tmp_path, capsys, no_work, command, out, message):
    (tmp_path / "folder.pt").mkdir()
    (tmp_path / "folder.json").mkdir()
    (tmp_path / "afile").write_text("x")
    (tmp_path / "clash").mkdir()
    (tmp_path / "clash" / "adder.json").mkdir()
    target = out if not out.strip() else str(tmp_path / out)
    assert message in cli_error(capsys, command.split() + ["--out", target])


def test_an_unwritable_folder_is_refused_before_any_work(tmp_path, capsys, no_work, monkeypatch):
    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(outputs.tempfile, "mkstemp", read_only)  # as in a read-only data/ (root ignores chmod)
    for argv in (
        ["train", "adder", "--out", str(tmp_path / "m.pt")],
        ["train", "sortedness", "--out", str(tmp_path)],
        ["study", "ablation", "--out", str(tmp_path / "r.json")],
        ["train", "adder"],
    ):
        assert "is not writable (Permission denied)" in cli_error(capsys, argv)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_refused(tmp_path):
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(ValueError, match="not writable"):
            outputs.check_output_file(tmp_path / "m.pt", ".pt")
    finally:
        tmp_path.chmod(0o755)


@pytest.mark.parametrize(
    "command, out, called_with",
    [
        ("train adder", "m.pt", "m.pt"),
        ("train sortedness", "runs", "runs"),  # was: accepted, ignored, data/ rewritten
        ("study ablation", "r.json", "r.json"),
        ("study replay", "r.json", "r.json"),
    ],
)
def test_out_is_honoured_by_every_command(tmp_path, monkeypatch, command, out, called_with):
    import attnkit.adder
    import attnkit.experiments.ablation_studies as studies
    import attnkit.experiments.replay_study as replay
    import attnkit.experiments.sortedness_runs as runs

    seen = []
    monkeypatch.setattr(
        attnkit.adder,
        "train_pretrained",
        lambda path, seed=0: (
            seen.append(path) or Adder(Seq2SeqTransformer(Seq2SeqConfig(d_model=16, d_ff=32)), {"interrupted": False})
        ),
    )
    monkeypatch.setattr(runs, "run_experiment", lambda data_dir: seen.append(data_dir))
    monkeypatch.setattr(studies, "run_studies", lambda path: seen.append(path))
    monkeypatch.setattr(replay, "run_replay_study", lambda path: seen.append(path))
    main(command.split() + ["--out", str(tmp_path / out)])
    assert seen == [tmp_path / called_with]
    assert (tmp_path / called_with).is_dir() == (command == "train sortedness")  # a new folder is made


def test_library_entry_points_check_their_output_first(tmp_path, monkeypatch):
    from attnkit.adder import train
    from attnkit.experiments import ablation_studies, sortedness_runs

    monkeypatch.setattr(train, "load_test_set", lambda: pytest.fail("training started"))
    (tmp_path / "dir.pt").mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        train.train_adder(out_path=tmp_path / "dir.pt", progress=False)
    monkeypatch.setattr(sortedness_runs, "make_train_set", lambda data: pytest.fail("experiment started"))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="is not a folder"):
        sortedness_runs.run_experiment(data_dir=tmp_path / "afile")
    with pytest.raises(ValueError, match="must end in '.json'"):
        ablation_studies.run_studies(adder=object(), path=tmp_path / "r.txt")
    with pytest.raises(TypeError, match="not int"):
        outputs.check_output_file(3, ".pt")


# ---------------------------------------------------------------- checkpoints ------------------


def test_the_committed_checkpoints_load_without_a_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in attnkit.PRETRAINED:
            attnkit.load_pretrained(name)


def test_every_committed_file_serialises_to_the_same_bytes():
    """The writers this issue changed still give the committed bytes (retraining reproduces data/)."""
    for path in sorted(DATA.glob("*.pt")):
        p = torch.load(path, map_location="cpu", weights_only=True)
        assert checkpoint_bytes(p["kind"], p["config"], p["state_dict"], p["metrics"]) == path.read_bytes(), path
    for name in ("adder.json", "ablation_results.json", "sortedness_results.json"):
        assert json_bytes(json.loads((DATA / name).read_text())) == (DATA / name).read_bytes(), name


@pytest.mark.parametrize("flip", ["reverse_output", "zero_pad"])
def test_a_flipped_config_flag_is_caught_by_the_answer_check(tmp_path, payload, flip):
    was = payload["config"][flip]
    path = write_adder(tmp_path / "a.pt", payload, **{flip: not was})
    with pytest.raises(
        ValueError, match=f"config says {flip}={not was}, but the weights were trained with {flip}={was}"
    ):
        Adder.load(path, device="cpu")


@pytest.mark.parametrize("value, message", [(float("nan"), "NaN"), (float("inf"), "infinite")])
def test_non_finite_weights_are_refused(tmp_path, payload, value, message):
    state = dict(payload["state_dict"])
    state["unembed.bias"] = torch.full_like(state["unembed.bias"], value)
    with pytest.raises(ValueError, match="'unembed.bias' holds NaN or infinite"):
        Adder.load(write_adder(tmp_path / "a.pt", payload, state=state), device="cpu")


def test_all_nan_weights_are_refused(tmp_path, payload):
    state = {k: torch.full_like(v, float("nan")) for k, v in payload["state_dict"].items()}
    with pytest.raises(ValueError, match="NaN"):
        Adder.load(write_adder(tmp_path / "a.pt", payload, state=state), device="cpu")


@pytest.mark.parametrize("key", ["zero_pad", "d_model", "dropout"])
def test_a_missing_config_key_is_named(tmp_path, payload, key):
    cfg = {k: v for k, v in payload["config"].items() if k != key}
    with pytest.raises(ValueError, match=f"config lacks \\['{key}'\\]"):
        Adder.load(write_adder(tmp_path / "a.pt", payload, config=cfg), device="cpu")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"d_model": -1}, "d_model = -1 is not in 1 … 4096"),  # was: a raw torch error
        ({"d_model": 10**9}, "d_model = 1000000000 is not in"),  # refused before allocating
        ({"n_heads": 5}, "not divisible by n_heads = 5"),
        ({"n_digits": 0}, "n_digits = 0"),
        ({"dropout": 1.5}, "dropout = 1.5"),
        ({"d_model": "64"}, "d_model = '64' is not a valid int"),
        ({"d_model": 64.0}, "is not a valid int"),
        ({"reverse_output": 1}, "reverse_output = 1 is not a valid bool"),
        ({"dropout": float("nan")}, "is not a valid float"),
        ({"n_layers_typo": 3}, "unknown config key \\['n_layers_typo'\\]"),
    ],
)
def test_bad_config_values_are_named(tmp_path, payload, changes, message):
    with pytest.raises(ValueError, match=message):
        Adder.load(write_adder(tmp_path / "a.pt", payload, **changes), device="cpu")


@pytest.mark.parametrize("part", ["config", "state_dict", "metrics"])
def test_a_checkpoint_without_a_part_is_refused(tmp_path, payload, part):
    torch.save({k: v for k, v in payload.items() if k != part}, tmp_path / "a.pt")
    with pytest.raises(ValueError, match=f"has no '{part}' dict"):  # was: a bare KeyError
        Adder.load(tmp_path / "a.pt", device="cpu")


@pytest.mark.parametrize(
    "edit, message", [("drop", "Missing key"), ("reshape", "size mismatch"), ("not a tensor", "is a int, not a tensor")]
)
def test_weights_that_do_not_fit_are_refused(tmp_path, payload, edit, message):
    state = dict(payload["state_dict"])
    if edit == "drop":
        del state["unembed.bias"]
    elif edit == "reshape":
        state["unembed.bias"] = torch.zeros(3)
    else:
        state["unembed.bias"] = 3
    with pytest.raises(ValueError, match=message):
        Adder.load(write_adder(tmp_path / "a.pt", payload, state=state), device="cpu")


def test_the_task_is_checked_both_ways(tmp_path):
    (tmp_path / "sortedness-alibi.pt").write_bytes((DATA / "adder.pt").read_bytes())
    with pytest.raises(ValueError, match="holds a 'adder' model, not 'sortedness'"):
        load_classifier("alibi", tmp_path)
    with pytest.raises(ValueError, match="holds a 'sortedness' model, not 'adder'"):
        Adder.load(DATA / "sortedness-alibi.pt")
    (tmp_path / "sortedness-rope.pt").write_bytes((DATA / "sortedness-alibi.pt").read_bytes())
    with pytest.raises(ValueError, match="holds a 'alibi' classifier, not 'rope'"):
        load_classifier("rope", tmp_path)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"encoding": "nope"}, "encoding = 'nope' is not a valid one of"),
        ({"n_layers": 0}, "n_layers = 0 is not in 1"),
        ({"value_feature": "yes"}, "not a valid bool"),
    ],
)
def test_bad_sortedness_configs_are_named(tmp_path, changes, message):
    p = load_checkpoint(DATA / "sortedness-alibi.pt", "sortedness")
    save_checkpoint(
        tmp_path / "sortedness-alibi.pt", "sortedness", {**p["config"], **changes}, p["state_dict"], p["metrics"]
    )
    with pytest.raises(ValueError, match=message):
        load_classifier("alibi", tmp_path)


def test_an_interrupted_checkpoint_warns_and_load_pretrained_refuses_it(tmp_path, payload, monkeypatch):
    path = write_adder(tmp_path / "adder.pt", payload, metrics={**payload["metrics"], "interrupted": True, "steps": 3})
    with pytest.warns(CheckpointWarning, match="interrupted training run \\(step 3\\)"):
        Adder.load(path, device="cpu")
    monkeypatch.setattr(Adder.load.__func__, "__defaults__", (path, "cpu"))  # as if it were data/adder.pt
    with pytest.warns(CheckpointWarning), pytest.raises(ValueError, match="interrupted, unfinished adder"):
        attnkit.load_pretrained("adder")


def test_a_checkpoint_below_its_target_warns(tmp_path):
    model = Seq2SeqTransformer(Seq2SeqConfig(d_model=16, d_ff=32))
    Adder(model).save(tmp_path / "a.pt", {"exact_match": 0.0, "interrupted": False})
    with pytest.warns(CheckpointWarning, match="0.0000 exact match on its test set, below the target 0.999"):
        Adder.load(tmp_path / "a.pt", device="cpu")


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickled_code_is_never_run(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    torch.save({"format_version": 1, "kind": "adder", "config": Evil()}, tmp_path / "a.pt")
    with pytest.raises(ValueError, match="corrupt or not an attnkit checkpoint"):
        Adder.load(tmp_path / "a.pt")
    assert not marker.exists()
    (tmp_path / "b.pt").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(ValueError, match="corrupt"):
        Adder.load(tmp_path / "b.pt")
    assert not marker.exists()


def test_a_directory_or_a_missing_file_is_not_a_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="is a directory"):
        Adder.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        Adder.load(tmp_path / "none.pt")


# ---------------------------------------------------------------- public entry points ----------


@pytest.mark.parametrize(
    "a, b, error, message",
    [
        ([-1, 2], [3, 4], ValueError, "a\\[0\\] = -1 is outside"),
        ([1, 2], [3, 1000], ValueError, "b\\[1\\] = 1000 is outside"),
        ([1, 2, 3], [3, 4], ValueError, "equally long, got 3 and 2"),
        ([], [], ValueError, "a is empty"),
        (np.array([], dtype=np.int64), np.array([], dtype=np.int64), ValueError, "a is empty"),
        ([1.5, 2.0], [3, 4], TypeError, "a must hold whole numbers, not float64"),
        ([True, False], [3, 4], TypeError, "not bool"),
        (["1", "2"], [3, 4], TypeError, "whole numbers"),
        ("12", [3, 4], TypeError, "not str"),
        ([[1, 2]], [[3, 4]], ValueError, "must be 1-D"),
        ([1, 2], None, TypeError, "b is missing"),
        (None, [1, 2], TypeError, "a is missing"),
    ],
)
def test_evaluate_validates_its_operands(adder, a, b, error, message):
    with pytest.raises(error, match=message):
        adder.evaluate(a, b)


def test_evaluate_takes_lists_as_arrays(adder):
    as_lists = adder.evaluate([663, 5, 999], [497, 5, 999])  # was: a + b concatenated the lists
    assert as_lists == adder.evaluate(np.array([663, 5, 999]), np.array([497, 5, 999]))
    assert as_lists["n"] == 3 and as_lists["exact_match"] == 1.0


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "holds no problems"),
        (b"\n\n", "holds no problems"),
        (b"1+2=3\n4+5=9", "cut off"),
        (b"1+2=3\n4+5=", "cut off"),
        (b"1+2=3\n1+2=3\n", ":2: problem '1\\+2=3' repeats line 1"),
        (b"1+2=3\n1000+1=1001\n", ":2: malformed"),
        (b"1+2=4\n", ":1: malformed or wrong"),
        (b"0" * 5000 + b"1+2=3\n", ":1: malformed"),  # not Python's digit-limit error
        (b"\x80\x03binary\x00", "not a plain-ASCII text file .*0x80"),  # was: UnicodeDecodeError
        ("1+2=3\n٣+1=4\n".encode(), "not a plain-ASCII"),  # an Arabic-Indic 3
    ],
)
def test_load_test_set_refuses_bad_files(tmp_path, content, message):
    (tmp_path / "t.txt").write_bytes(content)
    with pytest.raises(ValueError, match=message):
        load_test_set(tmp_path / "t.txt")


def test_a_cut_down_committed_test_set_is_refused(tmp_path, monkeypatch):
    lines = (DATA / "adder_test.txt").read_text().splitlines(keepends=True)
    (tmp_path / "adder_test.txt").write_text("".join(lines[:-1]))  # cut at a line boundary
    monkeypatch.setattr(adder_data, "TEST_SET_PATH", tmp_path / "adder_test.txt")
    with pytest.raises(ValueError, match="holds 9999 problems, not the committed 10000"):
        load_test_set(tmp_path / "adder_test.txt")
    assert len(load_test_set()[0]) == 10_000  # the committed one still loads


@pytest.mark.parametrize(
    "problems, error, message",
    [
        (None, TypeError, "not NoneType"),
        (b"5+5", TypeError, "not bytes"),  # was: "problem 53 is not a string"
        (bytearray(b"5+5"), TypeError, "not bytes"),
        (55, TypeError, "not int"),
        ([None], ValueError, "problem None is not a string"),
        ([b"5+5"], ValueError, "is not a string"),
        (["5" * 5000 + "+1"], ValueError, "more than 3 digits"),
        (["1+1", "12a+3"], ValueError, "'12a\\+3'"),
    ],
)
def test_solve_names_bad_input(adder, problems, error, message):
    with pytest.raises(error, match=message):
        adder.solve(problems)


def test_solve_reads_thousands_of_leading_zeros_and_any_iterable(adder):
    assert adder.solve(["0" * 5000 + "5+5"]) == ["10"]  # was: Python's 4,300-digit limit
    assert adder.solve(("663+497", " 5 + 5 ")) == ["1160", "10"]
    assert adder.solve(p for p in ["1+999"]) == ["1000"]


@pytest.mark.parametrize(
    "name, error, message",
    [
        (None, TypeError, "not NoneType None"),  # was: AttributeError
        (Path("data/adder.pt"), TypeError, "Adder.load\\(path\\)"),
        (3, TypeError, "not int 3"),
        ("sortedness-", ValueError, "unknown encoding ''"),
        ("Adder", ValueError, "unknown pretrained model 'Adder'"),
    ],
)
def test_load_pretrained_names_bad_names(name, error, message):
    with pytest.raises(error, match=message):
        attnkit.load_pretrained(name)


@pytest.fixture(scope="module")
def alibi():
    return load_classifier("alibi")


@pytest.mark.parametrize(
    "batch_size, error, message",
    [
        (None, TypeError, "batch_size must be a whole number ≥ 1, not None"),
        (2.5, TypeError, "not 2.5"),
        (True, TypeError, "not True"),
        (0, ValueError, "must be ≥ 1, not 0"),
        (-3, ValueError, "not -3"),
    ],
)
def test_predict_checks_batch_size(alibi, batch_size, error, message):
    with pytest.raises(error, match=message):
        alibi.predict([[1, 2, 3]], batch_size=batch_size)


@pytest.mark.parametrize("encoding, cap", [("alibi", 4096), ("relative", 4096), ("rope", 4096), ("learned", 256)])
def test_every_encoding_has_a_length_cap(encoding, cap):
    model = load_classifier(encoding)
    assert model.length_cap == cap
    with pytest.raises(ValueError, match=f"sequence 1 has length {cap + 1}, longer than .*\\({cap} positions\\)"):
        model.predict([[1, 2], [5] * (cap + 1)])


def test_a_16000_token_sequence_is_refused_at_once_naming_the_memory_cap(alibi):
    start = time.perf_counter()
    with pytest.raises(ValueError, match="memory cap of predict \\(1024 MiB"):  # was: a raw allocator error
        alibi.predict([list(range(100)) * 160])
    assert time.perf_counter() - start < 1


def test_a_huge_batch_size_is_bounded_by_the_memory_budget(alibi):
    rows = [[1, 2, 3, 5], [3, 1, 2], sorted(i % 100 for i in range(300))]
    assert alibi.predict(rows, batch_size=10**9) == alibi.predict(rows)
    assert alibi.predict(rows)[:2] == [True, False]


# ---------------------------------------------------------------- threads ----------------------


def test_another_threads_solve_waits_for_an_ablate_block_and_sees_the_intact_model(adder):
    answers = []
    with adder.ablate(adder.heads):
        ablated = adder.solve(EDGE_CASES)  # this thread sees the ablation
        other = threading.Thread(target=lambda: answers.append(adder.solve(EDGE_CASES)))
        other.start()
        other.join(timeout=1.0)
        assert other.is_alive() and answers == []  # waiting on the model's lock
    other.join(timeout=30)
    assert answers == [TRUTH] and ablated != TRUTH


def test_the_evaluation_thread_rule(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for cores, threads in ((1, 1), (2, 1), (4, 2), (16, 2)):
        monkeypatch.setattr(runtime, "usable_cores", lambda: cores)
        assert runtime.eval_threads_for(10_000) == threads
        assert runtime.eval_threads_for(10) == 1  # a few problems: one thread
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert runtime.eval_threads_for(10_000) is None  # the user chose


def test_evaluation_threads_are_restored_even_with_concurrent_callers(adder, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "usable_cores", lambda: 4)
    monkeypatch.setattr(runtime, "SMALL_BATCH", 3)  # "large" from 3 problems: a quick test
    torch.set_num_threads(1)
    seen = []
    real = adder.model.greedy
    monkeypatch.setattr(adder.model, "greedy", lambda src: seen.append(torch.get_num_threads()) or real(src))
    workers = [threading.Thread(target=adder.solve, args=(["1+1"] * 3,)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert seen == [2, 2, 2] and torch.get_num_threads() == 1
    adder.solve(["1+1"])
    assert seen[-1] == 1 and torch.get_num_threads() == 1
