"""The compiled programs of map primitives bound with concrete arguments.

Transformation rules rebind a map with a transformed body; at the top level
that runs the primitive's impl, which lowers, compiles and runs. Rules reuse
their bodies (see :mod:`.rules`), so the body's identity finds the program
fast; a body rebuilt with the same text finds it by its text.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.mlir.support.lru import LRU

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr

    from pxla_mlir.stages.aot import Compiled

__all__ = ["ImplCache", "plain_avals"]


def plain_avals(args) -> tuple:
    """The avals of concrete arguments, without shardings."""
    return tuple(core.ShapedArray(a.shape, a.dtype, weak_type=a.weak_type)
                 for a in map(core.shaped_abstractify, args))


class ImplCache:
    """Compiled programs by (body, params, avals) and the pass registry's generation (a pass of the map's own
    registered again, with another version, makes another program)."""

    def __init__(self, size: int = 256):
        self._cache = LRU(size)
        self._lock = threading.Lock()

    def compiled(self, jaxpr: ClosedJaxpr, params: tuple, build: Callable[[], Compiled]) -> Compiled:
        """The compiled program of ``jaxpr`` with hashable ``params`` (avals
        included); ``build()`` makes it on a miss."""
        params = (params, REGISTRY.generation)
        with self._lock:
            fast = (id(jaxpr), params)
            hit = self._cache.get(fast)
            compiled = hit[1] if hit is not None and hit[0] is jaxpr else None
            if compiled is None:
                key = (str(jaxpr), params)
                compiled = self._cache.get(key)
                if compiled is None:
                    compiled = self._cache[key] = build()
                self._cache[fast] = (jaxpr, compiled)
        return compiled
