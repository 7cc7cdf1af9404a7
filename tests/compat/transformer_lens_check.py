"""TransformerLens's hook idioms, run by the same code on TransformerLens itself and on the adder.

    make hooks-check    # TransformerLens 3.9 into build/tl-venv (never the learner's install), then this

Each idiom below is one function that knows nothing of the model it is given: a small
HookedTransformer built from a config (nothing downloaded) and the adder's Seq2SeqTransformer each
run it, with their own inputs and hook names. An idiom "behaves alike" when both give the same
verdict; the script prints a row per idiom and exits 1 if any differs (docs/hooks.md states the
result). Adder.run_with_cache has no TransformerLens twin: it is held to the model's own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the kit of this checkout


def called_by_name(model, inputs, names) -> bool:
    """A hook attached by name sees its activation once, with hook.name set."""
    seen = []
    model.run_with_hooks(*inputs, fwd_hooks=[(names["pattern"], lambda act, hook: seen.append(hook.name))])
    return seen == [names["pattern"]]


def called_by_predicate(model, inputs, names) -> bool:
    """A predicate on names attaches to every point it accepts."""
    seen = []
    model.run_with_hooks(*inputs, fwd_hooks=[(names["is_pattern"], lambda act, hook: seen.append(hook.name))])
    return len(seen) == names["n_patterns"] and all(names["is_pattern"](n) for n in seen)


def replacing_changes_the_output(model, inputs, names) -> bool:
    """A hook that returns a tensor replaces the activation: zeroing a z changes the logits."""
    clean = model(*inputs)
    zeroed = model.run_with_hooks(*inputs, fwd_hooks=[(names["z"], lambda z, hook: torch.zeros_like(z))])
    return not torch.equal(clean, zeroed)


def context_manager_attaches_then_removes(model, inputs, names) -> bool:
    """`with model.hooks(fwd_hooks=[...])`: attached inside, gone after."""
    seen = []
    with model.hooks(fwd_hooks=[(names["pattern"], lambda act, hook: seen.append(1))]):
        model(*inputs)
    inside = len(seen)
    model(*inputs)
    return inside == 1 and len(seen) == 1


def removed_after_an_exception(model, inputs, names) -> bool:
    """A hook that raises: the error reaches the caller, and the hook is gone afterwards."""
    calls = []

    def boom(act, hook):
        calls.append(1)
        raise RuntimeError("planted")

    try:
        model.run_with_hooks(*inputs, fwd_hooks=[(names["pattern"], boom)])
    except RuntimeError:
        pass
    else:
        return False
    model(*inputs)
    return calls == [1]


def cache_names_filter(model, inputs, names) -> bool:
    """run_with_cache's names_filter as a name, a list and a predicate keeps exactly those points."""
    _, one = model.run_with_cache(*inputs, names_filter=names["pattern"])
    _, listed = model.run_with_cache(*inputs, names_filter=[names["pattern"], names["z"]])
    _, kept = model.run_with_cache(*inputs, names_filter=names["is_pattern"])
    hooked = {k for k in kept.keys() if k not in ("src", "tgt")}
    return (
        set(one.keys()) - {"src", "tgt"} == {names["pattern"]}
        and set(listed.keys()) - {"src", "tgt"} == {names["pattern"], names["z"]}
        and len(hooked) == names["n_patterns"]
        and torch.equal(one[names["pattern"]], kept[names["pattern"]])
    )


IDIOMS = [
    called_by_name,
    called_by_predicate,
    replacing_changes_the_output,
    context_manager_attaches_then_removes,
    removed_after_an_exception,
    cache_names_filter,
]


def transformer_lens_side():
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    torch.manual_seed(0)
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=64, n_heads=4, d_head=16, d_mlp=256, n_ctx=16, d_vocab=20, act_fn="gelu"
    )
    model = HookedTransformer(cfg).eval()
    tokens = torch.randint(0, 20, (3, 8))
    names = {
        "pattern": "blocks.0.attn.hook_pattern",
        "z": "blocks.1.attn.hook_z",
        "is_pattern": lambda name: name.endswith("hook_pattern"),
        "n_patterns": cfg.n_layers,
    }
    return model, (tokens,), names


def attnkit_side():
    import attnkit

    adder = attnkit.load_pretrained("adder")
    _, cache = adder.run_with_cache(["125+137", "5+5", "999+1"], names_filter="hook_logits")
    names = {
        "pattern": "enc.self.0.hook_pattern",
        "z": "dec.cross.1.hook_z",
        "is_pattern": lambda name: name.endswith("hook_pattern"),
        "n_patterns": len(adder.model.attention_modules()),
    }
    return adder, adder.model.eval(), (cache["src"], cache["tgt"]), names


def main() -> int:
    import transformer_lens

    version = getattr(transformer_lens, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("transformer-lens")
    tl = transformer_lens_side()
    adder, *ours = attnkit_side()
    rows, differ = [], 0
    with torch.no_grad():
        for idiom in IDIOMS:
            verdicts = []
            for model, inputs, names in (tl, ours):
                try:
                    verdicts.append(bool(idiom(model, inputs, names)))
                except Exception as e:  # an idiom one side refuses: said, not a crash
                    verdicts.append(f"error: {type(e).__name__}: {str(e)[:80]}")
            alike = verdicts[0] is True and verdicts[1] is True
            differ += not alike
            rows.append((idiom.__name__, *verdicts, "alike" if alike else "DIFFERENT"))
        # The adder's own run_with_cache (no TransformerLens twin): the same filter, the same activations.
        _, by_adder = adder.run_with_cache(["125+137", "5+5", "999+1"], names_filter=ours[2]["is_pattern"])
        _, by_model = ours[0].run_with_cache(by_adder["src"], by_adder["tgt"], names_filter=ours[2]["is_pattern"])
        same = all(torch.equal(by_adder[n], by_model[n]) for n in by_model.keys() if n.endswith("hook_pattern"))
    print(f"TransformerLens {version} (HookedTransformer) and attnkit, idiom by idiom:")
    for name, theirs, mine, verdict in rows:
        print(f"  {name:40s} TransformerLens: {theirs!s:6s} attnkit: {mine!s:6s} {verdict}")
    print(f"  Adder.run_with_cache(names_filter=predicate) equals the model's: {same}")
    return 0 if differ == 0 and same else 1


if __name__ == "__main__":
    sys.exit(main())
