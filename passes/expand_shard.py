"""pxla-expand-shard: a nested pmap's shard placeholder to this device's slice.

Inside a pmapped function, a nested pmap maps an input along one of its
dimensions. Import marks that with a placeholder carrying the axis and where
the pmap axis sits in the module's devices (a device's index along the axis is
``(device_id / stride) % axis_size``)::

    %s = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 1 : i64, pxla.axis_name = "j",
        pxla.axis_size = 4 : i64, pxla.stride = 2 : i64} : (tensor<3x4x5xf32>) -> tensor<3x5xf32>

The result is the operand without dimension ``pxla.axis``. Before: the
placeholder above. After (the 2022 form: a size-1 dynamic slice at the
device's index, then a reshape dropping the dimension)::

    %pid = mhlo.partition_id : tensor<ui32>
    %q = mhlo.divide %pid, %c2 : tensor<ui32>
    %r = mhlo.remainder %q, %c4 : tensor<ui32>
    %i = mhlo.convert %r : (tensor<ui32>) -> tensor<i32>
    %d = "mhlo.dynamic_slice"(%x, %c0, %i, %c0) <{slice_sizes = dense<[3, 1, 5]> : tensor<3xi64>}>
    %s = mhlo.reshape %d : (tensor<3x1x5xf32>) -> tensor<3x5xf32>

Device ids are partition ids here; pxla-convert-to-replica-mode turns them
into replica ids for replica mode.

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-expand-shard,canonicalize)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import mhlo

from pxla_mlir.mlir.core import ir_utils, mhlo_build
from pxla_mlir.mlir.core.pxla_attrs import CUSTOM_CALLS, SHARD, Placeholder, placeholders
from pxla_mlir.mlir.pass_infra import ModulePass
from pxla_mlir.mlir.pass_infra.statistics import Statistic


@dataclasses.dataclass(frozen=True)
class ExpandShardPass(ModulePass):
    argument = "pxla-expand-shard"
    acts_on = CUSTOM_CALLS  # the placeholders
    summary = "Expand pxla.shard into this device's slice: dynamic_slice at (device_id / stride) % size, reshape"

    expanded = Statistic("shards-expanded", "pxla.shard placeholders expanded into this device's slice")

    def run(self, module):
        for p in placeholders(module, SHARD):
            expected = p.operand_shape[:p.axis] + p.operand_shape[p.axis + 1:]
            p.check(p.operand_shape[p.axis] == p.axis_size,
                    f"dimension {p.axis} of the operand has size {p.operand_shape[p.axis]}, but pxla.axis_size is "
                    f"{p.axis_size}")
            p.check(p.result_shape == expected,
                    f"the result must be the operand without dimension {p.axis}: shape {expected}, got "
                    f"{p.result_shape}")
            with ir.InsertionPoint(p.op), p.op.location:
                new = _slice(p)
            ir_utils.replace_op(p.op, [new])
            self.expanded.add()


def _slice(p: Placeholder) -> ir.Value:
    x = p.op.operands[0]
    idx = mhlo_build.device_index(p.stride, p.axis_size)
    rank = len(p.operand_shape)
    starts = [idx]  # rank 1: the axis is the only dimension
    if rank > 1:
        zero = mhlo_build.scalar(0, "int32")
        starts = [idx if d == p.axis else zero for d in range(rank)]
    sizes = [1 if d == p.axis else s for d, s in enumerate(p.operand_shape)]
    piece = mhlo.DynamicSliceOp(x, starts, sizes).result
    return mhlo.ReshapeOp(p.op.results[0].type, piece).result
