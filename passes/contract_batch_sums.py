"""pxla-contract-batch-sums: a sum over a dot's batch dimensions is a dot contracting them.

The gradient of a weight broadcast over a named (or vmapped) axis is the sum
of per-example gradients: jax emits a ``dot_general`` batched over the
examples (one outer product each), often a ``transpose``, then a
``reduce`` adding over the example dimension. XLA keeps that form as a
broadcast, a multiply and a reduce over the whole ``examples x m x n``
product; the same program written on blocks (jax.shard_map, jax.pmap of a
block matmul) has one dot that contracts the examples. This pass rewrites
the first form into the second: a ``reduce`` adding, from a zero, only
batch dimensions of a ``dot_general`` (directly or through a
``transpose``) becomes that ``dot_general`` with those dimensions
contracted (and a transpose of what is left). The values are the same sums
added in another order: exact for integers, float reassociation for floats.

It leaves alone reduces that also sum a non-batch dimension, start from
anything but zero (floats: +0.0), combine with anything but ``add``, take
several operands, booleans or complex numbers, and dots or transposes with other uses (the
batched product would be computed anyway).

Before::

    %0 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0],
        rhs_batching_dimensions = [0]>}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<16x4x64xf32>
    %2 = "mhlo.transpose"(%1) <{permutation = dense<[0, 2, 1]> : tensor<3xi64>}>
        : (tensor<16x4x64xf32>) -> tensor<16x64x4xf32>
    %3 = mhlo.reduce(%2 init: %0) applies mhlo.add across dimensions = [0]
        : (tensor<16x64x4xf32>, tensor<f32>) -> tensor<64x4xf32>

After::

    %1 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [0],
        rhs_contracting_dimensions = [0]>}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<4x64xf32>
    %2 = "mhlo.transpose"(%1) <{permutation = dense<[1, 0]> : tensor<2xi64>}>
        : (tensor<4x64xf32>) -> tensor<64x4xf32>

It runs on MHLO (after legalization), in every xmap lowering::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-contract-batch-sums)'
"""

from __future__ import annotations

import dataclasses
import math

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import mhlo

from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.pass_infra import ModulePass
from pxla_mlir.mlir.pass_infra.statistics import Statistic


@dataclasses.dataclass(frozen=True)
class ContractBatchSumsPass(ModulePass):
    argument = "pxla-contract-batch-sums"
    acts_on = frozenset({"mhlo.reduce"})
    summary = "Rewrite a zero-init add reduce over a dot_general's batch dimensions into a dot contracting them"

    contracted = Statistic("sums-contracted", "sums over a dot's batch dimensions contracted into the dot")

    def run(self, module):
        for reduce, _ in ir_utils.walk_selected(module, lambda name: name == "mhlo.reduce"):
            if _contract(reduce):
                self.contracted.add()


def _contract(reduce: ir.Operation) -> bool:
    """Contracts one reduce into its dot; whether it did."""
    if len(reduce.operands) != 2 or not _adds_from_zero(reduce):
        return False
    source = reduce.operands[0]
    perm = None
    transpose = _single_use_owner(source, "mhlo.transpose")
    if transpose is not None:
        perm = list(ir_utils.dense_to_numpy(transpose.attributes["permutation"]).tolist())
        source = transpose.operands[0]
    dot = _single_use_owner(source, "mhlo.dot_general")
    if dot is None:
        return False
    dot_type = ir.RankedTensorType(dot.results[0].type)
    if not dot_type.has_static_shape:
        return False
    dims = [int(d) for d in ir_utils.dense_to_numpy(reduce.attributes["dimensions"]).tolist()]
    summed = sorted(perm[d] for d in dims) if perm is not None else sorted(dims)
    numbers = mhlo.DotDimensionNumbers(dot.attributes["dot_dimension_numbers"])
    lhs_b, rhs_b = list(numbers.lhs_batching_dimensions), list(numbers.rhs_batching_dimensions)
    if not summed or summed[-1] >= len(lhs_b):  # batch dimensions lead a dot's result
        return False
    kept = [i for i in range(len(lhs_b)) if i not in summed]
    new_numbers = mhlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=[lhs_b[i] for i in kept], rhs_batching_dimensions=[rhs_b[i] for i in kept],
        lhs_contracting_dimensions=[*numbers.lhs_contracting_dimensions, *(lhs_b[i] for i in summed)],
        rhs_contracting_dimensions=[*numbers.rhs_contracting_dimensions, *(rhs_b[i] for i in summed)])
    left = [d for d in range(dot_type.rank) if d not in summed]  # the dot's result dims that stay
    contracted_type = ir.RankedTensorType.get([dot_type.shape[d] for d in left], dot_type.element_type)
    new_perm = None
    if perm is not None:
        at = {d: n for n, d in enumerate(left)}
        new_perm = [at[perm[i]] for i in range(len(perm)) if i not in dims]
    shape = [contracted_type.shape[d] for d in new_perm] if new_perm else contracted_type.shape
    if ir.RankedTensorType.get(shape, dot_type.element_type) != reduce.results[0].type:
        return False  # the reduce accumulates in another type
    attrs = {a.name: a.attr for a in (dot.attributes[i] for i in range(len(dot.attributes)))}
    attrs["dot_dimension_numbers"] = new_numbers
    with ir.InsertionPoint(reduce), reduce.location:
        value = ir.Operation.create("mhlo.dot_general", results=[contracted_type], operands=list(dot.operands),
                                    attributes=attrs).result
        if new_perm and new_perm != sorted(new_perm):
            value = mhlo.TransposeOp(value, ir_utils.dense_i64(new_perm)).result
    ir_utils.replace_op(reduce, [value])
    if transpose is not None:
        ir_utils.erase_op(transpose)
    ir_utils.erase_op(dot)
    return True


def _single_use_owner(value: ir.Value, name: str) -> ir.Operation | None:
    if not isinstance(value, ir.OpResult) or value.owner.name != name:
        return None
    return value.owner.operation if len(list(value.uses)) == 1 else None


def _adds_from_zero(reduce: ir.Operation) -> bool:
    """The reduce adds its one operand's elements to a zero (+0.0 for floats): a dot's sum."""
    block = reduce.regions[0].blocks[0]
    body = list(block.operations)
    if len(body) != 2 or body[0].name != "mhlo.add" or body[1].name != "mhlo.return":
        return False
    if set(body[0].operands) != set(block.arguments) or list(body[1].operands) != [body[0].result]:
        return False
    init = reduce.operands[1]
    if not isinstance(init, ir.OpResult) or init.owner.name != "mhlo.constant":
        return False
    if isinstance(ir.RankedTensorType(init.type).element_type, ir.ComplexType):
        return False  # complex: the bindings cannot read such a constant; leave it
    value = init.owner.attributes["value"]
    if isinstance(value, ir.DenseFPElementsAttr) and value.is_splat:
        zero = ir.FloatAttr(value.get_splat_value()).value
        return zero == 0.0 and math.copysign(1.0, zero) > 0  # from -0.0 a sum of -0.0s stays -0.0; a dot's is +0.0
    if isinstance(value, ir.DenseIntElementsAttr) and value.is_splat:
        zero = value.get_splat_value()
        return ir.IntegerType(zero.type).width > 1 and ir.IntegerAttr(zero).value == 0  # i1's add is an or
    return False
