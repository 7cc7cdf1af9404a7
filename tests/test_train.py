import numpy as np
import pytest
import torch

from attnkit.adder.data import EOS, PAD, VOCAB_SIZE, encode_targets
from attnkit.adder.evaluate import evaluate, greedy_correct
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


class Scripted(torch.nn.Module):
    """Stands in for the adder with fixed answers: `greedy` returns `greedy_out`, and the
    teacher-forced forward pass predicts `forced` (as one-hot logits)."""

    def __init__(self, greedy_out, forced, cfg=Seq2SeqConfig()):
        super().__init__()
        self.cfg = cfg
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.greedy_out, self.forced = torch.tensor(greedy_out), torch.tensor(forced)

    def greedy(self, src):
        return self.greedy_out

    def forward(self, src, tgt_in):
        return torch.nn.functional.one_hot(self.forced, VOCAB_SIZE).float()


E, P = EOS, PAD
A, B = np.array([5, 555, 123, 101]), np.array([5, 445, 456, 909])
#                 sum 10              1000            579             1010
GOLD = [[1, 0, E, P, P], [1, 0, 0, 0, E], [5, 7, 9, E, P], [1, 0, 1, 0, E]]


def scripted():
    greedy_out = [
        [1, 0, E, 7, 7],  # right: what follows </s> does not count
        [1, 0, 9, 0, E],  # one digit wrong
        [5, 7, 9, E, P],  # right
        [1, 0, 1, 0, 0],
    ]  # every digit right, but no </s>: wrong
    forced = [row[:] for row in GOLD]
    forced[0][3] = 5  # a wrong guess at a padding position: does not count
    forced[2][1] = 8  # one real token wrong
    return Scripted(greedy_out, forced)


def test_evaluate_on_a_hand_built_batch():
    assert encode_targets(A + B, 3)[:, 1:].tolist() == GOLD
    m = evaluate(scripted(), A, B)
    assert m["n"] == 4
    assert m["exact_match"] == pytest.approx(2 / 4)
    assert m["per_digit_accuracy"] == pytest.approx(12 / 13)  # 13 sum digits, 1 wrong
    assert m["teacher_forced_token_accuracy"] == pytest.approx(16 / 17)  # 17 real tokens (</s> too), 1 wrong
    assert m["teacher_forced_exact_match"] == pytest.approx(3 / 4)
    # carries: 5+5 one, 555+445 three in a chain, 123+456 none, 101+909 two apart (chain 1)
    assert m["by_carries"] == {
        0: {"n": 1, "exact_match": 1.0},
        1: {"n": 1, "exact_match": 1.0},
        2: {"n": 1, "exact_match": 0.0},
        3: {"n": 1, "exact_match": 0.0},
    }
    assert m["by_longest_chain"] == {
        0: {"n": 1, "exact_match": 1.0},
        1: {"n": 2, "exact_match": 0.5},
        3: {"n": 1, "exact_match": 0.0},
    }
    assert greedy_correct(scripted(), A, B).tolist() == [True, False, True, False]


def test_greedy_can_be_wrong_where_teacher_forcing_is_right():
    """The gap report C fell into: one early wrong digit, then the right continuation of the
    wrong prefix. Teacher forcing sees the true prefix and gets the whole sum right."""
    greedy_out = [[2, 0, E, P, P]] + GOLD[1:]
    m = evaluate(Scripted(greedy_out, GOLD), A, B)
    assert m["exact_match"] == pytest.approx(3 / 4) and m["teacher_forced_exact_match"] == 1.0
    assert m["teacher_forced_token_accuracy"] == 1.0


def scripted_validation(monkeypatch, scores):
    """greedy_correct during training returns the given validation scores, one per check, and
    records the weights it was asked about."""
    import attnkit.adder.train as train_module

    scores, states = iter(scores), []

    def validate(model, a, b):
        states.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return np.full(len(a), next(scores))

    monkeypatch.setattr(train_module, "greedy_correct", validate)
    return states


def test_training_keeps_the_best_validated_model_not_the_last(monkeypatch):
    states = scripted_validation(monkeypatch, [0.2, 0.7, 0.4])
    result = train_adder(TINY, AdderTrainConfig(max_steps=30, eval_every=10, n_val=200), progress=False)
    assert result.steps == 30 and [h["val_exact_match"] for h in result.history] == [0.2, 0.7, 0.4]
    final = result.model.state_dict()
    assert all(torch.equal(final[k], states[1][k]) for k in final)  # step 20's weights
    assert not all(torch.equal(final[k], states[2][k]) for k in final)


def test_training_stops_once_validation_reaches_the_target(monkeypatch):
    scripted_validation(monkeypatch, [0.2, 0.7, 0.9])
    result = train_adder(TINY, AdderTrainConfig(max_steps=30, eval_every=10, n_val=200, target=0.6), progress=False)
    assert result.steps == 20 and len(result.history) == 2


def test_the_kits_adamw_is_torchs_fused_adamw_with_lambda_lr_bit_for_bit():
    # core/runtime.py's AdamW calls the same fused kernel without torch.optim (which imports
    # torch._dynamo, 70 MB in a learner's kernel): the committed checkpoints depend on its bits.
    from attnkit.core.runtime import AdamW, warmup_cosine

    def schedule(k):
        return warmup_cosine(k, 3, 12, floor=0.1)

    torch.manual_seed(0)
    ours, theirs = torch.nn.Linear(5, 3), torch.nn.Linear(5, 3)
    theirs.load_state_dict(ours.state_dict())
    ours.bias.requires_grad_(False)  # a frozen parameter is skipped by both
    theirs.bias.requires_grad_(False)
    opt = AdamW(ours.parameters(), 3e-3, 0.01, schedule)
    ref = torch.optim.AdamW(theirs.parameters(), lr=3e-3, weight_decay=0.01, fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(ref, schedule)
    x = torch.randn(12, 8, 5)
    for step in range(12):
        for model, o in ((ours, opt), (theirs, ref)):
            o.zero_grad()
            model(x[step]).square().mean().backward()
            o.step()
        sched.step()
        assert torch.equal(ours.weight, theirs.weight), f"differs after update {step + 1}"
    assert torch.equal(ours.bias, theirs.bias)


@pytest.mark.slow  # starts a process
def test_training_does_not_import_torch_dynamo():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from attnkit.adder.model import Seq2SeqConfig\n"
        "from attnkit.adder.train import AdderTrainConfig, train_adder\n"
        "tiny = Seq2SeqConfig(d_model=16, n_heads=2, d_ff=32)\n"
        "train_adder(tiny, AdderTrainConfig(max_steps=2, eval_every=1, n_val=20), progress=False)\n"
        "assert 'torch._dynamo' not in sys.modules, 'training imported torch._dynamo (70 MB)'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
