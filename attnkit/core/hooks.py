"""Named hook points and an activation cache: one way into every model's insides (head ablation,
built on them: core/head_ablation.py).

Modelled on TransformerLens. Every activation a learner analyses passes through a `HookPoint`,
an identity with a stable name; a hook is a function `fn(activation, hook)` that may return a
replacement, called as TransformerLens calls it, `fn(activation, hook=point)` (so its second
parameter must be named `hook`; `hook.name` is the point's name). `HookedModel` (a mixin for the
kit's models) lists the names and runs with hooks:

    model.hook_names()                           # ["hook_src_embed", "enc.0.hook_resid_pre", ...]
    logits, cache = model.run_with_cache(src, tgt, names=["dec.cross.1.hook_pattern"])
    cache["dec.cross.1.hook_pattern"]            # (batch, heads, q_pos, k_pos)
    model.run_with_hooks(src, tgt, hooks=[("enc.self.0.hook_z", fn)])

Names: "<side>.<kind>.<layer>.hook_<x>" inside an attention module (side enc/dec, kind self/cross;
x = q, k, v (before any rotation), scores (after bias and mask, before the softmax), pattern,
z (per head, before W_O), result (the module's output)); "<side>.<layer>.hook_<x>" on a layer's
residual stream (resid_pre, resid_mid after self-attention, resid_cross after cross-attention,
mlp_out, resid_post); and model-level names without a prefix (the adder's "hook_src_embed",
"hook_memory", "hook_tgt_embed", "hook_logits"; the classifier's "hook_embed", "hook_token_score").
A head is "<side>.<kind>.<layer>.<head>", e.g. "dec.cross.1.2".

Coming from TransformerLens: its names are accepted where ours differ ("hook_attn_scores" for
"hook_scores"), and so are its keywords (`run_with_hooks(..., fwd_hooks=[...])`,
`run_with_cache(..., names_filter=...)`, a name, a list or a predicate). What differs: the axis
order. Here q, k, v and z are (batch, heads, pos, d_head) — a head is `z[:, h]`; TransformerLens
keeps them (batch, pos, heads, d_head) — `z[:, :, h]` there. Patterns and scores are
(batch, heads, q_pos, k_pos) in both. Our "hook_result" is the attention module's summed output
(TransformerLens's per-head "hook_result" has no counterpart here).

Threads: while hooks are attached to a model (run_with_hooks, head_ablation.ablate_heads), every other
thread's forward pass through that model waits (one re-entrant lock per model), so an ablation
in one thread never changes what another thread's evaluation sees.
"""

from __future__ import annotations

import inspect
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import Tensor, nn


class HookFn(Protocol):
    """A hook: called as fn(activation, hook=point); returns a replacement or None."""

    def __call__(self, activation: Tensor, /, hook: HookPoint) -> Tensor | None: ...


_Attached = tuple[HookFn, "threading.RLock | None"]  # a hook and the lock of whoever attached it
HookName = str | Callable[[str], bool]  # a hook point's name, or a predicate on names (TransformerLens)
TL_NAMES = {"hook_attn_scores": "hook_scores"}  # TransformerLens's name -> ours, where they differ


def canonical_name(name: str) -> str:
    """`name` with a TransformerLens hook name ("dec.cross.1.hook_attn_scores") spelled ours."""
    prefix, _, last = name.rpartition(".")
    last = TL_NAMES.get(last, last)
    return f"{prefix}.{last}" if prefix else last


def check_hook_signature(fn: HookFn, name: str) -> None:
    """TypeError, before anything runs, for a hook that cannot be called as fn(x, hook=point)."""
    if not callable(fn):
        raise TypeError(f"the hook for {name} is a {type(fn).__name__}, not a function fn(activation, hook)")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C function: it will be called and may fail there
        return
    try:
        signature.bind(None, hook=None)
    except TypeError:
        raise TypeError(
            f"the hook for {name} takes {signature}: hooks are called as fn(activation, hook=point) "
            "(TransformerLens's convention), so write it as def fn(activation, hook): ..."
        ) from None


class HookPoint(nn.Module):
    """An identity on one activation, with a stable `name`; its hooks see it and may replace it."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""
        self.fns: list[_Attached] = []

    def add(self, fn: HookFn, lock: threading.RLock | None = None) -> Callable[[], None]:
        """Attach `fn`; returns the function that detaches exactly this attachment. `lock`: the
        model's lock, held by whoever attached it (another thread passing here waits for it)."""
        entry = (fn, lock)  # a fresh tuple: the same fn attached twice is removed one at a time
        self.fns.append(entry)

        def remove() -> None:
            if entry in self.fns:  # `is`-equal tuples: only this attachment
                self.fns.remove(entry)

        return remove

    @contextmanager
    def hooked(self, fn: HookFn) -> Iterator[HookPoint]:
        """`fn` attached inside the block only (for a bare module; models have run_with_hooks)."""
        remove = self.add(fn)
        try:
            yield self
        finally:
            remove()

    def __call__(self, x: Tensor) -> Tensor:
        # With no hook attached a hook point is the identity: nn.Module.__call__'s bookkeeping (about
        # a microsecond, and a model passes dozens of hook points a step) is skipped. PyTorch's own
        # module hooks, if someone registered one here, still run.
        if not self.fns and not self._forward_hooks and not self._forward_pre_hooks:
            return x
        return super().__call__(x)

    def forward(self, x: Tensor) -> Tensor:
        fns = tuple(self.fns)
        if not fns:
            return x
        lock = next((lock for _, lock in fns if lock is not None), None)
        if lock is None:
            return self._run(fns, x)
        # Hooks another thread attached: wait until its block ends (they are gone by then), so
        # a pass through model.encode or a submodule never sees another thread's ablation.
        with lock:
            return self._run(tuple(self.fns), x)

    def _run(self, fns: tuple[_Attached, ...], x: Tensor) -> Tensor:
        for fn, _ in fns:
            out = fn(x, hook=self)
            if out is not None:
                x = checked_replacement(x, out, fn, self.name)
        return x


class HookWarning(UserWarning):
    """A hook made an activation NaN or infinite: what follows is meaningless."""


def checked_replacement(x: Tensor, out, fn, name: str) -> Tensor:
    """A hook's return value, if it can stand in for the activation: a tensor of the same shape,
    dtype and device (broadcasting a wrong shape would silently change every answer); warns when
    it holds NaN or infinity where the activation did not."""
    who = f"hook {getattr(fn, '__name__', repr(fn))!r} on {name or 'a hook point'}"
    if not isinstance(out, Tensor):
        raise TypeError(
            f"{who} returned {type(out).__name__} {out!r:.40}: a hook returns None (keep the "
            f"activation) or a tensor of its shape {tuple(x.shape)}"
        )
    if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(
            f"{who} returned a {tuple(out.shape)} {out.dtype} tensor on {out.device}; the "
            f"activation is {tuple(x.shape)} {x.dtype} on {x.device}, and its replacement must be too"
        )
    if out.is_floating_point():
        new_bad = ~torch.isfinite(out) & torch.isfinite(x)
        if bool(new_bad.any()):
            warnings.warn(
                f"{who} put NaN or infinite values in {int(new_bad.sum())} of {out.numel()} entries: "
                "the model's output after it is meaningless",
                HookWarning,
                stacklevel=4,
            )
    return out


_LOCKS: weakref.WeakKeyDictionary[nn.Module, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def model_lock(model: nn.Module) -> threading.RLock:
    """The model's re-entrant lock (kept outside the module so that copies and pickles work)."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(model, threading.RLock())


if TYPE_CHECKING:  # the mixin is only ever mixed into an nn.Module
    _ModuleBase = nn.Module
else:
    _ModuleBase = object


class HookedModel(_ModuleBase):
    """Mixin for an nn.Module whose submodules hold HookPoints; call `name_hooks()` at the end
    of __init__. A HookPoint is named after its owner's `name` attribute ("enc.0", "dec.self.1")
    and its own attribute name; HookPoints of the model itself get no prefix."""

    def name_hooks(self) -> None:
        for owner in self.modules():
            prefix = getattr(owner, "name", "") if owner is not self else ""
            for attr, child in owner.named_children():
                if isinstance(child, HookPoint):
                    child.name = f"{prefix}.{attr}" if prefix else attr

    def hook_points(self) -> dict[str, HookPoint]:
        points = [m for m in self.modules() if isinstance(m, HookPoint)]
        return {p.name: p for p in points}

    def hook_names(self) -> list[str]:
        """Every hook point's name, in the order the model creates them."""
        return list(self.hook_points())

    def attention_modules(self) -> dict[str, Any]:
        """Every attention module ("enc.self.0", "dec.cross.1", ...) in the order the model holds them."""
        found: list[Any] = [m for m in self.modules() if hasattr(m, "hook_z") and hasattr(m, "n_heads")]
        return {m.name: m for m in found}

    @property
    def heads(self) -> list[str]:
        """Every head's id, "<side>.<kind>.<layer>.<head>", e.g. "dec.cross.1.2" (0-based)."""
        return [f"{name}.{h}" for name, m in self.attention_modules().items() for h in range(m.n_heads)]

    def __call__(self, *args, **kwargs):
        with model_lock(self):  # waits while another thread has hooks attached
            return super().__call__(*args, **kwargs)

    def _named(self, hooks: Iterable[tuple[HookName, HookFn]]) -> list[tuple[str, HookFn]]:
        """(name, fn) pairs; a name may be a predicate on names, as TransformerLens allows
        (`lambda name: name.endswith("hook_pattern")`): it stands for every hook point it accepts."""
        named: list[tuple[str, HookFn]] = []
        for name, fn in hooks:
            if isinstance(name, str):
                named.append((canonical_name(name), fn))
            elif callable(name):
                named += [(n, fn) for n in self.hook_names() if name(n)]
            else:
                raise TypeError(
                    f"a hook's name is a string or a predicate on names (name -> bool), "
                    f"got {type(name).__name__} {name!r:.40}"
                )
        return named

    @contextmanager
    def hooks(
        self, hooks: Iterable[tuple[HookName, HookFn]] = (), fwd_hooks: Iterable[tuple[HookName, HookFn]] = ()
    ) -> Iterator[HookedModel]:
        """Attach (name, fn) pairs inside the block; always detached on exit, also on an exception.
        Blocks nest and may even exit in crossed order: each detaches only its own hooks.
        `fwd_hooks`: the same, TransformerLens's keyword (`with model.hooks(fwd_hooks=[...]):`)."""
        points = self.hook_points()
        hooks = self._named([*hooks, *fwd_hooks])
        unknown = [name for name, _ in hooks if name not in points]
        if unknown:
            raise ValueError(f"unknown hook name(s) {unknown}; model.hook_names() lists the {len(points)} valid ones")
        for name, fn in hooks:
            check_hook_signature(fn, name)
        lock = model_lock(self)
        lock.acquire()
        removers = []
        try:
            for name, fn in hooks:
                removers.append(points[name].add(fn, lock))
            yield self
        finally:
            for remove in reversed(removers):
                remove()
            lock.release()

    @contextmanager
    def without_hooks(self) -> Iterator[HookedModel]:
        """The intact model inside the block: every attached hook set aside, then put back."""
        with model_lock(self):
            points = list(self.hook_points().values())
            saved = [p.fns for p in points]
            for p in points:
                p.fns = []
            try:
                yield self
            finally:
                for p, fns in zip(points, saved):
                    p.fns = fns

    def run_with_hooks(
        self,
        *inputs,
        hooks: Iterable[tuple[HookName, HookFn]] = (),
        fwd_hooks: Iterable[tuple[HookName, HookFn]] = (),
        **kwargs,
    ):
        """The model's output with (name, fn) hooks attached for this pass (`fwd_hooks`: the same,
        TransformerLens's keyword; a name may be a predicate on names)."""
        with self.hooks(hooks, fwd_hooks):
            return self(*inputs, **kwargs)

    def run_with_cache(
        self,
        *inputs,
        names: Sequence[str] | str | None = None,
        detach: bool = True,
        names_filter: Sequence[str] | str | Callable[[str], bool] | None = None,
        **kwargs,
    ):
        """(output, ActivationCache) of one forward pass; `names` limits what is kept (default: all).
        `names_filter` (TransformerLens's keyword): a name, a list of names, or a predicate on names."""
        if names is not None and names_filter is not None:
            raise ValueError("pass names or names_filter, not both")
        if callable(names_filter):
            names = [n for n in self.hook_names() if names_filter(n)]
        elif names_filter is not None:
            names = names_filter
        names = self.hook_names() if names is None else ([names] if isinstance(names, str) else list(names))
        names = [canonical_name(n) for n in names]
        store: dict[str, Tensor] = {}

        def keep(x: Tensor, hook: HookPoint) -> None:
            if hook.name in store:
                raise RuntimeError(f"hook {hook.name} fired twice: run_with_cache caches one forward pass")
            store[hook.name] = x.detach() if detach else x

        with self.hooks([(name, keep) for name in names]):
            out = self(*inputs, **kwargs)
        return out, ActivationCache(store)


class ActivationCache(Mapping):
    """Activations by hook name (a read-only mapping), plus the run's inputs and token labels.

    cache["enc.self.0.hook_pattern"]      # a tensor
    cache.to("cpu")                       # a copy on another device
    cache.head("dec.cross.1.hook_pattern", head=2, sample=0)   # a labelled table (pandas)
    """

    def __init__(self, store: Mapping[str, Tensor], labels: dict[str, list[list[str]]] | None = None):
        self.store = dict(store)
        self.labels = labels or {}  # "enc"/"dec" -> per sample, the token label of each position

    def __getitem__(self, name: str) -> Tensor:
        name = canonical_name(name) if name not in self.store else name
        if name not in self.store:
            prefix, last = name.rsplit(".", 1) if "." in name else ("", name)
            near = [k for k in self.store if k.startswith(prefix + ".") and last in k] or [
                k for k in self.store if k.endswith(last)
            ]
            near = near[:6]
            raise KeyError(f"{name!r} is not in this cache{'; did you mean ' + ', '.join(near) if near else ''}")
        return self.store[name]

    def __iter__(self):
        return iter(self.store)

    def __len__(self) -> int:
        return len(self.store)

    def __repr__(self) -> str:
        return (
            f"ActivationCache({len(self)} activations: {', '.join(list(self)[:4])}{', ...' if len(self) > 4 else ''})"
        )

    def to(self, device) -> ActivationCache:
        return ActivationCache({k: v.to(device) for k, v in self.store.items()}, self.labels)

    def tokens(self, side: str, sample: int, n: int | None = None) -> list[str]:
        """Labels of one sample's positions on `side` ("enc" or "dec"), padded with their index."""
        found = list(self.labels.get(side, [[]] * (sample + 1))[sample]) if side in self.labels else []
        n = len(found) if n is None else n
        return (found + [str(i) for i in range(len(found), n)])[:n]

    def head(self, name: str, head: int, sample: int = 0):
        """One head of one sample as a pandas DataFrame with token labels: (q_pos × k_pos) for
        hook_scores / hook_pattern, (pos × d_head) for hook_q / hook_k / hook_v / hook_z. Heads
        are axis 1 here, (batch, heads, pos, ·): this is cache[name][sample, head] (in
        TransformerLens, whose q/k/v/z are (batch, pos, heads, d_head), it would be [sample, :, head])."""
        name = canonical_name(name)
        import pandas as pd

        t = self[name]
        if t.dim() != 4:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, not (batch, heads, pos, ·): it has no heads")
        block = t[sample, head].float().cpu().numpy()
        side = name.split(".")[0]
        key_side = "enc" if ".cross." in name else side
        rows = self.tokens(key_side if name.endswith(("hook_k", "hook_v")) else side, sample, block.shape[0])
        if name.endswith(("hook_scores", "hook_pattern")):
            cols = self.tokens(key_side, sample, block.shape[1])
        else:
            cols = [f"d{i}" for i in range(block.shape[1])]
        return pd.DataFrame(
            block,
            index=pd.Index(rows, name="query" if len(cols) and cols[0] != "d0" else "position"),
            columns=pd.Index(cols, name="key" if cols and cols[0] != "d0" else "dim"),
        )
