"""Builders for the small MHLO snippets several passes emit.

All of them insert at the current ``InsertionPoint`` with the current
``Location`` (passes set both to the op being replaced).
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import mhlo

from pxla_mlir.mlir.core import ir_utils, pxla_attrs
from pxla_mlir.mlir.core.diagnostics import PassError


def scalar(value, dtype) -> ir.Value:
    """A rank-0 constant (dtype: a numpy dtype; unsigned types stay unsigned)."""
    arr = np.array(value, dtype=dtype)
    if arr.dtype.kind == "u":
        t = ir.RankedTensorType.get([], ir.IntegerType.get_unsigned(arr.dtype.itemsize * 8))
        return mhlo.ConstantOp(ir.DenseElementsAttr.get(ir_utils.as_buffer(arr), type=t)).result
    return mhlo.ConstantOp(ir.DenseElementsAttr.get(ir_utils.as_buffer(arr))).result


def device_index(stride: int, size: int) -> ir.Value:
    """This device's index along a mesh axis, ``(partition_id / stride) % size``, as i32.

    Partition mode is the canonical form; pxla-convert-to-replica-mode turns
    the partition_id into a replica_id.
    """
    pid = mhlo.PartitionIdOp().result
    if stride != 1:
        pid = mhlo.DivOp(pid, scalar(stride, np.uint32)).result
    idx = mhlo.RemOp(pid, scalar(size, np.uint32)).result
    return mhlo.ConvertOp(ir.RankedTensorType.get([], ir.IntegerType.get_signless(32)), idx).result


def with_unit_dim(x: ir.Value, axis: int) -> ir.Value:
    t = ir.RankedTensorType(x.type)
    shape = list(t.shape)
    shape.insert(axis, 1)
    return mhlo.ReshapeOp(ir.RankedTensorType.get(shape, t.element_type), x).result


def next_channel_handle(module: ir.Operation, count: int = 1) -> int:
    """The first of ``count`` fresh handles after the largest channel handle in the module."""
    largest, holder = 0, module
    for op in ir_utils.walk(module):
        handle = pxla_attrs.read_channel_handle(op)
        if handle is not None and handle > largest:
            largest, holder = handle, op
    if largest > pxla_attrs.MAX_I64 - count:
        raise PassError(holder, f"channel handle {largest} leaves no room for {count} new handle(s) "
                                f"(handles are 64-bit); renumber the channels")
    return largest + 1


def channel_handle(handle: int) -> ir.Attribute:
    return mhlo.ChannelHandle.get(handle, 1)  # type 1: device to device


def reducer_region(op, element_type: ir.Type, combine) -> None:
    """Fills the (empty) reduction region of an all_reduce-like ``op``."""
    scalar_t = ir.RankedTensorType.get([], element_type)
    block = op.regions[0].blocks.append(scalar_t, scalar_t)
    with ir.InsertionPoint(block):
        mhlo.ReturnOp([combine(block.arguments[0], block.arguments[1]).result])


def zeros(t: ir.RankedTensorType) -> ir.Value:
    """A zero-filled constant of type ``t`` (false for booleans)."""
    element = t.element_type
    if isinstance(element, ir.IntegerType):
        zero = ir.IntegerAttr.get(element, 0)
    elif isinstance(element, ir.ComplexType):
        real = zeros(ir.RankedTensorType.get(list(t.shape), ir.ComplexType(element).element_type))
        return mhlo.ComplexOp(real, real).result
    else:
        zero = ir.FloatAttr.get(element, 0.0)
    return mhlo.ConstantOp(ir.DenseElementsAttr.get_splat(t, zero)).result


def bits_type(t: ir.RankedTensorType) -> ir.RankedTensorType:
    """``t`` with its float elements as signless integers of the same width."""
    width = ir.FloatType(t.element_type).width
    return ir.RankedTensorType.get(list(t.shape), ir.IntegerType.get_signless(width))


def to_bits(x: ir.Value) -> ir.Value:
    """A float tensor's bit patterns (bitcast_convert to same-width integers)."""
    return mhlo.BitcastConvertOp(bits_type(ir.RankedTensorType(x.type)), x).result


def from_bits(x: ir.Value, element_type: ir.Type) -> ir.Value:
    """The floats of type ``element_type`` whose bit patterns ``x`` holds."""
    t = ir.RankedTensorType(x.type)
    return mhlo.BitcastConvertOp(ir.RankedTensorType.get(list(t.shape), element_type), x).result


def is_float(element_type: ir.Type) -> bool:
    return isinstance(element_type, ir.FloatType)


def is_bool(element_type: ir.Type) -> bool:
    return isinstance(element_type, ir.IntegerType) and ir.IntegerType(element_type).width == 1


