"""AttentionExplorer: the adder's attention heatmaps, driven by widgets (notebook 03).

    explorer = AttentionExplorer(adder)   # then show it: `explorer` as a cell's last line
    explorer.show_head("dec.cross.1.2")   # jump to a head and the sample where it is most typical

Every head's pattern on every held-out problem is computed once, in one batched pass, when the
explorer is made; moving a slider then only redraws the figure (benchmarks/bench_explorer.py).
Figures are rendered to PNG at the size they are shown (widget_tools.DISPLAY_DPI) in an Image
widget. Redraws are serialised (widget_tools.Serial); mistakes are shown inside the widget, and
the figure is hidden while an error stands (it would show a state that no longer holds).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import ipywidgets as W
import numpy as np

from ..adder.data import load_test_set, parse_problem
from ..core.runtime import torch_threads
from ..interp.roles import KIND_NAMES, KINDS, MEASURES, problems_of, roles_from_cache
from . import accessibility
from .alt_text import text_alternative
from .attention_plot import AttentionPlot
from .plotting import save_figure
from .widget_tools import DISPLAY_DPI, Serial, error_html, figure_words, hide_image, show_image, verdict

ALL_HEADS = -1  # the head selector's value for "all heads of the layer, as a grid"


NO_OUTLINE = "none"


class AttentionExplorer:
    """Attention heatmaps of the adder, driven by widgets: sample and layer sliders, a head
    selector (one head, or all heads as a grid), the attention kind, what to outline (the
    aligned or the carry column), a text box for your own problem with the model's answer
    checked against the true sum, and the measured role of the shown heads (attnkit.roles),
    with a button to jump to the sample where the selected head is most typical.

    `roles`, when given, must be head_roles() of the same problems (a, b): its
    typical_sample indexes them. Otherwise it is measured from the explorer's own pass.
    """

    def __init__(self, adder, a: np.ndarray | None = None, b: np.ndarray | None = None, roles=None):
        if a is None:
            a, b = load_test_set()
        self.adder, self.a, self.b = adder, np.asarray(a), np.asarray(b)
        self.reverse_output = adder.cfg.reverse_output
        # One pass over every problem; z is not needed here, so it is not kept (memory).
        with torch_threads(1):
            answers, cache = adder.run_with_cache(problems_of(self.a, self.b), names=self._pattern_names(adder))
        self.answers = answers
        self.cache = {k: v.cpu() for k, v in cache.items()}
        self.roles = roles if roles is not None else roles_from_cache(self.cache, self.reverse_output)
        self.n_layers = {
            kind: sum(k.startswith(kind + ".") and k.endswith(".hook_pattern") for k in self.cache) for kind in KINDS
        }
        self.plot = AttentionPlot()
        self.custom: tuple[str, str, dict] | None = None  # (problem, answer, cache) while shown
        self._quiet = False  # True while several controls change at once: redraw only at the end
        self._role_tables: dict = {}
        self._serial = Serial(self._redraw_now)  # redraws never overlap; the last request wins
        self._model_lock = threading.Lock()  # typed problems run the shared model one at a time
        self._build()
        self.redraw()

    # ---------------------------------------------------------------- widgets

    @staticmethod
    def _pattern_names(adder) -> list[str]:
        return [f"{name}.hook_pattern" for name in adder.model.attention_modules()]

    def _build(self) -> None:
        n_heads = self.adder.cfg.n_heads
        self.kind = W.Dropdown(
            options=[(KIND_NAMES[k], k) for k in KINDS],
            value="dec.cross",
            description="attention",
            layout=W.Layout(width="250px"),
        )
        self.layer = W.IntSlider(
            value=self.n_layers["dec.cross"] - 1,
            min=0,
            max=self.n_layers["dec.cross"] - 1,
            description="layer",
            continuous_update=False,
            layout=W.Layout(width="260px"),  # at 200 px the track of a 2-layer slider was 24 px long
        )
        self.head = W.ToggleButtons(
            options=[("all", ALL_HEADS)] + [(str(h), h) for h in range(n_heads)],
            value=ALL_HEADS,
            description="head",
            style={"button_width": "36px"},
        )
        self.sample = W.IntSlider(
            value=0,
            min=0,
            max=len(self.a) - 1,
            description="sample",
            continuous_update=False,
            layout=W.Layout(width="520px"),
        )
        self.problem = W.Text(
            value="",
            placeholder="type a problem, e.g. 663+497, and press Enter",
            description="problem",
            continuous_update=False,
            layout=W.Layout(width="420px"),
        )
        self.typical = W.Button(
            description="typical sample of this head",
            icon="crosshairs",
            tooltip="jump to the held-out problem where this head's measures are closest to its averages",
            layout=W.Layout(width="230px"),
            disabled=self.head.value == ALL_HEADS,
        )
        self.outline = W.Dropdown(
            # a string for "nothing": a None value shows as no selection at all
            options=[("aligned column", "aligned"), ("carry column", "carry"), ("nothing", NO_OUTLINE)],
            value="aligned",
            description="outline",
            layout=W.Layout(width="240px"),
        )
        self.answer = W.HTML()
        self.role = W.HTML()
        self.message = W.HTML()  # a refused request (e.g. an unknown kind): nothing was changed
        self.image = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto", object_fit="contain"))
        self.words = figure_words()
        for widget, name in [
            (self.kind, "kind-select"),
            (self.layer, "layer-slider"),
            (self.head, "head-select"),
            (self.sample, "sample-slider"),
            (self.problem, "problem-text"),
            (self.typical, "typical-button"),
            (self.outline, "outline-select"),
            (self.answer, "answer"),
            (self.role, "role"),
            (self.message, "message"),
            (self.image, "figure"),
        ]:
            widget.add_class(f"attnkit-{name}")
        for control in (self.kind, self.layer, self.head, self.outline):
            control.observe(self._on_view, names="value")
        self.sample.observe(self._on_sample, names="value")
        self.problem.observe(self._on_problem, names="value")
        self.typical.on_click(lambda _: self._guarded(self.show_head, self.head_id))
        self.widget = W.VBox(
            [
                W.HBox([self.kind, self.layer, self.head]),
                W.HBox([self.sample, self.typical]),
                W.HBox([self.problem, self.outline]),
                self.message,
                self.answer,
                self.image,
                self.words,
                self.role,
            ]
        )
        self.widget.add_class("attnkit-explorer")
        accessibility.mark(self.widget, live=[self.message, self.answer])

    def _ipython_display_(self) -> None:  # the keyboard and screen-reader script, then the widget
        accessibility.show(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ---------------------------------------------------------------- state

    @property
    def head_id(self) -> str | None:
        """The selected head, "dec.cross.1.2", or None when all heads are shown."""
        if self.head.value == ALL_HEADS:
            return None
        return f"{self.kind.value}.{self.layer.value}.{self.head.value}"

    @contextmanager
    def _batch(self):
        """Change several controls, redraw once."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False
        self.redraw()

    def _check_view(self, sample, kind, layer, head) -> None:
        """ValueError, in words, for a control value the widgets would refuse."""
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown attention kind {kind!r}; choose one of {list(KINDS)}")
        n_layers = self.n_layers[kind or self.kind.value]
        if layer is not None and not 0 <= layer < n_layers:
            raise ValueError(f"layer {layer} does not exist: this kind has layers 0–{n_layers - 1}")
        if head is not None and head != ALL_HEADS and not 0 <= head < self.adder.cfg.n_heads:
            raise ValueError(
                f"head {head} does not exist: heads are 0–{self.adder.cfg.n_heads - 1} or ALL_HEADS ({ALL_HEADS})"
            )
        if sample is not None and not 0 <= int(sample) < len(self.a):
            raise ValueError(f"sample {sample} does not exist: samples are 0–{len(self.a) - 1}")

    def show(
        self, sample: int | None = None, kind: str | None = None, layer: int | None = None, head: int | None = None
    ) -> AttentionExplorer:
        """Set any of the controls at once (head=ALL_HEADS for the grid); returns self to display.
        A bad value raises ValueError, says so in the widget and changes nothing."""
        try:
            self._check_view(sample, kind, layer, head)
        except ValueError as e:
            self.message.value = error_html(f"{e} (nothing was changed)")
            raise
        self.message.value = ""
        with self._batch():
            if kind is not None:
                self.kind.value = kind
            if layer is not None:
                self.layer.value = layer
            if head is not None:
                self.head.value = head
            if sample is not None:
                self.sample.value = int(sample)
                self.custom = None
                self.problem.value = ""
        return self

    def show_head(self, head_id: str | None) -> AttentionExplorer:
        """Select `head_id` ("dec.cross.1.2") on the sample where its pattern is most typical."""
        if head_id is None:
            raise ValueError("pick one head (not 'all') to jump to its typical sample")
        if head_id not in self.roles.index:
            raise ValueError(f"unknown head {head_id!r}; heads are like {self.roles.index[0]!r}")
        kind, layer, head = head_id.rsplit(".", 2)
        return self.show(int(self.roles.loc[head_id, "typical_sample"]), kind, int(layer), int(head))

    # ---------------------------------------------------------------- events

    def _guarded(self, fn, *args) -> None:
        """Run a callback; show an error in the widget instead of a traceback."""
        try:
            fn(*args)
        except Exception as e:  # the widget must stay usable whatever happens
            self._error(e)

    def _error(self, e) -> None:
        self.answer.value = error_html(e) + " <i>(figure hidden until this is fixed)</i>"
        hide_image(self.image, self.words)

    def _on_view(self, change) -> None:
        if change["owner"] is self.kind:  # another kind may have another number of layers
            self.layer.max = self.n_layers[self.kind.value] - 1
        self.typical.disabled = self.head.value == ALL_HEADS
        if not self._quiet:
            self._guarded(self.redraw)

    def _on_sample(self, change) -> None:
        if self._quiet:
            return
        self.custom = None  # moving the slider returns to the held-out problems
        self._quiet = True
        self.problem.value = ""
        self._quiet = False
        self.sample.readout = True
        self._guarded(self.redraw)

    def _on_problem(self, change) -> None:
        if self._quiet:
            return
        self._guarded(self.try_problem, change["new"])

    def try_problem(self, text: str) -> None:
        """Run the model on a problem typed by the learner ("663+497") and show it."""
        if not text.strip():
            self.custom = None
        else:
            try:
                parse_problem(text, self.adder.cfg.n_digits)
            except ValueError as e:
                self._error(e)
                return
            with self._model_lock, torch_threads(1):
                answers, cache = self.adder.run_with_cache([text], names=self._pattern_names(self.adder))
            cache = {k: v.cpu() for k, v in cache.items()}
            self.custom = (text.strip(), answers[0], cache)
        # The slider's number would name a sample that is not shown: hidden until it moves again.
        self.sample.readout = self.custom is None
        self.redraw()

    # ---------------------------------------------------------------- drawing

    def _current(self) -> dict:
        """What is shown: the typed problem, or the held-out sample under the slider."""
        if self.custom is not None:
            problem, answer, cache = self.custom
            a, b = parse_problem(problem, self.adder.cfg.n_digits)
            return dict(cache=cache, index=0, where="your problem", problem=problem, answer=answer, truth=a + b)
        i = self.sample.value
        a, b = int(self.a[i]), int(self.b[i])
        return dict(
            cache=self.cache,
            index=i,
            where=f"sample {i} of {len(self.a)}",
            problem=f"{a}+{b}",
            answer=self.answers[i],
            truth=a + b,
        )

    def figure(self):
        """The figure now shown (a matplotlib Figure: save it with attnkit.plotting.save_figure).
        The explorer redraws it in place, so save it before moving a control."""
        c = self._current()
        head = None if self.head.value == ALL_HEADS else self.head.value
        mark = "✓" if c["answer"] == str(c["truth"]) else f"✗ (true sum {c['truth']})"
        subtitle = f"{c['where']}: {c['problem']} → {c['answer']} {mark}"
        return self.plot.figure(
            c["cache"],
            c["index"],
            self.kind.value,
            self.layer.value,
            head,
            self.reverse_output,
            subtitle=subtitle,
            outline=None if self.outline.value == NO_OUTLINE else self.outline.value,
        )

    def save(self, path) -> None:
        """Save the figure now shown as PNG or SVG (by the suffix of `path`)."""
        save_figure(self.figure(), path)

    def redraw(self) -> None:
        """Redraw for the controls' current state (from any thread: never two at once)."""
        self._serial.request()

    def _redraw_now(self, stale) -> None:
        try:
            c = self._current()
            fig = self.figure()
            alt = text_alternative(fig)
            png = self.plot.png(fig, DISPLAY_DPI)
            if stale():  # a newer request is next: it draws
                return
            self.answer.value = f"{c['where']}: " + verdict(c["problem"], c["answer"], c["truth"])
            show_image(self.image, png, self.words, alt)
        except Exception as e:  # the widget must stay usable whatever happens
            self._error(e)
            return
        key = (self.kind.value, self.layer.value, self.head.value)
        if key not in self._role_tables:  # the roles never change: build each table once
            self._role_tables[key] = self._role_html()
        self.role.value = self._role_tables[key]

    def _role_html(self) -> str:
        """The measured roles of the shown head(s): the numbers behind the picture."""
        prefix = f"{self.kind.value}.{self.layer.value}."
        rows = self.roles[self.roles.index.str.startswith(prefix)]
        if self.head_id is not None:
            rows = rows.loc[[self.head_id]]
        shown = [m for m in MEASURES if rows[m].notna().any()]
        th, td = "<th style='text-align:right;padding:0 8px'>", "<td style='text-align:right;padding:0 8px'>"
        head = "".join(f"{th}{m}</th>" for m in shown) + f"{th}typical sample</th>"
        body = "".join(
            f"<tr><td style='text-align:left'>{h}</td>"
            + "".join(f"{td}{r[m]:.2f}</td>" for m in shown)
            + f"{td}{int(r['typical_sample'])}</td></tr>"
            for h, r in rows.iterrows()
        )
        return (
            f"<details open><summary>measured over all {len(self.a)} held-out problems "
            f"(shares of attention; entropy in bits)</summary>"
            f"<table style='font-size:13px;border-collapse:collapse'><tr><th style='text-align:left'>head</th>"
            f"{head}</tr>{body}</table></details>"
        )
