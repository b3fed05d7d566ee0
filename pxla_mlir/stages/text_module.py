"""Modules from text: a module in a file (or a string) as a ``Lowered`` that
compiles and runs on the devices, taking global inputs and giving global
outputs, as the map it came from did.

    lowered = pxla_mlir.load("step.mlir")       # or the text itself
    compiled = lowered.compile()
    outs = compiled(x, w)                        # a list, one jax.Array per result of @main

:mod:`pxla_mlir.mlir.xla_handoff` reads the module, runs what it needs (its map
pipeline, legalization, a device axis) and checks it before XLA sees it;
this module adds the devices and where each global value lies on them:

* partition mode: ``@main`` has global types; XLA lays the values out as the
  module's ``sdy.sharding`` / ``mhlo.sharding`` say (or as its propagation
  decides where they say nothing), read back from the executable when it is
  compiled, as jax does (``Lowered.in_shardings`` is None until then;
  ``Compiled.input_shardings`` has them);
* replica mode: ``pxla.tile_dims`` on ``@main`` (every replica-mode module
  pxla_mlir emits has it) says which piece of the global value each
  replica's argument or result is, over ``pxla.mesh``;
* a replica-mode module that records nothing is one device's program: its
  inputs and outputs are the per-device values stacked on a new leading
  device axis, in replica order, and :attr:`LoadedModule.layout_note` says so;
* one device: the values as they are.

After compiling, every argument's and result's per-device shape is compared
with the executable's before the first launch (jaxlib crashes on a buffer
of another size).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxlib.mlir import ir

import pxla_mlir.distributed as distributed
from pxla_mlir.jaxbridge.jax_internals import JaxRuntimeError, core, gspmd_sharding, xc
from pxla_mlir.jaxbridge.tracebacks import api_boundary
from pxla_mlir.mlir.core import pxla_attrs
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.core.diagnostics import PassError
from pxla_mlir.mlir.core.pxla_attrs import TILE_DIMS
from pxla_mlir.mlir.sharding import hlo_sharding
from pxla_mlir.mlir.sharding.devices import backend_error, too_few_devices
from pxla_mlir.mlir.support.stats import timed
from pxla_mlir.mlir.xla_handoff import ELEMENT_TYPES, ModuleError, check, parse, prepare, read, records_layout
from pxla_mlir.runtime.executable import ShardedExecutable
from pxla_mlir.stages.aot import Lowered
from pxla_mlir.stages.devices import check_devices
from pxla_mlir.stages.final_module import FinalModule, compile_lowering
from pxla_mlir.stages.lowering import Layout
from pxla_mlir.stages.signature import Signature

if TYPE_CHECKING:
    from jax.core import ShapedArray

__all__ = ["load", "LoadedModule", "ModuleError"]

_DONATION = (pxla_attrs.ALIASING_OUTPUT, pxla_attrs.BUFFER_DONOR)


@api_boundary
def load(source, *, pipeline: str | None = None, devices: Sequence | None = None,
         name: str | None = None) -> LoadedModule:
    """A module (a path, or the text itself as str or bytes) as a ``Lowered`` ready to compile.

    ``pipeline`` runs first instead of the one the module needs (a pxla-form
    module's map pipeline); legalization and the device axis of a module
    that records no layout still follow where needed. ``devices``: where it
    runs (default: the first ``num_replicas * num_partitions`` devices; in a
    multi-process run, the same number from every process). ``name``
    names the module in messages (default: its path, or ``<module>``).
    """
    data, read_as = read(source)
    name = name or read_as
    try:
        return _load(data, name, pipeline, devices)
    except (AssertionError, RuntimeError) as e:
        clear = backend_error(e, f"pxla_mlir.load({name})")
        if clear is None:
            raise
        raise clear from None


def _load(data, name: str, pipeline: str | None, devices: Sequence | None) -> LoadedModule:
    ctx = make_context()
    module = parse(data, name, ctx)
    try:
        with ctx:
            with timed("passes"):
                ran, stacked = prepare(module, name, pipeline)
            main = check(module, name)
            devs = _devices(module, name, devices)
            layout, note = _layout(module, main, devs, name, stacked)
    except PassError as e:  # a checked attribute reader's complaint
        raise ModuleError(f"{name}: {e.message}") from None
    n_in, n_out = len(layout.in_avals), len(layout.out_avals)
    lowering = TextLowering(module, parse(data, name, make_context()).operation, pipeline=ran, layout=layout,
                            source=name)
    return LoadedModule(lowering, Signature.flat(n_in, n_out), layout_note=note)


class LoadedModule(Lowered):
    """The ``Lowered`` of a module from text (see :func:`load`).

    ``pxla_text()`` is the module as read, ``as_text()`` the module XLA
    gets, ``pipeline`` what ran in between; ``source`` names it in messages;
    ``layout_note`` says how its global inputs and outputs lie on the
    devices. Its ``Compiled`` takes one array per argument of ``@main`` and
    returns a list, one per result.
    """

    def __init__(self, lowering: TextLowering, signature: Signature, *, layout_note: str):
        super().__init__(lowering, signature)
        self.source = lowering.source
        self.layout_note = layout_note


class TextLowering(FinalModule):
    """The lowering of a module from text (a :class:`~pxla_mlir.stages.lowering.Lowering`):
    the module XLA gets, the module as read, the pipeline that ran between
    them; no keepalive, host callbacks, jaxpr or plan. XLA says how its
    inputs and outputs are laid out."""

    keepalive = None
    host_callbacks = ()
    jaxpr_text = None
    plan = None

    def __init__(self, module: ir.Module, pxla: ir.Operation, *, pipeline: str, layout: Layout, source: str):
        self.module, self.pxla = module, pxla
        self.pipeline = pipeline
        self.layout = layout
        self.source = source

    def compile(self, compiler_options: dict | None = None) -> ShardedExecutable:
        try:
            return compile_lowering(self, compiler_options, self.executable_shardings)
        except JaxRuntimeError as e:
            raise ModuleError(f"{self.source}: XLA rejected the module: {_first_line(e)}") from None

    def executable_shardings(self, xla) -> tuple[list, list]:
        """XLA's layout of the inputs and outputs (partition mode; the
        layout's in replica mode), checked against the executable's
        per-device shapes so no launch can hand it buffers of another size."""
        ins, outs = self.layout.in_shardings, self.layout.out_shardings
        params, results = xla.get_parameter_shardings(), xla.get_output_shardings()
        if params is not None:
            ins = [self._sharding(op, av, f"argument {i}") for i, (op, av) in enumerate(zip(params, self.in_avals))]
        if results is not None:
            outs = [self._sharding(op, av, f"result {i}") for i, (op, av) in enumerate(zip(results, self.out_avals))]
        if None in ins or None in outs:
            raise ModuleError(f"{self.source}: XLA did not say how the module's arguments and results are laid out")
        shape = xc.XlaComputation(xla.hlo_modules()[0].as_serialized_hlo_module_proto()).program_shape()
        result_shape = shape.result_shape()
        returned = result_shape.tuple_shapes() if result_shape.is_tuple() else [result_shape]
        for what, avals, shardings, compiled in (("argument", self.in_avals, ins, shape.parameter_shapes()),
                                                 ("result", self.out_avals, outs, returned)):
            for i, (aval, sharding, want) in enumerate(zip(avals, shardings, compiled)):
                assert sharding is not None  # refused above
                piece = tuple(sharding.shard_shape(aval.shape))
                if piece != tuple(want.dimensions()) or np.dtype(want.numpy_dtype()) != aval.dtype:
                    raise ModuleError(f"{self.source}: {what} {i} ({aval.str_short()}) would reach each device as "
                                      f"{aval.dtype.name}{list(piece)}, but the executable takes "
                                      f"{np.dtype(want.numpy_dtype()).name}{list(want.dimensions())}; the module's "
                                      f"layout record does not match its types")
        return list(ins), list(outs)

    def _sharding(self, op_sharding, aval, what: str):
        text = str(xc.HloSharding.from_proto(op_sharding))
        try:
            sharding = hlo_sharding.parse(text)
        except ValueError:
            sharding = None
        if sharding is None or sharding.kind not in ("replicated", "tiled") or \
                any(kind != "replicated" for kind, _ in sharding.subgroups):
            raise ModuleError(f"{self.source}: XLA lays out {what} as {text}, which cannot be placed from host values; "
                              f"give it a tiled or replicated sharding")
        if sharding.kind == "tiled":
            uneven = [d for d, (size, parts) in enumerate(zip(aval.shape, sharding.tile_dims)) if size % parts]
            if uneven:
                d = uneven[0]
                raise ModuleError(f"{self.source}: {what} ({aval.str_short()}) is split {sharding.tile_dims[d]} ways "
                                  f"along dimension {d} ({text}); each dimension must divide evenly into its pieces")
        return gspmd_sharding(self.devices, op_sharding)


def _devices(module: ir.Module, name: str, devices: Sequence | None) -> list:
    replicas, partitions = pxla_attrs.device_counts(module.operation)
    n = replicas * partitions
    counts = f"num_replicas = {replicas}, num_partitions = {partitions}"
    if devices is not None:
        devices = list(check_devices(devices, "pxla_mlir.load"))
        if len(devices) != n:
            raise ModuleError(f"{name}: the module needs {n} devices ({counts}), {len(devices)} were given")
        return distributed.check_devices(devices, name)
    if distributed.is_multi_process():
        return distributed.default_devices(n, None, name)
    available = jax.local_devices()
    if n > len(available):
        platform = available[0].platform
        raise ModuleError(f"{name}: the module needs {n} devices ({counts}), but only {len(available)} "
                          f"{platform.upper()} devices exist{too_few_devices(n, available)}")
    return available[:n]


# -- the layout of @main's global values -----------------------------------------------------

def _layout(module: ir.Module, main: ir.Operation, devices: list, name: str, stacked: bool) -> tuple[Layout, str]:
    op = module.operation
    replicas, partitions = pxla_attrs.device_counts(op)
    ftype = pxla_attrs.function_type(main)
    args = pxla_attrs.boundary_attrs(main, "arg_attrs")
    results = pxla_attrs.boundary_attrs(main, "res_attrs")
    donated = [any(k in e for k in _DONATION) for e in args]
    if partitions > 1:  # global types; XLA says where the pieces go (TextLowering.executable_shardings)
        in_avals, out_avals = [_aval(t) for t in ftype.inputs], [_aval(t) for t in ftype.results]
        return Layout(devices, in_avals, out_avals, [None] * len(in_avals), [None] * len(out_avals), donated), \
            f"global values, laid out by the module's shardings on {partitions} partitions"
    if not records_layout(main):  # one device: its values are the global ones
        replicated = NamedSharding(Mesh(np.array(devices, dtype=object), ("devices",)), PartitionSpec())
        in_avals, out_avals = [_aval(t) for t in ftype.inputs], [_aval(t) for t in ftype.results]
        return Layout(devices, in_avals, out_avals, [replicated] * len(in_avals), [replicated] * len(out_avals),
                      donated), "global values on one device"
    amesh = pxla_attrs.mesh_of(main, op)
    if amesh.size != replicas:
        raise ModuleError(f"{name}: pxla.mesh \"{pxla_attrs.format_mesh(amesh.shape)}\" has {amesh.size} devices but "
                          f"the module runs as {replicas} replicas")
    mesh = Mesh(np.array(devices, dtype=object).reshape(amesh.axis_sizes), amesh.axis_names)
    ins = [_tile(mesh, amesh, t, e, f"argument {i}", name) for i, (t, e) in enumerate(zip(ftype.inputs, args))]
    outs = [_tile(mesh, amesh, t, e, f"result {i}", name) for i, (t, e) in enumerate(zip(ftype.results, results))]
    note = "global values, laid out by pxla.tile_dims"
    if stacked:
        note = (f"the module records no layout: its inputs and outputs are the {replicas} devices' values stacked on "
                f"a leading device axis (replica order)")
    return Layout(devices, [a for a, _ in ins], [a for a, _ in outs], [s for _, s in ins], [s for _, s in outs],
                  donated), note


def _tile(mesh: Mesh, amesh, t: ir.Type, entries: dict, what: str, name: str):
    """The global aval and sharding of a replica's tile declared by ``pxla.tile_dims``."""
    aval = _aval(t)
    if TILE_DIMS not in entries:
        if entries.get("mhlo.is_same_data_across_replicas") is None:
            raise ModuleError(f"{name}: @main's {what} has no pxla.tile_dims while others have; say how each "
                              f"replica's value is part of the global one (e.g. pxla.tile_dims = [[\"i\"], []])")
        return aval, NamedSharding(mesh, PartitionSpec())
    dims = pxla_attrs.parse_dims(entries[TILE_DIMS], aval.ndim, amesh, None, f"@main's {what}", TILE_DIMS)
    shape = tuple(s * int(np.prod([amesh.shape[a] for a in axes], dtype=np.int64))
                  for s, axes in zip(aval.shape, dims.dims))
    spec = PartitionSpec(*[tuple(axes) if len(axes) > 1 else (axes[0] if axes else None) for axes in dims.dims])
    return core.ShapedArray(shape, aval.dtype), NamedSharding(mesh, spec)


def _aval(t: ir.Type) -> ShapedArray:
    rt = ir.RankedTensorType(t)
    return core.ShapedArray(tuple(rt.shape), np.dtype(jax.numpy.dtype(ELEMENT_TYPES[str(rt.element_type)])))


def _first_line(e: Exception) -> str:
    lines = [line for line in str(e).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__
