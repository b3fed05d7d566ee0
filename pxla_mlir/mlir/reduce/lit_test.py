"""The reduced module as a lit test (``pxla-mlir reduce --emit-lit-test``).

* A pipeline's diagnostics: ``pxla-opt %s --pass-pipeline=... --verify-diagnostics``
  with an ``// expected-error @below {{...}}`` line (warning, note, remark) above
  each line a diagnostic points at, ``@unknown`` for one without a place, as
  pxla-opt and mlir-opt check them; where a diagnostic points into another file
  (a module printed with its locations), ``not pxla-opt ... 2>&1 | filecheck %s``
  with a ``CHECK:`` line per error instead.
* Any other test: its RUN line and ``CHECK:`` lines, given by the caller.

The text of a check is the message's first line, cut before anything the
checker would read as a pattern (``}}`` in ``{{...}}``; ``{{``, ``[[`` for
FileCheck).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from pxla_mlir.mlir.core.diagnostics import Diagnostic

__all__ = ["pipeline_test", "checked_test", "command_test", "filecheck_text", "lit_command"]

#: mlir-opt leaves these notes out under --verify-diagnostics, and so does pxla-opt.
_IGNORED_NOTES = ("see current operation",)


def _first_line(message: str) -> str:
    return message.strip().split("\n", 1)[0].rstrip()


def _expectation_text(message: str) -> str:
    return _first_line(message).split("}}", 1)[0].rstrip()


def filecheck_text(message: str) -> str:
    """``message``'s first line as a FileCheck pattern that matches it literally (cut before ``{{`` or ``[[``)."""
    return re.split(r"\{\{|\[\[", _first_line(message), maxsplit=1)[0].rstrip()


def lit_command(command: str) -> str:
    """A shell command as a RUN line's text: lit reads ``%`` as the start of a substitution."""
    return command.replace("%", "%%")


def _header(run: str, note: str) -> list[str]:
    return [f"// RUN: {run}", *([f"// {line}" for line in note.splitlines()] if note else []), ""]


def _located(diagnostics: Sequence[Diagnostic], lines: int) -> bool:
    """Whether every diagnostic points into the checked text itself (or nowhere)."""
    return all(d.loc is None or (d.loc.file == "-" and 1 <= d.loc.line <= lines)
               for top in diagnostics for d in top.walk())


def pipeline_test(text: str, pipeline: str, diagnostics: Sequence[Diagnostic], *, plugins: Sequence[str] = (),
                  verify_each: bool = False, note: str = "") -> str:
    """A lit test that runs ``pipeline`` on ``text`` and checks ``diagnostics``, where they point."""
    flags = [f"--load-pass-plugin={shlex.quote(p)}" for p in plugins]
    flags.append(f"--pass-pipeline={shlex.quote(pipeline)}")
    if verify_each:
        flags.append("--verify-each")
    options = lit_command(" ".join(flags))
    module = text.rstrip("\n").split("\n")
    if not _located(diagnostics, len(module)):
        errors = [d for top in diagnostics for d in top.walk() if d.severity == "error"]
        run = f"not pxla-opt %s {options} 2>&1 | filecheck %s"
        checks = [f"// CHECK: error: {filecheck_text(d.message)}" for d in errors]
        return "\n".join([*_header(run, note), *checks, *([""] if checks else []), *module]) + "\n"
    above: dict[int, list[str]] = {}
    unknown: list[str] = []
    for top in diagnostics:
        for d in top.walk():
            if d.severity == "note" and d.message.startswith(_IGNORED_NOTES):
                continue
            body = _expectation_text(d.message)
            if d.loc is None:
                unknown.append(f"// expected-{d.severity} @unknown {{{{{body}}}}}")
                continue
            target = module[d.loc.line - 1]
            indent = target[:len(target) - len(target.lstrip())]
            above.setdefault(d.loc.line, []).append(f"{indent}// expected-{d.severity} @below {{{{{body}}}}}")
    out = _header(f"pxla-opt %s {options} --verify-diagnostics", note)
    out += unknown + ([""] if unknown else [])
    for number, line in enumerate(module, start=1):
        out += above.get(number, [])
        out.append(line)
    return "\n".join(out) + "\n"


def checked_test(text: str, run: str, checks: Sequence[str], *, note: str = "") -> str:
    """A lit test with the RUN line ``run`` (lit's syntax: ``%s`` is the test) and ``CHECK:`` lines."""
    lines = [f"// CHECK: {c}" for c in checks]
    return "\n".join([*_header(run, note), *lines, *([""] if lines else []), text.rstrip("\n")]) + "\n"


#: Shell syntax a RUN line would read otherwise than bash does (lit's shell fails a pipeline when any stage
#: fails; bash, which ran the test, looks at the last one) or not at all.
_BASH_ONLY = re.compile(r"[|$`;&<>*?~]|\[\[")


def command_test(text: str, command: str, *, note: str = "") -> str:
    """A lit test whose RUN line is a reducer's ``--test`` command on the test itself (exit 0: it passes), run by
    bash as the reducer ran it where lit's shell would read it otherwise."""
    run = command if "{}" in command else f"{command} {{}}"
    if _BASH_ONLY.search(run):
        run = f"bash -c {shlex.quote(run)}"
    return checked_test(text, lit_command(run).replace("{}", "%s"), (), note=note)
