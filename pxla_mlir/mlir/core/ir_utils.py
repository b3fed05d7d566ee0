"""Small, safe helpers over jaxlib's MLIR bindings, shared by the passes.

Several binding misuses kill the process (erasing an op that still has uses
segfaults); the helpers here check first and raise a Python error instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
from jaxlib.mlir import ir

if TYPE_CHECKING:
    from typing_extensions import Buffer

I32 = lambda: ir.IntegerType.get_signless(32)  # noqa: E731 (needs a live context)


def walk(root: ir.Operation) -> list[ir.Operation]:
    """All ops nested in ``root`` (root included), pre-order, as a list so the
    caller may rewrite while iterating."""
    out: list[ir.Operation] = []

    def visit(op):
        out.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


def walk_selected(root: ir.Operation, by_name: Callable[[str], bool],
                  attrs: Sequence[str] = ()) -> list[tuple[ir.Operation, str]]:
    """``(op, name)`` of the ops nested in ``root`` (root included, pre-order)
    whose name ``by_name`` accepts (asked once per name) or that carry one of
    ``attrs``. On a large module a pass that looks at a few kinds of ops
    touches each other op only for its name (and ``attrs``)."""
    out: list[tuple[ir.Operation, str]] = []
    append, advance, chosen = out.append, ir.WalkResult.ADVANCE, {}

    def visit(op):
        name = op.name
        keep = chosen.get(name)
        if keep is None:
            keep = chosen[name] = bool(by_name(name))
        if keep:
            append((op, name))
        elif attrs:
            present = op.attributes
            if len(present):  # one call decides for the many ops without attributes
                for a in attrs:  # a loop, not any(): this runs for nearly every op
                    if a in present:
                        append((op, name))
                        break
        return advance

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


def ops_named(root: ir.Operation, *names: str) -> list[ir.Operation]:
    return [op for op in walk(root) if op.name in names]


def has_attr(op: ir.Operation, name: str) -> bool:
    return name in op.attributes


def set_i32_attr(op: ir.Operation, name: str, value: int) -> None:
    op.attributes[name] = ir.IntegerAttr.get(I32(), value)


def as_buffer(arr: np.ndarray) -> Buffer:
    """``arr`` for the bindings' ``Buffer`` parameters (``DenseElementsAttr.get``)."""
    # Every ndarray exports the buffer protocol, but numpy's stubs declare its
    # __buffer__ (PEP 688) only from Python 3.12 and the package is checked as 3.11.
    return cast("Buffer", arr)


def asm_text(op: ir.Operation | ir.OpView, debug_info: bool = False, assume_verified: bool = False) -> str:
    """``op.get_asm(enable_debug_info=debug_info)``, typed: jaxlib's stubs say
    ``object`` because ``binary=True`` gives bytes. ``assume_verified``: the
    caller has verified ``op`` (printing verifies it first otherwise, and
    printing invalid IR can crash)."""
    text = op.get_asm(enable_debug_info=debug_info, assume_verified=assume_verified)
    assert isinstance(text, str)
    return text


def dense_i64(values: Sequence[int] | Sequence[Sequence[int]] | np.ndarray,
              shape: Sequence[int] | None = None) -> ir.DenseIntElementsAttr:
    arr = np.ascontiguousarray(values, dtype=np.int64)
    if shape is not None:
        arr = arr.reshape(shape)
    t = ir.RankedTensorType.get(list(arr.shape), ir.IntegerType.get_signless(64))
    return ir.DenseIntElementsAttr.get(as_buffer(arr), type=t)


def dense_to_numpy(attr: ir.Attribute) -> np.ndarray:
    return np.array(ir.DenseIntElementsAttr(attr), dtype=np.int64)


def replace_op(op: ir.Operation, values: Sequence[ir.Value]) -> None:
    """Replaces every result of ``op`` by ``values`` and erases ``op``."""
    results = op.results
    if len(values) != len(results):
        raise ValueError(f"replacing {op.name} needs {len(results)} values, got {len(values)}")
    if any(new == old for new in values for old in results):  # the one way a result keeps its uses
        raise RuntimeError(f"cannot replace {op.name} by its own results")
    for old, new in zip(results, values):
        old.replace_all_uses_with(new)
    op.erase()  # every use now goes to ``values``


def erase_op(op: ir.Operation) -> None:
    """Erases ``op``; refuses (instead of crashing the process) if a result is still used."""
    for r in op.results:
        if any(True for _ in r.uses):
            raise RuntimeError(f"cannot erase {op.name}: its result is still used")
    op.erase()


def functions(module: ir.Operation) -> Iterator[ir.Operation]:
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func":
            yield op.operation


def symbol_name(op: ir.Operation) -> str | None:
    attr = op.attributes.get("sym_name")
    return ir.StringAttr(attr).value if isinstance(attr, ir.StringAttr) else None


def find_function(module: ir.Operation, name: str) -> ir.Operation | None:
    """The top-level ``func.func @name``, or None."""
    return next((f for f in functions(module) if symbol_name(f) == name), None)


def set_boundary_attrs(fn: ir.Operation, key: str, dicts: Sequence[dict[str, ir.Attribute]]) -> None:
    fn.attributes[key] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in dicts])
