"""A digest of everything that decides how a jaxpr lowers, or None when that
cannot be told for sure.

Two jaxprs with equal digests lower to the same module: the digest covers
each equation's primitive, params, operands (variables by first use, literals
by their bytes), avals and context (compute type, mesh, XLA metadata), the
constants of closed sub-jaxprs and the effects. It is lossless by
construction: a value is encoded by a rule of its exact type, and a value no
rule knows (a callable, an object whose repr may hide its content) makes the
whole jaxpr *unkeyable* rather than risk two programs sharing a digest. The
one exception: params that no lowering reads (:data:`NOT_LOWERED`), such as
the JVP rule a ``custom_jvp_call`` carries beside its body.

jaxpr pretty-printing is not used: it elides large arrays, prints functions
by address and costs several times more.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from pxla_mlir.jaxbridge.jax_internals import core, trace_context

__all__ = ["Unkeyable", "digest", "encode_as", "NOT_LOWERED"]

#: Params that lowering never reads, by primitive: the rules for transformations a lowered body no longer needs.
NOT_LOWERED: dict[str, frozenset[str]] = {
    "custom_jvp_call": frozenset({"jvp_jaxpr_fun", "jvp_jaxpr_thunk"}),
    "custom_vjp_call": frozenset({"fwd_jaxpr_thunk", "bwd", "out_trees"}),
    "custom_vjp_call_jaxpr": frozenset({"fwd_jaxpr_thunk", "bwd", "out_trees"}),
}


class Unkeyable(Exception):
    """A value whose encoding could hide what it holds."""


class _Encoder:
    """Feeds a sha256 with a tagged, unambiguous encoding of values."""

    def __init__(self):
        self.parts: list[str] = []
        self.blobs: list[bytes] = []
        self._vars: dict[int, int] = {}
        self._memo: dict[int, str] = {}
        self._alive: list = []

    # -- values ----------------------------------------------------------------
    def value(self, v: Any) -> None:
        rule = _RULES.get(type(v))
        if rule is None:
            rule = _rule_for(type(v))
        rule(self, v)

    def seq(self, tag: str, items) -> None:
        self.parts.append(f"{tag}[")
        for item in items:
            self.value(item)
        self.parts.append("]")

    def array(self, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a)
        self.parts.append(f"A{a.dtype.str}{a.shape}#{len(self.blobs)}")
        self.blobs.append(a.tobytes())

    def slots(self, obj: Any) -> None:
        """An immutable object whose state is all in slots: encoded once per digest (jaxprs share avals,
        contexts and meshes between equations)."""
        known = self._memo.get(id(obj))
        if known is None:
            outer, self.parts = self.parts, [f"O{type(obj).__qualname__}("]
            for name in _slot_names(type(obj)):
                self.parts.append(f"{name}=")
                self.value(getattr(obj, name, None))
            self.parts.append(")")
            known = "".join(self.parts)
            self.parts = outer
            self._memo[id(obj)] = known
            self._alive.append(obj)  # its id stays its own while the digest runs
        self.parts.append(known)

    # -- jaxprs ----------------------------------------------------------------
    def jaxpr(self, jaxpr: Any) -> None:
        outer = self._vars
        self._vars = {}
        self.parts.append("J(")
        for group in (jaxpr.constvars, jaxpr.invars):
            self.parts.append("|")
            for var in group:
                self.var(var)
        for eqn in jaxpr.eqns:
            self.eqn(eqn)
        self.parts.append("->")
        for atom in jaxpr.outvars:
            self.atom(atom)
        self.parts.append(f"!{sorted(map(repr, jaxpr.effects))}")
        consts = getattr(jaxpr, "consts", ())  # jax 0.11+: a jaxpr holds its constants (ClosedJaxpr is Jaxpr)
        if consts:
            self.seq("K", consts)
        self.parts.append(")")
        self._vars = outer

    # eqn, atom and var run for every equation of a large program: written for speed (a local alias of
    # self.parts stays valid, as slots() puts back the list it swaps out).
    def eqn(self, eqn: Any) -> None:
        name = eqn.primitive.name
        parts = self.parts
        parts.append(f"E{name}(")
        for atom in eqn.invars:
            self.atom(atom)
        params = eqn.params
        if params:
            skip = NOT_LOWERED.get(name, ())
            for key in sorted(params):
                if key not in skip:
                    parts.append(f"{key}=")
                    self.value(params[key])
        parts.append("->")
        for var in eqn.outvars:
            self.var(var)
        effects = eqn.effects
        parts.append(f"!{sorted(map(repr, effects))}" if effects else "![]")
        self.slots(eqn.ctx)
        parts.append(")")

    def atom(self, atom: Any) -> None:
        if isinstance(atom, core.Literal):
            self.parts.append("L")
            self.value(atom.val)
            self.value(atom.aval)
        else:
            self.var(atom)

    def var(self, var: Any) -> None:
        if isinstance(var, core.DropVar):
            self.parts.append("_")
        else:
            n = self._vars.setdefault(id(var), len(self._vars))
            self.parts.append(f"v{n}")
        aval = var.aval
        known = self._memo.get(id(aval))  # only slots() fills the memo: an aval seen before
        if known is None:
            self.value(aval)
        else:
            self.parts.append(known)


@functools.cache
def _slot_names(cls: type) -> tuple[str, ...]:
    return tuple(name for c in cls.__mro__ for name in getattr(c, "__slots__", ()) if name not in _NOT_STATE)


#: Slots that hold no state of their own: jax 0.12's ShapedArray keeps its weak-type-stripped twin in one.
_NOT_STATE = ("__weakref__", "__dict__", "_stripped_weak_type")


def _plain(enc: _Encoder, v: Any) -> None:
    enc.parts.append(f"{type(v).__name__[0]}{v!r}")


def _tuple(enc: _Encoder, v: Any) -> None:
    enc.seq("T", v)


def _dict(enc: _Encoder, v: dict) -> None:
    enc.parts.append("D{")
    for key in sorted(v, key=repr):
        enc.value(key)
        enc.value(v[key])
    enc.parts.append("}")


def _set(enc: _Encoder, v: Any) -> None:
    inner = _Encoder()
    members = []
    for item in v:
        inner.parts, inner.blobs = [], []
        inner.value(item)
        members.append("".join(inner.parts) + "".join(b.hex() for b in inner.blobs))
    enc.parts.append(f"S{sorted(members)}")


def _closed_jaxpr(enc: _Encoder, v: Any) -> None:
    enc.parts.append("CJ")
    enc.jaxpr(v.jaxpr)
    enc.seq("C", v.consts)


def _named_tuple_or_dataclass(enc: _Encoder, v: Any) -> None:
    fields = [(f.name, getattr(v, f.name)) for f in dataclasses.fields(v)] if dataclasses.is_dataclass(v) else \
        list(v._asdict().items())
    enc.parts.append(f"N{type(v).__module__}.{type(v).__qualname__}(")
    for name, value in fields:
        enc.parts.append(f"{name}=")
        enc.value(value)
    enc.parts.append(")")


def _device(enc: _Encoder, d: Any) -> None:
    enc.parts.append(f"Dev({d.platform},{d.id},{d.process_index},{d.device_kind})")


def _mesh(enc: _Encoder, m: Any) -> None:
    enc.parts.append(f"Mesh({m.axis_names!r},{m.axis_types!r}")
    enc.seq("", list(m.devices.flat))
    enc.parts.append(f"{m.devices.shape})")


def _by_repr(enc: _Encoder, v: Any) -> None:  # only for types whose repr is all they hold
    enc.parts.append(f"R{type(v).__qualname__}:{v!r}")


_RULES: dict[type, Callable[[_Encoder, Any], None]] = {
    type(None): _plain, bool: _plain, int: _plain, float: _plain, complex: _plain, str: _plain, bytes: _plain,
    tuple: _tuple, list: _tuple, dict: _dict, frozenset: _set, set: _set,
    core.ClosedJaxpr: _closed_jaxpr, core.Jaxpr: lambda enc, v: enc.jaxpr(v),
    core.Primitive: lambda enc, v: enc.parts.append(f"P{v.name}"),
    np.dtype: lambda enc, v: enc.parts.append(f"dt{v.str}{v.name}"),
    jax.sharding.PartitionSpec: _by_repr, jax.sharding.Mesh: _mesh,
    jax.sharding.NamedSharding: lambda enc, v: enc.seq("NS", (v.mesh, v.spec, v.memory_kind)),
    jax.sharding.AbstractMesh: _by_repr,
}

#: jax's types (by name) encoded by their slots: avals and contexts, all of whose state is in slots.
_SLOTTED = ("ShapedArray", "JaxprEqnContext", "ManualAxisType", "AxisEnv", "AbstractToken")
#: Types whose repr is all they hold.
_REPR = ("UnspecifiedValue", "AUTO", "Token", "AutoLayoutSingleton", "Layout")  # Layout: jax 0.12's avals


def _array(enc: _Encoder, v: Any) -> None:
    enc.array(np.asarray(v))
    weak = getattr(v, "_weak_type", None)  # jax's TypedNdArray: a literal's weak type
    if weak is not None:
        enc.parts.append(f"w{weak!r}")


def _typed_scalar(enc: _Encoder, v: Any) -> None:
    """jax's TypedInt/TypedFloat/TypedComplex: a Python scalar with a dtype and a weak type."""
    builtin: Any = next(t for t in (bool, int, float, complex) if isinstance(v, t))
    aval = getattr(v, "aval", None)
    enc.parts.append(f"{type(v).__qualname__}({builtin.__repr__(v)},{getattr(v, 'dtype', None)},"
                     f"{getattr(aval, 'weak_type', None)})")


def _frozen_dataclass(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) and getattr(cls, "__dataclass_params__").frozen  # noqa: B009


def _extended_dtype(cls: type) -> bool:  # jax's key<impl> dtypes: their repr names the implementation
    return any(f"{b.__module__}.{b.__qualname__}" == "jax._src.dtypes.ExtendedDType" for b in cls.__mro__)


def _rule_for(cls: type) -> Callable[[_Encoder, Any], None]:
    qualname = f"{cls.__module__}.{cls.__qualname__}"
    if issubclass(cls, np.ndarray) or issubclass(cls, np.generic):
        rule = _array
    elif issubclass(cls, (int, float, complex)) and cls.__module__.startswith("jax."):
        rule = _typed_scalar
    elif issubclass(cls, np.dtype):
        rule = _RULES[np.dtype]
    elif issubclass(cls, jax.Array):
        rule = lambda enc, v: enc.array(np.asarray(v))  # noqa: E731
    elif issubclass(cls, enum.Enum):
        rule = lambda enc, v: enc.parts.append(f"En{type(v).__qualname__}.{v.name}")  # noqa: E731
    elif issubclass(cls, jax.Device):
        rule = _device
    elif (issubclass(cls, tuple) and hasattr(cls, "_asdict")) or _frozen_dataclass(cls):
        rule = _named_tuple_or_dataclass
    elif qualname == "jax._src.frozen_dict.FrozenDict":
        rule = lambda enc, v: _dict(enc, dict(v))  # noqa: E731
    elif cls.__qualname__ in _SLOTTED and cls.__module__.startswith("jax."):
        rule = _Encoder.slots
    elif (cls.__qualname__ in _REPR and cls.__module__.startswith("jax.")) or _extended_dtype(cls):
        rule = _by_repr
    else:
        raise Unkeyable(f"{qualname}")
    _RULES[cls] = rule
    return rule


def encode_as(cls: type, content: Callable[[Any], Any]) -> None:
    """Encodes values of ``cls`` (exactly) as ``content(value)``: for a type of ours whose content the rules
    cannot see (a dict subclass with an attribute for messages, a mesh keeping its devices in slots)."""
    _RULES[cls] = lambda enc, v: enc.seq(f"X{cls.__module__}.{cls.__qualname__}", (content(v),))


def digest(*values: Any) -> bytes | None:
    """sha256 of ``values`` (jaxprs, params, avals, devices...) and of jax's
    trace context (x64, matmul precision...), or None if any of them holds a
    value that cannot be encoded losslessly."""
    enc = _Encoder()
    try:
        for v in (*values, trace_context()):
            enc.value(v)
    except Unkeyable:
        return None
    except Exception:  # noqa: BLE001 - a value that will not read (a key array's bytes...): not keyed, never an error
        return None
    h = hashlib.sha256("\x00".join(enc.parts).encode())
    for blob in enc.blobs:
        h.update(blob)
    return h.digest()
