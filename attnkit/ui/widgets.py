"""Interactive widgets for the notebooks.

    explorer = AttentionExplorer(adder)   # then show it: `explorer` as a cell's last line
    explorer.show_head("dec.cross.1.2")   # jump to a head and the sample where it is most typical

Every head's pattern on every held-out problem is computed once, in one batched pass, when the
explorer is made; moving a slider then only redraws the figure (benchmarks/bench_explorer.py).
Figures are rendered to PNG and shown in an Image widget: that redraws quickly and needs no
interactive matplotlib backend. Mistakes (a malformed problem) are shown inside the widget.
"""
from __future__ import annotations

import html
from contextlib import contextmanager
from typing import Optional

import ipywidgets as W
import numpy as np

from ..adder.data import carry_stats, load_test_set, parse_problem
from ..core.hooks import heads_by_module
from ..interp.ablation import MODES, Problems, check_baseline, model_of
from ..interp.studies import CARRY_GROUPS, pruning_subset
from ..interp.sweep import fast_matches
from ..core.runtime import torch_threads
from ..interp.roles import KIND_NAMES, KINDS, MEASURES, problems_of, roles_from_cache
from .plotting import AttentionPlot, save_figure

ALL_HEADS = -1  # the head selector's value for "all heads of the layer, as a grid"


def _verdict(problem: str, answer: str, truth: int) -> str:
    ok = answer == str(truth)
    mark = '<b style="color:#1a7f37">✓</b>' if ok else '<b style="color:#cf222e">✗</b>'
    return (f"<b>{html.escape(problem)}</b> → model: <b>{html.escape(answer) or '(nothing)'}</b> {mark} "
            f"(true sum {truth})")


class AttentionExplorer:
    """Attention heatmaps of the adder, driven by widgets: sample and layer sliders, a head
    selector (one head, or all heads as a grid), the attention kind, what to outline (the
    aligned or the carry column), a text box for your own problem with the model's answer
    checked against the true sum, and the measured role of the shown heads (attnkit.roles),
    with a button to jump to the sample where the selected head is most typical.

    `roles`, when given, must be head_roles() of the same problems (a, b): its
    typical_sample indexes them. Otherwise it is measured from the explorer's own pass.
    """

    def __init__(self, adder, a: Optional[np.ndarray] = None, b: Optional[np.ndarray] = None,
                 roles=None):
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
        self.n_layers = {kind: sum(k.startswith(kind + ".") and k.endswith(".hook_pattern") for k in self.cache)
                         for kind in KINDS}
        self.plot = AttentionPlot()
        self.custom: Optional[tuple[str, str, dict]] = None  # (problem, answer, cache) while shown
        self._quiet = False  # True while several controls change at once: redraw only at the end
        self._role_tables: dict = {}
        self._build()
        self.redraw()

    # ---------------------------------------------------------------- widgets

    @staticmethod
    def _pattern_names(adder) -> list[str]:
        return [f"{name}.hook_pattern" for name in adder.model.attention_modules()]

    def _build(self) -> None:
        n_heads = self.adder.cfg.n_heads
        self.kind = W.Dropdown(options=[(KIND_NAMES[k], k) for k in KINDS], value="dec.cross",
                               description="attention", layout=W.Layout(width="250px"))
        self.layer = W.IntSlider(value=self.n_layers["dec.cross"] - 1, min=0, max=self.n_layers["dec.cross"] - 1,
                                 description="layer", continuous_update=False, layout=W.Layout(width="200px"))
        self.head = W.ToggleButtons(options=[("all", ALL_HEADS)] + [(str(h), h) for h in range(n_heads)],
                                    value=ALL_HEADS, description="head",
                                    style={"button_width": "36px"})
        self.sample = W.IntSlider(value=0, min=0, max=len(self.a) - 1, description="sample",
                                  continuous_update=False, layout=W.Layout(width="520px"))
        self.problem = W.Text(value="", placeholder="type a problem, e.g. 663+497, and press Enter",
                              description="problem", continuous_update=False, layout=W.Layout(width="420px"))
        self.typical = W.Button(description="typical sample of this head", icon="crosshairs",
                                tooltip="jump to the held-out problem where this head's measures are closest "
                                        "to its averages", layout=W.Layout(width="230px"),
                                disabled=self.head.value == ALL_HEADS)
        self.outline = W.Dropdown(options=[("aligned column", "aligned"), ("carry column", "carry"), ("nothing", None)],
                                  value="aligned", description="outline", layout=W.Layout(width="240px"))
        self.answer = W.HTML()
        self.role = W.HTML()
        self.image = W.Image(format="png")
        for widget, name in [(self.kind, "kind-select"), (self.layer, "layer-slider"), (self.head, "head-select"),
                             (self.sample, "sample-slider"), (self.problem, "problem-text"),
                             (self.typical, "typical-button"), (self.outline, "outline-select"),
                             (self.answer, "answer"), (self.role, "role"),
                             (self.image, "figure")]:
            widget.add_class(f"attnkit-{name}")
        for control in (self.kind, self.layer, self.head, self.outline):
            control.observe(self._on_view, names="value")
        self.sample.observe(self._on_sample, names="value")
        self.problem.observe(self._on_problem, names="value")
        self.typical.on_click(lambda _: self._guarded(self.show_head, self.head_id))
        self.widget = W.VBox([
            W.HBox([self.kind, self.layer, self.head]),
            W.HBox([self.sample, self.typical]),
            W.HBox([self.problem, self.outline]), self.answer, self.image, self.role,
        ])
        self.widget.add_class("attnkit-explorer")

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ---------------------------------------------------------------- state

    @property
    def head_id(self) -> Optional[str]:
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

    def show(self, sample: Optional[int] = None, kind: Optional[str] = None, layer: Optional[int] = None,
             head: Optional[int] = None) -> "AttentionExplorer":
        """Set any of the controls at once (head=ALL_HEADS for the grid); returns self to display."""
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

    def show_head(self, head_id: Optional[str]) -> "AttentionExplorer":
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
            self.answer.value = f'<span style="color:#cf222e">⚠ {html.escape(str(e))}</span>'

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
                self.answer.value = f'<span style="color:#cf222e">⚠ {html.escape(str(e))}</span>'
                return
            with torch_threads(1):
                answers, cache = self.adder.run_with_cache([text], names=self._pattern_names(self.adder))
            cache = {k: v.cpu() for k, v in cache.items()}
            self.custom = (text.strip(), answers[0], cache)
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
        return dict(cache=self.cache, index=i, where=f"sample {i} of {len(self.a)}", problem=f"{a}+{b}",
                    answer=self.answers[i], truth=a + b)

    def figure(self):
        """The figure now shown (a matplotlib Figure: save it with attnkit.plotting.save_figure).
        The explorer redraws it in place, so save it before moving a control."""
        c = self._current()
        head = None if self.head.value == ALL_HEADS else self.head.value
        mark = "✓" if c["answer"] == str(c["truth"]) else f"✗ (true sum {c['truth']})"
        subtitle = f"{c['where']}: {c['problem']} → {c['answer']} {mark}"
        return self.plot.figure(c["cache"], c["index"], self.kind.value, self.layer.value, head,
                                self.reverse_output, subtitle=subtitle, outline=self.outline.value)

    def save(self, path) -> None:
        """Save the figure now shown as PNG or SVG (by the suffix of `path`)."""
        save_figure(self.figure(), path)

    def redraw(self) -> None:
        c = self._current()
        self.answer.value = f"{c['where']}: " + _verdict(c["problem"], c["answer"], c["truth"])
        self.image.value = self.plot.png(self.figure())
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
        head = "".join(f"<th>{m}</th>" for m in shown) + "<th>typical sample</th>"
        body = "".join(
            f"<tr><td>{h}</td>" + "".join(f"<td>{r[m]:.2f}</td>" for m in shown)
            + f"<td>{int(r['typical_sample'])}</td></tr>" for h, r in rows.iterrows())
        return (f"<details open><summary>measured over all {len(self.a)} held-out problems "
                f"(shares of attention; entropy in bits)</summary>"
                f"<table style='font-size:12px'><tr><th>head</th>{head}</tr>{body}</table></details>")


# ======================================================================== head ablation
# (attnkit.ablation; this class only appends to the module and uses nothing above but W and html)

class AblationExplorer:
    """Remove heads by hand and watch what breaks: one toggle per head, laid out as
    kind (rows) × layer × head (columns), a zero/mean switch, and a problem of your own.
    Every change re-measures greedy exact match, split by carries, on a fixed subset of the
    held-out set (`n_problems`, the joint-pruning search subset by default) and re-solves the problem.

        explorer = AblationExplorer(adder)
        explorer.set_removed(["dec.cross.1.2"], mode="mean")   # or click the toggles
        explorer.result["exact_match"]
    """

    def __init__(self, adder, n_problems: int = 2000, problem: str = "555+445", mode: str = "zero",
                 force: bool = False):
        self.adder, self.model = adder, model_of(adder)
        a, b = load_test_set()
        idx = pruning_subset(n_problems, total=len(a))
        self.a, self.b = a[idx], b[idx]
        self.problems = Problems.from_operands(self.model, self.a, self.b)
        n_carries, chain = carry_stats(self.a, self.b, self.model.cfg.n_digits)
        self.groups = {"all": np.ones(len(idx), bool), "no_carry": n_carries == 0,
                       "carry": n_carries >= 1, "chain_2plus": chain >= 2}
        self.result: dict = {}
        self._quiet = False
        self._build(mode, problem)
        try:
            check_baseline(adder, force)
            self.intact = fast_matches(self.model, self.problems, [[]])[0]
            self.update()
        except Exception as e:  # a broken model (or anything else): said inside the widget
            self.intact = None
            for t in self.toggles.values():
                t.disabled = True
            self._error(e)

    # ---------------------------------------------------------------- widgets

    def _build(self, mode: str, problem: str) -> None:
        n_layers = {k: 1 + max(int(h.split(".")[2]) for h in self.model.heads if h.startswith(k + "."))
                    for k in ("enc.self", "dec.self", "dec.cross")}
        self.toggles: dict[str, W.ToggleButton] = {}
        rows = []
        for kind, layers in n_layers.items():
            blocks = [W.Label(kind, layout=W.Layout(width="80px"))]
            for layer in range(layers):
                buttons = []
                for h in range(self.model.cfg.n_heads):
                    head = f"{kind}.{layer}.{h}"
                    t = W.ToggleButton(value=False, description=f"L{layer}H{h}", tooltip=f"remove {head}",
                                       layout=W.Layout(width="58px"))
                    t.add_class("attnkit-head-toggle")
                    t.add_class("attnkit-head-" + head.replace(".", "-"))
                    t.observe(self._on_change, names="value")
                    self.toggles[head] = t
                    buttons.append(t)
                blocks.append(W.HBox(buttons, layout=W.Layout(margin="0 14px 0 0")))
            rows.append(W.HBox(blocks))
        self.mode = W.ToggleButtons(options=list(MODES), value=mode, description="ablation",
                                    tooltips=["a removed head outputs z = 0",
                                              "a removed head outputs its mean z over the held-out set"])
        self.problem = W.Text(value=problem, description="problem", continuous_update=False,
                              placeholder="e.g. 555+445", layout=W.Layout(width="260px"))
        self.reset = W.Button(description="restore all heads", icon="undo")
        self.output = W.HTML()
        for widget, name in [(self.mode, "ablation-mode"), (self.problem, "ablation-problem"),
                             (self.reset, "ablation-reset"), (self.output, "ablation-result")]:
            widget.add_class(f"attnkit-{name}")
        self.mode.observe(self._on_change, names="value")
        self.problem.observe(self._on_change, names="value")
        self.reset.on_click(lambda _: self.set_removed([]))
        self.widget = W.VBox([W.HTML("<b>click a head to remove it</b> (pressed = removed)"), *rows,
                              W.HBox([self.mode, self.problem, self.reset]), self.output])
        self.widget.add_class("attnkit-ablation-explorer")

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ---------------------------------------------------------------- state and events

    @property
    def removed(self) -> list[str]:
        return [h for h, t in self.toggles.items() if t.value]

    def set_removed(self, heads, mode: Optional[str] = None) -> "AblationExplorer":
        """Remove exactly `heads` (ids as in adder.heads), optionally switch the mode; one update."""
        heads = [heads] if isinstance(heads, str) else list(heads)
        heads_by_module(self.model.heads, heads)  # ValueError listing the valid ids
        self._quiet = True
        try:
            for h, t in self.toggles.items():
                t.value = h in heads
            if mode is not None:
                self.mode.value = mode
        finally:
            self._quiet = False
        self._guarded_update()
        return self

    def _on_change(self, change) -> None:
        if not self._quiet:
            self._guarded_update()

    def _guarded_update(self) -> None:
        try:
            self.update()
        except Exception as e:  # the widget must stay usable whatever happens
            self._error(e)

    def _error(self, e: Exception) -> None:
        self.result = {"error": str(e)}
        self.output.value = f'<span style="color:#cf222e">⚠ {html.escape(str(e))}</span>'

    # ---------------------------------------------------------------- measuring

    def update(self) -> None:
        import time
        if self.intact is None:
            raise RuntimeError("this explorer has no usable model (see the message above)")
        start = time.perf_counter()
        removed, mode = self.removed, self.mode.value
        right = fast_matches(self.model, self.problems, [removed], mode)[0] if removed else self.intact
        text = self.problem.value.strip()
        a, b = parse_problem(text, self.model.cfg.n_digits)  # ValueError: shown in the widget
        with self.adder.ablate(removed, mode):
            answer = self.adder.solve([text])[0]
        seconds = time.perf_counter() - start
        self.result = {"removed": removed, "mode": mode, "exact_match": float(right.mean()),
                       "groups": {g: (float(self.intact[m].mean()), float(right[m].mean()), int(m.sum()))
                                  for g, m in self.groups.items()},
                       "problem": text, "answer": answer, "truth": a + b, "seconds": seconds}
        self.output.value = self._html()

    def _html(self) -> str:
        r = self.result
        names = {"all": "all problems", **CARRY_GROUPS}
        rows = "".join(
            f"<tr><td>{names[g]}</td><td>{n}</td><td>{100 * before:.2f} %</td><td><b>{100 * after:.2f} %</b></td>"
            f"<td>{100 * (after - before):+.2f}</td></tr>" for g, (before, after, n) in r["groups"].items())
        removed = ", ".join(r["removed"]) or "none"
        return (f"<div>removed ({r['mode']} ablation): {html.escape(removed)}</div>"
                f"<div>greedy exact match: <b>{100 * r['exact_match']:.2f} %</b> on a fixed subset of "
                f"{len(self.a)} held-out problems (re-measured in {r['seconds']:.2f} s)</div>"
                f"<table style='font-size:12px'><tr><th>problems</th><th>n</th><th>all heads</th>"
                f"<th>now</th><th>points</th></tr>{rows}</table>"
                f"<div>{_verdict(r['problem'], r['answer'], r['truth'])}</div>")
