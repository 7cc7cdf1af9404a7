"""The notebooks' explorer widgets, in one place to import from:

    from attnkit.ui.widgets import AttentionExplorer, AblationExplorer

AttentionExplorer (notebook 03) lives in attention_explorer.py, AblationExplorer (notebook 04)
in ablation_explorer.py; what they share (serialised updates, messages) in widget_tools.py.
"""

from .ablation_explorer import AblationExplorer
from .attention_explorer import ALL_HEADS, AttentionExplorer
from .widget_tools import DISPLAY_DPI, Serial

__all__ = ["ALL_HEADS", "AblationExplorer", "AttentionExplorer", "DISPLAY_DPI", "Serial"]
