"""Stands in for FileCheck while ``pxla-mlir update-checks`` runs a test's RUN lines.

    python check_capture.py REAL-FILECHECK ARGS...      (REAL-FILECHECK: what the RUN line named)

Saves what FileCheck would have read (stdin or ``--input-file``) with its
arguments as one JSON file in ``$PXLA_CHECK_CAPTURE`` and succeeds, so a RUN
line's later commands still run while its checks are stale. Standard library
only: it runs as a script, outside the package.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field

from pxla_mlir.mlir.support.files import write_atomically

# FileCheck options whose value may be the next argument.
_VALUE_OPTIONS = {"check-prefix", "check-prefixes", "input-file", "implicit-check-not", "comment-prefixes",
                  "dump-input", "dump-input-filter", "dump-input-context"}


@dataclass
class FileCheckArgs:
    check_file: str | None = None
    check_index: int | None = None  # where check_file is in the arguments
    prefixes: list[str] = field(default_factory=list)
    input_file: str | None = None
    input_indices: tuple[int, ...] = ()  # the arguments that name input_file


def parse_args(args: list[str]) -> FileCheckArgs:
    """The parts of a FileCheck command line that update-checks needs."""
    out, i = FileCheckArgs(), 0
    while i < len(args):
        arg, first = args[i], i
        if arg.startswith("-") and arg != "-":
            name, eq, value = arg.lstrip("-").partition("=")
            if name in _VALUE_OPTIONS and not eq and i + 1 < len(args):
                i, value = i + 1, args[i + 1]
            if name == "check-prefix":
                out.prefixes.append(value)
            elif name == "check-prefixes":
                out.prefixes += [p for p in value.split(",") if p]
            elif name == "input-file":
                out.input_file, out.input_indices = value, tuple(range(first, i + 1))
        elif out.check_file is None:
            out.check_file, out.check_index = arg, i
        i += 1
    out.prefixes = out.prefixes or ["CHECK"]
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print("check_capture: expected the FileCheck command and its arguments", file=sys.stderr)
        return 2
    real, args = argv[0], argv[1:]
    parsed = parse_args(args)
    try:
        if parsed.input_file in (None, "-"):
            text = sys.stdin.buffer.read().decode("utf-8", "replace")
        else:
            with open(parsed.input_file, encoding="utf-8", errors="replace") as f:
                text = f.read()
    except OSError as e:
        print(f"{real}: could not open input file '{parsed.input_file}': {e.strerror}", file=sys.stderr)
        return 2
    record = {"filecheck": shutil.which(real) or real, "args": args, "cwd": os.getcwd(), "input": text}
    directory = os.environ["PXLA_CHECK_CAPTURE"]
    path = os.path.join(directory, f"{time.monotonic_ns():020d}-{os.getpid()}.json")
    write_atomically(path, json.dumps(record))  # the reader never sees half a record
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
