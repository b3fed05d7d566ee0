"""Reductions: ways to shrink a module, each by units that apply in any subset.

A :class:`Reduction` lists its units on a base module (:meth:`~Reduction.units`:
hashable addresses, such as an op's index in pre-order) and applies a subset of
them to a fresh parse of the same text (:meth:`~Reduction.apply`). The delta
loop chooses the subsets. A :class:`Rewrite` is a whole-module change tried as
it is (canonicalize, cse, symbol-dce).

This module holds the op-level reductions; :mod:`.signatures` the functions
and their boundaries, :mod:`.simplify` constants, attributes and the cleanup
pipelines; :mod:`.catalog` the order a round runs them in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Protocol, runtime_checkable

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.reduce.substitutes import ISOLATED, Substitutes, remove_ops, walk_with_index

__all__ = ["Reduction", "Rewrite", "Unit", "RemoveOps", "InlineRegions", "removable"]

Unit = Hashable


class Reduction(Protocol):
    """Units of a module that can be taken away (or simplified) together."""

    @property
    def name(self) -> str: ...

    def units(self, module: ir.Module) -> list[Unit]: ...

    def apply(self, module: ir.Module, units: Sequence[Unit]) -> None: ...


@runtime_checkable
class Rewrite(Protocol):
    """Whole-module changes, each tried once (the first that is interesting and smaller is kept)."""

    @property
    def name(self) -> str: ...

    def variants(self) -> list[str]: ...

    def apply_variant(self, module: ir.Module, variant: str) -> None: ...


def _is_terminator(op: ir.Operation) -> bool:
    return op.has_trait(ir.IsTerminatorTrait)  # pyright: ignore[reportArgumentType]


def removable(op: ir.Operation) -> bool:
    """Ops that remove-ops may take away: not the module, functions or terminators."""
    return op.name not in ("builtin.module", "func.func") and not _is_terminator(op)


@dataclasses.dataclass(frozen=True)
class RemoveOps:
    """Removes ops, results replaced as :mod:`.substitutes` says; an op with regions goes with them."""

    name: str = "remove-ops"

    def units(self, module: ir.Module) -> list[Unit]:
        return [i for i, op in enumerate(walk_with_index(module)) if removable(op)]

    def apply(self, module: ir.Module, units: Sequence[Unit]) -> None:
        ops = walk_with_index(module)
        chosen = sorted(u for u in units if isinstance(u, int))
        remove_ops([ops[i] for i in chosen], Substitutes(module))


def _inlinable(op: ir.Operation, index: int) -> bool:
    """Whether region ``index`` of ``op`` can replace the op: one block whose arguments are the op's operands
    (or none) and whose terminator yields values of the op's result types."""
    region = op.regions[index]
    blocks = list(region.blocks)
    if len(blocks) != 1:
        return False
    block = blocks[0]
    args = list(block.arguments)
    operands = list(op.operands)
    if args and [a.type for a in args] != [o.type for o in operands]:
        return False
    operations = list(block.operations)
    if not operations or not _is_terminator(operations[-1].operation):
        return False
    yielded = list(operations[-1].operation.operands)
    return [v.type for v in yielded] == [r.type for r in op.results]


@dataclasses.dataclass(frozen=True)
class InlineRegions:
    """Replaces an op by one of its regions, inlined once: a branch of a case or if, the body of a while (its
    arguments the loop's initial values), a manual computation whose body has the same types as its operands.
    (Dropping a region with its op is remove-ops' job.)"""

    name: str = "inline-regions"

    def units(self, module: ir.Module) -> list[Unit]:
        found: list[Unit] = []
        for i, op in enumerate(walk_with_index(module)):
            if op.name in ISOLATED and op.name != "sdy.manual_computation":
                continue
            found += [(i, r) for r in range(len(op.regions)) if _inlinable(op, r)]
        return found

    def apply(self, module: ir.Module, units: Sequence[Unit]) -> None:
        ops = walk_with_index(module)
        region_of: dict[int, int] = {}
        for unit in sorted(u for u in units if isinstance(u, tuple)):
            region_of.setdefault(unit[0], unit[1])  # one region per op: the first chosen
        for index in sorted(region_of, reverse=True):  # innermost and last first
            _inline(ops[index], region_of[index])


def _inline(op: ir.Operation, index: int) -> None:
    block = op.regions[index].blocks[0]
    for arg, operand in zip(block.arguments, op.operands):
        arg.replace_all_uses_with(operand)
    operations = [o.operation for o in block.operations]
    terminator = operations[-1]
    for inner in operations[:-1]:
        inner.move_before(op)
    yielded = list(terminator.operands)
    for result, value in zip(op.results, yielded):
        result.replace_all_uses_with(value)
    ir_utils.erase_op(op)
