"""From a traced pmap body to a ``Lowered``, and the primitive's impl (a
pmap bound with concrete arguments: lower, compile once, run)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import jax

from pxla_mlir import distributed
from pxla_mlir.jaxbridge.jax_internals import core, pe
from pxla_mlir.maps import debug_checks
from pxla_mlir.maps.impl import ImplCache
from pxla_mlir.mlir.pipelines import PmapPipeline
from pxla_mlir.mlir.sharding.devices import too_few_devices
from pxla_mlir.mlir.support.stats import timed
from pxla_mlir.pmaps.arguments import PmapUsageError
from pxla_mlir.pmaps.importer import import_pmap, mesh_axis_label, nest_labels
from pxla_mlir.pmaps.layout import Boundary, placed_by_piece
from pxla_mlir.pmaps.nested_pmaps import program_partitioning
from pxla_mlir.pmaps.partition_strategy import Partitioning
from pxla_mlir.pmaps.primitive import PmapParams, pxla_pmap_p, replicas_needed
from pxla_mlir.runtime import lowering_cache
from pxla_mlir.stages.aot import Lowered
from pxla_mlir.stages.map_lowering import lower_cached
from pxla_mlir.stages.signature import Signature

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr

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


def lower_traced(jaxpr: ClosedJaxpr, params: PmapParams, global_avals, *, signature: Signature | None = None,
                 kind: str = "pmap", in_specs=None, out_specs=None) -> Lowered:
    """Imports a traced pmap body and runs the pmap pipeline on it.

    Closed-over constants become leading broadcast inputs that the
    ``Compiled`` supplies itself. A partitioned body (``params.partitioning``,
    :mod:`.partitions`) runs on that many more devices per index;
    ``in_specs``/``out_specs`` (a PartitionSpec or None per flat
    argument/result; None: all replicated) lay its values out.
    """
    consts = tuple(jaxpr.consts)
    n_in = len(params.in_axes)
    if consts:
        with core.extend_axis_env_nd([(params.axis_name, params.axis_size)]):  # jax_enable_checks re-checks it
            jaxpr = core.ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr.jaxpr), ())
        params = params.broadcasting(len(consts))
        global_avals = tuple(core.shaped_abstractify(c) for c in consts) + tuple(global_avals)
    name, what = params.name, f"{kind} {params.name!r}"
    parts = program_partitioning(jaxpr, params, kind)  # decided here, for the import and the layout
    if parts.nest:
        _check_partition_mode(params.options, parts, name, kind)
    in_specs = (None,) * len(consts) + tuple(in_specs or (None,) * n_in)
    out_specs = tuple(out_specs or (None,) * len(params.out_axes))
    nested = replicas_needed(jaxpr)
    devices = parts.devices(params.axis_size, params.devices, params.backend, what, nested=nested)
    devs = devices_for(params.axis_size * nested * parts.size, params.axis_size, devices, params.backend, what=what)
    by_piece = params.options.pieces == "on" and _blocks_within_processes(devs, params.axis_size)
    platform = devs[0].platform
    pipeline = params.options.anchored()

    def build():
        with timed("import"):
            imported = import_pmap(jaxpr, params, platform=platform, kind=kind, specs=(in_specs, out_specs),
                                   partitioning=parts, by_piece=by_piece)
        parts.check_module(imported.module, params.options.sharding_dialect, what)
        return imported

    out_avals = [core.unmapped_aval(params.axis_size, a, av) if a is not None else av
                 for av, a in zip(jaxpr.out_avals, params.out_axes)]
    boundary = Boundary(params.in_axes, tuple(global_avals), params.out_axes, tuple(out_avals), params.donation,
                        consts, in_specs, out_specs)
    levels = tuple(zip(nest_labels(params.axis_name, parts.levels), (s for _, s in parts.levels)))
    key = lowering_cache.key("pmap", kind, jaxpr, params, tuple(global_avals), in_specs, out_specs, tuple(devs),
                             by_piece, nested, parts, pipeline, lowering_cache.plugin_versions(pipeline))
    by_piece_maybe = not parts and len(devs) > params.axis_size  # nested pmaps: import may place values by piece
    return lower_cached(key, build, lambda placed, pxla: parts.layout(devs, params.axis_size,
                                                                      mesh_axis_label(params.axis_name), levels,
                                                                      boundary, placed, pxla),
                        hints_of=placed_by_piece if by_piece_maybe else None, platform=platform, pipeline=pipeline,
                        signature=signature or Signature.flat(len(global_avals) - len(consts), len(out_avals)),
                        jaxpr_text=jaxpr.pretty_print)


def _check_partition_mode(options: PmapPipeline, nest: Partitioning, name, kind: str) -> None:
    if options.mode == "partition":
        return
    where = "pxla_mlir.jit" if kind == "jit" else f"pmap {name!r}"
    raise PmapUsageError(
        f"{where} holds a pmap with partitions={nest.describe()}: the whole nest is one partition-mode "
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


def _impl(*args, jaxpr, **eqn_params):
    params = PmapParams.of(eqn_params)
    avals = distributed.bound_avals(args, params.in_axes, params.axis_size)  # multi-process: a host value, a share
    if not debug_checks.donation_allowed():
        params = params.replace(donated=(False,) * len(params.donation))

    def build():
        return lower_traced(jaxpr, params, avals).compile()

    # The name is part of the key, as for an xmap: a transformed body that prints like another one
    # (a transpose like its forward pass) is a program of its own, named for what it computes in
    # profiles, dumps and errors, and compiled as jax.pmap compiles it.
    compiled = _impl_cache.compiled(jaxpr, (params, avals), build)
    outs = compiled.call_flat(args)
    if debug_checks.active():
        body = functools.partial(core.eval_jaxpr, jaxpr.jaxpr, jaxpr.consts)
        debug_checks.check_outputs(outs, what=f"pmap {params.name!r}", devices=compiled.executable.devices,
                                   rerun=lambda: deoptimized(body, args, params))
    return outs


def deoptimized(body, args, params: PmapParams):
    """A pmap's body run un-jitted, as jax.vmap over its axis (jax_debug_nans)."""
    return jax.vmap(lambda *xs: tuple(body(*xs)), in_axes=params.in_axes, out_axes=params.out_axes,
                    axis_name=params.axis_name, axis_size=params.axis_size)(*args)


def register_impl() -> None:
    pxla_pmap_p.def_impl(_impl)
