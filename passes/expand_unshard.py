"""pxla-expand-unshard: a nested pmap's unshard placeholder to a collective.

A nested pmap's mapped output is every device's value stacked along
``pxla.axis`` (its out_axis) over the devices of the pmap axis. Before::

    %y = mhlo.custom_call @pxla.unshard(%v) {pxla.axis = 1 : i64, pxla.axis_name = "j",
        pxla.axis_size = 4 : i64, pxla.stride = 2 : i64} : (tensor<3x5xf32>) -> tensor<3x4x5xf32>

Two strategies (option ``strategy``), both correct for every out_axis:

* ``all-gather`` (default): reshape to a size-1 dimension at the out_axis and
  all_gather along it over the axis' device groups. After this strategy::

      %u = mhlo.reshape %v : (tensor<3x5xf32>) -> tensor<3x1x5xf32>
      %y = "mhlo.all_gather"(%u) <{all_gather_dim = 1 : i64, channel_handle = ...,
             replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>, use_global_device_ids}>

* ``all-reduce`` (the 2022 form): zeros of the result shape, the value
  written at the device's index with dynamic_update_slice, then an
  all_reduce sum (``or`` for booleans) over the groups. It moves axis_size
  times more data; it is kept so the two can be compared. The slot is
  written directly at the out_axis, so no transpose is involved (the 2022
  transpose for out_axis != 0 was wrong: jax issue #5756).

Collectives are emitted in partition form (flattened ids, a fresh channel);
pxla-convert-to-replica-mode turns them into replica collectives.

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-expand-unshard{strategy=all-reduce})'
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import mhlo

from pxla_mlir.ir import ir_utils, mhlo_build
from pxla_mlir.ir.pxla_attrs import UNSHARD, Placeholder, placeholders
from pxla_mlir.pass_infra import ModulePass, option


@dataclasses.dataclass(frozen=True)
class ExpandUnshardPass(ModulePass):
    argument = "pxla-expand-unshard"
    summary = "Expand pxla.unshard into an all_gather (default) or the 2022 pad + dynamic_update_slice + all_reduce"

    strategy: Literal["all-gather", "all-reduce"] = option("all-gather", "how per-device values are collected")

    def run(self, module):
        todo = placeholders(module, UNSHARD)
        if not todo:
            return
        handle = mhlo_build.next_channel_handle(module, len(todo))
        for p in todo:
            expected = p.operand_shape[:p.axis] + [p.axis_size] + p.operand_shape[p.axis:]
            p.check(p.result_shape == expected,
                    f"the result must be the operand with dimension {p.axis} of size {p.axis_size} inserted: "
                    f"shape {expected}, got {p.result_shape}")
            with ir.InsertionPoint(p.op), p.op.location:
                build = _all_gather if self.strategy == "all-gather" else _all_reduce
                new = build(p, handle)
            handle += 1
            ir_utils.replace_op(p.op, [new])


def _all_gather(p: Placeholder, handle: int) -> ir.Value:
    unit = mhlo_build.with_unit_dim(p.op.operands[0], p.axis)
    return mhlo.AllGatherOp([p.op.results[0].type], [unit], p.axis, ir_utils.dense_i64(p.groups),
                            channel_handle=mhlo_build.channel_handle(handle), use_global_device_ids=True).results[0]


def _all_reduce(p: Placeholder, handle: int) -> ir.Value:
    out_t = ir.RankedTensorType(p.op.results[0].type)
    element = out_t.element_type
    zeros = mhlo_build.zeros(out_t)
    unit = mhlo_build.with_unit_dim(p.op.operands[0], p.axis)
    start = mhlo_build.device_index(p.stride, p.axis_size)
    zero = mhlo_build.scalar(0, "int32") if out_t.rank > 1 else None
    starts = [start if d == p.axis else zero for d in range(out_t.rank)]
    placed = mhlo.DynamicUpdateSliceOp(zeros, unit, starts).result
    reduce = mhlo.AllReduceOp([out_t], [placed], ir_utils.dense_i64(p.groups),
                              channel_handle=mhlo_build.channel_handle(handle), use_global_device_ids=True)
    combine = mhlo.OrOp if mhlo_build.is_bool(element) else mhlo.AddOp
    mhlo_build.reducer_region(reduce, element, combine)
    return reduce.results[0]
