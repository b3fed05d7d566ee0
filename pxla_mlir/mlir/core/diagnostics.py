"""MLIR diagnostics as plain records: collect, locate, print like mlir-opt.

The Python bindings can only emit errors (``Location.emit_error``), so
warnings and remarks from pxla passes travel through the active
:class:`DiagnosticCollector` instead; both kinds end up in one ordered list.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

from jaxlib.mlir import ir

__all__ = [
    "PassError",
    "Diagnostic",
    "DiagnosticCollector",
    "PxlaWarning",
    "emit",
    "location_of",
    "source_excerpt",
]

SEVERITIES = ("error", "warning", "note", "remark")


Where = Any  # ir.Operation | ir.OpView | ir.Value | ir.Location | None


class PassError(Exception):
    """A located failure of a pass: ``raise PassError(op, "what, and how to fix")`` in
    ``ModulePass.run`` stops the pass with an error at ``where`` (an op, a value or a location),
    followed by ``notes``, ``(where, message)`` pairs."""

    def __init__(self, where: Where, message: str, notes: Iterable[tuple[Where, str]] = ()):
        super().__init__(message)
        self.where = where
        self.message = message
        self.notes = tuple(notes)


_FILE_LINE_COL = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


@dataclasses.dataclass(frozen=True)
class SourceLoc:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def location_of(loc: ir.Location | None) -> SourceLoc | None:
    """The first file:line:col inside a location (works for name, call-site and
    fused locations too), or None for an unknown location."""
    if loc is None:
        return None
    m = _FILE_LINE_COL.search(str(loc))
    if m is None:
        return None
    return SourceLoc(m.group(1), int(m.group(2)), int(m.group(3)))


#: Longest source line shown whole under a diagnostic; longer ones show a window around the column.
EXCERPT_WIDTH = 160


def source_excerpt(source: bytes | str, line: int, col: int) -> list[str]:
    """The source line (tabs expanded, like LLVM's) and a caret line under
    byte column ``col`` (1-based); nothing if ``line`` is not in ``source``."""
    data = source.encode("utf-8", "surrogateescape") if isinstance(source, str) else source
    if line < 1:
        return []
    start = 0
    for _ in range(line - 1):
        start = data.find(b"\n", start) + 1
        if start == 0:
            return []
    end = data.find(b"\n", start)
    raw = data[start:] if end < 0 else data[start:end]
    raw = raw.rstrip(b"\r")
    text = raw.decode("utf-8", "replace").expandtabs(8)
    at = len(raw[:max(col - 1, 0)].decode("utf-8", "replace").expandtabs(8))
    if len(text) > EXCERPT_WIDTH:  # a window around the column
        half = EXCERPT_WIDTH // 2
        first = max(0, at - half)
        window = text[first:at + half]
        text = ("..." if first else "") + window + ("..." if at + half < len(text) else "")
        at = at - first + (3 if first else 0)
    return [text, " " * min(at, len(text)) + "^"]


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    severity: str  # one of SEVERITIES
    message: str
    loc: SourceLoc | None
    notes: tuple[Diagnostic, ...] = ()

    def format(self, buffer_name: str | None = None, source: bytes | str | None = None) -> str:
        """``file:line:col: error: message`` lines, notes indented after it.

        ``buffer_name`` replaces MLIR's name for an in-memory buffer ("-").
        With ``source`` (the text of that buffer), each diagnostic located in
        it is followed by its source line and a caret under the column, as
        mlir-opt prints them.
        """
        lines = [f"{self._where(buffer_name)}{self.severity}: {self.message}"]
        if source is not None and self.loc is not None and self.loc.file == "-":
            lines += source_excerpt(source, self.loc.line, self.loc.col)
        lines += [n.format(buffer_name, source) for n in self.notes]
        return "\n".join(lines)

    def _where(self, buffer_name: str | None) -> str:
        if self.loc is None:
            return "<unknown>: " if buffer_name is None else f"{buffer_name}: "
        file = buffer_name if (buffer_name and self.loc.file == "-") else self.loc.file
        return f"{file}:{self.loc.line}:{self.loc.col}: "

    @classmethod
    def from_mlir(cls, d) -> Diagnostic:
        """From an ``ir.Diagnostic`` or an ``MLIRError.error_diagnostics`` entry."""
        sev = str(d.severity).rsplit(".", 1)[-1].lower()
        notes = tuple(cls.from_mlir(n) for n in d.notes)
        return cls(sev if sev in SEVERITIES else "error", d.message, location_of(d.location), notes)

    def walk(self) -> Iterator[Diagnostic]:
        yield self
        for n in self.notes:
            yield from n.walk()


class PxlaWarning(UserWarning):
    """A pass warning or remark raised while no DiagnosticCollector was active."""


_active = threading.local()


def _stack() -> list[DiagnosticCollector]:
    if not hasattr(_active, "stack"):
        _active.stack = []
    return _active.stack


class DiagnosticCollector:
    """Collects every diagnostic of one context while active.

    Errors from parsing, verification and failed passes normally only reach
    ``MLIRError.error_diagnostics``; with the collector active they are routed
    here instead, in emission order, together with Python-side warnings.
    """

    def __init__(self, ctx: ir.Context):
        self.ctx = ctx
        self.diagnostics: list[Diagnostic] = []
        self._handler: ir.DiagnosticHandler | None = None
        self._saved_flag = False

    def __enter__(self) -> DiagnosticCollector:
        self._saved_flag = self.ctx.emit_error_diagnostics
        self.ctx.emit_error_diagnostics = True
        handler = self.ctx.attach_diagnostic_handler(self._on_diagnostic)
        assert isinstance(handler, ir.DiagnosticHandler)  # the stubs say object
        self._handler = handler
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _stack().remove(self)
        if self._handler is not None:  # None only outside the with block
            self._handler.detach()
        self.ctx.emit_error_diagnostics = self._saved_flag

    def _on_diagnostic(self, d) -> bool:
        try:
            self.diagnostics.append(Diagnostic.from_mlir(d))
        except Exception:  # a raising handler only prints; never lose the flow
            self.diagnostics.append(Diagnostic("error", str(getattr(d, "message", d)), None))
        return True

    def add(self, diag: Diagnostic) -> None:
        self.diagnostics.append(diag)

    def add_error(self, exc: ir.MLIRError) -> None:
        """Records an MLIRError's own diagnostics (those that bypassed the handler)."""
        for d in exc.error_diagnostics:
            self.diagnostics.append(Diagnostic.from_mlir(d))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def format(self, buffer_name: str | None = None, source: bytes | str | None = None) -> str:
        return "\n".join(d.format(buffer_name, source) for d in self.diagnostics)


def emit(severity: str, loc: ir.Location, message: str, notes: Iterable[tuple[ir.Location, str]] = ()) -> None:
    """Emits a diagnostic from Python.

    Errors go through MLIR (so a failing pass reports them the usual way);
    warnings, remarks and notes go to the innermost active collector, or become
    a :class:`PxlaWarning` when none is active.
    """
    note_diags = tuple(Diagnostic("note", m, location_of(l)) for l, m in notes)
    if severity == "error":
        loc.emit_error(message)
        if _stack() and note_diags:
            # Attach the notes to the error the handler has just recorded.
            coll = _stack()[-1]
            if coll.diagnostics and coll.diagnostics[-1].message == message:
                last = coll.diagnostics.pop()
                coll.add(dataclasses.replace(last, notes=last.notes + note_diags))
        return
    diag = Diagnostic(severity, message, location_of(loc), note_diags)
    if _stack():
        _stack()[-1].add(diag)
    else:
        warnings.warn(PxlaWarning(diag.format()), stacklevel=3)
