"""FileCheck lines that check a printed MLIR module (pure text; no jax, no MLIR bindings).

    // CHECK-LABEL: module @m attributes {
    // CHECK-SAME:    mhlo.num_partitions = 1 : i32,
    // CHECK-SAME:    mhlo.num_replicas = 4 : i32} {
    // CHECK-LABEL: func.func public @main(
    // CHECK-SAME:    %[[ARG0:[0-9A-Za-z_$.-]+]]: tensor<3xf32>)
    // CHECK-SAME:    -> tensor<3xf32> {
    // CHECK-NEXT:    %[[ALL_REDUCE:[0-9A-Za-z_$.-]+]] = "mhlo.all_reduce"(%[[ARG0]]) <{replica_groups = ...

One ``CHECK-LABEL`` per module and function (labels hold no variables, so
LLVM's FileCheck accepts them), ``CHECK-SAME`` per module attribute and
function argument, ``CHECK-NEXT`` for every following line, so an added,
removed or changed op fails. SSA values are captured under the name of their
defining op or their own name (``ALL_REDUCE``, ``ARG0``, ``CST``), unique within
a function: names are re-captured after each label, which works without
``--enable-var-scope`` in both the PyPI ``filecheck`` and LLVM's FileCheck.
The capture pattern is MLIR's value-name syntax, not ``.*``, so a capture can
never swallow a neighbouring argument. Literal constants longer than
``max_constant`` characters are elided (``dense<{{.*}}>``) and resource blobs
(``{-# ... #-}``) skipped; all else is checked as printed.

``find_blocks`` finds such lines kept in a test between the
``CHECK-GEN-BEGIN``/``CHECK-GEN-END`` markers (see ``update_checks``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["check_lines", "lines_of", "split_chunks", "Block", "find_blocks", "is_begin_marker", "block", "with_block",
           "MarkerError", "BEGIN", "END", "DEFAULT_SPLIT_MARKER"]

SSA_CAPTURE = "[0-9A-Za-z_$.-]+"  # MLIR's value names (suffix-id), without '#n'/':n'
_SSA = re.compile(r"%([0-9]+|[A-Za-z_$.-][0-9A-Za-z_$.-]*)")
_DEF = re.compile(r'^\s*%([0-9A-Za-z_$.-]+)(?::\d+)?(?:\s*,\s*%[0-9A-Za-z_$.-]+(?::\d+)?)*\s*=\s*"?([A-Za-z_][\w.$-]*)')
_FUNC = re.compile(r'^\s*(?:[A-Za-z_][\w.]*\.)?func\s+(?:(?:public|private|nested)\s+)?@(?:"[^"]*"|[\w$.-]+)\(')
_MODULE = re.compile(r"^\s*(?:builtin\.)?module\b[^{]*\{")
_CONSTANT = re.compile(r'^\s*%[^=]*=\s*"?[\w.$-]*\.constant\b')
DEFAULT_SPLIT_MARKER = "// -----"  # pxla-opt's and mlir-opt's
SPLIT_MARKER = re.compile(r"^// -----")
_OPEN, _CLOSE = "([{<", ")]}>"


def lines_of(text: str) -> list[str]:
    """``text``'s lines, broken at newlines only, as lit, FileCheck and MLIR break them
    (``str.splitlines`` also breaks at form feeds, U+2028 and others); a carriage return
    before the newline stays on its line."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def split_chunks(text: str, marker: str = DEFAULT_SPLIT_MARKER) -> list[str]:
    """The chunks of a ``--split-input-file`` output, at the lines that are ``marker``
    (``--output-split-marker``)."""
    chunks, current = [], []
    for line in lines_of(text):
        if line.rstrip("\r") == marker:
            chunks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    chunks.append("\n".join(current))
    return chunks


_SPECIAL_RUN = re.compile(r"\{*\[{2,}|\{{2,}")  # '[[' and '{{' start variables and regexes


def _escape(text: str) -> str:
    """Literal text for FileCheck: runs of '[' or '{' that FileCheck would read as
    a variable or a regex (with a '{' just before, which would join them) become regexes."""
    return _SPECIAL_RUN.sub(lambda m: "{{" + re.sub(r"([\[{])", r"\\\1", m.group(0)) + "}}", text)


def _join(pieces: Iterable[tuple[bool, str]]) -> str:
    """Literal and raw (already FileCheck syntax) pieces joined; a literal '{'
    just before a raw '{{' would join it, so it is escaped."""
    out = ""
    for literal, piece in pieces:
        if literal:
            piece = _escape(piece)
        elif out.endswith("{") and piece.startswith("{{"):
            out = out[:-1] + "{{\\{}}"
        out += piece
    return out


def _string_spans(line: str) -> list[tuple[int, int]]:
    spans, i = [], 0
    while (start := line.find('"', i)) >= 0:
        j = start + 1
        while j < len(line) and line[j] != '"':
            j += 2 if line[j] == "\\" else 1
        spans.append((start, j + 1))
        i = j + 1
    return spans


def _top_level_split(text: str, sep: str = ",") -> list[str]:
    """Pieces of ``text`` at top-level ``sep`` (outside brackets and strings),
    each keeping its separator."""
    pieces, depth, start, i = [], 0, 0, 0
    strings = dict(_string_spans(text))
    while i < len(text):
        if i in strings:
            i = strings[i]
            continue
        c = text[i]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE and not (c == ">" and i and text[i - 1] == "-"):
            depth -= 1
        elif c == sep and depth == 0:
            pieces.append(text[start:i + 1])
            start = i + 1
        i += 1
    pieces.append(text[start:])
    return [p.strip() for p in pieces if p.strip()]


def _matching(text: str, open_at: int) -> int:
    """Index of the bracket closing the one at ``open_at`` (len(text) if none)."""
    depth, strings, i = 0, dict(_string_spans(text)), open_at
    while i < len(text):
        if i in strings:
            i = strings[i]
            continue
        c = text[i]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE and not (c == ">" and text[i - 1] == "-"):
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


class _Names:
    """FileCheck variable names for the SSA values of one function."""

    def __init__(self, lines: Sequence[str]):
        self.ops = {}
        for line in lines:
            if m := _DEF.match(line):
                self.ops.setdefault(m.group(1), m.group(2))
        self.vars: dict[str, str] = {}
        self.used: set[str] = set()

    def _fresh(self, ssa: str) -> str:
        if not ssa[0].isdigit():
            base = ssa
        elif ssa in self.ops:
            base = self.ops[ssa].rsplit(".", 1)[-1]
        else:
            base = "val"
        base = re.sub(r"[^A-Za-z0-9_]", "_", base).upper()
        base = base if base[0].isalpha() or base[0] == "_" else "V" + base
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name

    def ref(self, ssa: str) -> tuple[bool, str]:
        """A raw FileCheck piece: a capture at the value's first occurrence, a use after."""
        if ssa in self.vars:
            return False, f"%[[{self.vars[ssa]}]]"
        self.vars[ssa] = name = self._fresh(ssa)
        return False, f"%[[{name}:{SSA_CAPTURE}]]"


def _pieces(text: str, names: _Names, elide: Sequence[str], max_constant: int | None):
    """``text`` as literal/raw pieces: SSA values named, constants and ``elide`` strings cut."""
    cuts = []  # (start, end, ssa name or None for {{.*}})
    if max_constant is not None and _CONSTANT.match(text):
        start = text.find("dense<")
        if start >= 0:
            end = _matching(text, start + len("dense"))
            if end - start - len("dense<") > max_constant:
                cuts.append((start + len("dense<"), end, None))
    for s in sorted({e for e in elide if e}, key=len, reverse=True):
        for m in re.finditer(re.escape(s), text):
            if not any(a < m.end() and m.start() < b for a, b, _ in cuts):
                cuts.append((m.start(), m.end(), None))
    strings = _string_spans(text)
    for m in _SSA.finditer(text):
        if not any(a <= m.start() < b for a, b in strings) and not any(a <= m.start() < b for a, b, _ in cuts):
            cuts.append((m.start(), m.end(), m.group(1)))
    pos = 0
    for start, end, ssa in sorted(cuts):
        if start > pos:
            yield True, text[pos:start]
        yield names.ref(ssa) if ssa is not None else (False, "{{.*}}")
        pos = end
    if pos < len(text):
        yield True, text[pos:]


def _label_pieces(line: str) -> tuple[str, list[str]] | None:
    """A module or function header as (label, CHECK-SAME pieces)."""
    text = line.strip()
    if _FUNC.match(line):
        open_at = text.index("(", text.index("@"))
        close = _matching(text, open_at)
        args = _top_level_split(text[open_at + 1:close])
        rest = text[close + 1:].strip()
        same = [a + ("," if i < len(args) - 1 else ")") for i, a in enumerate(a.rstrip(",") for a in args)]
        if not same:
            rest = ")" + (" " + rest if rest else "")
        return text[:open_at + 1], same + ([rest] if rest else [])
    if _MODULE.match(line):
        at = text.find(" attributes {")
        if at < 0:
            return text, []
        open_at = at + len(" attributes ")
        close = _matching(text, open_at)
        attrs = [a.rstrip(",") for a in _top_level_split(text[open_at + 1:close])]
        same = [a + ("," if i < len(attrs) - 1 else "") for i, a in enumerate(attrs)]
        if same:
            same[-1] += text[close:]
        return text[:open_at + 1], same
    return None


def check_lines(text: str, prefix: str = "CHECK", *, comment: str = "//", elide: Sequence[str] = (),
                max_constant: int | None = 64) -> list[str]:
    """CHECK lines for ``text`` (a printed module, or several joined by ``// -----``).

    ``elide``: substrings (e.g. temporary paths) checked as ``{{.*}}``.
    ``max_constant``: longest ``dense<...>`` constant checked in full (None: all).
    """
    lines = lines_of(text)
    width = len(prefix) + len("-LABEL: ")

    def emit(kind: str, pieces: Iterable[tuple[bool, str]]) -> None:
        head = f"{prefix}{kind}:"
        out.append(f"{comment} {head.ljust(width)}{_join(pieces)}".rstrip())

    # Functions (and modules) are name scopes: MLIR numbers values per function.
    scopes, start = [], 0
    for i, line in enumerate(lines):
        if _FUNC.match(line) or _MODULE.match(line) or SPLIT_MARKER.match(line):
            scopes.append((start, i))
            start = i
    scopes.append((start, len(lines)))
    scope_of = {}
    for a, b in scopes:
        names = _Names(lines[a:b])
        for i in range(a, b):
            scope_of[i] = names

    out: list[str] = []
    next_kind, in_resources = "", False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if in_resources or stripped.startswith("{-#"):
            in_resources = not stripped.endswith("#-}")
            next_kind = ""
            continue
        if not stripped or SPLIT_MARKER.match(line):
            next_kind = ""
            continue
        names = scope_of[i]
        label = _label_pieces(line)
        if label is not None:
            head, same = label
            emit("-LABEL", [(True, head)])
            for piece in same:
                emit("-SAME", [(True, "  ")] + list(_pieces(piece, names, elide, None)))
        else:
            indent = line[:len(line) - len(line.lstrip())]
            emit(next_kind, [(True, indent)] + list(_pieces(stripped, names, elide, max_constant)))
        next_kind = "-NEXT"
    return out


# -- generated blocks in a test file ------------------------------------------------------------------

BEGIN, END = "CHECK-GEN-BEGIN", "CHECK-GEN-END"
_MARKER = re.compile(r"^\s*(//|#|;)\s*(CHECK-GEN-BEGIN|CHECK-GEN-END)\b")


def block(checks: Sequence[str], comment: str = "//") -> list[str]:
    """``checks`` between the markers."""
    return [f"{comment} {BEGIN} (pxla-mlir update-checks rewrites the lines up to {END})", *checks,
            f"{comment} {END}"]


class MarkerError(ValueError):
    """Unbalanced CHECK-GEN-BEGIN/END markers, at ``line`` (1-based)."""

    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


def is_begin_marker(line: str) -> bool:
    m = _MARKER.match(line)
    return bool(m) and m.group(2) == BEGIN


@dataclass(frozen=True)
class Block:
    """A generated block: lines[begin] is its BEGIN marker, lines[end] its END marker (0-based)."""

    begin: int
    end: int


def find_blocks(lines: Sequence[str]) -> list[Block]:
    blocks, begin = [], None
    for i, line in enumerate(lines):
        m = _MARKER.match(line)
        if not m:
            continue
        if m.group(2) == BEGIN:
            if begin is not None:
                raise MarkerError(f"{BEGIN} inside the block begun at line {begin + 1}", i + 1)
            begin = i
        else:
            if begin is None:
                raise MarkerError(f"{END} without a {BEGIN} before it", i + 1)
            blocks.append(Block(begin, i))
            begin = None
    if begin is not None:
        raise MarkerError(f"{BEGIN} without a {END} after it", begin + 1)
    return blocks


def with_block(text: str, checks: Sequence[str], comment: str = "//") -> str:
    """``text`` with its one generated block holding ``checks`` (appended if it has none)."""
    lines = lines_of(text)
    blocks = find_blocks(lines)
    if len(blocks) > 1:
        raise MarkerError(f"a second generated block (the first is at line {blocks[0].begin + 1})", blocks[1].begin + 1)
    if blocks:
        lines[blocks[0].begin:blocks[0].end + 1] = block(checks, comment)
    else:
        lines += ([""] if lines and lines[-1].strip() else []) + block(checks, comment)
    return "\n".join(lines) + "\n"
