"""Values that stand in for the results of removed ops, and the removal itself.

A removed op's result is replaced, in this order of preference, by one of
the op's own operands of the same type (a chain of ops collapses onto its
input, as llvm-reduce's operands-skip does), by an argument of an enclosing
block of the same type (a function's argument), or by a zero constant of the
type, made once per region and type at the start of the nearest region that
is isolated from above. A result of a type none of these has (a token, a
tuple, a dynamic shape) keeps the op.

Ops are removed innermost and last first, so that an op whose result stands
in for another's may go too; erasing never leaves a use behind (erasing an
op whose results are used crashes the process).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils

__all__ = ["ISOLATED", "Substitutes", "remove_ops", "walk_with_index"]

#: Ops whose regions see no value from outside them.
ISOLATED = frozenset({"builtin.module", "func.func", "sdy.manual_computation"})


def walk_with_index(module: ir.Module) -> list[ir.Operation]:
    """The module's ops in pre-order (the module first): a unit names an op by its index here, which is the same
    for every parse of the same text."""
    return [op.operation for op in ir_utils.walk(module.operation)]


def _zero(t: ir.Type) -> ir.Attribute | None:
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        return None
    element = t.element_type
    if isinstance(element, ir.IntegerType):
        scalar = ir.IntegerAttr.get(element, 0)
    elif isinstance(element, ir.FloatType):
        scalar = ir.FloatAttr.get(element, 0.0)
    else:  # complex, quantized, ...: no builtin scalar attribute makes their splat
        return None
    return ir.DenseElementsAttr.get_splat(t, scalar)


class Substitutes:
    """Chooses the value that replaces each result; the zero constants it makes are shared."""

    def __init__(self, module: ir.Module):
        names = [op.name for op in ir_utils.walk(module.operation)]
        mhlo_only = any(n.startswith("mhlo.") for n in names) and not any(n.startswith("stablehlo.") for n in names)
        self.dialect = "mhlo" if mhlo_only else "stablehlo"  # a final MHLO module stays MHLO
        self._zeros: dict[tuple[int, str, str], ir.Value] = {}

    def value_for(self, op: ir.Operation, result: ir.Value, taken: Iterable[ir.Value] = ()) -> ir.Value | None:
        t = result.type
        for operand in op.operands:
            if operand.type == t:
                return operand
        excluded = list(taken)
        for block in _enclosing_blocks(op):
            for arg in block.arguments:
                if arg.type == t and all(arg != x for x in excluded):
                    return arg
        return self.zero(op, t)

    def zero(self, op: ir.Operation, t: ir.Type) -> ir.Value | None:
        """A zero of type ``t`` where ``op`` sees it, of ``op``'s dialect if it is mhlo or stablehlo."""
        dialect = op.name.split(".", 1)[0] if op.name.startswith(("mhlo.", "stablehlo.")) else None
        return self.zero_in(_isolated_entry(op), t, dialect)

    def zero_in(self, block: ir.Block, t: ir.Type, dialect: str | None = None) -> ir.Value | None:
        """A zero of type ``t`` made at the start of ``block`` (once per block, type and dialect)."""
        attr = _zero(t)
        if attr is None:
            return None
        dialect = dialect or self.dialect
        key = (hash(block), str(t), dialect)
        value = self._zeros.get(key)
        if value is None:
            operations = list(block.operations)
            ip = ir.InsertionPoint(operations[0]) if operations else ir.InsertionPoint(block)
            created = ir.Operation.create(f"{dialect}.constant", results=[t], attributes={"value": attr}, ip=ip)
            value = self._zeros[key] = created.result
        return value


def _enclosing_blocks(op: ir.Operation) -> list[ir.Block]:
    """The blocks around ``op``, innermost first, up to the entry block of the nearest isolated region."""
    blocks = []
    current = op
    while True:
        block = current.block
        blocks.append(block)
        parent = block.owner.operation
        if parent.name in ISOLATED:
            return blocks
        current = parent


def _isolated_entry(op: ir.Operation) -> ir.Block:
    block = _enclosing_blocks(op)[-1]
    return block.region.blocks[0]


def remove_ops(ops: Sequence[ir.Operation], substitutes: Substitutes) -> None:
    """Removes ``ops`` (given in pre-order), each result replaced by its substitute; an op with a result that
    nothing can stand in for stays."""
    for op in reversed(ops):
        values = []
        for result in op.results:
            if not any(True for _ in result.uses):
                values.append(None)
                continue
            value = substitutes.value_for(op, result)
            if value is None:
                break
            values.append(value)
        else:
            for result, value in zip(op.results, values):
                if value is not None:
                    result.replace_all_uses_with(value)
            ir_utils.erase_op(op)
