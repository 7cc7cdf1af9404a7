"""The notebooks' explorer widgets, in one place to import from:

    from attnkit.ui.widgets import AttentionExplorer, AblationExplorer

AttentionExplorer (notebook 03) lives in attention_explorer.py, AblationExplorer (notebook 04)
in ablation_explorer.py; what they share (serialised updates, messages) in widget_tools.py.
"""
from ..core.runtime import torch_threads
from .ablation_explorer import AblationExplorer
from .attention_explorer import ALL_HEADS, AttentionExplorer
from .widget_tools import DISPLAY_DPI, Serial


def single_thread():
    """torch_threads(1), as the explorers compute (benchmarks/bench_explorer.py imports it from here)."""
    return torch_threads(1)


__all__ = ["ALL_HEADS", "AblationExplorer", "AttentionExplorer", "DISPLAY_DPI", "Serial", "single_thread"]
