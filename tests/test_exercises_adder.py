"""Notebook 02's checkers (attnkit.exercises.adder): the notebook's solutions and correct variants
written differently pass; planted mistakes get their own hint; whatever a learner hands over gives
exactly one line and no traceback; an unfilled stub gives ⏳; the checkers leave the global RNG alone."""

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnkit.exercises import adder as adder_checks
from attnkit.exercises import models as check_models

from helpers import assert_hint, checker_line

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "02_training_the_adder.ipynb"
CHECKS = {
    "02-shift": adder_checks.check_shift,
    "02-loss": adder_checks.check_teacher_forcing_loss,
    "02-accuracy": adder_checks.check_accuracies,
    "02-greedy": adder_checks.check_greedy,
}


def run(check, fn):
    return checker_line(check, fn)


def stub(*args):
    raise NotImplementedError("your code here")


# ---------------------------------------------------------------- the notebook's solutions


def solution_namespace():
    """Every solution cell of notebook 02, executed: its functions by name."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    namespace = {"torch": torch, "F": F, "np": np}
    ids = []
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            ids.append(cell.metadata["nbgrader"]["grade_id"])
            exec(cell.source, namespace)
    return namespace, ids


def test_the_notebook_solutions_pass():
    namespace, ids = solution_namespace()
    assert sorted(ids) == sorted(CHECKS)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    checks = [c for c in nb.cells if c.cell_type == "code" and "check" in c.metadata.get("tags", [])]
    assert sorted(c.metadata["attnkit"]["exercise"] for c in checks) == sorted(CHECKS)
    for cell in checks:
        call = re.fullmatch(r"adder_checks\.(check_\w+)\((my_\w+)\);", cell.source.strip())
        assert call, cell.source
        assert getattr(adder_checks, call[1]) is CHECKS[cell.metadata["attnkit"]["exercise"]]
        passed, line = run(getattr(adder_checks, call[1]), namespace[call[2]])
        assert passed, line


def test_the_student_stubs_say_not_implemented():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            source = re.sub(
                r"( *)### BEGIN SOLUTION.*?### END SOLUTION",
                lambda m: f'{m[1]}raise NotImplementedError("your code here")',
                cell.source,
                flags=re.S,
            )
            namespace = {"torch": torch, "F": F, "np": np}
            exec(source, namespace)
            fn = next(v for k, v in namespace.items() if k.startswith("my_"))
            passed, line = run(CHECKS[cell.metadata["nbgrader"]["grade_id"]], fn)
            assert not passed and line.startswith("⏳") and "not implemented yet" in line, line


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
def test_stub_gives_hourglass(check):
    passed, line = run(check, stub)
    assert not passed and line.startswith("⏳ ") and "not implemented yet" in line


class NotAModule:  # a class handed over instead of a function
    def __init__(self, *args):
        self.args = args


def generator_result(*args):
    yield from args


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
@pytest.mark.parametrize(
    "fn",
    [
        lambda: None,  # wrong signature
        lambda *args: None,  # forgot return
        lambda *args: [[1, 2], [3, 4]],  # lists
        lambda *args: np.zeros((2, 3)),  # a numpy array
        lambda *args: (np.array(["a", "b"]),) * 2,  # numpy strings
        lambda *args: (np.zeros(3), None),
        lambda *args: "0.5",
        lambda *args: generator_result(*args),
        lambda *args: torch.full((2, 2), float("nan")),
        lambda *args: 1 / 0,
        NotAModule,
        None,
        42,
        torch.nn.Linear(2, 2),
    ],
    ids=[
        "signature",
        "none",
        "list",
        "numpy",
        "numpy-str",
        "pair-with-none",
        "str",
        "generator",
        "nan",
        "zerodiv",
        "class",
        "fn-none",
        "int",
        "module",
    ],
)
def test_never_raises(check, fn):
    passed, line = run(check, fn)
    assert not passed and line[0] in "❌⏳", line


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
def test_checkers_leave_the_global_rng_alone(check):
    namespace, _ = solution_namespace()
    fn = {
        adder_checks.check_shift: "my_shift",
        adder_checks.check_teacher_forcing_loss: "my_teacher_forcing_loss",
        adder_checks.check_accuracies: "my_accuracies",
        adder_checks.check_greedy: "my_greedy",
    }[check]
    state = torch.get_rng_state()
    assert run(check, namespace[fn])[0]
    assert torch.equal(state, torch.get_rng_state())


# ---------------------------------------------------------------- shift


@pytest.mark.parametrize(
    "fn",
    [
        lambda tgt: (tgt[:, :-1], tgt[:, 1:]),
        lambda tgt: [tgt.narrow(1, 0, tgt.size(1) - 1), tgt.narrow(1, 1, tgt.size(1) - 1)],
        lambda tgt: (torch.as_tensor(np.asarray(tgt)[:, :-1]), torch.as_tensor(np.asarray(tgt)[:, 1:])),  # numpy inside
        lambda tgt: (torch.stack([row[:-1] for row in tgt]), torch.stack([row[1:] for row in tgt])),
        lambda tgt: (tgt.clone()[..., :-1], tgt.roll(-1, 1)[:, :-1]),  # roll then cut
    ],
    ids=["slices", "narrow", "numpy-inside", "per-row", "roll-then-cut"],
)
def test_shift_correct_variants_pass(fn):
    assert run(adder_checks.check_shift, fn)[0]


def in_place(tgt):
    tgt[:, 0] = tgt[:, 0]  # harmless
    tgt[tgt == tgt.max()] = 0
    return tgt[:, :-1], tgt[:, 1:]


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda tgt: (tgt, tgt), "unshifted"),
        (lambda tgt: (tgt[:, 1:], tgt[:, :-1]), "shifted the wrong way"),
        (lambda tgt: (tgt, tgt.roll(-1, 1)), "torch.roll wraps around"),
        (lambda tgt: (tgt[:-1], tgt[1:]), "you sliced the rows (the batch axis)"),
        (lambda tgt: (tgt[:, :-1], tgt[:, :-1]), "the model would learn to copy its input"),
        (lambda tgt: (tgt[:, :-1], tgt[:, 1:-1]), "decoder_input is right but target is not"),
        (lambda tgt: (tgt[:, 1:], tgt[:, 1:]), "your decoder input equals the target"),
        (lambda tgt: (tgt[:, :-2], tgt[:, 1:]), "target is right but decoder_input is not"),
        (lambda tgt: (tgt[:, :5], tgt[:, 1:6]), "no fixed numbers"),  # the notebook's 6 positions
        (lambda tgt: (tgt[:, :-2], tgt[:, 2:]), "expected (3, 6) each"),
        (lambda tgt: None, "did you forget `return decoder_input, target`?"),
        (
            lambda tgt: torch.stack([tgt[:, :-1], tgt[:, 1:]]),
            "should return a pair (decoder_input, target), not a Tensor",
        ),
        (lambda tgt: (tgt[:, :-1], tgt[:, 1:], tgt), "not a tuple of 3"),
        (lambda tgt: (tgt[:, :-1].tolist(), tgt[:, 1:].tolist()), "your decoder_input is a list"),
        (in_place, "changed tgt in place"),
        (lambda tgt, pad_id: (tgt[:, :-1], tgt[:, 1:]), "the exercise's signature is my_shift(tgt)"),
        (lambda tgt: (tgt[:, :-1] + 0.5, tgt[:, 1:]), "non-integer values"),
        # one type rule (issue 27): ids are torch.long tensors; numpy and float ids are refused
        (
            lambda tgt: (np.asarray(tgt)[:, :-1], np.asarray(tgt)[:, 1:]),
            "your decoder_input is a ndarray, expected a torch tensor",
        ),
        (
            lambda tgt: (tgt[:, :-1].float(), tgt[:, 1:]),
            "torch.float32 tensor of whole numbers: token ids are integers",
        ),
    ],
)
def test_shift_mistakes_get_their_hint(fn, hint):
    assert_hint(adder_checks.check_shift, fn, hint)


# ---------------------------------------------------------------- teacher-forced loss


def flat_ce(logits, target, **kwargs):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1), **kwargs)


def loss_by_gather(model, src, tgt, pad_id):
    logp = model(src, tgt[:, :-1]).log_softmax(-1)
    target = tgt[:, 1:]
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    real = (target != pad_id).float()
    return (nll * real).sum() / real.sum()


def loss_whole_then_cut(model, src, tgt, pad_id):  # causal: the last position's logits are unused
    return flat_ce(model(src, tgt)[:, :-1], tgt[:, 1:], ignore_index=pad_id)


def loss_transposed(model, src, tgt, pad_id):
    return F.cross_entropy(model(src, tgt[:, :-1]).transpose(1, 2), tgt[:, 1:], ignore_index=pad_id)


def loss_minus_100(model, src, tgt, pad_id):
    target = tgt[:, 1:].masked_fill(tgt[:, 1:] == pad_id, -100)
    return flat_ce(model(src, tgt[:, :-1]), target)


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, s, t, p: flat_ce(m(s, t[:, :-1]), t[:, 1:], ignore_index=p),
        loss_by_gather,
        loss_whole_then_cut,
        loss_transposed,
        loss_minus_100,
    ],
    ids=["reference", "gather", "whole-then-cut", "transposed", "minus-100"],
)
def test_loss_correct_variants_pass(fn):
    assert run(adder_checks.check_teacher_forcing_loss, fn)[0]


def masked(model, src, tgt, pad_id, divide, mask_from="target"):
    logits, target = model(src, tgt[:, :-1]), tgt[:, 1:]
    token = F.cross_entropy(logits.transpose(1, 2), target, reduction="none")  # (batch, pos)
    real = ((target if mask_from == "target" else tgt[:, :-1]) != pad_id).float()
    if divide == "rows":
        return ((token * real).sum(1) / real.sum(1)).mean()
    if divide == "positions":
        return (token * real).sum() / real.numel()
    if divide == "sum":
        return (token * real).sum()
    if divide == "per-position":
        return ((token * real).sum(0) / real.sum(0))[real.sum(0) > 0].mean()
    return (token * real).sum() / real.sum()


def loss_no_grad(model, src, tgt, pad_id):
    with torch.no_grad():
        return flat_ce(model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=pad_id)


NOTEBOOK_MODEL = check_models.ToySeq2Seq(14, seed=0)  # stands for a model from the notebook (`live.model`)


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda m, s, t, p: flat_ce(m(s, t), t, ignore_index=p), "not shifted"),
        (lambda m, s, t, p: flat_ce(m(s, t[:, 1:]), t[:, :-1], ignore_index=p), "shifted the wrong way"),
        (lambda m, s, t, p: flat_ce(m(s, t[:, :-1]), t[:, 1:]), "padding counted in the loss"),
        (lambda m, s, t, p: flat_ce(m(s, t[:, :-1]), t[:, 1:], ignore_index=13), "other ids than the notebook's 13"),
        (lambda m, s, t, p: masked(m, s, t, p, "mean", mask_from="input"), "padding mask one position off"),
        (lambda m, s, t, p: masked(m, s, t, p, "rows"), "you averaged each row, then the rows"),
        (lambda m, s, t, p: masked(m, s, t, p, "positions"), "divide by the number of real target tokens"),
        (lambda m, s, t, p: masked(m, s, t, p, "sum"), "you summed the token losses"),
        (lambda m, s, t, p: masked(m, s, t, p, "per-position"), "you averaged each position over the rows"),
        (lambda m, s, t, p: flat_ce(m(s, t[:, :-1]).softmax(-1), t[:, 1:], ignore_index=p), "softmax applied before"),
        (
            lambda m, s, t, p: F.nll_loss(
                m(s, t[:, :-1]).reshape(-1, m(s, t[:, :-1]).size(-1)), t[:, 1:].reshape(-1), ignore_index=p
            ),
            "F.nll_loss on raw logits",
        ),
        (lambda m, s, t, p: flat_ce(m(s, t[:, :-1]), t[:, 1:], ignore_index=p).item(), "not a tensor with a gradient"),
        (loss_no_grad, "not a tensor with a gradient"),
        (lambda m, s, t, p: F.cross_entropy(m(s, t[:, :-1]), t[:, 1:], ignore_index=p), "flatten with"),
        (
            lambda m, s, t, p: flat_ce(m(s, t[:, :-1]), t[:, 1:], ignore_index=p, reduction="none"),
            "reduce it to one number",
        ),
        (lambda m, s, t, p: flat_ce(m(t[:, :-1], s), t[:, 1:], ignore_index=p), "arguments swapped"),
        (
            lambda m, s, t, p: flat_ce(NOTEBOOK_MODEL(s % 9, t[:, :-1]), t[:, 1:], ignore_index=p),
            "never called the model",
        ),
        (lambda m, s, t, p: None, "did you forget `return loss`?"),
        (lambda m, s, t: 0.0, "the exercise's signature is my_teacher_forcing_loss(model, src, tgt, pad_id)"),
    ],
)
def test_loss_mistakes_get_their_hint(fn, hint):
    assert_hint(adder_checks.check_teacher_forcing_loss, fn, hint)


def test_the_loss_candidates_are_told_apart():
    """In the first case (the one every learner meets first) each planted mistake gives a loss of its
    own, far from the right one and from every other mistake's; later cases add batch 1, the kit's
    model and other padding ids."""
    name, build, src, tgt, pad, eos = adder_checks._loss_cases()[0]
    model = build()
    with torch.no_grad():
        right = float(flat_ce(model.logits(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=pad))
    values = sorted([right] + [v for v, _ in adder_checks._loss_candidates(model, src, tgt, pad, eos)])
    assert len(values) == 13 and min(np.diff(values)) > 1e-3


# ---------------------------------------------------------------- accuracies


def accuracies_numpy(pred, gold, pad_id):
    pred, gold = np.asarray(pred), np.asarray(gold)
    real = gold != pad_id
    right = (pred == gold) & real
    return float(np.mean([(right[i] == real[i]).all() for i in range(len(gold))])), right.sum() / real.sum()


def accuracies_loops(pred, gold, pad_id):
    rows_right, tokens_right, tokens = 0, 0, 0
    for p_row, g_row in zip(pred.tolist(), gold.tolist()):
        ok = True
        for p, g in zip(p_row, g_row):
            if g == pad_id:
                continue
            tokens += 1
            tokens_right += p == g
            ok = ok and p == g
        rows_right += ok
    return rows_right / len(gold), tokens_right / tokens


def accuracies_tensors(pred, gold, pad_id):
    real = gold.ne(pad_id)
    wrong = pred.ne(gold) & real
    return (~wrong.any(-1)).float().mean(), torch.where(real, pred == gold, False).sum().float() / real.sum()


@pytest.mark.parametrize(
    "fn",
    [
        lambda p, g, pad: (
            ((p == g) | (g == pad)).all(1).float().mean().item(),
            ((p == g) & (g != pad)).sum().item() / (g != pad).sum().item(),
        ),
        accuracies_numpy,
        accuracies_loops,
        accuracies_tensors,
    ],
    ids=["reference", "numpy", "loops", "tensors"],
)
def test_accuracies_correct_variants_pass(fn):
    assert run(adder_checks.check_accuracies, fn)[0]


def right_real(p, g, pad):
    return p == g, g != pad


def exact_ref(p, g, pad):
    right, real = right_real(p, g, pad)
    return (right | ~real).all(1).float().mean()


def token_ref(p, g, pad):
    right, real = right_real(p, g, pad)
    return (right & real).sum() / real.sum()


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda p, g, pad: (exact_ref(p, g, pad), (p == g).float().mean()), "padding counted in the token accuracy"),
        (lambda p, g, pad: (exact_ref(p, g, 13), token_ref(p, g, 13)), "other ids than the notebook's 13"),
        (
            lambda p, g, pad: ((p == g).all(1).float().mean(), token_ref(p, g, pad)),
            "padding counted in the exact match",
        ),
        (
            lambda p, g, pad: (exact_ref(p, g, pad), (((p == g) & (g != pad)).sum(1) / (g != pad).sum(1)).mean()),
            "you averaged each row's accuracy",
        ),
        (lambda p, g, pad: (token_ref(p, g, pad), token_ref(p, g, pad)), "your exact match is per token"),
        (lambda p, g, pad: (((p == g) & (g != pad)).any(1).float().mean(), token_ref(p, g, pad)), "use .all, not .any"),
        (
            lambda p, g, pad: (((p == g) | (g == pad)).all(0).float().mean(), token_ref(p, g, pad)),
            "exact match over the wrong axis",
        ),
        (lambda p, g, pad: (token_ref(p, g, pad), exact_ref(p, g, pad)), "the two are swapped"),
        (lambda p, g, pad: (100 * exact_ref(p, g, pad), 100 * token_ref(p, g, pad)), "percentages"),
        (lambda p, g, pad: (exact_ref(p, g, pad), ((p == g) & (g != pad)).sum()), "number of right tokens"),
        (lambda p, g, pad: (((p == g) | (g == pad)).all(1).sum(), token_ref(p, g, pad)), "number of right rows"),
        (
            lambda p, g, pad: (exact_ref(p, g, pad), ((p == g) & (g != pad)).sum() // (g != pad).sum()),
            "integer division",
        ),
        (
            lambda p, g, pad: (exact_ref(p, g, pad), ((p == g) & (p != pad)).sum() / (p != pad).sum()),
            "the padding mask comes from pred",
        ),
        (lambda p, g, pad: ((p == g) | (g == pad)).all(1).float(), "not a Tensor"),
        (lambda p, g, pad: (((p == g) | (g == pad)).all(1).float(), token_ref(p, g, pad)), "one value per row"),
        (lambda p, g, pad: (exact_ref(p, g, pad), (p == g) & (g != pad)), "one value per token"),
        (lambda p, g, pad: (exact_ref(p, g, pad) > 0, token_ref(p, g, pad)), "your exact_match is a bool"),
        (
            lambda p, g, pad: (exact_ref(p, g, pad), token_ref(p, g, pad) * 0.9),
            "your token_accuracy is 0.75, expected 0.8333",
        ),
        (lambda p, g: (0.5, 0.5), "the exercise's signature is my_accuracies(pred, gold, pad_id)"),
    ],
)
def test_accuracies_mistakes_get_their_hint(fn, hint):
    assert_hint(adder_checks.check_accuracies, fn, hint)


def test_accuracies_first_batch_tells_the_mistakes_apart():
    pred, gold, pad = adder_checks._accuracy_cases()[0]
    right, real = pred == gold, gold != pad
    exact, token = float(exact_ref(pred, gold, pad)), float(token_ref(pred, gold, pad))
    assert (exact, round(token, 4)) == (0.5, 0.8333)  # the numbers the notebook's example quotes
    token_mistakes = [
        right.double().mean(),
        ((right & real).sum(1) / real.sum(1)).mean(),
        (right & (pred != pad)).sum() / (pred != pad).sum(),
    ]
    exact_mistakes = [
        right.all(1).double().mean(),
        (right & real).any(1).double().mean(),
        (right | ~real).all(0).double().mean(),
    ]
    assert len({round(float(v), 4) for v in token_mistakes + [token, exact]}) == 5
    assert len({round(float(v), 4) for v in exact_mistakes + [token, exact]}) == 5


# ---------------------------------------------------------------- greedy decoding


def greedy(
    model, src, bos_id, eos_id, max_steps, *, stop="all", steps=None, position=-1, feed="all", keep_bos=False, dim=-1
):
    """A learner's greedy decoding, with at most one planted mistake switched on."""
    tgt = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(max_steps if steps is None else steps):
        fed = {"all": tgt, "bos": tgt[:, :1], "newest": tgt[:, -1:]}[feed]
        logits = model(src, fed)
        token = logits[:, position].argmax(-1) if dim == -1 else logits.argmax(dim)[:, -1]
        tgt = torch.cat([tgt, token[:, None]], dim=1)
        finished |= token == eos_id
        if (stop == "all" and finished.all()) or (stop == "any" and finished.any()):
            break
    return tgt if keep_bos else tgt[:, 1:]


def greedy_rows(model, src, bos_id, eos_id, max_steps):  # one row at a time, all max_steps, no early stop
    rows = []
    for i in range(len(src)):
        seq = [bos_id]
        for _ in range(max_steps):
            logits = model(src[i : i + 1], torch.tensor([seq]))
            seq.append(int(logits[0, -1].softmax(-1).argmax()))
        rows.append(seq[1:])
    return torch.tensor(rows)


def greedy_prealloc(model, src, bos_id, eos_id, max_steps):  # eos-padded after the end
    model.eval()
    with torch.no_grad():
        tgt = torch.full((len(src), max_steps + 1), bos_id)
        done = torch.zeros(len(src), dtype=torch.bool)
        for t in range(max_steps):
            nxt = model(src, tgt[:, : t + 1])[:, t].argmax(-1)
            tgt[:, t + 1] = torch.where(done, torch.full_like(nxt, eos_id), nxt)
            done = done | (nxt == eos_id)
            if done.all():
                return tgt[:, 1 : t + 2]
        return tgt[:, 1:]


def greedy_sampling(model, src, bos_id, eos_id, max_steps):
    gen = torch.Generator().manual_seed(0)
    tgt = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    for _ in range(max_steps):
        probs = model(src, tgt)[:, -1].softmax(-1)
        tgt = torch.cat([tgt, torch.multinomial(probs, 1, generator=gen)], 1)
    return tgt[:, 1:]


GLOBAL_TGT = torch.tensor([[11, 1, 1, 6, 0, 12], [11, 1, 0, 12, 13, 13]])  # the notebook's `tgt`


def greedy_teacher_forced(model, src, bos_id, eos_id, max_steps):
    return model(src, GLOBAL_TGT[:, :-1]).argmax(-1)


def greedy_list(model, src, bos_id, eos_id, max_steps):
    tgt, out = torch.full((src.size(0), 1), bos_id), []
    for _ in range(max_steps):
        token = model(src, tgt)[:, -1:].argmax(-1)
        out.append(token)
        tgt = torch.cat([tgt, token], 1)
    return out


def greedy_values(model, src, bos_id, eos_id, max_steps):  # the max logits, not their positions
    tgt, out = torch.full((src.size(0), 1), bos_id), []
    for _ in range(max_steps):
        best = model(src, tgt)[:, -1].max(-1)
        out.append(best.values)
        tgt = torch.cat([tgt, best.indices[:, None]], 1)
    return torch.stack(out, 1).detach()


@pytest.mark.parametrize(
    "fn",
    [
        greedy,
        lambda m, s, b, e, n: greedy(m, s, b, e, n, stop="never"),
        greedy_rows,
        greedy_prealloc,
    ],
    ids=["early-stop", "all-steps", "row-by-row", "preallocated"],
)
def test_greedy_correct_variants_pass(fn):
    assert run(adder_checks.check_greedy, fn)[0]


@pytest.mark.parametrize(
    "fn, hint",
    [
        (
            lambda m, s, b, e, n: greedy_prealloc(m, s, b, e, n).numpy(),
            "your output is a ndarray, expected a torch tensor",
        ),
        (lambda m, s, b, e, n: greedy_prealloc(m, s, b, e, n).float(), "torch.float32 tensor of whole numbers"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n, feed="bos"), "every step gives the same token"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n, position=0), "every step gives the same token"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n, feed="newest"), "you fed the decoder only the newest token"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n, stop="any"), "you stopped when row 1 wrote </s>, but row 0"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n, stop="never", steps=n - 1), "off by one in the loop?"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n, stop="never", keep_bos=True), "your output starts with <s>"),
        (
            lambda m, s, b, e, n: greedy(m, s, b, e, n, stop="never", keep_bos=True)[:, :n],
            "your output starts with <s>",
        ),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n, stop="never", steps=n + 1), "at most max_steps = 7"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n, stop="never", steps=100), "or not stop at max_steps?"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n, dim=1), "argmax over the wrong axis"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n).flip(1), "the model's last-position logits peak at"),
        (greedy_sampling, "no sampling"),
        (greedy_teacher_forced, "teacher-forced targets or a variable from the notebook?"),
        (greedy_list, "join them into one (batch, steps) tensor"),
        (greedy_values, "non-integer values"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n)[:, :, None], "squeeze the last axis"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n, stop="never").T, "transposed?"),
        (lambda m, s, b, e, n: m.greedy(s), "this model only has model(src, tgt) -> logits"),
        (
            lambda m, s, b, e, n: greedy(m, s, b, e, m.cfg.max_tgt_len - 1),
            "this model only has model(src, tgt) -> logits",
        ),
        (lambda m, s, b, e, n: greedy(lambda x, y: m(y, x), s, b, e, n), "arguments swapped"),
        (lambda m, s, b, e, n: torch.zeros(len(s), n, dtype=torch.long), "never called the model"),
        (lambda m, s, b, e, n: greedy(m, s, b, e, n)[:1], "expected 4: one row per row of src"),
        (lambda m, s, b, e: None, "the exercise's signature is my_greedy(model, src, bos_id, eos_id, max_steps)"),
    ],
)
def test_greedy_mistakes_get_their_hint(fn, hint):
    assert_hint(adder_checks.check_greedy, fn, hint)


def test_greedy_cases_are_robust_and_varied():
    """Every case's argmax wins by a clear margin (a correct solution batched differently still
    passes) but the one whose logits tie exactly, and the cases hold rows that end early, rows that
    end later and rows that never do."""
    endings = []
    for name, build, src, bos, eos, max_steps in adder_checks._greedy_cases():
        model = build()
        assert model is not None, name
        out = adder_checks._reference_greedy(model, src, bos, max_steps)
        fed = torch.cat([torch.full((len(src), 1), bos), out[:, :-1]], 1)
        with torch.no_grad():
            top = model.logits(src, fed).topk(2, -1).values
        gap = top[..., 0] - top[..., 1]
        if "tie" in name:  # ties within the checked tokens (up to each row's first </s>), and clear wins
            checked = (
                torch.arange(max_steps)[None, :] < torch.tensor([adder_checks._first_eos(r, eos) for r in out])[:, None]
            )
            assert (gap[checked] == 0).sum() >= 5 and (gap[checked] >= 1).sum() >= 5, name
        else:
            assert gap.min() > 0.05, name
        endings.append([adder_checks._first_eos(row, eos) if eos in row.tolist() else None for row in out])
    assert endings[0] == [6, 2, None, None]  # the first case: row 1 ends first, two never do
    assert endings[1] == [3, 5, 2, 5, 4]  # 5+5, 663+497, 0+0, 999+999, 45+55 (the committed adder)
    assert endings[2] == [None] and None in endings[3]
    assert endings[4] == [None, 5, 2]  # the tied case


def test_greedy_uses_its_own_models_and_leaves_the_committed_adder_out_when_it_is_missing(monkeypatch):
    monkeypatch.setattr(check_models, "committed_state", lambda: None)
    passed, line = run(adder_checks.check_greedy, greedy)
    assert passed and "on 4 models" in line
