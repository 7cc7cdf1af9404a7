"""The committed adder checkpoint and the public API other parts rely on."""

import pytest
import torch

import attnkit
from attnkit.adder.data import EDGE_CASES


def test_solve_matches_the_documented_example(adder):
    assert adder.solve(["663+497", "5+5"]) == ["1160", "10"]


def test_every_edge_case_is_right(adder):
    answers = adder.solve(EDGE_CASES)
    truth = [str(sum(map(int, p.split("+")))) for p in EDGE_CASES]
    assert answers == truth


def test_stored_metrics_meet_the_target_and_match_a_fresh_evaluation(adder):
    fresh = adder.evaluate()
    assert fresh["n"] == 10_000
    assert fresh["exact_match"] >= 0.999
    assert fresh["exact_match"] == pytest.approx(adder.metrics["exact_match"], abs=1e-9)


@pytest.mark.parametrize("bad", ["12a+3", "1+", "", "1-2", "1234+1"])
def test_solve_rejects_bad_problems_naming_them(adder, bad):
    with pytest.raises(ValueError, match=repr(bad).replace("+", r"\+")):
        adder.solve(["1+1", bad])


def test_solve_wants_a_list(adder):
    with pytest.raises(ValueError, match="list"):
        adder.solve("1+1")
    assert adder.solve([]) == []


def test_run_with_cache_patterns_are_the_ones_used_for_the_answer(adder):
    answers, cache = adder.run_with_cache(["663+497", "5+5"])
    assert answers == ["1160", "10"]
    src, tgt = adder.labels(cache, 1)
    assert src == ["0", "0", "5", "+", "0", "0", "5"] and tgt == [
        "<s>",
        "1",
        "0",
    ]  # the inputs that wrote "1", "0", "</s>"
    assert cache["dec.cross.0.hook_pattern"].shape == (2, 4, 5, 7)  # queries: <s> + up to 4 digits


def test_unknown_pretrained_name():
    with pytest.raises(ValueError, match="sortedness-alibi"):
        attnkit.load_pretrained("adderr")


def test_load_pretrained_gives_the_committed_adder(adder):
    loaded = attnkit.load_pretrained("adder")
    assert loaded.solve(["663+497", "5+5"]) == ["1160", "10"]
    for name, tensor in adder.model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name].cpu(), tensor), name
