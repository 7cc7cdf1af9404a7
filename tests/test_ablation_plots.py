"""The ablation figures and tables, drawn from the committed results file."""

import io

import pytest

from attnkit.experiments import ablation_studies
from attnkit.experiments.ablation_studies import ABLATION_RESULTS_PATH
from attnkit.ui import ablation_plots

pytestmark = pytest.mark.skipif(not ABLATION_RESULTS_PATH.exists(), reason="no committed ablation results")


@pytest.fixture(scope="module")
def results():
    return ablation_studies.load_ablation_results()


@pytest.mark.parametrize("plot", ["plot_drops", "plot_drop_heatmaps", "plot_pruning_curves", "plot_importance"])
def test_every_figure_has_titles_labels_and_saves(results, plot):
    fig = getattr(ablation_plots, plot)(results)
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert axes and all(ax.get_title() for ax in axes), plot
    assert all(ax.get_xlabel() or ax.get_ylabel() or ax.get_xticklabels() for ax in axes)
    for fmt, magic in [("png", b"\x89PNG"), ("svg", b"<?xml")]:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt)
        assert buf.getvalue().startswith(magic)


def test_tables_hold_every_head(results):
    table = ablation_plots.head_table(results)
    assert len(table) == 24 and {"drop zero", "drop mean"} <= set(table.columns)
    carry = ablation_plots.carry_table(results, "zero")
    assert len(carry) == 24 and "carry − no carry" in carry.columns


def test_the_drop_chart_has_room_above_its_tallest_bar_and_a_tick_per_decade(results):
    """Issue 40's walk through notebook 04: no tick above 10 and the tallest bars touching the top."""
    import numpy as np

    fig = ablation_plots.plot_drops(results)
    ax = fig.axes[0]
    fig.canvas.draw()
    tallest = max(bar.get_height() for bar in ax.patches)
    top_px = ax.transData.transform((0, ax.get_ylim()[1]))[1]
    bar_px = ax.transData.transform((0, tallest))[1]
    bottom_px = ax.transData.transform((0, 0))[1]
    assert (bar_px - bottom_px) / (top_px - bottom_px) < 0.95, "the tallest bar touches the top edge"
    decades = [t for t in ax.get_yticks() if t > 0]
    assert decades == [10**k for k in range(len(decades))] and decades[-1] * 10 > tallest, decades
    assert np.all(np.diff(ax.get_yticks()) > 0)
