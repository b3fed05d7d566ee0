"""A pmap whose body is partitioned (``partitions=``): data parallel over the
pmap axis, the body split by XLA over each index's group of devices. The
oracle is jax.jit(shard_map(..., axis_names={"data"})) with the same
constraints, on the same 8 CPU devices as a 2 x 4 (data, model) mesh."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P

import pxla_mlir
from pxla_mlir.pmaps.arguments import PmapUsageError


def body(x, w):
    y = jnp.tanh(x @ w)
    y = jax.lax.with_sharding_constraint(y, P(None, "model"))
    return jax.lax.psum(y, "data")


OPTIONS = dict(in_axes=(0, None), partitions={"model": 4}, mode="partition",
               in_partitions=(P(), P(None, "model")), out_partitions=P(None, "model"))
X = (np.arange(2 * 4 * 16, dtype=np.float32).reshape(2, 4, 16) - 60) / 100
W = (np.arange(16 * 32, dtype=np.float32).reshape(16, 32) - 200) / 1000


@pytest.fixture(scope="module")
def oracle():
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    return jax.jit(jax.shard_map(lambda x, w: body(x[0], w)[None], mesh=mesh, in_specs=(P("data"), P()),
                                 out_specs=P("data"), axis_names={"data"}))


@pytest.fixture(scope="module", params=["sdy", "gspmd"])
def f(request):
    return pxla_mlir.pmap(body, "data", shardings=request.param, **OPTIONS)


def test_matches_shard_map_and_lays_the_result_out_over_the_grid(f, oracle):
    out = f(X, W)
    np.testing.assert_allclose(np.asarray(out), np.asarray(oracle(X, W)), rtol=1e-6, atol=1e-6)
    assert out.sharding.spec == P("data", None, "model") and out.sharding.mesh.shape == {"data": 2, "model": 4}
    # device (1, 2) holds index 1's columns 16:24
    shard = next(s for s in out.addressable_shards if s.device == jax.devices()[6])
    np.testing.assert_array_equal(np.asarray(shard.data), np.asarray(out)[1:2, :, 16:24])


def test_xla_splits_the_body_per_device(f):
    lowered = f.lower(X, W)
    text = lowered.as_text()
    assert "mhlo.num_partitions = 8" in text and "mhlo.num_replicas = 1" in text
    if "sdy.manual_computation" in text:
        assert 'manual_axes={"data"}' in text
        assert re.search(r'sdy\.sharding_constraint %\S+ <@mesh, \[\{\}, \{"model"\}\]> : tensor<4x32xf32>', text)
    else:
        assert "last_tile_dims={manual}" in text
    hlo = lowered.compile().as_text()
    # (4, 16) @ (16, 32) becomes (4, 16) @ (16, 8) on each device of a group
    assert re.search(r"f32\[4,8\]\S* dot\(", hlo), hlo


def test_grad_and_vmap_compose(f, oracle):
    g = jax.grad(lambda w: f(X, w).sum())(W)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(lambda w: oracle(X, w).sum())(W)), rtol=1e-5,
                               atol=1e-6)
    xs = np.stack([X, -2 * X])
    v = jax.vmap(lambda x: f(x, W))(xs)
    np.testing.assert_allclose(np.asarray(v), np.stack([oracle(x, W) for x in xs]), rtol=1e-6, atol=1e-6)


def test_explore_shows_the_2d_grid(f):
    from pxla_mlir.mlir.explore import build_page

    page = build_page(f.lower(X, W), compile=False)
    assert page.mesh.names == ("data", "model") and page.mesh.grid() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    w = next(v for v in page.shardings if v.label == "argument 1")
    assert w.shape == (16, 32) and w.dims == ((), ("model",))
    assert w.ranges[5] == ((0, 16), (8, 16))  # device (1, 1): model index 1's columns


def test_needs_axis_size_times_group_devices():
    g = pxla_mlir.pmap(body, "data", **{**OPTIONS, "partitions": {"model": 8}})
    with pytest.raises(PmapUsageError, match=r"needs 2 × 8 = 16 devices, but only 8 CPU devices are available"):
        g(X, W)


def test_replica_mode_is_refused_with_the_fix():
    with pytest.raises(PmapUsageError, match='pass mode="partition"'):
        pxla_mlir.pmap(body, "data", **{**OPTIONS, "mode": "replica"})


@pytest.mark.parametrize("callback", ["io_callback", "pure_callback"])
def test_a_host_callback_in_the_body_is_refused_saying_so(callback):
    """Refused before lowering: jax's lowering of the partially manual program fails on them first."""
    call = getattr(jax.experimental, callback) if callback == "io_callback" else jax.pure_callback
    f = pxla_mlir.pmap(lambda x: call(lambda v: v, jax.ShapeDtypeStruct((4,), np.float32), x), "data",
                       partitions={"model": 2}, mode="partition")
    with pytest.raises(PmapUsageError, match=r"has partitions= and host callbacks in its body .* call back outside "
                                             r"the pmap"):
        f(np.zeros((2, 4), np.float32))


def test_specs_are_checked():
    with pytest.raises(ValueError, match="names 'data', which is not a partition axis"):
        pxla_mlir.pmap(body, "data", **{**OPTIONS, "out_partitions": P("data")})
    with pytest.raises(TypeError, match="but the pmap has none"):
        pxla_mlir.pmap(body, "data", in_partitions=P())
    g = pxla_mlir.pmap(body, "data", **{**OPTIONS, "in_partitions": (P(), P("model"))})
    with pytest.raises(PmapUsageError, match="dimension 0 of its per-index value .* splits 4 ways"):
        g(X, W[:6])


def test_inside_jax_jit_is_jax_shard_map_over_the_pmap_axis(oracle):
    """Under jax.jit the partitioned pmap is jax's shard_map(axis_names={"data"}), constraints kept."""
    f = pxla_mlir.pmap(body, "data", **OPTIONS)

    def oracle_body(x, w):  # the in/out_partitions are constraints in the pmap's body
        w = jax.lax.with_sharding_constraint(w, P(None, "model"))
        return jax.lax.with_sharding_constraint(body(x[0], w), P(None, "model"))[None]

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    want = jax.jit(jax.shard_map(oracle_body, mesh=mesh, in_specs=(P("data"), P()), out_specs=P("data"),
                                 axis_names={"data"}))
    step = jax.jit(lambda x, w: f(x, w) * 2)
    out = step(X, W)
    np.testing.assert_array_equal(np.asarray(out), 2 * np.asarray(want(X, W)))
    text = step.lower(X, W).as_text()
    assert 'manual_axes={"data"}' in text and re.search(r'sdy\.sharding_constraint %\S+ <@mesh, \[\{\}, \{"model"\}\]>', text)
    assert re.search(r"f32\[4,8\]\S* dot\(", step.lower(X, W).compile().as_text())
    g = jax.jit(jax.grad(lambda w: f(X, w).sum()))(W)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(jax.jit(jax.grad(lambda w: want(X, w).sum()))(W)))


@pytest.mark.subprocess
def test_compile_module_refuses_replicas_with_tiled_shardings():
    """jaxlib 0.10.2 would compile this module and abort the process running it."""
    from isolation import run_isolated

    out = run_isolated('''
import jax
from jaxlib.mlir import ir
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.runtime.compile import ReplicaShardingError, compile_module
text = """module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = mhlo.custom_call @Sharding(%x) {mhlo.sharding = "{devices=[4]<=[4]}"} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}"""
try:
    compile_module(ir.Module.parse(text, make_context()), jax.devices())
except ReplicaShardingError as e:
    print("refused:", e)
''', timeout=120)
    assert "refused: cannot compile the module: mhlo.custom_call has mhlo.sharding" in out
    assert 'lower it in partition mode (mode="partition"' in out


def test_donating_an_argument_laid_out_unlike_its_result_of_the_same_type():
    """b (split over m) and psum(b) (whole on every device of a group) have
    one per-index type but other buffers per device: b is donated, not
    aliased to that result (XLA refused the alias at compile time)."""
    f = pxla_mlir.pmap(lambda a, b: (a * 2, lax.psum(b, "d")), "d", partitions={"m": 4},
                       in_partitions=(P(None, "m"), P("m")), out_partitions=(P("m", None), P()), mode="partition",
                       donate_argnums=(0, 1))
    x = np.arange(2 * 4 * 8, dtype=np.int32).reshape(2, 4, 8)
    a, b = jnp.asarray(x), jnp.asarray(x + 1)
    for step in range(1, 3):
        a, b = f(a, b)
        np.testing.assert_array_equal(np.asarray(a), x * 2 ** step)
    np.testing.assert_array_equal(np.asarray(b), np.broadcast_to(2 * (x + 1).sum(0), x.shape))


def test_uneven_constraint_in_a_partitioned_pmap_says_how_to_fix():
    """with_sharding_constraint over 'model' of a dimension it does not divide
    (jax pads it; pxla_mlir refuses): the error now says what to change."""
    from jax.sharding import PartitionSpec as P

    from pxla_mlir.errors import PxlaUserError

    def body(x, w):
        return lax.psum(lax.with_sharding_constraint(x @ w, P(None, "model")), "inner")

    f = pxla_mlir.pmap(body, "inner", in_axes=(0, None), partitions={"model": 2}, mode="partition")
    x, w = np.ones((2, 4, 16), np.float32), np.ones((16, 31), np.float32)
    with pytest.raises(PxlaUserError,
                       match=r"has size 31, which mesh axes 'model' \(size 2\) do not divide: pad that dimension"):
        f(x, w)
