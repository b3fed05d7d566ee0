"""The caches of map objects, shared by every object made with the same
function and options.

``for _ in range(n): pmap(f)(x)`` makes a new pmap object per iteration, as
scripts and libraries that build the map inside a function do. As with
jax.pmap and jax.jit, the objects share what was traced, lowered and compiled
for ``f`` with those options, and the C++ dispatcher in front of it, so a
new object's first call with a known signature runs at the speed of a
repeated call.

Entries are keyed weakly on the function: the cache never keeps a user's
function alive (nothing in an entry refers to it; the dispatcher resolves a
miss through the map object calling it, named for the call only). When the
function is collected its entries go. A function that cannot be weakly referenced, or
options that cannot be hashed, give the object caches of its own.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable

from pxla_mlir.mlir.support.lru import LRU

__all__ = ["CallCache", "CacheEntry", "entry_for", "CACHE_SIZE", "OPTIONS_PER_FUNCTION"]

#: Signatures (pytree, avals, statics, environment) each (function, options) keeps
#: traced, lowered and compiled; the least recently used is dropped beyond it.
CACHE_SIZE = 64
#: Option sets (axis names, in/out axes, devices, pipeline options, ...) kept per function.
OPTIONS_PER_FUNCTION = 16


class CallCache:
    """Traced bodies, ``Lowered`` and ``Compiled`` programs by call key, each
    a bounded LRU, and the lock that makes lowering and compiling happen once."""

    def __init__(self, size: int = CACHE_SIZE):
        self.traced, self.lowered, self.compiled = LRU(size), LRU(size), LRU(size)
        self.lock = threading.RLock()

    def clear(self) -> None:
        for table in (self.traced, self.lowered, self.compiled):
            table.clear()


class CacheEntry:
    """What the objects of one (function, options) share: their programs and,
    per environment (an xmap's mesh), the C++ dispatcher."""

    def __init__(self):
        self.calls = CallCache()
        self.dispatchers = LRU(16)  # environment -> FastDispatch (it resolves a miss through the calling object)

    def clear(self) -> None:
        self.calls.clear()
        self.dispatchers.clear()


_ENTRIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # function -> LRU(options -> CacheEntry)
_LOCK = threading.Lock()


def entry_for(fun, options: Hashable) -> CacheEntry:
    """The entry of ``fun`` with ``options``, shared with every other object
    made so; a private one if ``fun`` cannot be weakly referenced or
    ``options`` cannot be hashed."""
    try:
        hash(options)
        with _LOCK:
            per_function = _ENTRIES.get(fun)
            if per_function is None:
                per_function = _ENTRIES[fun] = LRU(OPTIONS_PER_FUNCTION)
    except TypeError:  # not weakly referenceable or not hashable (the function or the options)
        return CacheEntry()
    entry = per_function.get(options)
    if entry is None:
        with _LOCK:
            entry = per_function.get(options)
            if entry is None:
                entry = per_function[options] = CacheEntry()
    return entry
