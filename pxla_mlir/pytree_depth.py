"""Pytrees nested deeper than jax can flatten.

jax's C++ flattening recurses once per level and stops at Python's recursion
limit with a RecursionError; from jaxlib's C++ dispatch that error leaks as a
pending exception, so the call fails later with an unrelated one
(``AttributeError: __getitem__`` in a pmap call, a ``SystemError`` elsewhere).
:func:`too_deep` tells such a failure apart and says what to do.
"""

from __future__ import annotations

import sys

from jax import tree_util

__all__ = ["too_deep", "depth_exceeds"]


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


def too_deep(error: BaseException, tree, what: str) -> RecursionError | None:
    """A clear error for ``error`` if it came from flattening a ``tree`` that
    nests deeper than Python's recursion limit lets jax flatten, else None."""
    limit = sys.getrecursionlimit()
    if not (_flatten_recursion(error) or depth_exceeds(tree, limit - 50)):
        return None
    return RecursionError(
        f"{what} nest more pytree levels than jax can flatten: jax flattens one level per recursive call, up to "
        f"Python's recursion limit (sys.getrecursionlimit() = {limit}). Pass a flatter structure (e.g. a list of "
        f"the leaves), or raise the limit with sys.setrecursionlimit() above the nesting depth")
