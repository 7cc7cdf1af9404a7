import numpy as np
import pytest
import torch

from attnkit.adder.evaluate import evaluate
from attnkit.adder.model import Seq2SeqConfig
from attnkit.adder.train import AdderTrainConfig, train_adder

TINY = Seq2SeqConfig(d_model=16, n_heads=2, d_ff=32)


def quick(seed=0, **kw):
    return AdderTrainConfig(seed=seed, max_steps=20, eval_every=10, n_val=200, **kw)


def test_training_is_deterministic_from_the_seed():
    w1 = train_adder(TINY, quick(), progress=False).model.state_dict()
    w2 = train_adder(TINY, quick(), progress=False).model.state_dict()
    w3 = train_adder(TINY, quick(seed=1), progress=False).model.state_dict()
    assert all(torch.equal(w1[k], w2[k]) for k in w1)
    assert not all(torch.equal(w1[k], w3[k]) for k in w1)


def test_loss_falls_and_history_is_logged():
    result = train_adder(TINY, AdderTrainConfig(max_steps=60, eval_every=20, n_val=200), progress=False)
    assert [h["step"] for h in result.history] == [20, 40, 60]
    assert result.history[-1]["loss"] < 2.0  # untrained: ln(14) = 2.64


def test_interrupt_keeps_the_best_model_in_a_side_file(tmp_path, monkeypatch):
    import attnkit.adder.train as train_module
    calls = {"n": 0}
    real = train_module.greedy_correct

    def interrupting(*args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(train_module, "greedy_correct", interrupting)
    result = train_adder(TINY, quick(), out_path=tmp_path / "m.pt", progress=False)
    assert result.interrupted and result.steps == 20
    # an unfinished model never takes the checkpoint's place: it goes to a side file
    assert not (tmp_path / "m.pt").exists() and not (tmp_path / "m.json").exists()
    assert result.saved_to == tmp_path / "m.interrupted.pt" and result.metrics["interrupted"]
    assert (tmp_path / "m.interrupted.pt").exists() and (tmp_path / "m.interrupted.json").exists()


def test_evaluate_reports_greedy_and_teacher_forced_separately():
    model = train_adder(TINY, quick(), progress=False).model
    a, b = np.arange(100), np.arange(100)[::-1]
    m = evaluate(model, a, b)
    assert set(m) >= {"exact_match", "per_digit_accuracy", "teacher_forced_token_accuracy",
                      "teacher_forced_exact_match", "by_carries", "by_longest_chain"}
    assert sum(v["n"] for v in m["by_carries"].values()) == 100
    # greedy can only be as right as teacher forcing on the whole sequence
    assert m["exact_match"] <= m["teacher_forced_exact_match"] + 1e-9
