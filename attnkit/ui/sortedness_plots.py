"""Figures and the explorer widget for notebook 05 (positional encodings and extrapolation).

Every function returns a plain matplotlib Figure: save it with fig.savefig("x.png") or ".svg".
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from ..core.positional import ENCODINGS, sinusoidal_table
from ..core.runtime import model_device
from ..sortedness import NEGATIVES, TRAIN_LENGTHS, SortednessClassifier, labelled_set, validate
from . import accessibility
from .alt_text import text_alternative
from .colour import PALETTE
from .figure_policy import SMALLEST_PT as SMALL
from .plotting import heatmap_grid, png_bytes
from .widget_tools import Serial, figure_words, hide_image, show_image

COLORS: dict[str, str] = dict(zip(ENCODINGS, PALETTE))  # apart under colour-vision deficiency (colour.py)
MARKERS: dict[str, str] = dict(zip(ENCODINGS, "osD^vP"))
TRAIN_MAX = max(TRAIN_LENGTHS)


def plot_curves(results: dict, encodings: Sequence[str] = ENCODINGS, title: str = "") -> plt.Figure:
    """Accuracy against length for each encoding: mean over seeds, band = min … max over seeds.
    Curves that coincide (ALiBi and relative both at 1.0; three at exactly 0.5) stay visible:
    each encoding has its own marker and is shifted sideways a little (log axis: a few percent)."""
    fig, axes = plt.subplots(1, 2, figsize=(9.2, 4.4), sharey=True)  # 920 px at 100 dpi: not shrunk
    for ax, neg in zip(axes, NEGATIVES):
        for i, enc in enumerate(encodings):
            curve = results[enc][neg]
            lengths = sorted(curve)
            mean = [curve[L]["mean"] for L in lengths]
            shift = 2 ** (0.05 * (i - (len(encodings) - 1) / 2))
            colour = COLORS.get(enc, PALETTE[i % len(PALETTE)])  # other curves (readouts): the palette in order
            ax.plot(
                [L * shift for L in lengths],
                mean,
                "-",
                marker=MARKERS.get(enc, "osD^vP"[i % 6]),
                ms=5,
                mfc="white",
                label=enc,
                color=colour,
            )
            ax.fill_between(
                lengths,
                [curve[L]["min"] for L in lengths],
                [curve[L]["max"] for L in lengths],
                color=colour,
                alpha=0.2,
            )
        ax.axvspan(min(TRAIN_LENGTHS), TRAIN_MAX, color="grey", alpha=0.15, label="training lengths")
        ax.axhline(0.5, color="black", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks([8, 16, 32, 64, 128, 256], ["8", "16", "32", "64", "128", "256"])
        ax.set_xlabel("sequence length")
        ax.set_title(f"{neg} negatives" + (" (one adjacent swap)" if neg == "hard" else " (random shuffles)"))
    axes[0].set_ylabel("balanced accuracy (0.5 = chance)")
    axes[0].set_ylim(0.4, 1.04)
    axes[1].legend(loc="center right", fontsize=9)  # the empty band between 1.0 and 0.5
    fig.suptitle(
        title
        or "Extrapolation: trained on lengths 8–16, tested to 256\n"
        "(band: min–max over seeds; curves shifted sideways a little so that coinciding ones show)",
        fontsize=11,
    )
    fig.tight_layout()
    longest = max(max(results[enc][NEGATIVES[0]]) for enc in encodings)
    at_longest = {enc: results[enc][NEGATIVES[0]].get(longest, {}).get("mean") for enc in encodings}
    fig.attnkit_fact = f"At length {longest}, {NEGATIVES[0]} negatives: " + ", ".join(  # type: ignore[attr-defined]
        f"{enc} {v:.2f}" for enc, v in sorted(at_longest.items(), key=lambda kv: -(kv[1] or 0)) if v is not None
    )
    return fig


def one_seed(result: dict, index: int = 0) -> dict:
    """The same structure as one encoding's results, holding only the seed at `index`."""

    def pick(stats: dict) -> dict:
        x = stats["seeds"][index]
        return {"mean": x, "std": 0.0, "min": x, "max": x, "seeds": [x]}

    return {part: {key: pick(stats) for key, stats in table.items()} for part, table in result.items()}


def results_table(
    results: dict,
    negative: str = "hard",
    lengths: Sequence[int] = (32, 64, 128, 256),
    encodings: Sequence[str] | None = None,
) -> str:
    """A markdown table: validation accuracy (lengths 8–16) and test accuracy at each length,
    mean ± std over seeds."""
    encodings = encodings or list(results)
    cell = lambda s: f"{s['mean']:.3f} ± {s['std']:.3f}"  # noqa: E731
    head = f"| encoding | val {negative} (8–16) | " + " | ".join(str(L) for L in lengths) + " |"
    rows = [head, "|" + "---|" * (len(lengths) + 2)]
    for enc in encodings:
        r = results[enc]
        rows.append(
            f"| {enc} | {cell(r['val'][negative])} | " + " | ".join(cell(r[negative][L]) for L in lengths) + " |"
        )
    return "\n".join(rows)


def _heatmap(ax, data, title, xlabel, ylabel, cmap="RdBu_r", symmetric=True):
    vmax = float(np.abs(data).max()) if symmetric else None
    im = ax.imshow(
        data, aspect="auto", cmap=cmap, vmin=-vmax if symmetric else None, vmax=vmax, interpolation="nearest"
    )
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    return im


def plot_position_term(scores: np.ndarray, title: str, boundary: int | None = TRAIN_MAX) -> plt.Figure:
    """One head's position-only attention score (q_pos, k_pos), on a diverging map centred on 0
    (red positive, blue negative) with its colour bar; lines at the longest training length."""
    fig, ax = plt.subplots(figsize=(6, 4.8))
    image = _heatmap(ax, np.asarray(scores), title, "key position j", "query position i")
    fig.colorbar(image, ax=ax, label="score (0 = white)")
    if boundary is not None:
        for f in (ax.axvline, ax.axhline):
            f(boundary - 0.5, color="k", lw=1)
    fig.tight_layout()
    return fig


def plot_position_tables(learned: torch.Tensor, d_model: int = 64) -> plt.Figure:
    """The learned table (rows = positions; rows ≥ 16 never trained) beside the sinusoidal one."""
    fig, axes = plt.subplots(2, 1, figsize=(9.2, 7.6))  # one above the other: wide enough to read
    tables = [
        ("learned table (trained model)", learned.detach().cpu().numpy()),
        ("sinusoidal table", sinusoidal_table(len(learned), d_model).numpy()),
    ]
    for ax, (name, table) in zip(axes, tables):
        im = _heatmap(ax, table.T, name, "position", "dimension")
        fig.colorbar(im, ax=ax, fraction=0.04)
        ax.axvline(TRAIN_MAX - 0.5, color="black", lw=1.5)
        ax.text(
            TRAIN_MAX + 2,
            2,
            "positions ≥ 16: never in training",
            fontsize=SMALL,
            va="top",
            bbox=dict(facecolor="white", alpha=0.8, lw=0),
        )
    fig.tight_layout()
    return fig


def plot_position_similarity(tables: dict[str, torch.Tensor]) -> plt.Figure:
    """PE(i)·PE(j) for each absolute table: a band along the diagonal means "nearby looks alike"."""
    fig, axes = plt.subplots(1, len(tables), figsize=(4.6 * len(tables), 4.2), squeeze=False)
    for ax, (name, table) in zip(axes[0], tables.items()):
        t = table.detach().cpu().float()
        im = _heatmap(ax, (t @ t.T).numpy(), f"{name}: PE(i)·PE(j)", "position j", "position i")
        fig.colorbar(im, ax=ax, fraction=0.04)
        for f in (ax.axvline, ax.axhline):
            f(TRAIN_MAX - 0.5, color="black", lw=1)
    fig.tight_layout()
    return fig


def plot_token_scores(
    models: dict[str, SortednessClassifier], length: int = 64, n: int = 32, seed: int = 0
) -> plt.Figure:
    """Where each model raises the alarm: the per-token "violation" score along sorted sequences
    (blue, mean and max over n) and, for n hard negatives, the score at the swapped pair (red dots,
    at the swap's position). Max pooling calls a sequence unsorted when any score is above 0."""
    rng = np.random.default_rng([seed, length])
    rows, _, kind = labelled_set(rng, n, n, 0, length)
    rows = np.stack(rows)
    cols = min(3, len(models))  # small multiples in rows of three: 920 px wide at most
    n_rows = -(-len(models) // cols)
    fig, axes = plt.subplots(n_rows, cols, figsize=(3.07 * cols, 2.9 * n_rows + 0.5), sharey=True, squeeze=False)
    for ax in axes.flat[len(models) :]:
        ax.set_visible(False)
    for ax, (enc, model) in zip(axes.flat, models.items()):
        scores = run_batch(model, rows)[1]  # (2n, L)
        pos = np.arange(length)
        ax.plot(pos, scores[kind == 0].mean(0), color="tab:blue", label="sorted: mean")
        ax.plot(pos, scores[kind == 0].max(0), color="tab:blue", lw=0.8, ls="--", label="sorted: max")
        swap = np.argmax(rows[kind == 1][:, :-1] > rows[kind == 1][:, 1:], axis=1)
        at_swap = np.maximum(scores[kind == 1][np.arange(n), swap], scores[kind == 1][np.arange(n), swap + 1])
        ax.scatter(swap, at_swap, s=8, color="tab:red", label="hard: at the swap", zorder=3)
        ax.axhline(0, color="black", lw=0.8)
        ax.axvspan(0, TRAIN_MAX - 0.5, color="grey", alpha=0.15)
        ax.set(title=enc, xlabel="position")
        ax.set_yscale("symlog", linthresh=1)
    for row in axes:
        row[0].set_ylabel('violation score\n(> 0: "unsorted")')
    axes[0][-1].legend(fontsize=SMALL, loc="lower right")
    fig.suptitle(f"Per-token violation scores at length {length}\n(grey: positions seen in training)")
    fig.tight_layout()
    return fig


def run_batch(model: SortednessClassifier, rows) -> tuple[np.ndarray, np.ndarray, dict]:
    """One forward pass over equal-length rows (batch, L): P(sorted) (batch,), each token's
    "a violation is here" score (batch, L) before pooling, and every head's attention pattern
    (a run_with_cache cache)."""
    names = [f"{name}.hook_pattern" for name in model.attention_modules()] + ["hook_token_score"]
    with torch.no_grad():
        logits, cache = model.run_with_cache(torch.as_tensor(np.asarray(rows), device=model_device(model)), names=names)
    return torch.sigmoid(logits).cpu().numpy(), cache["hook_token_score"].cpu().numpy(), cache


def run_one(model: SortednessClassifier, seq: Sequence[int]) -> tuple[float, np.ndarray, dict]:
    """run_batch() for one sequence: P(sorted), scores (L,), the cache."""
    p, scores, cache = run_batch(model, [list(seq)])
    return float(p[0]), scores[0], cache


def token_scores(model: SortednessClassifier, seq: Sequence[int]) -> np.ndarray:
    """(L,) each token's "a violation is here" score, before pooling."""
    return run_one(model, seq)[1]


def plot_attention(
    model: SortednessClassifier,
    seq: Sequence[int],
    title: str = "",
    window: tuple[int, int] | None = None,
    cache: dict | None = None,
    cell: float | None = None,
    row: float = 0.28,
) -> plt.Figure:
    """Every head's pattern for one sequence (plotting.heatmap_grid: layers down, heads across),
    the values as token labels, those of an out-of-order pair in red. `window` (start, stop)
    zooms into a slice of positions (rows then show only the keys inside it); by default the
    first 32. `cache`: run_one()'s, if at hand."""
    cache = cache if cache is not None else run_one(model, seq)[2]
    lo, hi = window or (0, min(len(seq), 32))
    names = sorted(k for k in cache if k.endswith(".hook_pattern"))
    patterns = np.stack([cache[name][0, :, lo:hi, lo:hi].cpu().numpy() for name in names])  # (layers, heads, q, k)
    labels = [str(v) for v in seq[lo:hi]]
    fig = heatmap_grid(
        patterns,
        labels,
        labels,
        title or f"attention patterns ({model.cfg.encoding}), positions {lo}–{hi - 1}",
        row_titles=[name.removesuffix(".hook_pattern") for name in names],
        col_titles=[f"head {h}" for h in range(patterns.shape[1])],
        note="red: a value in an out-of-order neighbouring pair",
        cell=cell,
        row=row,
    )
    # A head that looks outside the window leaves its panel blank: say so rather than show nothing.
    inside = patterns.sum(-1).mean(-1).reshape(-1)  # per panel: the mean weight a row keeps in the window
    for panel, share in zip(fig.attnkit_panels, inside):
        if share < 0.15:
            panel.ax.text(
                0.5,
                0.5,
                f"{share:.0%} of the weight\nfalls in this window",
                transform=panel.ax.transAxes,
                ha="center",
                va="center",
                fontsize=SMALL,
                bbox=dict(facecolor="white", alpha=0.9, lw=0),
            )
    in_descent = {j for i in range(len(seq) - 1) if seq[i] > seq[i + 1] for j in (i, i + 1)}
    for panel in fig.attnkit_panels:
        for axis in (panel.ax.xaxis, panel.ax.yaxis):
            if not axis.get_visible():  # an inner panel's: its labels are not drawn (heatmap_grid)
                continue
            for t, label in enumerate(axis.get_ticklabels()):
                if lo + t in in_descent:
                    label.set_color("red")
    return fig


def sample(kind: str, length: int, seed: int = 0) -> list[int]:
    """One test-like sequence: kind "sorted", "hard" (one adjacent swap) or "shuffle"."""
    counts = {"sorted": (1, 0, 0), "hard": (0, 1, 0), "shuffle": (0, 0, 1)}[kind]
    rows, _, _ = labelled_set(np.random.default_rng([seed, length, len(kind)]), *counts, length)
    return [int(v) for v in rows[0]]


class SortednessExplorer:
    """Pick an encoding, slide the test length, choose a sample — or type your own sequence —
    and see the prediction, where the model finds a violation, and every head's attention
    (an 8-token window around the first descent). Bad input is reported in the widget (the
    figure hidden meanwhile); moving a sample control clears a typed sequence. Updates are
    serialised (widget_tools.Serial)."""

    LENGTHS = (8, 12, 16, 24, 32, 48, 64, 128, 256)
    WINDOW = 8  # tokens shown: 2 layers × 4 heads of 8 × 8 fit JupyterLab's width at 10 px labels
    CELL = 0.2  # inches a token, across and down: controls and figure fit a 900 px high window

    def __init__(self, models: dict[str, SortednessClassifier]):
        import ipywidgets as W

        self.models = models
        self.encoding = W.Dropdown(
            options=list(models),
            description="encoding",
            value="alibi" if "alibi" in models else list(models)[0],
            layout=W.Layout(width="240px"),
        )
        self.length = W.SelectionSlider(
            options=list(self.LENGTHS), value=16, description="length", layout=W.Layout(width="360px")
        )
        # labelled by a widget of its own beside it (as its description it was drawn above the buttons)
        self.kind = W.ToggleButtons(options=["sorted", "hard", "shuffle"], value="hard", style={"button_width": "80px"})
        self.seed = W.Text(  # the sample's random seed, not a model's (the notebook's seeds 0/1/2 train models)
            value="0",
            description="sample seed",
            continuous_update=False,
            layout=W.Layout(width="200px"),
            style={"description_width": "initial"},
        )
        self.custom = W.Text(
            value="",
            description="your own",
            continuous_update=False,
            placeholder="values 0–99, e.g. 3 5 5 9 8, then Enter (empty: the sample above)",
            layout=W.Layout(width="95%"),
            style={"description_width": "70px"},
        )
        self.message = W.HTML()
        self.image = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))
        self.words = figure_words()
        self._serial = Serial(self._update_now)
        self._quiet = False
        self.encoding.observe(self.update, names="value")
        self.custom.observe(self.update, names="value")
        for w in (self.length, self.kind, self.seed):
            w.observe(self._on_sample_control, names="value")
        self.widget = W.VBox(
            [
                W.HBox([self.encoding, self.length]),
                W.HBox([W.Label("sample", layout=W.Layout(width="auto", margin="0 6px 0 24px")), self.kind, self.seed]),
                self.custom,
                self.message,
                self.image,
                self.words,
            ]
        )
        self.widget.add_class("attnkit-sortedness-explorer")
        accessibility.mark(self.widget, live=[self.message])
        self.update()

    def _ipython_display_(self) -> None:  # the keyboard and screen-reader script, then the widget
        accessibility.show(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def _on_sample_control(self, _=None) -> None:
        """Length, kind and seed choose a sample: a typed sequence would hide them, so it goes."""
        if self.custom.value.strip():
            self._quiet = True
            self.custom.value = ""
            self._quiet = False
        self.update()

    def sequence(self) -> list[int]:
        """The typed sequence (validated for this encoding), or else the chosen sample."""
        text = self.custom.value.strip()
        if not text:
            return sample(self.kind.value, self.length.value, self.seed_value())
        seq = []
        for part in text.replace(",", " ").split():
            try:
                seq.append(int(part))
            except ValueError:
                raise ValueError(f"{part!r} is not a whole number; type values 0–99 separated by spaces") from None
        try:
            return validate([seq], self.models[self.encoding.value].max_len)[0]
        except ValueError as e:  # validate numbers the sequences of a list: here there is one, yours
            raise ValueError(str(e).replace("sequence 0", "your sequence", 1)) from None

    def seed_value(self) -> int:
        """The seed box's number; a clear error for anything else (a Text box, not an IntText: an
        IntText silently put 0 back for "abc", and the learner never knew which sample was shown)."""
        text = self.seed.value.strip()
        try:
            seed = int(text)
        except ValueError:
            raise ValueError(f"seed {text!r} is not a whole number; type one, e.g. 0 or 7") from None
        if seed < 0:
            raise ValueError(f"seed {seed} is negative; type a whole number ≥ 0")
        return seed

    def update(self, _=None) -> None:
        """Redraw for the controls' current state (from any thread: never two at once)."""
        if not self._quiet:
            self._serial.request()

    def _update_now(self, stale) -> None:
        model = self.models[self.encoding.value]
        try:
            seq = self.sequence()
            L = len(seq)
            p, scores, cache = run_one(model, seq)  # one forward pass for the answer and the picture
            truth = bool(np.all(np.diff(seq) >= 0))
            descents = [i for i in range(L - 1) if seq[i] > seq[i + 1]]
            where = int(np.argmax(scores))
            centre = descents[0] if descents else where
            lo = max(0, min(centre - self.WINDOW // 2 + 1, L - self.WINDOW))
            window = (lo, min(L, lo + self.WINDOW))
            fig = plot_attention(model, seq, window=window, cache=cache, cell=self.CELL, row=self.CELL)
            alt = text_alternative(fig)
            png = png_bytes(fig)
        except ValueError as e:  # in the widget, never a traceback
            self.message.value = (
                f"<b style='color:#b00020'>✗ {html.escape(str(e), quote=False)}</b> "
                f"<i>(figure hidden until the sequence is fixed or cleared)</i>"
            )
            hide_image(self.image, self.words)
            return
        if stale():
            return
        shown = ", ".join(map(str, descents[:8])) + (f", … ({len(descents)} in all)" if len(descents) > 8 else "")
        source = "your sequence" if self.custom.value.strip() else f"{self.kind.value} sample, seed {self.seed_value()}"
        verdict = "✓ right" if (p > 0.5) == truth else "✗ wrong"
        self.message.value = (
            f"<b>{self.encoding.value}</b>, {source}, length {L}: P(sorted) = {p:.3f} → "
            f"{'sorted' if p > 0.5 else 'unsorted'}; truly {'sorted' if truth else 'unsorted'} "
            f"(<b>{verdict}</b>). Strongest violation score at position {where}; "
            f"true descents at {shown or 'none'}."
        )
        show_image(self.image, png, self.words, alt)
