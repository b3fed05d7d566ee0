"""Calls at C++ speed: repeated calls skip Python, stay correct, and every
input the C++ side would mishandle still takes the validating Python path."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CPP_LOWERING, CPP_MODE, REPLICAS_ASSEMBLE
from jax import lax

import pxla_mlir
from pxla_mlir.mlir.support.stats import STATS
from pxla_mlir.runtime import dispatch


def python_calls(fn, *args, times=5):
    """How many of ``times`` calls took the Python path."""
    before = STATS["python_calls"]
    for _ in range(times):
        out = fn(*args)
    jax.block_until_ready(out)
    return STATS["python_calls"] - before, out


def psum2(x):
    return lax.psum(x * 2, "i")


@pytest.mark.parametrize("mode", ["replica", "partition"])
def test_repeated_device_and_host_calls_skip_python(mode):
    """Where jaxlib cannot wrap a replica-mode program's outputs in C++ (REPLICAS_ASSEMBLE), every call of
    one takes the Python path, with the same values."""
    f = pxla_mlir.pmap(psum2, "i", mode=mode)
    python = 5 if mode == "replica" and REPLICAS_ASSEMBLE else 0
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    y = f(x)
    misses, out = python_calls(f, x)
    assert misses == python
    np.testing.assert_allclose(out, np.broadcast_to(2 * x.sum(0), (8, 3)))
    f(y)  # a new signature: device-resident input
    misses, out = python_calls(f, y)
    assert misses == python
    np.testing.assert_allclose(out, np.broadcast_to(16 * 2 * x.sum(0), (8, 3)))


def test_replica_mode_outputs_are_assembled_in_python_where_jaxlib_cannot_wrap_them(monkeypatch):
    """Where jaxlib's C++ dispatch cannot wrap a replica-mode program's outputs (REPLICAS_ASSEMBLE: host
    copies of its arrays failed with "Shape mismatch during ToLiteral conversion"), no signature of such a
    map gets a C++ fast path: every call takes the Python path, which assembles outputs that read back to
    host exactly (a pytree of them, PRNG key arrays included). Elsewhere repeated calls take C++."""
    handed = []  # the fast-path data the Python path hands C++, one per signature given a fast path
    fastpath_data = dispatch.fastpath_data
    monkeypatch.setattr(dispatch, "fastpath_data", lambda *a: (handed.append(a), fastpath_data(*a))[1])
    f = pxla_mlir.pmap(lambda x: {"sum": lax.psum(x, "i"), "pair": (x * 2, lax.axis_index("i"))}, "i")
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    assert f.lower(x).compile().executable.assembles_results is REPLICAS_ASSEMBLE
    python = 5 if REPLICAS_ASSEMBLE else 0

    def check(out, x):
        assert jax.tree.structure(out) == jax.tree.structure({"sum": 0, "pair": (0, 0)})
        np.testing.assert_array_equal(np.asarray(out["sum"]), np.broadcast_to(x.sum(0), (8, 3)))
        np.testing.assert_array_equal(np.asarray(out["pair"][0]), 2 * x)
        np.testing.assert_array_equal(np.asarray(out["pair"][1]), np.arange(8, dtype=np.int32))
        assert np.asarray(out["sum"]).dtype == np.float32 and np.asarray(out["pair"][1]).dtype == np.int32

    check(f(x), x)  # compiles: the Python path, either way
    misses, out = python_calls(f, x)  # host input: the flattening dispatcher
    assert misses == python
    check(out, x)
    y = out["pair"][0]
    f(y)  # a new signature: device-resident input (the dispatcher keyed by the arrays)
    misses, out = python_calls(f, y)
    assert misses == python
    check(out, 2 * x)
    assert len(handed) == (0 if REPLICAS_ASSEMBLE else 2)

    k = pxla_mlir.pmap(lambda x: (jax.random.fold_in(jax.random.key(7), lax.axis_index("i")), x + 1), "i")
    assert k.lower(x).compile().executable.assembles_results is REPLICAS_ASSEMBLE
    want = jax.random.key_data(jax.vmap(lambda i: jax.random.fold_in(jax.random.key(7), i))(jnp.arange(8)))
    for _ in range(3):
        keys, plus = k(x)
        assert jax.dtypes.issubdtype(keys.dtype, jax.dtypes.prng_key) and keys.shape == (8,)
        np.testing.assert_array_equal(np.asarray(jax.random.key_data(keys)), np.asarray(want))
        np.testing.assert_array_equal(np.asarray(plus), x + 1)


@pytest.mark.slow  # about 3 s of CPU with jax warm: 500-leaf pytrees traced and flattened
def test_many_arguments_and_pytrees_of_500_leaves():
    f = pxla_mlir.pmap(lambda *xs: [lax.psum(x, "i") + k for k, x in enumerate(xs)], "i", mode=CPP_MODE)
    xs = [np.full((8, 2), k, np.float32) for k in range(100)]
    dev = f(*xs)  # dev[k] = 8k + k
    f(*dev)
    misses, out = python_calls(f, *dev)
    assert misses == 0 and [float(o[0, 0]) for o in out[:3]] == [0.0, 73.0, 146.0]
    tree = {f"w{k}": np.full((8,), k, np.float32) for k in range(500)}
    g = pxla_mlir.pmap(lambda t: jax.tree.map(lambda v: v * 3, t), "i", mode=CPP_MODE)
    dev = g(tree)
    g(dev)
    misses, out = python_calls(g, dev)
    assert misses == 0 and float(out["w7"][0]) == 7 * 9


def test_positional_device_arrays_skip_flattening_and_stay_bounded(monkeypatch):
    """Calls with jax.Arrays alone go to a C++ dispatcher of their own (nothing flattened in Python),
    bounded like the map's caches; a pytree or host argument of the same map keeps the flattening one."""
    from pxla_mlir.maps import function

    monkeypatch.setattr(function, "CACHE_SIZE", 2)
    f = pxla_mlir.pmap(lambda a, b: a * 2 + b, "i", mode=CPP_MODE)
    fast = None
    for n in range(1, 5):
        x = np.full((8, n), n, np.float32)
        y = f(x, x)
        f(y, y)
        misses, out = python_calls(f, y, y)
        assert misses == 0
        np.testing.assert_array_equal(np.asarray(out), np.full((8, n), 9 * n, np.float32))
        fast = f._entry.dispatchers.get(f._environment())
    assert fast.arrays._cache_size() == 2 and fast._cpp._cache_size() == 2
    f(x, y)  # a host argument: a new signature, on the flattening dispatcher
    misses, _ = python_calls(f, x, y)
    assert misses == 0 and fast.arrays._cache_size() == 2


def test_static_arguments_and_broadcast_scalars():
    f = pxla_mlir.pmap(lambda x, s, c: x * s + c, "i", in_axes=(0, None, None), static_broadcasted_argnums=1,
                       mode=CPP_MODE)
    x = np.ones((8,), np.float32)
    assert float(f(x, 3, 1.0)[0]) == 4.0
    misses, out = python_calls(f, x, 3, 2.0)
    assert misses == 0 and float(out[0]) == 5.0
    misses, out = python_calls(f, x, 5, 2.0, times=1)
    assert misses == 1 and float(out[0]) == 7.0  # another static value: another program


def test_inputs_the_fast_path_must_not_take_are_still_correct():
    f = pxla_mlir.pmap(psum2, "i")
    x = np.arange(8, dtype=np.float32)
    y = f(x)
    f(y)  # warm: the signature of y now has a fast path
    devices = list(y.sharding.mesh.devices.flat)
    reversed_mesh = jax.sharding.Mesh(np.array(devices[::-1]).reshape(y.sharding.mesh.devices.shape),
                                     y.sharding.mesh.axis_names)
    flipped = jax.device_put(y, jax.sharding.NamedSharding(reversed_mesh, y.sharding.spec))
    np.testing.assert_allclose(f(flipped), f(y))
    replicated = jax.device_put(y, jax.sharding.NamedSharding(y.sharding.mesh, jax.sharding.PartitionSpec()))
    np.testing.assert_allclose(f(replicated), f(y))
    single = jax.device_put(np.asarray(y), jax.devices()[0])
    np.testing.assert_allclose(f(single), f(y))
    as_int = y.astype(jnp.int32)  # same byte size, another dtype: another program
    np.testing.assert_array_equal(f(as_int), np.full(8, int(np.asarray(f(y))[0])))


def test_jit_of_pmaps_takes_the_fast_path():
    inner = pxla_mlir.pmap(psum2, "i", mode=CPP_MODE)
    step = pxla_mlir.jit(lambda w: inner(w) + 1, mode=CPP_MODE)
    w = np.ones((8,), np.float32)
    first = step(w)
    misses, out = python_calls(step, w)
    assert misses == 0
    np.testing.assert_allclose(out, first)


def test_xmap_takes_the_fast_path_per_mesh():
    f = pxla_mlir.xmap(lambda x: lax.psum(x * 2, "i"), in_axes=["i", ...], out_axes=[...],
                       axis_resources={"i": "d"}, lowering=CPP_LOWERING)
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))
    oracle = jax.jit(jax.shard_map(lambda b: lax.psum(b * 2, "d"), mesh=mesh, in_specs=jax.sharding.PartitionSpec("d"),
                                   out_specs=jax.sharding.PartitionSpec()))(x)[0]
    with pxla_mlir.Mesh(np.array(jax.devices()), ("d",)):
        f(x)
        misses, out = python_calls(f, x)
    assert misses == 0
    np.testing.assert_array_equal(out, oracle)
    with pxla_mlir.Mesh(np.array(jax.devices()[:4]), ("d",)):  # another mesh: its own program, then fast too
        f(x)
        misses, out = python_calls(f, x)
    assert misses == 0
    np.testing.assert_array_equal(out, oracle)
    for devices in (jax.devices(), jax.devices()[:4]):  # back to each: an equal mesh finds its program again
        with pxla_mlir.Mesh(np.array(devices), ("d",)):
            misses, out = python_calls(f, x)
        assert misses == 0
        np.testing.assert_array_equal(out, oracle)


def test_xmap_under_jax_meshes_takes_the_fast_path_per_mesh():
    """Under ``jax.set_mesh`` the mesh in scope is jax's: each one keeps its own program, found from C++."""
    f = pxla_mlir.xmap(lambda x: lax.psum(x * 2, "i") + x, in_axes=["i", ...], out_axes=["i", ...],
                       axis_resources={"i": "d"}, lowering=CPP_LOWERING)
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    want = x + 2 * x.sum(0)
    meshes = [jax.sharding.Mesh(np.array(devices), ("d",)) for devices in (jax.devices(), jax.devices()[:4])]
    for mesh in [*meshes, *meshes]:
        with jax.set_mesh(mesh):
            y = f(x)
            assert y.sharding.mesh.devices.size == mesh.devices.size
            misses, out = python_calls(f, x)
        assert misses == 0
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("lowering", ["replica", "manual", "vectorize"])
def test_xmap_device_inputs_take_the_fast_path_and_keep_the_partitioning_check(lowering):
    """An xmap fed its own outputs (laid out on the mesh) runs from C++ like pmap (the replica lowering from
    Python where REPLICAS_ASSEMBLE), equal to jax.jit(shard_map); an input laid out otherwise still raises
    2022's ValueError after that."""
    f = pxla_mlir.xmap(lambda x: x * 2 + lax.psum(x, "i"), in_axes=["i", ...], out_axes=["i", ...],
                       axis_resources={"i": "d"}, lowering=lowering)
    python = 5 if lowering == "replica" and REPLICAS_ASSEMBLE else 0
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))
    spec = jax.sharding.PartitionSpec("d")
    step = jax.jit(jax.shard_map(lambda b: b * 2 + lax.psum(b, "d"), mesh=mesh, in_specs=spec, out_specs=spec))
    with pxla_mlir.Mesh(np.array(jax.devices()), ("d",)):
        y = f(x)
        f(y)  # a new signature (a jax.Array on the mesh): the Python path once
        misses, out = python_calls(f, y)
        assert misses == python
        np.testing.assert_array_equal(out, step(step(x)))
        replicated = jax.device_put(y, jax.sharding.NamedSharding(y.sharding.mesh, jax.sharding.PartitionSpec()))
        with pytest.raises(ValueError, match=r"^Got an input Array to xmap with different partitioning"):
            f(replicated)
        misses, out = python_calls(f, y)
    assert misses == python
    np.testing.assert_array_equal(out, step(step(x)))


def run_isolated(code: str, timeout: int = 240) -> subprocess.CompletedProcess:
    """Code that could abort the process runs in its own interpreter."""
    prelude = ("import os\nos.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=8 "
               "--xla_cpu_collective_call_terminate_timeout_seconds=20'\n")
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.subprocess
def test_donated_arrays_cannot_be_reused_on_the_fast_path():
    p = run_isolated("""
        import jax, numpy as np, pxla_mlir
        g = pxla_mlir.pmap(lambda a: a + 1, "i", donate_argnums=0)
        a = g(np.zeros(8, np.float32))
        b = g(a)        # warm the fast path for a's signature; a is consumed
        c = g(b)
        for bad in ((a,), (b,)):
            try:
                g(*bad)
            except RuntimeError as e:
                print("refused:", str(e).split(":")[0])
        h = pxla_mlir.pmap(lambda a, b: a + b, "i", donate_argnums=(0, 1))
        x = g(c)
        try:
            h(x, x)
        except RuntimeError as e:
            print("twice:", "previously donated in the same call" in str(e))
        fresh = pxla_mlir.pmap(lambda a: a * 1, "i")
        one = pxla_mlir.pmap(lambda a, b: a + b, "i", donate_argnums=0)
        one(fresh(np.ones(8, np.float32)), fresh(np.ones(8, np.float32)))  # warm: two different arrays
        w = fresh(np.ones(8, np.float32))
        for call in (lambda: one(w, w), lambda: one(w, b=w)):
            try:
                call()
            except RuntimeError as e:
                print("donated-and-plain:", "previously donated in the same call" in str(e))
        print("value", float(np.asarray(g(x))[0]))
        xg = pxla_mlir.xmap(lambda a: a + 1, ["i", ...], ["i", ...], axis_resources={"i": "d"}, donate_argnums=0)
        with pxla_mlir.Mesh(np.array(jax.devices()), ("d",)):
            a = xg(np.zeros(8, np.float32))
            b = xg(a)  # warm the fast path for a's signature; a is consumed
            xg(b)
            for bad in (a, b):
                try:
                    xg(bad)
                except RuntimeError as e:
                    print("xmap: refused", str(e).split(":")[0])
    """)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.count("refused: Array has been deleted with shape=float32[8]") == 2
    assert "twice: True" in p.stdout and "value 5.0" in p.stdout
    assert p.stdout.count("donated-and-plain: True") == 2
    assert p.stdout.count("xmap: refused Array has been deleted with shape=float32[8]") == 2


@pytest.mark.subprocess
def test_a_thousand_unblocked_calls_on_the_fast_path_do_not_deadlock():
    """Plain jax.pmap aborts the process after ~40 un-blocked calls (XLA:CPU collective rendezvous); the
    in-flight window prevents it, with and without donation."""
    p = run_isolated("""
        import numpy as np, pxla_mlir
        from jax import lax
        f = pxla_mlir.pmap(lambda v: lax.psum(v, "i") / 8, "i")
        y = f(np.ones((8, 16), np.float32))
        for _ in range(1000):
            y = f(y)
        g = pxla_mlir.pmap(lambda v: lax.psum(v, "i") / 8, "i", donate_argnums=0)
        z = g(np.ones((8, 16), np.float32))
        for _ in range(1000):
            z = g(z)
        np.testing.assert_allclose(np.asarray(y), 1.0)
        np.testing.assert_allclose(np.asarray(z), 1.0)
        print(float(np.asarray(y)[0, 0]), float(np.asarray(z)[0, 0]))
    """)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["1.0", "1.0"]


def test_host_numpy_written_right_after_the_call_does_not_reach_the_launch():
    """The C++ path copies host numpy inputs as the Python path does (jax would alias an aligned
    array's memory on CPU: 2 of 8 rows changed)."""
    f = pxla_mlir.pmap(lambda v: v * 2 + lax.psum(v, "i") * 0, "i", mode=CPP_MODE)
    ref = 2 * np.arange(8 * 1000, dtype=np.float32).reshape(8, 1000)
    f(np.zeros((8, 1000), np.float32))
    before = STATS["python_calls"]
    outs = []
    for _ in range(10):
        x = np.arange(8 * 1000, dtype=np.float32).reshape(8, 1000)
        outs.append(f(x))
        x[:] = -1.0  # at once, while the launch may still be reading
    assert STATS["python_calls"] == before, "these calls should take the C++ path"
    for y in outs:
        np.testing.assert_array_equal(np.asarray(y), ref)


@pytest.mark.subprocess
def test_arrays_donated_or_deleted_elsewhere_are_refused_on_every_path():
    """A non-donating map gets an array that another map or jax.jit donated, or that was deleted: jaxlib
    segfaults on such an argument (the C++ fast path included); every path raises jax's RuntimeError."""
    from isolation import run_isolated

    out = run_isolated("""
        import jax, numpy as np, pxla_mlir
        f = pxla_mlir.pmap(lambda v: v * 2, "i")
        t = pxla_mlir.pmap(lambda tree: tree["a"] + tree["b"], "i")
        x = np.arange(8.0, dtype=np.float32)
        warm = f(x); f(warm); f(warm)  # the fast path knows this signature
        t({"a": warm, "b": warm}); t({"a": warm, "b": warm})
        donate_pmap = pxla_mlir.pmap(lambda v: v + 1, "i", donate_argnums=0)
        donate_jit = jax.jit(lambda v: v + 1, donate_argnums=0)
        def gone(how):
            z = f(x)
            {"pmap": lambda: donate_pmap(z), "jit": lambda: donate_jit(z), "delete": z.delete}[how]()
            return z
        xm = pxla_mlir.xmap(lambda v: v * 2, ["b", ...], ["b", ...], axis_resources={"b": "i"})
        mesh = pxla_mlir.Mesh(np.array(jax.devices()), ("i",))  # the mesh of pmap's outputs: laid out as xm maps
        def on_mesh(call):
            with mesh:
                return call()
        on_mesh(lambda: (xm(warm), xm(warm)))
        calls = {"fast path": lambda z: f(z), "pytree leaf": lambda z: t({"a": warm, "b": z}),
                 "compiled": lambda z: f.lower(z).compile()(z), "jit of pmap": lambda z: pxla_mlir.jit(f)(z),
                 "xmap": lambda z: on_mesh(lambda: xm(z))}
        for how in ("pmap", "jit", "delete"):
            for name, call in calls.items():
                try:
                    call(gone(how))
                    print(how, name, "ran")
                except RuntimeError as e:
                    print(how, name, "refused" if str(e).startswith("Array has been deleted") else str(e)[:80])
        print("alive", float(np.asarray(f(x))[1]))
    """)
    lines = out.splitlines()
    assert lines[-1] == "alive 2.0"
    assert lines[:-1] == [f"{how} {name} refused" for how in ("pmap", "jit", "delete")
                          for name in ("fast path", "pytree leaf", "compiled", "jit of pmap", "xmap")]


@pytest.mark.subprocess
def test_deleting_from_another_thread_during_calls_never_crashes():
    """jaxlib segfaults when a buffer is deleted while a multi-device launch is being prepared (2 of 3
    runs before): a deletion now waits for the launches in progress, and a call made after it raises."""
    from isolation import run_isolated

    out = run_isolated("""
        import threading, time
        import jax.numpy as jnp, numpy as np, pxla_mlir
        f = pxla_mlir.pmap(lambda v: jnp.sin(v) @ jnp.cos(v).T, "i")
        base = np.ones((8, 64, 64), np.float32)
        ref = np.asarray(f(base))
        f(f(base))
        outcomes = {"ok": 0, "refused": 0}
        for trial in range(150):
            z = f(base)
            z.block_until_ready()
            killer = threading.Thread(target=lambda: (time.sleep((trial % 15) * 2e-5), z.delete()))
            killer.start()
            try:
                for _ in range(3):
                    y = f(z)
                outcomes["ok"] += 1
            except RuntimeError as e:
                assert str(e).startswith("Array has been deleted"), e
                outcomes["refused"] += 1
            killer.join()
        np.testing.assert_allclose(np.asarray(f(base)), ref)
        print(sum(outcomes.values()), outcomes["refused"] > 0)
    """)
    assert out.split() == ["150", "True"]


@pytest.mark.parametrize("donate", [False, True])
def test_unblocked_cached_calls_keep_at_most_the_window_in_flight(donate):
    """A loop that never waits (C++ path; donating: the checking path) stays within the in-flight window:
    beyond it the oldest half of the launches is waited for, and every result is still right."""
    from pxla_mlir.runtime.inflight import INFLIGHT, INFLIGHT_WINDOW, wait_for_launches

    f = pxla_mlir.pmap(lambda x: x + lax.psum(x, "i"), "i", donate_argnums=(0,) if donate else (), mode=CPP_MODE)
    y = f(np.zeros((8, 4), np.float32))
    wait_for_launches()
    seen = []
    for _ in range(3 * INFLIGHT_WINDOW + 1):
        y = f(y)
        seen.append(len(INFLIGHT))
    assert max(seen) == INFLIGHT_WINDOW
    if not donate:  # (a donated fence cannot be waited on: every launch is waited for then)
        assert min(seen[INFLIGHT_WINDOW:]) == INFLIGHT_WINDOW // 2 + 1
    # x -> x + 8x each step, from 1s: 9**steps (exact in float32 for these few steps)
    z = f(np.ones((8, 4), np.float32))
    for _ in range(6):
        z = f(z)
    np.testing.assert_array_equal(np.asarray(z), np.full((8, 4), 9.0 ** 7, np.float32))


def test_a_donating_step_that_returns_its_state_first_never_waits_for_every_launch(monkeypatch):
    """A training step ``(state, batch) -> (state, loss)`` donates its first output to the next step; the
    window waits on its last output (the loss), so the loop keeps its launches in flight instead of waiting
    for all of them every few steps. Values stay right."""
    from pxla_mlir.runtime import inflight

    inflight.wait_for_launches()  # launches of earlier tests, some since donated
    drains = []
    monkeypatch.setattr(inflight, "wait_for_launches", lambda: drains.append(1))

    def step(state, batch):
        w, t = state
        loss = lax.pmean(jnp.sum(w * batch), "i")
        return (w - 0.5 * batch, t + 1.0), loss

    f = pxla_mlir.pmap(step, "i", donate_argnums=0)
    w0, batch = np.ones((8, 4), np.float32), np.full((8, 4), 2.0, np.float32)
    state = (jnp.asarray(w0), jnp.zeros(8, np.float32))
    steps = 3 * inflight.INFLIGHT_WINDOW
    for _ in range(steps):
        state, loss = f(state, batch)
    assert drains == []
    np.testing.assert_array_equal(np.asarray(state[0]), w0 - steps * 1.0)
    np.testing.assert_array_equal(np.asarray(state[1]), np.full(8, float(steps), np.float32))
    np.testing.assert_array_equal(np.asarray(loss), np.full(8, 4 * 2.0 * (1.0 - (steps - 1)), np.float32))


# -- call storms plain jax.pmap does not survive, each in its own process with a hard timeout
# (tests/isolation.py): a crash fails one test, never the run --------------------------------------------


@pytest.mark.subprocess
def test_threads_racing_one_pmap_get_their_own_results():
    from isolation import run_isolated

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


@pytest.mark.subprocess
@pytest.mark.parametrize("code, kind", [
    ("import os; os.abort()", "killed by SIGABRT"),
    ("import ctypes; ctypes.string_at(0)", "killed by SIGSEGV"),
    pytest.param("import time; time.sleep(60)", "no result after 2 s", marks=pytest.mark.slow),  # waits out 2 s
])
def test_a_crash_fails_one_test_and_the_run_goes_on(code, kind):
    from isolation import IsolatedFailure, run_isolated

    with pytest.raises(IsolatedFailure, match=kind):
        run_isolated(code, timeout=2)
