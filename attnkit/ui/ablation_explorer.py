"""AblationExplorer: remove heads by hand and watch what breaks (notebook 04).

Updates are serialised (widget_tools.Serial): clicks arriving on several kernel threads never
evaluate at once, and the last one wins. A setter that fails changes nothing and says why in
the widget; a malformed problem only affects its own line, the accuracy is still re-measured.
"""

from __future__ import annotations

import html
import threading
import time

import ipywidgets as W
import numpy as np

from ..adder.data import carry_stats, load_test_set, parse_problem
from ..adder.evaluate import PASS
from ..core.head_ablation import heads_by_module
from ..interp.ablation import MODES, Problems, check_baseline, model_of
from ..interp.studies import CARRY_GROUPS, pruning_subset
from ..interp.sweep import fast_matches
from . import accessibility
from .widget_tools import Serial, error_html, verdict


class AblationExplorer:
    """Remove heads by hand and watch what breaks: one toggle per head, laid out as
    kind (rows) × layer × head (columns), a zero/mean switch, and a problem of your own.
    Every change re-measures greedy exact match, split by carries, on a fixed subset of the
    held-out set (`n_problems`, the joint-pruning search subset by default) and re-solves the problem.

        explorer = AblationExplorer(adder)
        explorer.set_removed(["dec.cross.1.2"], mode="mean")   # or click the toggles
        explorer.result["exact_match"]
    """

    def __init__(
        self, adder, n_problems: int = 2000, problem: str = "555+445", mode: str = "zero", force: bool = False
    ):
        self.adder, self.model = adder, model_of(adder)
        a, b = load_test_set()
        idx = pruning_subset(n_problems, total=len(a))
        self.a, self.b = a[idx], b[idx]
        self.problems = Problems.from_operands(self.model, self.a, self.b)
        n_carries, chain = carry_stats(self.a, self.b, self.model.cfg.n_digits)
        self.groups = {
            "all": np.ones(len(idx), bool),
            "no_carry": n_carries == 0,
            "carry": n_carries >= 1,
            "chain_2plus": chain >= 2,
        }
        self.result: dict = {}
        self.evaluations = 0  # measurements run (a test counts them)
        self._quiet = False
        self._active = 0  # measurements running now ...
        self.most_at_once = 0  # ... and the most ever running at once: must stay 1
        self._active_lock = threading.Lock()
        self._serial = Serial(self._measure)
        self._build(mode, problem)
        try:
            check_baseline(adder, force)
            self.intact = fast_matches(self.model, self.problems, [[]], rows=PASS)[0]
            self.update()
        except Exception as e:  # a broken model (or anything else): said inside the widget
            self.intact = None
            for t in self.toggles.values():
                t.disabled = True
            self._error(e)

    # ---------------------------------------------------------------- widgets

    def _build(self, mode: str, problem: str) -> None:
        n_layers = {
            k: 1 + max(int(h.split(".")[2]) for h in self.model.heads if h.startswith(k + "."))
            for k in ("enc.self", "dec.self", "dec.cross")
        }
        self.toggles: dict[str, W.ToggleButton] = {}
        rows = []
        for kind, layers in n_layers.items():
            blocks = [W.Label(kind, layout=W.Layout(width="80px"))]
            for layer in range(layers):
                buttons = []
                for h in range(self.model.cfg.n_heads):
                    head = f"{kind}.{layer}.{h}"
                    t = W.ToggleButton(
                        value=False,
                        description=f"L{layer}H{h}",
                        tooltip=f"remove {head}",
                        layout=W.Layout(width="76px"),
                    )
                    t.add_class("attnkit-head-toggle")
                    t.add_class("attnkit-head-" + head.replace(".", "-"))
                    # restyled first, then measured: the measurement that follows a click always
                    # restyles after that click's own restyle (see _measure)
                    t.observe(self._restyle, names="value")
                    t.observe(self._on_change, names="value")
                    self.toggles[head] = t
                    buttons.append(t)
                blocks.append(W.HBox(buttons, layout=W.Layout(margin="0 14px 0 0")))
            rows.append(W.HBox(blocks))
        # The label is a widget of its own, beside the buttons in a row that does not wrap: as the
        # buttons' own description it was drawn above them (JupyterLab, 1400 px window).
        self.mode = W.ToggleButtons(
            options=list(MODES),
            value=mode,
            style={"button_width": "70px"},
            layout=W.Layout(width="auto"),
            tooltips=["a removed head outputs z = 0", "a removed head outputs its mean z over the held-out set"],
        )
        self.problem = W.Text(
            value=problem,
            description="problem",
            continuous_update=False,
            placeholder="e.g. 555+445",
            layout=W.Layout(width="260px"),
        )
        self.reset = W.Button(description="restore all heads", icon="undo")
        self.message = W.HTML()  # a refused request (bad head id or mode): nothing was changed
        self.output = W.HTML()
        for widget, name in [
            (self.mode, "ablation-mode"),
            (self.problem, "ablation-problem"),
            (self.reset, "ablation-reset"),
            (self.output, "ablation-result"),
            (self.message, "ablation-message"),
        ]:
            widget.add_class(f"attnkit-{name}")
        mode_row = W.HBox(
            [W.Label("ablation", layout=W.Layout(width="auto", margin="0 4px 0 0")), self.mode],
            layout=W.Layout(align_items="center", flex_flow="row nowrap"),
        )
        mode_row.add_class("attnkit-ablation-mode-row")
        self.mode.observe(self._on_change, names="value")
        self.problem.observe(self._on_change, names="value")
        self.reset.on_click(lambda _: self.set_removed([]))
        self.widget = W.VBox(
            [
                W.HTML("<b>click a head to remove it</b> (red ✕ = removed)"),
                *rows,
                W.HBox([mode_row, self.problem, self.reset]),
                self.message,
                self.output,
            ]
        )
        self.widget.add_class("attnkit-ablation-explorer")
        accessibility.mark(self.widget, live=[self.message, self.output])

    @staticmethod
    def _restyle(change) -> None:
        """Drawn at once on a click; _measure draws every toggle again from the state it measures."""
        AblationExplorer._draw(change["owner"], change["owner"].value)

    @staticmethod
    def _draw(t, removed: bool) -> None:
        """A removed head is red and crossed out, not merely a darker grey."""
        name = t.description.lstrip("✕ ")
        t.button_style = "danger" if removed else ""
        t.description = f"✕ {name}" if removed else name

    def _ipython_display_(self) -> None:  # the keyboard and screen-reader script, then the widget
        accessibility.show(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ---------------------------------------------------------------- state and events

    @property
    def removed(self) -> list[str]:
        return [h for h, t in self.toggles.items() if t.value]

    def set_removed(self, heads, mode: str | None = None) -> AblationExplorer:
        """Remove exactly `heads` (ids as in adder.heads), optionally switch the mode; one update.
        A bad head id or mode raises ValueError, says so in the widget and changes nothing."""
        try:
            heads = [heads] if isinstance(heads, str) else list(heads)
            heads_by_module(self.model.heads, heads)  # ValueError listing the valid ids
            if mode is not None and mode not in MODES:
                raise ValueError(f"unknown ablation mode {mode!r}; choose one of {list(MODES)}")
        except ValueError as e:
            self.message.value = error_html(f"{e} (nothing was changed)")
            raise
        self._quiet = True
        try:
            for h, t in self.toggles.items():
                t.value = h in heads
            if mode is not None:
                self.mode.value = mode
        finally:
            self._quiet = False
        self.update()
        self._serial.wait()  # a program reads the result of its own change
        return self

    def _on_change(self, change) -> None:
        if not self._quiet:
            self.update()

    def update(self) -> None:
        """Re-measure for the controls' current state (from any thread: never two at once)."""
        self._serial.request()

    def _error(self, e: Exception) -> None:
        self.result = {"error": str(e)}
        self.output.value = error_html(e)

    # ---------------------------------------------------------------- measuring

    def _measure(self, stale) -> None:
        with self._active_lock:
            self._active += 1
            self.most_at_once = max(self.most_at_once, self._active)
        try:
            # One snapshot of the toggles, drawn and measured. Clicks on other kernel threads can
            # run their observers in any order (one of them may be this measurement's own), so a
            # toggle drawn from its click alone could end red while off; every click is followed
            # by a measurement that starts after it, and the last one draws the final state.
            state = {h: t.value for h, t in self.toggles.items()}
            for h, t in self.toggles.items():
                self._draw(t, state[h])
            removed = [h for h, on in state.items() if on]
            result = self.measure(removed, self.mode.value, self.problem.value)
            self.evaluations += 1
            if not stale():  # a newer request runs next: show only its result
                self.result = result
                self.message.value = ""
                self.output.value = self._html()
        except Exception as e:  # the widget must stay usable whatever happens
            self._error(e)
        finally:
            with self._active_lock:
                self._active -= 1

    def measure(self, removed: list[str], mode: str, problem: str) -> dict:
        """Exact match with `removed` heads ablated, by carry group, and the model's answer to
        `problem` (a malformed problem gives "problem_error" instead; the rest is still measured)."""
        if self.intact is None:
            raise RuntimeError("this explorer has no usable model (see the message above)")
        start = time.perf_counter()
        # One ablation in passes of PASS problems (as in __init__): as fast as one pass of all 2,000,
        # and a learner's kernel peaks 35 MB lower (notebook 04's highest point).
        right = fast_matches(self.model, self.problems, [removed], mode, rows=PASS)[0] if removed else self.intact
        result = {
            "removed": list(removed),
            "mode": mode,
            "exact_match": float(right.mean()),
            "groups": {
                g: (float(self.intact[m].mean()), float(right[m].mean()), int(m.sum())) for g, m in self.groups.items()
            },
            "problem": problem.strip(),
            "answer": None,
            "truth": None,
            "problem_error": None,
        }
        try:
            a, b = parse_problem(problem.strip(), self.model.cfg.n_digits)
        except ValueError as e:
            result["problem_error"] = str(e)
        else:
            with self.adder.ablate(removed, mode):
                result["answer"] = self.adder.solve([result["problem"]])[0]
            result["truth"] = a + b
        result["seconds"] = time.perf_counter() - start
        return result

    def _html(self) -> str:
        r = self.result
        names = {"all": "all problems", **CARRY_GROUPS}
        td = "<td style='text-align:right;padding:0 8px'>"
        rows = "".join(
            f"<tr><td>{names[g]}</td>{td}{n}</td>{td}{100 * before:.2f} %</td>{td}<b>{100 * after:.2f} %</b></td>"
            f"{td}{100 * (after - before):+.2f}</td></tr>"
            for g, (before, after, n) in r["groups"].items()
        )
        removed = ", ".join(r["removed"]) or "none"
        if r["problem_error"] is not None:
            problem = f"your problem {html.escape(r['problem']) or '(empty)'}: " + error_html(r["problem_error"])
        else:
            problem = verdict(r["problem"], r["answer"], r["truth"])
        return (
            f"<div>removed ({r['mode']} ablation): {html.escape(removed)}</div>"
            f"<div>greedy exact match: <b>{100 * r['exact_match']:.2f} %</b> on a fixed subset of "
            f"{len(self.a)} held-out problems (re-measured in {r['seconds']:.2f} s)</div>"
            f"<table style='font-size:13px'><tr><th style='text-align:left'>problems</th>"
            + "".join(
                f"<th style='text-align:right;padding:0 8px'>{c}</th>" for c in ("n", "all heads", "now", "points")
            )
            + f"</tr>{rows}</table>"
            f"<div>{problem}</div>"
        )
