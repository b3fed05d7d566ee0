"""Import: a pmapped jaxpr to a module in "pxla form".

The module is the *per-device* program of a top-level pmap over
``axis_size * inner`` devices (``inner``: devices nested pmaps need):

* each mapped argument/result is a device's tile with a size-1 dimension at
  its in/out axis (so a device buffer is exactly one slice of the global
  array), a broadcast one is the whole value; ``pxla.tile_dims`` on @main
  and ``pxla.mesh`` on the module say so;
* jax's own lowering rules produce the body (collectives in manual SPMD
  form: partition ids, channels, global device ids); nested pmaps become
  ``@pxla.shard`` / ``@pxla.unshard`` placeholders (see :mod:`.mlir_rule`);
* with nested pmaps (not in ``pxla_mlir.jit``), pxla-place-pieces then moves the placeholders that
  meet an argument or a result of @main to the boundary: those values are
  placed by piece over the inner devices too (``pxla.mesh`` gets their axes,
  ``pxla.tile_dims`` says how each value is split; :func:`.layout.placed_by_piece`
  reads it back for the runtime).

The pxla-pmap-pipeline then legalizes it to MHLO and makes replica- or
partition-mode MHLO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.jaxbridge.stablehlo_lowering import LOWERING_LOCK, lower_per_device
from pxla_mlir.maps import pxla_form
from pxla_mlir.mlir.core import boundaries, ir_utils, pxla_attrs
from pxla_mlir.mlir.core.pxla_attrs import REP_AXIS
from pxla_mlir.mlir.pass_infra import Pipeline, run_pipeline
from pxla_mlir.pmaps.partition_layout import tile_dims as partition_tile_dims
from pxla_mlir.pmaps.partition_strategy import Partitioning
from pxla_mlir.pmaps.primitive import PmapParams, replicas_needed

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr


def mesh_axis_label(axis_name) -> str:
    """The pmap axis as a pxla.mesh name."""
    return pxla_form.mesh_label(axis_name, 0, reserved=(REP_AXIS,))


def nest_labels(axis_name, levels) -> list[str]:
    """The nested pmaps' axes ((name, size) pairs) of a partitioned nest as pxla.mesh names."""
    label = mesh_axis_label(axis_name)
    return [pxla_form.mesh_label(n, k + 1, reserved=(REP_AXIS, label)) for k, (n, _) in enumerate(levels)]


def import_pmap(jaxpr: ClosedJaxpr, params: PmapParams, *, platform: str, partitioning: Partitioning,
                kind: str = "pmap", specs: tuple = (None, None), by_piece: bool = True) -> pxla_form.Imported:
    """``partitioning``: the program's, as the lowering decided it
    (:func:`.nested_pmaps.program_partitioning`). A
    partitioned body is split over its automatic axes (:mod:`.partitions`);
    ``specs``, a PartitionSpec or None per flat argument and per result, lay
    the per-index values out over them. A nest (the body holds partitioned
    pmaps, :mod:`.nested_pmaps`) is manual over every pmap axis of the nest.
    ``by_piece``: nested pmaps' values may enter and leave @main by piece
    (pxla-place-pieces)."""
    axis_name, axis_size, name = params.axis_name, params.axis_size, params.name
    in_axes, out_axes = params.in_axes, params.out_axes
    in_specs, out_specs = specs
    inner = replicas_needed(jaxpr)
    names, sizes = (axis_name,), (axis_size,)
    parts = partitioning
    nest, levels = parts.nest, parts.levels
    # pxla_mlir.jit's axis (size 1) is no axis of the mesh its pmaps were traced under
    top = 0 if nest and kind == "jit" else 1
    if nest:
        names, sizes = names[:top] + tuple(n for n, _ in levels), sizes[:top] + tuple(s for _, s in levels)
    elif inner > 1:
        parts.refuse_nested_pmaps(name)
        names, sizes = names + (REP_AXIS,), sizes + (inner,)
    names, sizes = names + parts.names, sizes + parts.sizes
    parts.check_body(jaxpr, name)
    with core.extend_axis_env_nd([(axis_name, axis_size), *levels]):
        lowered = lower_per_device(jaxpr, names, sizes, platform=platform, name=pxla_form.module_name(kind, name),
                                   donated=params.donated, manual_axes=parts.manual_axes(names[:top + len(levels)]))
    parts.convert(lowered, name)
    result = pxla_form.imported(lowered)
    module = result.module
    label = mesh_axis_label(axis_name)
    level_labels = nest_labels(axis_name, levels)
    mesh = {**({label: axis_size} if top else {}), **({REP_AXIS: inner} if inner > 1 and not nest else {}),
            **dict(zip(level_labels, (s for _, s in levels))), **dict(parts.axes)}
    with module.context, module.operation.location:
        in_types, out_types = _tile_signature(pxla_form.main_function(module), in_axes, out_axes)

    def tile_dims(axes, types, specs):
        specs = specs or (None,) * len(axes)
        return [partition_tile_dims(spec, a, ir.RankedTensorType(t).rank, label)
                for a, t, spec in zip(axes, types, specs)]

    pxla_form.annotate(module, mesh, pxla_attrs.TILE_DIMS, tile_dims(in_axes, in_types, in_specs),
                       tile_dims(out_axes, out_types, out_specs))
    parts.mark_manual(module, [label][:top] + level_labels)
    # nested pmaps' values in and out of @main by piece (not jit's: 2022's jit of pmaps keeps its arguments and
    # results whole; nor a partitioned nest's, whose pmaps slice and gather); the layout is read from the result
    if inner > 1 and kind == "pmap" and by_piece and not nest:
        with LOWERING_LOCK:  # the module lives in the shared lowering context
            run_pipeline(module, Pipeline.cached(PLACE_PIECES, module.context), reproducer=False, verify_each=False)
    return result


PLACE_PIECES = "builtin.module(pxla-place-pieces)"


def _with_unit(t: ir.RankedTensorType, axis: int) -> ir.RankedTensorType:
    shape = list(t.shape)
    shape.insert(axis, 1)
    return ir.RankedTensorType.get(shape, t.element_type)


def _tile_signature(main, in_axes, out_axes) -> tuple[list, list]:
    """The body was lowered per shard; give @main the per-device tile types
    (a size-1 dimension at each mapped axis) and reshape at the boundary."""
    block = main.regions[0].blocks[0]
    first = block.operations[0]
    for arg, axis in zip(block.arguments, in_axes):
        if axis is None:
            continue
        shard_t = ir.RankedTensorType(arg.type)
        arg.set_type(_with_unit(shard_t, axis))
        with ir.InsertionPoint(first):
            squeezed = stablehlo.ReshapeOp(shard_t, arg)
        arg.replace_all_uses_except(squeezed.result, squeezed.operation)
    ret = block.operations[len(block.operations) - 1]
    for index, axis in enumerate(out_axes):
        if axis is None:
            continue
        value = ret.operands[index]
        with ir.InsertionPoint(ret):
            ret.operands[index] = stablehlo.ReshapeOp(_with_unit(ir.RankedTensorType(value.type), axis), value).result
    in_types = [a.type for a in block.arguments]
    out_types = [v.type for v in ret.operands]
    main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(in_types, out_types))
    _drop_mismatched_aliases(main, in_types, out_types)
    return in_types, out_types


def _drop_mismatched_aliases(main, in_types, out_types) -> None:
    """jax aliased donated inputs to outputs of equal per-shard shape; the
    tiles may differ (other mapped axis): those inputs are then only donors."""
    if "arg_attrs" not in main.attributes:
        return
    dicts = pxla_attrs.boundary_attrs(main, "arg_attrs")
    if boundaries.donate_mismatched_aliases(dicts, boundaries.types_differ(in_types, out_types)):
        ir_utils.set_boundary_attrs(main, "arg_attrs", dicts)
