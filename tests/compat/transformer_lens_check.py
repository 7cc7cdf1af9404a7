"""TransformerLens's hook idioms, run by the same code on TransformerLens itself and on the adder.

    make hooks-check    # TransformerLens 3.9 (build/tl-venv) and 4.3 (build/tl4-venv), then this in each

Each idiom below is one function that knows nothing of the model it is given. The script reads which
TransformerLens is installed and builds its small models from configs (nothing is downloaded):
3.x, a HookedTransformer; 4.x, which removed HookedTransformer, a TransformerBridge three ways (on its
own model from a config, boot_native; around a Hugging Face GPT-2 made from a config,
boot_transformers; and that one in compatibility mode). Each and the adder's Seq2SeqTransformer run
every idiom, with their own inputs and hook names. An idiom "behaves alike" when both give the same
verdict; the script prints a row per idiom and model and exits 1 if any differs, except where a
difference is one TransformerLens 4 made and the script checks that it is exactly that one
(TL4_DIFFERENCES; docs/hooks.md states the result). Adder.run_with_cache has no TransformerLens twin:
it is held to the model's own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the kit of this checkout


def called_by_name(model, inputs, names) -> bool:
    """A hook attached by name sees its activation once, with hook.name set."""
    seen = []
    model.run_with_hooks(*inputs, fwd_hooks=[(names["pattern"], lambda act, hook: seen.append(hook.name))])
    return seen == [names["pattern"]]


def names_told(model, inputs, name) -> list[str]:
    """The hook.name each call of a hook attached as `name` is told."""
    seen: list[str] = []
    model.run_with_hooks(*inputs, fwd_hooks=[(name, lambda act, hook: seen.append(hook.name))])
    return seen


def hook_name_is_the_name_given(model, inputs, names) -> bool:
    """hook.name is the name the hook was attached by, for z too (a name TransformerLens 4 made an alias)."""
    return names_told(model, inputs, names["z"]) == [names["z"]]


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
    """run_with_cache's names_filter as a name, a list and a predicate keeps exactly those keys."""
    _, one = model.run_with_cache(*inputs, names_filter=names["pattern"])
    _, listed = model.run_with_cache(*inputs, names_filter=[names["pattern"], names["z"]])
    _, kept = model.run_with_cache(*inputs, names_filter=names["is_pattern"])
    aside = names["not_asked"]  # keys a cache carries besides the points asked for
    hooked = {k for k in kept.keys() if k not in aside}
    return (
        set(one.keys()) - aside == {names["pattern"]}
        and set(listed.keys()) - aside == {names["pattern"], names["z"]}
        and len(hooked) == names["n_patterns"]
        and torch.equal(one[names["pattern"]], kept[names["pattern"]])
    )


IDIOMS = [
    called_by_name,
    hook_name_is_the_name_given,
    called_by_predicate,
    replacing_changes_the_output,
    context_manager_attaches_then_removes,
    removed_after_an_exception,
    cache_names_filter,
]


# TransformerLens 4 keeps 3.x's names, many of them (hook_z, hook_q, hook_resid_pre...) as aliases of
# its components' own hooks: blocks.1.attn.hook_z is blocks.1.attn.o.hook_in. A difference is put down
# to that only where the TransformerLens side shows exactly it and the attnkit side passed.
def alias_target(model, inputs, names):
    """The other name TransformerLens 4 caches z under (its component hook's), or None."""
    _, cache = model.run_with_cache(*inputs, names_filter=names["z"])
    extra = set(cache.keys()) - {names["z"]}
    if len(extra) != 1:
        return None
    (target,) = extra
    return target if torch.equal(cache[target], cache[names["z"]]) else None


def cached_under_both_names(model, inputs, names):
    """cache_names_filter holds once z's second key is set aside."""
    target = alias_target(model, inputs, names)
    if target is None or not cache_names_filter(model, inputs, {**names, "not_asked": {target}}):
        return None
    return f"z cached twice, as {names['z']} and {target}"


def hook_named_by_its_target(model, inputs, names):
    """A hook attached as z is told the name of the point z is an alias of."""
    target = alias_target(model, inputs, names)
    return (
        f"hook.name is {target}" if target is not None and names_told(model, inputs, names["z"]) == [target] else None
    )


TL4_DIFFERENCES = {
    "cache_names_filter": cached_under_both_names,
    "hook_name_is_the_name_given": hook_named_by_its_target,
}

N_LAYERS, D_VOCAB = 2, 20
SIZE = dict(n_layers=N_LAYERS, d_model=64, n_heads=4, d_head=16, d_mlp=256, n_ctx=16, d_vocab=D_VOCAB, act_fn="gelu")


def hooked_transformer():
    """TransformerLens 3: a HookedTransformer from a HookedTransformerConfig."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    return HookedTransformer(HookedTransformerConfig(**SIZE))


def bridge_native():
    """TransformerLens 4: TransformerBridge.boot_native, a bridge on TransformerLens's own model from a config."""
    from transformer_lens import TransformerBridge, TransformerBridgeConfig

    return TransformerBridge.boot_native(TransformerBridgeConfig(**SIZE))


def bridge_gpt2():
    """TransformerLens 4: TransformerBridge.boot_transformers around a Hugging Face GPT-2 made from a config.

    hf_model= and tokenizer= keep boot_transformers off the Hub (HF_HUB_OFFLINE is set, so a download
    it tried would fail at once): random weights, and a word-level tokenizer over D_VOCAB made-up words
    with no BOS token (one with a BOS token is reloaded by name); the idioms never tokenize text.
    """
    from tokenizers import Tokenizer, models
    from transformer_lens import TransformerBridge
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(D_VOCAB)}, unk_token="w0"))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="w0", eos_token="w1")
    cfg = GPT2Config(n_layer=N_LAYERS, n_embd=64, n_head=4, n_inner=256, n_positions=16, vocab_size=D_VOCAB)
    return TransformerBridge.boot_transformers(
        "attnkit-check/tiny-gpt2", hf_model=GPT2LMHeadModel(cfg), tokenizer=tokenizer, device="cpu"
    )


def bridge_gpt2_compatible():
    """The GPT-2 bridge after enable_compatibility_mode() (HookedTransformer's weight processing and names)."""
    bridge = bridge_gpt2()
    bridge.enable_compatibility_mode(disable_warnings=True)
    return bridge


LABELS = {
    bridge_native: "boot_native",
    bridge_gpt2: "boot_transformers, GPT-2",
    bridge_gpt2_compatible: "boot_transformers, GPT-2, compatibility mode",
}


def transformer_lens_models(major: int):
    """(label, model, inputs, names) for each model this TransformerLens version is checked on."""
    tokens = torch.randint(0, D_VOCAB, (3, 8), generator=torch.Generator().manual_seed(0))
    names = {
        "pattern": "blocks.0.attn.hook_pattern",
        "z": "blocks.1.attn.hook_z",
        "is_pattern": lambda name: name.endswith("hook_pattern"),
        "n_patterns": N_LAYERS,
        "not_asked": set(),
    }
    sides = []
    for build in [hooked_transformer] if major < 4 else [bridge_native, bridge_gpt2, bridge_gpt2_compatible]:
        torch.manual_seed(0)
        model = build().eval()
        label = type(model).__name__ + (f" ({LABELS[build]})" if build in LABELS else "")
        sides.append((label, model, (tokens,), names))
    return sides


def attnkit_side():
    import attnkit

    adder = attnkit.load_pretrained("adder")
    _, cache = adder.run_with_cache(["125+137", "5+5", "999+1"], names_filter="hook_logits")
    names = {
        "pattern": "enc.self.0.hook_pattern",
        "z": "dec.cross.1.hook_z",
        "is_pattern": lambda name: name.endswith("hook_pattern"),
        "n_patterns": len(adder.model.attention_modules()),
        "not_asked": {"src", "tgt"},  # the adder's cache keeps its inputs
    }
    return adder, adder.model.eval(), (cache["src"], cache["tgt"]), names


def verdict(idiom, model, inputs, names):
    try:
        return bool(idiom(model, inputs, names))
    except Exception as e:  # an idiom one side refuses: said, not a crash
        return f"error: {type(e).__name__}: {str(e)[:80]}"


def main() -> int:
    from importlib.metadata import version as dist_version

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded; a try fails at once
    version = dist_version("transformer-lens")
    major = int(version.split(".")[0])
    theirs = transformer_lens_models(major)
    adder, *ours = attnkit_side()
    differ = 0
    for label, *tl in theirs:
        print(f"TransformerLens {version}, {label}, and attnkit, idiom by idiom:")
        for idiom in IDIOMS:
            with torch.no_grad():
                t, mine = verdict(idiom, *tl), verdict(idiom, *ours)
                explained = TL4_DIFFERENCES.get(idiom.__name__) if major >= 4 and (t, mine) == (False, True) else None
                why = explained and explained(*tl)
            if t is True and mine is True:
                row = "alike"
            elif why:
                row = f"differs as TransformerLens 4 made it: {why}"
            else:
                row, differ = "DIFFERENT", differ + 1
            print(f"  {idiom.__name__:38s} TransformerLens: {t!s:6s} attnkit: {mine!s:6s} {row}")
    # The adder's own run_with_cache (no TransformerLens twin): the same filter, the same activations.
    with torch.no_grad():
        _, by_adder = adder.run_with_cache(["125+137", "5+5", "999+1"], names_filter=ours[2]["is_pattern"])
        _, by_model = ours[0].run_with_cache(by_adder["src"], by_adder["tgt"], names_filter=ours[2]["is_pattern"])
    patterns = [n for n in by_model.keys() if n.endswith("hook_pattern")]
    same = len(patterns) == ours[2]["n_patterns"] and all(torch.equal(by_adder[n], by_model[n]) for n in patterns)
    print(f"Adder.run_with_cache(names_filter=predicate) equals the model's: {same}")
    return 0 if differ == 0 and same else 1


if __name__ == "__main__":
    sys.exit(main())
