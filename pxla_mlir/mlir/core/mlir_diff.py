"""An MLIR-aware diff: only real differences show.

Both modules are parsed and printed canonically (no locations, attribute
dictionaries in MLIR's sorted order), functions are put in symbol-name order,
and SSA values are renamed by their defining op: the k-th ``mhlo.add`` of a
function is ``%add_k`` on both sides, so inserting an op elsewhere does not
renumber every later line. Attributes named in ``ignore`` are removed first
(e.g. ``mhlo.sharding`` to compare only the computation).
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterable, Sequence

from jaxlib.mlir import ir

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.core.nesting_depth import NestingError, check_nesting

__all__ = ["DiffError", "normalize", "diff", "split_functions"]


class DiffError(PxlaUserError, ValueError):
    """An input that is not valid MLIR."""


_DEF = re.compile(r'^\s*(%[A-Za-z_][\w$.-]*|%\d+)(?::\d+)?\s*=\s*"?([\w.$-]+)')
_VALUE = re.compile(r"%([A-Za-z_][\w$.-]*|\d+)")
_FUNC = re.compile(r"^  func\.func\b.*?@([\w.$-]+)")


def _strip(module: ir.Module, ignore: Iterable[str]) -> None:
    ignore = set(ignore)
    if not ignore:
        return
    for op in ir_utils.walk(module.operation):
        for name in ignore:
            if name in op.attributes:
                del op.attributes[name]
        for key in ("arg_attrs", "res_attrs"):
            if op.name == "func.func" and key in op.attributes:
                dicts = [ir.DictAttr.get({a.name: a.attr for a in ir.DictAttr(d) if a.name not in ignore})
                         for d in ir.ArrayAttr(op.attributes[key])]
                op.attributes[key] = ir.ArrayAttr.get(dicts)


def split_functions(lines: Sequence[str]) -> tuple[list[int], list[tuple[str, list[int]]], list[int]]:
    """Line indices of a printed module's head, of each top-level function
    (with its name, in printed order) and of its tail."""
    head: list[int] = []
    funcs: list[tuple[str, list[int]]] = []
    tail: list[int] = []
    current = None
    for i, line in enumerate(lines):
        m = _FUNC.match(line)
        if m:
            current = (m.group(1), [i])
            funcs.append(current)
        elif current is not None:
            current[1].append(i)
            if line == "  }":
                current = None
        else:
            (tail if funcs else head).append(i)
    return head, funcs, tail


def _rename_values(lines: list[str]) -> list[str]:
    """SSA names from content, not position: a constant is named by its value,
    any other value by its op and its index among same-named ops of the same
    region; block arguments of nested regions are numbered per region."""
    names: dict[str, str] = {}
    scopes: list[dict[str, int]] = [{}]
    out = []
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith("}"):
            scopes.pop() if len(scopes) > 1 else None
        if stripped.startswith("^"):
            for k, arg in enumerate(re.findall(r"(%[\w$.-]+):", stripped)):
                names[arg] = f"%b{len(scopes) - 1}_{k}"
        m = _DEF.match(line)
        if m and not m.group(1).startswith("%arg"):
            short = m.group(2).rsplit(".", 1)[-1]
            if short == "constant":
                key = "cst_" + hashlib.sha1(line.split("=", 1)[1].encode()).hexdigest()[:6]
            else:
                key = short
            k = scopes[-1].get(key, 0)
            scopes[-1][key] = k + 1
            depth = "" if len(scopes) == 1 else f"r{len(scopes) - 1}_"
            names[m.group(1)] = f"%{depth}{key}" + (f"_{k}" if key == short or k else "")
        out.append(_VALUE.sub(lambda v: names.get(v.group(0), v.group(0)), line))
        if stripped.endswith("({") or (stripped.endswith("{") and not stripped.startswith("^")):
            scopes.append({})
    return lines[:1] + out


def normalize(text: str | bytes, *, ignore: Sequence[str] = (), name: str = "<input>") -> list[str]:
    """Canonical lines of a module, MLIR text or bytecode (see the module docs)."""
    try:
        if not (isinstance(text, bytes) and text.startswith(b"ML\xefR")):  # bytecode skips the text parser
            check_nesting(text)
    except NestingError as e:
        raise DiffError(f"{name}:{e.line}:{e.col}: {e.message}") from None
    ctx = make_context(allow_unregistered_dialects=True)
    with ctx:
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as e:
            first = e.error_diagnostics[0] if e.error_diagnostics else None
            where = str(first.location) if first is not None else ""
            message = first.message if first is not None else str(e)
            raise DiffError(f"{name} is not valid MLIR: {message} {where}".strip()) from None
        _strip(module, ignore)
        printed = ir_utils.asm_text(module.operation)
    lines = printed.splitlines()
    head, funcs, tail = split_functions(lines)
    out = [lines[i] for i in head]
    for _, body in sorted(funcs, key=lambda f: f[0]):
        out.extend(_rename_values([lines[i] for i in body]))
    return out + [lines[i] for i in tail]


def diff(a: str | bytes, b: str | bytes, *, a_name: str = "a", b_name: str = "b", ignore: Sequence[str] = (),
         color: bool = False) -> str:
    """A unified diff of the normalized modules ("" when they are the same)."""
    lines = list(difflib.unified_diff(normalize(a, ignore=ignore, name=a_name), normalize(b, ignore=ignore, name=b_name),
                                      fromfile=a_name, tofile=b_name, lineterm="", n=2))
    if color:
        paint = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
        lines = [f"{paint[line[0]]}{line}\033[0m" if line[:1] in paint and not line.startswith(("+++", "---"))
                 else line for line in lines]
    return "\n".join(lines) + ("\n" if lines else "")
