"""Reductions that simplify what stays: constants splatted, attributes the test
does not need dropped, and jaxlib's cleanup passes (canonicalize, cse,
symbol-dce, the inliner) kept when the test still passes after them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from jaxlib.mlir import ir

from pxla_mlir.mlir.pass_infra.pipeline import Pipeline
from pxla_mlir.mlir.reduce.reductions import Unit
from pxla_mlir.mlir.reduce.substitutes import walk_with_index

__all__ = ["SplatConstants", "DropAttributes", "Cleanup"]


def _attribute(op: ir.Operation, name: str) -> ir.Attribute | None:
    try:
        return op.attributes[name]
    except TypeError:  # the bindings cannot wrap some element types (complex dense constants)
        return None


def _splat_of_first(attr: ir.DenseElementsAttr) -> ir.DenseElementsAttr | None:
    """``attr`` with every element equal to its first (a zero where the bindings cannot read that element)."""
    t = attr.type
    element = ir.ShapedType(t).element_type
    try:
        if isinstance(attr, ir.DenseIntElementsAttr):
            return ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(element, int(attr[0])))
        if isinstance(attr, ir.DenseFPElementsAttr):
            return ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(element, float(attr[0])))
    except (ValueError, TypeError, IndexError):  # bf16 and other types the bindings do not read
        pass
    if isinstance(element, ir.IntegerType):
        return ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(element, 0))
    if isinstance(element, ir.FloatType):
        return ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(element, 0.0))
    return None


def _dense_value(op: ir.Operation) -> ir.DenseElementsAttr | None:
    if len(op.results) != 1 or "value" not in op.attributes or not op.name.endswith(".constant"):
        return None
    value = _attribute(op, "value")
    if not isinstance(value, ir.DenseElementsAttr) or value.is_splat:
        return None
    return value


@dataclasses.dataclass(frozen=True)
class SplatConstants:
    """Replaces each constant's elements by its first element (``dense<[1, 2, 3]>`` becomes ``dense<1>``)."""

    name: str = "splat-constants"

    def units(self, module: ir.Module) -> list[Unit]:
        return [i for i, op in enumerate(walk_with_index(module)) if _dense_value(op) is not None]

    def apply(self, module: ir.Module, units: Sequence[Unit]) -> None:
        ops = walk_with_index(module)
        for index in sorted(u for u in units if isinstance(u, int)):
            op = ops[index]
            value = _dense_value(op)
            splat = None if value is None else _splat_of_first(value)
            if splat is not None:
                op.attributes["value"] = splat


#: Attributes a symbol or a call cannot do without (dropping them never verifies, or changes what is called).
_KEPT = frozenset({"sym_name", "sym_visibility", "function_type", "callee", "operandSegmentSizes",
                   "resultSegmentSizes"})
_BOUNDARY = ("arg_attrs", "res_attrs")


def _entries(attr: ir.Attribute) -> dict[str, ir.Attribute]:
    d = ir.DictAttr(attr)
    return {d[i].name: d[i].attr for i in range(len(d))}


def _droppable(op: ir.Operation, name: str) -> bool:
    """Whether the op still verifies without attribute ``name`` (tried, then put back): an attribute the op
    requires is no unit, so that a chunk holding it does not fail for that alone."""
    saved = _attribute(op, name)
    if saved is None:
        return False
    del op.attributes[name]
    try:
        op.verify()
        return True
    except ir.MLIRError:
        return False
    finally:
        op.attributes[name] = saved


@dataclasses.dataclass(frozen=True)
class DropAttributes:
    """Drops attributes: the ones an op verifies without, and entries of functions' argument and result
    attributes (``mhlo.sharding``, ``jax.buffer_donor``, ...)."""

    name: str = "drop-attributes"

    def units(self, module: ir.Module) -> list[Unit]:
        found: list[Unit] = []
        for i, op in enumerate(walk_with_index(module)):
            for name in sorted(op.attributes.keys()):
                if name in _BOUNDARY:
                    for position, entry in enumerate(ir.ArrayAttr(op.attributes[name])):
                        found += [(i, name, position, key) for key in sorted(_entries(entry))]
                elif (name not in _KEPT or (name == "sym_name" and op.name == "builtin.module")) \
                        and _droppable(op, name):
                    found.append((i, name))
        return found

    def apply(self, module: ir.Module, units: Sequence[Unit]) -> None:
        ops = walk_with_index(module)
        entries: dict[tuple[int, str], dict[int, set[str]]] = {}
        for unit in units:
            if not isinstance(unit, tuple):
                continue
            if len(unit) == 2:
                del ops[unit[0]].attributes[unit[1]]
            else:
                entries.setdefault((unit[0], unit[1]), {}).setdefault(unit[2], set()).add(unit[3])
        for (index, name), dropped in entries.items():
            op = ops[index]
            dicts = [_entries(e) for e in ir.ArrayAttr(op.attributes[name])]
            op.attributes[name] = ir.ArrayAttr.get([
                ir.DictAttr.get({k: v for k, v in d.items() if k not in dropped.get(p, ())})
                for p, d in enumerate(dicts)])


@dataclasses.dataclass(frozen=True)
class Cleanup:
    """jaxlib's cleanup passes, all together first, then one at a time."""

    name: str = "cleanup"

    def variants(self) -> list[str]:
        return ["canonicalize,cse,symbol-dce", "symbol-dce", "cse", "canonicalize", "inline,symbol-dce"]

    def apply_variant(self, module: ir.Module, variant: str) -> None:
        ctx = module.context
        Pipeline.parse(f"builtin.module({variant})", ctx).pass_manager(ctx).run(module.operation)
