"""A text alternative for every figure, read from what it shows: its title, what kind of chart each
panel is, its axes, its series, and the one fact it is there for (`fig.attnkit_fact`, set by the
kit's plotting functions where there is one).

In IPython a figure's text/plain is this description (`import attnkit` registers it): the notebook
shows the picture, a screen reader and the site (docs/build_site.py, the image's alt) get the words.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

LIMIT = 600  # characters: a description, not a table


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _kind(ax) -> str:
    if ax.get_images():
        return "heatmap"
    if any(isinstance(p, Rectangle) and p.get_height() and p.get_width() < 1.5 for p in ax.patches):
        return "bar chart"
    if ax.collections and not ax.get_lines():
        return "scatter plot"
    return "line chart" if ax.get_lines() else "chart"


def title_of(fig: Figure) -> str:
    return _one_line(fig.get_suptitle() or next((ax.get_title() for ax in fig.axes if ax.get_title()), ""))


def text_alternative(fig: Figure) -> str:
    """The figure in words ("" for a figure with no title: nothing to say what it is)."""
    title = title_of(fig)
    if not title:
        return ""
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>" and ax.has_data()]
    kinds = list(dict.fromkeys(_kind(ax) for ax in panels)) or ["chart"]
    words = [f"{' and '.join(kinds).capitalize()}: {title}" + ("" if title.endswith((".", "?", "!")) else ".")]
    if len(panels) > 1:
        names = [_one_line(ax.get_title()) for ax in panels if ax.get_title()]
        words.append(
            f"{len(panels)} panels" + (f" ({', '.join(names[:8])}{', …' if len(names) > 8 else ''})." if names else ".")
        )
    first = panels[0] if panels else None
    if first is not None and (first.get_xlabel() or first.get_ylabel()):
        y, x = _one_line(first.get_ylabel()), _one_line(first.get_xlabel())
        said = f"{y or 'values'} against {x or 'position'}" if first.get_xlabel() else y
        words.append(said[:1].upper() + said[1:] + ".")
    series = list(dict.fromkeys(label for ax in panels for label in ax.get_legend_handles_labels()[1]))
    if series:
        words.append(f"Series: {', '.join(series[:8])}{', …' if len(series) > 8 else ''}.")
    fact = _one_line(getattr(fig, "attnkit_fact", ""))
    if fact:
        words.append(fact if fact.endswith(".") else fact + ".")
    text = " ".join(words)
    return text if len(text) <= LIMIT else text[: LIMIT - 1] + "…"
