"""pxla-expand-manual-sharding: full_to_shard / shard_to_full placeholders to XLA's SPMD custom calls.

A manual region computes on per-device tiles of global values. Import marks
its boundary with two placeholders. Before::

    %tile = mhlo.custom_call @pxla.full_to_shard(%full) {
        pxla.dims = [["x"], [], "?"],        // mesh axes splitting each dim; "?" unspecified
        pxla.manual_axes = ["x", "y"]}       // optional: default all mesh axes
        : (tensor<8x4x3xf32>) -> tensor<4x4x3xf32>
    %full2 = mhlo.custom_call @pxla.shard_to_full(%tile) {pxla.dims = ..., pxla.manual_axes = ...}
        : (tensor<4x4x3xf32>) -> tensor<8x4x3xf32>

The mesh comes from ``pxla.mesh = "x=2,y=4"`` on the op or the module. The
tile is the full shape divided by the manual axes in ``pxla.dims``; an
automatic axis there (after the manual ones of its dimension) splits the full
value and the tile's sharding, not the tile's shape. After, each placeholder
is a pair of custom calls::

    %0 = mhlo.custom_call @Sharding(%full) {mhlo.sharding = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"}
    %tile = mhlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{manual}"}
    ...
    %1 = mhlo.custom_call @Sharding(%tile) {mhlo.sharding = "{manual}"}
    %full2 = mhlo.custom_call @SPMDShardToFullShape(%1) {mhlo.sharding = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"}

Unspecified dimensions go into ``backend_config = "unspecified_dims=[2]"`` on
both calls, as jax writes it. Mesh axes that are not manual and split nothing
stay replicated in the tile's sharding (``last_tile_dims={manual, replicated}``);
with ``pxla.dims = [["x"], ["y"]]`` and ``pxla.manual_axes = ["x"]`` the tile
is split by ``y`` (``{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual}}``).

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-expand-manual-sharding)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import mhlo

from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.core.pxla_attrs import (
    CUSTOM_CALLS,
    FULL_TO_SHARD,
    SHARD_TO_FULL,
    manual_boundary,
    placeholder_target,
)
from pxla_mlir.mlir.pass_infra import ModulePass, PassError
from pxla_mlir.mlir.sharding import hlo_sharding
from pxla_mlir.mlir.sharding.mesh import MeshError


@dataclasses.dataclass(frozen=True)
class ExpandManualShardingPass(ModulePass):
    argument = "pxla-expand-manual-sharding"
    acts_on = CUSTOM_CALLS  # the placeholders
    summary = "Expand pxla.full_to_shard/shard_to_full into @Sharding + @SPMDFullToShardShape/@SPMDShardToFullShape"

    def run(self, module):
        for op in ir_utils.walk(module):
            target = placeholder_target(op)
            if target in (FULL_TO_SHARD, SHARD_TO_FULL):
                self._expand(op, module, to_shard=target == FULL_TO_SHARD)

    def _expand(self, op, module, *, to_shard: bool) -> None:
        b = manual_boundary(op, module)
        try:
            full_sharding = hlo_sharding.of_mapping(b.mesh, b.full_type.rank, b.spec.mapping)
            # Automatic axes splitting the full value split the tile too (a partially manual region).
            free = {a: d for a, d in b.spec.mapping.items() if a not in b.manual}
            manual_sharding = (hlo_sharding.of_mapping(b.mesh, b.full_type.rank, free, b.manual) if free
                               else hlo_sharding.manual_tile(b.mesh, b.full_type.rank, b.manual))
        except MeshError as e:
            raise PassError(op, str(e)) from None
        config = b.spec.backend_config()
        with ir.InsertionPoint(op), op.location:
            if to_shard:
                first = _call("Sharding", op.operands[0], b.full_type, full_sharding, config)
                result = _call("SPMDFullToShardShape", first, b.tile_type, manual_sharding, config)
            else:
                first = _call("Sharding", op.operands[0], b.tile_type, manual_sharding, config)
                result = _call("SPMDShardToFullShape", first, b.full_type, full_sharding, config)
        ir_utils.replace_op(op, [result])


def _call(target: str, operand: ir.Value, result_type: ir.Type, sharding, backend_config: str | None) -> ir.Value:
    op = mhlo.CustomCallOp([result_type], [operand], target,
                           backend_config=ir.StringAttr.get(backend_config) if backend_config else None)
    op.attributes["mhlo.sharding"] = ir.StringAttr.get(str(sharding))
    return op.result
