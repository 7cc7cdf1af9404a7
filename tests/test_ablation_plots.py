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
