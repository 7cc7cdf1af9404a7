"""What every figure the kit shows must satisfy, stated once and checked by `problems(fig)`.

* Width: at the dpi it is shown at, no wider than JupyterLab's output area (OUTPUT_WIDTH_PX). A
  wider PNG is scaled down to fit, and all its text with it. Wide comparisons become rows or
  small multiples instead.
* Text: no text smaller than MIN_TEXT_PX on screen (font size, as CSS counts it; digits are then
  about 9 px tall). JupyterLab's own output text is 13 px.
* No two texts overlap or touch (tick labels, numbers written in cells, titles), and no text is
  cut off by the axes it is clipped to.
* Colour (colour.py): the categories of a figure (its legend's entries) differ by at least
  colour.MIN_DELTA_E in normal vision and under simulated protanopia, deuteranopia and tritanopia;
  a number written on a heatmap's cell contrasts with it by at least 4.5:1 (WCAG 2.1 AA).
* A text alternative (alt_text.text_alternative): a figure has a title to build it from.

Notebook figures are shown at matplotlib's figure.dpi (NOTEBOOK_DPI) with bbox_inches="tight"
(IPython's inline PNG); the explorers show PNGs pixel for pixel at plotting.SCREEN_DPI.
Every figure a notebook displays is checked while the notebooks run under test: the root
conftest.py starts each kernel with `record_displayed_figures` (an IPython startup file), and
fails the cell whose figure breaks the policy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import matplotlib.text
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import Collection
from matplotlib.colors import to_hex, to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from . import alt_text, colour

OUTPUT_WIDTH_PX = 940  # JupyterLab 4 at a 1400 px wide window (measured: tests/test_browser.py)
MIN_TEXT_PX = 12.0  # 9 pt at 96 dpi; 9 pt at 100 dpi is 12.5 px
NOTEBOOK_DPI = 100  # matplotlib's default figure.dpi, what the inline backend renders at
SMALLEST_PT = 9  # the smallest font size the kit's figures use
GAP_PX = 1.0  # the least room between two texts side by side


@contextmanager
def _drawn_texts(out: list) -> Iterator[None]:
    """Record every Text that actually draws (visible, non-empty, inside the view) while inside."""
    original = matplotlib.text.Text.draw

    def draw(self, renderer):
        original(self, renderer)
        if self.get_visible() and self.get_text().strip():
            # the text's own box (an Annotation's would include its arrow)
            out.append((self, matplotlib.text.Text.get_window_extent(self, renderer)))

    matplotlib.text.Text.draw = draw  # type: ignore[method-assign]
    try:
        yield
    finally:
        matplotlib.text.Text.draw = original  # type: ignore[method-assign]


def _overlap(a, b, gap: float) -> bool:
    """Boxes that share area, or sit side by side closer than `gap` (texts on one line)."""
    x = min(a.x1, b.x1) - max(a.x0, b.x0)
    y = min(a.y1, b.y1) - max(a.y0, b.y0)
    return x > -gap and y > 0.25 * min(a.height, b.height)


def problems(fig: Figure, dpi: float | None = None, tight: bool = True) -> list[str]:
    """What breaks the policy in `fig` shown at `dpi` (default: its own), cropped to what it draws
    (tight=True, as IPython shows it) or whole (tight=False, the explorers' PNGs). [] = fine."""
    dpi = dpi or fig.dpi
    scale = dpi / fig.dpi
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    texts: list = []
    with _drawn_texts(texts):
        canvas.draw()
    renderer = canvas.get_renderer()
    width_in = fig.get_tightbbox(renderer).width if tight else fig.get_figwidth()
    found = []
    if width_in * dpi > OUTPUT_WIDTH_PX + 0.5:
        found.append(
            f"{width_in * dpi:.0f} px wide at {dpi:.0f} dpi: JupyterLab's output area is "
            f"{OUTPUT_WIDTH_PX} px, so it would be shrunk"
        )
    title = fig.get_suptitle() or next((ax.get_title() for ax in fig.axes if ax.get_title()), "")
    small = sorted(
        {
            (text.get_fontsize(), text.get_text())
            for text, _ in texts
            if text.get_fontsize() * dpi / 72 < MIN_TEXT_PX - 1e-6
        }
    )
    if small:
        found.append(
            f"{len(small)} texts below {MIN_TEXT_PX:g} px, e.g. "
            + ", ".join(f"{t!r} at {pt * dpi / 72:.1f} px ({pt:g} pt)" for pt, t in small[:3])
        )
    for text, box in texts:
        clip = text.get_clip_box() if text.get_clip_on() else None
        if clip is not None and (
            box.x0 < clip.x0 - 1 or box.x1 > clip.x1 + 1 or box.y0 < clip.y0 - 1 or box.y1 > clip.y1 + 1
        ):
            found.append(f"text {text.get_text()!r} is cut off at the edge of its axes")
    for i, (a, box_a) in enumerate(texts):
        for b, box_b in texts[i + 1 :]:
            if _overlap(box_a, box_b, GAP_PX / scale):
                found.append(f"texts {a.get_text()!r} and {b.get_text()!r} overlap or touch")
    found += _colour_problems(fig, texts)
    if not alt_text.text_alternative(fig):
        found.append("no title, so no text alternative (attnkit.ui.alt_text): give the figure a title")
    title = " ".join((title or "figure").split())  # one line, also for a two-line title
    return [f"{title}: {p}" for p in found]


def _colour_of(handle):
    """The colour a legend entry shows (a line, a patch, a bar group, a scatter), as seen on white
    (a shaded band is its colour at its alpha), or None."""
    if isinstance(handle, Line2D):
        rgba = to_rgba(handle.get_color(), handle.get_alpha())
    else:
        patches = getattr(handle, "patches", None) or ([handle] if isinstance(handle, Patch) else [])
        faces = [p.get_facecolor() for p in patches[:1]] or (
            list(handle.get_facecolor()[:1]) if isinstance(handle, Collection) else []
        )
        if not faces:
            return None
        rgba = to_rgba(faces[0])
    alpha = rgba[3]
    return tuple(alpha * c + (1 - alpha) for c in rgba[:3])


def _cell_under(text):
    """The colour of the heatmap cell a text is written on (in data coordinates), or None."""
    ax = text.axes
    if ax is None or text.get_transform() != ax.transData or text.get_bbox_patch() is not None:
        return None
    x, y = text.get_position()
    for image in ax.get_images():
        values = image.get_array()
        if values is None or values.ndim != 2:
            continue
        x0, x1, y0, y1 = image.get_extent()
        fx, fy = (x - x0) / (x1 - x0), (y - y0) / (y1 - y0)
        if 0 <= fx < 1 and 0 <= fy < 1:
            rows, cols = values.shape
            row = int(fy * rows) if image.origin == "lower" else int((1 - fy) * rows)
            value = values[min(row, rows - 1), min(int(fx * cols), cols - 1)]
            if value is np.ma.masked or not np.isfinite(value):
                return None
            return image.to_rgba(value)
    return None


def _colour_problems(fig: Figure, texts: list) -> list[str]:
    found = []
    colours = [
        to_hex(c)
        for ax in fig.axes
        for handle in ax.get_legend_handles_labels()[0]
        if (c := _colour_of(handle)) is not None
    ]
    if len(set(colours)) > 1:
        distance, vision, (a, b) = colour.closest_pair(colours)
        if distance < colour.MIN_DELTA_E:
            seen = "" if vision == "normal" else f" with {vision}"
            found.append(
                f"categories drawn in {a} and {b} differ by ΔE {distance:.1f}{seen}, under "
                f"{colour.MIN_DELTA_E:g}: take them from colour.PALETTE"
            )
    for text, _ in texts:
        cell = _cell_under(text)
        if cell is not None and (ratio := colour.contrast(text.get_color(), cell)) < colour.MIN_CONTRAST:
            found.append(
                f"text {text.get_text()!r} contrasts {ratio:.1f}:1 with its cell, under {colour.MIN_CONTRAST:g}:1 "
                "(colour.cell_text_colour picks black or white)"
            )
    return found


def record_displayed_figures(log_path: str) -> None:
    """In a kernel: check every matplotlib figure IPython displays and append one JSON line
    {"title", "width_px", "problems"} per figure to `log_path` (root conftest.py reads it)."""
    from IPython.core import pylabtools

    show = pylabtools.print_figure

    def print_figure(fig, fmt="png", bbox_inches="tight", base64=False, **kwargs):
        found = problems(fig, tight=bbox_inches == "tight")
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"width_px": round(fig.get_figwidth() * fig.dpi), "problems": found}) + "\n")
        return show(fig, fmt, bbox_inches, base64, **kwargs)

    pylabtools.print_figure = print_figure  # the inline backend binds it when it is activated
