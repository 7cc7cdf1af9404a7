"""Notebook 06's checkers: correct solutions written differently pass; planted mistakes get their hint."""
import numpy as np
import torch

from attnkit.ui import interp_checks as C


def run(check, fn, capsys):
    ok = check(fn)
    line = capsys.readouterr().out.strip()
    assert len(line.splitlines()) == 1, line
    return ok, line


def test_normalised_effect(capsys):
    for good in [lambda p, c, k: (p - k) / (c - k), lambda p, c, k: np.subtract(p, k) / np.subtract(c, k),
                 lambda p, c, k: 1 - (c - p) / (c - k)]:
        assert run(C.check_normalised_effect, good, capsys)[0]
    mistakes = {
        lambda p, c, k: (p - c) / (k - c): "distance from the clean run",
        lambda p, c, k: (p - k) / (k - c): "sign is flipped",
        lambda p, c, k: p - k / (c - k): "precedence",
        lambda p, c, k: None: "forget `return`",
        lambda p, c, k: float((p - k) / (c - k)): "elementwise",
        lambda p, c, k: (p - k) / c: "expected",
    }
    for fn, hint in mistakes.items():
        ok, line = run(C.check_normalised_effect, fn, capsys)
        assert not ok and hint in line, line
    ok, line = run(C.check_normalised_effect, lambda p, c: 0, capsys)  # wrong signature: a hint, no traceback
    assert not ok and line.startswith("❌") and "TypeError" in line


def good_hook(clean_z, head, pos):
    def hook(z, hook):
        z = z.clone()
        z[:, head, pos] = clean_z[:, head, pos]
        return z
    return hook


def in_place_hook(clean_z, head, pos):
    def hook(z, hook):
        z[:, head, pos] = clean_z[0, head, pos]
    return hook


def test_patch_hook(capsys):
    for good in (good_hook, in_place_hook):
        assert run(C.check_patch_hook, good, capsys)[0]

    def every_head(clean_z, head, pos):
        return lambda z, hook: torch.cat([z[:, :, :pos], clean_z[:, :, pos:pos + 1].expand(len(z), -1, 1, -1), z[:, :, pos + 1:]], 2)

    def every_pos(clean_z, head, pos):
        def hook(z, hook):
            z = z.clone()
            z[:, head] = clean_z[:, head]
            return z
        return hook

    def swapped(clean_z, head, pos):
        def hook(z, hook):
            z = z.clone()
            z[:, pos, head] = clean_z[:, pos, head]
            return z
        return hook

    mistakes = {every_head: "every head", every_pos: "every position", swapped: "swapped",
                (lambda clean_z, head, pos: (lambda z, hook: clean_z.expand_as(z).clone())): "whole clean z",
                (lambda clean_z, head, pos: 3): "should return a function",
                (lambda clean_z, head, pos: (lambda z, hook: z[:, head])): "must return z's shape",
                (lambda clean_z, head, pos: (lambda z, hook: z)): "differs"}
    for fn, hint in mistakes.items():
        ok, line = run(C.check_patch_hook, fn, capsys)
        assert not ok and hint in line, line


def test_carry_pair(capsys):
    def good(a, b):
        if a % 10 + b % 10 < 10:
            return None
        b2 = b - b % 10 + (9 - a % 10)
        tens = lambda x, y: (x // 10 % 10) + (y // 10 % 10) + (x % 10 + y % 10 >= 10)
        if tens(a, b) >= 10 and tens(a, b2) < 10:
            return None
        return f"{a}+{b}", f"{a}+{b2}"
    assert run(C.check_carry_pair, good, capsys)[0]

    def no_none(a, b):
        return f"{a}+{b}", f"{a}+{b - b % 10 + max(0, 9 - a % 10)}"

    def too_low(a, b):
        return None if a % 10 + b % 10 < 10 else (f"{a}+{b}", f"{a}+{b - b % 10}")

    def ignores_chain(a, b):
        return None if a % 10 + b % 10 < 10 else (f"{a}+{b}", f"{a}+{b - b % 10 + 9 - a % 10}")

    for fn, hint in {no_none: "return None", too_low: "lower b's units digit", ignores_chain: "chain",
                     (lambda a, b: None): "carries in the units column"}.items():
        ok, line = run(C.check_carry_pair, fn, capsys)
        assert not ok and hint in line, line
