"""jax's PartitionSpec read from text, without jax, in every form it is written:

    P('x', None)   PartitionSpec(('x', 'y'),)   jax.sharding.PartitionSpec(None, 'x')   P('x',)
    ('x', None)    (('x', 'y'), None)         a bare tuple, as ``tuple(spec)`` prints
    x,y            x*y,-     (x, y),None      plain: names unquoted, ``*`` or (...) joining the axes
                                              of one dimension, ``None`` or ``-`` for none
    P('x', unreduced={'y'}, reduced={'z'})    jax's unreduced and reduced axes
    P('x', unreduced={'y'}, unreduced_kind=sum)  how the unreduced values combine (jax 0.12+ prints it)
    P(UNCONSTRAINED, 'x')                     a dimension left to the partitioner

The entries come out as jax's ``PartitionSpec`` keeps them (a list is a tuple,
a one-name tuple is that name, an empty tuple is ``None``), so
``parse(text).entries == jax_spec.partitions`` for the spec the text writes.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from pxla_mlir.errors import PxlaUserError

__all__ = ["UNCONSTRAINED", "PartitionSpecText", "PartitionSpecSyntaxError", "parse"]

_EXPECTED = "expected P('x', None), P(('x', 'y'),), ('x', None) or x,y"
_ENTRIES = " (one entry per dimension: None, a mesh axis name or a tuple of names)"
#: How the spec's class is spelled: P, PartitionSpec, jax.P, jax.sharding.PartitionSpec, ...
_CLASS_NAMES = ("P", "PartitionSpec")
#: jax's UnreducedKind: how the partial values over the unreduced axes combine.
_UNREDUCED_KINDS = ("sum", "max", "min")


class PartitionSpecSyntaxError(PxlaUserError, ValueError):
    """Text that is not a PartitionSpec; the message names the bad part and shows the forms."""


class _Unconstrained:
    """jax's ``PartitionSpec.UNCONSTRAINED``: the partitioner chooses the dimension's layout."""

    def __repr__(self) -> str:
        return "UNCONSTRAINED"


UNCONSTRAINED = _Unconstrained()


@dataclasses.dataclass(frozen=True)
class PartitionSpecText:
    """What a PartitionSpec says: per dimension None, an axis name, a tuple of names or UNCONSTRAINED;
    and the mesh axes its value is unreduced (partial sums) or reduced over."""

    entries: tuple
    unreduced: frozenset[str] = frozenset()
    reduced: frozenset[str] = frozenset()
    unreduced_kind: str | None = None  # one of _UNREDUCED_KINDS where the text names it

    def dims(self) -> list[list[str]]:
        """The mesh axes sharding each dimension (UNCONSTRAINED ones are the caller's to refuse first)."""
        return [[] if e is None else [e] if isinstance(e, str) else list(e) for e in self.entries]


def parse(text: str) -> PartitionSpecText:
    """The PartitionSpec ``text`` writes (see the module docs for the forms)."""
    stripped = text.strip()
    try:
        node = ast.parse(stripped, mode="eval").body if stripped else None
    except SyntaxError:
        node = None
    if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] in _CLASS_NAMES:
        entries = tuple(_entry(text, i, a) for i, a in enumerate(node.args))
        sets = {"unreduced": frozenset(), "reduced": frozenset()}
        kind = None
        for keyword in node.keywords:
            if keyword.arg == "unreduced_kind":
                kind = _unreduced_kind(text, keyword)
            elif keyword.arg in sets:
                sets[keyword.arg] = _axis_set(text, keyword)
            else:
                raise _bad(text, f"keyword {ast.unparse(keyword)!r} is not unreduced={{...}}, reduced={{...}} or "
                                 f"unreduced_kind=...")
        return _checked(text, PartitionSpecText(entries, sets["unreduced"], sets["reduced"], kind))
    unquoted = stripped and not re.search(r"['\"]", stripped)
    if isinstance(node, ast.Tuple):
        try:
            return PartitionSpecText(tuple(_entry(text, i, e) for i, e in enumerate(node.elts)))
        except PartitionSpecSyntaxError:
            if not unquoted:  # x,y parses as a tuple of names: the plain form's
                raise
    if unquoted:
        return PartitionSpecText(tuple(_plain_entry(text, i, e) for i, e in enumerate(_plain_items(text, stripped))))
    raise PartitionSpecSyntaxError(f"not a PartitionSpec: {text!r}; {_EXPECTED}{_ENTRIES}")


def _bad(text: str, why: str) -> PartitionSpecSyntaxError:
    return PartitionSpecSyntaxError(f"not a PartitionSpec: {text!r}: {why}; {_EXPECTED}")


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _entry(text: str, index: int, node: ast.expr):
    """One dimension's entry, normalized as jax's PartitionSpec does."""
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str)):
        return node.value
    if _dotted(node).split(".")[-1] == "UNCONSTRAINED":
        return UNCONSTRAINED
    if isinstance(node, ast.Tuple | ast.List) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        names = tuple(e.value for e in node.elts)  # type: ignore[attr-defined]
        return None if not names else names[0] if len(names) == 1 else names
    why = f"dimension {index}'s entry {ast.unparse(node)} is not None, a mesh axis name or a tuple of names"
    if isinstance(node, ast.Name):
        why += f" (quote mesh axis names inside P(...): '{node.id}')"
    elif isinstance(node, ast.Constant) and isinstance(node.value, int):
        why += " (piece counts such as P(1, 4) are sharded_jit's; here name mesh axes)"
    return _raise(text, why)


def _raise(text: str, why: str):
    raise _bad(text, why)


def _axis_set(text: str, keyword: ast.keyword) -> frozenset[str]:
    """``unreduced={'x'}`` (or a tuple, a list, frozenset({...}), set()): the mesh axes named."""
    value = keyword.value
    if isinstance(value, ast.Call) and _dotted(value.func) in ("set", "frozenset") and len(value.args) <= 1 \
            and not value.keywords:
        value = value.args[0] if value.args else ast.Tuple(elts=[])
    if isinstance(value, ast.Set | ast.Tuple | ast.List) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
        return frozenset(e.value for e in value.elts)  # type: ignore[attr-defined]
    return _raise(text, f"{keyword.arg}= takes a set of mesh axis names, e.g. {keyword.arg}={{'x'}}; got "
                        f"{ast.unparse(keyword.value)}")


def _unreduced_kind(text: str, keyword: ast.keyword) -> str:
    """``unreduced_kind=sum`` as jax prints it (or ``'sum'``, ``UnreducedKind.sum``): the kind's name."""
    value = keyword.value
    name = value.value if isinstance(value, ast.Constant) else _dotted(value).split(".")[-1]
    if name not in _UNREDUCED_KINDS:
        return _raise(text, f"unreduced_kind= takes one of {', '.join(_UNREDUCED_KINDS)}; got {ast.unparse(value)}")
    return name


def _checked(text: str, spec: PartitionSpecText) -> PartitionSpecText:
    """jax's own rules: unreduced and reduced axes are apart, and shard no dimension."""
    both = spec.unreduced & spec.reduced
    if both:
        raise _bad(text, f"mesh axis {sorted(both)[0]!r} is both unreduced and reduced")
    used = {a for e in spec.entries if isinstance(e, str | tuple) for a in ((e,) if isinstance(e, str) else e)}
    for kind, axes in (("unreduced", spec.unreduced), ("reduced", spec.reduced)):
        if axes & used:
            raise _bad(text, f"mesh axis {sorted(axes & used)[0]!r} shards a dimension and is {kind} too")
    return spec


def _plain_items(text: str, stripped: str) -> list[str]:
    """The top-level comma-separated items of the plain form; one trailing comma is allowed (x, as ('x',))."""
    items, depth, current = [], 0, ""
    for ch in stripped:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    if len(items) > 1 and not items[-1].strip():
        items.pop()
    for i, item in enumerate(items):
        if not item.strip():
            raise _bad(text, f"dimension {i}'s entry is empty (write None or - for a dimension no axis shards)")
    return items


_NAME = re.compile(r"[^\s,()*]+")


def _plain_entry(text: str, index: int, item: str):
    item = item.strip()
    if item in ("None", "-"):
        return None
    if item == "UNCONSTRAINED":
        return UNCONSTRAINED
    inner = item[1:-1] if item.startswith("(") and item.endswith(")") else item
    names = [n.strip() for n in re.split(r"[,*]", inner) if n.strip()] if inner != item else item.split("*")
    if not all(_NAME.fullmatch(n) for n in names):
        raise _bad(text, f"dimension {index}'s entry {item!r} is not None, a mesh axis name or names joined by * "
                         f"or in (...)")
    return None if not names else names[0] if len(names) == 1 else tuple(names)
