"""xmap's ``in_axes`` / ``out_axes``: entries parsed when the xmap is made,
flattened against the arguments and results when it is called, with the
error types 2022 code catches (TypeError for a malformed entry, ValueError
for everything else).

An entry is ``{dim: name}`` (non-negative int keys; ``{}``: no named axes) or
a list (or tuple) of names and None, optionally with one ``...``:
``['batch', ...]`` names leading dimensions, ``[..., 'feat']`` trailing ones,
``['batch', ..., 'feat']`` both; without ``...`` the list also asserts the
rank. Entries sit in pytree prefixes of the arguments (or results).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from jax import tree_util

from ..jax_internals import api_util
from .plan import XmapError, XmapTypeError

__all__ = ["AxisSpec", "is_entry", "parse_tree", "flatten_specs", "spec_names"]


def is_entry(x) -> bool:
    """An axes entry (a leaf of an axes pytree); dicts with other keys are
    pytree containers, as are tuples/lists holding anything but names."""
    if isinstance(x, AxisSpec):
        return True
    if isinstance(x, Mapping):
        return all(isinstance(k, (int, np.integer)) for k in x)
    if isinstance(x, list) or (isinstance(x, tuple) and x):
        return all(e is None or e is Ellipsis or isinstance(e, str) for e in x)
    return False


class AxisSpec:
    """One parsed entry."""

    __slots__ = ("mapping", "front", "back", "ellipsis", "user_repr")

    def __init__(self, entry, what: str):
        self.mapping, self.front, self.back, self.ellipsis = None, (), (), False
        if isinstance(entry, Mapping) and is_entry(entry):
            for d, n in entry.items():
                if d < 0:
                    raise XmapError(f"xmap doesn't support negative axes in {what}: {entry!r} names dimension {d} "
                                    f"(for axis {n!r}); use a non-negative dimension, or a list like [..., {n!r}] "
                                    f"for trailing dimensions")
            self.mapping = {int(d): n for d, n in entry.items()}
            names = list(self.mapping.values())
            self.user_repr = repr(dict(entry))
        elif isinstance(entry, (list, tuple)) and is_entry(list(entry)):
            items = list(entry)
            if items.count(Ellipsis) > 1:
                raise XmapError(f"{what}: at most one ... in {entry!r}")
            if Ellipsis in items:
                k = items.index(Ellipsis)
                self.front, self.back, self.ellipsis = tuple(items[:k]), tuple(items[k + 1:]), True
            else:
                self.front = tuple(items)
            names = [n for n in items if n is not None and n is not Ellipsis]
            self.user_repr = repr(entry).replace("Ellipsis", "...")
        else:
            raise XmapTypeError(f"{what}: an axes entry must be a {{dim: name}} dict or a list of names like "
                                f"['batch', ...], got {entry!r}")
        for n in names:
            if not isinstance(n, str) or not n:
                raise XmapTypeError(f"{what}: axis names must be non-empty strings, got {n!r} in {self.user_repr}")
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise XmapError(f"{what}: named axes must be unique within one entry, but {dup!r} names two "
                            f"dimensions in {self.user_repr}")

    @property
    def names(self) -> tuple:
        if self.mapping is not None:
            return tuple(self.mapping.values())
        return tuple(n for n in self.front + self.back if n is not None)

    def __repr__(self) -> str:
        return self.user_repr

    def key(self) -> tuple:
        """A hashable form (for caches)."""
        if self.mapping is not None:
            return ("dict", tuple(sorted(self.mapping.items())))
        return ("list", self.front, self.back, self.ellipsis)

    def min_rank(self) -> int:
        if self.mapping is not None:
            return max(self.mapping, default=-1) + 1
        return len(self.front) + len(self.back)

    def resolve(self, ndim: int, where: str, kind: str = "argument") -> dict[int, str]:
        """``{dim: name}`` for a value of rank ``ndim``."""
        if not self.ellipsis and self.mapping is None and ndim != len(self.front):
            raise XmapError(f"the {kind} {where} has an axes specification of {self.user_repr}, which asserts "
                            f"that it should be of rank {len(self.front)}, but the {kind} has rank {ndim}")
        if ndim < self.min_rank():
            raise XmapError(f"the {kind} {where} has an axes specification of {self.user_repr}, which implies "
                            f"that it has at least {self.min_rank()} dimensions, but the {kind} has rank {ndim}")
        if self.mapping is not None:
            return dict(self.mapping)
        out = {i: n for i, n in enumerate(self.front) if n is not None}
        out.update({ndim - len(self.back) + i: n for i, n in enumerate(self.back) if n is not None})
        return out

    def result_rank(self, elem_rank: int) -> int:
        """The rank of a result whose per-element rank is ``elem_rank``."""
        return elem_rank + len(self.names)


def parse_tree(tree, what: str):
    """Every entry of an axes pytree parsed in place (``None`` is ``{}``)."""
    if is_entry(tree):
        return AxisSpec(tree, what)
    return tree_util.tree_map(lambda e: AxisSpec({} if e is None else e, what), tree, is_leaf=is_entry)


def spec_names(tree) -> list[str]:
    """Named axes a parsed tree uses, in order of first appearance."""
    seen: list[str] = []
    for spec in tree_util.tree_leaves(tree, is_leaf=lambda x: isinstance(x, AxisSpec)):
        seen += [n for n in spec.names if n not in seen]
    return seen


def tree_key(tree) -> tuple:
    leaves, treedef = tree_util.tree_flatten(tree, is_leaf=lambda x: isinstance(x, AxisSpec))
    return treedef, tuple(s.key() for s in leaves)


def flatten_specs(what: str, value_tree, spec_tree) -> list[AxisSpec]:
    """One parsed entry per leaf of ``value_tree``; ``spec_tree`` is a prefix."""
    if isinstance(spec_tree, AxisSpec):  # one entry for every value
        return [spec_tree] * value_tree.num_leaves
    try:
        return list(api_util.flatten_axes(what, value_tree, spec_tree))
    except ValueError as e:
        hint = (" Note that xmap in_axes that are non-trivial pytrees should always be wrapped in a tuple "
                "representing the argument list.") if what.endswith("in_axes") else ""
        detail = str(e).split(";", 1)[-1].strip()
        raise XmapError(f"{what} specification must be a tree prefix of the corresponding value, got specification "
                        f"{spec_tree!r} for value tree {value_tree}. {detail}{hint}") from None
