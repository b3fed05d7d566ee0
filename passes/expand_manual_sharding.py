"""pxla-expand-manual-sharding: full_to_shard / shard_to_full placeholders to XLA's SPMD custom calls.

A manual region computes on per-device tiles of global values. Import marks
its boundary with two placeholders. Before::

    %tile = mhlo.custom_call @pxla.full_to_shard(%full) {
        pxla.dims = [["x"], [], "?"],        // mesh axes splitting each dim; "?" unspecified
        pxla.manual_axes = ["x", "y"]}       // optional: default all mesh axes
        : (tensor<8x4x3xf32>) -> tensor<4x4x3xf32>
    %full2 = mhlo.custom_call @pxla.shard_to_full(%tile) {pxla.dims = ..., pxla.manual_axes = ...}
        : (tensor<4x4x3xf32>) -> tensor<8x4x3xf32>

The mesh comes from ``pxla.mesh = "x=2,y=4"`` on the op or the module. Every
mesh axis in ``pxla.dims`` must be manual; the tile is the full shape divided
by those axes. After, each placeholder is a pair of custom calls::

    %0 = mhlo.custom_call @Sharding(%full) {mhlo.sharding = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"}
    %tile = mhlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{manual}"}
    ...
    %1 = mhlo.custom_call @Sharding(%tile) {mhlo.sharding = "{manual}"}
    %full2 = mhlo.custom_call @SPMDShardToFullShape(%1) {mhlo.sharding = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"}

Unspecified dimensions go into ``backend_config = "unspecified_dims=[2]"`` on
both calls, as jax writes it. Mesh axes that are not manual stay replicated in
the tile's sharding (``last_tile_dims={manual, replicated}``).

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-expand-manual-sharding)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import mhlo

from pxla_mlir.ir import ir_utils, pxla_attrs
from pxla_mlir.ir.pxla_attrs import (DIMS, FULL_TO_SHARD, MANUAL_AXES, SHARD_TO_FULL, mesh_of, parse_dims,
                                     placeholder_target, string_list)
from pxla_mlir.pass_infra import ModulePass, PassError
from pxla_mlir.sharding.mesh import MeshError

@dataclasses.dataclass(frozen=True)
class ExpandManualShardingPass(ModulePass):
    argument = "pxla-expand-manual-sharding"
    summary = "Expand pxla.full_to_shard/shard_to_full into @Sharding + @SPMDFullToShardShape/@SPMDShardToFullShape"

    def run(self, module):
        for op in ir_utils.walk(module):
            target = placeholder_target(op)
            if target in (FULL_TO_SHARD, SHARD_TO_FULL):
                self._expand(op, module, to_shard=target == FULL_TO_SHARD)

    def _expand(self, op, module, *, to_shard: bool) -> None:
        if len(op.operands) != 1 or len(op.results) != 1:
            raise PassError(op, f"{pxla_attrs.custom_call_target(op)} takes one operand and has one result")
        full_t, tile_t = (op.operands[0].type, op.results[0].type) if to_shard else \
            (op.results[0].type, op.operands[0].type)
        full_t, tile_t = _ranked(full_t, op), _ranked(tile_t, op)
        mesh = mesh_of(op, module)
        if DIMS not in op.attributes:
            raise PassError(op, f"missing {DIMS} (mesh axes per dimension, e.g. [[\"x\"], []])")
        spec = parse_dims(op.attributes[DIMS], full_t.rank, mesh, op, "full value")
        manual = (string_list(op.attributes[MANUAL_AXES], MANUAL_AXES, op)
                  if MANUAL_AXES in op.attributes else list(mesh.axis_names))
        try:
            full_sharding = mesh.hlo_sharding(full_t.rank, spec.mapping)
            manual_sharding = mesh.manual_sharding(full_t.rank, manual)
            tile_shape = mesh.tile_shape(full_t.shape, spec.mapping, "full value")
        except MeshError as e:
            raise PassError(op, str(e)) from None
        not_manual = [a for a in spec.mapping if a not in manual]
        if not_manual:
            raise PassError(op, f"mesh axis {not_manual[0]!r} splits dimension {spec.mapping[not_manual[0]]} but "
                                f"is not manual; add it to pxla.manual_axes or drop it from pxla.dims")
        if list(tile_shape) != list(tile_t.shape) or full_t.element_type != tile_t.element_type:
            expected = ir.RankedTensorType.get(list(tile_shape), full_t.element_type)
            raise PassError(op, f"the tile type must be {expected} (the full {full_t} split by "
                                f"{spec.mapping}), got {tile_t}")
        config = spec.backend_config()
        with ir.InsertionPoint(op), op.location:
            if to_shard:
                first = _call("Sharding", op.operands[0], full_t, full_sharding, config)
                result = _call("SPMDFullToShardShape", first, tile_t, manual_sharding, config)
            else:
                first = _call("Sharding", op.operands[0], tile_t, manual_sharding, config)
                result = _call("SPMDShardToFullShape", first, full_t, full_sharding, config)
        ir_utils.replace_op(op, [result])


def _ranked(t: ir.Type, op) -> ir.RankedTensorType:
    if not isinstance(t, ir.RankedTensorType):
        raise PassError(op, f"expected a ranked tensor, got {t}")
    return ir.RankedTensorType(t)


def _call(target: str, operand: ir.Value, result_type: ir.Type, sharding, backend_config: str | None) -> ir.Value:
    op = mhlo.CustomCallOp([result_type], [operand], target,
                           backend_config=ir.StringAttr.get(backend_config) if backend_config else None)
    op.attributes["mhlo.sharding"] = ir.StringAttr.get(str(sharding))
    return op.result
