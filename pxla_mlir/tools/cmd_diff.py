"""pxla-mlir diff A B: an MLIR-aware diff of two modules (files or emit specs).

An emit spec is ``TARGET?key=value&...`` with the keys of ``pxla-mlir emit``
(``map``, ``unshard``, ``mode``, ``lowering``, ``shardings``, ``stage``, ``dialect``, ``arg``,
``mesh``, ``axis-name``, ``in-axes``, ...), e.g.
``examples/nested_reduction.py:two_level_sum?unshard=all-reduce``.
Exit 0: the same; 1: different (the diff is printed) or an error.
"""

from __future__ import annotations

import os
import sys
import urllib.parse

from .errors import CliError


def add_parser(sub) -> None:
    d = sub.add_parser("diff", help="MLIR-aware diff of two modules (exit 1 when they differ)")
    d.add_argument("a", help="a .mlir file, '-' for stdin, or an emit spec TARGET?key=value&...")
    d.add_argument("b", help="the same, for the other side")
    d.add_argument("--ignore", action="append", default=[], metavar="ATTR",
                   help="an attribute name to ignore (repeatable), e.g. mhlo.sharding")
    d.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    d.set_defaults(func=run)


def load(spec: str, stdin: list | None = None) -> str:
    """Module text of a file, stdin (kept in ``stdin`` once read: ``diff - -`` reads it once for both sides),
    or an emit spec."""
    if spec == "-":
        if not stdin:
            text = _text(sys.stdin.buffer.read(), "stdin")
            if stdin is None:
                return text
            stdin.append(text)
        return stdin[0]
    if os.path.isfile(spec):
        with open(spec, "rb") as f:
            return _text(f.read(), repr(spec))
    target, sep, query = spec.partition("?")
    if ":" not in target or (target.endswith(".mlir") and not sep):
        raise CliError(f"cannot open {spec!r}: not a file, and not an emit spec (TARGET?key=value&...)")
    from .cmd_emit import emit_text

    options: dict = {}
    for key, value in urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        options.setdefault(key.replace("-", "_"), []).append(value)
    return emit_text(target, options)


def _text(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CliError(f"{where} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}): diff compares "
                       f"MLIR modules; pass .mlir text files or emit specs") from None


def run(args) -> int:
    from ..ir.mlir_diff import diff

    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    stdin: list = []
    out = diff(load(args.a, stdin), load(args.b, stdin), a_name=args.a, b_name=args.b, ignore=args.ignore, color=color)
    sys.stdout.write(out)
    return 1 if out else 0
