"""A small least-recently-used mapping for caches keyed by traced bodies."""

from __future__ import annotations

import collections
import weakref

_ALL: "weakref.WeakSet[LRU]" = weakref.WeakSet()


class LRU(collections.OrderedDict):
    """A dict that forgets its least recently used entry beyond ``size``."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size
        _ALL.add(self)

    def __hash__(self):  # by identity, so instances can live in a WeakSet
        return id(self)

    def get(self, key, default=None):
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.move_to_end(key)
        if len(self) > self.size:
            self.popitem(last=False)


def clear_all() -> None:
    """Empties every LRU cache (transformed bodies, traced and compiled
    programs): the next call traces, lowers and compiles again (benchmarks)."""
    for cache in list(_ALL):
        cache.clear()
