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
  all_reduce sum (``or`` for booleans) over the groups. Every slot has one
  non-zero term, so the sum is exact; floats are summed as their bit
  patterns (bitcast_convert to same-width integers and back), because a
  float sum turns a -0.0 into +0.0 whatever the padding (XLA:CPU's
  all_reduce starts its sums at +0.0; jax's own psum of -0.0 is +0.0).
  Complex values are summed as their real and imaginary parts, one
  all_reduce each. It moves axis_size times more data; it is kept so the
  two can be compared. The slot is written directly at the out_axis, so no
  transpose is involved (the 2022 transpose for out_axis != 0 was wrong:
  jax issue #5756). After this strategy::

      %z = mhlo.constant dense<0> : tensor<3x4x5xi32>
      %b = mhlo.bitcast_convert %v : (tensor<3x5xf32>) -> tensor<3x5xi32>
      %u = mhlo.reshape %b : (tensor<3x5xi32>) -> tensor<3x1x5xi32>
      %i = ... (partition_id / 2) % 4, as i32 ...
      %p = mhlo.dynamic_update_slice %z, %u, %c0, %i, %c0
      %s = "mhlo.all_reduce"(%p) ({ mhlo.add }) <{channel_handle = ..., replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> ...}>
      %y = mhlo.bitcast_convert %s : (tensor<3x4x5xi32>) -> tensor<3x4x5xf32>

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

from pxla_mlir.mlir.core import ir_utils, mhlo_build
from pxla_mlir.mlir.core.pxla_attrs import CUSTOM_CALLS, UNSHARD, Placeholder, placeholders
from pxla_mlir.mlir.pass_infra import ModulePass, option
from pxla_mlir.mlir.pass_infra.statistics import Statistic


@dataclasses.dataclass(frozen=True)
class ExpandUnshardPass(ModulePass):
    argument = "pxla-expand-unshard"
    acts_on = CUSTOM_CALLS  # the placeholders
    summary = "Expand pxla.unshard into an all_gather (default) or the 2022 pad + dynamic_update_slice + all_reduce"

    strategy: Literal["all-gather", "all-reduce"] = option("all-gather", "how per-device values are collected")
    expanded = Statistic("unshards-expanded", "pxla.unshard placeholders expanded into collectives")

    def run(self, module):
        todo = placeholders(module, UNSHARD)
        if not todo:
            return
        handles = [_handles_needed(p, self.strategy) for p in todo]
        handle = mhlo_build.next_channel_handle(module, sum(handles))
        for p, used in zip(todo, handles):
            expected = p.operand_shape[:p.axis] + [p.axis_size] + p.operand_shape[p.axis:]
            p.check(p.result_shape == expected,
                    f"the result must be the operand with dimension {p.axis} of size {p.axis_size} inserted: "
                    f"shape {expected}, got {p.result_shape}")
            with ir.InsertionPoint(p.op), p.op.location:
                build = _all_gather if self.strategy == "all-gather" else _all_reduce
                new = build(p, handle)
            handle += used
            ir_utils.replace_op(p.op, [new])
            self.expanded.add()


def _all_gather(p: Placeholder, handle: int) -> ir.Value:
    unit = mhlo_build.with_unit_dim(p.op.operands[0], p.axis)
    return mhlo.AllGatherOp([p.op.results[0].type], [unit], p.axis, ir_utils.dense_i64(p.groups),
                            channel_handle=mhlo_build.channel_handle(handle), use_global_device_ids=True).results[0]


def _handles_needed(p: Placeholder, strategy: str) -> int:
    complex_ = isinstance(ir.RankedTensorType(p.op.results[0].type).element_type, ir.ComplexType)
    return 2 if strategy == "all-reduce" and complex_ else 1


def _all_reduce(p: Placeholder, handle: int) -> ir.Value:
    value = p.op.operands[0]
    if isinstance(ir.RankedTensorType(value.type).element_type, ir.ComplexType):
        real = _sum_slots(p, mhlo.RealOp(value).result, handle)
        imag = _sum_slots(p, mhlo.ImagOp(value).result, handle + 1)
        return mhlo.ComplexOp(real, imag).result
    return _sum_slots(p, value, handle)


def _sum_slots(p: Placeholder, value: ir.Value, handle: int) -> ir.Value:
    """``value`` in this device's slot of zeros, summed over the axis' groups."""
    element = ir.RankedTensorType(value.type).element_type
    if mhlo_build.is_float(element):
        value = mhlo_build.to_bits(value)
    summed = ir.RankedTensorType(value.type).element_type
    out_shape = list(ir.RankedTensorType(p.op.results[0].type).shape)
    out_t = ir.RankedTensorType.get(out_shape, summed)
    zeros = mhlo_build.zeros(out_t)
    unit = mhlo_build.with_unit_dim(value, p.axis)
    start = mhlo_build.device_index(p.stride, p.axis_size)
    starts = [start]  # rank 1: the axis is the only dimension
    if len(out_shape) > 1:
        zero = mhlo_build.scalar(0, "int32")
        starts = [start if d == p.axis else zero for d in range(len(out_shape))]
    placed = mhlo.DynamicUpdateSliceOp(zeros, unit, starts).result
    reduce = mhlo.AllReduceOp([out_t], [placed], ir_utils.dense_i64(p.groups),
                              channel_handle=mhlo_build.channel_handle(handle), use_global_device_ids=True)
    combine = mhlo.OrOp if mhlo_build.is_bool(summed) else mhlo.AddOp
    mhlo_build.reducer_region(reduce, summed, combine)
    out = reduce.results[0]
    return mhlo_build.from_bits(out, element) if mhlo_build.is_float(element) else out
