"""The nesting-depth check every user-supplied MLIR text passes before jaxlib parses it.

jaxlib's MLIR parser recurses once per nesting level and has no limit of its
own: deep enough input overflows the C stack and the process dies with
SIGSEGV. Measured with jaxlib 0.10.2 at the default 8 MiB stack, the cheapest
levels are nested ``mhlo.while`` regions (crash at about 3,470 levels) and
nested modules (about 3,830); attributes (``[[[...``) crash at about 6,600,
types at about 15,900. ``MAX_NESTING`` stays well below all of them.

The scan counts ``(``, ``[``, ``{`` and ``<`` (not the ``>`` of ``->``)
outside string literals and ``//`` comments, plus runs of unary minus, which
the affine-expression parser also recurses on.
"""

from __future__ import annotations

import re

from ..errors import PxlaUserError

__all__ = ["MAX_NESTING", "NestingError", "check_nesting"]

#: Deepest nesting accepted (the parser crashes about 3.5x deeper, see above).
MAX_NESTING = 1000

_TOKENS = re.compile(rb'"(?:[^"\\\n]|\\.)*"|//[^\n]*|->|-(?:\s*-)+|[(\[{<]|[)\]}>]')
_OPENERS = b"([{<"


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
    if sum(data.count(c) for c in _OPENERS) + data.count(b"-") <= MAX_NESTING:
        return  # cannot be too deep: the common case costs a few counts
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


def _error(data: bytes, offset: int) -> NestingError:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return NestingError(data.count(b"\n", 0, offset) + 1, offset - line_start + 1)
