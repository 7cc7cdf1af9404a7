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
    classes = {
        c
        for w in (
            explorer.sample,
            explorer.layer,
            explorer.head,
            explorer.kind,
            explorer.problem,
            explorer.answer,
            explorer.image,
            explorer.typical,
            explorer.outline,
        )
        for c in w._dom_classes
    }
    assert {
        "attnkit-sample-slider",
        "attnkit-layer-slider",
        "attnkit-head-select",
        "attnkit-kind-select",
        "attnkit-problem-text",
        "attnkit-answer",
        "attnkit-figure",
        "attnkit-typical-button",
        "attnkit-outline-select",
    } <= classes
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
    assert explorer.image.value == before and explorer.image.layout.display == "none"  # no stale figure
    explorer.problem.value = "1234+5"
    assert "more than 3 digits" in explorer.answer.value
    explorer.problem.value = ""  # cleared: the held-out sample, shown again
    assert explorer.image.layout.display == "" and "sample 0" in explorer.answer.value


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


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(kind="bogus"), "unknown attention kind"),
        (dict(layer=7), "layer 7 does not exist"),
        (dict(head=9), "head 9 does not exist"),
        (dict(sample=99), "sample 99 does not exist"),
    ],
)
def test_a_refused_show_changes_nothing_and_says_why(explorer, bad, message):
    explorer.show(sample=2, kind="enc.self", layer=1, head=0)
    state = (
        explorer.sample.value,
        explorer.kind.value,
        explorer.layer.value,
        explorer.head.value,
        explorer.image.value,
        explorer.answer.value,
    )
    with pytest.raises(ValueError, match=message):
        explorer.show(**{"sample": 5, "kind": "dec.self", **bad})  # a good value beside the bad one
    assert (
        explorer.sample.value,
        explorer.kind.value,
        explorer.layer.value,
        explorer.head.value,
        explorer.image.value,
        explorer.answer.value,
    ) == state
    assert message in explorer.message.value and "nothing was changed" in explorer.message.value
    explorer.show(sample=3)  # the next good request clears it
    assert explorer.message.value == ""


def png_size(png: bytes) -> tuple[int, int]:
    import struct

    return struct.unpack(">II", bytes(png)[16:24])


def test_figure_is_shown_at_its_own_pixel_size(explorer):
    for head in (ALL_HEADS, 1):
        explorer.show(head=head, kind="dec.cross")
        width, height = png_size(explorer.image.value)
        assert (explorer.image.width, explorer.image.height) == (str(width), str(height))
        assert width <= 960, "wider than JupyterLab's output area: the browser would shrink it"


def test_every_explorer_text_is_at_least_10_px(explorer):
    from attnkit.ui.widget_tools import DISPLAY_DPI

    for head in (ALL_HEADS, 2):
        for kind in ("enc.self", "dec.self", "dec.cross"):
            explorer.show(head=head, kind=kind)
            fig = explorer.figure()
            sizes = [
                t.get_fontsize()
                for t in fig.findobj(lambda a: hasattr(a, "get_fontsize") and a.get_visible())
                if hasattr(t, "get_text") and t.get_text()
            ]
            assert min(sizes) * DISPLAY_DPI / 72 >= 10, (kind, head, min(sizes))


def test_concurrent_redraws_never_overlap_and_the_last_wins(explorer, monkeypatch):
    import threading
    import time

    active, worst = [0], [0]
    lock = threading.Lock()
    draw = explorer.plot.png

    def slow_png(fig, dpi):
        with lock:
            active[0] += 1
            worst[0] = max(worst[0], active[0])
        time.sleep(0.01)
        try:
            return draw(fig, dpi)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(explorer.plot, "png", slow_png)
    threads = [threading.Thread(target=setattr, args=(explorer.sample, "value", i)) for i in range(1, 8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    explorer._serial.wait()
    assert worst[0] == 1
    last = explorer.sample.value
    assert f"sample {last} of" in explorer.answer.value


# ------------------------------------------------------------------ AblationExplorer


@pytest.fixture(scope="module")
def ablation():
    from attnkit import load_pretrained
    from attnkit.ui.widgets import AblationExplorer

    return AblationExplorer(load_pretrained("adder"), n_problems=300)


def test_a_removed_head_looks_removed(ablation):
    ablation.set_removed(["enc.self.0.1"])
    t = ablation.toggles["enc.self.0.1"]
    assert t.button_style == "danger" and t.description.startswith("✕")
    ablation.set_removed([])
    assert t.button_style == "" and t.description == "L0H1"


def test_rapid_changes_from_several_threads_never_overlap_and_the_last_wins(ablation, monkeypatch):
    """Fast clicks delivered on several kernel threads: one evaluation at a time, and the shown
    result is that of the final toggle state (as a single clean evaluation gives it)."""
    import threading
    import time

    heads = ["dec.cross.1.3", "enc.self.1.0", "dec.self.0.2"]
    expected = ablation.measure(heads, "zero", "555+445")["exact_match"]
    measure = ablation.measure

    def slow(*args):  # widen the window in which a second update could sneak in
        time.sleep(0.02)
        return measure(*args)

    monkeypatch.setattr(ablation, "measure", slow)
    ablation.set_removed([])
    before = ablation.evaluations
    barrier = threading.Barrier(6)

    def click(head):
        barrier.wait()
        t = ablation.toggles[head]
        t.value = not t.value

    for _ in range(2):  # each head twice: on, then off again, then on ... as a fast learner would
        threads = [threading.Thread(target=click, args=(h,)) for h in heads * 2]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ablation._serial.wait()
    assert ablation.most_at_once == 1
    assert "error" not in ablation.result, ablation.result
    ablation.set_removed(heads)  # a final programmatic change, after the storm
    assert ablation.result["removed"] == sorted(heads, key=list(ablation.toggles).index)
    assert ablation.result["exact_match"] == expected
    assert ablation.evaluations - before < 14  # requests that came in during a run were merged
    assert "⚠" not in ablation.output.value


def test_a_malformed_problem_still_updates_the_accuracy(ablation):
    ablation.set_removed([])
    intact = ablation.result["exact_match"]
    ablation.problem.value = "12+"
    assert ablation.result["problem_error"] and ablation.result["exact_match"] == intact
    ablation.toggles["dec.cross.1.3"].value = True  # toggling still re-measures
    assert ablation.result["removed"] == ["dec.cross.1.3"] and ablation.result["exact_match"] < intact - 0.3
    assert f"{100 * ablation.result['exact_match']:.2f} %" in ablation.output.value
    assert "⚠" in ablation.output.value and "your problem 12+" in ablation.output.value
    ablation.problem.value = "555+445"
    assert ablation.result["problem_error"] is None and "true sum 1000" in ablation.output.value


@pytest.mark.parametrize(
    "heads, mode, message",
    [(["dec.cross.1.3"], "bogus", "unknown ablation mode"), (["dec.cross.9.9"], None, "dec.cross.9.9")],
)
def test_a_failing_setter_leaves_the_widget_unchanged(ablation, heads, mode, message):
    ablation.set_removed(["enc.self.0.0"], mode="zero")
    state = (ablation.removed, ablation.mode.value, dict(ablation.result), ablation.output.value)
    with pytest.raises(ValueError, match=message):
        ablation.set_removed(heads, mode=mode)
    assert (ablation.removed, ablation.mode.value, dict(ablation.result), ablation.output.value) == state
    assert message in ablation.message.value and "nothing was changed" in ablation.message.value
    ablation.set_removed([])
    assert ablation.message.value == ""


# ------------------------------------------------------------------ SortednessExplorer (notebook 05)


def test_sortedness_explorer_errors_lengths_and_descents():
    from attnkit.sortedness import load_classifier
    from attnkit.ui.sortedness_plots import SortednessExplorer

    ex = SortednessExplorer({"alibi": load_classifier("alibi")})
    width, _ = png_size(ex.image.value)
    assert ex.image.width == str(width) and width <= 960
    ex.custom.value = "21 20 19 18 17 16 15 14 13 12 11 10"  # 11 descents: all accounted for
    assert "your sequence" in ex.message.value and "… (11 in all)" in ex.message.value
    ex.length.value = 64  # the slider is not silently ignored
    assert ex.custom.value == "" and "length 64" in ex.message.value and "hard sample" in ex.message.value
    ex.custom.value = "1 2 x"
    assert "✗" in ex.message.value and ex.image.layout.display == "none"  # no stale figure under the error
    ex.custom.value = ""
    assert ex.image.layout.display == "" and "length 64" in ex.message.value


def test_sortedness_explorer_names_your_sequence_and_refuses_a_bad_seed():
    """One typed sequence is "your sequence", not "sequence 0"; a seed that is not a whole number
    is refused in the widget (an IntText silently showed seed 0's sample instead)."""
    from attnkit.sortedness import load_classifier
    from attnkit.ui.sortedness_plots import SortednessExplorer

    ex = SortednessExplorer({"alibi": load_classifier("alibi")})
    ex.custom.value = "3 5 999"
    assert "your sequence holds 999" in ex.message.value and "sequence 0" not in ex.message.value
    ex.custom.value = ""
    for bad in ("abc", "1.5", "-2", ""):
        ex.seed.value = bad
        assert "✗" in ex.message.value and "seed" in ex.message.value, (bad, ex.message.value)
        assert ex.image.layout.display == "none"
    ex.seed.value = " 7 "
    assert "hard sample, seed 7" in ex.message.value and ex.image.layout.display == ""


def test_ablation_explorer_consistent_after_bursts_of_clicks(adder, monkeypatch):
    """20 bursts of 10 clicks on random heads, from several threads at once (as a kernel may
    deliver them): once each burst settles, every toggle is drawn as it is (red ✕ exactly when
    pressed), and the result shown is a fresh measurement of exactly the pressed heads. (An
    explorer of 100 problems: what is checked is that the result belongs to the heads shown, and
    the measurement is slowed below to widen the window a click can fall into. Serial ending its
    loop without checking for a newer request fails at the first burst, in each of 3 runs.)"""
    import threading
    import time

    from attnkit.ui.widgets import AblationExplorer

    ablation = AblationExplorer(adder, n_problems=100)

    measure = ablation.measure

    def slow(*args):  # a wider window for a click to arrive mid-measurement
        time.sleep(0.005)
        return measure(*args)

    monkeypatch.setattr(ablation, "measure", slow)
    ablation.set_removed([])
    rng = np.random.default_rng(0)
    heads = list(ablation.toggles)
    for burst in range(20):
        picks = [heads[i] for i in rng.choice(len(heads), 10)]
        barrier = threading.Barrier(len(picks))

        def click(head):
            barrier.wait()
            t = ablation.toggles[head]
            t.value = not t.value

        threads = [threading.Thread(target=click, args=(h,)) for h in picks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ablation._serial.wait()
        pressed = ablation.removed
        drawn = [h for h, t in ablation.toggles.items() if t.button_style == "danger"]
        crossed = [h for h, t in ablation.toggles.items() if t.description.startswith("✕")]
        assert drawn == pressed == crossed, (burst, pressed, drawn, crossed)
        assert ablation.result["removed"] == pressed, (burst, ablation.result["removed"], pressed)
        fresh = measure(pressed, ablation.mode.value, ablation.problem.value)
        assert ablation.result["exact_match"] == fresh["exact_match"], burst
        assert f"removed (zero ablation): {', '.join(pressed) or 'none'}</div>" in ablation.output.value, burst
    ablation.set_removed([])


def test_found_on_the_keyboard_walk_outline_nothing_sample_readout_and_layer_width(explorer):
    """Issue 40's walk through notebook 03: "nothing" is an option ipywidgets can show (a None
    value showed a blank dropdown); a typed problem hides the sample slider's number, which would
    name a sample that is not shown, until the slider moves; the layer slider has room for a track."""
    assert all(value is not None for _, value in explorer.outline.options)
    explorer.outline.value = [v for label, v in explorer.outline.options if label == "nothing"][0]
    assert explorer.outline.label == "nothing"
    assert not explorer.figure().attnkit_panels[0].outlined()
    explorer.problem.value = "12+345"
    assert explorer.custom is not None and explorer.sample.readout is False
    explorer.sample.value = 3
    assert explorer.custom is None and explorer.sample.readout is True
    assert int(explorer.layer.layout.width.removesuffix("px")) >= 260


def test_sortedness_explorer_says_when_a_panel_looks_outside_its_window():
    """At length 256 a head of layer 1 puts its weight outside the 8 positions shown: its panel says
    so instead of staying blank; the seed box says it is the sample's."""
    import attnkit
    from attnkit.ui.sortedness_plots import SortednessExplorer, plot_attention, sample

    model = attnkit.load_pretrained("sortedness-alibi")
    fig = plot_attention(model, sample("hard", 256), window=(0, SortednessExplorer.WINDOW))
    notes = [t.get_text() for p in fig.attnkit_panels for t in p.ax.texts]
    assert any("of the weight\nfalls in this window" in n for n in notes), notes
    short = plot_attention(model, sample("hard", 8), window=(0, 8))
    assert not [t for p in short.attnkit_panels for t in p.ax.texts]  # the whole sequence: nothing outside
    assert SortednessExplorer({"alibi": model}).seed.description == "sample seed"
