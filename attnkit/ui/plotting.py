"""Attention heatmaps with one convention everywhere: queries down, keys across, tokens on both axes.

    fig = heatmap(pattern, q_tokens, k_tokens, title="dec.cross.1.2")   # one head: (q_pos, k_pos)
    fig = heatmap_grid(patterns, q_tokens, k_tokens)                    # d2l's (rows, cols, q_pos, k_pos)
    save_figure(fig, "artifacts/cross.svg")                             # .png or .svg, by suffix

Figures are plain matplotlib `Figure`s, made without pyplot: nothing is kept in pyplot's
global list (the explorer redraws hundreds of them), and a notebook shows one by returning it.
A sample's attention, labelled and outlined (attention_view, attention_figure, AttentionPlot),
is drawn by attnkit.ui.attention_plot with these.
Cells a head cannot attend to (the decoder's future) are grey, not a white "0": the causal
structure is then visible at a glance, and distinct from a weight the head chose to make 0.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.text import Text

from ..interp.roles import MEASURES
from .colour import cell_text_colour
from .figure_policy import SMALLEST_PT

QUERY_LABEL = "query (attending) ↓"
KEY_LABEL = "key (attended to) →"
CMAP = matplotlib.colormaps["Blues"].with_extremes(bad="#cfcfcf")  # bad = masked cells
OUTLINE = "#e6550d"  # the aligned digit column, outlined in orange


def save_figure(fig: Figure, path) -> Path:
    """Write `fig` as PNG or SVG, chosen by the suffix of `path`; folders are created."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise ValueError(f"save_figure writes .png or .svg, not {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=fmt, dpi=150 if fmt == "png" else None, bbox_inches="tight")
    return path


SCREEN_DPI = 96  # widgets show PNGs pixel for pixel; 9 pt text (the smallest used) is then 12 px
SMALL = SMALLEST_PT  # points: the smallest text in any figure (cell weights, notes, grid ticks)


def png_bytes(fig: Figure, dpi: int = SCREEN_DPI) -> bytes:
    """The figure as PNG bytes (what the explorers' Image widgets show, at this size). zlib
    level 1: the default level 6 takes longer and saves little on a flat-coloured heatmap."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": 1})
    return buf.getvalue()


class PanelFigure(Figure):
    """A figure of heatmap panels that AttentionPlot redraws in place: its panels, its line of
    small print, and (once drawn) its canvas and the pixels of everything that never changes."""

    attnkit_panels: list[_Panel]
    attnkit_note: Text
    attnkit_canvas: FigureCanvasAgg | None = None
    attnkit_background: Any = None


class _Panel:
    """One (q_pos, k_pos) heatmap on an axes, redrawable in place: the explorer updates the
    image, labels and overlays of an existing figure instead of building a new one (faster)."""

    def __init__(self, ax, n_q: int, n_k: int, vmax: float):
        self.ax, self.vmax = ax, vmax
        self.texts: list[Text] = []
        self.image = ax.imshow(
            np.zeros((n_q, n_k)), cmap=CMAP, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest"
        )
        # All outlined cells in one collection, outside autoscaling: one artist to update and draw.
        self.outline = ax.add_collection(
            PolyCollection([], facecolors="none", edgecolors=OUTLINE, linewidths=2), autolim=False
        )
        ax.tick_params(length=0)

    def update(self, pattern, q_tokens, k_tokens, masked=None, outline=None, annotate=False, min_shown=0.05):
        """annotate: write each weight >= min_shown in its cell (small ones would only be clutter)."""
        pattern = np.asarray(pattern, dtype=float)
        self.image.set_data(np.ma.masked_array(pattern, mask=masked if masked is not None else False))
        # A grid's inner panels hide their axes (heatmap_grid): their tokens are the shared ones the
        # outer panels set, and a tick made for nobody to see costs as much as one shown.
        if self.ax.xaxis.get_visible():
            self.ax.set_xticks(range(len(k_tokens)), k_tokens)
        if self.ax.yaxis.get_visible():
            self.ax.set_yticks(range(len(q_tokens)), q_tokens)
        cells = zip(*np.nonzero(outline)) if outline is not None else []
        self.outline.set_verts(
            [[(k - 0.5, q - 0.5), (k + 0.5, q - 0.5), (k + 0.5, q + 0.5), (k - 0.5, q + 0.5)] for q, k in cells]
        )
        for text in self.texts:
            text.remove()
        self.texts = []
        if annotate:
            for (q, k), w in np.ndenumerate(pattern):
                if (masked is None or not masked[q, k]) and not np.isnan(w) and w >= min_shown:
                    self.texts.append(
                        self.ax.text(
                            k,
                            q,
                            f"{w:.2f}",
                            ha="center",
                            va="center",
                            fontsize=SMALL,
                            color=cell_text_colour(self.image, w),
                        )
                    )

    def outlined(self) -> list[tuple[int, int]]:
        """The (q, k) cells outlined now."""
        return sorted(
            (round(v[:, 1].min() + 0.5), round(v[:, 0].min() + 0.5))
            for v in (path.vertices for path in self.outline.get_paths())
        )

    def set_title(self, title: str, fontsize: float) -> None:
        # A fixed y: matplotlib then skips re-measuring the tick labels to place the title.
        self.ax.set_title(title, fontsize=fontsize, y=1.0)


def _check(pattern: np.ndarray, q_tokens: Sequence[str], k_tokens: Sequence[str]) -> None:
    if pattern.shape[-2:] != (len(q_tokens), len(k_tokens)):
        raise ValueError(
            f"pattern is {pattern.shape[-2:]} (q_pos, k_pos) but there are "
            f"{len(q_tokens)} query and {len(k_tokens)} key labels"
        )


def heatmap(
    pattern,
    q_tokens: Sequence[str],
    k_tokens: Sequence[str],
    title: str = "attention weights",
    masked=None,
    outline=None,
    annotate: bool = True,
    vmax: float = 1.0,
    note: str | None = None,
) -> PanelFigure:
    """One head's weights, (q_pos, k_pos): queries down, keys across, a colour bar.

    masked:   (q_pos, k_pos) bool, True where the head cannot attend (drawn grey)
    outline:  (q_pos, k_pos) bool, cells to outline (e.g. the aligned digit column)
    annotate: write each weight of at least 0.05 in its cell
    note:     a line of small print under the figure (how to read the marks)
    """
    pattern = np.asarray(pattern, dtype=float)
    _check(pattern, q_tokens, k_tokens)
    # Sizes in inches: cells scale with the token counts, margins (labels, colour bar) stay fixed.
    cell_w, cell_h, left, right, top, bottom = 0.5, 0.42, 1.05, 1.0, 0.6, 0.75
    width, height = left + cell_w * len(k_tokens) + right, top + cell_h * len(q_tokens) + bottom
    fig = PanelFigure(figsize=(width, height))
    box = (left / width, bottom / height, cell_w * len(k_tokens) / width, cell_h * len(q_tokens) / height)
    ax = fig.add_axes(box)
    panel = _Panel(ax, len(q_tokens), len(k_tokens), vmax)
    panel.update(pattern, q_tokens, k_tokens, masked, outline, annotate)
    fig.attnkit_panels = [panel]  # what AttentionPlot updates in place
    ax.set_xlabel(KEY_LABEL)
    ax.set_ylabel(QUERY_LABEL)
    # Fixed label positions (0.42 in below the cells, 0.8 in left of them): otherwise every
    # draw measures the tick labels to place the axis labels, a fifth of a redraw's time.
    ax.xaxis.set_label_coords(0.5, -0.42 / box[3] / height)
    ax.yaxis.set_label_coords(-0.8 / box[2] / width, 0.5)
    panel.set_title(title, 9)
    fig.colorbar(
        panel.image,
        cax=fig.add_axes((1 - (right - 0.25) / width, box[1], 0.12 / width, box[3])),
        label="weight",
        ticks=[0, vmax / 2, vmax],
    )
    fig.attnkit_note = fig.text(0.05 / width, 0.05 / height, note or "", fontsize=SMALL, color="#555555", va="bottom")
    return fig


def heatmap_grid(
    patterns,
    q_tokens: Sequence[str],
    k_tokens: Sequence[str],
    title: str = "attention weights",
    row_titles: Sequence[str] | None = None,
    col_titles: Sequence[str] | None = None,
    masked=None,
    outline=None,
    annotate: bool = False,
    vmax: float = 1.0,
    note: str | None = None,
    cell: float | None = None,
    row: float = 0.28,
) -> PanelFigure:
    """d2l's show_heatmaps: `patterns` (rows, cols, q_pos, k_pos), e.g. (layers, heads, q, k),
    drawn as a grid sharing one colour scale and the same token labels; masked/outline as in
    heatmap(), one (q_pos, k_pos) array applied to every panel. `cell`: a cell's width in
    inches (default: room for a written weight when annotating, less otherwise); `row`, a row's
    height (room for a 9 pt token label and a gap)."""
    patterns = np.asarray(patterns, dtype=float)
    if patterns.ndim != 4:
        raise ValueError(f"patterns must be (rows, cols, q_pos, k_pos), got shape {patterns.shape}")
    _check(patterns, q_tokens, k_tokens)
    n_rows, n_cols = patterns.shape[:2]
    # Sizes in inches: panels scale with the token counts, margins with the longest label. Kept
    # narrow enough that a 4-head grid fits JupyterLab's ~960 px output without being shrunk.
    cell = cell or (0.38 if annotate else 0.24)  # room for "0.23" at 9 pt and a gap
    panel_w, panel_h, gap_w, gap_h = cell * len(k_tokens) + 0.12, row * len(q_tokens) + 0.12, 0.2, 0.5
    left = 0.45 + 0.095 * max(len(str(t)) for t in q_tokens)
    right, top, bottom = 0.8, 0.75, 0.75
    width = left + n_cols * panel_w + (n_cols - 1) * gap_w + right
    height = top + n_rows * panel_h + (n_rows - 1) * gap_h + bottom
    fig = PanelFigure(figsize=(width, height))
    axes = fig.subplots(
        n_rows,
        n_cols,
        squeeze=False,
        sharex=True,
        sharey=True,
        gridspec_kw=dict(
            left=left / width,
            right=1 - right / width,
            bottom=bottom / height,
            top=1 - top / height,
            wspace=gap_w / panel_w,
            hspace=gap_h / panel_h,
        ),
    )
    fig.attnkit_panels = []
    for r in range(n_rows):
        for c in range(n_cols):
            ax = axes[r, c]
            # Shared axes label only the bottom row's keys and the first column's queries; the other
            # axes would draw nothing (no tick marks), so they are not drawn at all: half the time
            # of building a 2 x 4 grid went into their ticks.
            ax.xaxis.set_visible(r == n_rows - 1)
            ax.yaxis.set_visible(c == 0)
            panel = _Panel(ax, len(q_tokens), len(k_tokens), vmax)
            panel.update(patterns[r, c], q_tokens, k_tokens, masked, outline, annotate)
            fig.attnkit_panels.append(panel)
            image = panel.image
            panel.set_title(
                " ".join(t for t in ((row_titles or [""] * n_rows)[r], (col_titles or [""] * n_cols)[c]) if t), SMALL
            )
            ax.tick_params(labelsize=SMALL)
            ax.xaxis.set_label_coords(0.5, 0)  # the panels' own axis labels are empty: skip placing them
            ax.yaxis.set_label_coords(0, 0.5)
    fig.supxlabel(KEY_LABEL, fontsize=10, y=0.3 / height)
    fig.supylabel(QUERY_LABEL, fontsize=10, x=0.08 / width)
    fig.suptitle(title, fontsize=11, y=1 - 0.08 / height, va="top")
    fig.colorbar(
        image,
        cax=fig.add_axes((1 - (right - 0.2) / width, bottom / height, 0.12 / width, 1 - (top + bottom) / height)),
        label="weight",
        ticks=[0, vmax / 2, vmax],
    )
    fig.attnkit_note = fig.text(0.05 / width, 0.05 / height, note or "", fontsize=SMALL, color="#555555", va="bottom")
    return fig


def roles_heatmap(roles, measures: Sequence[str] = MEASURES, title: str = "measured role of every head") -> Figure:
    """The head-roles table (attnkit.roles.head_roles) as a heatmap: heads down, measures across.
    Shares are on a 0–1 scale (blue); entropy is in bits, on its own scale (green); each has its
    colour bar. Grey = not defined for that kind of head."""
    shares = [m for m in measures if m != "entropy"]
    n = len(measures)
    width, height = 0.9 * n + 3.6, 0.26 * len(roles) + 1.6  # 9 in: ~900 px, not shrunk in JupyterLab
    fig = Figure(figsize=(width, height))
    x0, cell = 1.5 / width, 0.9 / width  # left margin for the head names; one column
    box_y, box_h = 0.5 / height, 1 - 1.2 / height
    left = fig.add_axes((x0, box_y, cell * len(shares), box_h))
    values = roles[shares].to_numpy(dtype=float)
    panel = _Panel(left, len(roles.index), len(shares), 1.0)
    panel.update(values, list(roles.index), shares, masked=np.isnan(values), annotate=True, min_shown=0.0)
    left.set_xlabel("share of attention on …")
    left.set_ylabel("head (kind.layer.head)")
    left.xaxis.set_ticks_position("top")
    bars = x0 + cell * n + 0.25 / width
    fig.colorbar(panel.image, cax=fig.add_axes((bars, box_y, 0.12 / width, box_h)), label="share (0–1)")
    if "entropy" in measures:
        right = fig.add_axes((x0 + cell * len(shares) + 0.05 / width, box_y, cell - 0.05 / width, box_h), sharey=left)
        ent = roles[["entropy"]].to_numpy(dtype=float)
        image = right.imshow(ent, cmap="Greens", aspect="auto", interpolation="nearest", vmin=0)
        for q, w in enumerate(ent[:, 0]):
            right.text(
                0,
                q,
                f"{w:.2f}",
                ha="center",
                va="center",
                fontsize=SMALL,
                color=cell_text_colour(image, w),
            )
        right.set_xticks([0], ["entropy\n(bits)"])
        right.xaxis.set_ticks_position("top")
        right.tick_params(labelleft=False, length=0)
        fig.colorbar(
            image,
            cax=fig.add_axes((bars + 1.0 / width, box_y, 0.12 / width, box_h)),
            label="entropy (bits; 0 = one key)",
        )
    fig.suptitle(title, fontsize=11, y=1 - 0.1 / height, va="top")
    return fig
