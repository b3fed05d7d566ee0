"""From a traced pmap body to a ``Lowered``, and the primitive's impl (a
pmap bound with concrete arguments: lower, compile once, run)."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import jax
from jaxlib.mlir import ir

import pxla_mlir.distributed as distributed
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
from pxla_mlir.stages.aot import Lowered
from pxla_mlir.stages.lowering import Layout
from pxla_mlir.stages.map_lowering import lower_cached
from pxla_mlir.stages.signature import Signature

if TYPE_CHECKING:
    from jax.core import ShapedArray
    from jax.extend.core import ClosedJaxpr
    from jax.sharding import PartitionSpec

    from pxla_mlir.runtime.executable import Device

__all__ = ["PmapInputs", "lower_traced", "register_impl", "deoptimized"]


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


@dataclasses.dataclass(frozen=True)
class PmapInputs:
    """What decides a pmap's lowering (a :class:`~pxla_mlir.stages.map_lowering.LoweringInputs`): the body
    (its constants leading arguments), its params (axis, mapped axes, options, pipeline), the global avals,
    a partitioned body's specs, the devices and how import places values. The lowering cache's key is a
    digest of every field; the module is built from them alone."""

    kind: str  # "pmap", or "jit" for a pxla_mlir.jit body lowered as a pmap of size 1
    jaxpr: ClosedJaxpr  # without consts
    params: PmapParams
    global_avals: tuple[ShapedArray, ...]
    in_specs: tuple[PartitionSpec | None, ...]
    out_specs: tuple[PartitionSpec | None, ...]
    devices: tuple[Device, ...]
    partitioning: Partitioning
    nested: int  # devices per index that nested pmaps need
    by_piece: bool  # import places nested pmaps' values by piece where it can

    @property
    def pipeline(self) -> PmapPipeline:
        return self.params.options

    @property
    def platform(self) -> str:
        return self.devices[0].platform

    @property
    def cacheable(self) -> bool:
        return True

    def build(self):
        with timed("import"):
            imported = import_pmap(self.jaxpr, self.params, platform=self.platform, kind=self.kind,
                                   specs=(self.in_specs, self.out_specs), partitioning=self.partitioning,
                                   by_piece=self.by_piece)
        self.partitioning.check_module(imported.module, self.params.options.sharding_dialect, self._what())
        # nested pmaps: import may have placed values by piece (plain data, kept with a cached lowering)
        may_place = not self.partitioning and len(self.devices) > self.params.axis_size
        return imported, placed_by_piece(imported.module) if may_place else None

    def layout(self, hints, pxla: ir.Module | None, consts: tuple) -> Layout:
        p = self.params
        out_avals = tuple(core.unmapped_aval(p.axis_size, a, av) if a is not None else av
                          for av, a in zip(self.jaxpr.out_avals, p.out_axes))
        boundary = Boundary(p.in_axes, self.global_avals, p.out_axes, out_avals, p.donation, consts, self.in_specs,
                            self.out_specs)
        levels = tuple(zip(nest_labels(p.axis_name, self.partitioning.levels),
                           (s for _, s in self.partitioning.levels)))
        return self.partitioning.layout(self.devices, p.axis_size, mesh_axis_label(p.axis_name), levels, boundary,
                                        hints, pxla)

    def jaxpr_text(self) -> str:
        return self.jaxpr.pretty_print()

    def _what(self) -> str:
        return f"{self.kind} {self.params.name!r}"


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
    what = f"{kind} {params.name!r}"
    parts = program_partitioning(jaxpr, params, kind)  # decided here, for the import and the layout
    if parts.nest:
        _check_partition_mode(params.options, parts, params.name, kind)
    nested = replicas_needed(jaxpr)
    devices = parts.devices(params.axis_size, params.devices, params.backend, what, nested=nested)
    devs = devices_for(params.axis_size * nested * parts.size, params.axis_size, devices, params.backend, what=what)
    inputs = PmapInputs(kind, jaxpr, params, tuple(global_avals), (None,) * len(consts) + tuple(in_specs or (None,) * n_in),
                        tuple(out_specs or (None,) * len(params.out_axes)), tuple(devs), parts, nested,
                        params.pieces == "on" and _blocks_within_processes(devs, params.axis_size))
    return lower_cached(inputs, consts=consts,
                        signature=signature or Signature.flat(len(global_avals) - len(consts), len(params.out_axes)))


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
