"""``pxla_mlir.pmap``: jax.pmap's interface on the pxla_mlir pipeline.

    f = pxla_mlir.pmap(fn, axis_name="i")
    f(x)                          # jax.Arrays laid out like jax.pmap's
    lowered = f.lower(x)          # .as_text(), .mhlo(), .pipeline, .compile()
    compiled = lowered.compile()  # __call__, .as_text() (XLA's HLO), .cost_analysis()

A call with concrete arguments takes the fast path: its signature (pytree,
avals, static arguments) finds a cached executable, so a repeated call does
no tracing, lowering or compiling. Called on tracers (inside an outer pmap,
grad, vmap, ...), the pmap is bound as the ``pxla_pmap`` primitive instead.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
from typing import Any, Callable, Sequence

import jax
from jax import tree_util

from ..invariance import varying_outputs
from ..jax_internals import api_util, core, pe
from ..lru import LRU
from ..runtime import DeviceLayout, ShardedExecutable
from ..stages import STATS, Compiled, Lowered, timed
from ..tracing import trace_flat
from .arguments import Call, PmapUsageError, examine_call, flatten_out_axes
from .importer import import_pmap, mesh_axis_label
from .primitive import PmapOptions, bind, pxla_pmap_p, replicas_needed

__all__ = ["pmap", "PmapFunction", "Lowered", "Compiled", "STATS"]

_unnamed = itertools.count()


@dataclasses.dataclass(frozen=True)
class Traced:
    """A traced pmap body and how its outputs leave the devices."""

    jaxpr: core.ClosedJaxpr
    out_tree: Any
    out_axes: tuple
    name: str


def trace_body(flat_fun: Callable, shard_avals, axis_name, axis_size: int, debug_info) -> core.ClosedJaxpr:
    return trace_flat(flat_fun, shard_avals, [(axis_name, axis_size)], debug_info)


def check_out_axes_none(traced: Traced, varying_in: list[bool], axis_name) -> None:
    if all(a is not None for a in traced.out_axes):
        return
    varies = varying_outputs(traced.jaxpr.jaxpr, varying_in, axis_name)
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(
        tree_util.tree_unflatten(traced.out_tree, [0] * traced.out_tree.num_leaves))[0]]
    for i, (a, v) in enumerate(zip(traced.out_axes, varies)):
        if a is None and v:
            raise PmapUsageError(
                f"output {paths[i] or i} of pmap {traced.name!r} has out_axes=None, but it may differ between "
                f"the devices of axis {axis_name!r} (it is computed from mapped inputs or the device index "
                f"without a reduction over {axis_name!r}). pxla_mlir returns one value for out_axes=None only "
                f"when it is provably the same on every device: reduce it first (lax.psum, lax.pmean, "
                f"lax.all_gather), or use out_axes=0 and pick the device you want")


class PmapFunction:
    """The object ``pmap`` returns."""

    def __init__(self, fun: Callable, axis_name, *, in_axes, out_axes, static_broadcasted_argnums, devices,
                 backend, axis_size, donate_argnums, mode, unshard):
        self._init = dict(in_axes=in_axes, out_axes=out_axes, static_broadcasted_argnums=static_broadcasted_argnums,
                          devices=devices, backend=backend, axis_size=axis_size, donate_argnums=donate_argnums,
                          mode=mode, unshard=unshard)
        if mode not in ("replica", "partition"):
            raise ValueError(f"mode must be 'replica' or 'partition', got {mode!r}")
        if unshard not in ("all-gather", "all-reduce"):
            raise ValueError(f"unshard must be 'all-gather' or 'all-reduce', got {unshard!r}")
        self.fun = fun
        self.axis_name = axis_name if axis_name is not None else f"_pxla_unnamed{next(_unnamed)}"
        self.in_axes, self.out_axes = in_axes, out_axes
        self.static_argnums = (static_broadcasted_argnums,) if isinstance(static_broadcasted_argnums, int) \
            else tuple(static_broadcasted_argnums)
        self.donate_argnums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
        self.devices = tuple(devices) if devices is not None else None
        self.backend = backend
        self.axis_size = axis_size
        self.options = PmapOptions(mode, unshard)
        self.name = getattr(fun, "__name__", "fun")
        self._traces: dict = {}
        self._lowered: dict = {}
        self._executables: dict = {}
        self._lock = threading.RLock()
        functools.update_wrapper(self, fun, updated=())  # never merge fun.__dict__ into ours

    # -- signatures and tracing -------------------------------------------------------
    def _examine(self, args, kwargs) -> Call:
        return examine_call(args, kwargs, in_axes=self.in_axes, static_argnums=self.static_argnums,
                            axis_size=self.axis_size, fn_name=self.name)

    def _key(self, call: Call):
        return (call.in_tree, call.global_avals, call.in_axes, call.axis_size, call.static_args)

    def _trace(self, call: Call) -> Traced:
        key = self._key(call)
        traced = self._traces.get(key)
        if traced is not None:
            return traced
        STATS["traces"] += 1
        flat_fun, store = call.flat_function(self.fun)
        debug = api_util.debug_info("pxla_mlir.pmap", self.fun, tuple(range(len(call.flat_args))), {})
        with timed("trace"):
            jaxpr = trace_body(flat_fun, call.shard_avals, self.axis_name, call.axis_size, debug)
        out_axes = flatten_out_axes(store["tree"], self.out_axes, jaxpr.out_avals)
        traced = Traced(jaxpr, store["tree"], out_axes, self.name)
        check_out_axes_none(traced, [a is not None for a in call.in_axes], self.axis_name)
        self._traces[key] = traced
        return traced

    # -- calling -----------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        call = self._examine(args, kwargs)
        if any(isinstance(x, core.Tracer) for x in call.flat_args):
            return self._bind(call, len(args))
        exe = self._executables.get(self._key(call))
        if exe is None:
            exe = self._executable(call, len(args))
        return tree_util.tree_unflatten(self._traces[self._key(call)].out_tree, exe(call.flat_args))

    def _bind(self, call: Call, nargs: int):
        traced = self._trace(call)
        outs = bind(traced.jaxpr, call.flat_args, axis_name=self.axis_name, axis_size=call.axis_size,
                    in_axes=call.in_axes, out_axes=traced.out_axes, name=self.name, devices=self.devices,
                    backend=self.backend, donated=call.donated(self.donate_argnums, nargs), options=self.options)
        return tree_util.tree_unflatten(traced.out_tree, outs)

    def _executable(self, call: Call, nargs: int) -> ShardedExecutable:
        with self._lock:
            key = self._key(call)
            if key not in self._executables:
                self._executables[key] = self._lower(call, nargs).compile()._executable
            return self._executables[key]

    def _lower(self, call: Call, nargs: int) -> "Lowered":
        key = self._key(call)
        lowered = self._lowered.get(key)
        if lowered is None:
            traced = self._trace(call)
            lowered = lower_traced(traced.jaxpr, axis_name=self.axis_name, axis_size=call.axis_size,
                                   in_axes=call.in_axes, out_axes=traced.out_axes, name=self.name,
                                   global_avals=call.global_avals, donated=call.donated(self.donate_argnums, nargs),
                                   devices=self.devices, backend=self.backend, options=self.options)
            lowered.signature = (functools.partial(_flatten_like, call), traced.out_tree)
            self._lowered[key] = lowered
        return lowered

    def lower(self, *args, **kwargs) -> "Lowered":
        call = self._examine(args, kwargs)
        with self._lock:
            return self._lower(call, len(args))

    def with_options(self, **options) -> "PmapFunction":
        """The same pmap with other options (e.g. ``mode``, ``unshard``), fresh caches."""
        unknown = set(options) - set(self._init)
        if unknown:
            raise TypeError(f"pmap has no option {sorted(unknown)[0]!r}")
        return PmapFunction(self.fun, self.axis_name, **{**self._init, **options})

    def clear_cache(self) -> None:
        self._traces.clear()
        self._lowered.clear()
        self._executables.clear()


def _flatten_like(call: Call, args) -> list:
    static = {n for n, _ in call.static_args}
    leaves, tree = tree_util.tree_flatten(tuple(a for i, a in enumerate(args) if i not in static))
    if tree != call.in_tree:
        raise TypeError(f"compiled for arguments with structure {call.in_tree}, got {tree}")
    return leaves


def pmap(fun: Callable | None = None, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=(), mode: str = "replica",
         unshard: str = "all-gather"):
    """Maps ``fun`` over a leading (or ``in_axes``) array axis, one slice per
    device, like ``jax.pmap``; collectives over ``axis_name`` work inside, and
    pmaps nest.

    pxla_mlir's own options: ``mode`` ("replica": the program runs as N
    replicas, as 2022 pmap did; "partition": as N SPMD partitions) and
    ``unshard`` ("all-gather" or the 2022 "all-reduce"), how nested pmaps
    collect their outputs. ``out_axes=None`` is accepted only for outputs that
    are provably the same on every device.
    """
    if fun is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                                 static_broadcasted_argnums=static_broadcasted_argnums, devices=devices,
                                 backend=backend, axis_size=axis_size, donate_argnums=donate_argnums,
                                 mode=mode, unshard=unshard)
    return PmapFunction(fun, axis_name, in_axes=in_axes, out_axes=out_axes,
                        static_broadcasted_argnums=static_broadcasted_argnums, devices=devices, backend=backend,
                        axis_size=axis_size, donate_argnums=donate_argnums, mode=mode, unshard=unshard)


# -- lowering and compiling -------------------------------------------------------------

def _devices_for(n: int, devices, backend) -> list:
    if devices is not None:
        if len(devices) != n:
            raise PmapUsageError(f"pmap was given {len(devices)} devices, but the computation needs {n} "
                                 f"(the product of the pmap axis sizes); pass exactly {n} devices")
        return list(devices)
    available = jax.local_devices(backend=backend)
    if n > len(available):
        raise PmapUsageError(f"the computation needs {n} devices (the product of the pmap axis sizes), but "
                             f"only {len(available)} {available[0].platform.upper()} devices are available"
                             + (f" (on CPU, set XLA_FLAGS=--xla_force_host_platform_device_count={n} before "
                                f"importing jax)" if available[0].platform == "cpu" else ""))
    return available[:n]


def lower_traced(jaxpr: core.ClosedJaxpr, *, axis_name, axis_size: int, in_axes, out_axes, name, global_avals,
                 donated, devices, backend, options: PmapOptions, consts: Sequence = (), kind: str = "pmap") -> Lowered:
    """Imports a traced pmap and runs the pmap pipeline on it."""
    if jaxpr.consts:  # hoist closed-over constants into broadcast arguments
        hoisted = pe.convert_constvars_jaxpr(jaxpr.jaxpr)
        n = len(jaxpr.consts)
        const_avals = tuple(core.shaped_abstractify(c) for c in jaxpr.consts)
        return lower_traced(core.ClosedJaxpr(hoisted, ()), axis_name=axis_name, axis_size=axis_size,
                            in_axes=(None,) * n + tuple(in_axes), out_axes=out_axes, name=name,
                            global_avals=const_avals + tuple(global_avals), donated=(False,) * n + tuple(donated),
                            devices=devices, backend=backend, options=options, consts=jaxpr.consts, kind=kind)
    nreps = axis_size * replicas_needed(jaxpr)
    devs = _devices_for(nreps, devices, backend)
    with timed("import"):
        imported = import_pmap(jaxpr, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes,
                               out_axes=out_axes, name=name, global_avals=global_avals, donated=donated,
                               platform=devs[0].platform, kind=kind)
    out_avals = [core.unmapped_aval(axis_size, a, av) if a is not None else av
                 for av, a in zip(jaxpr.out_avals, out_axes)]
    make = functools.partial(pmap_executable, axis_size=axis_size, label=mesh_axis_label(axis_name),
                             in_axes=in_axes, out_axes=out_axes, in_avals=global_avals, out_avals=out_avals)
    return Lowered(imported.module, options.pipeline(), devs, make, keepalive=imported.keepalive, consts=consts,
                   jaxpr_text=jaxpr.pretty_print)


def pmap_executable(module, devices, *, axis_size: int, label: str, in_axes, out_axes, in_avals,
                    out_avals) -> ShardedExecutable:
    """Mapped values sit on the pmap axis (the devices' first mesh dimension)."""
    layout = DeviceLayout(devices, axis_size, label)
    return ShardedExecutable(
        module, devices, in_shardings=[layout.sharding(a, av.ndim) for a, av in zip(in_axes, in_avals)],
        out_shardings=[layout.sharding(a, av.ndim) for a, av in zip(out_axes, out_avals)],
        in_avals=in_avals, out_avals=out_avals)


# -- the primitive's impl: a pmap bound with concrete arguments ------------------------------

_impl_cache = LRU(256)  # compiled programs of bound (transformed) pmaps
_impl_lock = threading.Lock()


def _impl(*args, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices, backend, donated, options):
    avals = tuple(core.ShapedArray(a.shape, a.dtype, weak_type=a.weak_type)
                  for a in map(core.shaped_abstractify, args))
    params = (axis_name, axis_size, in_axes, out_axes, devices, backend, donated, options, avals)
    with _impl_lock:
        # Transformation rules reuse their bodies (see rules._memo): try identity
        # first; rebuilt bodies fall back to their text.
        fast = (id(jaxpr), params)
        hit = _impl_cache.get(fast)
        compiled = hit[1] if hit is not None and hit[0] is jaxpr else None
        if compiled is None:
            key = (str(jaxpr), params)
            compiled = _impl_cache.get(key)
            if compiled is None:
                lowered = lower_traced(jaxpr, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes,
                                       out_axes=out_axes, name=name, global_avals=avals, donated=donated,
                                       devices=devices, backend=backend, options=options)
                compiled = _impl_cache[key] = lowered.compile()
            _impl_cache[fast] = (jaxpr, compiled)
    return compiled.call_flat(args)


pxla_pmap_p.def_impl(_impl)
