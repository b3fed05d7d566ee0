"""``--mlir-print-ir-before=PASS`` / ``--mlir-print-ir-after=PASS`` for pxla-opt.

jaxlib's bindings can only print the IR before or after *every* pass. For
these flags pxla-opt turns that on and, while the pipeline runs, sends what
MLIR writes to stderr through a filter that drops the dumps of the other
passes. A dump is its header line and everything up to the next header.

The filter is a small child process, not a thread: MLIR writes the dumps
while holding the GIL, so a thread could not drain the pipe and a large dump
would block. A child also streams, so the dumps before a crash still arrive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

__all__ = ["DumpFilter", "split_pass_names"]

# Runs in the child (python -I -S): stdin is the pipe, stdout the real stderr.
_CHILD = r"""
import json, re, sys
before, after = json.loads(sys.argv[1])
header = re.compile(rb"^// -----// IR Dump (Before|After) .*?(Failed)?: ([\w.\-]+)")
keep = True
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    m = header.match(line)
    if m:
        names = before if m.group(1) == b"Before" else after
        keep = names is None or bool(m.group(2)) or m.group(3).decode() in names
    if keep:
        out.write(line)
        out.flush()
"""


def split_pass_names(values: list[str] | None) -> list[str]:
    """The pass names of repeated, comma-separated flag values, in order."""
    names = [name.strip() for v in values or () for name in v.split(",")]
    return list(dict.fromkeys(n for n in names if n))


class DumpFilter:
    """While active, keeps only the dumps of the named passes (``None``: every dump of that kind);
    a dump after a pass that failed is always kept."""

    def __init__(self, before: list[str] | None, after: list[str] | None):
        self.before, self.after = before, after

    def __enter__(self) -> DumpFilter:
        sys.stderr.flush()
        self._saved = os.dup(2)
        child = subprocess.Popen([sys.executable, "-I", "-S", "-c", _CHILD, json.dumps([self.before, self.after])],
                                 stdin=subprocess.PIPE, stdout=self._saved)
        assert child.stdin is not None  # stdin=PIPE
        self._child, self._child_stdin = child, child.stdin
        os.dup2(self._child_stdin.fileno(), 2)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        self._child_stdin.close()  # the child sees the end, writes what is left and exits
        self._child.wait()
        os.close(self._saved)
