"""pxla-mlir diff A B: an MLIR-aware diff of two modules (files or emit specs).

An emit spec is ``TARGET?key=value&...`` with the keys of ``pxla-mlir emit``
(``map``, ``unshard``, ``mode``, ``lowering``, ``shardings``, ``stage``, ``dialect``, ``arg``,
``mesh``, ``axis-name``, ``in-axes``, ...), e.g.
``examples/nested_reduction.py:two_level_sum?unshard=all-reduce``.
A file may be MLIR text or bytecode. Exit 0: the same; 1: different (the
diff is printed); 2: an error, as for diff(1).
"""

from __future__ import annotations

import os
import sys
import urllib.parse

from pxla_mlir.tools.errors import CliError

_BYTECODE_MAGIC = b"ML\xefR"


def add_parser(sub) -> None:
    d = sub.add_parser("diff", help="MLIR-aware diff of two modules (exit 1 when they differ, 2 on error)")
    d.add_argument("a", help="a .mlir file, '-' for stdin, or an emit spec TARGET?key=value&...")
    d.add_argument("b", help="the same, for the other side")
    d.add_argument("--ignore", action="append", default=[], metavar="ATTR",
                   help="an attribute name to ignore (repeatable), e.g. mhlo.sharding")
    d.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="auto (the default): on a terminal, unless NO_COLOR is set (FORCE_COLOR forces it)")
    d.set_defaults(func=run)


def _decoded(data: bytes, name: str) -> str | bytes:
    """MLIR text, or bytecode as it is."""
    if data.startswith(_BYTECODE_MAGIC):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise CliError(f"{name} is neither MLIR text nor MLIR bytecode: byte 0x{data[e.start]:02x} at line {line} "
                       f"is not UTF-8; give a .mlir file or an emit spec") from None


def load(spec: str, stdin: list | None = None) -> str | bytes:
    """Module text (or bytecode) of a file, stdin (kept in ``stdin`` once read:
    ``diff - -`` reads it once for both sides), or an emit spec."""
    if spec == "-":
        if not stdin:
            data = _decoded(sys.stdin.buffer.read(), "standard input")
            if stdin is None:
                return data
            stdin.append(data)
        return stdin[0]
    if os.path.isfile(spec):
        try:
            with open(spec, "rb") as f:
                return _decoded(f.read(), repr(spec))
        except OSError as e:
            raise CliError(f"cannot read {spec!r}: {e.strerror}") from None
    if os.path.isdir(spec):
        raise CliError(f"{spec!r} is a directory; give a .mlir file or an emit spec (TARGET?key=value&...)")
    target, sep, query = spec.partition("?")
    if ":" not in target or (target.endswith(".mlir") and not sep):
        raise CliError(f"cannot open {spec!r}: not a file, and not an emit spec (TARGET?key=value&...)")
    from pxla_mlir.tools.cmd_emit import emit_text

    options: dict = {}
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as e:
        raise CliError(f"bad emit spec {spec!r}: {e} (write TARGET?key=value&key=value)") from None
    for key, value in pairs:
        options.setdefault(key.replace("-", "_"), []).append(value)
    return emit_text(target, options)


def use_color(choice: str, stream) -> bool:
    """--color: always, never, or (auto) what rich decides for ``stream``: a
    terminal, unless NO_COLOR is set; FORCE_COLOR forces it."""
    if choice != "auto":
        return choice == "always"
    from rich.console import Console

    console = Console(file=stream)
    return console.is_terminal and console.color_system is not None and not console.no_color


def run(args) -> int:
    from pxla_mlir.mlir.core.mlir_diff import diff

    color = use_color(args.color, sys.stdout)
    stdin: list = []
    out = diff(load(args.a, stdin), load(args.b, stdin), a_name=args.a, b_name=args.b, ignore=args.ignore,
               color=color)
    sys.stdout.write(out)
    return 1 if out else 0
