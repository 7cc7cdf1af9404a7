"""attnkit/ui/figure_policy.py: its checks catch what they name, and the explorers' figures pass it.
(Every figure the notebooks show is checked while they run under nbval: the root conftest.py.)"""

import numpy as np
from matplotlib.figure import Figure

from attnkit.ui import colour
from attnkit.ui import figure_policy as policy
from attnkit.ui.widget_tools import DISPLAY_DPI


def plain(width=6.0, fontsize=10):
    fig = Figure(figsize=(width, 3))
    ax = fig.add_axes((0.1, 0.2, 0.85, 0.65))
    ax.plot([0, 1], [0, 1])
    ax.set_title("a title", fontsize=fontsize)
    ax.set_xlabel("x", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)
    return fig


def test_a_plain_figure_passes():
    assert policy.problems(plain()) == []


def test_too_wide_for_the_output_area():
    width = 12.0  # 1,200 px, about 1,050 once cropped to what it draws
    found = policy.problems(plain(width), dpi=100)
    assert any("would be shrunk" in p for p in found), found
    assert policy.problems(plain(width), dpi=100, tight=False)
    assert not any("shrunk" in p for p in policy.problems(plain(9.0), dpi=100))


def test_text_too_small():
    found = policy.problems(plain(fontsize=8), dpi=100)  # 11.1 px
    assert any("below 12 px" in p for p in found), found
    assert policy.problems(plain(fontsize=9), dpi=96) == []  # 12 px exactly


def test_overlapping_and_touching_texts():
    fig = plain()
    ax = fig.axes[0]
    ax.text(0.5, 0.5, "0.23", fontsize=10)
    ax.text(0.52, 0.5, "0.08", fontsize=10)
    assert any("overlap" in p for p in policy.problems(fig)), policy.problems(fig)
    crowded = plain()
    crowded.axes[0].set_xticks(np.linspace(0, 1, 40), [f"label {i}" for i in range(40)])
    assert any("overlap" in p for p in policy.problems(crowded))


def test_text_cut_off_by_its_axes():
    fig = plain()
    fig.axes[0].text(0.98, 0.5, "a long note past the edge", fontsize=10, clip_on=True)
    assert any("cut off" in p for p in policy.problems(fig)), policy.problems(fig)


def test_attention_explorer_figures(adder, one_thread):
    from attnkit.ui.attention_plot import AttentionPlot
    from attnkit.ui.widgets import AttentionExplorer

    a, b = np.array([5, 663, 999]), np.array([299, 497, 1])
    ex = AttentionExplorer(adder, a, b)
    for kind in ("enc.self", "dec.self", "dec.cross"):
        for head in (None, 0):
            fig = AttentionPlot().figure(ex.cache, 1, kind, 1, head)
            assert policy.problems(fig, DISPLAY_DPI, tight=False) == [], (kind, head)


def test_patching_and_sortedness_explorer_figures(adder, one_thread):
    import attnkit
    from attnkit.interp import patching
    from attnkit.ui.patching_view import plot_head_patching
    from attnkit.ui.sortedness_plots import SortednessExplorer, plot_attention, sample

    result = patching.patch_heads(adder, "125+137", "125+134")
    fig = plot_head_patching({n: np.nan_to_num(e[:, :, 1]) for n, e in result.by_output.items()}, result.labels)
    assert policy.problems(fig, DISPLAY_DPI) == []
    model = attnkit.load_pretrained("sortedness-alibi")
    seq = sample("hard", 64)
    size = SortednessExplorer.CELL
    fig = plot_attention(model, seq, window=(0, SortednessExplorer.WINDOW), cell=size, row=size)
    assert policy.problems(fig, DISPLAY_DPI, tight=False) == []


def categories(*colours):
    fig = plain()
    for i, c in enumerate(colours):
        fig.axes[0].plot([0, 1], [i, i + 1], color=c, label=f"series {i}")
    fig.axes[0].legend(fontsize=10)
    return fig


def test_categories_told_apart_by_red_and_green_alone_fail():
    found = policy.problems(categories("#d62728", "#2ca02c"))  # tab10's red and green
    assert any("differ by ΔE" in p and "deuteranopia" in p for p in found), found
    # matplotlib's six default colours fail too (orange and green under protanopia); the kit's pass
    assert policy.problems(categories(*[f"C{i}" for i in range(6)]))
    assert policy.problems(categories(*colour.PALETTE[:6])) == []


def test_every_pair_of_the_palette_stays_apart_in_every_vision():
    distance, vision, pair = colour.closest_pair(colour.PALETTE[:6])
    assert distance >= colour.MIN_DELTA_E, (distance, vision, pair)
    # the simulation: a pure red and a pure green look alike to a deuteranope, not to anyone else
    assert colour.delta_e("#ff0000", "#00ff00", "deuteranopia") < colour.delta_e("#ff0000", "#00ff00") / 3


def heatmap(text_colour):
    fig = plain()
    ax = fig.axes[0]
    image = ax.imshow(np.array([[0.1, 0.65], [0.9, 0.3]]), cmap="Blues", vmin=0, vmax=1)
    for (i, j), v in np.ndenumerate(image.get_array()):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=10, color=text_colour(image, v))
    return fig


def test_numbers_on_heatmap_cells_are_chosen_by_contrast():
    found = policy.problems(heatmap(lambda image, v: "white" if v > 0.6 else "black"))  # the old rule
    assert any("contrasts" in p and "'0.65'" in p for p in found), found  # white on a mid blue
    assert policy.problems(heatmap(colour.cell_text_colour)) == []
    assert min(colour.contrast(colour.text_colour_on(g), g) for g in np.linspace(0, 1, 101).astype(str)) >= 4.5


def test_a_figure_says_in_words_what_it_shows():
    """Every figure's text alternative (attnkit.ui.alt_text): its kind, title, panels, axes, series
    and the fact it is there for; one without a title has none and breaks the policy."""
    from attnkit import sortedness
    from attnkit.ui import alt_text
    from attnkit.ui.sortedness_plots import plot_curves

    words = alt_text.text_alternative(plot_curves(sortedness.load_results()["encodings"]))
    for part in (
        "Line chart: Extrapolation",
        "2 panels",
        "against sequence length",
        "Series: sinusoidal",
        "At length 256",
    ):
        assert part in words, words
    untitled = Figure()
    untitled.add_subplot().plot([0, 1])
    assert alt_text.text_alternative(untitled) == ""
    assert any("no text alternative" in p for p in policy.problems(untitled)), policy.problems(untitled)


def test_in_ipython_a_figures_plain_text_is_its_description():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats

    import attnkit

    shell = InteractiveShell.instance()
    attnkit._describe_figures()  # what `import attnkit` does in a kernel
    data, _ = shell.display_formatter.format(plain())
    assert data["text/plain"].startswith("Line chart: a title."), data
    # what the inline backend does when a notebook draws its first figure: PNG on, every Figure printer
    # taken off the per-type formatters (the description was lost there, on notebooks 02 and 05's pages)
    select_figure_formats(shell, {"png"})
    data, _ = shell.display_formatter.format(plain())
    assert data["text/plain"].startswith("Line chart: a title.") and "image/png" in data, data
