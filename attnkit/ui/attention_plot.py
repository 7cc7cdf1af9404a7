"""One sample's attention, as notebook 03 and the explorer show it: attention_view picks a layer's
patterns, labels (decoder rows read one token and write the next) and the cells to outline out of a
run_with_cache cache; attention_figure draws one head or every head of the layer with
attnkit.ui.plotting's heatmaps. The explorer's figures come from AttentionPlot, which keeps one
figure per layout and redraws it in place (benchmarks/bench_explorer.py times that).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..adder.data import PAD, tokens
from ..interp.roles import KIND_NAMES, measure_masks
from .plotting import SCREEN_DPI, SMALL, PanelFigure, heatmap, heatmap_grid


def decoder_query_labels(tgt_tokens: Sequence[str]) -> list[str]:
    """Decoder rows read token t and write token t+1: label them "in→out" ("<s>→1", ..., "0→</s>")."""
    written = list(tgt_tokens[1:]) + ["</s>"]
    return [f"{i}→{o}" for i, o in zip(tgt_tokens, written)]


OUTLINES = {
    "aligned": "the aligned digit column (same place value)",
    "carry": "the carry column (one place to the right)",
}


def attention_view(
    cache: dict, index: int, kind: str, layer: int, reverse_output: bool = False, outline: str | None = "aligned"
) -> dict:
    """What attention_figure draws for sample `index` of a run_with_cache cache: query and key
    labels, the layer's patterns (heads, q_pos, k_pos) without padding, the masked cells, the
    cells to outline (the keys of measure `outline`, "aligned" or "carry", from attnkit.roles;
    None for none) and a one-line note on how to read them."""
    src_ids, tgt_ids = cache["src"][index : index + 1], cache["tgt"][index : index + 1]
    tgt_list = tgt_ids[0].tolist()
    n_tgt = tgt_list.index(PAD) if PAD in tgt_list else len(tgt_list)  # real up to the first padding
    src_tok, tgt_tok = tokens(src_ids[0].tolist()), tokens(tgt_list[:n_tgt])
    if kind == "enc.self":
        q_tok, k_tok = src_tok, src_tok
    elif kind == "dec.self":
        q_tok, k_tok = decoder_query_labels(tgt_tok), tgt_tok
    elif kind == "dec.cross":
        q_tok, k_tok = decoder_query_labels(tgt_tok), src_tok
    else:
        raise ValueError(f"unknown attention kind {kind!r}; choose one of {list(KIND_NAMES)}")
    nq, nk = len(q_tok), len(k_tok)
    pattern = cache[f"{kind}.{layer}.hook_pattern"][index, :, :nq, :nk].float().cpu().numpy()
    masked = boxes = None
    if kind == "dec.self":
        masked = np.triu(np.ones((nq, nk), dtype=bool), k=1)  # the future: the causal mask
        note = "grey: future positions, masked (causal)"
    elif outline is not None:
        if outline not in OUTLINES:
            raise ValueError(f"outline {outline!r}: choose one of {list(OUTLINES)} or None")
        boxes = measure_masks(kind, src_ids, tgt_ids, reverse_output)[outline][1][0, :nq, :nk].numpy()
        note = f"orange boxes: {OUTLINES[outline]}"
    else:
        note = ""
    return dict(q_tokens=q_tok, k_tokens=k_tok, pattern=pattern, masked=masked, outline=boxes, note=note)


class AttentionPlot:
    """attention_figure(), keeping its figures to redraw them in place: building a figure (axes,
    colour bar) costs about as much as rendering it, so the explorer builds each layout once."""

    def __init__(self, annotate: bool = True):
        self.annotate = annotate  # weights written in the cells of the one-head view
        self._figures: dict = {}

    def figure(
        self,
        cache: dict,
        index: int,
        kind: str,
        layer: int,
        head: int | None = None,
        reverse_output: bool = False,
        subtitle: str = "",
        outline: str | None = "aligned",
    ) -> Figure:
        v = attention_view(cache, index, kind, layer, reverse_output, outline)
        pattern, name = v["pattern"], f"{KIND_NAMES[kind]}, layer {layer}"
        suffix = f"\n{subtitle}" if subtitle else ""
        key = (kind, head is None, pattern.shape)
        fig = self._figures.get(key)
        if head is None:
            title = f"{name}, all heads{suffix}"
            col_titles = [f"{kind}.{layer}.{h}" for h in range(pattern.shape[0])]
            if fig is None:
                fig = heatmap_grid(
                    pattern[None],
                    v["q_tokens"],
                    v["k_tokens"],
                    title=title,
                    col_titles=col_titles,
                    masked=v["masked"],
                    outline=v["outline"],
                    note=v["note"],
                )
            else:
                fig.suptitle(title, fontsize=11)
                fig.attnkit_note.set_text(v["note"])
                for panel, p, t in zip(fig.attnkit_panels, pattern, col_titles):
                    panel.update(p, v["q_tokens"], v["k_tokens"], v["masked"], v["outline"])
                    panel.set_title(t, SMALL)
        else:
            title = f"{kind}.{layer}.{head}: {name}, head {head}{suffix}"
            if fig is None:
                fig = heatmap(
                    pattern[head],
                    v["q_tokens"],
                    v["k_tokens"],
                    title=title,
                    masked=v["masked"],
                    outline=v["outline"],
                    annotate=self.annotate,
                    note=v["note"],
                )
            else:
                panel = fig.attnkit_panels[0]
                fig.attnkit_note.set_text(v["note"])
                panel.update(pattern[head], v["q_tokens"], v["k_tokens"], v["masked"], v["outline"], self.annotate)
                panel.set_title(title, 9)
        self._figures[key] = fig
        return fig

    def png(self, fig: PanelFigure, dpi: int = SCREEN_DPI) -> bytes:
        """fig (one of this plot's figures) as PNG bytes, redrawing only what changes.

        Blitting: the parts no update touches (colour bar, shared axis labels) are rendered
        once into a background; each call restores it and draws the heatmaps, tick labels,
        titles, boxes and weights on top. Same pixels as a full draw, in about half the time.
        """
        canvas = getattr(fig, "attnkit_canvas", None)
        if canvas is None or fig.dpi != dpi:
            fig.set_dpi(dpi)
            canvas = fig.attnkit_canvas = FigureCanvasAgg(fig)
            fig.attnkit_background = None
        suptitle = getattr(fig, "_suptitle", None)  # matplotlib has no public getter of the artist
        dynamic = [fig.attnkit_note] + ([suptitle] if suptitle is not None else [])
        for panel in fig.attnkit_panels:
            dynamic += [
                panel.image,
                panel.outline,
                *panel.texts,
                *panel.ax.spines.values(),
                panel.ax.xaxis,
                panel.ax.yaxis,
                panel.ax.title,
            ]
        if fig.attnkit_background is None:
            shown = [a for a in dynamic if a.get_visible()]
            for artist in shown:
                artist.set_visible(False)
            canvas.draw()
            fig.attnkit_background = canvas.copy_from_bbox(fig.bbox)
            for artist in shown:
                artist.set_visible(True)
        canvas.restore_region(fig.attnkit_background)
        renderer = canvas.get_renderer()
        for artist in dynamic:
            artist.draw(renderer)
        buf = io.BytesIO()
        width, height = canvas.get_width_height()
        PIL.Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1).save(
            buf, format="png", compress_level=1
        )
        return buf.getvalue()


def attention_figure(
    cache: dict,
    index: int,
    kind: str,
    layer: int,
    head: int | None = None,
    reverse_output: bool = False,
    subtitle: str = "",
    outline: str | None = "aligned",
) -> Figure:
    """Sample `index` of a run_with_cache cache: one head's heatmap, or (head=None) all heads of
    the layer as a grid. Decoder rows are labelled "read→written"; the aligned digit column (or,
    outline="carry", the carry column) is outlined in encoder self- and decoder cross-attention;
    the causal mask is grey in decoder self-attention."""
    return AttentionPlot().figure(cache, index, kind, layer, head, reverse_output, subtitle, outline)
