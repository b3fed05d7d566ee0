"""Counts and seconds of the expensive steps (trace, import, passes, compile),
for tests, benchmarks and ``pxla-mlir run``'s timing table."""

from __future__ import annotations

import collections
import contextlib
import time

__all__ = ["STATS", "TIMINGS", "timed"]

#: Counts of the expensive steps ("traces", "lowerings", "compiles", "python_calls"). "compiles" counts
#: programs XLA compiled (or loaded from the persistent cache), not those shared with an equal lowering.
STATS: collections.Counter[str] = collections.Counter()


class _Seconds(dict[str, float]):
    """Seconds by step; a step not timed since the last reset reads 0, as in a Counter."""

    def __missing__(self, step: str) -> float:
        return 0


#: Seconds spent in each step ("trace", "import", "passes", "compile"; within a compile, the persistent
#: cache's "cache read", "cache unseal" and "deserialize"; "lowering cache"), summed since the last reset.
TIMINGS: dict[str, float] = _Seconds()


@contextlib.contextmanager
def timed(step: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        TIMINGS[step] += time.perf_counter() - start
