import json
from dataclasses import asdict

import pytest
import torch

from attnkit.adder import Adder
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.core.checkpoint import CheckpointWarning, save_checkpoint, save_json


def test_round_trip(tmp_path):
    model = Seq2SeqTransformer(Seq2SeqConfig(d_model=16, d_ff=32))
    Adder(model).save(tmp_path / "a.pt", {"exact_match": 0.0})  # untrained: its true score
    with pytest.warns(CheckpointWarning, match="below the target"):
        loaded = Adder.load(tmp_path / "a.pt")  # onto the GPU where there is one
    assert loaded.cfg == model.cfg and loaded.metrics == {"exact_match": 0.0}
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.model.state_dict()[k].cpu())


def test_corrupt_checkpoint_gets_a_clear_error(tmp_path):
    path = tmp_path / "bad.pt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="corrupt"):
        Adder.load(path)


def test_truncated_checkpoint_gets_a_clear_error(tmp_path):
    Adder(Seq2SeqTransformer(Seq2SeqConfig(d_model=16, d_ff=32))).save(tmp_path / "a.pt")
    data = (tmp_path / "a.pt").read_bytes()
    (tmp_path / "a.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupt"):
        Adder.load(tmp_path / "a.pt")


def test_checkpoint_of_another_kind_or_config(tmp_path):
    model = Seq2SeqTransformer(Seq2SeqConfig(d_model=16, d_ff=32))
    save_checkpoint(tmp_path / "c.pt", "sortedness", {}, model.state_dict(), {})
    with pytest.raises(ValueError, match="not 'adder'"):
        Adder.load(tmp_path / "c.pt")
    cfg = asdict(model.cfg)  # every key: a config with one missing is refused (test_robustness.py)
    save_checkpoint(tmp_path / "d.pt", "adder", {**cfg, "d_model": 32}, model.state_dict(), {})
    with pytest.raises(ValueError, match="does not fit"):
        Adder.load(tmp_path / "d.pt")
    save_checkpoint(tmp_path / "e.pt", "adder", {"n_layers_typo": 3}, model.state_dict(), {})
    with pytest.raises(ValueError, match="unknown config"):
        Adder.load(tmp_path / "e.pt")


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    save_json(tmp_path / "r.json", {"a": 1})

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(RuntimeError):
        save_checkpoint(tmp_path / "r.pt", "adder", {}, {}, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1}


def test_equal_payloads_give_identical_files(tmp_path):
    """Reruns must reproduce the committed files byte for byte, however the payload was built."""
    model = Seq2SeqTransformer(Seq2SeqConfig(d_model=16, d_ff=32))
    metrics = {"seed": 0, "train": {"seed": 0, "lr": 3e-3}, "exact_match": 0.0}
    seed = "".join(["se", "ed"])  # equal to "seed" but another object, as after a trip between processes
    rebuilt = {seed: 0, "train": {"seed": 0, "lr": 3e-3}, "exact_match": 0.0}
    assert rebuilt == metrics and seed is not "seed"  # noqa: F632
    cfg = asdict(model.cfg)
    save_checkpoint(tmp_path / "a.pt", "adder", cfg, model.state_dict(), metrics)
    save_checkpoint(tmp_path / "b.pt", "adder", cfg, model.state_dict(), rebuilt)
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    with pytest.warns(CheckpointWarning, match="below the target"):
        assert Adder.load(tmp_path / "a.pt").metrics == metrics
