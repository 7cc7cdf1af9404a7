"""Figures and a widget for activation patching (attnkit/interp/patching.py, notebook 06).

fig = plot_head_patching(effects, labels, title=...)   # {module: (heads, q_pos)} -> one panel per module
fig = plot_residual_patching(residual, labels)         # {hook name: (pos,)} -> layers × positions
PatchingExplorer(adder)                                # type a clean and a corrupted problem
"""

from __future__ import annotations

import ipywidgets as W
import numpy as np
from matplotlib.figure import Figure

from ..interp.patching import HeadPatching, patch_heads
from . import accessibility
from .alt_text import text_alternative
from .colour import cell_text_colour
from .figure_policy import SMALLEST_PT as SMALL
from .plotting import png_bytes
from .widget_tools import DISPLAY_DPI, Serial, error_html, figure_words, hide_image, show_image

PATCH_CMAP = "RdBu"  # blue: the patch restores the clean answer; red: it pushes away from it


def _panel(fig, ax, values: np.ndarray, x_labels, y_labels, title: str, vmax: float):
    image = ax.imshow(values, cmap=PATCH_CMAP, vmin=-vmax, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(x_labels)), x_labels)
    ax.set_yticks(range(len(y_labels)), y_labels)
    ax.set_title(title, fontsize=10)
    for (i, j), v in np.ndenumerate(values):
        if abs(v) >= 0.1:
            ax.text(
                j,
                i,
                f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=SMALL,
                color=cell_text_colour(image, v),
            )
    return image


def plot_head_patching(
    effects: dict,
    labels: dict,
    title: str = "activation patching: each head's z, one position at a time",
    vmax: float | None = None,
) -> Figure:
    """One panel per attention module: heads down, query positions across (token labels), the
    normalised effect of patching that head's z at that position from the clean run."""
    names = list(effects)
    vmax = vmax or max(0.1, max(float(np.nanmax(np.abs(e))) for e in effects.values()))
    cols = 2 if len(names) > 2 else len(names)
    rows = -(-len(names) // cols)
    fig = Figure(figsize=(4.2 * cols + 0.8, 2.5 * rows + 0.9), layout="constrained")  # ≤ 9.2 in: not shrunk
    axes = fig.subplots(rows, cols, squeeze=False)
    image = None
    for ax, name in zip(axes.flat, names):
        values = np.asarray(effects[name])
        side = "dec" if name.startswith("dec.") else "enc"
        x = list(labels.get(side, []))[: values.shape[1]]
        x += [str(i) for i in range(len(x), values.shape[1])]
        if side == "dec":  # a decoder position reads token t and writes the next one
            out = list(labels.get("out", []))
            x = [f"{t}\n→{out[i]}" if i < len(out) else t for i, t in enumerate(x)]  # two lines: no overlap
        image = _panel(fig, ax, values, x, [f"head {h}" for h in range(values.shape[0])], name, vmax)
        ax.set_xlabel("query position (token)" if side == "enc" else "decoder position (reads → writes)", fontsize=9)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    if image is None:
        raise ValueError("no attention module to draw: `effects` is empty")
    fig.colorbar(image, ax=axes, label="normalised effect (1 = restores the clean answer)", shrink=0.8)
    fig.suptitle(title, fontsize=11)
    return fig


def plot_residual_patching(
    residual: dict,
    labels: dict,
    title: str = "where the difference lives: the residual stream patched one position at a time",
) -> Figure:
    """Rows: the residual stream after each layer (encoder, the memory, decoder); columns: positions."""
    enc = [n for n in residual if n.startswith("enc.") or n == "hook_memory"]
    dec = [n for n in residual if n.startswith("dec.")]
    fig = Figure(figsize=(8.8, 1.6 + 0.45 * max(len(enc), len(dec))), layout="constrained")
    # decoder labels ("t\n→u") are wider than the source's digits
    axes = fig.subplots(
        1, 2, width_ratios=[max(1, len(labels.get("enc", []))), 1.6 * max(1, len(labels.get("dec", [])))]
    )
    vmax = max(0.1, max(float(np.abs(v).max()) for v in residual.values()))
    image = None
    for ax, names, side in ((axes[0], enc, "enc"), (axes[1], dec, "dec")):
        if not names:
            ax.set_visible(False)
            continue
        values = np.stack([residual[n] for n in names])
        x = list(labels.get(side, []))[: values.shape[1]]
        x += [str(i) for i in range(len(x), values.shape[1])]
        rows = [n.replace(".hook_resid_post", " (after layer)").replace("hook_memory", "memory") for n in names]
        if side == "dec":  # a decoder position reads token t and writes the next one
            out = list(labels.get("out", []))
            x = [f"{t}\n→{out[i]}" if i < len(out) else t for i, t in enumerate(x)]
        image = _panel(fig, ax, values, x, rows, "encoder" if side == "enc" else "decoder", vmax)
        ax.set_xlabel("source position (token)" if side == "enc" else "decoder position (reads → writes)", fontsize=9)
    if image is None:
        raise ValueError("no residual stream to draw: `effects` is empty")
    fig.colorbar(image, ax=axes, label="normalised effect", shrink=0.9)
    fig.suptitle(title, fontsize=11)
    return fig


class PatchingExplorer:
    """Type a clean and a corrupted problem; see every head's patching effect on one answer token.

    PatchingExplorer(adder)                 # in a notebook cell: the widget
    explorer.set_pair("125+137", "125+134") # or type in the boxes
    explorer.result                         # the HeadPatching behind the figure
    """

    def __init__(self, adder, clean: str = "125+137", corrupted: str = "125+134"):
        self.adder = adder
        self.result: HeadPatching | None = None
        style = {"description_width": "80px"}
        self.clean = W.Text(value=clean, description="clean", style=style, continuous_update=False)
        self.corrupted = W.Text(value=corrupted, description="corrupted", style=style, continuous_update=False)
        self.output = W.Dropdown(options=[("whole answer", -1)], value=-1, description="effect on", style=style)
        self.message = W.HTML()
        self.image = W.Image(format="png")
        self.words = figure_words()
        self.widget = W.VBox([W.HBox([self.clean, self.corrupted, self.output]), self.message, self.image, self.words])
        self.widget.add_class("attnkit-patching-explorer")
        for widget, name in [(self.clean, "clean"), (self.corrupted, "corrupted"), (self.output, "output")]:
            widget.add_class(f"attnkit-patching-{name}")
        accessibility.mark(self.widget, live=[self.message])
        self._serial = Serial(self._update)
        for box in (self.clean, self.corrupted, self.output):
            box.observe(lambda change: self._serial.request(), names="value")
        self._serial.request()

    def _ipython_display_(self) -> None:  # the keyboard and screen-reader script, then the widget
        accessibility.show(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def set_pair(self, clean: str, corrupted: str) -> PatchingExplorer:
        with self.clean.hold_trait_notifications(), self.corrupted.hold_trait_notifications():
            self.clean.value, self.corrupted.value = clean, corrupted
        self._serial.request()
        self._serial.wait()
        return self

    def _update(self, stale) -> None:
        try:
            result = patch_heads(self.adder, self.clean.value, self.corrupted.value)
        except Exception as e:  # a malformed problem, an operand too long: said in the widget
            self.message.value = error_html(e)
            hide_image(self.image, self.words)
            return
        if stale():
            return
        options = [("whole answer", -1)] + [
            (f"answer token {i} ('{t}')", i) for i, t in enumerate(result.labels["out"])
        ]
        if self.output.options != tuple(options):
            keep = self.output.value if self.output.value < len(options) - 1 else -1
            with self.output.hold_trait_notifications():
                self.output.options, self.output.value = options, keep
        k = self.output.value
        effects = result.effect if k < 0 else {n: np.nan_to_num(e[:, :, k]) for n, e in result.by_output.items()}
        what = "the clean answer" if k < 0 else f"token {k} ('{result.labels['out'][k]}') of the clean answer"
        gap = result.clean_metric - result.corrupted_metric
        gap = gap.sum() if k < 0 else gap[k]
        self.result = result
        self.message.value = f"log-probability of {what}: clean run − corrupted run = {gap:.2f}" + (
            " — too small to normalise by: pick another token or pair" if abs(gap) < 1e-3 else ""
        )
        fig = plot_head_patching(
            effects, result.labels, title=f"patching {self.clean.value} into {self.corrupted.value}: effect on {what}"
        )
        show_image(self.image, png_bytes(fig, DISPLAY_DPI), self.words, text_alternative(fig))
