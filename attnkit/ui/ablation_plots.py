"""Tables and figures of the ablation studies (notebook 04), read from their results dict
(`ablation_studies.load_ablation_results()` or `ablation_studies.run_studies()`). Every figure is a matplotlib Figure:
save it with fig.savefig("x.png") or ".svg"."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..interp.ablation import THRESHOLD_POINTS
from ..interp.roles import KINDS
from ..interp.studies import CARRY_GROUPS
from .colour import PALETTE, cell_text_colour
from .figure_policy import SMALLEST_PT as SMALL

WIDTH = 9.2  # inches: 920 px at 100 dpi, within JupyterLab's output area (figure_policy)


def head_table(results: dict):
    """One row per head: in each mode its drop, gradient importance (normalised per layer, and
    raw) and carry gap (drop with carries minus drop without)."""
    import pandas as pd

    cols = {}
    for mode, r in results["modes"].items():
        cols[f"drop {mode}"] = r["single_head"]["drop_points"]
        cols[f"importance {mode}"] = r["importance"]["normalised"]
        cols[f"raw importance {mode}"] = r["importance"]["raw"]
        cols[f"carry gap {mode}"] = r["carries"]["carry_minus_no_carry"]
    return pd.DataFrame(cols).rename_axis("head")


def carry_table(results: dict, mode: str = "zero", heads: Sequence[str] | None = None):
    """Per head, its drop (points) on each carry group, and carry minus no-carry."""
    import pandas as pd

    c = results["modes"][mode]["carries"]
    heads = list(c["drop_points"]) if heads is None else list(heads)
    table = pd.DataFrame(
        {CARRY_GROUPS[g]: [c["drop_points"][h][g] for h in heads] for g in CARRY_GROUPS},
        index=pd.Index(heads, name=f"head ({mode})"),
    )
    table["carry − no carry"] = [c["carry_minus_no_carry"][h] for h in heads]
    return table


def _figure(w: float, h: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), layout="constrained")


def plot_drops(results: dict):
    """Bar chart: each head's drop when removed alone, both modes, in the zero-mode order."""
    modes = list(results["modes"])
    order = results["modes"][modes[0]]["single_head"]["ranking"]
    fig = _figure(WIDTH, 4.6)
    ax = fig.add_subplot()
    width = 0.8 / len(modes)
    tallest = 0.0
    for i, mode in enumerate(modes):
        drops = [results["modes"][mode]["single_head"]["drop_points"][h] for h in order]
        tallest = max(tallest, *drops)
        x = np.arange(len(order)) + (i - (len(modes) - 1) / 2) * width
        ax.bar(x, drops, width, color=PALETTE[i], label=f"{mode} ablation")
    ax.axhline(THRESHOLD_POINTS, color="k", ls="--", lw=1, label=f"{THRESHOLD_POINTS:g}-point line: critical above")
    ax.set_yscale("symlog", linthresh=1)
    # room above the tallest bar, and a tick at every power of ten below the top
    top = max(tallest, 10.0) * 1.6
    ticks = [0] + [10**k for k in range(int(np.log10(top)) + 1)]
    ax.set_ylim(0, top)
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xticks(range(len(order)), order, rotation=90, fontsize=SMALL)  # upright labels would overlap
    ax.set_xlabel("head removed (kind.layer.head)")
    ax.set_ylabel("drop in greedy exact match (points, symlog)")
    ax.set_title(
        f"Single-head ablation: drop from the {100 * results['baseline']:.2f} % baseline "
        f"({results['n_test']} held-out problems)"
    )
    ax.legend(fontsize=SMALL)
    first = results["modes"][modes[0]]["single_head"]["drop_points"]
    fig.attnkit_fact = f"Largest drops ({modes[0]} ablation): " + ", ".join(
        f"{h} {first[h]:.0f} points" for h in order[:3]
    )
    return fig


def plot_drop_heatmaps(results: dict):
    """Layers × heads grids of drops, one per attention kind (columns) and mode (rows)."""
    modes = list(results["modes"])
    drops = {m: results["modes"][m]["single_head"]["drop_points"] for m in modes}
    top = max(max(d.values()) for d in drops.values()) or 1.0
    fig = _figure(WIDTH, 2.3 * len(modes) + 0.9)
    axes = fig.subplots(len(modes), len(KINDS), squeeze=False)
    for r, mode in enumerate(modes):
        for c, kind in enumerate(KINDS):
            ids = [h for h in drops[mode] if h.startswith(kind + ".")]
            n_layers = 1 + max(int(h.split(".")[2]) for h in ids)
            n_heads = 1 + max(int(h.split(".")[3]) for h in ids)
            grid = np.array([[drops[mode][f"{kind}.{L}.{H}"] for H in range(n_heads)] for L in range(n_layers)])
            ax = axes[r, c]
            image = ax.imshow(grid, cmap="Reds", vmin=0, vmax=top, aspect="auto")
            for (L, H), v in np.ndenumerate(grid):
                ax.text(
                    H,
                    L,
                    f"{v:.1f}" if v >= 10 else f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=SMALL,
                    color=cell_text_colour(image, v),
                )
            ax.set_xticks(range(n_heads), [f"h{H}" for H in range(n_heads)], fontsize=SMALL)
            ax.set_yticks(range(n_layers), [f"layer {L}" for L in range(n_layers)], fontsize=SMALL)
            ax.set_title(f"{kind} — {mode}", fontsize=10)
    fig.colorbar(image, ax=axes, label="drop (points)")
    fig.suptitle("Drop in greedy exact match (points) when one head is removed (layers × heads h0–h3)")
    return fig


def plot_pruning_curves(results: dict):
    """Accuracy vs number of heads removed jointly (greedy order), both modes: the whole
    curve, and a close-up of where it crosses the 1-point line."""
    fig = _figure(WIDTH, 8)
    whole, close = fig.subplots(2, 1, height_ratios=(3, 2))  # one above the other: each readable
    zoom = max(len(r["joint_pruning"]["accuracy_full"]) for r in results["modes"].values())
    for ax in (whole, close):
        for i, (mode, r) in enumerate(results["modes"].items()):
            j, colour = r["joint_pruning"], PALETTE[i]
            ax.plot(
                range(len(j["accuracy_full"])),
                100 * np.array(j["accuracy_full"]),
                "o-",
                color=colour,
                ms=4,
                label=f"{mode}: full held-out set ({results['n_test']})",
            )
            ax.plot(
                range(len(j["accuracy_subset"])),
                100 * np.array(j["accuracy_subset"]),
                ".:",
                color=colour,
                label=f"{mode}: search subset ({j['subset']['n']})",
            )
            ax.axvline(
                j["largest_prunable"],
                color=colour,
                lw=1,
                ls="-.",
                label=f"{mode}: {j['largest_prunable']} heads removable at < {THRESHOLD_POINTS:g} point",
            )
        ax.axhline(
            100 * results["baseline"] - THRESHOLD_POINTS,
            color="k",
            ls="--",
            lw=1,
            label=f"baseline − {THRESHOLD_POINTS:g} point",
        )
        ax.set_ylabel("greedy exact match (%)")
    whole.set_xlabel("heads removed together (each time the one whose removal hurts least)")
    close.set_xlabel("heads removed together")
    whole.set_ylim(0, 101)
    whole.set_title("Joint pruning curve")
    whole.legend(fontsize=SMALL, loc="lower left")
    low = min(min(r["joint_pruning"]["accuracy_full"]) for r in results["modes"].values())
    close.set_xlim(-0.3, zoom - 0.7)
    close.set_ylim(100 * low - 1, 100.3)
    close.set_title("close-up: the full-set re-measurements")
    return fig


def plot_importance(results: dict):
    """Gradient importance against the ablation drop: raw and normalised per layer (columns),
    per mode (rows)."""
    modes = list(results["modes"])
    fig = _figure(WIDTH, 4 * len(modes))
    axes = fig.subplots(len(modes), 2, squeeze=False)
    for row, mode in zip(axes, modes):
        r = results["modes"][mode]
        drop = r["single_head"]["drop_points"]
        for ax, scale in zip(row, ("raw", "normalised")):
            score = r["importance"][scale]
            for kind, marker, colour in zip(KINDS, "os^", PALETTE):
                heads = [h for h in drop if h.startswith(kind + ".")]
                ax.scatter([score[h] for h in heads], [drop[h] for h in heads], marker=marker, color=colour, label=kind)
            for i, h in enumerate(r["single_head"]["ranking"][:4]):
                # names in a column at the top left, a line to each point: never on top of each other
                ax.annotate(
                    h,
                    (score[h], drop[h]),
                    xytext=(0.03, 0.93 - 0.08 * i),
                    textcoords="axes fraction",
                    fontsize=SMALL,
                    va="top",
                    arrowprops=dict(arrowstyle="-", lw=0.6, color="grey"),
                )
            ax.set_yscale("symlog", linthresh=1)
            ax.set_xlabel(f"gradient importance |∂L/∂gate| ({'raw' if scale == 'raw' else 'normalised per layer'})")
            ax.set_ylabel("ablation drop (points, symlog)")
            rho = r["importance_vs_ablation"][f"spearman_{scale}"]
            ax.set_title(f"{mode} mode, {scale}: Spearman ρ = {rho:.2f}", fontsize=10)
            ax.legend(fontsize=SMALL, loc="lower right")
    fig.suptitle("Does gradient importance predict what ablation measures?")
    return fig
