"""The nesting-depth check every user-supplied MLIR text passes before jaxlib parses it.

jaxlib's MLIR parser recurses once per nesting level and has no limit of its
own: deep enough input overflows the C stack and the process dies with
SIGSEGV. Measured with jaxlib 0.10.2 at the default 8 MiB stack, the cheapest
levels are nested ``mhlo.while`` regions (crash at about 3,470 levels) and
nested modules (about 3,830); attributes (``[[[...``) crash at about 6,600,
types at about 15,900. ``MAX_NESTING`` stays well below all of them.

The scan counts ``(``, ``[``, ``{`` and ``<`` (not the ``>`` of ``->``)
outside string literals and ``//`` comments, plus runs of unary minus, which
the affine-expression parser also recurses on. A large input first gets an
upper bound of that depth from whole-buffer operations (regular expressions,
``bytes.translate``, a numpy running sum); only an input whose bound is over
the limit is scanned token by token for the exact place.
"""

from __future__ import annotations

import re

from pxla_mlir.errors import PxlaUserError

__all__ = ["MAX_NESTING", "NestingError", "check_nesting"]

#: Deepest nesting accepted (the parser crashes about 3.5x deeper, see above).
MAX_NESTING = 1000

_TOKENS = re.compile(rb'"(?:[^"\\\n]|\\.)*"|//[^\n]*|->|-(?:\s*-)+|[(\[{<]|[)\]}>]')
_OPENERS = b"([{<"
_CLOSERS = b")]}>"
_STRINGS = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
_SKIPPED = re.compile(rb'"(?:[^"\\\n]|\\.)*"|//[^\n]*')
_MINUS_RUN = re.compile(rb"-(?:\s*-)+")
_NOT_BRACKETS_OR_MINUS = bytes(c for c in range(256) if c not in _OPENERS + _CLOSERS + b"-")
_OPENERS_AND_MINUS = _OPENERS + b"-"


class NestingError(PxlaUserError, ValueError):
    """Input nested deeper than :data:`MAX_NESTING`; ``line``/``col`` are 1-based."""

    def __init__(self, line: int, col: int):
        self.line, self.col = line, col
        self.message = (f"input nested more than {MAX_NESTING} levels deep (brackets, regions or unary minus); "
                        f"jaxlib's MLIR parser would overflow its stack, so it is not parsed")
        super().__init__(f"{line}:{col}: {self.message}")


def check_nesting(text: str | bytes) -> None:
    """Raises :class:`NestingError` at the first place ``text`` gets too deep."""
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    if len(data) - len(data.translate(None, _OPENERS_AND_MINUS)) <= MAX_NESTING:
        return  # cannot be too deep: the common case costs one pass
    if _depth_bound(data) <= MAX_NESTING:
        return
    depth = 0
    for m in _TOKENS.finditer(data):
        token = m.group()
        first = token[:1]
        if first in (b'"', b"/") or token == b"->":
            continue
        if first == b"-":
            if depth + token.count(b"-") > MAX_NESTING:
                raise _error(data, m.start())
        elif first in b"([{<":
            depth += 1
            if depth > MAX_NESTING:
                raise _error(data, m.start())
        elif depth:
            depth -= 1


def _depth_bound(data: bytes) -> int:
    """At least the depth plus minus run the token scan of :func:`check_nesting`
    reaches anywhere in ``data``, in whole-buffer operations.

    Strings and comments are blanked exactly as the scan skips them. Dropping
    every ``>`` that follows a ``-`` (the scan keeps the one of ``-->``) and
    measuring minus runs with their spaces can only raise the result.
    """
    # Without "//" only strings are skipped; a pattern that starts with a literal searches much faster.
    code = (_SKIPPED if b"//" in data else _STRINGS).sub(b" ", data)
    longest_run = max((m.end() - m.start() for m in _MINUS_RUN.finditer(code)), default=0)
    # Arrows dropped after the other characters (far fewer bytes): that may also drop the ">" of a "- >",
    # which can only raise the result.
    brackets = code.translate(None, _NOT_BRACKETS_OR_MINUS).replace(b"->", b"").translate(None, b"-")
    if sum(brackets.count(c) for c in _OPENERS) + longest_run <= MAX_NESTING:
        return 0
    import numpy as np  # only for large inputs: pxla-opt starts without it

    step = np.zeros(256, np.int32)
    step[list(_OPENERS)] = 1
    step[list(_CLOSERS)] = -1
    total = np.cumsum(step[np.frombuffer(brackets, np.uint8)], dtype=np.int32)
    # A closer at depth 0 is ignored: the depth is the sum less its lowest point so far.
    depth = total - np.minimum(np.minimum.accumulate(total), 0)
    return int(depth.max(initial=0)) + longest_run


def _error(data: bytes, offset: int) -> NestingError:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return NestingError(data.count(b"\n", 0, offset) + 1, offset - line_start + 1)
