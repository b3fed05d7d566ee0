"""``pxla_mlir.jit`` arguments as process-local shares (multi-process runs).

A jit argument has no mapped axis of its own: the maps inside say which of
its dimensions span processes. The rule: a host argument (numpy, a Python
value, a jax.Array held by this process alone) that a map inside takes
*directly* (the argument itself, or looked through jax.grad/jvp, which keep
its shape) is this process's share of every dimension that the map splits
over devices of several processes, exactly as that map would take it
called on its own (pmap: its mapped axis; xmap: each named dimension whose
mesh axes span processes). Every other host argument is a whole value;
global jax.Arrays are global as they are.

Finding those dimensions needs a trace, and a trace with the shares' shapes
makes an inner map fail on their size. So the body is *probed*: traced
under :func:`probing`, in which each pmap or xmap reports its operands
(:func:`note_pmap`, :func:`note_xmap`) before it traces its own body. An
operand that is a jit argument not yet known as a share stops the probe
(:class:`_Found`); the body is traced again with that argument's global
shape (the share's, each such dimension times the number of positions its
mesh axes have across processes), until a trace completes. A host argument
that reaches such a dimension only through computation (``xmap(f)(x * 2)``,
a vmapped map) before any map takes it directly (in the order the body
calls its maps) cannot be told apart from a whole value: :class:`JitShareError`
asks for a global jax.Array; so does a process-spanning map inside a staged
computation of the body (jax.jit, lax.scan, ...) while a host argument is
neither a known share nor traced to it. Maps inside another map's body are
left out: their operands are per-index values of the outer map, which is
the one that splits its operands across processes.

The shares then become global jax.Arrays laid out as the map that takes them
lays them out (``jax.make_array_from_process_local_data``, this process's
devices only), and the jit program takes them as it takes any global
argument (today: whole on every device, so the runtime gathers them before
the launch, once per call). Processes whose shares disagree in shape get
different global shapes, which the launch check of every multi-process
program reports on every process (:mod:`.program_check`) before anything
is gathered or launched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Sequence

import jax
import numpy as np
from jax.sharding import Mesh as JaxMesh, NamedSharding, PartitionSpec

from pxla_mlir.distributed.processes import MultiProcessError, process_count, spans_processes
from pxla_mlir.distributed.shares import is_process_local, share_factor
from pxla_mlir.distributed.tracers import primal_tracer, staged_ancestors, staged_tracer
from pxla_mlir.jaxbridge.jax_internals import core, same_trace
from pxla_mlir.mlir.support.lru import LRU

__all__ = ["JitShareError", "ArgShare", "probing", "note_pmap", "note_xmap", "find_shares", "global_call"]


class JitShareError(MultiProcessError):
    """A pxla_mlir.jit argument whose share of the run cannot be told from its use."""


@dataclasses.dataclass(frozen=True)
class ArgShare:
    """How a jit argument is this process's share: ``factors`` (dimension:
    how many times longer the global value is), the ``sharding`` whose
    process-local data it is, and the map that takes it (for messages)."""

    factors: tuple  # ((dim, factor), ...), factors > 1
    sharding: NamedSharding
    what: str

    def global_aval(self, aval):
        grow = dict(self.factors)
        shape = tuple(n * grow.get(d, 1) for d, n in enumerate(aval.shape))
        return core.ShapedArray(shape, aval.dtype, weak_type=aval.weak_type)


class _Found(Exception):
    """A probe met a jit argument that a map takes as a share: trace again with its global shape."""


class _Probe:
    def __init__(self, known: dict, local: Sequence[bool], names: Callable[[int], str], fn_name: str):
        self.known = dict(known)  # flat argument: ArgShare
        self.local = local  # per flat argument: a host value (which may be a share)
        self.names, self.fn_name = names, fn_name
        self.args: tuple = ()  # the body's argument tracers
        self.axes: frozenset = frozenset()  # the axis names bound where the body is traced
        self.found = False

    def wrap(self, flat_fun: Callable) -> Callable:
        def body(*args):
            self.args, self.axes = args, _bound_axes()
            return flat_fun(*args)
        return body

    def note(self, leaves: Sequence, factors: Sequence[dict], layout: Callable[[int], NamedSharding], what: str):
        if _bound_axes() != self.axes:  # a map inside another's body: the outer map splits across processes
            return
        for i, (x, grow) in enumerate(zip(leaves, factors)):
            grow = tuple(sorted((d, f) for d, f in grow.items() if f > 1))
            if not grow:
                continue
            origin = primal_tracer(x)
            arg = next((j for j, a in enumerate(self.args) if a is origin), None)
            if arg is None:
                self._refuse_computed(x, what)
            elif self.local[arg]:
                self._take(arg, ArgShare(grow, layout(i), what))
        if self.found:
            raise _Found

    def _take(self, arg: int, share: ArgShare):
        known = self.known.get(arg)
        if known is None:
            self.known[arg] = share
            self.found = True
        elif known.factors != share.factors:
            raise JitShareError(
                f"pxla_mlir.jit function {self.fn_name!r}: argument {self.names(arg)} is a host value that "
                f"{known.what} and {share.what} take as this process's share of different dimensions "
                f"({_dims(known)} and {_dims(share)}); pass it as a global jax.Array "
                f"(jax.make_array_from_process_local_data with the layout you mean)")

    def _refuse_computed(self, x, what: str):
        staged = staged_tracer(x)
        if staged is None or not self.args:
            return
        if not same_trace(staged, self.args[0]):  # inside jax.jit, lax.scan, ...: its inputs are that trace's
            unknown = [j for j in range(len(self.args)) if self.local[j] and j not in self.known]
            if unknown:
                raise JitShareError(
                    f"pxla_mlir.jit function {self.fn_name!r} calls {what} inside a staged computation of its body "
                    f"(jax.jit, lax.scan, lax.cond, jax.checkpoint, ...), at a dimension the map splits over devices "
                    f"of several processes; what reaches it there cannot be traced back to the jit's arguments, so "
                    f"host argument {self.names(unknown[0])} could be a whole value or this process's share. Pass "
                    f"the host arguments that reach it as global jax.Arrays, or call the map directly in the body")
            return
        ids = {id(a): j for j, a in enumerate(self.args)}
        reached = sorted({ids[id(t)] for t in staged_ancestors(staged) if id(t) in ids})
        bad = [j for j in reached if self.local[j] and j not in self.known]
        if bad:
            raise JitShareError(
                f"pxla_mlir.jit function {self.fn_name!r}: argument {self.names(bad[0])} is a host value and "
                f"reaches {what} through computation (or under jax.vmap), at a dimension the map splits over devices of several "
                f"processes. A host argument is this process's share only where a map takes it directly (then "
                f"its global shape is known); here it could be a whole value or a share. Pass it as a global "
                f"jax.Array (jax.make_array_from_process_local_data(sharding, x_local) for a share, "
                f"jax.make_array_from_callback for a whole value), or give the map the argument itself")


def _bound_axes() -> frozenset:
    return frozenset(core.get_axis_env().axis_sizes)


def _dims(share: ArgShare) -> str:
    return ", ".join(f"dimension {d} x{f}" for d, f in share.factors)


class _State(threading.local):
    probe: _Probe | None = None


_state = _State()


@contextlib.contextmanager
def probing(probe: _Probe):
    previous, _state.probe = _state.probe, probe
    try:
        yield probe
    finally:
        _state.probe = previous


def note_pmap(leaves: Sequence, axes: Sequence, devices, name: str) -> None:
    """A pmap's operands, while a jit body is probed (else nothing): a mapped
    operand is a share of its mapped axis across every process."""
    probe = _state.probe
    if probe is None:
        return
    count = process_count()
    if count == 1 or (devices is not None and not spans_processes(devices)):
        return
    factors = [{} if a is None else {a: count} for a in axes]

    def layout(i: int) -> NamedSharding:
        ndim = np.ndim(leaves[i])
        if devices is not None:
            mesh, axis = JaxMesh(np.array(list(devices), dtype=object), ("i",)), "i"
        else:  # default devices: process-major, each process's rows together
            mesh = JaxMesh(np.array([jax.local_devices(process_index=p) for p in range(count)], dtype=object),
                           ("processes", "local"))
            axis = "processes"
        return NamedSharding(mesh, PartitionSpec(*[axis if d == axes[i] else None for d in range(ndim)]))

    probe.note(leaves, factors, layout, f"pmap {name!r}")


def note_xmap(leaves: Sequence, maps: Sequence[dict], resources: dict, mesh, name: str) -> None:
    """An xmap's operands (``maps``: dimension -> named axis per operand) on
    ``mesh``, while a jit body is probed (else nothing)."""
    probe = _state.probe
    if probe is None:
        return
    names = tuple(mesh.axis_names)
    on = [{d: tuple(r for r in resources.get(n, ()) if r in names) for d, n in m.items()} for m in maps]
    factors = [{d: share_factor(mesh.devices, names, axes) for d, axes in dims.items()} for dims in on]
    jmesh = JaxMesh(mesh.devices, names)

    def layout(i: int) -> NamedSharding:
        spec = [on[i].get(d) or None for d in range(np.ndim(leaves[i]))]
        return NamedSharding(jmesh, PartitionSpec(*spec))

    probe.note(leaves, factors, layout, f"xmap {name!r}")


def find_shares(trace: Callable, avals: Sequence, local: Sequence[bool], names: Callable[[int], str],
                fn_name: str) -> dict:
    """The shares among a jit body's arguments: ``trace(wrap, avals)`` traces
    the body (made by ``wrap`` from the flat function) on ``avals``."""
    known: dict = {}
    for _ in range(len(avals) + 1):  # every round but the last finds one more share
        probe = _Probe(known, local, names, fn_name)
        scaled = [known[i].global_aval(av) if i in known else av for i, av in enumerate(avals)]
        try:
            with probing(probe):
                trace(probe.wrap, scaled)
        except _Found:
            known = probe.known
            continue
        return known
    raise AssertionError("probing a pxla_mlir.jit body did not settle")  # each round adds a share


def global_call(call, cache: LRU, key, trace: Callable, fn_name: str, names: Callable[[int], str]):
    """A multi-process pxla_mlir.jit call with its shares made global: the
    call's avals, and its arguments as global jax.Arrays. ``cache`` keeps
    the shares found by ``key`` (the call's key, the trace and mesh context)."""
    local = tuple(is_process_local(x) and not isinstance(x, core.Tracer) for x in call.flat_args)
    if not any(local):
        return call
    shares = cache.get((key, local))
    if shares is None:
        shares = cache[(key, local)] = find_shares(trace, call.global_avals, local, names, fn_name)
    if not shares:
        return call
    avals, args = list(call.global_avals), list(call.flat_args)
    for i, share in shares.items():
        avals[i] = share.global_aval(avals[i])
        args[i] = _assemble(args[i], avals[i], share)
    return dataclasses.replace(call, flat_args=args, global_avals=tuple(avals))


def _assemble(x, aval, share: ArgShare):
    if isinstance(x, jax.ShapeDtypeStruct):  # lowering only: the global type is enough
        return jax.ShapeDtypeStruct(aval.shape, aval.dtype)
    data = x if isinstance(x, jax.Array) else np.asarray(x, dtype=aval.dtype)
    return jax.make_array_from_process_local_data(share.sharding, data, tuple(aval.shape))
