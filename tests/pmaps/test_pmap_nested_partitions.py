"""A partitioned pmap nested in another pmap: one partition-mode program over
the mesh (outer, inner, model), manual over the pmap axes and automatic over
the partition axis. The oracle is jax.jit(shard_map(..., axis_names={"outer",
"inner"})) with the same constraints, on the same 8 CPU devices."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

import pxla_mlir
from pxla_mlir.pmaps.arguments import PmapUsageError
from pxla_mlir.pmaps.nested_pmaps import program_partitioning
from pxla_mlir.pmaps.partition_strategy import UNPARTITIONED, Partitioning
from pxla_mlir.pmaps.primitive import PmapParams, pxla_pmap_p


def body(x, w):
    y = jnp.tanh(x @ w)
    y = jax.lax.with_sharding_constraint(y, P(None, "model"))
    return jax.lax.psum(y, "inner") + jax.lax.pmean(y, "outer") + jax.lax.axis_index("outer")


INNER = dict(in_axes=(0, None), partitions={"model": 2}, mode="partition", in_partitions=(P(), P(None, "model")),
             out_partitions=P(None, "model"))
X = (np.arange(2 * 2 * 4 * 16, dtype=np.float32).reshape(2, 2, 4, 16) - 60) / 100
W = (np.arange(16 * 32, dtype=np.float32).reshape(16, 32) - 200) / 1000
MESH_AXES = ("outer", "inner", "model")


def inner_pmap(fn=body, **options):
    return pxla_mlir.pmap(fn, "inner", **{**INNER, **options})


def oracle_body_of(fn, x, w):  # the in/out_partitions are constraints in the pmap's body
    w = jax.lax.with_sharding_constraint(w, P(None, "model"))
    return jax.lax.with_sharding_constraint(fn(x[0], w), P(None, "model"))[None]


def oracle_body(x, w):
    return oracle_body_of(body, x[0], w)[None]


@pytest.fixture(scope="module")
def oracle():
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), MESH_AXES)
    return jax.jit(jax.shard_map(oracle_body, mesh=mesh, in_specs=(P("outer", "inner"), P()),
                                 out_specs=P("outer", "inner"), axis_names={"outer", "inner"}))


@pytest.fixture(scope="module")
def f():
    return pxla_mlir.pmap(inner_pmap(), "outer", in_axes=(0, None), mode="partition")


def test_matches_shard_map_bit_for_bit_on_the_3d_mesh(f, oracle):
    out = f(X, W)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(oracle(X, W)))
    assert out.sharding.mesh.shape == {"outer": 2, "inner": 2, "model": 2} and out.sharding.spec == P("outer", None, None, None)


def test_the_program_is_manual_over_the_pmap_axes_and_xla_splits_the_body(f):
    lowered = f.lower(X, W)
    text = lowered.as_text()
    assert "mhlo.num_partitions = 8" in text and "mhlo.num_replicas = 1" in text
    assert 'sdy.mesh @mesh = <["outer"=2, "inner"=2, "model"=2]>' in text
    assert 'manual_axes={"outer", "inner"}' in text
    assert re.search(r'sdy\.sharding_constraint %\S+ <@mesh, \[\{\}, \{"model"\}\]> : tensor<4x32xf32>', text)
    # (4, 16) @ (16, 32) becomes (4, 16) @ (16, 16) on each device of an (outer, inner) index's group
    assert re.search(r"f32\[4,16\]\S* dot\(", lowered.compile().as_text())
    from pxla_mlir.mlir.explore import build_page

    # the explore page replays the pxla form: jax's manual computation for axis_index keeps its mesh there
    assert build_page(lowered, compile=False).mesh.names == MESH_AXES


def test_in_axes_and_out_axes(oracle):
    f = pxla_mlir.pmap(inner_pmap(), "outer", in_axes=(1, None), out_axes=2, mode="partition")
    out = f(X.swapaxes(0, 1), W)
    np.testing.assert_array_equal(np.asarray(out), np.moveaxis(np.asarray(oracle(X, W)), 0, 2))


@pytest.mark.slow
def test_grad_and_vmap_compose(f, oracle):
    # the cotangent of w sums over inner, then outer (the oracle's over both at once): equal up to rounding
    g = jax.grad(lambda w: f(X, w).sum())(W)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(lambda w: oracle(X, w).sum())(W)), rtol=1e-5,
                               atol=1e-5)
    xs = np.stack([X, -2 * X])
    v = jax.vmap(lambda x: f(x, W))(xs)
    np.testing.assert_array_equal(np.asarray(v), np.stack([oracle(x, W) for x in xs]))


def test_inside_jax_jit_and_pxla_mlir_jit(f, oracle):
    want = 2 * np.asarray(oracle(X, W))
    step = jax.jit(lambda x, w: f(x, w) * 2)
    np.testing.assert_array_equal(np.asarray(step(X, W)), want)
    assert 'manual_axes={"outer", "inner"}' in step.lower(X, W).as_text()
    one = pxla_mlir.jit(lambda x, w: f(x, w) * 2, mode="partition")
    np.testing.assert_array_equal(np.asarray(one(X, W)), want)
    assert 'manual_axes={"outer", "inner"}' in one.lower(X, W).as_text()


def test_the_inner_pmap_still_runs_on_its_own():
    """Its trace inside the outer pmap names the outer axis in its mesh; at the top level it does not."""
    def local(x, w):
        return jax.lax.psum(jax.lax.with_sharding_constraint(x @ w, P(None, "model")), "inner")

    g = inner_pmap(local)
    nest = pxla_mlir.pmap(g, "outer", in_axes=(0, None), mode="partition")
    want = np.broadcast_to(np.einsum("oimk,kn->omn", X, W)[:, None], (2, 2, 4, 32))
    np.testing.assert_allclose(np.asarray(nest(X, W)), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(g(X[0], W)), want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(pxla_mlir.jit(g, mode="partition")(X[0], W)), want[0], rtol=1e-5,
                               atol=1e-5)


def test_three_levels():
    def deep(x, w):
        y = jax.lax.with_sharding_constraint(jnp.tanh(x @ w), P(None, "model"))
        return jax.lax.psum(y, "mid") + jax.lax.axis_index("outer") * 3 + jax.lax.axis_index("inner")

    mid = pxla_mlir.pmap(lambda x, w: inner_pmap(deep)(x, w) * 2, "mid", in_axes=(0, None), mode="partition")
    f = pxla_mlir.pmap(mid, "outer", in_axes=(0, None), mode="partition")
    x = X.reshape(2, 2, 1, 4, 16)
    axes = ("outer", "mid", "inner")
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 1, 2), (*axes, "model"))
    oracle = jax.jit(jax.shard_map(lambda x, w: oracle_body_of(deep, x[0, 0], w)[None, None] * 2, mesh=mesh,
                                   in_specs=(P(*axes), P()), out_specs=P(*axes), axis_names=set(axes)))
    np.testing.assert_array_equal(np.asarray(f(x, W)), np.asarray(oracle(x, W)))


def test_replica_mode_is_refused_with_the_fix():
    with pytest.raises(PmapUsageError, match=r"holds a pmap with partitions=\{'model': 2\}: .* pass "
                                             r"mode=\"partition\" to pmap 'body' too"):
        pxla_mlir.pmap(inner_pmap(), "outer", in_axes=(0, None))(X, W)
    with pytest.raises(PmapUsageError, match=r'pass mode="partition" to pxla_mlir\.jit too'):
        pxla_mlir.jit(lambda x, w: pxla_mlir.pmap(inner_pmap(), "outer", in_axes=(0, None))(x, w))(X, W)


def test_nests_one_mesh_cannot_hold_are_refused_saying_why():
    def siblings(x, w):
        return inner_pmap()(x, w), pxla_mlir.pmap(lambda v: v, "other")(x)

    with pytest.raises(PmapUsageError, match=r"nested pmaps that map different axes at one level"):
        pxla_mlir.pmap(siblings, "outer", in_axes=(0, None), mode="partition")(X, W)
    with pytest.raises(PmapUsageError, match=r"nested pmaps that map different axes at one level"):
        jax.jit(pxla_mlir.pmap(siblings, "outer", in_axes=(0, None), mode="partition"))(X, W)

    def two_meshes(x, w):
        other = inner_pmap(lambda a, b: jax.lax.with_sharding_constraint(a @ b, P(None, "m")), partitions={"m": 2},
                           in_partitions=None, out_partitions=None)
        return inner_pmap()(x, w), other(x, w)

    with pytest.raises(PmapUsageError, match=r"partitioned pmaps with different partitions \(\{'m': 2\} and "
                                             r"\{'model': 2\}\)"):
        pxla_mlir.pmap(two_meshes, "outer", in_axes=(0, None), mode="partition")(X, W)
    with pytest.raises(PmapUsageError, match=r"reuses the axis name 'inner' of an enclosing pmap"):
        pxla_mlir.pmap(inner_pmap(lambda a, b: a @ b), "inner", in_axes=(0, None), mode="partition")(X, W)
    big = pxla_mlir.pmap(inner_pmap(partitions={"model": 4}), "outer", in_axes=(0, None), mode="partition")
    with pytest.raises(PmapUsageError, match=r"it needs 2 × 2 × 4 = 16 devices, but only 8 CPU devices"):
        big(X, W)


@pytest.mark.subprocess
def test_gspmd_form_refuses_the_device_index_before_any_pass():
    """jax's lowering of axis_index in the partially manual body is Shardy only; the GSPMD form crashed the process."""
    from isolation import run_isolated

    out = run_isolated('''
from test_pmap_nested_partitions import W, X, inner_pmap
import jax
import pxla_mlir
from pxla_mlir.pmaps.arguments import PmapUsageError
nest = pxla_mlir.pmap(inner_pmap(), "outer", in_axes=(0, None), mode="partition", shardings="gspmd")
flat = inner_pmap(lambda x, w: x @ w + jax.lax.axis_index("inner"), shardings="gspmd")
for f, x in ((nest, X), (flat, X[0])):
    try:
        f.lower(x, W)
    except PmapUsageError as e:
        print("refused:", e)
''', timeout=120)
    found = re.findall(r'refused: pmap \'(\S+)\' uses the device index inside a partitioned body .* use '
                       r'shardings="sdy"', out)
    assert found == ["body", "<lambda>"], out


@pytest.mark.parametrize("around", ["jax.pmap", "shard_map"])
def test_inside_jax_maps_is_refused_saying_what_to_use(around):
    g = inner_pmap(lambda a, b: jax.lax.with_sharding_constraint(a @ b, P(None, "model")))
    if around == "jax.pmap":
        run = jax.pmap(g, "outer", in_axes=(0, None))
    else:
        mesh = Mesh(np.array(jax.devices()[:2]), ("outer",))
        run = jax.jit(jax.shard_map(lambda x, w: g(x[0], w)[None], mesh=mesh, in_specs=(P("outer"), P()),
                                    out_specs=P("outer")))
    with pytest.raises(PmapUsageError, match=r"inside jax\.pmap, jax\.shard_map or a pmap that runs as jax\.vmap .* "
                                             r"nests in pxla_mlir\.pmap's with mode=\"partition\""):
        run(X, W)


def test_the_partitioning_travels_as_one_frozen_value_and_a_lowering_decides_the_nests():
    outer = pxla_mlir.pmap(inner_pmap(), "outer", in_axes=(0, None), mode="partition")
    closed = jax.make_jaxpr(outer)(X, W)
    eqn = next(e for e in closed.eqns if e.primitive is pxla_pmap_p)
    nested = next(e for e in eqn.params["jaxpr"].eqns if e.primitive is pxla_pmap_p)
    assert nested.params["partitioning"] == Partitioning((("model", 2),))
    hash(PmapParams.of(nested.params))  # jax hashes the equation's params
    assert eqn.params["partitioning"] == UNPARTITIONED
    decided = program_partitioning(eqn.params["jaxpr"], PmapParams.of(eqn.params))
    assert decided == Partitioning((("model", 2),), (("inner", 2),)) and decided.nest
    own = PmapParams.of(nested.params)
    assert program_partitioning(nested.params["jaxpr"], own) is own.partitioning and not own.partitioning.nest
