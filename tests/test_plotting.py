"""attnkit.plotting: titles, axis labels, token labels, colour bars, masks, outlines, PNG and SVG."""

import numpy as np
import pandas as pd
import pytest
import torch

from attnkit.adder.data import BOS, PAD, encode_sources
from attnkit.interp.roles import MEASURES
from attnkit.ui.attention_plot import AttentionPlot, attention_figure, decoder_query_labels
from attnkit.ui.plotting import (
    KEY_LABEL,
    QUERY_LABEL,
    heatmap,
    heatmap_grid,
    png_bytes,
    roles_heatmap,
    save_figure,
)

TOKENS = ["1", "2", "+", "3", "4"]


def labels(ax, axis):
    return [t.get_text() for t in (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels())]


def cache_for_12_plus_345():
    """A run_with_cache-like cache for "12+345" -> "357" with uniform patterns."""
    src = encode_sources(np.array([12]), np.array([345]), 3, zero_pad=False)  # the layout the asserts read
    tgt = torch.tensor([[BOS, 3, 5, 7, PAD]])
    cache = {"src": src, "tgt": tgt}
    for name, (nq, nk) in {"enc.self": (7, 7), "dec.self": (5, 5), "dec.cross": (5, 7)}.items():
        cache[f"{name}.0.hook_pattern"] = torch.rand(1, 4, nq, nk).softmax(-1)
    return cache


def test_heatmap_has_title_axis_labels_tokens_and_colour_bar():
    fig = heatmap(np.eye(5), TOKENS, TOKENS, title="one head")
    ax, cbar = fig.axes
    assert ax.get_title() == "one head"
    assert ax.get_xlabel() == KEY_LABEL and "key" in KEY_LABEL
    assert ax.get_ylabel() == QUERY_LABEL and "query" in QUERY_LABEL
    assert labels(ax, "x") == TOKENS and labels(ax, "y") == TOKENS
    assert cbar.get_ylabel() == "weight"
    # Queries run down: the first query is the top row.
    assert ax.get_ylim()[0] > ax.get_ylim()[1]


def test_heatmap_writes_only_weights_worth_reading():
    pattern = np.zeros((2, 3))
    pattern[0, 1], pattern[1, 2] = 0.8, 0.01
    texts = [t.get_text() for t in heatmap(pattern, ["a", "b"], ["x", "y", "z"]).axes[0].texts]
    assert texts == ["0.80"]  # 0.01 is below the 0.05 threshold: not written


def test_heatmap_rejects_labels_that_do_not_fit():
    with pytest.raises(ValueError, match="3 query and 5 key labels"):
        heatmap(np.eye(5), TOKENS[:3], TOKENS)


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_save_figure_writes_png_and_svg(tmp_path, suffix, magic):
    path = save_figure(heatmap(np.eye(5), TOKENS, TOKENS), tmp_path / "sub" / f"fig{suffix}")
    data = path.read_bytes()
    assert data.startswith(magic)
    if suffix == ".svg":
        assert b"<svg" in data and b"key (attended to)" in data  # text stays text in the SVG


def test_save_figure_refuses_other_formats(tmp_path):
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        save_figure(heatmap(np.eye(5), TOKENS, TOKENS), tmp_path / "fig.jpg")


def test_grid_follows_d2l_layers_heads_convention():
    patterns = np.random.default_rng(0).random((2, 4, 5, 5))  # (layers, heads, q, k)
    fig = heatmap_grid(
        patterns,
        TOKENS,
        TOKENS,
        title="grid",
        row_titles=["layer 0", "layer 1"],
        col_titles=[f"head {h}" for h in range(4)],
    )
    panels, cbar = fig.axes[:8], fig.axes[8]
    assert len(fig.axes) == 9 and cbar.get_ylabel() == "weight"
    assert panels[5].get_title() == "layer 1 head 1"
    assert fig.get_suptitle() == "grid"
    assert fig.get_supxlabel() == KEY_LABEL and fig.get_supylabel() == QUERY_LABEL
    assert labels(panels[4], "y") == TOKENS and labels(panels[4], "x") == TOKENS
    np.testing.assert_array_equal(panels[6].images[0].get_array(), patterns[1, 2])
    with pytest.raises(ValueError, match="rows, cols, q_pos, k_pos"):
        heatmap_grid(patterns[0], TOKENS, TOKENS)


def test_decoder_rows_say_what_they_read_and_write():
    assert decoder_query_labels(["<s>", "3", "5", "7"]) == ["<s>→3", "3→5", "5→7", "7→</s>"]


def test_decoder_self_attention_greys_out_the_future():
    fig = attention_figure(cache_for_12_plus_345(), 0, "dec.self", 0, head=1)
    shown = fig.axes[0].images[0].get_array()
    assert shown.shape == (4, 4)  # padding dropped
    np.testing.assert_array_equal(np.ma.getmaskarray(shown), np.triu(np.ones((4, 4), bool), k=1))
    assert labels(fig.axes[0], "y") == ["<s>→3", "3→5", "5→7", "7→</s>"]
    assert labels(fig.axes[0], "x") == ["<s>", "3", "5", "7"]
    assert "dec.self.0.1" in fig.axes[0].get_title()


def test_cross_attention_outlines_the_aligned_column():
    fig = attention_figure(cache_for_12_plus_345(), 0, "dec.cross", 0, head=0)
    ax = fig.axes[0]
    assert labels(ax, "x") == ["1", "2", "+", "3", "4", "5"]
    # hundreds -> '3'; tens -> '1', '4'; units -> '2', '5': five outlined cells
    assert fig.attnkit_panels[0].outlined() == [(0, 3), (1, 0), (1, 4), (2, 1), (2, 5)]


def test_carry_outline_marks_the_column_to_the_right():
    plot = AttentionPlot()
    cache = cache_for_12_plus_345()
    fig = plot.figure(cache, 0, "dec.cross", 0, head=0, outline="carry")
    # writing hundreds -> the tens digits '1', '4'; writing tens -> the units digits '2', '5'
    assert fig.attnkit_panels[0].outlined() == [(0, 0), (0, 4), (1, 1), (1, 5)]
    assert "carry column" in fig.attnkit_note.get_text()
    assert plot.figure(cache, 0, "dec.cross", 0, head=0, outline=None) is fig  # redrawn in place ...
    assert not fig.attnkit_panels[0].outlined() and fig.attnkit_note.get_text() == ""  # ... note, boxes too
    with pytest.raises(ValueError, match="outline 'diag'"):
        attention_figure(cache, 0, "dec.cross", 0, head=0, outline="diag")


def test_all_heads_grid_for_one_layer():
    fig = attention_figure(cache_for_12_plus_345(), 0, "enc.self", 0)
    assert [ax.get_title() for ax in fig.axes[:4]] == [f"enc.self.0.{h}" for h in range(4)]
    assert "all heads" in fig.get_suptitle()


def test_attention_plot_redraws_in_place():
    cache = cache_for_12_plus_345()
    plot = AttentionPlot()
    first = plot.figure(cache, 0, "dec.cross", 0, head=0)
    before = png_bytes(first)
    cache["dec.cross.0.hook_pattern"] = cache["dec.cross.0.hook_pattern"].flip(-1)
    second = plot.figure(cache, 0, "dec.cross", 0, head=2)
    assert second is first  # same layout: the figure is reused ...
    assert "dec.cross.0.2" in second.axes[0].get_title()
    assert png_bytes(second) != before  # ... and shows the new weights
    assert len(second.attnkit_panels[0].outlined()) == 5  # overlays replaced, not piled up
    assert plot.figure(cache, 0, "dec.self", 0, head=0) is not first


@pytest.mark.parametrize("kind, head", [("dec.cross", None), ("dec.self", 2), ("enc.self", 0)])
def test_blitted_png_has_the_same_pixels_as_a_full_draw(kind, head, tmp_path):
    import io

    from PIL import Image

    cache = cache_for_12_plus_345()
    plot = AttentionPlot()
    save_figure(plot.figure(cache, 0, kind, 0, head), tmp_path / "at_150_dpi.png")
    plot.png(plot.figure(cache, 0, kind, 0, head))  # builds the background
    cache[f"{kind}.0.hook_pattern"] = cache[f"{kind}.0.hook_pattern"].flip(-2)  # new weights on the same layout
    fig = plot.figure(cache, 0, kind, 0, head, subtitle="again")
    blitted, full = plot.png(fig), png_bytes(fig)
    pixels = [np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")) for png in (blitted, full)]
    np.testing.assert_array_equal(*pixels)
    save_figure(fig, tmp_path / "again.png")  # a save in between changes nothing
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(plot.png(fig))).convert("RGBA")), pixels[0])


def test_roles_heatmap_shows_every_head_and_greys_undefined():
    heads = ["enc.self.0.0", "dec.self.0.0", "dec.cross.0.0"]
    roles = pd.DataFrame({m: [0.5, np.nan, 0.25] for m in MEASURES}, index=heads)
    roles["entropy"] = [1.0, 0.5, 2.0]
    fig = roles_heatmap(roles)
    ax = fig.axes[0]
    assert labels(ax, "y") == heads and labels(ax, "x") == [m for m in MEASURES if m != "entropy"]
    assert np.ma.getmaskarray(ax.images[0].get_array())[1].all()
    assert fig.get_suptitle()


def test_roles_heatmap_has_a_colour_bar_for_shares_and_for_entropy():
    heads = ["enc.self.0.0", "dec.cross.0.0"]
    roles = pd.DataFrame({m: [0.5, 0.25] for m in MEASURES}, index=heads)
    roles["entropy"] = [1.0, 2.0]
    labels_of_bars = [ax.get_ylabel() for ax in roles_heatmap(roles).axes]
    assert any("share" in t for t in labels_of_bars) and any("entropy" in t for t in labels_of_bars)


def test_no_text_below_8_points_in_the_attention_figures():
    cache = cache_for_12_plus_345()
    for head in (None, 1):
        fig = attention_figure(cache, 0, "dec.cross", 0, head)
        sizes = [
            t.get_fontsize()
            for t in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_fontsize"))
            if t.get_text()
        ]
        assert min(sizes) >= 8
