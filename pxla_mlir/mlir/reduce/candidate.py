"""Candidates: module texts the reducer makes from a base text, each parsed,
changed, verified and printed by MLIR, with their size and digest.

A candidate that does not verify is never printed (printing invalid IR can
crash the process) and never tested. Sizes order candidates: fewer ops first,
then fewer characters, so that every accepted step makes the module strictly
smaller and the reduction ends.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from collections.abc import Callable

from jaxlib.mlir import ir

from pxla_mlir.mlir.core.context import make_context

__all__ = ["Size", "Printer", "digest", "op_count", "size_of"]


@dataclasses.dataclass(frozen=True, order=True)
class Size:
    """How big a module is: its ops (the module itself not counted), then its characters."""

    ops: int
    chars: int

    def __str__(self) -> str:
        return f"{self.ops} ops"


def digest(text: str) -> str:
    """The key under which a candidate's verdict is kept: equal texts are tested once."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def op_count(module: ir.Module) -> int:
    """Every op nested in the module (functions and terminators included), not the module itself."""
    count = 0

    def visit(_op):
        nonlocal count
        count += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count - 1


def size_of(module: ir.Module, text: str) -> Size:
    return Size(op_count(module), len(text))


class Printer:
    """Parses base texts and prints changed modules, in one context of its own.

    ``debug_info``: print locations (``loc(...)``) too, for a test that reads them.
    """

    def __init__(self, *, debug_info: bool = False):
        self.debug_info = debug_info
        self.ctx = make_context(threading=False)

    def parse(self, text: str) -> ir.Module:
        """The module of ``text``; raises ``ir.MLIRError`` when it does not parse or verify."""
        with self.ctx:
            return ir.Module.parse(text)

    def print(self, module: ir.Module) -> str | None:
        """``module`` printed, or None when it does not verify."""
        with self.ctx:
            try:
                module.operation.verify()
            except ir.MLIRError:
                return None
            out = io.StringIO()
            module.operation.print(file=out, enable_debug_info=self.debug_info, assume_verified=True)
        return out.getvalue()

    def made(self, base: str, change: Callable[[ir.Module], None]) -> tuple[str, Size] | None:
        """The text and size of ``base`` after ``change``; None when the change fails or leaves a module that
        does not verify (such a candidate is never tested)."""
        module = self.parse(base)
        with self.ctx, ir.Location.unknown():
            try:
                change(module)
            except (ValueError, RuntimeError, IndexError, ir.MLIRError):
                return None  # a unit that cannot apply here (the helpers refuse before they break the IR)
        text = self.print(module)
        if text is None:
            return None
        return text, size_of(module, text)

    def normalized(self, text: str) -> tuple[str, Size]:
        """``text`` as MLIR prints it (the first candidate); raises ``ir.MLIRError`` when it does not parse."""
        module = self.parse(text)
        printed = self.print(module)
        if printed is None:  # Module.parse verifies; only a printer that changed its mind gets here
            raise ValueError("the module does not verify")
        return printed, size_of(module, printed)
