"""mlir-opt's ``--verify-diagnostics`` contract, for pxla-opt.

Source comments declare the diagnostics a run must produce::

    // expected-error @+1 {{placeholder @pxla.shard was not expanded}}
    // expected-warning@below {{always 0}}
    // expected-remark-re {{took {{[0-9]+}} steps}}
    // expected-note @unknown {{...}}

``@+N``/``@-N`` are line offsets, ``@above``/``@below`` the nearest line
above/below that carries no expectation, ``@unknown`` a diagnostic without a
file location. Text in ``{{...}}`` must occur in the message; in the ``-re``
form, nested ``{{...}}`` parts are regular expressions. A run passes only if
every expectation was met and no other diagnostic appeared.
"""

from __future__ import annotations

import dataclasses
import re

from pxla_mlir.mlir.core.diagnostics import Diagnostic

_EXPECT = re.compile(
    r"expected-(?P<kind>error|warning|note|remark)(?P<re>-re)?"
    r"\s*(?:@(?P<where>[+-]\d+|above|below|unknown))?\s*\{\{(?P<body>.*)\}\}")

# Notes that mlir-opt suppresses under --verify-diagnostics.
_IGNORED_NOTES = ("see current operation",)


@dataclasses.dataclass
class Expectation:
    kind: str
    line: int | None  # None: @unknown
    pattern: re.Pattern
    text: str
    source_line: int
    source_col: int
    met: bool = False

    def matches(self, d: Diagnostic) -> bool:
        line = d.loc.line if d.loc else None
        return d.severity == self.kind and line == self.line and bool(self.pattern.search(d.message))


def _pattern(body: str, is_re: bool) -> re.Pattern:
    if not is_re:
        return re.compile(re.escape(body))
    parts, pos = [], 0
    for m in re.finditer(r"\{\{(.*?)\}\}", body):
        parts.append(re.escape(body[pos:m.start()]))
        parts.append(f"(?:{m.group(1)})")
        pos = m.end()
    parts.append(re.escape(body[pos:]))
    return re.compile("".join(parts))


def parse_expectations(text: str) -> tuple[list[Expectation], list[str]]:
    """Expectations in ``text`` (line numbers are 1-based lines of ``text``)
    and errors about malformed ones."""
    lines = text.split("\n")  # as MLIR counts lines (str.splitlines also breaks at form feeds, U+2028, ...)
    has_designator = [bool(_EXPECT.search(l)) for l in lines]
    out, errors = [], []
    for i, line in enumerate(lines, start=1):
        m = _EXPECT.search(line)
        if not m:
            if re.search(r"expected-(error|warning|note|remark)", line):
                errors.append(f"{i}: malformed expectation (use '// expected-error@+1 {{{{message}}}}')")
            continue
        body = m.group("body") if m.group("re") else m.group("body").split("}}", 1)[0]
        where = m.group("where")
        if where is None:
            target = i
        elif where == "unknown":
            target = None
        elif where in ("above", "below"):
            step = -1 if where == "above" else 1
            target = i + step
            while 1 <= target <= len(lines) and has_designator[target - 1]:
                target += step
        else:
            target = i + int(where)
        try:
            pat = _pattern(body, bool(m.group("re")))
        except re.error as e:
            errors.append(f"{i}: invalid regular expression in expectation: {e}")
            continue
        out.append(Expectation(m.group("kind"), target, pat, body, i, m.start() + 1))
    return out, errors


@dataclasses.dataclass(frozen=True)
class Mismatch:
    line: int | None
    col: int | None
    message: str


def verify(expectations: list[Expectation], diagnostics: list[Diagnostic]) -> list[Mismatch]:
    """Matches diagnostics against expectations; returns what did not match."""
    problems: list[Mismatch] = []
    for d in diagnostics:
        for diag in d.walk():
            if diag.severity == "note" and diag.message.startswith(_IGNORED_NOTES):
                continue
            hit = next((e for e in expectations if not e.met and e.matches(diag)), None)
            if hit is None:
                hit = next((e for e in expectations if e.matches(diag)), None)  # repeats are fine
            if hit is not None:
                hit.met = True
                continue
            where = f" (at line {diag.loc.line})" if diag.loc else " (at an unknown location)"
            problems.append(Mismatch(diag.loc.line if diag.loc else None, diag.loc.col if diag.loc else None,
                                     f"unexpected {diag.severity}: {diag.message}{where}"))
    for e in expectations:
        if not e.met:
            on = "an unknown location" if e.line is None else f"line {e.line}"
            problems.append(Mismatch(e.source_line, e.source_col,
                                     f"expected {e.kind} \"{e.text}\" on {on} was not produced"))
    return problems
