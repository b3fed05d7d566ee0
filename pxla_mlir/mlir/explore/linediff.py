"""Line diffs between consecutive stages that ignore SSA renumbering.

Each line is compared by its form in :func:`pxla_mlir.mlir.core.mlir_diff.normalize`
(values named by their op, functions in name order), but shown as printed,
so a pass that inserts one constant marks one line, not every later line
whose ``%N`` shifted.
"""

from __future__ import annotations

import difflib

from pxla_mlir.mlir.core.mlir_diff import DiffError, normalize, split_functions

__all__ = ["keys", "diff_ops"]


def _blocks(lines: list[str]) -> list[list[int]]:
    """Line indices of the head, each top-level function and the tail, in
    the order normalize() puts them (functions sorted by name)."""
    head, funcs, tail = split_functions(lines)
    return [head, *(idx for _, idx in sorted(funcs, key=lambda f: f[0])), tail]


def keys(text: str) -> list[str]:
    """One comparison key per printed line of ``text`` (the line itself when
    the text is not MLIR that normalize() can read)."""
    lines = text.splitlines()
    try:
        normal = normalize(text)
    except DiffError:
        return lines
    order = [i for idx in _blocks(lines) for i in idx]
    if len(order) != len(lines) or len(normal) != len(lines):
        return lines
    out = [""] * len(lines)
    for key, i in zip(normal, order):
        out[i] = key
    return out


def diff_ops(before: str, after: str) -> list[tuple[str, str]]:
    """``(op, line)`` for the lines of ``after`` with the removed lines of
    ``before`` in place: op is ``" "`` (kept), ``"+"`` (added) or ``"-"`` (removed)."""
    a_lines, b_lines = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(None, keys(before), keys(after), autojunk=False)
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend((" ", line) for line in b_lines[j1:j2])
            continue
        out.extend(("-", line) for line in a_lines[i1:i2])
        out.extend(("+", line) for line in b_lines[j1:j2])
    return out

