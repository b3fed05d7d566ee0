"""Calls of one map from many threads at once, on their first call (every
thread's signature a cache miss): each finishes with the right values. Run
in a subprocess with a hard timeout: the failure this guards against is a
deadlock."""

import pytest
from isolation import run_isolated

pytestmark = pytest.mark.subprocess


def test_threads_first_calling_a_donating_map_do_not_deadlock():
    """A donating map launches alone (an exclusive launch lock). jaxlib's C++
    dispatch made the second thread wait, holding that lock, for the first
    thread's compile, which needed the lock again for its launch."""
    out = run_isolated("""
        import threading

        import numpy as np

        import pxla_mlir

        flat = pxla_mlir.pmap(lambda y: y + 1, "i", donate_argnums=0)
        nested = pxla_mlir.pmap(lambda y: pxla_mlir.pmap(lambda z: z + 1, "j")(y), "i", donate_argnums=0)
        wrong = []

        def steps(f, shape, start):
            a = f(np.full(shape, start, np.int32))
            for _ in range(5):
                a = f(a)
            if not np.array_equal(np.asarray(a), np.full(shape, start + 6)):
                wrong.append((shape, start))

        threads = [threading.Thread(target=steps, args=(f, shape, t)) for f, shape in ((flat, (8, 3)),
                   (nested, (2, 4, 3))) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("wrong", wrong)
    """, timeout=180)
    assert "wrong []" in out, out
