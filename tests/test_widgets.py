"""AttentionExplorer driven as a learner would: move sliders, switch views, type problems."""
import numpy as np
import pytest
import torch

from attnkit.adder import Adder
from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer
from attnkit.ui.widgets import ALL_HEADS, AttentionExplorer

A = np.array([663, 5, 999, 12, 450, 0, 71, 808])
B = np.array([497, 5, 1, 345, 550, 0, 29, 9])


class TrueAdder(Adder):
    """An untrained model whose reported answers are the true sums: to see the ✓."""

    def run_with_cache(self, problems, names=None):
        _, cache = super().run_with_cache(problems, names)
        return [str(sum(map(int, p.split("+")))) for p in problems], cache


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Seq2SeqTransformer(Seq2SeqConfig())


@pytest.fixture
def explorer(model):
    return AttentionExplorer(Adder(model), A, B)


def test_controls_are_findable_in_the_page(explorer):
    classes = {c for w in (explorer.sample, explorer.layer, explorer.head, explorer.kind, explorer.problem,
                           explorer.answer, explorer.image, explorer.typical, explorer.outline) for c in w._dom_classes}
    assert {"attnkit-sample-slider", "attnkit-layer-slider", "attnkit-head-select", "attnkit-kind-select",
            "attnkit-problem-text", "attnkit-answer", "attnkit-figure", "attnkit-typical-button",
            "attnkit-outline-select"} <= classes
    assert explorer.sample.max == len(A) - 1
    assert "application/vnd.jupyter.widget-view+json" in explorer._repr_mimebundle_()


def test_first_view_shows_a_figure_and_the_answer(explorer):
    assert bytes(explorer.image.value).startswith(b"\x89PNG")
    assert "663+497" in explorer.answer.value and "true sum 1160" in explorer.answer.value


def test_moving_the_sample_slider_redraws(explorer):
    before = explorer.image.value
    explorer.sample.value = 3
    assert explorer.image.value != before
    assert "12+345" in explorer.answer.value and "true sum 357" in explorer.answer.value


@pytest.mark.parametrize("control, value", [("layer", 0), ("head", 2), ("kind", "enc.self"), ("outline", "carry")])
def test_every_control_redraws(explorer, control, value):
    before = explorer.image.value
    getattr(explorer, control).value = value
    assert explorer.image.value != before


def test_malformed_problem_shows_its_error_inside_the_widget(explorer):
    before = explorer.image.value
    explorer.problem.value = "12a+3"
    assert "⚠" in explorer.answer.value and "not of the form" in explorer.answer.value
    assert explorer.image.value == before
    explorer.problem.value = "1234+5"
    assert "more than 3 digits" in explorer.answer.value


def test_typed_problem_is_solved_and_marked(model):
    explorer = AttentionExplorer(TrueAdder(model), A, B)
    before = explorer.image.value
    explorer.problem.value = "663+497"
    assert "your problem" in explorer.answer.value and "1160" in explorer.answer.value
    assert "✓" in explorer.answer.value and "✗" not in explorer.answer.value
    assert explorer.image.value != before
    explorer.sample.value = 2  # back to the held-out problems
    assert explorer.problem.value == "" and "999+1" in explorer.answer.value


def test_wrong_answer_is_marked_wrong(explorer):
    explorer.answers[0] = "1161"
    explorer.redraw()
    assert "✗" in explorer.answer.value and "true sum 1160" in explorer.answer.value


def test_typical_sample_is_one_click_away(explorer):
    assert explorer.typical.disabled  # "all heads": no single head to jump for
    explorer.kind.value, explorer.layer.value, explorer.head.value = "enc.self", 1, 2
    assert not explorer.typical.disabled
    explorer.typical.click()
    assert explorer.sample.value == explorer.roles.loc["enc.self.1.2", "typical_sample"]
    assert "enc.self.1.2" in explorer.role.value


def test_show_head_sets_every_control(explorer):
    explorer.show_head("dec.self.0.3")
    assert (explorer.kind.value, explorer.layer.value, explorer.head.value) == ("dec.self", 0, 3)
    assert explorer.sample.value == explorer.roles.loc["dec.self.0.3", "typical_sample"]
    with pytest.raises(ValueError, match="unknown head"):
        explorer.show_head("dec.self.7.0")


def test_unexpected_errors_stay_inside_the_widget(explorer, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("drawing failed")
    monkeypatch.setattr(explorer.plot, "figure", broken)
    explorer.sample.value = 4  # no exception escapes to the notebook
    assert "⚠" in explorer.answer.value and "drawing failed" in explorer.answer.value


def test_grid_and_single_head_views(explorer):
    explorer.show(head=ALL_HEADS, kind="dec.cross")
    assert len(explorer.figure().axes) == 5  # 4 heads + colour bar
    explorer.show(head=1)
    assert len(explorer.figure().axes) == 2


def test_save_writes_the_shown_figure(explorer, tmp_path):
    explorer.save(tmp_path / "shown.svg")
    explorer.save(tmp_path / "shown.png")
    assert b"<svg" in (tmp_path / "shown.svg").read_bytes()
    assert (tmp_path / "shown.png").read_bytes().startswith(b"\x89PNG")
    before = explorer.image.value
    explorer.sample.value = 5  # saving at another resolution does not disturb the next redraw
    assert explorer.image.value != before and bytes(explorer.image.value).startswith(b"\x89PNG")
