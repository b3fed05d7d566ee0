"""Import: a pmapped jaxpr to MHLO in "pxla form".

The module is the *per-device* program of a top-level pmap over
``axis_size * inner`` devices (``inner``: devices nested pmaps need):

* each mapped argument/result is a device's tile with a size-1 dimension at
  its in/out axis (so a device buffer is exactly one slice of the global
  array), a broadcast one is the whole value; ``pxla.tile_dims`` on @main
  and ``pxla.mesh`` on the module say so;
* jax's own lowering rules produce the body (collectives in manual SPMD
  form: partition ids, channels, global device ids), nested pmaps become
  ``@pxla.shard`` / ``@pxla.unshard`` placeholders;
* StableHLO and CHLO are legalized to MHLO.

The pxla-pmap-pipeline then turns it into replica- or partition-mode MHLO.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import mhlo

from .. import ir_utils
from ..jax_internals import core, lower_per_device
from ..pass_infra import Pipeline, run_pipeline
from ..pipelines import LEGALIZE_TO_MHLO
from .primitive import REP_AXIS, replicas_needed

@dataclasses.dataclass
class Imported:
    module: ir.Module  # pxla form, in the MLIR context jax lowered it in
    mesh_names: tuple  # jax axis names of the module's devices (the pmap axis, then REP_AXIS)
    mesh_sizes: tuple
    keepalive: Any
    host_callbacks: Sequence

    @property
    def num_devices(self) -> int:
        n = 1
        for s in self.mesh_sizes:
            n *= s
        return n


def mesh_axis_label(axis_name, index: int = 0) -> str:
    """The pmap axis as a pxla.mesh name (identifiers only)."""
    if isinstance(axis_name, str) and re.fullmatch(r"[A-Za-z_]\w*", axis_name) and axis_name != REP_AXIS:
        return axis_name
    return f"axis{index}"


def import_pmap(jaxpr: core.ClosedJaxpr, *, axis_name, axis_size: int, in_axes, out_axes, name: str,
                global_avals, donated, platform: str, kind: str = "pmap") -> Imported:
    inner = replicas_needed(jaxpr)
    names, sizes = (axis_name,), (axis_size,)
    if inner > 1:
        names, sizes = names + (REP_AXIS,), sizes + (inner,)
    module_name = f"{kind}_" + re.sub(r"\W", "_", name)
    with core.extend_axis_env_nd([(axis_name, axis_size)]):
        lowered = lower_per_device(jaxpr, names, sizes, platform=platform, name=module_name, donated=donated)
    module = lowered.module  # worked on in place: no print/parse round trip
    label = mesh_axis_label(axis_name)
    mesh_text = ",".join([f"{label}={axis_size}"] + ([f"{REP_AXIS}={inner}"] if inner > 1 else []))
    run_pipeline(module, Pipeline.cached(f"builtin.module({LEGALIZE_TO_MHLO})"), reproducer=False, verify_each=False)
    with module.context, module.operation.location:
        main = next(f for f in ir_utils.functions(module.operation) if ir_utils.str_attr(f, "sym_name") == "main")
        _tile_signature(main, in_axes, out_axes)
        _annotate(module, main, mesh_text, label, in_axes, out_axes)
    return Imported(module, names, sizes, lowered.keepalive, lowered.host_callbacks)


def _with_unit(t: ir.RankedTensorType, axis: int) -> ir.RankedTensorType:
    shape = list(t.shape)
    shape.insert(axis, 1)
    return ir.RankedTensorType.get(shape, t.element_type)


def _tile_signature(main, in_axes, out_axes) -> None:
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
            squeezed = mhlo.ReshapeOp(shard_t, arg)
        arg.replace_all_uses_except(squeezed.result, squeezed.operation)
    ret = block.operations[len(block.operations) - 1]
    for index, axis in enumerate(out_axes):
        if axis is None:
            continue
        value = ret.operands[index]
        with ir.InsertionPoint(ret):
            ret.operands[index] = mhlo.ReshapeOp(_with_unit(ir.RankedTensorType(value.type), axis), value).result
    in_types = [a.type for a in block.arguments]
    out_types = [v.type for v in ret.operands]
    main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(in_types, out_types))
    _drop_mismatched_aliases(main, in_types, out_types)


def _drop_mismatched_aliases(main, in_types, out_types) -> None:
    """jax aliased donated inputs to outputs of equal per-shard shape; the
    tiles may differ (other mapped axis): those inputs are then only donors."""
    if "arg_attrs" not in main.attributes:
        return
    new = []
    for d, t in zip(ir.ArrayAttr(main.attributes["arg_attrs"]), in_types):
        entries = {x.name: x.attr for x in ir.DictAttr(d)}
        alias = entries.get("tf.aliasing_output")
        if alias is not None and out_types[ir.IntegerAttr(alias).value] != t:
            del entries["tf.aliasing_output"]
            entries["jax.buffer_donor"] = ir.BoolAttr.get(True)
        new.append(ir.DictAttr.get(entries))
    main.attributes["arg_attrs"] = ir.ArrayAttr.get(new)


def _annotate(module: ir.Module, main, mesh_text: str, label: str, in_axes, out_axes) -> None:
    module.operation.attributes["pxla.mesh"] = ir.StringAttr.get(mesh_text)
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    for key, axes, types in (("arg_attrs", in_axes, ftype.inputs), ("res_attrs", out_axes, ftype.results)):
        old = list(ir.ArrayAttr(main.attributes[key])) if key in main.attributes else [ir.DictAttr.get({})] * len(types)
        new = []
        for d, a, t in zip(old, axes, types):
            entries = {x.name: x.attr for x in ir.DictAttr(d)}
            rank = ir.RankedTensorType(t).rank
            dims = [ir.ArrayAttr.get([ir.StringAttr.get(label)] if i == a else []) for i in range(rank)]
            entries["pxla.tile_dims"] = ir.ArrayAttr.get(dims)
            new.append(ir.DictAttr.get(entries))
        main.attributes[key] = ir.ArrayAttr.get(new)
