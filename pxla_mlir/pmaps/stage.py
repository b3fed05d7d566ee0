"""From a traced pmap body to a ``Lowered``, and the primitive's impl (a
pmap bound with concrete arguments: lower, compile once, run)."""

from __future__ import annotations

import functools
import math

import jax

from pxla_mlir import distributed
from pxla_mlir.jaxbridge.jax_internals import core, pe
from pxla_mlir.maps import debug_checks
from pxla_mlir.maps.impl import ImplCache
from pxla_mlir.maps.stages import Lowered, Signature, lower
from pxla_mlir.mlir.pipelines import PmapPipeline
from pxla_mlir.mlir.sharding.devices import too_few_devices
from pxla_mlir.mlir.support.stats import timed
from pxla_mlir.pmaps import partition_import
from pxla_mlir.pmaps.arguments import PmapUsageError
from pxla_mlir.pmaps.importer import import_pmap, mesh_axis_label, nest_labels
from pxla_mlir.pmaps.layout import DeviceLayout
from pxla_mlir.pmaps.nested_pmaps import PartitionedNest, partitioned_nest
from pxla_mlir.pmaps.partitions import PartitionedLayout, Partitioning, describe, partitioned_devices
from pxla_mlir.pmaps.primitive import pxla_pmap_p, replicas_needed

__all__ = ["lower_traced", "register_impl", "deoptimized"]


def devices_for(n: int, axis_size: int, devices, backend, what: str = "pmap") -> list:
    """The ``n`` devices a pmap over ``axis_size`` (times nested pmaps) runs on."""
    if devices is not None:
        if distributed.is_multi_process(backend):  # which processes they cover comes before how many they are
            distributed.check_devices(devices, what)
        if len(devices) != n:
            listed = ", ".join(map(str, devices))
            if n == axis_size:
                raise PmapUsageError(
                    f"Leading axis size of input to pmapped function must equal the number of local devices passed "
                    f"to pmap. Got axis_size={axis_size}, num_local_devices={len(devices)}.\n(Local devices available "
                    f"to pmap: {listed}). Pass exactly {n} devices, or map an axis of size {len(devices)}")
            raise PmapUsageError(
                f"pmapped function requires {n} local devices to run due to nested pmapped or other parallel "
                f"functions, but only {len(devices)} are available.\n(outer axis size: {axis_size}, local devices "
                f"available to pmap: {listed}). Pass exactly {n} devices (the product of the pmap axis sizes)")
        return distributed.check_devices(devices, what)  # multi-process: every process, evenly
    if distributed.is_multi_process(backend):  # all processes' devices, process-major
        return distributed.default_devices(n, backend, what)
    available = jax.local_devices(backend=backend)
    if n > len(available):
        platform = available[0].platform
        raise PmapUsageError(
            f"compiling computation that requires {n} logical devices, but only {len(available)} XLA devices are "
            f"available (num_replicas * num_partitions = {n}): the product of the pmap axis sizes is "
            f"{n}, and {len(available)} {platform.upper()} devices exist" + too_few_devices(n, available, backend))
    return available[:n]


def lower_traced(jaxpr: core.ClosedJaxpr, *, axis_name, axis_size: int, in_axes, out_axes, name, global_avals,
                 donated, devices, backend, options: PmapPipeline, signature: Signature | None = None,
                 kind: str = "pmap", partitions: tuple = (), in_specs=None, out_specs=None) -> Lowered:
    """Imports a traced pmap body and runs the pmap pipeline on it.

    Closed-over constants become leading broadcast inputs that the
    ``Compiled`` supplies itself. ``partitions`` ((name, size) pairs) make
    the body partitioned over that many more devices per index
    (:mod:`.partitions`); ``in_specs``/``out_specs`` (a PartitionSpec or
    None per flat argument/result; None: all replicated) lay the values out.
    """
    consts = tuple(jaxpr.consts)
    n_in = len(in_axes)
    if consts:
        n = len(consts)
        with core.extend_axis_env_nd([(axis_name, axis_size)]):  # jax_enable_checks re-checks the body here
            jaxpr = core.ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr.jaxpr), ())
        in_axes = (None,) * n + tuple(in_axes)
        global_avals = tuple(core.shaped_abstractify(c) for c in consts) + tuple(global_avals)
        donated = (False,) * n + tuple(donated)
    nest = PartitionedNest((), ()) if partitions else partitioned_nest(jaxpr, axis_name, name, kind)
    if nest:
        _check_partition_mode(options, nest, name, kind)
    parts = partitions or nest.partitions
    group = math.prod(s for _, s in parts)
    if parts:
        in_specs = (None,) * len(consts) + tuple(in_specs or (None,) * n_in)
        out_specs = tuple(out_specs or (None,) * len(out_axes))
        devices = partitioned_devices(axis_size, parts, devices, backend, f"{kind} {name!r}",
                                      nested=replicas_needed(jaxpr))
    devs = devices_for(axis_size * replicas_needed(jaxpr) * group, axis_size, devices, backend,
                       what=f"{kind} {name!r}")
    with timed("import"):
        imported = import_pmap(jaxpr, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes,
                               out_axes=out_axes, name=name, donated=donated, platform=devs[0].platform, kind=kind,
                               partitions=partitions, in_specs=in_specs, out_specs=out_specs, nest=nest,
                               by_piece=options.pieces == "on" and _blocks_within_processes(devs, axis_size))
    if parts:
        partition_import.check_dialect(imported.module, options.sharding_dialect, f"{kind} {name!r}")
    out_avals = [core.unmapped_aval(axis_size, a, av) if a is not None else av
                 for av, a in zip(jaxpr.out_avals, out_axes)]
    if parts:
        layout = PartitionedLayout(devs, axis_size, mesh_axis_label(axis_name), Partitioning(parts),
                                   nested=tuple(zip(nest_labels(axis_name, nest.chain), (s for _, s in nest.chain)))).layout(
            in_axes, global_avals, in_specs, out_axes, out_avals, out_specs, donated=donated, consts=consts)
    else:
        layout = DeviceLayout(devs, axis_size, mesh_axis_label(axis_name)).layout(
            in_axes, global_avals, out_axes, out_avals, donated=donated, consts=consts, module=imported.module)
    return lower(imported, pipeline=options.anchored(), layout=layout,
                 signature=signature or Signature.flat(len(global_avals) - len(consts), len(out_avals)),
                 jaxpr_text=jaxpr.pretty_print)


def _check_partition_mode(options: PmapPipeline, nest: PartitionedNest, name, kind: str) -> None:
    if options.mode == "partition":
        return
    where = "pxla_mlir.jit" if kind == "jit" else f"pmap {name!r}"
    raise PmapUsageError(
        f"{where} holds a pmap with partitions={describe(nest.partitions)}: the whole nest is one partition-mode "
        f"program (manual over its pmap axes, split by XLA's SPMD partitioner over the partition axes), so pass "
        f"mode=\"partition\" to {where} too. Replica mode cannot run it: jaxlib 0.10.2 aborts the process on modules "
        f"with both num_replicas > 1 and num_partitions > 1 that carry shardings")


def _blocks_within_processes(devices, axis_size: int) -> bool:
    """Whether each index of the pmap axis runs on one process's devices: only
    then may nested pmaps' values go by piece, since a process's host-local
    results are whole blocks of the pmap axis."""
    inner = len(devices) // axis_size
    return all(len({d.process_index for d in devices[k * inner:(k + 1) * inner]}) == 1 for k in range(axis_size))


# -- the primitive's impl: a pmap bound with concrete arguments ------------------------------

_impl_cache = ImplCache(256)  # compiled programs of bound (transformed) pmaps


def _impl(*args, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices, backend, donated, options,
          partitions=()):
    avals = distributed.bound_avals(args, in_axes, axis_size)  # multi-process: a host value may be a share

    def build():
        return lower_traced(jaxpr, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes, out_axes=out_axes,
                            name=name, global_avals=avals, donated=donated, devices=devices, backend=backend,
                            options=options, partitions=partitions).compile()

    if not debug_checks.donation_allowed():
        donated = (False,) * len(donated)
    # The name is part of the key, as for an xmap: a transformed body that prints like another one
    # (a transpose like its forward pass) is a program of its own, named for what it computes in
    # profiles, dumps and errors, and compiled as jax.pmap compiles it.
    params = (name, axis_name, axis_size, in_axes, out_axes, devices, backend, donated, options, avals, partitions)
    compiled = _impl_cache.compiled(jaxpr, params, build)
    outs = compiled.call_flat(args)
    if debug_checks.active():
        body = functools.partial(core.eval_jaxpr, jaxpr.jaxpr, jaxpr.consts)
        debug_checks.check_outputs(outs, what=f"pmap {name!r}", devices=compiled.executable.devices, rerun=lambda: (
            deoptimized(body, args, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes, out_axes=out_axes)))
    return outs


def deoptimized(body, args, *, axis_name, axis_size: int, in_axes, out_axes):
    """A pmap's body run un-jitted, as jax.vmap over its axis (jax_debug_nans)."""
    return jax.vmap(lambda *xs: tuple(body(*xs)), in_axes=tuple(in_axes), out_axes=tuple(out_axes),
                    axis_name=axis_name, axis_size=axis_size)(*args)


def register_impl() -> None:
    pxla_pmap_p.def_impl(_impl)
