"""Counts and seconds of the expensive steps (trace, import, passes, compile),
for tests, benchmarks and ``pxla-mlir run``'s timing table."""

from __future__ import annotations

import collections
import contextlib
import time

__all__ = ["STATS", "TIMINGS", "timed"]

#: Counts of the expensive steps ("traces", "lowerings", "compiles", "python_calls"). "compiles" counts
#: programs XLA compiled (or loaded from the persistent cache), not those shared with an equal lowering.
STATS: collections.Counter = collections.Counter()
#: Seconds spent in each step ("trace", "import", "passes", "compile"), summed
#: since the last reset.
TIMINGS: collections.Counter = collections.Counter()


@contextlib.contextmanager
def timed(step: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        TIMINGS[step] += time.perf_counter() - start
