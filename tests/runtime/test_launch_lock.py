"""The launch lock: shared holders never overlap an exclusive one, on the inline
path of the cached call and through ``acquire``; an interrupted exclusive taker
leaves it open; a waiting exclusive taker does not deadlock a shared holder that
waits for a shared taker; threads deleting arrays while others launch them stay
correct. Each case runs in a subprocess with a hard timeout (a lock bug would hang)."""

import pytest
from isolation import run_isolated

pytestmark = pytest.mark.subprocess


def test_shared_and_exclusive_holders_never_overlap():
    out = run_isolated("""
        import threading
        from pxla_mlir.runtime.launches import LaunchLock

        lock = LaunchLock()
        inside = {"shared": 0, "exclusive": 0}
        bad = []
        count = threading.Lock()

        def enter(kind):
            with count:
                inside[kind] += 1
                if inside["exclusive"] > 1 or (inside["exclusive"] and inside["shared"]):
                    bad.append(dict(inside))

        def leave(kind):
            with count:
                inside[kind] -= 1

        def inline_shared():  # what runtime.dispatch.launch_cached does, inline
            local = lock.local
            took = local.mode is None
            if took:
                lock.holders.append(True)
                if lock.closed:
                    lock.holders.pop()
                    lock.acquire()
                else:
                    local.mode = False
            enter("shared"); leave("shared")
            if took:
                local.mode = None
                lock.holders.pop()

        def shared():
            took = lock.acquire()
            enter("shared")
            assert not lock.acquire(True)  # re-entrant: a holder takes nothing more
            leave("shared")
            if took:
                lock.release()

        def exclusive():
            took = lock.acquire(True)
            enter("exclusive"); leave("exclusive")
            if took:
                lock.release(True)

        def worker(step, n):
            for _ in range(n):
                step()

        threads = [threading.Thread(target=worker, args=(s, n)) for s, n in
                   [(inline_shared, 20000), (inline_shared, 20000), (shared, 10000), (exclusive, 2000),
                    (exclusive, 2000)]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not bad, bad[:3]
        assert lock.holders == [] and lock.closed == [] and lock.sleepers == [] and lock.local.mode is None
        print("ok")
    """, timeout=240)
    assert out.strip() == "ok"


def test_an_exclusive_taker_alone_holds_the_lock_at_once_and_wakes_who_waited_behind_it():
    """A donating step alone in the process takes the lock without the turn-taking mutex; a shared taker that
    comes meanwhile sleeps, and is woken when it lets go; an exclusive one waits for it, then takes its turn."""
    out = run_isolated("""
        import threading, time
        from pxla_mlir.runtime.launches import LaunchLock

        lock = LaunchLock()
        assert lock.acquire(True) and lock.local.alone and lock.holders == [True] and len(lock.closed) == 1
        got = []
        shared = threading.Thread(target=lambda: (got.append(lock.acquire()), lock.release()))
        exclusive = threading.Thread(target=lambda: (got.append(lock.acquire(True)), lock.release(True)))
        shared.start(); exclusive.start()
        time.sleep(0.3)
        assert got == [] and lock.sleepers == [True]  # both kept out; the shared taker asleep on the condition
        lock.release(True)
        shared.join(10); exclusive.join(10)
        assert got == [True, True], got
        assert lock.holders == [] and lock.closed == [] and lock.sleepers == [] and not lock._exclusive
        print("ok")
    """, timeout=120)
    assert out.strip() == "ok"


def test_an_interrupted_exclusive_taker_leaves_the_lock_open():
    out = run_isolated("""
        import threading, time
        from pxla_mlir.runtime import launches
        from pxla_mlir.runtime.launches import LaunchLock

        lock = LaunchLock()
        assert lock.acquire()  # a shared holder keeps the exclusive taker polling

        real_sleep = time.sleep
        def interrupted(_):
            raise KeyboardInterrupt
        launches.time.sleep = interrupted
        try:
            lock.acquire(True)
        except KeyboardInterrupt:
            pass
        finally:
            launches.time.sleep = real_sleep
        assert lock.closed == [] and lock.local.mode is False  # still the shared holder
        lock.release()
        done = []
        t = threading.Thread(target=lambda: done.append((lock.acquire(), lock.release())))
        t.start(); t.join(10)
        assert done

        busy = threading.Event()  # a shared holder makes the next exclusive taker take its turn (not alone)
        def brief_shared_hold():
            lock.acquire(); busy.set(); time.sleep(0.2); lock.release()
        t = threading.Thread(target=brief_shared_hold)
        t.start(); busy.wait(10)
        assert lock.acquire(True) and not lock.local.alone
        t.join(10)

        def wait_interrupted(*_):  # a second exclusive taker is interrupted while it waits for the first
            raise KeyboardInterrupt
        lock._cond.wait = wait_interrupted
        interrupted = []
        def second():
            try:
                lock.acquire(True)
            except KeyboardInterrupt:
                interrupted.append(True)
        t = threading.Thread(target=second)
        t.start(); t.join(10)
        del lock._cond.wait
        assert interrupted and len(lock.closed) == 1  # only the holder's entry is left
        lock.release(True)
        assert lock.closed == [] and lock.holders == []
        assert lock.acquire()
        lock.release()
        print("ok")
    """, timeout=120)
    assert out.strip() == "ok"


def test_threads_deleting_arrays_while_others_launch_them():
    """Deletion takes the lock alone: a launch either sees the array live (and runs) or deleted (and raises
    jax's error); never a crash."""
    out = run_isolated("""
        import threading
        import numpy as np
        import jax
        from jax import lax
        import pxla_mlir

        f = pxla_mlir.pmap(lambda x: lax.psum(x, "i"), "i")
        ident = pxla_mlir.pmap(lambda x: x, "i")
        pool = [ident(np.full((8, 2), float(k), np.float32)) for k in range(200)]
        jax.block_until_ready(f(pool[0]))
        results, errors = [], []

        def launcher():
            for k, x in enumerate(pool):
                try:
                    results.append((k, np.asarray(f(x))))
                except RuntimeError as e:
                    assert "deleted" in str(e), e
                    errors.append(k)

        def deleter():
            for x in pool[::2]:
                x.delete()

        threads = [threading.Thread(target=launcher), threading.Thread(target=launcher),
                   threading.Thread(target=deleter)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for k, r in results:
            np.testing.assert_array_equal(r, np.full((8, 2), 8.0 * k, np.float32))
        assert all(k % 2 == 0 for k in errors)
        print("ok", len(results), len(errors))
    """, timeout=240)
    assert out.startswith("ok")


def test_a_waiting_exclusive_taker_lets_in_the_shared_taker_a_holder_waits_for():
    """A thread lets go of its hold for a cache miss (``released``); a holder then waits for it (as jaxlib's C++
    dispatch waits for the miss of its signature) while a deletion waits for the holder."""
    out = run_isolated("""
        import threading, time
        from pxla_mlir.runtime.launches import LaunchLock

        lock = LaunchLock()
        order = []
        away, done = threading.Event(), threading.Event()
        def missing():
            lock.acquire()
            with lock.released():  # compiling
                away.set(); time.sleep(0.1)
                lock.acquire(); order.append("miss launches"); lock.release()
            lock.release(); done.set()
        def holder():  # took the lock after the miss let go of it, and waits for the miss
            away.wait(); lock.acquire()
            done.wait(30); order.append("holder leaves"); lock.release()
        def exclusive():
            away.wait(); time.sleep(0.02)
            lock.acquire(True); order.append("exclusive in")
            assert lock.holders == []
            lock.release(True)
        threads = [threading.Thread(target=t) for t in (missing, holder, exclusive)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), "deadlock"
        assert order == ["miss launches", "holder leaves", "exclusive in"], order
        assert lock.holders == [] and lock.closed == [] and lock.away == []
        print("ok")
    """, timeout=120)
    assert out.strip() == "ok"


def test_overlapping_shared_holds_do_not_starve_an_exclusive_taker():
    """Two threads whose shared holds overlap keep the lock held all the time; a waiting exclusive taker closes it
    to new shared takers and gets it once the holds in progress end."""
    out = run_isolated("""
        import threading, time
        from pxla_mlir.runtime.launches import LaunchLock

        lock = LaunchLock()
        stop, got = threading.Event(), threading.Event()
        def launcher(offset):
            time.sleep(offset)
            while not stop.is_set():
                lock.acquire(); time.sleep(0.06); lock.release()
        threads = [threading.Thread(target=launcher, args=(o,)) for o in (0, 0.03)]
        for t in threads:
            t.start()
        time.sleep(0.1)
        start = time.monotonic()
        def deleter():
            lock.acquire(True); got.set(); lock.release(True)
        threading.Thread(target=deleter).start()
        took = got.wait(10)
        stop.set()
        for t in threads:
            t.join(10)
        print("ok" if took else "starved", time.monotonic() - start < 2)
    """, timeout=120)
    assert out.strip() == "ok True"


def test_a_deletion_while_a_call_waits_in_cpp_for_another_threads_compile():
    """Thread B calls a signature thread A is compiling and waits in jaxlib's C++ dispatch, holding the launch lock
    shared; a deletion then waits for B; A's launch must still get the lock. The window in which B can get there
    (before A's miss is counted) is microseconds; the test widens it."""
    out = run_isolated("""
        import threading, time
        import numpy as np
        import jax
        from jax import lax
        import pxla_mlir
        from pxla_mlir.runtime import dispatch

        f = pxla_mlir.pmap(lambda x: lax.psum(x * 3, "i"), "i")
        ident = pxla_mlir.pmap(lambda x: x, "i")
        x, victim = ident(np.arange(8, dtype=np.float32)), ident(np.ones(8, np.float32))
        jax.block_until_ready((x, victim))

        counted = dispatch.FastDispatch._missing_released
        entered = threading.Event()
        def counted_late(self):
            entered.set()
            time.sleep(0.5)
            return counted(self)
        dispatch.FastDispatch._missing_released = counted_late
        out = {}
        a = threading.Thread(target=lambda: out.setdefault("a", f(x)))
        b = threading.Thread(target=lambda: out.setdefault("b", f(x)))
        c = threading.Thread(target=victim.delete)
        a.start(); entered.wait(); time.sleep(0.1)
        dispatch.FastDispatch._missing_released = counted
        b.start(); time.sleep(0.1)
        c.start()
        for t in (a, b, c):
            t.join(60)
            assert not t.is_alive(), "deadlock"
        for r in out.values():
            np.testing.assert_array_equal(np.asarray(r), np.full(8, 3 * 28.0, np.float32))
        assert sorted(out) == ["a", "b"] and victim.is_deleted()
        print("ok")
    """, timeout=180)
    assert out.strip() == "ok"


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
