"""The mutation benchmarks (benchmarks/mutations.py, benchmarks/guard_mutations.py) break the kit on
purpose by replacing an exact piece of its source. A reformatted or refactored line would make a
mutation fail to apply, and the benchmark would stop before measuring anything: every mutation's
text must occur exactly once in today's source."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mutations():
    found = [(f"attnkit/{m[2]}", m[0], m[3]) for m in _load("mutations").MUTATIONS]
    found += [(m[1], m[0], m[2]) for m in _load("guard_mutations").M]
    return found


@pytest.mark.parametrize(("path", "name", "old"), [pytest.param(*m, id=m[1]) for m in _mutations()])
def test_mutation_applies_to_todays_source(path, name, old):
    count = (ROOT / path).read_text(encoding="utf-8").count(old)
    assert count == 1, f"mutation {name!r}: its text occurs {count} times in {path}, not once"
