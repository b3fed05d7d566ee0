"""unshard-as-all-gather: 2022's unshard (zeros, my piece at my index, all-reduce sum) as one all_gather.

A nested pmap's output is every device's piece stacked along an axis. 2022's
pxla built it as "zeros of the whole shape, my piece written at my index,
summed over the devices" (``TODO(b/110096942): more efficient gather``);
``pxla-expand-unshard{strategy=all-reduce}`` still emits it, as the map
pipelines' ``unshard="all-reduce"`` does. Every device sends and adds the
whole stacked array, n times the data an all_gather moves. Before (replica
mode, 8 replicas, groups of 4, floats summed as their bits)::

    %z = mhlo.constant dense<0> : tensor<4x3xi32>
    %u = mhlo.reshape %bits : (tensor<3xi32>) -> tensor<1x3xi32>
    %r = mhlo.replica_id : tensor<ui32>
    %m = mhlo.remainder %r, %c4 : tensor<ui32>
    %i = mhlo.convert %m : (tensor<ui32>) -> tensor<i32>
    %p = mhlo.dynamic_update_slice %z, %u, %i, %c0 : (...) -> tensor<4x3xi32>
    %s = "mhlo.all_reduce"(%p) <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> ({
      ^bb0(%a: tensor<i32>, %b: tensor<i32>):
        %t = mhlo.add %a, %b : tensor<i32>
        mhlo.return %t : tensor<i32>
    }) : (tensor<4x3xi32>) -> tensor<4x3xi32>

After::

    %u = mhlo.reshape %bits : (tensor<3xi32>) -> tensor<1x3xi32>
    %s = "mhlo.all_gather"(%u) <{all_gather_dim = 0 : i64,
           replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> : (tensor<1x3xi32>) -> tensor<4x3xi32>

What must hold, else the op is left alone (with a remark saying why when
its operand is a dynamic_update_slice into zeros, so a near miss is visible):

* an ``all_reduce`` (or 2022's ``cross-replica-sum``), mhlo or stablehlo,
  of one ``dynamic_update_slice`` whose target is a constant (or a
  broadcast constant) of zeros, summed with ``add`` (``or`` for booleans);
* the update differs from the whole in one dimension, ``m`` against
  ``n * m`` where ``n`` is the group size: the all_gather dimension;
* the start indices, computed from ``replica_id``/``partition_id`` and
  constants (convert, reshape, add, subtract, multiply, divide, remainder),
  are evaluated for every device: along that dimension the device at
  position ``k`` of its group must write at ``k * m`` (the order all_gather
  concatenates in), every other index is 0, every device is in one group,
  all groups have ``n`` devices. The groups, channel handle and
  ``use_global_device_ids`` are copied, so the gather runs over the same
  devices in the same group mode; cross-replica-and-partition groups
  (a channel without global ids) over several partitions are left alone.

Exactness: a slot of the sum holds one device's value and n - 1 zeros.
Integers (and floats summed as their bits, pxla's own form) give that value
exactly, booleans too (``x or false``): the all_gather's result is the same,
bit for bit. A float sum is exact too, but for signed zeros: ``-0.0 + 0.0``
is ``+0.0``, so the all-reduce returns ``+0.0`` where a device had ``-0.0``.
Option ``float-sums`` says what to do with a float sum:
``as-sum`` (default) gathers, then writes every zero as ``+0.0``
(``select(x == 0, +0.0, x)``; XLA folds a plain ``x + 0.0`` away), so the
result has the all-reduce's bits (its zeros must be ``+0.0``; a NaN stays a
NaN, though the sum may have quieted a signalling one); ``gather`` gathers
only (each device's own value, ``-0.0`` included: what ``jax.pmap`` returns,
not what the all-reduce did); ``keep`` leaves float sums alone. Complex
sums are left alone.

Dead ops left behind (the zeros, the index arithmetic) are erased.

Example::

    pxla-opt final.mlir --load-pass-plugin=examples/plugins/unshard_as_all_gather.py \\
        -p 'builtin.module(unshard-as-all-gather)'
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

from jaxlib.mlir import ir

from pxla_mlir.passes import ModulePass, helpers, option

_SUMS = ("all_reduce", "cross-replica-sum")
#: Ops that compute nothing but their result: erased once unused.
_PURE = ("constant", "broadcast_in_dim", "replica_id", "partition_id", "convert", "reshape", "add", "subtract",
         "multiply", "divide", "remainder", "dynamic_update_slice", "bitcast_convert")
_ARITH = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b}


class Mismatch(Exception):
    """Why an op is not the unshard pattern (reported as a remark)."""


@dataclasses.dataclass(frozen=True)
class UnshardAsAllGatherPass(ModulePass):
    argument = "unshard-as-all-gather"
    summary = "Rewrite the 2022 unshard (pad into zeros at the device's index, then all-reduce sum) as an all_gather"

    float_sums: Literal["as-sum", "gather", "keep"] = option(
        "as-sum", "float sums: gather, zeros as +0.0 (the sum's bits); gather only (keeps -0.0); or leave them")

    def run(self, module):
        replicas, partitions = helpers.device_counts(module)
        for op in helpers.collectives(module, _SUMS):
            try:
                plan = _match(op, replicas, partitions, self.float_sums)
            except Mismatch as why:
                if _looks_like_unshard(op):
                    self.remark(op, f"unshard-as-all-gather: left alone: {why}")
                continue
            _rewrite(op, *plan)


def _looks_like_unshard(op: ir.Operation) -> bool:
    source = _producer(op.operands[0]) if len(op.operands) == 1 else None
    return source is not None and helpers.kind(source) == "dynamic_update_slice"


def _producer(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    return owner.operation if isinstance(owner, ir.OpView | ir.Operation) else None


def _match(op: ir.Operation, replicas: int, partitions: int, float_sums: str):
    """(update, dimension, as_sum) for an op that is the unshard pattern; raises Mismatch otherwise."""
    if len(op.operands) != 1 or len(op.results) != 1:
        raise Mismatch("more than one operand")
    dus = _producer(op.operands[0])
    if dus is None or helpers.kind(dus) != "dynamic_update_slice":
        raise Mismatch("its operand is not a dynamic_update_slice")
    target, update, starts = dus.operands[0], dus.operands[1], list(dus.operands[2:])
    if op.results[0].type != target.type:
        raise Mismatch(f"its result type {op.results[0].type} is not its operand's {target.type}")
    element = ir.RankedTensorType(target.type).element_type
    is_float = isinstance(element, ir.FloatType | ir.ComplexType)
    if is_float and float_sums == "keep":
        raise Mismatch("a float sum, and float-sums=keep")
    _check_reducer(op, element)
    zero_bits = _zeros(target)
    if is_float and float_sums == "as-sum" and not zero_bits:
        raise Mismatch("its zeros are -0.0: the sum's signed zeros then depend on the backend (float-sums=gather "
                       "gathers anyway)")
    whole, piece = ir.RankedTensorType(target.type).shape, ir.RankedTensorType(update.type).shape
    differ = [d for d in range(len(whole)) if whole[d] != piece[d]]
    if len(differ) != 1:
        raise Mismatch(f"the piece {piece} and the whole {whole} differ in {len(differ)} dimensions, not one")
    dim = differ[0]
    mode = helpers.group_mode(op) if helpers.kind(op) == "all_reduce" else "cross-replica"
    if mode == "cross-replica-and-partition" and partitions > 1:
        raise Mismatch("its groups span replicas and every partition (a channel without use_global_device_ids)")
    groups = helpers.device_groups(op, replicas, partitions)
    _check_groups(groups, replicas * partitions, whole[dim], piece[dim])
    for position, device in ((k, d) for g in groups for k, d in enumerate(g)):
        r, p = divmod(device, partitions)
        for d, start in enumerate(starts):
            want = position * piece[dim] if d == dim else 0
            got = _evaluate(start, r, p, {})
            if got != want:
                where = f"but its place in its group is {want}" if d == dim else "not 0"
                raise Mismatch(f"device {device} (replica {r}, partition {p}) writes at index {got} of dimension "
                               f"{d}, {where}")
    return update, dim, is_float and float_sums == "as-sum"


def _check_reducer(op: ir.Operation, element: ir.Type) -> None:
    if helpers.kind(op) == "cross-replica-sum":
        return
    body = op.regions[0].blocks[0]
    ops = list(body.operations)
    args = list(body.arguments)
    wanted = ("or", "add") if isinstance(element, ir.IntegerType) and ir.IntegerType(element).width == 1 else ("add",)
    if len(ops) != 2 or len(args) != 2 or helpers.kind(ops[0]) not in wanted:
        raise Mismatch(f"its reduction is not a single {' or '.join(wanted)}")
    combine, ret = ops
    if {combine.operands[0], combine.operands[1]} != set(args) or combine.operands[0] == combine.operands[1] \
            or list(ret.operands) != [combine.results[0]]:
        raise Mismatch("its reduction does not combine its two arguments")


def _zeros(value: ir.Value) -> bool:
    """Whether ``value`` is all zeros: True for zero bits, False for -0.0; raises Mismatch otherwise."""
    op = _producer(value)
    if op is not None and helpers.kind(op) == "broadcast_in_dim":
        op = _producer(op.operands[0])
    if op is None or helpers.kind(op) != "constant":
        raise Mismatch("it writes into a value that is not a constant")
    attr = ir.DenseElementsAttr(op.attributes["value"])
    splat = attr.get_splat_value() if attr.is_splat else None
    if isinstance(splat, ir.IntegerAttr | ir.BoolAttr):
        zero = splat.value == 0 or splat.value is False
        sign = False
    elif isinstance(splat, ir.FloatAttr):
        zero, sign = splat.value == 0.0, math.copysign(1.0, splat.value) < 0
    else:
        raise Mismatch("it writes into a constant that is not a splat integer or float")
    if not zero:
        raise Mismatch("it writes into a constant that is not zeros")
    return not sign


def _check_groups(groups: list[list[int]], devices: int, whole: int, piece: int) -> None:
    n = len(groups[0])
    if any(len(g) != n for g in groups):
        raise Mismatch("its groups have different sizes")
    if sorted(d for g in groups for d in g) != list(range(devices)):
        raise Mismatch(f"its groups do not hold each of the {devices} devices once")
    if n * piece != whole:
        raise Mismatch(f"groups of {n} devices with pieces of {piece} make {n * piece}, not the {whole} written")


def _evaluate(value: ir.Value, replica: int, partition: int, seen: dict) -> int:
    """The integer a scalar index computes on one device (replica, partition); Mismatch if it cannot tell."""
    if value in seen:
        return seen[value]
    op = _producer(value)
    name = helpers.kind(op) if op is not None else "a block argument"
    args = [] if op is None else [_evaluate(v, replica, partition, seen) for v in op.operands]
    if name == "replica_id":
        result = replica
    elif name == "partition_id":
        result = partition
    elif name == "constant" and op is not None:
        attr = ir.DenseElementsAttr(op.attributes["value"])
        if not attr.is_splat or not isinstance(ir.ShapedType(attr.type).element_type, ir.IntegerType):
            raise Mismatch("an index is a constant this pass cannot read")
        result = ir.IntegerAttr(attr.get_splat_value()).value
    elif name in ("convert", "reshape"):
        result = args[0]
    elif name in _ARITH:
        result = _ARITH[name](*args)
    elif name in ("divide", "remainder"):
        if args[1] == 0:
            raise Mismatch("an index divides by zero")
        quotient = abs(args[0]) // abs(args[1]) * (1 if (args[0] < 0) == (args[1] < 0) else -1)  # truncates
        result = quotient if name == "divide" else args[0] - quotient * args[1]
    else:
        raise Mismatch(f"an index is computed by {name}, which this pass does not evaluate")
    seen[value] = result = _wrap(result, value.type)
    return result


def _wrap(x: int, type_: ir.Type) -> int:
    """``x`` as the integer type of ``type_`` holds it (two's complement, or unsigned)."""
    element = ir.ShapedType(type_).element_type if isinstance(type_, ir.ShapedType) else type_
    if not isinstance(element, ir.IntegerType):
        raise Mismatch(f"an index has type {type_}, not an integer")
    t = ir.IntegerType(element)
    x &= (1 << t.width) - 1
    return x - (1 << t.width) if not t.is_unsigned and x >> (t.width - 1) else x


def _rewrite(op: ir.Operation, update: ir.Value, dim: int, as_sum: bool) -> None:
    dialect = op.name.partition(".")[0]
    attributes: dict[str, ir.Attribute] = {"all_gather_dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)}
    for name in ("replica_groups", "channel_handle", "use_global_device_ids"):
        if name in op.attributes:
            attributes[name] = op.attributes[name]
    result_type = op.results[0].type
    with ir.InsertionPoint(op), op.location:
        gathered = ir.Operation.create(f"{dialect}.all_gather", results=[result_type], operands=[update],
                                       attributes=attributes).results[0]
        if as_sum:  # every zero as +0.0, as the sum gives it (XLA folds a plain `x + 0.0` away)
            gathered = _positive_zeros(dialect, gathered)
    dus = _producer(op.operands[0])
    op.results[0].replace_all_uses_with(gathered)
    op.erase()
    if dus is not None:
        _erase_dead(dus)


def _positive_zeros(dialect: str, x: ir.Value) -> ir.Value:
    """``select(x == 0, +0.0, x)``: -0.0 becomes +0.0, every other value (NaN included) stays."""
    t = ir.RankedTensorType(x.type)
    zero = ir.Operation.create(f"{dialect}.constant", results=[t], attributes={
        "value": ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(t.element_type, 0.0))}).results[0]
    mask_type = ir.RankedTensorType.get(t.shape, ir.IntegerType.get_signless(1))
    is_zero = ir.Operation.create(f"{dialect}.compare", results=[mask_type], operands=[x, zero], attributes={
        "comparison_direction": ir.Attribute.parse(f"#{dialect}<comparison_direction EQ>")}).results[0]
    return ir.Operation.create(f"{dialect}.select", results=[t], operands=[is_zero, zero, x]).results[0]


def _erase_dead(op: ir.Operation) -> None:
    """Erases ``op`` if unused, then each pure op that computed its operands once nothing uses it either."""
    todo = [op]
    while todo:
        o = todo.pop()
        if helpers.kind(o) not in _PURE or any(True for r in o.results for _ in r.uses):
            continue
        producers = [p for p in map(_producer, o.operands) if p is not None]
        o.erase()
        todo += [p for i, p in enumerate(producers) if p not in producers[:i] and p not in todo]
