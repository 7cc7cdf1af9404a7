"""attnkit: a course kit on transformer attention.

    import attnkit
    adder = attnkit.load_pretrained("adder")
    adder.solve(["663+497", "5+5"])        # -> ["1160", "10"]
    clf = attnkit.load_pretrained("sortedness-alibi")
    clf.predict([[1, 2, 2, 5], [3, 1, 2]])  # -> [True, False]

Layout: core/ (attention, positional encodings, hook points and the activation cache, blocks,
checkpoints, runtime helpers), adder/ and sortedness/ (the two tasks), interp/ (head roles,
ablation sweeps, activation patching), experiments/ (the long runs behind data/), ui/ (figures,
widgets), exercises/ (the notebooks' checkers), course/ (editions and grading).

The notebooks import names unrenamed, from where they are defined, and a module they use often
under its own name; only checkers are renamed, to <topic>_checks:

    from attnkit.ui.plotting import heatmap
    from attnkit.interp import patching                          # patching.patch_heads(...)
    from attnkit.exercises import patching as patching_checks    # notebook 06's checkers
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .adder import Adder
    from .adder.snapshots import Snapshots
    from .core.attention import MultiHeadAttention, scaled_dot_product_attention
    from .core.hooks import ActivationCache, HookPoint
    from .sortedness import SortednessClassifier

# Imported on first use (PEP 562): `import attnkit` and `python -m attnkit student` need no torch.
_LAZY = {
    "MultiHeadAttention": ".core.attention",
    "scaled_dot_product_attention": ".core.attention",
    "ActivationCache": ".core.hooks",
    "HookPoint": ".core.hooks",
}


def _ipython():
    """The running IPython shell (a notebook kernel), or None; IPython itself is never imported here."""
    import sys

    return sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None


def _describe_figures() -> None:
    """In IPython, a matplotlib figure's text/plain is its description (attnkit.ui.alt_text): the
    words a screen reader or the course site can use. Nothing is imported for it now. Registered
    with the mime-bundle formatter: the inline backend, once a notebook draws its first figure, takes
    every Figure printer off the per-type formatters (IPython's select_figure_formats), not this one."""
    shell = _ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return

    def bundle(fig) -> dict:
        from .ui.alt_text import text_alternative

        return {"text/plain": text_alternative(fig) or repr(fig)}

    shell.display_formatter.mimebundle_formatter.for_type_by_name("matplotlib.figure", "Figure", bundle)


def _trim_after_each_cell() -> None:
    """In a notebook kernel, freed memory goes back to the system after every cell
    (core/allocator.py)."""
    shell = _ipython()
    if shell is not None and hasattr(shell, "events"):
        from .core.allocator import return_freed_memory_after_each_cell

        return_freed_memory_after_each_cell(shell)


_describe_figures()
_trim_after_each_cell()


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'attnkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "MultiHeadAttention",
    "scaled_dot_product_attention",
    "ActivationCache",
    "HookPoint",
    "load_pretrained",
    "load_snapshots",
    "PRETRAINED",
]

PRETRAINED = [
    "adder",
    "sortedness-sinusoidal",
    "sortedness-learned",
    "sortedness-none",
    "sortedness-alibi",
    "sortedness-rope",
    "sortedness-relative",
]


def load_pretrained(name: str) -> "Adder | SortednessClassifier":
    """A committed model from data/: "adder" or "sortedness-<encoding>". ValueError for an
    unknown name or a checkpoint marked interrupted (a finished model is never replaced by an
    unfinished one, but an older kit could do it); to load any other file use
    attnkit.adder.Adder.load(path) or attnkit.sortedness.load_classifier(encoding, data_dir)."""
    if not isinstance(name, str):
        raise TypeError(
            f"load_pretrained takes a model name, one of {PRETRAINED}, not "
            f"{type(name).__name__} {name!r}; load a file with attnkit.adder.Adder.load(path)"
        )
    model: Adder | SortednessClassifier
    if name == "adder":
        from . import adder

        model = adder.Adder.load()
    elif name.startswith("sortedness-"):
        from .sortedness import load_classifier

        model = load_classifier(name.removeprefix("sortedness-"))
    else:
        raise ValueError(f"unknown pretrained model {name!r}; choose one of {PRETRAINED}")
    if model.metrics.get("interrupted"):
        raise ValueError(
            f"data/ holds an interrupted, unfinished {name} model (step "
            f"{model.metrics.get('steps', '?')}): restore the committed file "
            f"(git checkout data/) or train it again (python -m attnkit train {name.split('-')[0]})"
        )
    return model


def load_snapshots(name: str = "adder") -> "Snapshots":
    """The snapshots of a committed model's training run (only the adder has them): a sequence
    of Adders, oldest first, each built when first used; .steps says when each was taken."""
    if name != "adder":
        raise ValueError(f"only the adder's training was kept in snapshots, not {name!r}: load_snapshots('adder')")
    from .adder.snapshots import load_snapshots as load

    return load()
