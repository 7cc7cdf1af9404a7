"""Notebook 03's checkers (attnkit.exercises.heatmaps): correct solutions written differently pass,
each planted mistake gets its own hint, and nothing a learner hands over makes one raise."""

import math
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from attnkit.adder.data import PAD
from attnkit.exercises import heatmaps as heatmap_checks
from attnkit.interp.roles import row_shares

from helpers import assert_hint, checker_line

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "03_attention_heatmaps.ipynb"


def run(check, fn):
    return checker_line(check, fn)


def fails_with(check, fn, hint):
    assert_hint(check, fn, hint)


def stub(*args):
    raise NotImplementedError("your code here")


class NotAFunction:
    """A class handed over instead of a function: calling it makes an object, not an answer."""

    def __init__(self, *args):
        self.args = args


def learner_solutions():
    """The notebook's own solution cells, executed as a learner's notebook would."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    namespace = {"np": np, "torch": torch, "math": math}
    ids = []
    for cell in nb.cells:
        grade = cell.metadata.get("nbgrader", {})
        if grade.get("solution"):
            ids.append(grade["grade_id"])
            exec(cell.source, namespace)
    assert ids == ["03-row-entropy", "03-typical-sample", "03-aligned-share"]
    return namespace


def test_the_notebook_is_laid_out_as_exercises():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for i, cell in enumerate(nb.cells):
        grade = cell.metadata.get("nbgrader")
        if not grade or not grade.get("solution"):  # solution cells (check cells are autograder tests)
            continue
        title, check = nb.cells[i - 1], nb.cells[i + 1]
        assert title.cell_type == "markdown" and title.source.startswith("### ⭐")
        assert "<details><summary>Hint</summary>" in title.source
        assert grade == {
            "grade": False,
            "grade_id": grade["grade_id"],
            "locked": False,
            "schema_version": 3,
            "solution": True,
            "task": False,
        }
        assert cell.source.count("### BEGIN SOLUTION") == cell.source.count("### END SOLUTION") == 1
        assert (check.metadata["tags"], check.metadata["attnkit"]) == (["check"], {"exercise": grade["grade_id"]})
        assert check.source.startswith("heatmap_checks.check_") and check.source.endswith(";")


@pytest.mark.parametrize(
    "check, name",
    [
        (heatmap_checks.check_row_entropy, "my_row_entropy"),
        (heatmap_checks.check_typical_sample, "my_typical_sample"),
        (heatmap_checks.check_aligned_share, "my_aligned_share"),
    ],
)
def test_the_notebook_solutions_pass_and_stubs_wait(check, name):
    assert run(check, learner_solutions()[name])[0]
    ok, line = run(check, stub)
    assert not ok and line.startswith("⏳") and "not implemented yet" in line


@pytest.mark.parametrize(
    "check", [heatmap_checks.check_row_entropy, heatmap_checks.check_typical_sample, heatmap_checks.check_aligned_share]
)
@pytest.mark.parametrize(
    "handed",
    [
        None,
        [1, 2],
        np.zeros(3),
        "my_function",
        NotAFunction,
        lambda: 0,  # wrong signature: no argument
        lambda *args: None,  # forgot return
        lambda *args: (x for x in range(3)),  # a generator
        lambda *args: "0.5",  # a string
        lambda *args: {"share": 0.5},  # a dict
        lambda *args: [[1, 2], [3]],  # ragged
        lambda *args: print("debug") or 1 / 0,  # prints, then raises
    ],
    ids=[
        "None",
        "list",
        "numpy",
        "str",
        "class",
        "no-args",
        "returns-None",
        "generator",
        "returns-str",
        "returns-dict",
        "ragged",
        "prints-and-raises",
    ],
)
def test_never_raises_whatever_it_is_handed(check, handed):
    ok, line = run(check, handed)
    assert not ok and line.startswith("❌"), line


def test_exceptions_are_named():
    fails_with(heatmap_checks.check_row_entropy, lambda p, dim: p.sum(dim), "TypeError")
    fails_with(heatmap_checks.check_typical_sample, lambda v, m: 1 / 0, "ZeroDivisionError")
    fails_with(heatmap_checks.check_aligned_share, lambda cache, head: cache[head], "KeyError")
    fails_with(heatmap_checks.check_row_entropy, lambda *a: None, "forget `return`")
    fails_with(heatmap_checks.check_row_entropy, NotAFunction, "you passed a class (NotAFunction)")
    fails_with(
        heatmap_checks.check_typical_sample, None, "pass your function itself, e.g. check(my_function), not None"
    )


def test_checkers_keep_global_random_state():
    torch.manual_seed(0)
    np.random.seed(0)
    before_torch, before_np = torch.random.get_rng_state(), np.random.get_state()[1].copy()
    for check, name in [
        (heatmap_checks.check_row_entropy, "my_row_entropy"),
        (heatmap_checks.check_typical_sample, "my_typical_sample"),
        (heatmap_checks.check_aligned_share, "my_aligned_share"),
    ]:
        run(check, learner_solutions()[name])
    assert torch.equal(torch.random.get_rng_state(), before_torch)
    assert np.array_equal(np.random.get_state()[1], before_np)


# ---------------------------------------------------------------- row entropy


def entropy_where(p):
    return -torch.where(p > 0, p * p.log2(), torch.zeros_like(p)).sum(-1)


def entropy_numpy(p):
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.nansum(p * np.log2(p), axis=-1)


def entropy_clamped(p):
    return -(p * p.clamp_min(1e-12).log2()).sum(dim=-1)


def entropy_loops(p):
    flat = p.reshape(-1, p.shape[-1])
    out = []
    for row in flat.tolist():
        out.append(-sum(w * math.log2(w) for w in row if w > 0))
    return torch.tensor(out).reshape(p.shape[:-1])


def entropy_list(p):
    return (-torch.special.xlogy(p, p).sum(-1) / math.log(2)).tolist()


def test_row_entropy_refuses_a_list():  # one type rule (issue 27): the task asks for a tensor
    assert_hint(heatmap_checks.check_row_entropy, entropy_list, "your output is a list, expected a torch tensor")


@pytest.mark.parametrize(
    "fn",
    [entropy_where, entropy_numpy, entropy_clamped, entropy_loops],
    ids=["where", "numpy-nansum", "clamp", "python-loops"],
)
def test_row_entropy_correct_variants_pass(fn):
    assert run(heatmap_checks.check_row_entropy, fn)[0]


def entropy_in_place(p):
    p[p == 0] = 1.0
    return -(p * p.log2()).sum(-1)


def entropy_renormalised(p):
    p = p / p.sum(-1, keepdim=True)
    return -torch.special.xlogy(p, p).sum(-1) / math.log(2)


ENTROPY_MISTAKES = [
    (lambda p: -(p * p.log2()).sum(-1), "0·log 0 must count as 0"),
    (lambda p: -torch.special.xlogy(p, p).sum(-1), "nats"),
    (lambda p: -torch.special.xlogy(p, p).sum(-1) / math.log(10), "log10"),
    (lambda p: torch.special.xlogy(p, p).sum(-1) / math.log(2), "sign is flipped"),
    (lambda p: -torch.special.xlogy(p, p).mean(-1) / math.log(2), "averaged over the keys"),
    (lambda p: -torch.special.xlogy(p, p).sum(-1) / math.log(2) / math.log2(p.shape[-1]), "scaled by log2(n_keys)"),
    (lambda p: -torch.special.xlogy(p, p).sum(-2) / math.log(2), "summed over the query axis"),
    (lambda p: -torch.special.xlogy(p, p).sum(-1, keepdim=True) / math.log(2), "without keepdim"),
    (lambda p: -torch.special.xlogy(p, p) / math.log(2), "one value per weight"),
    (lambda p: -torch.special.xlogy(p, p).sum((-1, -2)) / math.log(2), "reduced over the queries"),
    (lambda p: -torch.special.xlogy(p, p).sum() / math.log(2), "one number for the whole pattern"),
    (lambda p: -torch.special.xlogy(p, p).sum(3) / math.log(2), "count axes from the end"),
    (lambda p: -torch.special.xlogy(p, p).sum(-1) / math.log(2) if p.dim() == 4 else None, "forget `return`"),
    (entropy_in_place, "changed the pattern it was given"),
    (entropy_renormalised, "row of zeros"),
    (lambda p: entropy_where(p.softmax(-1)), "softmax again"),
    (lambda p: -(p * torch.log2(p + 1e-2)).sum(-1), "for the row ["),
]


@pytest.mark.parametrize("fn, hint", ENTROPY_MISTAKES, ids=[h for _, h in ENTROPY_MISTAKES])
def test_row_entropy_mistakes_get_their_hint(fn, hint):
    fails_with(heatmap_checks.check_row_entropy, fn, hint)


def test_row_entropy_hints_lead_to_a_pass():
    """The NaN hint's two suggested fixes both pass (no loop back to the same hint)."""
    assert run(heatmap_checks.check_row_entropy, lambda p: -torch.special.xlogy(p, p).sum(-1) / math.log(2))[0]
    assert run(heatmap_checks.check_row_entropy, lambda p: -torch.where(p > 0, p * p.log2(), 0.0).sum(-1))[0]


def test_row_entropy_only_fits_shape_agnostic_code():
    """Code written for the 4-D cache entry only (indexing axis 3, unpacking four sizes) does not pass."""

    def four_d(p):
        b, h, q, k = p.shape
        return -torch.special.xlogy(p, p).sum(3) / math.log(2)

    fails_with(heatmap_checks.check_row_entropy, four_d, "don't unpack a fixed number of sizes")


# ---------------------------------------------------------------- typical sample


def typical_reference(values, means):
    defined = ~np.isnan(means)
    d = np.abs(values[:, defined] - means[defined]).mean(axis=1)
    d[np.isnan(d)] = np.inf
    return int(np.argmin(d))


def typical_loops(values, means):
    best, best_d = None, math.inf
    for i, row in enumerate(values):
        diffs = [abs(v - m) for v, m in zip(row, means) if not math.isnan(m)]
        if any(math.isnan(d) for d in diffs):
            continue
        d = sum(diffs)  # sum, not mean: same order, same argmin
        if d < best_d:
            best, best_d = i, d
    return best


def typical_torch(values, means):
    v, m = torch.as_tensor(values), torch.as_tensor(means)
    keep = ~m.isnan()
    d = (v[:, keep] - m[keep]).abs().mean(1).nan_to_num(nan=math.inf)
    return d.argmin()  # a 0-d tensor


def typical_masked(values, means):
    defined = ~np.isnan(means)
    complete = ~np.isnan(values[:, defined]).any(axis=1)
    d = np.ma.masked_array(np.abs(values[:, defined] - means[defined]).mean(1), mask=~complete)
    return np.ma.argmin(d)  # numpy integer


@pytest.mark.parametrize(
    "fn",
    [typical_reference, typical_loops, typical_torch, typical_masked],
    ids=["numpy", "loops-sum", "torch-tensor", "masked-array"],
)
def test_typical_sample_correct_variants_pass(fn):
    assert run(heatmap_checks.check_typical_sample, fn)[0]


def typical_nanmean(values, means):
    return int(np.nanargmin(np.nanmean(np.abs(values - means), axis=1)))


def typical_plain_nan(values, means):
    defined = ~np.isnan(means)
    return int(np.argmin(np.abs(values[:, defined] - means[defined]).mean(1)))


def typical_in_place(values, means):
    values[np.isnan(values)] = np.inf
    return typical_reference(values, means)


def typical_sum(values, means, f, centre=None, pick=np.argmin):
    defined = ~np.isnan(means)
    centre = means if centre is None else centre
    d = f(values[:, defined] - centre[defined])
    return int(pick(np.where(np.isnan(d), np.inf, d)))


TYPICAL_MISTAKES = [
    (
        lambda v, m: typical_sum(
            v, m, lambda d: np.abs(d).mean(1), pick=lambda d: np.argmax(np.where(np.isinf(d), -1, d))
        ),
        "farthest",
    ),
    (lambda v, m: typical_sum(v, m, lambda d: (d**2).mean(1)), "squared differences"),
    (lambda v, m: typical_sum(v, m, lambda d: np.linalg.norm(d, axis=1)), "Euclidean distance"),
    (lambda v, m: typical_sum(v, m, lambda d: d.mean(1)), "signed differences"),
    (lambda v, m: typical_sum(v, m, lambda d: np.abs(d).mean(1), centre=np.nanmean(v, 0)), "average of `values`"),
    (typical_nanmean, "lacks a measure"),
    (typical_plain_nan, "lacks a measure"),
    (lambda v, m: int(np.argmin(np.abs(v - m).mean(1))), "if all your distances are NaN, np.argmin returns 0"),
    (lambda v, m: np.abs(v - m).mean(1), "one distance per sample"),
    (lambda v, m: v[typical_reference(v, m)], "row of measures"),
    (typical_in_place, "changed `values` or `means` in place"),
    (lambda v, m: True, "returned a bool"),
    (lambda v, m: len(v), "but there are 14 samples"),
    (lambda v, m: 2.5, "return the index of a sample"),
    (lambda v, m: int(np.nanargmin(np.abs(v[:, -1] - np.nanmedian(v[:, -1])))), "is closer"),  # median of one measure
    (lambda m, v: typical_reference(v, m), "IndexError"),  # arguments swapped
]


@pytest.mark.parametrize("fn, hint", TYPICAL_MISTAKES, ids=[f"{i}-{h}" for i, (_, h) in enumerate(TYPICAL_MISTAKES)])
def test_typical_sample_mistakes_get_their_hint(fn, hint):
    fails_with(heatmap_checks.check_typical_sample, fn, hint)


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
def test_typical_cases_tell_the_mistakes_apart():
    """Case A's planted samples: each wrong distance picks a different sample from the right one."""
    label, values, means = heatmap_checks._typical_cases()[0]
    right = typical_reference(values, means)
    picks = {right, 0, 2}  # the answer, "all NaN", the sample lacking carry
    for i in (0, 1, 3, 4):  # farthest, squared, signed, centre
        picks.add(TYPICAL_MISTAKES[i][0](values, means))
    assert len(picks) == 7, picks


def test_typical_sample_agrees_with_roles():
    """The checker's distance is roles_from_cache's (on a made-up cache of 40 problems)."""
    from attnkit.interp.roles import MEASURES, per_sample_roles, roles_from_cache

    label, cache, head = heatmap_checks._aligned_cases()[0]
    roles = roles_from_cache(cache)
    heads, sums, counts = per_sample_roles(cache)
    scale = np.array([1, 1, 1, 1, 1, math.log2(7)])
    for col, h in enumerate(heads):
        with np.errstate(invalid="ignore"):
            values = np.stack([sums[m][:, col] / counts[m][:, col] for m in MEASURES], axis=1) / scale
        means = roles.loc[h, list(MEASURES)].to_numpy(float) / scale
        assert int(np.argmin(heatmap_checks._typical_distance(values, means))) == roles.loc[h, "typical_sample"], h


# ---------------------------------------------------------------- aligned share


def aligned_loops(
    cache,
    head,
    shift=0,
    fixed=False,
    mirrored=False,
    keys="ab",
    key_mean=False,
    rows="counted",
    per_problem=False,
    first_only=False,
    head_index=None,
    n_digits=None,
):
    """A learner's loop version, with at most one planted mistake switched on."""
    kind, layer, h = head.rsplit(".", 2)
    pattern = cache[f"{kind}.{layer}.hook_pattern"][:, int(h) if head_index is None else head_index]
    src, tgt = cache["src"], cache["tgt"]
    nd = (src.shape[1] - 1) // 2 if n_digits is None else n_digits
    total, count, per = 0.0, 0, []
    for i in range(1 if first_only else len(src)):
        digits = src[i].tolist()
        a = int("".join(map(str, digits[:nd])))
        b = int("".join(map(str, digits[nd + 1 :])))
        length = nd + 1 if fixed else len(str(a + b))
        mine, n_mine = 0.0, 0
        for t in range(tgt.shape[1]):
            place = length - 1 - (t - shift)
            if 0 <= place < nd and tgt[i, t] != PAD:
                ka, kb = (place, nd + 1 + place) if mirrored else (nd - 1 - place, 2 * nd - place)
                w = {"ab": pattern[i, t, ka] + pattern[i, t, kb], "a": pattern[i, t, ka], "b": pattern[i, t, kb]}[keys]
                mine += float(w) / (2 if key_mean else 1)
                n_mine += 1
            elif rows == "real" and tgt[i, t] != PAD or rows == "all":
                n_mine += 1
        total, count = total + mine, count + n_mine
        per.append(mine / n_mine if per_problem else 0.0)
    return float(np.mean(per)) if per_problem else total / count


def aligned_kit(cache, head):
    return np.nanmean(row_shares(cache, head, "aligned")["share"])


def aligned_numpy(cache, head):
    kind, layer, h = head.rsplit(".", 2)
    w = cache[f"{kind}.{layer}.hook_pattern"].numpy()[:, int(h)]  # (batch, q, k)
    src, tgt = cache["src"].numpy(), cache["tgt"].numpy()
    nd = (src.shape[1] - 1) // 2
    length = (tgt[:, 1:] < 10).sum(1)
    place = length[:, None] - 1 - np.arange(tgt.shape[1])  # (batch, q)
    keys = np.zeros(w.shape, dtype=bool)
    for p in range(nd):
        keys[:, :, nd - 1 - p] |= place == p
        keys[:, :, 2 * nd - p] |= place == p
    counted = keys.any(-1)
    return torch.tensor(np.einsum("bqk,bqk->bq", w, keys)[counted].mean())  # a 0-d tensor


@pytest.mark.parametrize(
    "fn",
    [aligned_loops, aligned_numpy, learner_solutions()["my_aligned_share"]],
    ids=["python-loops", "numpy-einsum", "notebook"],
)
def test_aligned_share_correct_variants_pass(fn):
    assert run(heatmap_checks.check_aligned_share, fn)[0]


def aligned_in_place(cache, head):
    cache["tgt"][cache["tgt"] == PAD] = 0
    return aligned_loops(cache, head)


def aligned_all_heads(cache, head):
    kind, layer, h = head.rsplit(".", 2)
    mean = {f"{kind}.{layer}.hook_pattern": cache[f"{kind}.{layer}.hook_pattern"].mean(1, keepdim=True)}
    return aligned_loops({**dict(cache.items()), **mean}, f"{kind}.{layer}.0")


def aligned_layer_one(cache, head):
    return aligned_loops(cache, "dec.cross.1." + head.rsplit(".", 1)[1])  # the layer hard-coded


def aligned_per_problem_values(cache, head):
    return [
        aligned_loops(
            {
                **dict(cache.items()),
                "src": cache["src"][i : i + 1],
                "tgt": cache["tgt"][i : i + 1],
                head.rsplit(".", 1)[0] + ".hook_pattern": cache[head.rsplit(".", 1)[0] + ".hook_pattern"][i : i + 1],
            },
            head,
        )
        for i in range(len(cache["src"]))
    ]


def aligned_head_on_batch_axis(cache, head):
    kind, layer, h = head.rsplit(".", 2)
    pattern = cache[f"{kind}.{layer}.hook_pattern"][int(h)]  # (heads, q, k): a mistake
    counted = cache["tgt"] != PAD
    return (pattern[..., 0] * counted).sum() / counted.sum()


ALIGNED_MISTAKES = [
    (lambda c, h: aligned_loops(c, h, shift=1), "off by one: decoder position t *reads*"),
    (lambda c, h: aligned_loops(c, h, shift=-1), "not t+1"),
    (lambda c, h: aligned_loops(c, h, fixed=True), "n_digits+1 digits long"),
    (lambda c, h: aligned_loops(c, h, mirrored=True), "place values count from the right"),
    (lambda c, h: aligned_loops(c, h, keys="a"), "only operand a's digit"),
    (lambda c, h: aligned_loops(c, h, keys="b"), "only operand b's digit"),
    (lambda c, h: aligned_loops(c, h, key_mean=True), "*sum*"),
    (lambda c, h: aligned_loops(c, h, rows="real"), "rows that have no aligned column"),
    (lambda c, h: aligned_loops(c, h, rows="all"), "every decoder position"),
    (lambda c, h: aligned_loops(c, h, per_problem=True), "pooled"),
    (lambda c, h: aligned_loops(c, h, first_only=True), "first problem only"),
    (lambda c, h: aligned_loops(c, h, head_index=0), "you measured dec.cross.1.0, not dec.cross.1.2"),
    (aligned_layer_one, "you measured dec.cross.1.4, not dec.cross.0.4"),
    (aligned_all_heads, "every head of the layer"),
    (lambda c, h: aligned_loops(c, h, n_digits=3), "the 3-digit cases passed"),
    (aligned_in_place, "changed the cache in place"),
    (aligned_per_problem_values, "one share per problem"),
    (aligned_head_on_batch_axis, "one head is pattern[:, h]"),
    (lambda c, h: aligned_loops(c, h, shift=1, fixed=True), "expected"),  # two mistakes: the general hint
    (lambda head, cache: aligned_loops(cache, head), "AttributeError"),  # arguments swapped
]


@pytest.mark.parametrize(
    "fn, hint", ALIGNED_MISTAKES, ids=[f"{i}-{h[:30]}" for i, (_, h) in enumerate(ALIGNED_MISTAKES)]
)
def test_aligned_share_mistakes_get_their_hint(fn, hint):
    fails_with(heatmap_checks.check_aligned_share, fn, hint)


def test_aligned_variants_are_the_kits_number_without_a_mistake():
    for _label, cache, _head in heatmap_checks._aligned_cases():
        for layer in range(2):
            for h in range(cache[f"dec.cross.{layer}.hook_pattern"].size(1)):
                name = f"dec.cross.{layer}.{h}"
                assert (
                    abs(heatmap_checks._aligned_variant(cache, name) - heatmap_checks._aligned_reference(cache, name))
                    < 1e-6
                )
                assert abs(aligned_loops(cache, name) - heatmap_checks._aligned_reference(cache, name)) < 1e-6


def test_aligned_cases_tell_the_mistakes_apart():
    """On the first case every planted variant differs from the right answer and from each other."""
    label, cache, head = heatmap_checks._aligned_cases()[0]
    values = [heatmap_checks._aligned_reference(cache, head)]
    for mistake in [
        dict(shift=1),
        dict(shift=-1),
        dict(fixed_len=True),
        dict(mirrored=True),
        dict(keys="a"),
        dict(keys="b"),
        dict(key_mean=True),
        dict(rows="real"),
        dict(rows="all"),
        dict(per_problem=True),
        dict(first_only=True),
        dict(all_heads=True),
    ]:
        values.append(heatmap_checks._aligned_variant(cache, head, **mistake))
    values = np.array(values)
    others = [
        heatmap_checks._aligned_reference(cache, f"dec.cross.{i}.{j}")
        for i in range(2)
        for j in range(3)
        if (i, j) != (1, 2)
    ]
    values = np.concatenate([values, others])
    gaps = np.abs(values[:, None] - values[None, :]) + np.eye(len(values))
    assert gaps.min() > 1e-3, values


def test_the_kits_own_answer_does_not_pass():
    passed, line = checker_line(heatmap_checks.check_aligned_share, aligned_kit)
    assert not passed and "calls the kit's own attnkit.interp.roles.row_shares" in line, line
