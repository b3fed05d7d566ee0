"""One process of a multi-process test run (started by tests/mp_helpers.py).

    python tests/multiprocess/worker.py GROUP [GROUP...]

Runs the cases of the named groups in order and prints one line per case,
``CASE <name> OK`` or ``CASE <name> FAIL <why>``; every process runs the same
cases, each checks the pieces it holds. References are computed in this
process without pxla_mlir (NumPy, jax.vmap with axis names) on the whole
input. Groups: numerics, errors, raise (process 1 raises), kill (process 1
kills itself).
"""

import os
import signal
import sys
import time
import traceback

import numpy as np

import pxla_mlir

pxla_mlir.distributed.initialize(heartbeat_timeout_seconds=int(os.environ.get("MP_HEARTBEAT", "20")))

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from pxla_mlir.distributed import MultiProcessError, ProgramMismatchError, process_local
from pxla_mlir.sharding import MeshError
from pxla_mlir.stats import STATS

NPROC, ME, K = jax.process_count(), jax.process_index(), jax.local_device_count()
N = NPROC * K
CASES: list = []


def case(group):
    def register(fn):
        CASES.append((group, fn))
        return fn
    return register


# -- helpers -------------------------------------------------------------------------------------

def share(x, axis=0):
    """This process's rows of a host value (default devices: process-major blocks)."""
    rows = x.shape[axis] // NPROC
    return np.take(x, range(ME * rows, (ME + 1) * rows), axis=axis)


def global_array(x, spec=P("d")):
    """A global jax.Array of the whole host value, laid out by jax (not by pxla_mlir): its
    leading axis over as many devices as it has rows (or fewer), the rest replicated."""
    rows = np.gcd(x.shape[0], N)
    mesh = Mesh(np.array(jax.devices()).reshape(rows, N // rows), ("d", "r"))
    return jax.make_array_from_callback(x.shape, NamedSharding(mesh, spec), lambda index: x[index])


def check(y, ref, tol=1e-5):
    """Every piece this process holds, and its process_local view."""
    ref = np.asarray(ref)
    assert y.shape == ref.shape, f"shape {y.shape} != {ref.shape}"
    assert not y.is_fully_addressable, "a multi-process result should be a global Array"
    assert y.addressable_shards, "no addressable shards"
    for s in y.addressable_shards:
        np.testing.assert_allclose(np.asarray(s.data), ref[s.index], rtol=tol, atol=tol)


def interleaved():
    """Devices with processes interleaved: [p0 d0, p1 d0, ..., p0 d1, p1 d1, ...]."""
    local = [jax.local_devices(process_index=p) for p in range(NPROC)]
    return [local[p][j] for j in range(K) for p in range(NPROC)]


def raises(fn, error, *needles):
    try:
        fn()
    except error as e:
        text = str(e)
        for needle in needles:
            assert needle in text, f"{needle!r} not in the message: {text}"
        return text
    raise AssertionError(f"no {error.__name__} raised")


def flat(x):
    return lax.psum(x, "i") + 10.0 * lax.axis_index("i")


def inner(row):
    return lax.psum(row, "j") + 10.0 * lax.axis_index("j")


def outer(block):
    return pxla_mlir.pmap(inner, "j", out_axes=1)(block) + lax.psum(block, "i").T


def ref_outer(block):  # the same program with jax.vmap only
    return jax.vmap(inner, axis_name="j", out_axes=1)(block) + lax.psum(block, "i").T


X8 = np.arange(N * 3, dtype=np.float32).reshape(N, 3) / 7.0
REF_FLAT = np.asarray(jax.vmap(flat, axis_name="i")(X8))


def nested_input(outer_size):
    return np.arange(N * 3, dtype=np.float32).reshape(outer_size, N // outer_size, 3) / 5.0


def ref_nested(x):
    return np.asarray(jax.vmap(ref_outer, axis_name="i")(x))


# -- numerics ------------------------------------------------------------------------------------

for _mode in ("replica", "partition"):
    def _flat_local(mode=_mode):
        y = pxla_mlir.pmap(flat, "i", mode=mode)(share(X8))
        check(y, REF_FLAT)
        np.testing.assert_allclose(process_local(y), share(REF_FLAT), rtol=1e-5)
    _flat_local.__name__ = f"flat_{_mode}_local_input"
    case("numerics")(_flat_local)


@case("numerics")
def flat_global_inputs():
    f = pxla_mlir.pmap(flat, "i")
    check(f(global_array(X8)), REF_FLAT)  # jax's own layout of the rows
    check(f(global_array(X8, P())), REF_FLAT)  # replicated: re-laid out by jax.device_put
    STATS.clear()
    f(share(X8))
    assert STATS["compiles"] == 0, "a local share and a global Array of the same value share one executable"


@case("numerics")
def flat_interleaved_devices_local_input():
    # Process p's devices hold rows p, p + P, p + 2P, ...: its share is those rows, in order.
    y = pxla_mlir.pmap(flat, "i", devices=interleaved())(X8[ME::NPROC])
    check(y, REF_FLAT)
    np.testing.assert_allclose(process_local(y), REF_FLAT[ME::NPROC], rtol=1e-5)


for _outer, _modes in ((2, [("replica", "all-gather"), ("replica", "all-reduce"), ("partition", "all-gather"),
                            ("partition", "all-reduce")]),
                       (4, [("replica", "all-gather"), ("partition", "all-reduce")])):
    for _mode, _unshard in _modes:
        def _nested(outer_size=_outer, mode=_mode, unshard=_unshard):
            x = nested_input(outer_size)
            ref = ref_nested(x)
            f = pxla_mlir.pmap(outer, "i", mode=mode, unshard=unshard)
            if outer_size % NPROC == 0:  # every row on one process: a local share works
                y = f(share(x))
                np.testing.assert_allclose(process_local(y), share(ref), rtol=1e-5)
            else:  # a row's inner devices span processes: global input
                y = f(global_array(x))
            check(y, ref)
        _nested.__name__ = f"nested_{_outer}x{N // _outer}_{_mode}_{_unshard}"
        case("numerics")(_nested)


@case("numerics")
def nested_interleaved_devices_inner_groups_span_processes():
    x = nested_input(2)
    for mode in ("replica", "partition"):
        y = pxla_mlir.pmap(outer, "i", mode=mode, devices=interleaved())(global_array(x))
        check(y, ref_nested(x))


def loss(w, x):
    per_device = pxla_mlir.pmap(lambda w, a: lax.psum(jnp.sum(jnp.tanh(a * w) ** 2), "i"), "i",
                                in_axes=(None, 0), out_axes=None)
    return per_device(w, x)


def ref_loss(w, x):
    return jax.vmap(lambda a: lax.psum(jnp.sum(jnp.tanh(a * w) ** 2), "i"), axis_name="i", out_axes=None)(x)


@case("numerics")
def grad_of_pmap():
    w = np.float32(0.3)
    ref_w, ref_x = jax.grad(ref_loss, argnums=(0, 1))(w, X8)
    g = jax.grad(loss)(w, share(X8))  # a local share that is not differentiated
    np.testing.assert_allclose(process_local(g), ref_w, rtol=1e-5)
    gw, gx = jax.grad(loss, argnums=(0, 1))(w, global_array(X8))
    np.testing.assert_allclose(process_local(gw), ref_w, rtol=1e-5)
    check(gx, ref_x)
    raises(lambda: jax.grad(loss, argnums=1)(w, share(X8)), MultiProcessError,
           "differentiated", "make_array_from_process_local_data")
    primal, tangent = jax.jvp(lambda x: loss(w, x), (share(X8),), (share(np.ones_like(X8)),))
    ref_primal, ref_tangent = jax.jvp(lambda x: ref_loss(w, x), (X8,), (np.ones_like(X8),))
    np.testing.assert_allclose(process_local(primal), ref_primal, rtol=1e-5)
    np.testing.assert_allclose(process_local(tangent), ref_tangent, rtol=1e-4)


@case("numerics")
def vmap_of_pmap_local_input():
    xb = np.stack([X8, 2 * X8])
    y = jax.vmap(pxla_mlir.pmap(flat, "i"))(share(xb, axis=1))
    ref = jax.vmap(jax.vmap(flat, axis_name="i"))(xb)
    check(y, ref)
    np.testing.assert_allclose(process_local(y), share(np.asarray(ref), axis=1), rtol=1e-5)


@case("numerics")
def pxla_jit_of_grad_and_nested():
    step = pxla_mlir.jit(lambda w, x: w - 0.1 * jax.grad(loss)(w, x))
    w = np.float32(0.3)
    out = step(w, X8)  # jit arguments are whole values, the same on every process
    ref = w - 0.1 * jax.grad(ref_loss)(w, X8)
    np.testing.assert_allclose(process_local(out), ref, rtol=1e-5)
    x = nested_input(2)
    y = pxla_mlir.jit(lambda x: 2.0 * pxla_mlir.pmap(outer, "i")(x))(x)
    np.testing.assert_allclose(process_local(y), 2.0 * ref_nested(x), rtol=1e-5)


@case("numerics")
def xmap_three_lowerings():
    b = np.arange(4 * 8 * 3, dtype=np.float32).reshape(4, 8, 3)

    def f(v):
        return lax.psum(v, "n") + lax.axis_index("m")

    ref = np.broadcast_to(b.sum(1, keepdims=True) + np.arange(4, dtype=np.float32)[:, None, None], b.shape)
    for lowering in ("replica", "manual", "vectorize"):
        with pxla_mlir.Mesh.create({"x": 2, "y": N // 2}):
            g = pxla_mlir.xmap(f, in_axes={0: "m", 1: "n"}, out_axes={0: "m", 1: "n"},
                               axis_resources={"m": "x", "n": "y"}, lowering=lowering)
            check(g(b), ref)  # host input: the whole value
            check(g(global_array(b)), ref)


@case("numerics")
def out_axes_none_is_replicated():
    y = pxla_mlir.pmap(lambda x: lax.psum(x, "i"), "i", out_axes=None)(share(X8))
    np.testing.assert_allclose(process_local(y), X8.sum(0), rtol=1e-5)


@case("numerics")
def unblocked_200_chained_calls():
    f = pxla_mlir.pmap(lambda x: lax.pmean(x, "i") + 0.01 * lax.axis_index("i"), "i")
    y = f(share(X8))
    ref = X8.copy()
    for _ in range(200):
        y = f(y)  # never blocked: the in-flight window bounds un-completed launches
    for _ in range(201):
        ref = ref.mean(0, keepdims=True) + 0.01 * np.arange(N, dtype=np.float32)[:, None]
    check(y.block_until_ready(), ref, tol=1e-4)


# -- errors: raised on every process before anything is launched -----------------------------------

@case("errors")
def devices_leave_a_process_out():
    STATS.clear()
    only0 = jax.local_devices(process_index=0)
    x = global_array(np.ones((K, 3), np.float32), P())
    raises(lambda: pxla_mlir.pmap(flat, "i", devices=only0)(x), MultiProcessError,
           "process 0 only", "none of its pieces")
    raises(lambda: _xmap_on(only0), MultiProcessError, "none of its pieces")
    assert STATS["compiles"] == 0


def _xmap_on(devices):
    with pxla_mlir.Mesh(np.array(devices), ("x",)):
        pxla_mlir.xmap(lambda v: v * 2, in_axes=["b", ...], out_axes=["b", ...],
                       axis_resources={"b": "x"})(np.ones((len(devices), 3), np.float32))


@case("errors")
def devices_cover_processes_unevenly():
    devices = jax.local_devices(process_index=0) + jax.local_devices(process_index=1)[:1] + \
        [d for p in range(2, NPROC) for d in jax.local_devices(process_index=p)]
    x = global_array(np.ones((len(devices), 3), np.float32), P())
    raises(lambda: pxla_mlir.pmap(flat, "i", devices=devices)(x), MultiProcessError,
           "the same number of devices from every process")


@case("errors")
def too_many_devices_hint():
    text = raises(lambda: pxla_mlir.pmap(flat, "i")(np.ones((K + 1, 3), np.float32)), MultiProcessError,
                  f"{(K + 1) * NPROC} devices", "jax_num_cpu_devices")
    assert "before importing jax" not in text, text
    text = raises(lambda: pxla_mlir.Mesh.create({"x": 2, "y": N}), MeshError,
                  f"start every process with {K * 2} devices")
    assert "before importing jax" not in text, text


@case("errors")
def mismatched_module():
    start = time.time()
    fn = flat if ME == 0 else (lambda x: flat(x) + 1.0)
    raises(lambda: pxla_mlir.pmap(fn, "i")(share(X8)), ProgramMismatchError, "the MHLO differs", "Nothing was launched")
    order = jax.devices() if ME == 0 else interleaved()
    raises(lambda: pxla_mlir.pmap(flat, "i", devices=order)(global_array(X8)), ProgramMismatchError,
           "device order")
    assert time.time() - start < 20, f"took {time.time() - start:.1f} s"


@case("errors")
def every_launch_is_compared():
    # Both processes launch A and B once each (agreed); then process 0 calls A while process 1 calls B.
    # Unchecked, gloo pairs A's psum with B's and process 0 gets B's numbers (84 for 12), with no error.
    a = pxla_mlir.pmap(lambda x: lax.psum(x, "i"), "i")
    b = pxla_mlir.pmap(lambda x: lax.psum(x * 6.0, "i") + 12.0, "i")
    x = share(np.full(N, 1.5, np.float32))
    check(a(x), np.full(N, 1.5 * N))
    check(b(x), np.full(N, 9.0 * N + 12))
    for _ in range(3):  # repeated calls: the C++ fast path would launch these without Python
        check(a(x), np.full(N, 1.5 * N))
    mine = a if ME == 0 else b
    raises(lambda: mine(x), ProgramMismatchError, "the MHLO differs", "Nothing was launched")
    whole = global_array(np.full((N,), 1.5, np.float32))
    compiled = (a if ME == 0 else b).lower(whole).compile()  # the AOT path is compared too
    raises(lambda: compiled(whole), ProgramMismatchError, "the MHLO differs")
    check(b(x), np.full(N, 9.0 * N + 12))  # agreeing again afterwards


@case("errors")
def run_still_healthy_after_the_errors():
    check(pxla_mlir.pmap(flat, "i")(share(X8)), REF_FLAT)


# -- a failing peer (process MP_VICTIM, default 1) ---------------------------------------------------

VICTIM = int(os.environ.get("MP_VICTIM", "1"))


def _loop_until_peer_fails(how):
    f = pxla_mlir.pmap(flat, "i")
    x = global_array(X8)
    for k in range(10 ** 6):
        if ME == VICTIM and k == 20:
            print(f"FAILING_AT {time.time():.3f}", flush=True)
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"deliberate failure in process {ME}")
        f(x).block_until_ready()


@case("raise")
def peer_raises():
    _loop_until_peer_fails("raise")


@case("kill")
def peer_killed():
    _loop_until_peer_fails("kill")


def main(groups):
    for group, fn in CASES:
        if group not in groups:
            continue
        start = time.time()
        if group in ("raise", "kill"):
            fn()  # uncaught: what a real failure does
        try:
            fn()
            print(f"CASE {fn.__name__} OK {time.time() - start:.2f}s", flush=True)
        except Exception as e:
            lines = "".join(traceback.format_exception(type(e), e, e.__traceback__)).strip().splitlines()
            print(f"CASE {fn.__name__} FAIL {' | '.join(lines[-6:])}", flush=True)
    jax.distributed.shutdown()
    print("WORKER DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
