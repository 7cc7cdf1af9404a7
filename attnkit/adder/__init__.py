"""The adder task: "663+497" -> "1160" with a small encoder–decoder transformer.

data.py (tokens, problems, the held-out set), model.py (the transformer), train.py,
evaluate.py (greedy exact match and what hides behind it; mean z), pretrained.py (the
committed model as learners use it: `Adder`), snapshots.py (its training run, kept for notebook 07).
"""

from .pretrained import ABLATION_MODES, CHECKPOINT, Adder, train_pretrained

__all__ = ["ABLATION_MODES", "CHECKPOINT", "Adder", "train_pretrained"]
