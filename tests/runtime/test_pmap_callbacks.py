"""Host callbacks (jax.debug.print/callback, pure_callback, io_callback,
ordered or not) inside pmap, nested pmap, pxla_mlir.jit and xmap, in replica
and partition mode: every device calls back with its own values, as
jax.pmap does."""

import os
import subprocess
import sys
import textwrap
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import io_callback

import pxla_mlir

MODES = ["replica", "partition"]
X = np.arange(8.0, dtype=np.float32)
SCALAR = jax.ShapeDtypeStruct((), np.float32)


class Recorder:
    """Collects the arguments of host calls from XLA's threads."""

    def __init__(self):
        self.calls, self._lock = [], threading.Lock()

    def __call__(self, *args):
        with self._lock:
            self.calls.append(tuple(np.asarray(a).tolist() for a in args))

    def sorted(self):
        jax.effects_barrier()
        return sorted(self.calls)


@pytest.mark.parametrize("mode", MODES)
def test_debug_callback_runs_on_every_device_with_its_values(mode):
    rec = Recorder()
    f = pxla_mlir.pmap(lambda v: (jax.debug.callback(rec, lax.axis_index("i"), v), v * 2)[1], "i", mode=mode)
    np.testing.assert_array_equal(f(X), 2 * X)
    assert rec.sorted() == [(i, float(i)) for i in range(8)]
    ref = Recorder()
    jax.pmap(lambda v: (jax.debug.callback(ref, lax.axis_index("i"), v), v * 2)[1], "i")(X)
    assert ref.sorted() == rec.sorted()


@pytest.mark.parametrize("mode", MODES)
def test_debug_print_in_nested_pmap_prints_once_per_device(mode, capsys):
    inner = pxla_mlir.pmap(lambda v: (jax.debug.print("i={i} j={j} v={v}", i=lax.axis_index("i"),
                                                      j=lax.axis_index("j"), v=v), v + 1)[1], "j")
    out = pxla_mlir.pmap(inner, "i", mode=mode)(X.reshape(2, 4))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, X.reshape(2, 4) + 1)
    lines = sorted(capsys.readouterr().out.splitlines())
    assert lines == sorted(f"i={i} j={j} v={4.0 * i + j}" for i in range(2) for j in range(4))


@pytest.mark.parametrize("mode", MODES)
def test_pure_callback_values_as_jax_pmap(mode):
    def body(v):
        return jax.pure_callback(lambda a, i: np.float32(a * 10 + i), SCALAR, v, lax.axis_index("i"))

    np.testing.assert_array_equal(pxla_mlir.pmap(body, "i", mode=mode)(X), jax.pmap(body, "i")(X))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ordered", [False, True])
def test_io_callback_as_jax_pmap(mode, ordered):
    rec = Recorder()

    def body(v):
        first = io_callback(lambda a: (rec("first", a), np.float32(a + 1))[1], SCALAR, v, ordered=ordered)
        return io_callback(lambda a: (rec("second", a), np.float32(a * 2))[1], SCALAR, first, ordered=ordered)

    f = pxla_mlir.pmap(body, "i", mode=mode)
    for _ in range(3):
        np.testing.assert_array_equal(f(X), 2 * (X + 1))
    calls = rec.sorted()
    assert calls == sorted([("first", float(v)) for v in X] * 3 + [("second", float(v + 1)) for v in X] * 3)
    if ordered:  # each device: first then second, call after call
        per_device: dict = {}
        for name, value in rec.calls:
            device = value if name == "first" else value - 1
            per_device.setdefault(device, []).append(name)
        assert all(seq == ["first", "second"] * 3 for seq in per_device.values())


@pytest.mark.parametrize("mode", MODES)
def test_debug_print_ordered(mode, capsys):
    f = pxla_mlir.pmap(lambda v: (jax.debug.print("a{v}", v=v, ordered=True),
                                  jax.debug.print("b{v}", v=v, ordered=True), v)[2], "i", mode=mode)
    f(X)
    jax.effects_barrier()
    lines = capsys.readouterr().out.splitlines()
    assert sorted(lines) == sorted([f"a{v}" for v in X] + [f"b{v}" for v in X])
    assert all(lines.index(f"a{v}") < lines.index(f"b{v}") for v in X)


@pytest.mark.parametrize("mode", MODES)
def test_callbacks_under_grad_cond_and_scan(mode):
    rec = Recorder()

    def body(v):
        lax.cond(v > 3, lambda: jax.debug.callback(rec, "cond", v), lambda: None)
        lax.scan(lambda c, _: (jax.debug.callback(rec, "scan", c), c + 1)[1:] + (None,), v, None, length=2)
        return jnp.sin(v)

    g = jax.grad(lambda x: pxla_mlir.pmap(body, mode=mode)(x).sum())(X)
    np.testing.assert_allclose(g, np.cos(X), rtol=1e-6)
    calls = rec.sorted()
    assert [c for c in calls if c[0] == "cond"] == [("cond", float(v)) for v in X if v > 3]
    assert [c for c in calls if c[0] == "scan"] == sorted(("scan", float(v + k)) for v in X for k in range(2))


@pytest.mark.parametrize("mode", MODES)
def test_callbacks_in_pxla_mlir_jit(mode):
    rec = Recorder()

    def step(x):
        jax.debug.callback(rec, "outside", x.sum())  # replicated code: every device calls back
        return pxla_mlir.pmap(lambda v: (jax.debug.callback(rec, "inside", v), v * 2)[1], "i")(x)

    np.testing.assert_array_equal(pxla_mlir.jit(step, mode=mode)(X), 2 * X)
    calls = rec.sorted()
    assert calls == sorted([("inside", float(v)) for v in X] + [("outside", float(X.sum()))] * 8)


@pytest.mark.parametrize("lowering", ["replica", "manual", "vectorize"])
def test_callbacks_in_xmap(lowering):
    rec = Recorder()
    f = pxla_mlir.xmap(lambda v: (jax.debug.callback(rec, lax.axis_index("m"), v), v * 2)[1], in_axes=["m", ...],
                       out_axes=["m", ...], axis_resources={"m": "x"}, lowering=lowering)
    block = X.reshape(2, 4)
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        np.testing.assert_array_equal(f(block), 2 * block)
    calls = rec.sorted()
    # One call per device of each index of 'm' ('y' replicates the tile), or per index in the global view.
    copies = 1 if lowering == "vectorize" else 4
    assert calls == sorted([(m, block[m].tolist()) for m in range(2)] * copies)


def test_effects_barrier_waits_for_callbacks():
    rec = Recorder()

    def slow(v):
        threading.Event().wait(0.05)
        rec(v)

    pxla_mlir.pmap(lambda v: (jax.debug.callback(slow, v), v)[1])(X)
    jax.effects_barrier()
    assert len(rec.calls) == 8


@pytest.mark.subprocess
def test_exit_with_callbacks_in_flight_does_not_abort():
    script = textwrap.dedent("""
        import time, numpy as np, jax, pxla_mlir
        f = pxla_mlir.pmap(lambda v: (jax.debug.callback(lambda a: time.sleep(0.2), v), v)[1])
        f(np.arange(8.0, dtype=np.float32))
        print("returned")
    """)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "returned"


def test_lowered_module_carries_the_callback_for_every_device():
    lowered = pxla_mlir.pmap(lambda v: (jax.debug.callback(lambda a: None, v), v)[1]).lower(X)
    text = lowered.as_text()
    assert text.count("xla_ffi_python_cpu_callback") == 1 and "mhlo.num_replicas = 8" in text
    assert len(lowered.host_callbacks) == 1
    body = lambda v: (io_callback(lambda a: a, SCALAR, v, ordered=True), v)[1]  # noqa: E731
    partition = pxla_mlir.pmap(body, mode="partition").lower(X).as_text()
    callback = partition.split("xla_ffi_python_cpu_callback")[1].split("\n")[0]
    # every device calls back: replicated on no mesh, one entry per result (token, value)
    assert "sdy.sharding = #sdy.sharding_per_value<[<mesh<[]>, []>, <mesh<[]>, []>]>" in callback
    assert "!mhlo.token" not in partition.split("func.func public @main(")[1].split("{")[0]  # tokens stay inside
    gspmd = pxla_mlir.pmap(body, mode="partition", shardings="gspmd").lower(X).as_text()
    assert 'mhlo.sharding = "{manual}"' in gspmd.split("xla_ffi_python_cpu_callback")[1].split("\n")[0]


@pytest.mark.parametrize("mode", MODES)
def test_partitioned_debug_callback(mode):
    rec = Recorder()
    pxla_mlir.pmap(lambda v: (jax.debug.callback(rec, v, partitioned=True), v)[1], mode=mode)(X)
    assert rec.sorted() == [(float(v),) for v in X]


def test_sharding_inspection_inside_a_map_is_a_clear_error():
    with pytest.raises(NotImplementedError, match=r"jax.debug.inspect_array_sharding/visualize_array_sharding at "
                                                  r".*test_pmap_callbacks.py:\d+.*cannot run inside a pxla_mlir map"):
        pxla_mlir.pmap(lambda v: (jax.debug.inspect_array_sharding(v, callback=print), v)[1])(X)


@pytest.mark.parametrize("mode", MODES)
def test_ordered_io_callback_in_nested_pmap(mode):
    rec = Recorder()
    inner = pxla_mlir.pmap(lambda v: io_callback(lambda a: (rec(a), np.float32(a + 1))[1], SCALAR, v, ordered=True),
                           "j")
    out = pxla_mlir.pmap(inner, "i", mode=mode)(X.reshape(2, 4))
    np.testing.assert_array_equal(out, X.reshape(2, 4) + 1)
    assert rec.sorted() == [(float(v),) for v in X]


@pytest.mark.subprocess
def test_an_exception_in_a_callback_is_raised_by_the_call():
    """A callback that raises on one device used to leave the others in their psum until XLA's rendezvous
    aborted the process (~60 s later); now the call raises the callback's own exception, and the process
    goes on. Isolated: the old failure is an abort."""
    from isolation import run_isolated

    out = run_isolated("""
        import jax, numpy as np, pxla_mlir
        from jax import lax
        from jax.experimental import io_callback

        class Refused(Exception):
            pass

        def picky(v):
            if np.any(np.asarray(v) == 3.0):
                raise Refused("device 3 refuses")
            return np.asarray(v) * 2

        out = jax.ShapeDtypeStruct((), np.float32)
        row = jax.ShapeDtypeStruct((2,), np.float32)
        x = np.arange(8.0, dtype=np.float32)
        cases = {
            "pure replica": pxla_mlir.pmap(lambda v: lax.psum(jax.pure_callback(picky, out, v), "i"), "i"),
            "pure partition": pxla_mlir.pmap(lambda v: lax.psum(jax.pure_callback(picky, out, v), "i"), "i",
                                             mode="partition"),
            "ordered io": pxla_mlir.pmap(lambda v: lax.psum(io_callback(picky, out, v, ordered=True), "i"), "i"),
            "debug callback": pxla_mlir.pmap(lambda v: (jax.debug.callback(picky, v), lax.psum(v, "i"))[1], "i"),
            "xmap vectorize": pxla_mlir.xmap(
                lambda v: lax.psum(jax.pure_callback(picky, row, v, vmap_method="sequential"), "n"),
                in_axes=["n", ...], out_axes=["n", ...], lowering="vectorize"),
        }
        for name, f in cases.items():
            arg = x.reshape(4, 2) if name.startswith("xmap") else x
            try:
                f(arg)
                jax.effects_barrier()
                print(name, "no error")
            except Refused as e:
                print(name, "raised", str(e), "host callback" in " ".join(getattr(e, "__notes__", [])))
        good = pxla_mlir.pmap(lambda v: lax.psum(jax.pure_callback(lambda a: np.asarray(a) * 2, out, v), "i"), "i")
        print("after", float(np.asarray(good(x))[0]))
    """, timeout=200)
    lines = out.splitlines()
    assert lines[:-1] == [f"{name} raised device 3 refuses True" for name in
                          ("pure replica", "pure partition", "ordered io", "debug callback", "xmap vectorize")]
    assert lines[-1] == "after 56.0"


@pytest.mark.subprocess
def test_a_map_called_from_inside_a_callback_is_refused():
    """The inner launch would wait for the devices the outer program holds, which wait for the callback:
    a deadlock before. Now the callback raises ReentrantLaunchError, and the outer call raises it."""
    from isolation import run_isolated

    out = run_isolated("""
        import jax, numpy as np, pxla_mlir
        from jax import lax
        from pxla_mlir.runtime.callbacks import ReentrantLaunchError
        inner = pxla_mlir.pmap(lambda v: v + 1, "inner")
        inner(np.ones(8, np.float32))  # on the fast path already
        def calls_a_map(v):
            return np.asarray(inner(np.ones(8, np.float32)))[0] * 0 + np.asarray(v)
        f = pxla_mlir.pmap(lambda v: lax.psum(jax.pure_callback(calls_a_map, jax.ShapeDtypeStruct((), np.float32),
                                                                 v), "i"), "i")
        try:
            f(np.arange(8.0, dtype=np.float32))
            print("no error")
        except ReentrantLaunchError as e:
            print("refused:", str(e)[:60])
        print("after", float(np.asarray(inner(np.ones(8, np.float32)))[0]))
    """, timeout=120)
    assert out.splitlines() == ["refused: pmap '<lambda>' was called from inside a host callback (jax.",
                                "after 2.0"]
