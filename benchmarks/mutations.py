"""Would the tests notice a plausible bug? Plant one at a time in a copy of the package and see.

Each mutation is a one-line source edit a tired author could make (a flipped sign, a swapped
axis, an off-by-one, padding counted as an answer). For each, the package is copied to a
temporary folder, the edit applied there (it must match the source exactly once, or the script
stops: a mutation that no longer applies tests nothing), and the fast tests run against the copy
(first on PYTHONPATH; every run checks that `attnkit` really is imported from the copy),
stopping at the first failure. A mutation is *caught* when some test fails, *survived* otherwise.

    python benchmarks/mutations.py              # every mutation; prints caught/survived and the time
    python benchmarks/mutations.py --list       # the mutations only
    python benchmarks/mutations.py alibi rope   # those whose name contains a word given

Exit status 1 when any mutation survives. Each run starts with the test files most likely to
catch its mutation, then the rest of FAST_TESTS, so a caught mutation costs seconds; a survivor
runs them all.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The fast tests: no notebooks, no browser, no long training.
FAST_TESTS = [
    "tests/test_positional.py",
    "tests/test_attention.py",
    "tests/test_data.py",
    "tests/test_train.py",
    "tests/test_sortedness.py",
    "tests/test_roles.py",
    "tests/test_ablation.py",
    "tests/test_model.py",
    "tests/test_adder.py",
    "tests/test_claims.py",
]
SKIP = "not the_experiment_gives_the_same_files"  # the two-worker training test: slow, and it catches nothing more

SEED0 = "tests/test_claims.py::test_sortedness_seed0_cells_recomputed_from_the_checkpoint"

# (name, area, file under attnkit/, exact source text, replacement, tests to run first)
MUTATIONS = [
    (
        "attention: no 1/sqrt(d_head) scaling",
        "attention",
        "core/attention.py",
        "scores = (q / math.sqrt(q.size(-1))) @ k.transpose(-2, -1)",
        "scores = q @ k.transpose(-2, -1)",
        ["tests/test_attention.py"],
    ),
    (
        "mask: causal mask looks at the future",
        "masks",
        "core/attention.py",
        "return torch.ones(n_pos, n_pos, dtype=torch.bool, device=device).tril()",
        "return torch.ones(n_pos, n_pos, dtype=torch.bool, device=device).triu()",
        ["tests/test_attention.py"],
    ),
    (
        "mask: key padding mask inverted",
        "masks",
        "core/attention.py",
        "mask = ~key_padding_mask[:, None, None, :]",
        "mask = key_padding_mask[:, None, None, :]",
        ["tests/test_attention.py"],
    ),
    (
        "mask: a fully masked query is no longer zeroed",
        "masks",
        "core/attention.py",
        "        weights = weights * mask.any(dim=-1, keepdim=True)\n",
        "        pass\n",
        ["tests/test_attention.py"],
    ),
    (
        "data: operands read without leading zeros",
        "data",
        "adder/data.py",
        "width = n_digits if zero_pad else 0",
        "width = 0",
        ["tests/test_data.py"],
    ),
    (
        "data: longest carry chain = number of carries",
        "data",
        "adder/data.py",
        "chain = (chain + 1) * carry",
        "chain = chain + carry",
        ["tests/test_data.py"],
    ),
    (
        "sortedness data: a hard negative may swap equal values",
        "data",
        "sortedness/data.py",
        "strict = np.diff(seqs, axis=1) > 0",
        "strict = np.diff(seqs, axis=1) >= 0",
        ["tests/test_sortedness.py"],
    ),
    (
        "evaluation: teacher-forced accuracy counts padding as right",
        "evaluation",
        "adder/evaluate.py",
        '"teacher_forced_token_accuracy": float(((tf_pred == gold) & real).sum() / real.sum())',
        '"teacher_forced_token_accuracy": float(tf_right.float().mean())',
        ["tests/test_train.py::test_evaluate_on_a_hand_built_batch"],
    ),
    (
        "evaluation: exact match ignores </s>",
        "evaluation",
        "adder/evaluate.py",
        "    real = gold != PAD\n",
        "    real = (gold != PAD) & (gold != EOS)\n",
        ["tests/test_train.py::test_evaluate_on_a_hand_built_batch"],
    ),
    (
        "evaluation: results split by chain instead of carries",
        "evaluation",
        "adder/evaluate.py",
        '"by_carries": split(n_carries)',
        '"by_carries": split(chain)',
        ["tests/test_train.py::test_evaluate_on_a_hand_built_batch"],
    ),
    (
        "ablation: zero ablation keeps half the head",
        "ablation",
        "core/head_ablation.py",
        "return g * z + (1 - g) * f",
        "return (g + 1) / 2 * z + (1 - g) * f",
        ["tests/test_ablation.py"],
    ),
    (
        "ablation: the wrong head is removed (off by one)",
        "ablation",
        "core/head_ablation.py",
        "out.setdefault(name, []).append(int(index))",
        "out.setdefault(name, []).append((int(index) + 1) % 4)",
        ["tests/test_ablation.py"],
    ),
    (
        "ablation: mean over padding positions too",
        "ablation",
        "adder/evaluate.py",
        "counts[name] = counts.get(name, 0) + int(real.sum())",
        "counts[name] = counts.get(name, 0) + int(real.numel())",
        ["tests/test_ablation.py"],
    ),
    (
        "roles: carry column on the wrong side",
        "roles",
        "interp/roles.py",
        "carry = q_digit & k_digit & (k_place == q_place - 1)",
        "carry = q_digit & k_digit & (k_place == q_place + 1)",
        ["tests/test_roles.py"],
    ),
    (
        "roles: cross-attention aligned column off by one place",
        "roles",
        "interp/roles.py",
        "aligned = q_ok[:, :, None] & (q_place >= 0) & k_digit & (k_place == q_place)",
        "aligned = q_ok[:, :, None] & (q_place >= 1) & k_digit & (k_place == q_place - 1)",
        ["tests/test_roles.py"],
    ),
    (
        "positional: sinusoidal sin and cos swapped",
        "positional",
        "core/positional.py",
        "torch.stack([angles.sin(), angles.cos()], dim=-1)",
        "torch.stack([angles.cos(), angles.sin()], dim=-1)",
        ["tests/test_positional.py"],
    ),
    (
        "positional: directional ALiBi looks the wrong way",
        "positional",
        "core/positional.py",
        "blocked = torch.stack([offset > 0, offset < 0])",
        "blocked = torch.stack([offset < 0, offset > 0])",
        ["tests/test_positional.py"],
    ),
    (
        "positional: ALiBi slope sign flipped",
        "positional",
        "core/positional.py",
        "bias = -slopes[:, None, None] * (offset.abs() - 1)",
        "bias = slopes[:, None, None] * (offset.abs() - 1)",
        ["tests/test_positional.py"],
    ),
    (
        "positional: RoPE rotates the wrong way",
        "positional",
        "core/positional.py",
        "torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)",
        "torch.stack([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1)",
        ["tests/test_positional.py"],
    ),
    (
        "positional: far-left bucket count off by one",
        "positional",
        "core/positional.py",
        "n_left = (i - self.n_exact).clamp(min=1)",
        "n_left = (i - self.n_exact + 1).clamp(min=1)",
        ["tests/test_positional.py"],
    ),
    (
        "positional: far-left bucket starts one offset early",
        "positional",
        "core/positional.py",
        "count = torch.where(j < i - self.n_exact, n_left,",
        "count = torch.where(j <= i - self.n_exact, n_left,",
        ["tests/test_positional.py"],
    ),
    (
        "readout: max pool becomes min pool",
        "readout",
        "sortedness/model.py",
        'pooled = score.masked_fill(pad, float("-inf")).amax(dim=1)',
        'pooled = score.masked_fill(pad, float("inf")).amin(dim=1)',
        [SEED0],
    ),
    (
        "readout: mean pool counts padding",
        "readout",
        "sortedness/model.py",
        "pooled = (score * keep).sum(1) / keep.sum(1)",
        "pooled = (score * keep).sum(1) / keep.size(1)",
        ["tests/test_claims.py::test_every_readout_ignores_padding"],
    ),
    (
        "sortedness evaluation: sorted class mixed with hard negatives",
        "evaluation",
        "sortedness/train.py",
        "pos = correct[kind == 0].mean()",
        "pos = correct[kind != 2].mean()",
        [SEED0],
    ),
    (
        "decoding: incremental positions restart at 0",
        "attention",
        "adder/model.py",
        "token = self.decode(token, memory, src_pad, states, start=t)[:, -1:].argmax(-1)",
        "token = self.decode(token, memory, src_pad, states, start=0)[:, -1:].argmax(-1)",
        ["tests/test_adder.py"],
    ),
]


def apply(copy: Path, path: str, old: str, new: str) -> None:
    target = copy / "attnkit" / path
    source = target.read_text()
    if source.count(old) != 1:
        raise SystemExit(f"mutation does not apply: {old!r} occurs {source.count(old)} times in attnkit/{path}")
    target.write_text(source.replace(old, new))


def fresh_copy(tmp: Path) -> Path:
    copy = tmp / "pkg"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(ROOT / "attnkit", copy / "attnkit", ignore=shutil.ignore_patterns("__pycache__"))
    return copy


# A pytest plugin (-p) that imports attnkit from the copy before any conftest.py: pytest puts the
# repository's root on sys.path first when it loads the root conftest.py, and a later `import
# attnkit` would find the unmutated package there. Once collected, every attnkit module loaded must
# come from the copy, or the run stops (a survivor then would mean nothing).
PROBE = """
import os, sys
import pytest
import attnkit

def pytest_collection_finish(session):
    copy = os.environ["ATTNKIT_MUTANT_COPY"]
    stray = sorted(m.__file__ for name, m in sys.modules.items()
                   if name.split(".")[0] == "attnkit" and getattr(m, "__file__", None)
                   and not m.__file__.startswith(copy))
    if stray:
        print("MUTANT-PROBE: attnkit modules imported from outside the copy:", stray[:3])
        pytest.exit("attnkit imported from outside the mutated copy", returncode=3)
"""


def run_tests(copy: Path, first: list[str]) -> tuple[bool, str]:
    """(caught, the failing test's id or the summary line)."""
    (copy / "attnkit_mutant_probe.py").write_text(PROBE)
    env = {
        **os.environ,
        "PYTHONPATH": f"{copy}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "ATTNKIT_DATA_DIR": str(ROOT / "data"),
        "OMP_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "ATTNKIT_MUTANT_COPY": str(copy),
    }
    env.pop("ATTNKIT_CLAIMS", None)
    # cwd is the copy: `python -m pytest` puts the working folder first on sys.path, ahead of
    # PYTHONPATH and of the editable install's finder, and /work/main/attnkit must not be found.
    check = subprocess.run(
        [sys.executable, "-c", "import attnkit; print(attnkit.__file__)"],
        env=env,
        cwd=copy,
        capture_output=True,
        text=True,
    )
    if not check.stdout.strip().startswith(str(copy)):
        raise SystemExit(f"the tests would import {check.stdout.strip() or check.stderr}, not the mutated copy")
    # Two rounds: the likeliest files alone (collecting every file costs seconds), then the rest.
    for files in (first, [f for f in FAST_TESTS if f not in first]):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-x",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:xdist",
                "-p",
                "attnkit_mutant_probe",
                "--rootdir",
                str(ROOT),
                "-c",
                str(ROOT / "pyproject.toml"),
                "-k",
                SKIP,
                *(str(ROOT / f) for f in files),
            ],
            env=env,
            cwd=copy,
            capture_output=True,
            text=True,
        )
        if "MUTANT-PROBE" in proc.stdout + proc.stderr:
            raise SystemExit(f"the tests imported the unmutated package: {proc.stdout[-1500:]}")
        if proc.returncode not in (0, 5):  # 5: every test deselected
            failed = [line.split(" ")[1] for line in proc.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
            name = failed[0] if failed else proc.stdout.strip().splitlines()[-1]
            return True, "tests/" + name.split("tests/", 1)[-1]
    return False, proc.stdout.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("words", nargs="*", help="run only mutations whose name contains one of these")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.words or any(w in m[0] for w in args.words)]
    if args.list:
        for name, area, path, *_ in chosen:
            print(f"{area:11s} attnkit/{path:24s} {name}")
        return 0
    start, survived = time.perf_counter(), []
    with tempfile.TemporaryDirectory(prefix="attnkit-mutants-") as tmp:
        for path in {m[2] for m in chosen}:  # every mutation must still apply to today's source
            for _, _, p, old, new, _ in chosen:
                if p == path:
                    apply(fresh_copy(Path(tmp)), p, old, new)
        for i, (name, _area, path, old, new, first) in enumerate(chosen, 1):
            copy = fresh_copy(Path(tmp))
            apply(copy, path, old, new)
            t = time.perf_counter()
            caught, detail = run_tests(copy, first)
            print(
                f"[{i:2d}/{len(chosen)}] {'caught  ' if caught else 'SURVIVED'} {name:58s} "
                f"{time.perf_counter() - t:5.1f} s  {detail}",
                flush=True,
            )
            if not caught:
                survived.append(name)
    n = len(chosen)
    print(
        f"\n{n - len(survived)} of {n} mutations caught, {len(survived)} survived ({time.perf_counter() - start:.0f} s)"
    )
    for name in survived:
        print(f"  survived: {name}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
