"""Notebook 07's figures and its explorer: the adder's training replayed snapshot by snapshot.

    curves_figure(runs)                    # exact match (overall, per carry group), loss: one line per seed
    heads_figure(run, "ablation")          # heads × steps: points lost when the head alone is removed
    heads_figure(run, "role")              # heads × steps: lift of each head's final role (share / chance)
    TrainingExplorer(snapshots, run)       # a step slider linked to all of them, and a head's attention

`run` is one seed's entry of the replay study (experiments/replay_study.py), `runs` all of them.
The explorer's figures are PNGs at their shown size (widget_tools.DISPLAY_DPI); the run's two
figures are drawn once per step and kept, the attention once per (step, head, problem), so a
slider dragged back and forth costs nothing the second time. Updates are serialised
(widget_tools.Serial): the last request wins; a mistake is said in the widget.
"""

from __future__ import annotations

import html
import threading
from collections import OrderedDict
from typing import Any

import ipywidgets as W
import numpy as np
from matplotlib.figure import Figure

from ..adder.data import parse_problem
from ..interp.replay import CARRY_GROUPS, first_lasting, lifts
from . import accessibility
from .alt_text import text_alternative
from .attention_plot import AttentionPlot
from .colour import PALETTE
from .plotting import SMALL, png_bytes, save_figure
from .widget_tools import DISPLAY_DPI, Serial, error_html, figure_words, hide_image, show_image, verdict

ROLE_LIFT = 2.0  # a role "appears" once its share stays at least twice what a uniform head gets
# From colour.PALETTE: the seven categories of curves_figure stay apart under colour blindness too
GROUP_COLOURS = {"all sums": PALETTE[5], **dict(zip(CARRY_GROUPS, (PALETTE[0], PALETTE[1], PALETTE[3])))}
SEED_COLOURS = (PALETTE[5], PALETTE[2], PALETTE[4])
CURSOR = "#cf222e"


def final_roles(run: dict) -> dict[str, tuple[str, list]]:
    """{head: (its role at the last snapshot, that measure's lift at every step)}."""
    lift = lifts(run)
    out = {}
    for h in run["ablation"]:
        last = {m: lift[m][h][-1] for m in lift if lift[m][h][-1] is not None}
        role = max(last, key=lambda m: last[m])
        out[h] = (role, lift[role][h])
    return out


def role_appears(run: dict, threshold: float = ROLE_LIFT) -> dict[str, int | None]:
    """{head: the step from which its final role's lift stays ≥ threshold} (None: it never does)."""
    return {h: first_lasting(run["steps"], values, threshold) for h, (_, values) in final_roles(run).items()}


def _cursor(ax, step) -> None:
    if step is not None:
        ax.axvline(step, color=CURSOR, lw=1.2, zorder=0)


def curves_figure(runs: dict, step: int | None = None, title: str = "the adder learning to add") -> Figure:
    """Three panels over training steps: the first seed's greedy exact match per carry group; every
    seed's exact match; every seed's teacher-forced loss per answer token (log scale)."""
    fig: Any = Figure(figsize=(9.4, 3.5))  # Any: the kit's attribute attnkit_fact (alt_text.py)
    groups, exact, loss = fig.subplots(1, 3)
    order = sorted(runs, key=int)
    first = runs[order[0]]
    steps = first["steps"]
    groups.plot(steps, first["exact_match"], color=GROUP_COLOURS["all sums"], lw=2, label="all sums")
    for g in CARRY_GROUPS:
        groups.plot(steps, first["by_group"][g], color=GROUP_COLOURS[g], ls="--", lw=1.5, label=g)
    for seed, colour in zip(order, SEED_COLOURS):
        run = runs[seed]
        exact.plot(run["steps"], run["exact_match"], color=colour, lw=1.5, label=f"seed {seed}")
        loss.plot(run["steps"], run["loss"], color=colour, lw=1.5, label=f"seed {seed}")
    for ax, name in ((groups, f"seed {order[0]}, by carries"), (exact, "every seed"), (loss, "loss, every seed")):
        _cursor(ax, step)
        ax.set_xlabel("training step")
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=SMALL)
    for ax in (groups, exact):
        ax.set_ylabel("greedy exact match")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=SMALL, loc="upper left", frameon=False)
    loss.set_yscale("log")
    loss.set_ylabel("loss per answer token (nats)")
    loss.legend(fontsize=SMALL, frameon=False)
    fig.suptitle(title + ("" if step is None else f" — step {step}"), fontsize=11)
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.15, top=0.83, wspace=0.42)
    em = first["exact_match"]
    fig.attnkit_fact = f"exact match {em[0]:.0%} at step {steps[0]}, {em[-1]:.2%} at step {steps[-1]}"
    return fig


def heads_figure(run: dict, what: str = "ablation", step: int | None = None) -> Figure:
    """Heads (rows) × snapshot steps (columns): the points of exact match lost when the head alone
    is removed ("ablation"), or the lift of its final role ("role": its share over a uniform
    head's; 1 = chance). The column of `step` is outlined."""
    if what not in ("ablation", "role"):
        raise ValueError(f"what must be 'ablation' or 'role', not {what!r}")
    heads, steps = list(run["ablation"]), run["steps"]
    if what == "ablation":
        values = np.array([run["ablation"][h] for h in heads], dtype=float)
        labels, cmap, bar = heads, "Reds", "points of exact match lost"
        title = "what each head is worth: exact match lost when it alone is removed"
    else:
        roles = final_roles(run)
        values = np.array([[np.nan if v is None else v for v in roles[h][1]] for h in heads], dtype=float)
        # A head whose role never appears (role_appears) has none: say so, with its best measure's lift.
        appears = role_appears(run)
        labels = [
            f"{h} ({role})" if appears[h] is not None else f"{h} (no role; {role} ×{lifts[-1] or 0:.2f})"
            for h, (role, lifts) in ((h, roles[h]) for h in heads)
        ]
        cmap, bar = "Blues", "lift (share ÷ a uniform head's)"
        title = "when each head's final role appears: its lift over chance"
    fig: Any = Figure(figsize=(9.4, 0.21 * len(heads) + 1.5))
    ax = fig.add_axes((0.31, 0.9 / fig.get_figheight(), 0.56, 1 - 1.55 / fig.get_figheight()))
    image = ax.imshow(values, cmap=cmap, aspect="auto", interpolation="nearest", vmin=0 if what == "ablation" else 1)
    ax.set_yticks(range(len(heads)), labels, fontsize=SMALL)
    ax.set_xticks(range(len(steps)), [str(s) for s in steps], fontsize=SMALL, rotation=90)
    ax.set_xlabel("training step (snapshot)")
    ax.set_ylabel("head (kind.layer.head)")
    if step is not None and step in steps:
        i = steps.index(step)
        ax.add_patch(_column_box(i, len(heads)))
    fig.colorbar(image, cax=fig.add_axes((0.9, ax.get_position().y0, 0.015, ax.get_position().height)), label=bar)
    fig.suptitle(title + ("" if step is None else f" — step {step}"), fontsize=11)
    top = heads[int(np.nanargmax(values[:, -1]))]
    fig.attnkit_fact = f"at step {steps[-1]} the largest value is {top}'s ({np.nanmax(values[:, -1]):.1f})"
    return fig


def _column_box(i: int, n_rows: int):
    from matplotlib.patches import Rectangle

    return Rectangle((i - 0.5, -0.5), 1, n_rows, fill=False, edgecolor=CURSOR, lw=2)


class TrainingExplorer:
    """Scrub through training: a step slider moves a cursor over the curves and the heads × steps
    grids, and shows the chosen head's attention on a sum of your own at that step, with the
    snapshot's answer checked against the true sum.

        explorer = TrainingExplorer(snapshots, replay["seeds"]["0"], runs=replay["seeds"])
        explorer.show(step=160, head="dec.cross.1.3", problem="348+276")
    """

    CACHE = 64  # rendered attention figures kept (step, head, problem)

    def __init__(self, snapshots, run: dict, runs: dict | None = None, problem: str = "348+276"):
        if list(snapshots.steps) != list(run["steps"]):
            raise ValueError(
                f"the measures are of steps {run['steps']}, the snapshots of {snapshots.steps}: "
                "they come from different training runs"
            )
        self.snapshots, self.run, self.runs = snapshots, run, runs or {"0": run}
        self.heads = list(run["ablation"])
        self.plot = AttentionPlot(annotate=False)
        self._pngs: dict = {}
        self._attention: OrderedDict = OrderedDict()
        self.result: dict = {}
        self.redraws = 0
        self._active, self.most_at_once = 0, 0
        self._lock = threading.Lock()
        self._serial = Serial(self._redraw)
        self._build(problem)
        self.update()

    def _build(self, problem: str) -> None:
        self.step = W.SelectionSlider(
            options=list(self.snapshots.steps),
            value=self.snapshots.steps[-1],
            description="step",
            continuous_update=True,
            layout=W.Layout(width="520px"),
        )
        self.head = W.Dropdown(options=self.heads, value=self._default_head(), description="head")
        self.view = W.ToggleButtons(
            options=[("curves", "curves"), ("heads: ablation", "ablation"), ("heads: role", "role")],
            value="curves",
            tooltips=["exact match and loss", "points lost without each head", "each head's role over chance"],
        )
        self.problem = W.Text(value=problem, description="problem", continuous_update=False, placeholder="e.g. 348+276")
        self.message, self.answer, self.numbers = W.HTML(), W.HTML(), W.HTML()
        self.run_image = W.Image(format="png")
        self.head_image = W.Image(format="png")
        self.run_words, self.head_words = figure_words(), figure_words()
        for widget, name in [
            (self.step, "replay-step"),
            (self.head, "replay-head"),
            (self.view, "replay-view"),
            (self.problem, "replay-problem"),
            (self.message, "replay-message"),
            (self.answer, "replay-answer"),
            (self.numbers, "replay-numbers"),
        ]:
            widget.add_class(f"attnkit-{name}")
        for widget in (self.step, self.head, self.view, self.problem):
            widget.observe(lambda change: self.update(), names="value")
        self.widget = W.VBox(
            [
                W.HBox([self.step, self.head]),
                W.HBox([self.view, self.problem]),
                self.message,
                self.answer,
                self.numbers,
                self.run_image,
                self.run_words,
                self.head_image,
                self.head_words,
            ]
        )
        self.widget.add_class("attnkit-replay-explorer")
        accessibility.mark(self.widget, live=[self.message, self.answer])

    def _default_head(self) -> str:
        final = {h: v[-1] for h, v in self.run["ablation"].items()}
        return max(final, key=lambda h: final[h])  # the head the finished model needs most

    def _ipython_display_(self) -> None:
        accessibility.show(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ---------------------------------------------------------------- requests

    def show(self, step: int | None = None, head: str | None = None, problem: str | None = None, view=None):
        """Set any of the controls (one update) and wait for the picture. A step without a
        snapshot or an unknown head raises ValueError, says so in the widget and changes nothing."""
        try:
            if step is not None and step not in self.snapshots.steps:
                raise ValueError(f"no snapshot at step {step}: choose one of {list(self.snapshots.steps)}")
            if head is not None and head not in self.heads:
                raise ValueError(f"unknown head {head!r}: the heads are {', '.join(self.heads)}")
            if view is not None and view not in ("curves", "ablation", "role"):
                raise ValueError(f"view must be 'curves', 'ablation' or 'role', not {view!r}")
        except ValueError as e:
            self.message.value = error_html(f"{e} (nothing was changed)")
            raise
        with self.widget.hold_trait_notifications():
            for widget, value in ((self.step, step), (self.head, head), (self.problem, problem), (self.view, view)):
                if value is not None:
                    widget.value = value
        self.update()
        self._serial.wait()
        return self

    def update(self) -> None:
        self._serial.request()

    def wait(self, timeout: float = 60.0) -> bool:
        return self._serial.wait(timeout)

    # ---------------------------------------------------------------- drawing

    def run_png(self, step: int, view: str) -> tuple[bytes, str]:
        key = (step, view)
        if key not in self._pngs:
            fig = curves_figure(self.runs, step) if view == "curves" else heads_figure(self.run, view, step)
            self._pngs[key] = (png_bytes(fig, DISPLAY_DPI), text_alternative(fig))
        return self._pngs[key]

    def attention(self, step: int, head: str, problem: str) -> dict:
        """The snapshot's answer to `problem` and `head`'s attention on it (ValueError for a typo)."""
        key = (step, head, problem)
        if key in self._attention:
            self._attention.move_to_end(key)
            return self._attention[key]
        adder = self.snapshots.at_step(step)
        a, b = parse_problem(problem, adder.cfg.n_digits)
        kind, layer, index = head.rsplit(".", 2)
        answers, cache = adder.run_with_cache([problem], names=[f"{kind}.{layer}.hook_pattern"])
        mark = "✓" if answers[0] == str(a + b) else f"✗ (true sum {a + b})"
        fig: Any = self.plot.figure(
            cache,
            0,
            kind,
            int(layer),
            int(index),
            adder.cfg.reverse_output,
            f"step {step}: {problem} → {answers[0]} {mark}",
        )
        entry = {
            "answer": answers[0],
            "truth": a + b,
            "png": self.plot.png(fig, DISPLAY_DPI),
            "alt": text_alternative(fig),
        }
        entry["pattern"] = cache[f"{kind}.{layer}.hook_pattern"][0, int(index)].cpu().numpy()
        self._attention[key] = entry
        if len(self._attention) > self.CACHE:
            self._attention.popitem(last=False)
        return entry

    def figure(self, which: str = "run") -> Figure:
        """The figure shown now, to save (save_figure): "run" (the chosen view) or "head"."""
        step, view = self.step.value, self.view.value
        if which == "head":
            adder = self.snapshots.at_step(step)
            kind, layer, index = self.head.value.rsplit(".", 2)
            _, cache = adder.run_with_cache([self.problem.value.strip()], names=[f"{kind}.{layer}.hook_pattern"])
            return AttentionPlot(annotate=True).figure(cache, 0, kind, int(layer), int(index), adder.cfg.reverse_output)
        return curves_figure(self.runs, step) if view == "curves" else heads_figure(self.run, view, step)

    def save(self, path, which: str = "run") -> None:
        save_figure(self.figure(which), path)

    def _redraw(self, stale) -> None:
        with self._lock:
            self._active += 1
            self.most_at_once = max(self.most_at_once, self._active)
        try:
            step, head, view, problem = self.step.value, self.head.value, self.view.value, self.problem.value.strip()
            i = self.snapshots.steps.index(step)
            png, alt = self.run_png(step, view)
            numbers = self._numbers(i, head)
            try:
                entry = self.attention(step, head, problem)
                problem_error = None
            except ValueError as e:
                entry, problem_error = None, str(e)
            self.redraws += 1
            if stale():
                return
            self.result = {"step": step, "head": head, "view": view, "problem": problem, **numbers}
            show_image(self.run_image, png, self.run_words, alt)
            self.numbers.value = numbers["html"]
            self.message.value = ""
            if entry is None:
                self.result["problem_error"] = problem_error
                self.answer.value = f"your problem {html.escape(problem) or '(empty)'}: " + error_html(problem_error)
                hide_image(self.head_image, self.head_words)
            else:
                self.result.update(answer=entry["answer"], truth=entry["truth"], pattern=entry["pattern"])
                self.answer.value = f"step {step}: " + verdict(problem, entry["answer"], entry["truth"])
                show_image(self.head_image, entry["png"], self.head_words, entry["alt"])
        except Exception as e:  # the widget stays usable whatever happens
            self.result = {"error": str(e)}
            self.message.value = error_html(e)
        finally:
            with self._lock:
                self._active -= 1

    def _numbers(self, i: int, head: str) -> dict:
        run = self.run
        role, lift = final_roles(run)[head]
        out = {
            "exact_match": run["exact_match"][i],
            "loss": run["loss"][i],
            "ablation": run["ablation"][head][i],
            "role": role,
            "lift": lift[i],
        }
        groups = ", ".join(f"{g} {100 * run['by_group'][g][i]:.1f} %" for g in CARRY_GROUPS)
        lift_text = "—" if lift[i] is None else f"{lift[i]:.1f}× chance"
        out["html"] = (
            f"<div>step {run['steps'][i]}: greedy exact match <b>{100 * out['exact_match']:.2f} %</b> "
            f"({groups}); loss {out['loss']:.4f}</div>"
            f"<div>{html.escape(head)}: removing it alone costs <b>{out['ablation']:.1f}</b> points; "
            f"its final role, {role}, is at {lift_text}</div>"
        )
        return out
