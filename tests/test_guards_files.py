"""Issue 23, files: a journal cannot touch other files, an output never replaces another program's
file, edited checkpoints never load silently, special files are refused, files follow the umask.
Tests write to tmp_path only; data/ is read, never written."""

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from attnkit.__main__ import main
from attnkit.adder import Adder
from attnkit.core import checkpoint as ck
from attnkit.core import journal, outputs
from attnkit.core.checkpoint import CheckpointWarning, load_checkpoint, save_checkpoint
from attnkit.experiments import sortedness_runs
from attnkit.sortedness import pretrained as sp

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
TOKEN = "0123456789abcdef"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def payload():
    return load_checkpoint(DATA / "adder.pt", "adder")


@pytest.fixture
def downloaded(tmp_path):
    """A folder as a learner might unpack it: the committed adder and its report."""
    for name in ("adder.pt", "adder.json"):
        (tmp_path / name).write_bytes((DATA / name).read_bytes())
    return tmp_path / "adder.pt"


def plant_journal(primary: Path, files, token=TOKEN, raw=None):
    path = journal.journal_path(primary)
    path.write_text(raw if raw is not None else json.dumps({"token": token, "files": files}))
    return path


def load_ignoring(primary: Path, match: str):
    with pytest.warns(CheckpointWarning, match=match):
        return Adder.load(primary, device="cpu")


# ---------------------------------------------------------------- hostile journals --------------


def test_a_journal_naming_an_absolute_path_is_refused_and_the_file_stays(downloaded, tmp_path):
    important = tmp_path / "elsewhere" / "important.txt"
    important.parent.mkdir()
    important.write_text("keep me")
    (tmp_path / "payload").write_text("evil")
    plant_journal(downloaded, [str(important), "adder.pt"])
    adder = load_ignoring(downloaded, "may name only .pt and .json files")
    assert important.read_text() == "keep me" and (tmp_path / "payload").read_text() == "evil"
    assert adder.solve(["663+497"]) == ["1160"]
    assert journal.journal_path(downloaded).exists()  # reported, left for the user to judge


def test_a_journal_pointing_out_of_its_folder_is_refused(downloaded, tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text('{"model_config": 1, "train_config": 1, "test_metrics": 1}')
    (tmp_path / f".{outside.name}.{TOKEN}.tmp").write_text("{}")
    plant_journal(downloaded, [f"../{outside.name}", "adder.pt"])
    load_ignoring(downloaded, "may name only")
    assert outside.read_text().startswith('{"model_config"')
    outside.unlink()


@pytest.mark.parametrize("name", ["a/b/c.json", "notes.txt", ".hidden.json", "sub/../adder.json", "/etc/x.json"])
def test_a_journal_may_name_only_kit_files_in_its_folder_or_one_subfolder(downloaded, name):
    plant_journal(downloaded, [name, "adder.pt"])
    with pytest.raises(journal.JournalRefused, match="may name only"):
        journal.planned_renames(downloaded)


def test_a_journal_cannot_replace_another_programs_json(downloaded, tmp_path):
    (tmp_path / "package.json").write_text('{"name": "my-app"}')
    (tmp_path / f".package.json.{TOKEN}.tmp").write_text("{}")
    plant_journal(downloaded, ["package.json", "adder.pt"])
    load_ignoring(downloaded, "package.json, which is another program's JSON file")
    assert json.loads((tmp_path / "package.json").read_text()) == {"name": "my-app"}


def test_a_journal_cannot_replace_another_programs_pt_file(downloaded, tmp_path):
    other = tmp_path / "weights.pt"
    torch.save({"w": torch.ones(2)}, other)
    before = other.read_bytes()
    (tmp_path / f".weights.pt.{TOKEN}.tmp").write_bytes(b"x")
    plant_journal(downloaded, ["weights.pt", "adder.pt"])
    load_ignoring(downloaded, "another program's .pt file")
    assert other.read_bytes() == before


def test_a_journal_must_end_with_its_own_checkpoint(downloaded):
    plant_journal(downloaded, ["adder.json"])
    with pytest.raises(journal.JournalRefused, match="does not end with its own checkpoint"):
        journal.planned_renames(downloaded)


@pytest.mark.parametrize(
    "raw",
    [
        '[["/tmp/a", "/tmp/b"]]',
        '{"token": "../../x", "files": ["adder.pt"]}',
        '{"token": "0123456789abcdef", "files": []}',
        "not json",
    ],
)
def test_an_old_or_malformed_journal_is_refused(downloaded, raw):
    plant_journal(downloaded, None, raw=raw)
    with pytest.raises(journal.JournalRefused, match="not a journal attnkit wrote"):
        journal.planned_renames(downloaded)


def test_a_journal_that_is_a_symlink_or_a_fifo_is_refused_at_once(downloaded, tmp_path):
    real = tmp_path / "real.commit"
    real.write_text(json.dumps({"token": TOKEN, "files": ["adder.pt"]}))
    journal.journal_path(downloaded).symlink_to(real)
    with pytest.raises(journal.JournalRefused, match="small regular file"):
        journal.planned_renames(downloaded)
    journal.journal_path(downloaded).unlink()
    os.mkfifo(journal.journal_path(downloaded))
    with pytest.raises(journal.JournalRefused, match="small regular file"):
        journal.planned_renames(downloaded)  # never opened: a fifo would block the read forever


def test_a_temporary_that_is_a_symlink_is_not_followed(downloaded, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (tmp_path / f".adder.pt.{TOKEN}.tmp").symlink_to(secret)
    plant_journal(downloaded, ["adder.pt"])
    load_ignoring(downloaded, "is not a regular file")
    assert (DATA / "adder.pt").read_bytes() == downloaded.read_bytes()


def test_a_save_refuses_to_overwrite_a_journal_it_did_not_write(downloaded, payload):
    plant_journal(downloaded, ["/etc/passwd", "adder.pt"])
    with pytest.raises(journal.JournalRefused):
        save_checkpoint(downloaded, "adder", payload["config"], payload["state_dict"], payload["metrics"])
    assert downloaded.read_bytes() == (DATA / "adder.pt").read_bytes()


def test_a_save_removes_only_its_own_orphaned_temporaries(downloaded, payload, tmp_path):
    mine = tmp_path / f".adder.pt.{TOKEN}.tmp"
    theirs = tmp_path / ".adder.pt.notes.tmp"
    mine.write_bytes(b"orphan")
    theirs.write_text("a user's file that happens to look similar")
    save_checkpoint(downloaded, "adder", payload["config"], payload["state_dict"], payload["metrics"])
    assert not mine.exists() and theirs.read_text().startswith("a user's")


def test_write_together_refuses_a_folder_in_the_way_before_writing(tmp_path):
    (tmp_path / "r.json").mkdir()
    with pytest.raises(ValueError, match="not a regular file"):
        ck.write_together([(tmp_path / "r.json", b"{}"), (tmp_path / "m.pt", b"x")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


TWO_WRITERS = """
import sys, torch
from attnkit.core import checkpoint as ck
out, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    ck.save_checkpoint(out, "adder", {"i": i}, {"w": torch.full((64, 64), float(i))}, {"i": i},
                       report=(out.replace(".pt", ".json"),
                               {"model_config": {}, "train_config": {}, "test_metrics": i}))
"""


def test_two_processes_saving_one_checkpoint_take_turns(tmp_path):
    out = tmp_path / "m.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_WRITERS, str(out), "30"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    payload = load_checkpoint(out, "adder")
    assert payload["metrics"] == {"i": 29} and sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.pt"]


def test_files_are_written_with_the_users_umask(tmp_path, payload):
    old = os.umask(0o027)
    try:
        save_checkpoint(
            tmp_path / "a.pt",
            "adder",
            payload["config"],
            payload["state_dict"],
            payload["metrics"],
            report=(tmp_path / "a.json", {"x": 1}),
        )
        journal.atomic_write(tmp_path / "b.json", b"{}")
    finally:
        os.umask(old)
    for name in ("a.pt", "a.json", "b.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640, name


# ---------------------------------------------------------------- outputs beside others --------


@pytest.mark.parametrize("sibling", ["X.json", "X.interrupted.pt", "X.interrupted.json", "X.pt"])
def test_train_adder_never_replaces_another_programs_file_beside_its_output(tmp_path, capsys, sibling):
    other = tmp_path / sibling
    other.write_text('{"name": "my-app", "version": "1.0.0"}')
    with pytest.raises(SystemExit) as stop:
        main(["train", "adder", "--out", str(tmp_path / "X.pt")])
    assert stop.value.code == 2 and "never replaced" in capsys.readouterr().err
    assert other.read_text() == '{"name": "my-app", "version": "1.0.0"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == [sibling]


def test_study_ablation_never_replaces_another_programs_json(tmp_path, capsys):
    other = tmp_path / "package.json"
    other.write_text('{"name": "my-app"}')
    with pytest.raises(SystemExit):
        main(["study", "ablation", "--out", str(other)])
    assert "never replaced" in capsys.readouterr().err and other.read_text() == '{"name": "my-app"}'


def test_too_little_free_space_is_refused_before_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(outputs.shutil, "disk_usage", lambda p: type("U", (), {"free": 3 << 20})())
    with pytest.raises(SystemExit):
        main(["train", "adder", "--out", str(tmp_path / "a.pt")])
    assert "3.0 MiB free" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def no_training(*args, **kwargs):
    raise AssertionError("training started before the outputs were checked")


@pytest.mark.parametrize("blocker", ["runs-folder-a-file", "results-a-folder", "foreign-checkpoint"])
def test_the_experiment_checks_every_output_before_training(tmp_path, monkeypatch, blocker):
    monkeypatch.setattr(sortedness_runs, "_train_and_evaluate", no_training)
    monkeypatch.setattr(sortedness_runs, "make_train_set", no_training)
    if blocker == "runs-folder-a-file":
        (tmp_path / sp.RUNS_FOLDER).write_text("x")
        match = "is not a folder"
    elif blocker == "results-a-folder":
        (tmp_path / sp.RESULTS_PATH.name).mkdir()
        match = "not a regular file"
    else:
        (tmp_path / "sortedness-alibi.pt").write_text("my own notes")
        match = "not a PyTorch archive"
    with pytest.raises(ValueError, match=match):
        sortedness_runs.run_experiment(data_dir=tmp_path, workers=1, progress=False)


# ---------------------------------------------------------------- edited checkpoints -----------


def edited(path: Path, payload, **parts):
    """The committed adder with parts of its payload replaced, the checksum left as saved."""
    p = {**payload, **parts}
    torch.save(p, path)
    return path


def test_a_flipped_exponent_bit_in_a_weight_is_named(tmp_path, payload):
    state = {k: v.clone() for k, v in payload["state_dict"].items()}
    w = state["unembed.bias"]
    w.view(torch.int32)[0] ^= 1 << 23  # the lowest exponent bit: the value halves or doubles
    with pytest.raises(ValueError, match="weight 'unembed.bias' was changed after it was saved"):
        Adder.load(edited(tmp_path / "a.pt", payload, state_dict=state), device="cpu")


def test_an_edited_config_fails_its_checksum(tmp_path, payload):
    path = edited(tmp_path / "a.pt", payload, config={**payload["config"], "reverse_output": True})
    with pytest.raises(ValueError, match="its config was changed after it was saved"):
        Adder.load(path, device="cpu")


def test_edited_metrics_fail_their_checksum(tmp_path, payload):
    path = edited(tmp_path / "a.pt", payload, metrics={**payload["metrics"], "exact_match": 1.0})
    with pytest.raises(ValueError, match="its metrics was changed"):
        Adder.load(path, device="cpu")


def test_a_weight_added_fails_the_checksum(tmp_path, payload):
    path = edited(tmp_path / "a.pt", payload, state_dict={**payload["state_dict"], "extra": torch.ones(1)})
    with pytest.raises(ValueError, match="added or removed"):
        Adder.load(path, device="cpu")


@pytest.mark.parametrize("bad", [None, "abc", {"config": "x"}])
def test_a_missing_or_malformed_checksum_is_refused(tmp_path, payload, bad):
    p = {k: v for k, v in payload.items() if k != "checksum"}
    if bad is not None:
        p["checksum"] = bad
    torch.save(p, tmp_path / "a.pt")
    with pytest.raises(ValueError, match="no checksum" if bad is None else "malformed"):
        Adder.load(tmp_path / "a.pt", device="cpu")


def test_resave_adds_a_checksum_and_keeps_the_weights(tmp_path, payload):
    torch.save({k: v for k, v in payload.items() if k != "checksum"}, tmp_path / "a.pt")
    ck.resave(tmp_path / "a.pt")
    again = load_checkpoint(tmp_path / "a.pt", "adder")
    assert all(torch.equal(again["state_dict"][k], v) for k, v in payload["state_dict"].items())
    assert (tmp_path / "a.pt").read_bytes() == (DATA / "adder.pt").read_bytes()


def test_resave_refuses_a_file_whose_checksum_is_wrong(tmp_path, payload):
    path = edited(tmp_path / "a.pt", payload, metrics={**payload["metrics"], "exact_match": 1.0})
    with pytest.raises(ValueError, match="checksum mismatch"):
        ck.resave(path)


def resigned(path: Path, payload, config=None, metrics=None):
    """An edit made by someone who also recomputed the checksum: only behaviour can tell."""
    save_checkpoint(
        path, payload["kind"], config or payload["config"], payload["state_dict"], metrics or payload["metrics"]
    )
    return path


@pytest.mark.parametrize(
    "value, message",
    [
        ("missing", "not an accuracy"),
        (1, "config says reverse_output=True"),
        ("0.9995", "not an accuracy"),
        (True, "not an accuracy"),
        (1.5, "not an accuracy"),
        (float("nan"), "not an accuracy"),
    ],
)
def test_the_adder_check_runs_whatever_type_the_stored_metric_has(tmp_path, payload, value, message):
    metrics = {k: v for k, v in payload["metrics"].items() if k != "exact_match"}
    if value != "missing":
        metrics["exact_match"] = value
    path = resigned(tmp_path / "a.pt", payload, {**payload["config"], "reverse_output": True}, metrics)
    with pytest.raises(ValueError, match=message):
        Adder.load(path, device="cpu")


# far_as_one is not among them: the committed relative model (seed 0, regenerated on this CPU) scores
# the same on the check sample with either value, so a flip of it changes nothing the load-time check
# can see (it would at length 256, which the check does not afford).
@pytest.mark.parametrize(
    "encoding, field, value",
    [
        ("alibi", "alibi_directional", False),
        ("relative", "readout", "mean"),
        ("rope", "readout", "first"),
    ],
)
def test_a_classifier_whose_config_disagrees_with_its_weights_is_refused_and_the_field_named(
    tmp_path, encoding, field, value
):
    committed = load_checkpoint(sp.checkpoint_path(encoding), sp.KIND)
    resigned(sp.checkpoint_path(encoding, tmp_path), committed, {**committed["config"], field: value})
    was = committed["config"][field]
    with pytest.raises(
        ValueError, match=f"config says {field}={value!r}, but the weights were trained with {field}={was!r}"
    ):
        sp.load_classifier(encoding, tmp_path)


@pytest.mark.parametrize("edit", ["val-missing", "val-string", "length-missing"])
def test_a_classifier_with_edited_metrics_is_refused(tmp_path, edit):
    committed = load_checkpoint(sp.checkpoint_path("alibi"), sp.KIND)
    metrics = json.loads(json.dumps(committed["metrics"]))  # a deep copy (length keys become strings)
    metrics["hard"] = {int(k): v for k, v in metrics["hard"].items()}
    if edit == "val-missing":
        del metrics["val"]
    elif edit == "val-string":
        metrics["val"]["hard"] = "0.999"
    else:
        del metrics["hard"][64]
    resigned(sp.checkpoint_path("alibi", tmp_path), committed, metrics=metrics)
    with pytest.raises(ValueError, match="not an accuracy"):
        sp.load_classifier("alibi", tmp_path)


# ---------------------------------------------------------------- special files ----------------


def test_a_named_pipe_as_the_checkpoint_is_refused_at_once(tmp_path):
    fifo = tmp_path / "adder.pt"
    os.mkfifo(fifo)
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(pytest.raises(ValueError, Adder.load, fifo)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "loading a named pipe blocked"
    assert "not a regular file" in str(outcome[0].value)


def test_a_device_as_the_checkpoint_is_refused():
    with pytest.raises(ValueError, match="not a regular file"):
        load_checkpoint(Path("/dev/zero"), "adder")


def test_every_committed_checkpoint_carries_a_valid_checksum():
    paths = sorted(DATA.glob("*.pt")) + sorted((DATA / sp.RUNS_FOLDER).glob("*.pt"))
    assert len(paths) == 23  # 22 models and the adder's training snapshots
    for path in paths:
        payload = ck._read_payload(path)
        ck.verify_checksum(payload, path)
        assert set(payload["checksum"]["weights"]) == set(payload["state_dict"])


def test_kit_file_kind_tells_the_kits_files_from_others(tmp_path):
    assert journal.kit_file_kind(DATA / "adder.pt") == "checkpoint"
    assert journal.kit_file_kind(DATA / "adder.json") == "report"
    assert journal.kit_file_kind(DATA / "sortedness_results.json") == "report"
    assert journal.kit_file_kind(DATA / "ablation_results.json") == "report"
    np.save(tmp_path / "x.npy", np.zeros(2))
    assert journal.kit_file_kind(tmp_path / "x.npy") == "neither a .pt nor a .json file"
    assert journal.kit_file_kind(tmp_path / "missing.pt") == "missing"


def test_the_grade_table_gets_the_users_umask(tmp_path):
    """A course group reads the gradebook: the CSV is 0o666 less the umask, not mkstemp's 0o600."""
    from attnkit.course.gradebook import write_csv
    from attnkit.course.grading import Row

    old = os.umask(0o022)
    try:
        write_csv([Row("a.ipynb", "01-attention", True, "✅ passed")], tmp_path / "grades.csv")
    finally:
        os.umask(old)
    assert (tmp_path / "grades.csv").stat().st_mode & 0o777 == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left
