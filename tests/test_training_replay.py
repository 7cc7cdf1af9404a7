"""Notebook 07's figures and explorer (attnkit/ui/training_replay.py) on the committed snapshots and
replay study: within the figure policy, race-free under bursts of requests, mistakes said in the widget."""

import threading

import numpy as np
import pytest

import attnkit
from attnkit.experiments.replay_study import load_replay
from attnkit.interp.replay import first_lasting, lifts, roles
from attnkit.ui import figure_policy
from attnkit.ui.alt_text import text_alternative
from attnkit.ui.training_replay import TrainingExplorer, curves_figure, final_roles, heads_figure, role_appears


@pytest.fixture(scope="module")
def snapshots():
    return attnkit.load_snapshots()


@pytest.fixture(scope="module")
def replay(snapshots):
    return load_replay(adder=snapshots[-1])


@pytest.fixture(scope="module")
def explorer(snapshots, replay):
    return TrainingExplorer(snapshots, replay["seeds"]["0"], runs=replay["seeds"])


@pytest.mark.parametrize("make", ["curves", "ablation", "role"])
def test_figures_follow_the_policy(replay, make, tmp_path):
    run = replay["seeds"]["0"]
    fig = curves_figure(replay["seeds"], step=160) if make == "curves" else heads_figure(run, make, step=160)
    assert figure_policy.problems(fig) == []
    assert "step 160" in text_alternative(fig)
    fig.savefig(tmp_path / "f.svg")


def test_roles_and_when_they_appear(replay):
    run = replay["seeds"]["0"]
    final = final_roles(run)
    by_step = roles(run)
    assert all(final[h][0] == by_step[h][0][-1] for h in final)  # the last step's role is the final role
    appear = role_appears(run)
    lift = lifts(run)
    for h, step in appear.items():
        values = lift[final[h][0]][h]
        assert step == first_lasting(run["steps"], values, 2.0)
        if step is not None:  # from that step on the lift never falls below 2 again; before it, it had
            i = run["steps"].index(step)
            assert min(values[i:]) >= 2.0 and (i == 0 or values[i - 1] < 2.0)


def test_the_role_grid_labels_only_roles_that_appear(replay):
    """A head whose best measure never reaches ROLE_LIFT for good reads "no role", with that lift."""
    run = replay["seeds"]["0"]
    fig = heads_figure(run, "role")
    labels = {t.get_text().split(" ", 1)[0]: t.get_text() for t in fig.axes[0].get_yticklabels()}
    appears, final = role_appears(run), final_roles(run)
    assert any(v is None for v in appears.values()) and any(v is not None for v in appears.values())
    for head, label in labels.items():
        role, lift = final[head]
        if appears[head] is None:
            assert label == f"{head} (no role; {role} ×{lift[-1] or 0:.2f})"
        else:
            assert label == f"{head} ({role})"


def test_the_explorer_shows_what_it_says(explorer, replay, snapshots):
    run = replay["seeds"]["0"]
    explorer.show(step=160, head="dec.cross.1.3", problem="348+276", view="ablation")
    r = explorer.result
    i = snapshots.steps.index(160)
    assert r["exact_match"] == run["exact_match"][i] and r["ablation"] == run["ablation"]["dec.cross.1.3"][i]
    assert r["answer"] == snapshots.at_step(160).solve(["348+276"])[0]
    _, cache = snapshots.at_step(160).run_with_cache(["348+276"], names=["dec.cross.1.hook_pattern"])
    assert np.array_equal(r["pattern"], cache["dec.cross.1.hook_pattern"][0, 3].numpy())
    assert "step 160" in explorer.answer.value and explorer.head_image.layout.display == ""


def test_bursts_of_requests_settle_on_the_last(explorer, snapshots):
    steps = snapshots.steps
    explorer.redraws = explorer.most_at_once = 0
    moves = [steps[j % len(steps)] for j in range(40)]

    def drag(chunk):
        for step in chunk:
            explorer.step.value = step

    threads = [threading.Thread(target=drag, args=(moves[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    explorer.wait()
    explorer.show(step=steps[5])  # the last request
    assert explorer.most_at_once == 1 and explorer.result["step"] == steps[5]
    assert explorer.result["answer"] == snapshots[5].solve([explorer.problem.value])[0]
    assert explorer.redraws < 40  # stale requests were skipped, not queued


def test_mistakes_are_said_in_the_widget(explorer, snapshots, replay):
    with pytest.raises(ValueError, match="no snapshot at step 7"):
        explorer.show(step=7)
    assert "no snapshot at step 7" in explorer.message.value
    with pytest.raises(ValueError, match="unknown head"):
        explorer.show(head="dec.cross.9.9")
    explorer.show(problem="34+27b")
    assert "problem_error" in explorer.result and "34+27b" in explorer.answer.value
    assert explorer.head_image.layout.display == "none"  # no stale attention under the error
    explorer.show(problem="348+276")
    assert explorer.head_image.layout.display == ""
    other = dict(replay["seeds"]["1"])
    if other["steps"] != snapshots.steps:
        with pytest.raises(ValueError, match="different training runs"):
            TrainingExplorer(snapshots, other)
