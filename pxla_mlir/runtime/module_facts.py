"""What compiling reads of a final module, kept apart from the module so a
warm start can skip parsing it.

:func:`~pxla_mlir.runtime.compile.compile_program` needs of a module only
its name, a digest of its text without locations (the executable's cache
key), its replica and partition counts, whether it is in Shardy form, and
whether it may reach XLA at all; the text itself only when XLA compiles it.
:class:`ModuleFacts` holds those facts; the lowering cache stores them beside
the module's text, so a map lowered from the cache and whose executable is
in the persistent cache is launched without parsing or printing anything.
:class:`ModuleToCompile` is the module as compiling sees it: each of those
read (or parsed, or printed) once, when first needed.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import cast

import numpy as np
from jaxlib.mlir import ir

from pxla_mlir.jaxbridge import jax_internals
from pxla_mlir.jaxbridge.stablehlo_lowering import LOWERING_LOCK
from pxla_mlir.mlir.core import replica_shardings
from pxla_mlir.mlir.core.pxla_attrs import device_counts
from pxla_mlir.mlir.core.shardy import uses_shardy

__all__ = ["ModuleFacts", "ModuleToCompile", "REPLICA_SHARDING", "KNOWN_CRASH"]

#: Kinds of refusal: the module would abort the process running it, or crash the installed jaxlib's compiler.
REPLICA_SHARDING = "replica-sharding"
KNOWN_CRASH = "known-crash"


@dataclasses.dataclass(frozen=True)
class ModuleFacts:
    """A final module as compiling sees it, without the module."""

    name: str | None  # its sym_name (None: a module read from text may have none): names its executable
    digest: bytes  # sha256 of its MHLO text without locations: what XLA compiles
    replicas: int
    partitions: int
    shardy: bool  # in the sdy form: Shardy partitions it
    refusal: tuple[str, str] | None = None  # (kind, why) it must not reach XLA, or None

    def to_json(self) -> dict:
        return {"name": self.name, "digest": self.digest.hex(), "replicas": self.replicas,
                "partitions": self.partitions, "shardy": self.shardy,
                "refusal": list(self.refusal) if self.refusal else None}

    @classmethod
    def from_json(cls, data: dict) -> ModuleFacts:
        """The facts :meth:`to_json` wrote; ValueError/KeyError/TypeError for anything else."""
        refusal = data["refusal"]
        name = data["name"]
        facts = cls(None if name is None else str(name), bytes.fromhex(data["digest"]), int(data["replicas"]),
                    int(data["partitions"]), bool(data["shardy"]),
                    (str(refusal[0]), str(refusal[1])) if refusal else None)
        if len(facts.digest) != 32 or facts.replicas < 1 or facts.partitions < 1:
            raise ValueError(f"not the facts of a module: {data!r}")
        return facts

    @classmethod
    def of(cls, module: ir.Module, text: str) -> ModuleFacts:
        """The facts of ``module``, whose MHLO text without locations is ``text``."""
        op = module.operation
        name = ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else None
        replicas, partitions = device_counts(op)
        shardy = uses_shardy(op)
        return cls(name, hashlib.sha256(text.encode()).digest(), replicas, partitions, shardy,
                   _refusal(module, partitions, shardy))


def _refusal(module: ir.Module, partitions: int, shardy: bool) -> tuple[str, str] | None:
    crash = _known_crash(module, partitions, shardy)
    if crash is not None:
        return KNOWN_CRASH, crash
    found = replica_shardings.first_problem(module.operation)
    if found is not None:
        op, problem = found
        return REPLICA_SHARDING, f"{problem} (at {op.location})"
    return None


def _known_crash(module: ir.Module, partitions: int, shardy: bool) -> str | None:
    """Why the installed jaxlib would kill the process compiling ``module``, or None.

    jaxlib 0.11 segfaults partitioning a Shardy program that takes an
    argument with no elements beside others (jax.jit of shard_map does too).
    """
    if jax_internals.JAX_VERSION[:2] != (0, 11) or partitions < 2 or not shardy:
        return None
    main = next((op for op in module.body.operations if op.operation.name == "func.func"
                 and ir.StringAttr(op.attributes["sym_name"]).value == "main"), None)
    if main is None:
        return None
    inputs = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).inputs
    sizes = [int(np.prod(ir.RankedTensorType(t).shape)) for t in inputs if isinstance(t, ir.RankedTensorType)]
    if 0 in sizes and len(sizes) > 1:
        return (f"argument {sizes.index(0)} has no elements, and jaxlib {jax_internals.JAX_VERSION_TEXT}'s compiler "
                f"crashes the process on a partitioned Shardy program with such an argument beside others; lower "
                f"the map with shardings=\"gspmd\" (a pmap also with mode=\"replica\"), or use another jax release")
    return None


class ModuleToCompile:
    """A final module for :func:`~pxla_mlir.runtime.compile.compile_program`:
    the ``ir.Module`` (or how to parse it), its text without locations (printed
    once per compile: :meth:`forget_text`) and its :class:`ModuleFacts`.

    Given facts stand for the module only while it has not been parsed. A
    module in hand may have been rewritten in place since its facts were read
    (``Lowered.mhlo()`` is the module itself), so its facts are those of its
    text as printed now: read again when that text's digest is another.

    Each is made under LOWERING_LOCK, taken first (the module may live in the
    shared lowering context, whose parses and prints take that lock too): one
    lock, one order, whichever thread asks first."""

    def __init__(self, module: ir.Module | Callable[[], ir.Module], facts: ModuleFacts | None = None):
        self._module = module
        self._parsed: ir.Module | None = None if callable(module) else module
        self._text: str | None = None
        self._facts = facts

    @property
    def module(self) -> ir.Module:
        with LOWERING_LOCK:
            if self._parsed is None:
                assert callable(self._module)
                self._parsed = self._module()
            return self._parsed

    @property
    def text(self) -> str:
        """The MHLO text without locations: what XLA compiles."""
        with LOWERING_LOCK:
            if self._text is None:
                self._text = cast(str, self.module.operation.get_asm(enable_debug_info=False))  # text, not bytes
            return self._text

    def forget_text(self) -> None:
        """Drops the printed text: after a compile (a lowering holds no second copy of its module) and when
        the module is handed out to be rewritten in place (``Lowered.mhlo()``), so that the next compile prints
        the module as it is then."""
        self._text = None

    @property
    def facts(self) -> ModuleFacts:
        with LOWERING_LOCK:
            if self._parsed is None and self._facts is not None:  # a cached lowering nobody parsed
                return self._facts
            text = self.text
            if self._facts is None or self._facts.digest != hashlib.sha256(text.encode()).digest():
                self._facts = ModuleFacts.of(self.module, text)
            return self._facts
