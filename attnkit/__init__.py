"""attnkit: a course kit on transformer attention.

    import attnkit
    adder = attnkit.load_pretrained("adder")
    adder.solve(["663+497", "5+5"])        # -> ["1160", "10"]
    clf = attnkit.load_pretrained("sortedness-alibi")
    clf.predict([[1, 2, 2, 5], [3, 1, 2]])  # -> [True, False]

Layout: core/ (attention, positional encodings, hook points and the activation cache, blocks,
checkpoints, runtime helpers), adder/ and sortedness/ (the two tasks), interp/ (head roles,
ablation sweeps, activation patching), experiments/ (the long runs behind data/), ui/ (figures,
widgets, exercise checkers).
"""
from .core.attention import MultiHeadAttention, scaled_dot_product_attention
from .core.hooks import ActivationCache, HookPoint

__all__ = ["MultiHeadAttention", "scaled_dot_product_attention", "ActivationCache", "HookPoint",
           "load_pretrained", "PRETRAINED"]

PRETRAINED = ["adder", "sortedness-sinusoidal", "sortedness-learned", "sortedness-none",
              "sortedness-alibi", "sortedness-rope", "sortedness-relative"]


def load_pretrained(name: str):
    """A committed model from data/: "adder" or "sortedness-<encoding>"."""
    if name == "adder":
        from .adder import Adder
        return Adder.load()
    if name.startswith("sortedness-"):
        from .sortedness import load_classifier
        return load_classifier(name.removeprefix("sortedness-"))
    raise ValueError(f"unknown pretrained model {name!r}; choose one of {PRETRAINED}")
