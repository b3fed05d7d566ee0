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

from collections.abc import Mapping

import numpy as np
from jax import tree_util

from pxla_mlir.maps.arguments import flatten_axes
from pxla_mlir.xmaps.plan import XmapError, XmapTypeError

__all__ = ["AxisSpec", "NamedDims", "is_entry", "parse_tree", "flatten_specs", "spec_names"]


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
            raise XmapTypeError(
                f"Value mapping specification in xmap {what} pytree can be either:\n"
                f"- lists of axis names (possibly ending with the ellipsis object: ...)\n"
                f"- dictionaries that map positional axes (integers) to axis names (e.g. {{2: 'name'}})\n"
                f"but got: {entry}\n(an entry of the {what} pytree; write e.g. ['batch', ...] or {{0: 'batch'}}, "
                f"or None for a value without named axes)")
        for n in names:
            if not isinstance(n, str) or not n:
                raise XmapTypeError(f"{what}: axis names must be non-empty strings, got {n!r} in {self.user_repr}")
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise XmapError(f"Named axes should be unique within each {what} argument specification, but one them "
                            f"is: {self.user_repr}. {dup!r} names two dimensions; give each dimension its own name")

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
        """The rank the entry implies (2022: its last named dimension + 1)."""
        if self.mapping is not None:
            return max(self.mapping, default=-1) + 1
        if self.back:
            return len(self.front) + len(self.back)
        return max((i for i, n in enumerate(self.front) if n is not None), default=-1) + 1

    def resolve(self, ndim: int, where: str, kind: str = "argument", shape=None) -> NamedDims:
        """``{dim: name}`` for a value of rank ``ndim`` (and ``shape``, for messages)."""
        if kind == "argument" and ndim < self.min_rank():
            of_shape = f" (shape {tuple(shape)})" if shape is not None else ""
            raise XmapError(f"One of xmap arguments has an in_axes specification of {self.user_repr}, which "
                            f"implies that it has at least {self.min_rank()} dimensions, but the argument has rank "
                            f"{ndim}. This is argument {where}{of_shape}; give it the dimensions its in_axes names")
        if kind != "argument" and ndim < self.min_rank():
            named = len(self.names)
            raise XmapError(f"One of xmap outputs has an out_axes specification of {self.user_repr}, which requires "
                            f"the result of the xmapped function to have at least {self.min_rank() - named} "
                            f"positional dimensions, but it only has {ndim - named}. This is output {where}; return a "
                            f"value of that rank or place the named axes at lower dimensions")
        if not self.ellipsis and self.mapping is None and ndim != len(self.front):
            spec = "in_axes" if kind == "argument" else "out_axes"
            shown = f" (and shape {tuple(shape)})" if shape is not None else ""
            raise XmapError(f"xmap {kind} has an {spec} specification of {self.user_repr}, which asserts that it "
                            f"should be of rank {len(self.front)}, but the {kind} has rank {ndim}{shown}. This is "
                            f"{kind} {where}; end the list with ... to allow any rank")
        if self.mapping is not None:
            return NamedDims(self.mapping, self.user_repr)
        out = {i: n for i, n in enumerate(self.front) if n is not None}
        out.update({ndim - len(self.back) + i: n for i, n in enumerate(self.back) if n is not None})
        return NamedDims(out, self.user_repr)

    def resolve_result(self, aval, sizes: Mapping[str, int], where: str) -> NamedDims:
        """``{dim: name}`` for a result whose per-element value has ``aval``."""
        ndim = self.result_rank(aval.ndim)
        shape = None
        if not self.ellipsis and self.mapping is None and ndim >= self.min_rank():  # the rank error shows it
            shape = list(aval.shape)
            for d, n in sorted((i, n) for i, n in enumerate(self.front) if n is not None):
                shape.insert(d, sizes[n])
        return self.resolve(ndim, where, kind="output", shape=shape)

    def result_rank(self, elem_rank: int) -> int:
        """The rank of a result whose per-element rank is ``elem_rank``."""
        return elem_rank + len(self.names)


class NamedDims(dict):
    """``{dim: name}`` of one value, keeping its entry as the user wrote it (for messages)."""

    def __init__(self, mapping, user_repr: str):
        super().__init__(mapping)
        self.user_repr = user_repr


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
        return list(flatten_axes(what, value_tree, spec_tree))
    except ValueError as e:
        hint = ""
        if what.endswith("in_axes"):
            hint = (f" Note that {what} that are non-trivial pytrees should always be wrapped in a tuple "
                    f"representing the argument list.")
            if len(value_tree.children()) == 1:
                try:
                    flatten_axes(what, value_tree, (spec_tree,))
                except ValueError:
                    pass  # that is not the issue
                else:
                    hint += (f" In particular, you're passing in a single argument which means that {what} might "
                             f"need to be wrapped in a singleton tuple.")
        detail = str(e).split(";", 1)[-1].strip()
        raise XmapError(f"{what} specification must be a tree prefix of the corresponding value, got specification "
                        f"{spec_tree!r} for value tree {value_tree}.{hint}\n{detail}") from None
