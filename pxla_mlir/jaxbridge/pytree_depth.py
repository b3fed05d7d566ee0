"""Pytrees nested deeper than jax can flatten.

jax's C++ flattening recurses once per level and stops with a RecursionError:
at Python's recursion limit on Python 3.11, at CPython's fixed C recursion cap
on 3.12+ (``sys.setrecursionlimit`` no longer raises it); from jaxlib's C++ dispatch that error leaks as a
pending exception, so the call fails later with an unrelated one
(``AttributeError: __getitem__`` in a pmap call, a ``SystemError`` elsewhere).
:func:`too_deep` tells such a failure apart and says what to do.
"""

from __future__ import annotations

import functools
import sys

from jax import tree_util

#: From Python 3.12 C code (jax's flattening among it) recurses up to a cap
#: built into CPython, apart from ``sys.getrecursionlimit()``.
_FIXED_C_CAP = sys.version_info >= (3, 12)

__all__ = ["too_deep", "depth_exceeds", "flatten_depth_cap"]


def depth_exceeds(tree, limit: int) -> bool:
    """Whether ``tree`` nests more than ``limit`` pytree levels (walked
    without recursion, one level at a time)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children, treedef = tree_util.tree_flatten(node, is_leaf=lambda c, node=node: c is not node)
        if not tree_util.treedef_is_leaf(treedef):
            stack.extend((c, depth + 1) for c in children)
    return False


def _flatten_recursion(error: BaseException | None) -> bool:
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, RecursionError) and "flatten" in str(error):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


@functools.cache
def flatten_depth_cap() -> int:
    """How many levels jax flattens under CPython 3.12+'s C recursion cap
    (measured once, from a shallow stack)."""
    def flattens(depth):
        tree = 0
        for _ in range(depth):
            tree = [tree]
        try:
            tree_util.tree_flatten(tree)
            return True
        except (RecursionError, SystemError):
            return False

    low, high = 1, 1 << 15
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if flattens(mid) else (low, mid - 1)
    return low


def too_deep(error: BaseException, tree, what: str) -> RecursionError | None:
    """A clear error for ``error`` if it came from flattening a ``tree`` that
    nests deeper than jax can flatten, else None."""
    limit = flatten_depth_cap() if _FIXED_C_CAP else sys.getrecursionlimit()
    if not (_flatten_recursion(error) or depth_exceeds(tree, limit - 50)):
        return None
    if _FIXED_C_CAP:
        return RecursionError(
            f"{what} nest more pytree levels than jax can flatten: jax flattens one level per recursive C call, "
            f"and Python {sys.version_info.major}.{sys.version_info.minor} caps those at a depth of its own (about "
            f"{limit} levels here; sys.setrecursionlimit() does not raise it). Pass a flatter structure (e.g. a "
            f"list of the leaves)")
    return RecursionError(
        f"{what} nest more pytree levels than jax can flatten: jax flattens one level per recursive call, up to "
        f"Python's recursion limit (sys.getrecursionlimit() = {limit}). Pass a flatter structure (e.g. a list of "
        f"the leaves), or raise the limit with sys.setrecursionlimit() above the nesting depth")
