"""One process of a multi-process test run (started by tests/mp_helpers.py).

    python tests/multiprocess/worker.py GROUP [GROUP...]

Runs the cases of the named groups in order and prints one line per case,
``CASE <name> OK`` or ``CASE <name> FAIL <why>``; every process runs the same
cases, each checks the pieces it holds. References are computed in this
process without pxla_mlir (NumPy, jax.vmap with axis names) on the whole
input. Groups: numerics, errors, raise (process MP_VICTIM raises), kill (it
kills itself), exit (it ends its program while the others are in
collectives), exit_then_launch (it ends its program before the others'
next launch).
"""

import os
import signal
import sys
import time
import traceback

import numpy as np

import pxla_mlir

pxla_mlir.distributed.initialize()  # PXLA_MP_* from the launcher

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from pxla_mlir.distributed import JitShareError, MultiProcessError, ProgramMismatchError, process_local
from pxla_mlir.mlir.sharding import MeshError
from pxla_mlir.mlir.support.stats import STATS

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
    """A global result: every piece this process holds."""
    ref = np.asarray(ref)
    assert y.shape == ref.shape, f"shape {y.shape} != {ref.shape}"
    assert not y.is_fully_addressable, "a multi-process result should be a global Array"
    assert y.addressable_shards, "no addressable shards"
    for s in y.addressable_shards:
        np.testing.assert_allclose(np.asarray(s.data), ref[s.index], rtol=tol, atol=tol)


def check_local(y, ref_local, tol=1e-5):
    """A pmap result as jax.pmap returns it in a multi-process run: this process's part, on its own devices."""
    assert isinstance(y, jax.Array) and y.is_fully_addressable, "a pmap result should be host-local, as jax.pmap's"
    assert all(d.process_index == ME for d in y.sharding.device_set)
    np.testing.assert_allclose(np.asarray(y), np.asarray(ref_local), rtol=tol, atol=tol)
    np.testing.assert_allclose(process_local(y), np.asarray(ref_local), rtol=tol, atol=tol)


def rows_here(outer):
    """The rows of an outer axis of size ``outer`` over all devices (process-major) that this process holds."""
    inner = N // outer
    return sorted({(ME * K + j) // inner for j in range(K)})


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

def like_jax_pmap(ours, theirs):
    """The same values, shapes and shardings as jax.pmap's results (host-local ones)."""
    for o, t in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert o.shape == t.shape and o.dtype == t.dtype, (o.shape, t.shape)
        assert o.sharding == t.sharding, (o.sharding, t.sharding)
        np.testing.assert_array_equal(np.asarray(o), np.asarray(t))


for _mode in ("replica", "partition"):
    def _flat_local(mode=_mode):
        y = pxla_mlir.pmap(flat, "i", mode=mode)(share(X8))
        check_local(y, share(REF_FLAT))
        like_jax_pmap(y, jax.pmap(flat, "i")(share(X8)))
    _flat_local.__name__ = f"flat_{_mode}_local_input"
    case("numerics")(_flat_local)


@case("numerics")
def flat_global_inputs():
    f = pxla_mlir.pmap(flat, "i")
    check_local(f(global_array(X8)), share(REF_FLAT))  # jax's own layout of the rows
    like_jax_pmap(f(global_array(X8)), jax.pmap(flat, "i")(global_array(X8)))
    check_local(f(global_array(X8, P())), share(REF_FLAT))  # replicated: re-laid out by jax.device_put
    STATS.clear()
    f(share(X8))
    assert STATS["compiles"] == 0, "a local share and a global Array of the same value share one executable"
    compiled = f.lower(share(X8)).compile()  # global access: a Compiled takes and returns global values
    check(compiled(global_array(X8)), REF_FLAT)


@case("numerics")
def flat_interleaved_devices_local_input():
    # Process p's devices hold rows p, p + P, p + 2P, ...: its share is those rows, in order.
    y = pxla_mlir.pmap(flat, "i", devices=interleaved())(X8[ME::NPROC])
    check_local(y, REF_FLAT[ME::NPROC])  # (jax.pmap refuses these devices: not one block of the mesh per process)


@case("numerics")
def per_process_pmap_on_local_devices():
    # devices=jax.local_devices(): a pmap of this process alone; host inputs are whole, collectives local.
    x = X8[:K] + ME
    y = pxla_mlir.pmap(flat, "i", devices=jax.local_devices())(x)
    check_local(y, jax.vmap(flat, axis_name="i")(x))
    like_jax_pmap(y, jax.pmap(flat, "i", devices=jax.local_devices())(x))
    STATS.clear()
    pxla_mlir.pmap(flat, "i", devices=jax.local_devices())(x)  # a new object: nothing compiled again
    assert STATS["compiles"] == 0


@case("numerics")
def key_and_float0_shares():
    keys = jax.random.split(jax.random.key(3), N)
    mine = keys[ME * K:(ME + 1) * K]  # this process's share of the keys
    draw = lambda k: jax.random.uniform(k, (2,))  # noqa: E731
    ours = pxla_mlir.pmap(draw)(mine)
    check_local(ours, share(np.asarray(jax.vmap(draw)(keys))))
    like_jax_pmap(ours, jax.pmap(draw)(mine))
    split = lambda k: jax.random.split(k)[0]  # noqa: E731
    got = pxla_mlir.pmap(split)(mine)  # keys out: host-local key arrays
    assert jax.dtypes.issubdtype(got.dtype, jax.dtypes.prng_key) and got.shape == (K,)
    np.testing.assert_array_equal(jax.random.key_data(got), share(np.asarray(jax.random.key_data(jax.vmap(split)(keys)))))
    zeros = np.zeros((K, 3), jax.dtypes.float0)
    scaled = lambda a, t: a * 2  # noqa: E731
    like_jax_pmap(pxla_mlir.pmap(scaled)(share(X8), zeros), jax.pmap(scaled)(share(X8), zeros))
    # float0 out: jax.pmap gives a multi-process run's as bool zeros on this process's devices (one process: numpy)
    both = lambda a, t: (a * 2, t)  # noqa: E731
    like_jax_pmap(pxla_mlir.pmap(both)(share(X8), zeros), jax.pmap(both)(share(X8), zeros))
    assert pxla_mlir.pmap(both)(share(X8), zeros)[1].dtype == np.dtype(bool)


@case("numerics")
def jax_jit_of_pmap_like_jax_pmap():
    # As jax.pmap traced by jax.jit in a multi-process run: the pmap runs on this process's devices.
    x = share(X8)
    ours = jax.jit(pxla_mlir.pmap(flat, "i"))(x)
    theirs = jax.jit(jax.pmap(flat, "i"))(x)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    assert ours.sharding.device_set == theirs.sharding.device_set


@case("numerics")
def debug_nans_without_a_rerun():
    with jax.debug_nans(True):
        raises(lambda: pxla_mlir.pmap(lambda v: jnp.log(v - 100.0))(share(X8)), FloatingPointError,
               "Invalid value (nan) encountered in sharded computation", "multi-process run")


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
            else:  # a row's inner devices span processes: global input
                y = f(global_array(x))
            check_local(y, ref[rows_here(outer_size)])  # this process's rows, whether alone or shared
        _nested.__name__ = f"nested_{_outer}x{N // _outer}_{_mode}_{_unshard}"
        case("numerics")(_nested)


@case("numerics")
def unshard_all_reduce_exact_values():
    # -0.0, NaN and integer extremes through gloo's all_reduce, bit for bit (bf16 and complex included).
    rows = N // 2
    f32 = np.array([-0.0, 0.0, np.nan, -np.inf, 1.5, -2.0] * rows, np.float32).reshape(2, rows, 3)
    values = [f32, f32.astype(jnp.bfloat16), (f32 - 1j * f32).astype(np.complex64),
              np.arange(2 * rows * 3, dtype=np.int32).reshape(2, rows, 3) * (2 ** 30 - 7)]

    def inner(*vs):
        return tuple(lax.ppermute(v, "j", [(k, (k + 1) % rows) for k in range(rows)]) for v in vs)

    for mode in ("replica", "partition"):
        f = pxla_mlir.pmap(lambda *vs: pxla_mlir.pmap(inner, "j", out_axes=1)(*vs), "i", mode=mode,
                           unshard="all-reduce")
        want = jax.vmap(jax.vmap(inner, axis_name="j", out_axes=1), axis_name="i")(*values)
        for y, w in zip(f(*[global_array(v) for v in values]), want):
            w = np.asarray(w)
            # host-local where this process holds whole rows of the outer axis (as jax.pmap), else global
            pairs = ([(np.asarray(y), w[rows_here(2)])] if y.is_fully_addressable
                     else [(np.asarray(s.data), w[s.index]) for s in y.addressable_shards])
            for got, ref in pairs:
                got, ref = np.ascontiguousarray(got), np.ascontiguousarray(ref)
                assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype)
                np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"), ref.view(f"u{ref.dtype.itemsize}"))


@case("numerics")
def empty_outputs():
    for mode in ("replica", "partition"):
        y = pxla_mlir.pmap(lambda v: v * 2, "i", mode=mode)(np.ones((K, 0, 3), np.float32))
        assert y.is_fully_addressable and y.shape == (K, 0, 3), y.shape  # this process's part, as jax.pmap
        assert all(d.process_index == ME for d in y.sharding.device_set)
        for s in y.addressable_shards:
            assert s.data.shape == (1, 0, 3), s.data.shape
        assert np.asarray(y).shape == process_local(y).shape == (K, 0, 3)


@case("numerics")
def nested_interleaved_devices_inner_groups_span_processes():
    x = nested_input(2)
    for mode in ("replica", "partition"):
        y = pxla_mlir.pmap(outer, "i", mode=mode, devices=interleaved())(global_array(x))
        grid = np.array(interleaved(), dtype=object).reshape(2, N // 2)
        if y.is_fully_addressable:  # this process's devices are a block of the mesh: its rows, as jax.pmap would
            rows = sorted({r for r in range(2) for d in grid[r] if d.process_index == ME})
            check_local(y, ref_nested(x)[rows])
        else:  # they are not (2 x 4: every other device of a row): the result stays global
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
    out = step(w, share(X8))  # x reaches the pmap directly: this process's share of its mapped axis
    ref = w - 0.1 * jax.grad(ref_loss)(w, X8)
    np.testing.assert_allclose(process_local(out), ref, rtol=1e-5)
    x = nested_input(2)  # 4 x 2: an outer row spans processes, so no process holds a share of it
    y = pxla_mlir.jit(lambda s, x: s * pxla_mlir.pmap(outer, "i")(x))(np.float32(2.0), global_array(x))
    np.testing.assert_allclose(process_local(y), 2.0 * ref_nested(x), rtol=1e-5)


def share_of(x, sharding):
    """This process's share of a host value laid out by ``sharding`` (the pieces its devices hold, side by side)."""
    return process_local(jax.make_array_from_callback(x.shape, sharding, lambda index: x[index]))


@case("numerics")
def xmap_three_lowerings_over_shares():
    # A 2-D mesh whose axis x spans processes (2 x 4: x is the process axis; 4 x 2: y spans them too). A host
    # input is this process's share of every named dimension on such axes, as a pmap's.
    b = np.arange(4 * 8 * 3, dtype=np.float32).reshape(4, 8, 3)

    def f(v):
        return lax.psum(v, "n") + lax.axis_index("m")

    ref = np.broadcast_to(b.sum(1, keepdims=True) + np.arange(4, dtype=np.float32)[:, None, None], b.shape)
    mesh = pxla_mlir.Mesh.create({"x": 2, "y": N // 2})
    layout = NamedSharding(Mesh(mesh.devices, ("x", "y")), P("x", "y"))
    for lowering in ("replica", "manual", "vectorize"):
        with mesh:
            g = pxla_mlir.xmap(f, in_axes={0: "m", 1: "n"}, out_axes={0: "m", 1: "n"},
                               axis_resources={"m": "x", "n": "y"}, lowering=lowering)
            check_local(g(share_of(b, layout)), share_of(ref, layout))  # this process's part, as pmap's
            laid_out = jax.make_array_from_callback(b.shape, layout, lambda index: b[index])
            check_local(g(laid_out), share_of(ref, layout))  # a global Array laid out as mapped passes through
            check(g.lower(share_of(b, layout)).compile()(laid_out), ref)  # the global result: a Compiled
            # Laid out otherwise: 2022's ValueError (resharding would copy on every call), on every process.
            raises(lambda: g(global_array(b)), ValueError, "xmap's mesh and Array's mesh should be equal")


@case("numerics")
def grad_of_xmap_and_jit_over_shares():
    w = np.float32(0.3)
    with pxla_mlir.Mesh.create({"x": N}):
        xloss = pxla_mlir.xmap(lambda w, v: lax.psum(jnp.sum(jnp.tanh(v * w) ** 2), "b"), in_axes=({}, ["b", ...]),
                               out_axes={}, axis_resources={"b": "x"})
        ref = jax.grad(lambda w: jnp.sum(jnp.tanh(X8 * w) ** 2))(w)
        # A local share that is not differentiated; as for pmap, values made under jax.grad are global.
        np.testing.assert_allclose(process_local(jax.grad(xloss)(w, share(X8))), ref, rtol=1e-5)
        raises(lambda: jax.grad(xloss, argnums=1)(w, share(X8)), MultiProcessError, "differentiated")
        step = pxla_mlir.jit(lambda w, v: w - 0.1 * jax.grad(xloss)(w, v))
        check_local(step(w, share(X8)), w - 0.1 * ref)  # v reaches the xmap directly: a share; results host-local


def _xmap_2d(lowering):
    """An xmap over a 2-D mesh whose axis x spans processes (2 x 4: the process axis; 4 x 2: y spans them too)."""
    return pxla_mlir.xmap(lambda v, s: lax.psum(v, "n") * s + lax.axis_index("m"), in_axes=({0: "m", 1: "n"}, {}),
                          out_axes={0: "m", 1: "n"}, axis_resources={"m": "x", "n": "y"}, lowering=lowering)


B = np.arange(4 * 8 * 3, dtype=np.float32).reshape(4, 8, 3) / 9.0
REF_2D = np.broadcast_to(B.sum(1, keepdims=True) * 2.0 + np.arange(4, dtype=np.float32)[:, None, None], B.shape)


@case("numerics")
def jit_of_xmap_over_shares_three_lowerings():
    # pxla_mlir.jit's host argument v reaches the xmap directly: it is this process's share of both named
    # dimensions whose mesh axes span processes, as given to the xmap itself; s is whole (broadcast).
    mesh = pxla_mlir.Mesh.create({"x": 2, "y": N // 2})
    layout = NamedSharding(Mesh(mesh.devices, ("x", "y")), P("x", "y"))
    for lowering in ("replica", "manual", "vectorize"):
        with mesh:
            g = _xmap_2d(lowering)
            step = pxla_mlir.jit(lambda v, s: g(v, s) - 1.0)
            y = step(share_of(B, layout), np.float32(2.0))
            check_local(y, REF_2D - 1.0)  # the jit's result is replicated: every process's part is all of it
            laid_out = jax.make_array_from_callback(B.shape, layout, lambda index: B[index])
            check_local(step(laid_out, np.float32(2.0)), REF_2D - 1.0)  # a global Array passes through
            check(step.lower(share_of(B, layout), np.float32(2.0)).compile()(laid_out, np.float32(2.0)), REF_2D - 1.0)


@case("numerics")
def grad_of_jit_over_shares():
    w = np.float32(0.3)
    with pxla_mlir.Mesh.create({"x": N}):
        xloss = pxla_mlir.xmap(lambda w, v: lax.psum(jnp.sum(jnp.tanh(v * w) ** 2), "b"), in_axes=({}, ["b", ...]),
                               out_axes={}, axis_resources={"b": "x"})
        ref_w, ref_v = jax.grad(lambda w, v: jnp.sum(jnp.tanh(v * w) ** 2), argnums=(0, 1))(w, X8)
        # Inside pxla_mlir.jit the body is global: jax.grad with respect to the share works (refused outside).
        gw, gv = pxla_mlir.jit(jax.grad(xloss, argnums=(0, 1)))(w, share(X8))
        check_local(gw, ref_w)
        check_local(gv, ref_v)  # whole (the jit's results are replicated)
        gp = pxla_mlir.jit(jax.grad(loss, argnums=1))(w, share(X8))  # a pmap in the body
        check_local(gp, jax.grad(ref_loss, argnums=1)(w, X8))


@case("numerics")
def out_axes_none_is_replicated():
    y = pxla_mlir.pmap(lambda x: lax.psum(x, "i"), "i", out_axes=None)(share(X8))
    check_local(y, X8.sum(0))


@case("numerics")
def unblocked_200_chained_calls():
    f = pxla_mlir.pmap(lambda x: lax.pmean(x, "i") + 0.01 * lax.axis_index("i"), "i")
    y = f(share(X8))
    ref = X8.copy()
    for _ in range(200):
        y = f(y)  # never blocked: the in-flight window bounds un-completed launches
    for _ in range(201):
        ref = ref.mean(0, keepdims=True) + 0.01 * np.arange(N, dtype=np.float32)[:, None]
    check_local(y.block_until_ready(), share(ref), tol=1e-4)  # host-local results fed back in, no copies


# -- errors: raised on every process before anything is launched -----------------------------------

@case("errors")
def devices_leave_a_process_out():
    STATS.clear()
    only0 = jax.local_devices(process_index=0)
    x = global_array(np.ones((K, 3), np.float32), P())
    if ME == 0:  # its own devices: a per-process map, which takes this process's values, not global Arrays
        raises(lambda: pxla_mlir.pmap(flat, "i", devices=only0)(x), MultiProcessError, "this process's devices",
               "spans processes")
        _xmap_on(only0)  # a per-process xmap on its own mesh
        return
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
    # New functions on every process (an executable already checked is not checked again).
    fn = (lambda x: flat(x) + 2.0) if ME == 0 else (lambda x: flat(x) + 1.0)
    raises(lambda: pxla_mlir.pmap(fn, "i")(share(X8)), ProgramMismatchError, "the MHLO differs", "Nothing was launched")
    order = jax.devices() if ME == 0 else interleaved()
    raises(lambda: pxla_mlir.pmap(lambda x: flat(x) * 3.0, "i", devices=order)(global_array(X8)), ProgramMismatchError,
           "device order")
    assert time.time() - start < 20, f"took {time.time() - start:.1f} s"


@case("errors")
def initialize_twice():
    raises(pxla_mlir.distributed.initialize, RuntimeError, "already called in this process",
           f"process {ME} of {NPROC}", "remove the second call")


@case("errors")
def shares_that_disagree_between_processes():
    rows = K if ME == 0 else 2 * K  # process 0 passes fewer rows than the others
    with pxla_mlir.Mesh.create({"x": N}):
        g = pxla_mlir.xmap(lambda v: lax.psum(v, "b"), in_axes=["b", ...], out_axes=["b", ...],
                           axis_resources={"b": "x"})
        raises(lambda: g(np.ones((rows, 3), np.float32)), ProgramMismatchError, "the global shapes of the inputs "
               "differ", f"float32[{NPROC * K if ME == 0 else 2 * NPROC * K},3] here", "Nothing was launched")


@case("errors")
def jit_shares_that_disagree_or_are_computed():
    rows = K if ME == 0 else 2 * K  # process 0 passes fewer rows than the others
    with pxla_mlir.Mesh.create({"x": N}):
        g = pxla_mlir.xmap(lambda v: lax.psum(v, "b"), in_axes=["b", ...], out_axes=["b", ...],
                           axis_resources={"b": "x"})
        raises(lambda: pxla_mlir.jit(lambda v: g(v) + 1.0)(np.ones((rows, 3), np.float32)), ProgramMismatchError,
               "the global shapes of the inputs differ", f"float32[{NPROC * rows},3] here", "Nothing was launched")
        # Through computation a host argument could be whole or a share: a global jax.Array says which.
        raises(lambda: pxla_mlir.jit(lambda v: g(v * 2.0))(share(X8)), JitShareError, "args[0]",
               "through computation", "global jax.Array")
        check_local(pxla_mlir.jit(lambda v: g(v * 2.0))(global_array(X8)), 2.0 * np.broadcast_to(X8.sum(0), X8.shape))
        raises(lambda: pxla_mlir.jit(lambda v: jax.jit(g)(v))(share(X8)), JitShareError, "args[0]",
               "inside a staged computation")
        # Taken directly first, it is a share, and a later computed use sees its global value.
        check_local(pxla_mlir.jit(lambda v: g(v) + g(v * 2.0))(share(X8)), 3.0 * np.broadcast_to(X8.sum(0), X8.shape))
        by_columns = pxla_mlir.xmap(lambda v: lax.psum(v, "b"), in_axes=[..., "b"], out_axes=[..., "b"],
                                    axis_resources={"b": "x"})
        raises(lambda: pxla_mlir.jit(lambda v: g(v) + by_columns(v))(np.ones((K, K), np.float32)), JitShareError,
               "args[0]", "different dimensions", "dimension 0 x", "dimension 1 x")


@case("errors")
def every_launch_is_compared():
    # Both processes launch A and B once each (agreed); then process 0 calls A while process 1 calls B.
    # Unchecked, gloo pairs A's psum with B's and process 0 gets B's numbers (84 for 12), with no error.
    a = pxla_mlir.pmap(lambda x: lax.psum(x, "i"), "i")
    b = pxla_mlir.pmap(lambda x: lax.psum(x * 6.0, "i") + 12.0, "i")
    x = share(np.full(N, 1.5, np.float32))
    check_local(a(x), np.full(K, 1.5 * N))
    check_local(b(x), np.full(K, 9.0 * N + 12))
    for _ in range(3):  # repeated calls: the C++ fast path would launch these without Python
        check_local(a(x), np.full(K, 1.5 * N))
    mine = a if ME == 0 else b
    raises(lambda: mine(x), ProgramMismatchError, "the MHLO differs", "Nothing was launched")
    whole = global_array(np.full((N,), 1.5, np.float32))
    compiled = (a if ME == 0 else b).lower(whole).compile()  # the AOT path is compared too
    raises(lambda: compiled(whole), ProgramMismatchError, "the MHLO differs")
    check_local(b(x), np.full(K, 9.0 * N + 12))  # agreeing again afterwards


@case("errors")
def run_still_healthy_after_the_errors():
    check_local(pxla_mlir.pmap(flat, "i")(share(X8)), share(REF_FLAT))


# -- a failing peer (process MP_VICTIM, default 1) ---------------------------------------------------

VICTIM = int(os.environ.get("MP_VICTIM", "1"))


def _loop_until_peer_fails(how):
    f = pxla_mlir.pmap(flat, "i")
    x = share(X8)
    for k in range(10 ** 6):
        if ME == VICTIM and k == 20:
            print(f"FAILING_AT {time.time():.3f}", flush=True)
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if how in ("exit", "exit_then_launch"):
                sys.exit(0)
            raise RuntimeError(f"deliberate failure in process {ME}")
        if how == "exit_then_launch" and k == 20:
            pxla_mlir.pmap(lambda v: v * 2, "i")(x)  # a new program: its launch check finds the victim gone
        f(x).block_until_ready()


@case("raise")
def peer_raises():
    _loop_until_peer_fails("raise")


@case("kill")
def peer_killed():
    _loop_until_peer_fails("kill")


@case("exit")
def peer_exits():
    _loop_until_peer_fails("exit")


@case("exit_then_launch")
def peer_exits_before_a_launch():
    _loop_until_peer_fails("exit_then_launch")


def main(groups):
    only = set(filter(None, os.environ.get("MP_CASES", "").split(",")))  # a few cases of the groups (debugging)
    for group, fn in CASES:
        if group not in groups or (only and fn.__name__ not in only):
            continue
        start = time.time()
        if group in ("raise", "kill", "exit", "exit_then_launch"):
            fn()  # uncaught: what a real failure does
        try:
            fn()
            print(f"CASE {fn.__name__} OK {time.time() - start:.2f}s", flush=True)
        except Exception as e:
            lines = "".join(traceback.format_exception(type(e), e, e.__traceback__)).strip().splitlines()
            print(f"CASE {fn.__name__} FAIL {' | '.join(lines[-6:])}", flush=True)
    pxla_mlir.distributed.shutdown()
    print("WORKER DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
