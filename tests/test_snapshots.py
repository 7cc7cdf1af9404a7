"""The adder's training snapshots (attnkit/adder/snapshots.py): what training writes, what loading
refuses, and what the committed ones must be. `check_committed` is run on the real file and on
files with planted bugs (the steps in the wrong order, the final weights at every step), which
it must reject."""

import numpy as np
import pytest
import torch

import attnkit
from attnkit.adder.data import load_test_set
from attnkit.adder.evaluate import greedy_correct
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.adder.snapshots import KIND, SNAPSHOT_STEPS, STORED_DTYPE, Snapshots, snapshots_path, weights_digest
from attnkit.adder.train import AdderTrainConfig, train_adder
from attnkit.core.checkpoint import _read_payload, checkpoint_bytes

TINY = Seq2SeqConfig(d_model=16, n_heads=2, d_ff=32)


def initial_weights(cfg: Seq2SeqConfig, seed: int = 0) -> dict:
    """What training starts from: the model made right after torch.manual_seed(seed) (train.py)."""
    torch.manual_seed(seed)
    return Seq2SeqTransformer(cfg).state_dict()


def check_committed(snaps: Snapshots, n_sums: int = 500) -> None:
    """What the committed snapshots must be: at least 16, taken at the planned steps in order, from
    the seed's own initial weights to the committed adder, every one different from the one
    before, learning as it goes (exact match on held-out sums rises from none to the target)."""
    steps = list(snaps.steps)
    assert len(steps) >= 16 and steps == [s for s in SNAPSHOT_STEPS if s < steps[-1]] + [steps[-1]], steps
    committed = attnkit.load_pretrained("adder").model.state_dict()
    last = snaps[-1].model.state_dict()
    assert all(torch.equal(last[k], committed[k]) for k in committed), "the last snapshot is not data/adder.pt"
    first = snaps[0].model.state_dict()
    start = initial_weights(snaps.final.cfg)
    assert all(torch.equal(first[k], start[k].to(STORED_DTYPE).float()) for k in start), "step 0 is not the seed's init"
    for i in range(1, len(snaps)):
        before, now = snaps[i - 1].model.state_dict(), snaps[i].model.state_dict()
        assert not all(torch.equal(before[k], now[k]) for k in now), f"steps {steps[i - 1]} and {steps[i]} are equal"
    a, b = load_test_set()
    a, b = a[:n_sums], b[:n_sums]
    exact = [float(greedy_correct(snaps[i].model, a, b).mean()) for i in (0, len(snaps) // 2, len(snaps) - 1)]
    assert exact[0] == 0.0 and exact[-1] >= 0.99 and exact[0] < exact[1] < exact[-1], exact


@pytest.fixture(scope="module")
def snaps():
    return attnkit.load_snapshots("adder")


def test_the_committed_snapshots(snaps):
    check_committed(snaps)
    assert len(snaps) == 16 and snaps.steps[-1] == 400
    assert snapshots_path(snaps.final_path).stat().st_size < 8e6  # the wheel grows by less than 8 MB


def planted(tmp_path, snaps, change) -> Snapshots:
    """A copy of the committed files with `change(steps, weights)` applied to the snapshot file's
    payload, saved with a fresh checksum (so only check_committed can catch it)."""
    payload = _read_payload(snapshots_path(snaps.final_path))
    steps, weights = list(payload["metrics"]["steps"]), dict(payload["state_dict"])
    steps, weights = change(steps, weights, snaps)
    metrics = {**payload["metrics"], "steps": steps}
    (tmp_path / "adder.pt").write_bytes(snaps.final_path.read_bytes())
    snapshots_path(tmp_path / "adder.pt").write_bytes(checkpoint_bytes(KIND, payload["config"], weights, metrics))
    return Snapshots(tmp_path / "adder.pt")


def _reversed_order(steps, weights, snaps):
    names = list(snaps.final.model.state_dict())
    stored = steps[:-1]
    moved = {f"step{s}.{n}": weights[f"step{t}.{n}"] for s, t in zip(stored, stored[::-1]) for n in names}
    return steps, moved


def _final_everywhere(steps, weights, snaps):
    final = snaps.final.model.state_dict()
    return steps, {f"step{s}.{n}": final[n].to(STORED_DTYPE) for s in steps[:-1] for n in final}


@pytest.mark.parametrize(
    "bug", [_reversed_order, _final_everywhere], ids=["steps-reversed", "final-weights-everywhere"]
)
def test_planted_snapshot_bugs_are_caught(tmp_path, snaps, bug):
    with pytest.raises(AssertionError):
        check_committed(planted(tmp_path, snaps, bug))


def test_loading_refuses_edited_or_foreign_snapshots(tmp_path, snaps):
    with pytest.raises(ValueError, match="not increasing"):
        planted(tmp_path, snaps, lambda s, w, _: (s[::-1], w))
    with pytest.raises(ValueError, match="do not match its steps"):
        planted(tmp_path, snaps, lambda s, w, _: (s, {k: v for k, v in w.items() if not k.startswith("step20.")}))
    # another checkpoint beside the snapshots: refused, naming the reason
    other = tmp_path / "other"
    other.mkdir()
    snapshots_path(other / "adder.pt").write_bytes(snapshots_path(snaps.final_path).read_bytes())
    model = Seq2SeqTransformer(snaps.final.cfg)
    model.load_state_dict({k: v + 1e-3 for k, v in snaps.final.model.state_dict().items()})
    attnkit.adder.Adder(model, dict(snaps.final.metrics)).save(other / "adder.pt")
    with pytest.raises(ValueError, match="belongs to another checkpoint"):
        Snapshots(other / "adder.pt")
    # a corrupt file
    snapshots_path(other / "adder.pt").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="corrupt"):
        Snapshots(other / "adder.pt")


def test_indexing(snaps):
    assert snaps[-1] is snaps.final and snaps.at_step(400) is snaps.final
    third = snaps[3]
    assert snaps[3] is third  # built once while in use
    assert [s.metrics["step"] for s in snaps[1:3]] == snaps.steps[1:3]
    with pytest.raises(IndexError, match="snapshot 16 of 16"):
        snaps[16]
    with pytest.raises(ValueError, match="no snapshot at step 7"):
        snaps.at_step(7)
    with pytest.raises(TypeError, match="indexed by position"):
        snaps["400"]
    with pytest.raises(ValueError, match="only the adder"):
        attnkit.load_snapshots("sortedness-alibi")


def test_a_snapshot_no_one_uses_is_not_kept(snaps):
    """Each built snapshot holds 1 MB of weights: a pass over all of them (notebook 07's tables, the
    progress checker) must not keep them all, while one in use stays the same object."""
    import gc
    import weakref

    used = snaps[2]
    dropped = [weakref.ref(snaps[i]) for i in range(len(snaps) - 1) if i != 2]
    gc.collect()
    assert all(ref() is None for ref in dropped)
    assert snaps[2] is used and snaps[-1] is snaps.final
    before = snaps[5].model.tok_embed.weight.clone()
    gc.collect()
    assert torch.equal(snaps[5].model.tok_embed.weight, before)  # rebuilt from the same weights


@pytest.mark.filterwarnings("ignore::attnkit.core.checkpoint.CheckpointWarning")  # a 12-step model
def test_training_writes_snapshots_with_the_checkpoint(tmp_path):
    cfg = AdderTrainConfig(max_steps=12, eval_every=4, n_val=100, target=1.1)  # never met: the best is kept
    result = train_adder(TINY, cfg, out_path=tmp_path / "m.pt", progress=False, snapshot_steps=(0, 2, 4, 6, 8, 10, 12))
    snaps = Snapshots(tmp_path / "m.pt")
    best = snaps.steps[-1]  # the best validated model's step (a step with a check), where the replay ends
    assert best in (4, 8, 12) and snaps.steps == [s for s in (0, 2, 4, 6, 8, 10, 12) if s < best] + [best]
    start = initial_weights(TINY)
    assert all(torch.equal(snaps[0].model.state_dict()[k], start[k].to(STORED_DTYPE).float()) for k in start)
    assert weights_digest(snaps[-1].model.state_dict()) == weights_digest(result.model.state_dict())


def test_snapshots_are_stored_in_half_precision(snaps):
    payload = _read_payload(snapshots_path(snaps.final_path))
    assert {v.dtype for v in payload["state_dict"].values()} == {STORED_DTYPE}
    w = snaps[5].model.state_dict()
    assert all(np.isfinite(v.numpy()).all() for v in w.values())
