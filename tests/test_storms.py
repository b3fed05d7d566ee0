"""Call storms that plain jax.pmap does not survive, each in its own process
with a hard timeout (tests/isolation.py): a crash fails one test, never the run."""

import pytest
from isolation import IsolatedFailure, run_isolated

pytestmark = pytest.mark.subprocess


def test_thousand_unblocked_calls_do_not_hang():
    """Plain jax.pmap aborts the process here after ~40 un-blocked calls
    (XLA:CPU collective rendezvous); the in-flight window prevents it."""
    out = run_isolated("""
        import numpy as np, pxla_mlir
        from jax import lax
        f = pxla_mlir.pmap(lambda v: lax.psum(v, "i") / 8, "i")
        y = np.ones((8, 16), np.float32)
        for _ in range(1000):
            y = f(y)
        np.testing.assert_allclose(np.asarray(y), 1.0)
        print("done", y.shape)
    """)
    assert out.strip() == "done (8, 16)"


def test_threads_racing_one_pmap_get_their_own_results():
    out = run_isolated("""
        import threading
        import numpy as np, pxla_mlir
        from jax import lax
        f = pxla_mlir.pmap(lambda v: lax.psum(v, "i") + lax.axis_index("i"), "i")
        results, errors = {}, []
        def worker(t):
            try:
                x = np.full((8, 4), float(t), np.float32)
                for _ in range(100):
                    y = f(x)
                results[t] = np.asarray(y)
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
        for th in threads: th.start()
        for th in threads: th.join()
        assert not errors, errors
        for t, y in results.items():
            np.testing.assert_array_equal(y, np.broadcast_to(8.0 * t + np.arange(8.0)[:, None], (8, 4)))
        print(sorted(results))
    """)
    assert out.strip() == "[0, 1, 2, 3]"


@pytest.mark.parametrize("code, kind", [
    ("import os; os.abort()", "killed by SIGABRT"),
    ("import ctypes; ctypes.string_at(0)", "killed by SIGSEGV"),
    pytest.param("import time; time.sleep(60)", "no result after 2 s", marks=pytest.mark.slow),  # waits out 2 s
])
def test_a_crash_fails_one_test_and_the_run_goes_on(code, kind):
    with pytest.raises(IsolatedFailure, match=kind):
        run_isolated(code, timeout=2)
