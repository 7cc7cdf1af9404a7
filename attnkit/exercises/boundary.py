"""The boundary between the grader's checking process and the learner's process (attnkit grade).

The learner's cells run in a process of their own (runner.learner_process) that never holds a
checker's verdict, the report channel or the grader's state. The checking process runs the kit's
checkers on a Remote: calling it, or reading one of its attributes, asks the learner's process over
a socket, and what comes back is plain data — None, numbers, strings, lists, tuples, dicts and
tensors or arrays rebuilt from their bytes (a Tensor subclass comes back refused) — or another
Remote for an object that is not data (a function, a module). No code crosses, in either direction:
the kit objects a checker hands to the learner's code (a model, a hook point, a cache) cross as
their weights and settings and are rebuilt there from the kit's own classes; what the learner's code
did to them (their mode, their gradients, the calls a recording model saw) is copied back.

A scalar tensor with a graph through a model the checker handed over comes back with the gradient
of that scalar with respect to the model's weights (computed where the graph is), so that
`loss.backward()` in the checking process fills the checker's own model's gradients.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import json
import os
import re
import socket
import struct
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

MAX_MESSAGE = 256 * 2**20  # one message's bytes: an answer beyond this is refused, not read
_DEPTH = 64  # nesting of lists and dicts that crosses as data; deeper crosses as a Remote


class BoundaryError(BaseException):
    """The other process closed the socket or sent something that is not a message. Not an
    Exception: a checker's `except Exception` (the learner's error, as a hint) lets it through."""


# ---------------------------------------------------------------- messages


def send(sock: socket.socket, message: dict, blobs: list[bytes] = ()) -> None:  # type: ignore[assignment]
    header = json.dumps({**message, "blobs": [len(b) for b in blobs]}).encode()
    try:
        sock.sendall(struct.pack("<Q", len(header)) + header)
        for blob in blobs:
            sock.sendall(blob)
    except OSError as e:
        raise BoundaryError(f"the other process ended ({e})") from None


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray(n)
    view, got = memoryview(data), 0
    while got < n:
        try:
            k = sock.recv_into(view[got:], n - got)
        except OSError:
            k = 0
        if not k:
            raise BoundaryError("the other process ended")
        got += k
    return bytes(data)


def recv(sock: socket.socket) -> tuple[dict, list[bytes]]:
    (size,) = struct.unpack("<Q", _exactly(sock, 8))
    if size > MAX_MESSAGE:
        raise BoundaryError(f"a message of {size} bytes, over the {MAX_MESSAGE} limit")
    try:
        message = json.loads(_exactly(sock, size))
        sizes = message.pop("blobs")
        assert isinstance(message, dict) and all(type(s) is int and s >= 0 for s in sizes)
    except (ValueError, AssertionError, AttributeError, KeyError, TypeError):
        raise BoundaryError("a message that is not one") from None
    if sum(sizes) > MAX_MESSAGE:
        raise BoundaryError(f"an answer of {sum(sizes)} bytes, over the {MAX_MESSAGE} limit")
    return message, [_exactly(sock, s) for s in sizes]


# ---------------------------------------------------------------- data both ways

_DTYPES = {str(d): d for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
                               torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                               torch.bool)}  # fmt: skip


def _tensor(t: Tensor, blobs: list[bytes]) -> dict:
    flat = t.detach().cpu().contiguous().reshape(-1)
    blobs.append(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return {"t": "tensor", "dtype": str(t.dtype), "shape": list(t.shape), "b": len(blobs) - 1,
            "requires_grad": t.requires_grad}  # fmt: skip


def _rebuild_tensor(x: dict, blobs: list[bytes]) -> Tensor:
    dtype, shape = _DTYPES[x["dtype"]], [int(n) for n in x["shape"]]
    blob = blobs[x["b"]]
    n = int(np.prod(shape)) if shape else 1
    if len(blob) != n * torch.empty((), dtype=dtype).element_size():
        raise BoundaryError("a tensor whose bytes do not match its shape")
    t = (
        torch.frombuffer(bytearray(blob), dtype=torch.uint8).view(dtype).reshape(shape)
        if n
        else torch.empty(shape, dtype=dtype)
    )
    if x.get("requires_grad") and (t.is_floating_point() or t.is_complex()):
        t.requires_grad_(True)
    return t


def encode(value: Any, blobs: list[bytes], other, depth: int = 0) -> Any:
    """`value` as JSON-able data, its tensors' bytes appended to `blobs`; `other(value)` encodes what
    is not data (the learner's side: a handle; the checking side: a kit object or a Remote)."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if depth > _DEPTH:
        return other(value)
    if kind in (list, tuple, set, frozenset, torch.Size):
        items = [encode(v, blobs, other, depth + 1) for v in value]
        return items if kind is list else {"t": kind.__name__, "v": items}
    if kind is dict:
        return {"t": "dict", "k": [encode(k, blobs, other, depth + 1) for k in value],
                "v": [encode(v, blobs, other, depth + 1) for v in value.values()]}  # fmt: skip
    if kind is Tensor or kind is nn.Parameter:
        return _tensor(value, blobs)
    if isinstance(value, Tensor):  # a subclass may answer torch's functions as it likes: refused
        return {"t": "refused", "type": kind.__qualname__[:80]}
    if kind is np.ndarray and value.dtype.kind in "biufc":
        blobs.append(np.ascontiguousarray(value).tobytes())
        return {"t": "ndarray", "dtype": value.dtype.str, "shape": list(value.shape), "b": len(blobs) - 1}
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"t": "npscalar", "dtype": value.dtype.str, "v": value.item()}
    if kind is torch.dtype:
        return {"t": "dtype", "v": str(value)}
    return other(value)


def decode(x: Any, blobs: list[bytes], other) -> Any:
    """The inverse of encode; `other(x)` rebuilds what encode's `other` wrote."""
    if x is None or type(x) in (bool, int, float, str):
        return x
    if type(x) is list:
        return [decode(v, blobs, other) for v in x]
    kind = x.get("t") if type(x) is dict else None
    if kind in ("tuple", "set", "frozenset", "Size"):
        items = [decode(v, blobs, other) for v in x["v"]]
        return {"tuple": tuple, "set": set, "frozenset": frozenset, "Size": torch.Size}[kind](items)
    if kind == "dict":
        return dict(zip((decode(k, blobs, other) for k in x["k"]), (decode(v, blobs, other) for v in x["v"])))
    if kind == "tensor":
        return _rebuild_tensor(x, blobs)
    if kind == "ndarray":
        dtype = np.dtype(x["dtype"])
        if dtype.kind not in "biufc":
            raise BoundaryError(f"an array of dtype {dtype}")
        return np.frombuffer(blobs[x["b"]], dtype=dtype).reshape(x["shape"]).copy()
    if kind == "npscalar":
        dtype = np.dtype(x["dtype"])
        if dtype.kind not in "biuf":
            raise BoundaryError(f"a number of dtype {dtype}")
        return dtype.type(x["v"])
    if kind == "dtype":
        return _DTYPES[x["v"]]
    return other(x)


# ---------------------------------------------------------------- kit objects handed to the learner


def _module_state(obj, blobs: list[bytes]) -> dict:
    """What a learner's code may change in a kit object: a model's weights, gradients and modes;
    the record of calls of a model or of a synthetic accuracy."""
    if not isinstance(obj, nn.Module):
        return {"calls": encode(list(obj.calls), blobs, _refuse)}
    params = dict(obj.named_parameters())
    return {
        "state": encode({k: v for k, v in obj.state_dict().items()}, blobs, _refuse),
        "training": [m.training for m in obj.modules()],
        "requires_grad": [p.requires_grad for p in params.values()],
        "grads": encode([p.grad for p in params.values()], blobs, _refuse),
        "calls": encode(list(getattr(obj, "calls", [])), blobs, _refuse),
    }


def _apply_state(obj, s: dict, blobs: list[bytes]) -> None:
    if isinstance(obj, nn.Module):
        obj.load_state_dict(decode(s["state"], blobs, _refuse))
        for m, training in zip(obj.modules(), s["training"]):
            m.training = bool(training)
        for p, flag, grad in zip(obj.parameters(), s["requires_grad"], decode(s["grads"], blobs, _refuse)):
            p.requires_grad_(bool(flag))
            p.grad = None if grad is None else grad.detach().clone()
    if hasattr(obj, "calls"):
        obj.calls[:] = decode(s["calls"], blobs, _refuse)


def _refuse(value):
    raise TypeError(f"a {type(value).__name__} cannot cross to the learner's process")


def kit_object(value, blobs: list[bytes]) -> dict:  # type: ignore[return]  # _refuse raises
    """A kit object handed to the learner's code, as data its process rebuilds (kit_rebuild)."""
    from ..adder.model import Seq2SeqTransformer
    from ..core.hooks import ActivationCache, HookPoint
    from .ablation_rankings import _Accuracy
    from .models import Recording, ToySeq2Seq

    kind = type(value)
    if kind is _Accuracy:  # notebook 04's synthetic accuracy(removed): data, and the calls it saw
        costs = [value.costs[h] for h in value.heads]
        return {"t": "kit", "class": "Accuracy", "init": encode([value.heads, costs, value.backups], blobs, _refuse),
                **_module_state(value, blobs)}  # fmt: skip
    if kind is HookPoint:
        return {"t": "kit", "class": "HookPoint", "name": value.name}
    if kind is ActivationCache:
        return {"t": "kit", "class": "ActivationCache", "store": encode(value.store, blobs, _refuse),
                "labels": encode(value.labels, blobs, _refuse)}  # fmt: skip
    if kind is Seq2SeqTransformer:
        return {"t": "kit", "class": "Seq2SeqTransformer", "config": dataclasses.asdict(value.cfg),
                **_module_state(value, blobs)}  # fmt: skip
    if kind is Recording:
        return {
            "t": "kit",
            "class": "Recording",
            "inner": kit_object(value.inner, blobs),
            **_module_state(value, blobs),
        }
    if kind is ToySeq2Seq:
        return {"t": "kit", "class": "ToySeq2Seq", "init": list(value.init_args), **_module_state(value, blobs)}
    _refuse(value)


def kit_rebuild(x: dict, blobs: list[bytes]):
    """In the learner's process: the kit object kit_object described, built from the kit's classes."""
    from ..adder.model import Seq2SeqConfig, Seq2SeqTransformer
    from ..core.hooks import ActivationCache, HookPoint
    from .ablation_rankings import _Accuracy
    from .models import Recording, ToySeq2Seq

    kind = x["class"]
    if kind == "Accuracy":
        accuracy = _Accuracy(*decode(x["init"], blobs, _refuse))
        _apply_state(accuracy, x, blobs)
        return accuracy
    if kind == "HookPoint":
        point = HookPoint()
        point.name = str(x["name"])
        return point
    if kind == "ActivationCache":
        return ActivationCache(decode(x["store"], blobs, _refuse), decode(x["labels"], blobs, _refuse))
    model: nn.Module
    with torch.random.fork_rng(devices=[]):  # building one draws random weights, then replaced
        if kind == "Seq2SeqTransformer":
            model = Seq2SeqTransformer(Seq2SeqConfig(**x["config"]))
        elif kind == "Recording":
            model = Recording(kit_rebuild(x["inner"], blobs))
        elif kind == "ToySeq2Seq":
            model = ToySeq2Seq(*x["init"])
        else:
            raise BoundaryError(f"no kit object {kind!r}")
    _apply_state(model, x, blobs)
    return model


# ---------------------------------------------------------------- the checking process's side


class _Bridge(torch.autograd.Function):
    """A scalar the learner's process computed from a kit model's weights: its backward gives those
    weights the gradient computed there (or raises the error that computing it raised)."""

    @staticmethod
    def forward(ctx, value, grads, error, *params):
        ctx.grads, ctx.error = grads, error
        return value.clone()

    @staticmethod
    def backward(ctx, out):
        if ctx.error:
            raise RuntimeError(ctx.error)
        return (None, None, None, *[None if g is None else out * g for g in ctx.grads])


_MARKERS = {"torch.nn.modules.module.Module": nn.Module, "torch.nn.modules.linear.Linear": nn.Linear}


class Remote:
    """An object in the learner's process: reading an attribute or calling it asks that process."""

    __slots__ = ("_session", "_id")

    def __init__(self, session: Session, handle: int):
        self._session, self._id = session, handle

    def __getattr__(self, name: str):
        if name.startswith("__"):  # inspect and copy probe these: nothing of the learner's is consulted
            raise AttributeError(name)
        return self._session.ask({"op": "getattr", "id": self._id, "name": name})

    def __repr__(self) -> str:
        return f"<the learner's {type(self).__name__}>"


class RemoteCallable(Remote):
    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return self._session.call(self._id, args, kwargs)

    @property
    def __signature__(self):
        import inspect

        params = self._session.ask({"op": "signature", "id": self._id})
        empty = inspect.Parameter.empty
        return inspect.Signature(
            [inspect.Parameter(name, inspect._ParameterKind(kind), default=None if default else empty)
             for name, kind, default in params]
        )  # fmt: skip


def _exception(name: str, message: str) -> BaseException:
    """The learner's exception as one of the checking process's own: a built-in of that name, else
    a new Exception subclass of that name (KeyboardInterrupt and SystemExit become Exceptions)."""
    name = name if re.fullmatch(r"[A-Za-z_]\w{0,60}", name or "") else "Exception"
    found = getattr(builtins, name, None)
    if not (isinstance(found, type) and issubclass(found, Exception)):
        found = type(name, (Exception,), {})
    return found(message)


class Session:
    """The checking process's end of the socket to one learner process."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.proxies: dict[int, Remote] = {}
        self.classes: dict[tuple, type] = {}
        self.references: tuple = ()  # the current exercise's kit references, watched for in every call
        self.found: str | None = None  # what the learner's process saw of them

    def ask(self, message: dict, blobs: list[bytes] = (), kit: list = ()):  # type: ignore[assignment]
        send(self.sock, {**message, "references": list(self.references)}, blobs)
        reply, got = recv(self.sock)
        if reply.get("found") and not self.found:
            self.found = str(reply["found"])[:300]
        for model, state in zip(kit, reply.get("kit", [])):
            _apply_state(model, state, got)
        if "missing" in reply:
            raise KeyError(str(reply["missing"]))
        if "raise" in reply:
            raise _exception(str(reply["raise"].get("type")), str(reply["raise"].get("message"))[:2000])
        return decode(reply["value"], got, lambda x: self._other(x, got, kit))

    def call(self, handle: int, args: tuple, kwargs: dict):
        blobs: list[bytes] = []
        kit: list = []

        def other(value):
            if isinstance(value, Remote):
                return {"t": "handle", "id": value._id}
            described = kit_object(value, blobs)
            if hasattr(value, "calls") or isinstance(value, nn.Module):  # its changes come back
                kit.append(value)
                described["kit"] = len(kit) - 1
            return described

        message = {"op": "call", "id": handle, "args": encode(list(args), blobs, other),
                   "kwargs": encode(dict(kwargs), blobs, other)}  # fmt: skip
        return self.ask(message, blobs, kit)

    def _other(self, x: dict, blobs: list[bytes], kit: list):
        kind = x.get("t")
        if kind == "refused":  # a stand-in of that type's name: every checker's type test refuses it
            return self._proxy_class(str(x["type"]), False, ())(self, -1)
        if kind == "bridged":  # a scalar with a graph through the kit models of this call
            value = _rebuild_tensor(x["value"], blobs).detach()
            params = [p for m in kit if isinstance(m, nn.Module) for p in m.parameters()]
            grads = decode(x["grads"], blobs, _refuse)
            if not any(p.requires_grad for p in params):
                return value
            return _Bridge.apply(value, grads[: len(params)], str(x.get("error") or ""), *params)
        if kind != "handle":
            raise BoundaryError(f"an answer of kind {kind!r}")
        handle = int(x["id"])
        if handle not in self.proxies:
            cls = self._proxy_class(str(x.get("type", "object")), bool(x.get("callable")), tuple(x.get("bases", ())))
            self.proxies[handle] = cls(self, handle)
        return self.proxies[handle]

    def _proxy_class(self, name: str, is_callable: bool, bases: tuple) -> type:
        """A Remote class named as the learner's object's type (a checker's hint names it), whose
        __class__ is the torch class it is an instance of (so isinstance(x, nn.Module) holds)."""
        key = (name, is_callable, bases)
        if key not in self.classes:
            name = name if re.fullmatch(r"[A-Za-z_]\w{0,80}", name) else "object"
            namespace: dict[str, Any] = {"__slots__": ()}
            marker = next((_MARKERS[b] for b in bases if b in _MARKERS), None)
            if marker is not None:
                namespace["__class__"] = property(lambda self, m=marker: m)  # type: ignore[misc]
            self.classes[key] = type(name, (RemoteCallable if is_callable else Remote,), namespace)
        return self.classes[key]

    def get(self, name: str):
        """The learner's global `name` (data, or a Remote); KeyError where it is not defined."""
        return self.ask({"op": "get", "name": name})

    def kit_reference(self, answer: Remote, references) -> str | None:
        found = self.ask({"op": "kit_reference", "id": answer._id, "refs": list(references)})
        return str(found)[:300] if found else None

    @contextlib.contextmanager
    def watching(self, references):
        self.references, self.found = tuple(references), None
        try:
            yield self
        finally:
            self.references = ()

    def run(self, source: str) -> dict:
        """Run one cell there: {"error": its first line or "", "not_implemented": bool}."""
        send(self.sock, {"op": "run", "source": source})
        reply, _ = recv(self.sock)
        return {"error": str(reply.get("error") or "")[:500], "not_implemented": bool(reply.get("not_implemented"))}


# ---------------------------------------------------------------- the learner's process's side


def serve_learner(sock: socket.socket, shell) -> None:
    """Answer the checking process until it closes the socket: run cells in `shell`, hand over its
    globals, call them on the arguments sent. Whatever this process does only changes its answers."""
    import inspect
    import sys
    import threading

    from .checking import first_line
    from .kit_reference import ReferenceWatch, kit_reference

    objects: dict[int, Any] = {}
    handles: dict[int, int] = {}

    def handle(value) -> dict:
        if id(value) not in handles:
            handles[id(value)] = len(objects)
            objects[len(objects)] = value
        mro = [f"{c.__module__}.{c.__qualname__}" for c in type(value).__mro__] if not isinstance(value, type) else []
        return {"t": "handle", "id": handles[id(value)], "type": type(value).__name__, "callable": callable(value),
                "bases": [b for b in mro if b in _MARKERS]}  # fmt: skip

    def rebuild(x):
        if x.get("t") == "handle":
            return objects[int(x["id"])]
        if x.get("t") == "kit":
            return kit_rebuild(x, blobs)
        raise BoundaryError(f"an argument of kind {x.get('t')!r}")

    me = os.getpid()
    while True:
        if os.getpid() != me:  # a process the learner's cell forked came back here: it must not answer
            os._exit(0)
        try:
            message, blobs = recv(sock)
        except BoundaryError:
            return
        out: list[bytes] = []
        reply: dict[str, Any] = {}
        op = message.get("op")
        try:
            if op == "run":
                outcome = shell.run_cell(message["source"], store_history=False, silent=True)
                error = outcome.error_before_exec or outcome.error_in_exec
                reply = {"error": first_line(error) if error is not None else "",
                         "not_implemented": isinstance(error, NotImplementedError)}  # fmt: skip
            elif op == "get":
                name = message["name"]
                reply = (
                    {"value": encode(shell.user_ns[name], out, handle)} if name in shell.user_ns else {"missing": name}
                )
            elif op == "getattr":
                reply["value"] = encode(getattr(objects[message["id"]], message["name"]), out, handle)
            elif op == "signature":
                params = inspect.signature(objects[message["id"]]).parameters.values()
                reply["value"] = [[p.name, int(p.kind), p.default is not p.empty] for p in params]
            elif op == "kit_reference":
                reply["value"] = kit_reference(objects[message["id"]], message["refs"])
            elif op == "call":
                args = decode(message["args"], blobs, rebuild)
                kwargs = decode(message["kwargs"], blobs, rebuild)
                kit = _kit_models(message, args, kwargs)
                previous = sys.gettrace()  # a tracer of the learner's own does not switch the watch off
                sys.settrace(None)
                try:
                    with ReferenceWatch(message.get("references") or (), checker_runs_here=False) as watch:
                        ours = sys.gettrace()
                        threading.settrace(ours) if ours else None  # threads the call starts are watched too
                        value = objects[message["id"]](*args, **kwargs)
                        if ours is not None and sys.gettrace() is not ours:
                            watch.found = watch.found or "your code switched off the watch for the kit's own code"
                finally:
                    threading.settrace(None)
                    sys.settrace(previous)
                reply["found"] = watch.found
                reply["value"] = _encode_answer(value, out, handle, kit)
                reply["kit"] = [_module_state(m, out) for m in kit]
            else:
                raise BoundaryError(f"no operation {op!r}")
        except BaseException as e:  # the learner's code raised (or exited): the checker decides
            reply = {"raise": {"type": type(e).__name__, "message": str(e)[:2000]}}
            out = []
        if os.getpid() != me:
            os._exit(0)
        send(sock, reply, out)


def _kit_models(message: dict, args: list, kwargs: dict) -> list:
    """The kit models of a call, in the order the checking process numbered them."""
    found = {}

    def walk(x, v):
        if isinstance(x, dict) and x.get("t") == "kit" and "kit" in x:
            found[x["kit"]] = v
        elif isinstance(x, list) and isinstance(v, list):
            for a, b in zip(x, v):
                walk(a, b)

    walk(message["args"], list(args))
    for k, x in zip(message["kwargs"].get("k", []), message["kwargs"].get("v", [])):
        walk(x, kwargs.get(k))
    return [found[i] for i in sorted(found)]


def _encode_answer(value, out: list[bytes], handle, kit: list) -> Any:
    """The call's answer; a scalar tensor with a graph through `kit`'s weights is bridged."""
    params = [p for m in kit if isinstance(m, nn.Module) for p in m.parameters()]
    if type(value) is Tensor and value.grad_fn is not None and value.numel() == 1 and params:
        error, grads = "", [None for _ in params]
        try:
            grads = list(torch.autograd.grad(value, params, allow_unused=True, retain_graph=True))  # type: ignore[arg-type]
        except RuntimeError as e:
            error = str(e).splitlines()[0][:300]
        return {"t": "bridged", "value": _tensor(value, out), "grads": encode(grads, out, _refuse), "error": error}
    return encode(value, out, handle)
