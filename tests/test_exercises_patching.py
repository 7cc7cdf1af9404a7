"""Notebook 06's checkers (attnkit.exercises.patching): correct solutions written differently pass,
each planted mistake gets its own hint, following a hint leads on to a pass (never back to the same
hint), and the notebook's own solutions pass while its stubs are reported as not done."""

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from attnkit.adder import Adder
from attnkit.adder.data import carry_stats
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.exercises import patching as patching_checks
from attnkit.exercises import patching_effect
from attnkit.interp import patching

from helpers import assert_hint, assert_hint_chain, assert_passes, checker_line

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "06_how_the_adder_carries.ipynb"


def run(check, fn):
    return checker_line(check, fn)


# ---------------------------------------------------------------- the normalised effect


def effect_in_steps(patched, clean, corrupted):
    gained = patched - corrupted  # how far the patch moved the metric from the corrupted run
    gap = clean - corrupted  # how far the clean run is from it
    return gained / gap


def effect_torch(patched, clean, corrupted):
    patched, clean, corrupted = (torch.as_tensor(x, dtype=torch.float64) for x in (patched, clean, corrupted))
    return torch.div(patched - corrupted, clean - corrupted)


@pytest.mark.parametrize(
    "fn",
    [
        effect_in_steps,
        lambda p, c, k: 1 - (c - p) / (c - k),
        lambda p, c, k: np.divide(np.subtract(p, k), np.subtract(c, k)),  # numpy ufuncs keep tensors tensors
        effect_torch,  # a tensor for floats and arrays too
        lambda p, c, k: (p - k) * (c - k) ** -1,
    ],
    ids=["steps", "one-minus", "numpy-ufuncs", "torch", "power"],
)
def test_normalised_effect_correct_variants_pass(fn):
    assert_passes(patching_checks.check_normalised_effect, fn)


def python_if(patched, clean, corrupted):
    if clean == corrupted:  # a guard that works on floats only
        return 0.0
    return (patched - corrupted) / (clean - corrupted)


def as_numpy(patched, clean, corrupted):
    patched, clean, corrupted = np.asarray(patched), np.asarray(clean), np.asarray(corrupted)
    return (patched - corrupted) / (clean - corrupted)


def in_place(patched, clean, corrupted):
    patched -= corrupted  # floats are immutable, arrays and tensors are not
    return patched / (clean - corrupted)


def torch_only(patched, clean, corrupted):
    return torch.div(patched - corrupted, clean - corrupted)


def clean_corrupted_swapped(patched, corrupted, clean):  # the signature's order differs from the call's
    return (patched - corrupted) / (clean - corrupted)


def clean_first(clean, corrupted, patched):
    return (patched - corrupted) / (clean - corrupted)


@pytest.mark.parametrize(
    "fn, hint",
    [
        (clean_corrupted_swapped, "clean and corrupted swapped?"),
        (lambda p, c, k: (p - c) / (k - c), "distance from the clean run"),
        (lambda p, c, k: (p - k) / (k - c), "the sign is flipped"),
        (lambda p, c, k: p - k / (c - k), "put (patched - corrupted) in parentheses"),
        (lambda p, c, k: (p - k) / c - k, "put (clean - corrupted) in parentheses"),
        (lambda p, c, k: 100 * (p - k) / (c - k), "you return a percentage"),
        (lambda p, c, k: (p - k) // (c - k), "// is floor division"),
        (lambda p, c, k: min(max((p - k) / (c - k), 0.0), 1.0), "clamped to [0, 1]"),
        (lambda p, c, k: np.clip((p - k) / (c - k), 0, 1), "clamped to [0, 1]"),
        (lambda p, c, k: abs((p - k) / (c - k)), "leave out abs()"),
        (lambda p, c, k: abs(p - k) / abs(c - k), "leave out abs()"),
        (lambda p, c, k: (p - k) / abs(c - k), "the division must keep its sign"),
        (lambda p, c, k: (p - k) / c, "divided by the clean metric alone"),
        (lambda p, c, k: (p - k) / k, "divided by the corrupted metric alone"),
        (lambda p, c, k: p / c, "patched / clean is a ratio"),
        (lambda p, c, k: p - k, "without dividing"),
        (lambda p, c, k: round((p - k) / (c - k), 2), "you rounded the effect"),
        (clean_first, "your arguments are in another order"),
        (lambda p, c, k: (c - k) / (p - k), "the fraction is upside down"),
        (lambda p, c, k: (p - k) / (p - c), "divided by zero"),
        (lambda p, c, k: torch.clamp((p - k) / (c - k), 0, 1), "torch functions need tensors"),
        (lambda p, c, k: ((p - k) / (c - k), c - k), "return the effect alone, one number"),
        (lambda p, c, k: [(p - k) / (c - k)], "return the effect alone, one number"),
        (lambda p, c, k: f"{(p - k) / (c - k):.2f}", "returned a str"),
        (lambda p, c, k: None, "forget `return`"),
        (python_if, "no Python `if`"),
        (lambda p, c, k: float((p - k) / (c - k)), "no float()"),
        (
            lambda p, c, k: ((p - k) / (c - k)).item() if hasattr(p, "item") else (p - k) / (c - k),
            "no float() or .item()",
        ),
        (as_numpy, "on tensors your function returns a numpy array"),
        (in_place, "changed its argument patched in place"),
        (torch_only, "torch functions need tensors"),
        (lambda p, c, k: ((p - k) / (c - k)).clone(), "no tensor methods"),
        (lambda p, c, k: np.mean((p - k) / (c - k)), "the mean over the answer tokens"),
        (
            lambda p, c, k: ((p - k) / (c - k)).tolist() if hasattr(p, "tolist") else (p - k) / (c - k),
            "return a tensor",
        ),
    ],
)
def test_normalised_effect_mistakes_get_their_hint(fn, hint):
    assert_hint(patching_checks.check_normalised_effect, fn, hint)


def test_normalised_effect_wrong_signature_is_a_hint():
    assert_hint(patching_checks.check_normalised_effect, lambda p, c: 0, "your function's arguments differ")


def test_normalised_effect_mistake_table_tells_its_mistakes_apart():
    """Over the checker's float cases no two mistakes (nor a mistake and the right answer) give the
    same numbers, so a mistake's hint can never name another one."""
    rows = [[patching_effect._effect(*case) for case in patching_effect._EFFECT_CASES]]
    with np.errstate(all="ignore"):
        rows += [
            [m(*map(np.float64, case)) for case in patching_effect._EFFECT_CASES]
            for m, _ in patching_effect._EFFECT_MISTAKES
        ]
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            assert not np.allclose(a, b, equal_nan=True)


# ---------------------------------------------------------------- the patching hook


def clone_and_patch(clean_z, head, pos):
    def hook(z, hook):
        z = z.clone()
        z[:, head, pos] = clean_z[:, head, pos]
        return z

    return hook


def in_place_none(clean_z, head, pos):
    def hook(z, hook):
        z[:, head, pos] = clean_z[0, head, pos]  # in place, returning nothing: the kit keeps the edited z

    return hook


def in_place_return(clean_z, head, pos):
    def hook(z, hook):
        z[:, head, pos] = clean_z[:, head, pos]
        return z

    return hook


def loop_over_batch(clean_z, head, pos):
    def hook(z, hook):
        out = z.clone()
        for i in range(z.shape[0]):
            out[i, head, pos, :] = clean_z[0, head, pos, :]
        return out

    return hook


def where_mask(clean_z, head, pos):
    def hook(z, **_):  # called with hook= as a keyword
        mask = torch.zeros(z.shape[1:3], dtype=torch.bool)
        mask[head, pos] = True
        return torch.where(mask[None, :, :, None], clean_z, z)

    return hook


@pytest.mark.parametrize("make_hook", [clone_and_patch, loop_over_batch, where_mask], ids=["clone", "loop", "where"])
def test_patch_hook_correct_variants_pass(make_hook):
    assert_passes(patching_checks.check_patch_hook, make_hook)


def test_an_in_place_hook_returning_none_patches_the_kit_model_too():
    """The kit's HookPoint keeps a z edited in place (the checker still refuses such a hook: notebook 06
    asks for hooks that leave the activation they are handed alone — see test_planted_mistakes_checks)."""
    torch.manual_seed(0)
    adder = Adder(Seq2SeqTransformer(Seq2SeqConfig()))
    s = patching.setup(adder, "125+137", "125+134")
    with torch.no_grad():
        _, cache = adder.model.run_with_cache(*s.clean, names=["enc.self.0.hook_z"])
        outs = [
            adder.model.run_with_hooks(
                *s.corrupted, hooks=[("enc.self.0.hook_z", make(cache["enc.self.0.hook_z"], 1, 5))]
            )
            for make in (patching.head_patch_hook, in_place_none)
        ]
        plain = adder.model(*s.corrupted)
    assert torch.allclose(outs[0], outs[1]) and not torch.allclose(outs[0], plain)


def hook_maker(rule):
    """A make_hook whose hook clones z and applies `rule(z, clean_z, head, pos)` to the clone."""

    def make_hook(clean_z, head, pos):
        def hook(z, hook):
            z = z.clone()
            rule(z, clean_z, head, pos)
            return z

        return hook

    return make_hook


def set_(index):
    def rule(z, clean_z, head, pos):
        i = index(head, pos)
        z[i] = clean_z[i]

    return rule


def clone_not_returned(clean_z, head, pos):
    def hook(z, hook):
        patched = z.clone()
        patched[:, head, pos] = clean_z[:, head, pos]
        return z  # the clone was patched, the original returned

    return hook


def batch_dropped(clean_z, head, pos):
    def hook(z, hook):
        clean = clean_z[0]  # (heads, pos, d_head): the batch axis is gone
        z = z.clone()
        z[:, head, pos] = clean[:, head, pos]
        return z

    return hook


def clean_z_per_sample(clean_z, head, pos):
    def hook(z, hook):
        z = z.clone()
        for i in range(len(z)):
            z[i, head, pos] = clean_z[i, head, pos]  # clean_z has one sample only
        return z

    return hook


def from_clean(clean_z, head, pos):
    def hook(z, hook):
        out = clean_z.expand_as(z).clone()  # the clean run, with z at one place
        out[:, head, pos] = z[:, head, pos]
        return out

    return hook


def clone_of_clean(clean_z, head, pos):
    def hook(z, hook):
        out = clean_z.clone()  # cloned the wrong tensor
        out[:, head, pos] = clean_z[:, head, pos]
        return out

    return hook


def calls_the_hook(clean_z, head, pos):
    def hook(z, hook):
        z = z.clone()
        z[:, head, pos] = clean_z[:, head, pos]
        return z

    return hook(clean_z, None)


def z_only(clean_z, head, pos):
    def hook(z):
        z = z.clone()
        z[:, head, pos] = clean_z[:, head, pos]
        return z

    return hook


def writes_into_clean(clean_z, head, pos):
    def hook(z, hook):
        clean_z[:, head, pos] = z[0, head, pos]
        return z

    return hook


def every_head(clean_z, head, pos):
    return lambda z, hook: torch.cat(
        [z[:, :, :pos], clean_z[:, :, pos : pos + 1].expand(len(z), -1, 1, -1), z[:, :, pos + 1 :]], 2
    )


@pytest.mark.parametrize(
    "make_hook, hint",
    [
        (every_head, "every head at that position"),
        (hook_maker(set_(lambda h, p: (slice(None), h))), "every position of that head"),
        (hook_maker(set_(lambda h, p: (slice(None), p, h))), "head and position are swapped"),
        (hook_maker(set_(lambda h, p: (slice(None), h, p + 1))), "you patched position 5 instead of 4: off by one"),
        (hook_maker(set_(lambda h, p: (slice(None), h + 1, p))), "you patched head 4 instead of 3: off by one"),
        (hook_maker(set_(lambda h, p: (slice(None), 1, 5))), "not fixed numbers such as the notebook's"),
        (hook_maker(lambda z, c, h, p: z[0, h, p].copy_(c[0, h, p])), "only the first sample of the batch"),
        (hook_maker(lambda z, c, h, p: z[:, h, p].add_(c[:, h, p])), "(=, not +=)"),
        (hook_maker(lambda z, c, h, p: z[:, h, p].copy_(0.5 * c[0, h, p])), "neither z's nor clean_z's"),
        (clean_z_per_sample, "clean_z has batch 1"),
        (batch_dropped, "clean_z[0] drops the batch axis"),
        (from_clean, "you started from clean_z"),
        (clone_of_clean, "clean_z's shape"),
        (lambda clean_z, head, pos: lambda z, hook: clean_z.expand_as(z).clone(), "the whole clean z"),
        (clone_not_returned, "z comes back unchanged"),
        (lambda clean_z, head, pos: lambda z, hook: z, "z comes back unchanged"),
        (calls_the_hook, "without calling it"),
        (z_only, "name its second argument `hook`"),
        (writes_into_clean, "your hook changed clean_z"),
        (lambda clean_z, head, pos: 3, "should return a function hook(z, hook), not an int"),
        (lambda clean_z, head, pos: lambda z, hook: z[:, head], "must return z's shape"),
        (lambda clean_z, head, pos: lambda z, hook: z.tolist(), "not a list"),
        (
            lambda clean_z, head, pos: lambda z, hook: clone_and_patch(clean_z, head, pos)(z, hook).double(),
            "keep z's dtype",
        ),
    ],
)
def test_patch_hook_mistakes_get_their_hint(make_hook, hint):
    assert_hint(patching_checks.check_patch_hook, make_hook, hint)


# ---------------------------------------------------------------- carry pairs


def pair_digits(a, b):
    if a % 10 + b % 10 < 10:
        return None  # the units column does not carry
    if (a // 10) % 10 + (b // 10) % 10 == 9:
        return None  # the tens would lose their carry too: a chain
    return f"{a}+{b}", f"{a}+{b - b % 10 + 9 - a % 10}"


def pair_strings(a, b):
    sa, sb = str(a), str(b)
    if int(sa[-1]) + int(sb[-1]) < 10:
        return None
    b2 = int(sb[:-1] + str(9 - int(sa[-1])))  # the last character is the units digit
    tens = lambda x, y: int(str(x)[-2:-1] or 0) + int(str(y)[-2:-1] or 0)
    if tens(a, b) == 9:
        return None
    return f"{a}+{b}", f"{a}+{b2}"


def pair_columns(a, b):
    """Add column by column, with and without the units carry, and compare the carries."""

    def carries(x, y):
        out, carry = [], 0
        for _ in range(4):
            carry = int(x % 10 + y % 10 + carry >= 10)
            out.append(carry)
            x, y = x // 10, y // 10
        return out

    b2 = b - b % 10 + max(0, 9 - a % 10)
    before, after = carries(a, b), carries(a, b2)
    if before[0] == 0 or sum(before) - sum(after) != 1:
        return None
    return [f"{a}+{b}", f"{a}+{b2}"]  # a list is a pair too


@pytest.mark.parametrize("fn", [pair_digits, pair_strings, pair_columns], ids=["digits", "strings", "columns"])
def test_carry_pair_correct_variants_pass(fn):
    assert_passes(patching_checks.check_carry_pair, fn)


def carry_pair_with(
    *,
    units=lambda a: 9 - a % 10,
    test=lambda a, b: a % 10 + b % 10 >= 10,
    chains=True,
    fmt=lambda a, b, b2: (f"{a}+{b}", f"{a}+{b2}"),
):
    """A learner's carry_pair with at most one planted mistake."""

    def fn(a, b):
        if not test(a, b):
            return None
        b2 = b - b % 10 + units(a)
        if chains:
            before, _ = carry_stats(np.array([a]), np.array([b]))
            after, _ = carry_stats(np.array([a]), np.array([b2]))
            if before[0] - after[0] != 1:
                return None
        return fmt(a, b, b2)

    return fn


def longest_chain(a, b):
    if a % 10 + b % 10 < 10:
        return None
    _, chain = carry_stats(np.array([a]), np.array([b]))
    if chain[0] > 1:  # a chain of carries is not the same as losing one
        return None
    return f"{a}+{b}", f"{a}+{b - b % 10 + 9 - a % 10}"


def hundreds_changed(a, b):
    if a % 10 + b % 10 < 10:
        return None
    b2 = int(str(9 - a % 10) + str(b)[1:])  # the first character taken for the units digit
    return carry_pair_with()(a, b) and (f"{a}+{b}", f"{a}+{b2}")


@pytest.mark.parametrize(
    "fn, hint",
    [
        (carry_pair_with(units=lambda a: 10 - a % 10, chains=False), "still carries (5 + 5 = 10): off by one"),
        (carry_pair_with(units=lambda a: 10 - a % 10), "one more still carries"),  # so carry_stats sees no change
        (carry_pair_with(units=lambda a: 8 - a % 10), "one lower than needed: off by one"),
        (carry_pair_with(units=lambda a: 0), "you set b's units digit to 0"),
        (carry_pair_with(chains=False), "(a chain): only one carry may change — return None"),
        (carry_pair_with(test=lambda a, b: a % 10 + b % 10 > 10), "not > 10"),
        (carry_pair_with(test=lambda a, b: True, chains=False), "does not carry in the units column"),
        (carry_pair_with(fmt=lambda a, b, b2: (a + b, a + b2)), "you return the sums"),
        (carry_pair_with(fmt=lambda a, b, b2: ((a, b), (a, b2))), "return the two problems as strings"),
        (carry_pair_with(fmt=lambda a, b, b2: (f"{a}+{b2}", f"{a}+{b}")), "the pair is reversed"),
        (carry_pair_with(fmt=lambda a, b, b2: (f"{a} + {b}", f"{a} + {b2}")), "no spaces"),
        (carry_pair_with(fmt=lambda a, b, b2: (f"{a:03d}+{b:03d}", f"{a:03d}+{b2:03d}")), "leading zeros"),
        (carry_pair_with(fmt=lambda a, b, b2: (f"{a}+{b}", f"{a}+{b // 10}{b2 % 10}")), "leading zeros"),
        (carry_pair_with(fmt=lambda a, b, b2: f"{a}+{b2}"), "you return one string"),
        (carry_pair_with(fmt=lambda a, b, b2: (f"{a}+{b}", f"{a - a % 10 + 9 - b % 10}+{b}")), "you changed a"),
        (carry_pair_with(fmt=lambda a, b, b2: (f"{a}+{b}", f"{a}+{b2 % 10}")), "keeps only the new units digit"),
        (carry_pair_with(fmt=lambda a, b, b2: (f"{a}+{b}", f"{a}+{b - 10}")), "changes b's tens digit"),
        (carry_pair_with(fmt=lambda a, b, b2: ("125+137", "125+134")), "is not 348+276"),
        (hundreds_changed, "changes b's hundreds digit"),
        (longest_chain, "not a chain"),
        (lambda a, b: carry_pair_with()(a, b) or False, "return None itself"),
        (lambda a, b: None, "can lose just that carry"),
        (lambda a, b: carry_pair_with()(a, b) and "yes", "return a pair (clean, corrupted)"),
    ],
)
def test_carry_pair_mistakes_get_their_hint(fn, hint):
    assert_hint(patching_checks.check_carry_pair, fn, hint)


# ---------------------------------------------------------------- following a hint leads on, never back

follow = assert_hint_chain


def test_following_the_normalised_effect_hints_leads_to_a_pass():
    follow(
        patching_checks.check_normalised_effect,
        [
            (lambda p, c, k: float(p - k) // float(c - k), "floor division"),
            (lambda p, c, k: float(p - k) / float(c - k), "no float()"),
            (lambda p, c, k: (p - k) / (c - k), None),
        ],
    )
    follow(
        patching_checks.check_normalised_effect,
        [
            (lambda p, c, k: abs(p - k) / abs(c - k), "leave out abs()"),
            (lambda p, c, k: (p - k) / abs(c - k), "keep its sign"),
            (lambda p, c, k: (p - k) / (c - k), None),
        ],
    )
    follow(
        patching_checks.check_normalised_effect,
        [
            (lambda p, c, k: torch.clamp(torch.div(p - k, c - k), 0, 1), "clamped"),
            (lambda p, c, k: torch.div(p - k, c - k), "torch functions need tensors"),
            (lambda p, c, k: (p - k) / (c - k), None),
        ],
    )
    follow(
        patching_checks.check_normalised_effect,
        [(python_if, "no Python `if`"), (as_numpy, "numpy array"), (in_place, "in place"), (effect_in_steps, None)],
    )
    follow(
        patching_checks.check_normalised_effect,
        [
            (lambda p, c, k: (p - k) / (p - c), "divided by zero"),
            (clean_first, "another order"),
            (effect_in_steps, None),
        ],
    )


def test_following_the_patch_hook_hints_leads_to_a_pass():
    def z_only_off_by_one(clean_z, head, pos):
        def hook(z):
            z = z.clone()
            z[:, head, pos + 1] = clean_z[:, head, pos + 1]
            return z

        return hook

    follow(
        patching_checks.check_patch_hook,
        [
            (z_only_off_by_one, "name its second argument `hook`"),
            (hook_maker(set_(lambda h, p: (slice(None), h, p + 1))), "off by one"),
            (clone_and_patch, None),
        ],
    )
    follow(patching_checks.check_patch_hook, [(clone_not_returned, "unchanged"), (clone_and_patch, None)])
    follow(patching_checks.check_patch_hook, [(clean_z_per_sample, "clean_z has batch 1"), (loop_over_batch, None)])
    follow(patching_checks.check_patch_hook, [(batch_dropped, "drops the batch axis"), (clone_and_patch, None)])
    follow(
        patching_checks.check_patch_hook,
        [
            (calls_the_hook, "without calling it"),
            (clone_of_clean, "clean_z's shape"),
            (from_clean, "started from clean_z"),
            (clone_and_patch, None),
        ],
    )


def test_following_the_carry_pair_hints_leads_to_a_pass():
    follow(
        patching_checks.check_carry_pair,
        [
            (carry_pair_with(test=lambda a, b: True, chains=False, units=lambda a: 10 - a % 10), "still carries"),
            (carry_pair_with(test=lambda a, b: True, chains=False), "does not carry"),
            (carry_pair_with(test=lambda a, b: a % 10 + b % 10 > 10, chains=False), "not > 10"),
            (carry_pair_with(chains=False), "a chain"),
            (longest_chain, "not a chain"),
            (pair_digits, None),
        ],
    )
    follow(
        patching_checks.check_carry_pair,
        [
            (carry_pair_with(fmt=lambda a, b, b2: (f"{a}+{b2}", f"{a}+{b}")), "reversed"),
            (carry_pair_with(fmt=lambda a, b, b2: (f"{a} + {b}", f"{a} + {b2}")), "no spaces"),
            (carry_pair_with(), None),
        ],
    )
    follow(
        patching_checks.check_carry_pair,
        [(carry_pair_with(units=lambda a: 10 - a % 10), "one more still carries"), (carry_pair_with(), None)],
    )


# ---------------------------------------------------------------- the notebook's own solutions and stubs


def notebook_exercises():
    """(grade id, solution source, check source) per exercise of notebook 06, in order."""
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    found = []
    for cell, check in zip(cells, cells[1:]):
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            grade_id = cell.metadata["nbgrader"]["grade_id"]
            assert (check.metadata["tags"], check.metadata["attnkit"]) == (["check"], {"exercise": grade_id})
            found.append((grade_id, cell.source, check.source))
    assert [g for g, _, _ in found] == ["06-normalised-effect", "06-patch-hook", "06-carry-pair"]
    return found


def namespace():
    ns = {}
    exec(
        "import numpy as np\nimport torch\nfrom attnkit.adder.data import carry_stats\n"
        "from attnkit.interp import patching\nfrom attnkit.exercises import patching as patching_checks",
        ns,
    )
    return ns


def without_markers(source):
    return "\n".join(line for line in source.splitlines() if not re.match(r"\s*### (BEGIN|END) SOLUTION", line))


def test_notebook_solutions_pass(capsys):
    ns = namespace()
    for _, solution, check in notebook_exercises():
        exec(without_markers(solution), ns)
        exec(check, ns)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 3 and all(line.startswith("✅") for line in printed), printed
    assert (
        ns["normalise"] is ns["my_normalised_effect"]
        and ns["make_hook"] is ns["my_patch_hook"]
        and ns["units_pair"] is ns["my_carry_pair"]
    )  # passed: the notebook goes on with the learner's own


def test_notebook_stubs_are_not_done(capsys):
    region = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*$", re.S | re.M)
    ns = namespace()
    for _, solution, check in notebook_exercises():
        exec(region.sub(lambda m: f'{m.group(1)}raise NotImplementedError("your code here")', solution), ns)
        exec(check, ns)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 3 and all(line.startswith("⏳") for line in printed), printed


def test_checkers_leave_the_random_state_alone(capsys):
    torch_state, np_state = torch.random.get_rng_state(), np.random.get_state()
    for check, fn in [
        (patching_checks.check_normalised_effect, effect_in_steps),
        (patching_checks.check_patch_hook, clone_and_patch),
        (patching_checks.check_carry_pair, pair_digits),
        (patching_checks.check_patch_hook, where_mask),
    ]:
        check(fn)
    capsys.readouterr()
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert all(np.array_equal(a, b) for a, b in zip(np.random.get_state(), np_state))


@pytest.mark.parametrize(
    "check, fn",
    [
        (patching_checks.check_patch_hook, patching.head_patch_hook),
        (patching_checks.check_carry_pair, lambda a, b: patching.carry_pair(a, b, column=0)),
    ],
    ids=["patch hook", "carry pair"],
)
def test_the_kits_own_answer_does_not_pass(check, fn):
    passed, line = checker_line(check, fn)
    assert not passed and "the kit's own attnkit.interp.patching." in line, line
