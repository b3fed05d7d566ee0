"""What a pass of one's own (a plugin's) is held to: checked by the bridge around its ``run``.

A user's pass runs in the user's process, beside their training state.
Whatever it does, the outcome is an error that names it, never a signal, a
silently wrong program or a module its map cannot launch. Around each run of
a plugin's pass the bridge (:mod:`.base`) takes a :class:`Watch` of the
module and, after it:

* @main and every other public function are still there (callers call them);
* a ``checks_only`` pass changed nothing (the module prints as before);
* in a map's pipeline, @main keeps the signature the map launches: its
  arguments and results, their types and their attributes (shardings,
  donation, the pxla form's layout);
* a Python object it kept of the module's operations stays valid IR, or
  raises "the operation has been invalidated" when touched
  (:func:`release`), where it would have read freed memory and killed the
  process once a later pass erased its operation or the module was freed.

The module verifying after it is checked by the bridge itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils

__all__ = ["Watch", "context_references", "kept_modules", "public_functions", "release"]


@dataclasses.dataclass(frozen=True)
class Signature:
    """@main's boundary as text: argument and result types, and the attributes of each."""

    inputs: tuple[str, ...]
    results: tuple[str, ...]
    arg_attrs: tuple[str, ...]
    res_attrs: tuple[str, ...]

    @classmethod
    def of(cls, module: ir.Operation) -> Signature | None:
        main = ir_utils.find_function(module, "main")
        if main is None:
            return None
        ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        inputs, results = tuple(map(str, ftype.inputs)), tuple(map(str, ftype.results))
        return cls(inputs, results, _attrs(main, "arg_attrs", len(inputs)), _attrs(main, "res_attrs", len(results)))

    def changes(self, after: Signature) -> str:
        """What differs, said as a user reads it ("" if nothing)."""
        for what, before_types, after_types, before_attrs, after_attrs in (
                ("argument", self.inputs, after.inputs, self.arg_attrs, after.arg_attrs),
                ("result", self.results, after.results, self.res_attrs, after.res_attrs)):
            if len(before_types) != len(after_types):
                return f"it has {len(after_types)} {what}s instead of {len(before_types)}"
            for i, (b, a) in enumerate(zip(before_types, after_types)):
                if b != a:
                    return f"{what} {i} is {a} instead of {b}"
            for i, (b, a) in enumerate(zip(before_attrs, after_attrs)):
                if b != a:
                    return f"the attributes of {what} {i} are {a or '{}'} instead of {b or '{}'}"
        return ""


def _attrs(main: ir.Operation, name: str, n: int) -> tuple[str, ...]:
    if name not in main.attributes:
        return ("",) * n
    return tuple(str(a) if str(a) != "{}" else "" for a in ir.ArrayAttr(main.attributes[name]))


@dataclasses.dataclass(frozen=True)
class Watch:
    """What a plugin's pass must leave as it found it, taken before it runs."""

    functions: frozenset[str]
    signature: Signature | None  # in a map's pipeline only
    digest: bytes | None  # a checks_only pass's module, printed

    @classmethod
    def before(cls, module: ir.Operation, *, checks_only: bool, keep_main: bool) -> Watch:
        return cls(frozenset(public_functions(module)), Signature.of(module) if keep_main else None,
                   _digest(module) if checks_only else None)

    def broken(self, module: ir.Operation) -> str:
        """How the pass broke its promises, as the end of a sentence naming it ("" if it did not)."""
        lost = sorted(self.functions - set(public_functions(module)))
        if lost:
            return (f"removed the public function {', '.join('@' + n for n in lost)}, which callers of the module "
                    f"call: keep it (a pass may rewrite its body)")
        if self.digest is not None and _digest(module) != self.digest:
            return ("is declared checks_only but changed the module: set checks_only = False on a pass that "
                    "rewrites (or leave the module as it is)")
        if self.signature is not None:
            after = Signature.of(module)
            changed = "@main is gone" if after is None else self.signature.changes(after)
            if changed:
                return (f"changed the signature of @main, which the map launches as it was: {changed} (a pass in "
                        f"a map may rewrite @main's body, not its arguments, results or their attributes)")
        return ""


def public_functions(module: ir.Operation) -> list[str]:
    """The module's public ``func.func`` names: what its callers (jax, XLA, another module) call."""
    names = []
    for op in module.regions[0].blocks[0].operations:
        visibility = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None  # noqa: SIM401 (no .get)
        if op.operation.name == "func.func" and (visibility is None or ir.StringAttr(visibility).value == "public"):
            names.append(ir.StringAttr(op.attributes["sym_name"]).value)
    return names


def _digest(module: ir.Operation) -> bytes:
    text = module.get_asm(binary=True, enable_debug_info=True)
    return hashlib.sha256(text if isinstance(text, bytes) else str(text).encode()).digest()


#: Modules holding the operations a pass kept Python objects of after its run: kept, unchanged, for the
#: process's life (a module is dropped and its operations freed, while the objects may still be touched).
_KEPT: list[ir.Module] = []


def context_references(module: ir.Operation) -> int:
    """How many Python objects refer to the module's context: each operation, value, type or attribute a
    pass keeps adds one."""
    return sys.getrefcount(module.context)


def release(module: ir.Operation, references_before: int) -> None:
    """After a plugin's pass: if it kept Python objects of the module (its context has more references than
    before the pass ran), the operations they may point at move into a module kept for the process's life and
    copies take their place, so a kept object stays valid IR, whatever later passes erase and whenever the
    module is freed; the module's own object, which the pass was handed, is invalidated (touching it raises
    "the operation has been invalidated"). MLIR's Python bindings cannot tell which objects are alive, so
    this is done for every operation of the module: only when something was kept."""
    if context_references(module) <= references_before:
        return
    block = module.regions[0].blocks[0]
    originals = [op.operation for op in block.operations]
    with module.context, module.location:
        holder = ir.Module.create()
        for op in originals:  # copies first, in order, after the originals
            op.clone(ir.InsertionPoint(block))
        for op in originals:
            holder.body.append(op)
    _KEPT.append(holder)
    module._set_invalid()


def kept_modules() -> int:
    """How many modules are kept for passes that kept objects of them (tests)."""
    return len(_KEPT)
