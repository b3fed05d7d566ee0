"""A small, thread-safe least-recently-used mapping: every cache of traced
bodies, lowered and compiled programs is one, with a documented size."""

from __future__ import annotations

import collections
import threading
import weakref

_ALL: weakref.WeakSet[LRU] = weakref.WeakSet()


class LRU:
    """A mapping that forgets its least recently used entry beyond ``size``.
    Lookups and insertions hold a lock: maps are called from many threads."""

    def __init__(self, size: int):
        self.size = size
        self._data: collections.OrderedDict = collections.OrderedDict()  # key -> (stored key, its hash, value)
        self._lock = threading.Lock()
        #: The entry most recently looked up or stored, ``(key, its hash, value)``, or None (and None after
        #: ``clear``): a caller that keeps asking for one key reads it without a call.
        self.latest: tuple | None = None
        _ALL.add(self)

    def get(self, key, default=None):
        last = self.latest  # a repeated lookup (a map called in a loop) needs no lock: it is the newest already
        # Matched as a dict matches: identity, else equal hashes and then ``stored == key``
        # (a key with an unusual ``__eq__`` gets the dict's answer, or its error).
        if last is not None and (last[0] is key or (last[1] == hash(key) and last[0] == key)):
            return last[2]
        with self._lock:
            try:
                entry = self._data[key]
            except KeyError:
                return default
            self._data.move_to_end(key)
            self.latest = entry
            return entry[2]

    def __getitem__(self, key):
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __setitem__(self, key, value) -> None:
        entry = key, hash(key), value
        with self._lock:
            old = self._data.get(key)
            if old is not None:  # the dict keeps the key it first stored: so does the shortcut
                entry = old[0], entry[1], value
            self._data[key] = entry
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)
            self.latest = entry if self.size > 0 else None

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.latest = None

    def keys(self) -> list:
        with self._lock:
            return list(self._data)


_MISSING = object()


def clear_all() -> None:
    """Empties every LRU cache (transformed bodies, traced and compiled
    programs): the next call traces, lowers and compiles again (benchmarks)."""
    for cache in list(_ALL):
        cache.clear()
