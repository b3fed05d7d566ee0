"""Reductions of functions and their boundaries: functions removed with their
calls, arguments and results of the functions nothing in the module calls
(``@main`` and other entry points), whose signatures no caller depends on,
and ops of such functions turned into new arguments.

A removed call's results are replaced as a removed op's are
(:mod:`.substitutes`); a removed argument's uses by another argument of its
type that stays, or by a zero constant. An op turned into arguments (as
llvm-reduce's operands-to-args) goes where a zero would not do: a pipeline
that folds constants would fold the failure away with it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.reduce.reductions import Unit, removable
from pxla_mlir.mlir.reduce.substitutes import ISOLATED, Substitutes, remove_ops, walk_with_index

__all__ = ["RemoveFunctions", "RemoveArguments", "RemoveResults", "OpsToArguments"]

_SYMBOL = re.compile(r'@("(?:[^"\\]|\\.)*"|[\w$.-]+)')


def _functions(module: ir.Module) -> list[ir.Operation]:
    return list(ir_utils.functions(module.operation))


def _has_body(fn: ir.Operation) -> bool:
    return len(fn.regions[0].blocks) > 0


def _name(fn: ir.Operation) -> str:
    return ir_utils.symbol_name(fn) or ""


def _uncalled(module: ir.Module) -> list[int]:
    """Indices of the functions whose name the module mentions only where it defines them: no call, no
    symbol reference in an attribute (a mention in a string counts too, to be safe)."""
    mentions: dict[str, int] = {}
    for m in _SYMBOL.finditer(str(module)):
        name = m.group(1)
        name = name[1:-1] if name.startswith('"') else name
        mentions[name] = mentions.get(name, 0) + 1
    return [i for i, fn in enumerate(_functions(module)) if mentions.get(_name(fn), 0) <= 1 and _has_body(fn)]


def _calls_to(module: ir.Module, names: set[str]) -> list[ir.Operation]:
    calls = []
    for op in ir_utils.walk(module.operation):
        if op.name == "func.call" and "callee" in op.attributes:
            callee = str(op.attributes["callee"]).lstrip("@").strip('"')
            if callee in names:
                calls.append(op)
    return calls


@dataclasses.dataclass(frozen=True)
class RemoveFunctions:
    """Removes functions and every call to them."""

    name: str = "remove-functions"

    def units(self, module: ir.Module) -> list[Unit]:
        return list(range(len(_functions(module))))

    def apply(self, module: ir.Module, units: Sequence[Unit]) -> None:
        functions = _functions(module)
        chosen = [functions[i] for i in sorted(u for u in units if isinstance(u, int))]
        remove_ops(_calls_to(module, {_name(fn) for fn in chosen}), Substitutes(module))
        for fn in chosen:
            ir_utils.erase_op(fn)


def _function_type(fn: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)


def _without(fn: ir.Operation, key: str, drop: set[int]) -> None:
    if key in fn.attributes:
        entries = list(ir.ArrayAttr(fn.attributes[key]))
        fn.attributes[key] = ir.ArrayAttr.get([e for i, e in enumerate(entries) if i not in drop])


def _by_function(units: Sequence[Unit]) -> dict[int, set[int]]:
    chosen: dict[int, set[int]] = {}
    for unit in units:
        if isinstance(unit, tuple):
            chosen.setdefault(unit[0], set()).add(unit[1])
    return chosen


@dataclasses.dataclass(frozen=True)
class RemoveArguments:
    """Removes arguments of the functions nothing calls; a used one is replaced by another argument of its
    type that stays, or by a zero constant (an argument of a type with neither stays)."""

    name: str = "remove-arguments"

    def units(self, module: ir.Module) -> list[Unit]:
        functions = _functions(module)
        return [(i, a) for i in _uncalled(module) for a in range(len(_function_type(functions[i]).inputs))]

    def apply(self, module: ir.Module, units: Sequence[Unit]) -> None:
        functions = _functions(module)
        substitutes = Substitutes(module)
        for index, drop in sorted(_by_function(units).items()):
            fn = functions[index]
            entry = fn.regions[0].blocks[0]
            args = list(entry.arguments)
            removed: set[int] = set()
            for a in sorted(drop):  # every use replaced before any argument goes: an erased one's handle is dead
                arg = args[a]
                if any(True for _ in arg.uses):
                    kept = [x for i, x in enumerate(args) if x.type == arg.type and i not in drop]
                    value = kept[0] if kept else substitutes.zero_in(entry, arg.type)
                    if value is None:
                        continue
                    arg.replace_all_uses_with(value)
                removed.add(a)
            for a in sorted(removed, reverse=True):
                entry.erase_argument(a)
            ftype = _function_type(fn)
            inputs = [t for i, t in enumerate(ftype.inputs) if i not in removed]
            fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, list(ftype.results)))
            _without(fn, "arg_attrs", removed)


@dataclasses.dataclass(frozen=True)
class RemoveResults:
    """Removes results of the functions nothing calls, from the function type and every return."""

    name: str = "remove-results"

    def units(self, module: ir.Module) -> list[Unit]:
        functions = _functions(module)
        return [(i, r) for i in _uncalled(module) for r in range(len(_function_type(functions[i]).results))]

    def apply(self, module: ir.Module, units: Sequence[Unit]) -> None:
        functions = _functions(module)
        for index, drop in sorted(_by_function(units).items()):
            fn = functions[index]
            for block in fn.regions[0].blocks:
                operations = list(block.operations)
                last = operations[-1].operation if operations else None
                if last is None or last.name != "func.return":
                    continue
                kept = [v for i, v in enumerate(last.operands) if i not in drop]
                ir.Operation.create("func.return", operands=kept, ip=ir.InsertionPoint(last), loc=last.location)
                last.erase()  # a return has no results
            ftype = _function_type(fn)
            results = [t for i, t in enumerate(ftype.results) if i not in drop]
            fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(list(ftype.inputs), results))
            _without(fn, "res_attrs", drop)


def _function_of(op: ir.Operation) -> ir.Operation | None:
    """The function whose body holds ``op`` with nothing isolated in between (None: another isolated op)."""
    parent = op.parent
    while parent is not None and parent.name not in ISOLATED:
        parent = parent.parent
    return parent.operation if parent is not None and parent.name == "func.func" else None


@dataclasses.dataclass(frozen=True)
class OpsToArguments:
    """Replaces ops of the functions nothing calls by new arguments of those functions, one per used result."""

    name: str = "ops-to-arguments"

    def units(self, module: ir.Module) -> list[Unit]:
        entries = {_name(f) for i, f in enumerate(_functions(module)) if i in set(_uncalled(module))}
        found: list[Unit] = []
        for i, op in enumerate(walk_with_index(module)):
            fn = _function_of(op) if removable(op) and len(op.results) else None
            if fn is not None and _name(fn) in entries:
                found.append(i)
        return found

    def apply(self, module: ir.Module, units: Sequence[Unit]) -> None:
        ops = walk_with_index(module)
        for index in sorted((u for u in units if isinstance(u, int)), reverse=True):
            op = ops[index]
            fn = _function_of(op)
            if fn is None:
                continue
            entry = fn.regions[0].blocks[0]
            added = []
            for result in op.results:
                if any(True for _ in result.uses):
                    arg = entry.add_argument(result.type, op.location)
                    result.replace_all_uses_with(arg)
                    added.append(result.type)
            ir_utils.erase_op(op)
            if added:
                ftype = _function_type(fn)
                fn.attributes["function_type"] = ir.TypeAttr.get(
                    ir.FunctionType.get([*ftype.inputs, *added], list(ftype.results)))
                if "arg_attrs" in fn.attributes:
                    entries = list(ir.ArrayAttr(fn.attributes["arg_attrs"]))
                    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(entries + [ir.DictAttr.get({}) for _ in added])
