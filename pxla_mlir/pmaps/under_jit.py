"""A pmap inside ``jax.jit``: a manual computation over the pmap's devices.

``jax.jit(f)`` where ``f`` calls a pxla_mlir.pmap compiles with jax's own
pipeline, as jax.jit of jax.pmap does, and the pmap keeps its devices there:

* jax.jit learns them: the pmap's devices join the shardings jax.jit picks
  its device assignment from (``maps.jit_devices``), so the
  program has ``mhlo.num_partitions = N`` and a committed argument on other
  devices is jax's "incompatible devices" error, as for jax.jit(jax.pmap);
* the pmap equation lowers as jax's own ``shard_map`` over
  ``Mesh(devices, (axis,))``, fully manual, with the mapped axis of each
  operand and result split over it (in the Shardy form an
  ``sdy.manual_computation``, exactly what jax emits for jax.pmap);
* nested pmaps get a mesh axis each (the mesh is ``(axis, inner axis, ...)``
  over the product of the sizes): inside the manual computation an inner
  pmap takes its slice at ``axis_index(inner)`` and all-gathers its results
  over it, 2022's nested pmap in jax's terms;
* a partitioned pmap (``partitions=``) lowers as jax's
  ``shard_map(..., axis_names={axis})`` over the mesh (axis, partition
  axes): manual over its axis, the partition axes automatic, its sharding
  constraints (and its in/out_partitions, constraints in its body) kept;
  pmaps around one are manual over all their axes
  (``axis_names={outer, inner}``, :mod:`.nested_pmaps`).

Where that is impossible, sibling nested pmaps over different axes (one
mesh cannot name both), the pmap runs as ``jax.vmap`` on jit's devices, with
a :class:`PmapInsideJitWarning` that says why.

Under multiple processes, as jax.pmap traced under jax.jit, the pmap runs
on this process's devices.
"""

from __future__ import annotations

import threading
import warnings

import jax
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from pxla_mlir.distributed.processes import is_multi_process
from pxla_mlir.jaxbridge.jax_internals import core, jax_mlir
from pxla_mlir.maps.jit_devices import register_jit_devices
from pxla_mlir.pmaps.arguments import PmapUsageError
from pxla_mlir.pmaps.nested_pmaps import nest_chain, partitioned_nest
from pxla_mlir.pmaps.partitions import strategy
from pxla_mlir.pmaps.primitive import PmapParams, pxla_pmap_p, replicas_needed
from pxla_mlir.pmaps.stage import devices_for

__all__ = ["PmapInsideJitWarning", "lower", "lower_inside", "inside", "register"]


class PmapInsideJitWarning(UserWarning):
    """A pxla_mlir.pmap under jax.jit that cannot keep its devices runs as jax.vmap on jit's devices."""


class _Lowering(threading.local):
    manual = 0  # > 0 while a pmap's body lowers as a manual computation inside jax.jit
    vmapped = 0  # > 0 while one lowers as jax.vmap (its nested pmaps too, then)


_lowering = _Lowering()


def inside() -> bool:
    """Is a pmap body being lowered inside jax.jit (so a pmap here is a nested one)?"""
    return _lowering.manual > 0 or _lowering.vmapped > 0


# -- the devices -----------------------------------------------------------------------------------

def jit_devices(jaxpr, axis_size: int, devices, backend, name: str, group: int = 1) -> list:
    """The devices a pmap (with its nested pmaps, or ``group`` partitions per index) runs on inside jax.jit."""
    n = axis_size * replicas_needed(jaxpr) * group
    if devices is None and is_multi_process(backend):  # as jax.pmap traced in a multi-process run
        local = jax.local_devices(backend=backend)
        if n > len(local):
            raise PmapUsageError(f"pmap {name!r} inside jax.jit needs {n} devices, but this process has {len(local)}: "
                                 f"in a multi-process run a pmap traced by jax.jit runs on the process's own devices")
        return local[:n]
    return devices_for(n, axis_size, devices, backend, what=f"pmap {name!r}")


def jit_mesh(jaxpr, p: PmapParams, chain: list, partitions: tuple = ()) -> Mesh:
    """The mesh of a pmap inside jax.jit: its axis, then one per level of nested
    pmaps (``chain``), then the partition axes ((name, size) pairs) of it or
    of the partitioned pmap nested in it."""
    parts = strategy(partitions)
    chain = [*chain, *parts.axes]
    devices = parts.devices(p.axis_size, p.devices, p.backend, f"pmap {p.name!r}", nested=replicas_needed(jaxpr))
    devs = jit_devices(jaxpr, p.axis_size, devices, p.backend, p.name, parts.size)
    names, sizes = (p.axis_name, *(n for n, _ in chain)), (p.axis_size, *(s for _, s in chain))
    return Mesh(np.array(devs, dtype=object).reshape(sizes), names)


def _jit_shardings(eqn) -> list:
    """jax.jit's device assignment (and the mesh it names its outputs' shardings by) from a pmap equation."""
    p = PmapParams.of(eqn.params)
    jaxpr = eqn.params["jaxpr"]
    chain = nest_chain(jaxpr)
    if chain is None:  # runs as vmap on jit's devices: nothing to add
        return []
    parts = p.partitions or partitioned_nest(jaxpr, p.axis_name, p.name).partitions
    return [NamedSharding(jit_mesh(jaxpr, p, chain, parts), PartitionSpec())]


# -- the lowerings ---------------------------------------------------------------------------------

def _spec(axis: int | None, name) -> PartitionSpec:
    return PartitionSpec() if axis is None else PartitionSpec(*[None] * axis, name)


def lower(ctx, in_nodes, jaxpr, p: PmapParams):
    """The pmap as a manual computation over its devices (see the module docs)."""
    chain = nest_chain(jaxpr)
    nest = partitioned_nest(jaxpr, p.axis_name, p.name)  # refuses a partitioned pmap among siblings over other axes
    if chain is None:
        return _as_vmap(ctx, in_nodes, jaxpr, p, why=(
            "its nested pmaps at one level map different axes, and one mesh inside jax.jit cannot name them all"))
    if p.partitions and chain:
        raise PmapUsageError(f"pmap {p.name!r} has partitions= and a nested pmap in its body: a partitioned body "
                             f"cannot hold nested pmaps")
    # a partitioned pmap nested in this one: manual over every pmap axis of the nest (.nested_pmaps)
    parts = strategy(p.partitions or nest.partitions)
    mesh = jit_mesh(jaxpr, p, chain, parts.axes)
    in_axes, out_axes = p.in_axes, p.out_axes

    def body(*xs):
        xs = [x if a is None else lax.squeeze(x, [a]) for x, a in zip(xs, in_axes)]
        ys = core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs)
        return tuple(y if a is None else lax.expand_dims(y, [a]) for y, a in zip(ys, out_axes))

    # a partitioned body: manual over the pmap axes only, XLA's partitioner splits the partition axes
    manual = {"axis_names": {p.axis_name, *(n for n, _ in chain)}} if parts else {}
    mapped = jax.shard_map(body, mesh=mesh, in_specs=tuple(_spec(a, p.axis_name) for a in in_axes),
                           out_specs=tuple(_spec(a, p.axis_name) for a in out_axes), check_vma=False, **manual)
    _lowering.manual += 1
    try:
        return jax_mlir.lower_fun(lambda *xs: list(mapped(*xs)), multiple_results=True)(ctx, *in_nodes)
    finally:
        _lowering.manual -= 1


def lower_inside(ctx, in_nodes, jaxpr, p: PmapParams):
    """A pmap nested in one being lowered inside jax.jit: as jax.vmap inside a
    vmapped one; inside a manual computation its axis is a mesh axis of it,
    each device takes its slice along it and the results are all-gathered over it."""
    if _lowering.vmapped:
        return _vmapped(ctx, in_nodes, jaxpr, p)

    def body(*xs):
        index = lax.axis_index(p.axis_name)
        xs = [x if a is None else lax.dynamic_index_in_dim(x, index, a, keepdims=False)
              for x, a in zip(xs, p.in_axes)]
        ys = core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs)
        return [y if a is None else lax.all_gather(y, p.axis_name, axis=a) for y, a in zip(ys, p.out_axes)]

    return jax_mlir.lower_fun(body, multiple_results=True)(ctx, *in_nodes)


_warned: set = set()


def _as_vmap(ctx, in_nodes, jaxpr, p: PmapParams, *, why: str):
    if p.name not in _warned:
        _warned.add(p.name)
        warnings.warn(PmapInsideJitWarning(
            f"pxla_mlir.pmap {p.name!r} inside jax.jit runs as jax.vmap over its axis on jit's device(s): {why}. "
            f"Same results, but the work is not spread over {p.axis_size} devices; pxla_mlir.jit keeps them."),
            stacklevel=2)
    return _vmapped(ctx, in_nodes, jaxpr, p)


def _vmapped(ctx, in_nodes, jaxpr, p: PmapParams):
    fn = jax.vmap(lambda *xs: tuple(core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs)), in_axes=p.in_axes,
                  out_axes=p.out_axes, axis_name=p.axis_name, axis_size=p.axis_size)
    _lowering.vmapped += 1
    try:
        return jax_mlir.lower_fun(lambda *xs: fn(*xs), multiple_results=True)(ctx, *in_nodes)
    finally:
        _lowering.vmapped -= 1


def register() -> None:
    register_jit_devices(pxla_pmap_p, _jit_shardings)
