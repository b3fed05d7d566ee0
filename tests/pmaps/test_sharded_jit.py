"""``pxla_mlir.sharded_jit``, 2022's name for a partitioned body: piece counts
per dimension become named partition axes of a partitioned pmap. Oracles:
jax.jit(shard_map(..., axis_names={"data"})) for pmap(sharded_jit(f)), and
jax.jit with NamedShardings over the same devices for a bare call."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import pxla_mlir
from pxla_mlir.pmaps.arguments import PmapUsageError

X = (np.arange(2 * 4 * 16, dtype=np.float32).reshape(2, 4, 16) - 60) / 100
W = (np.arange(16 * 32, dtype=np.float32).reshape(16, 32) - 200) / 1000


def body(x, w):
    y = jnp.tanh(x @ w)
    y = pxla_mlir.sharded_jit_constraint(y, P(1, 4))
    return jax.lax.psum(y, "data")


def test_pmap_of_sharded_jit_is_the_partitioned_pmap():
    f = pxla_mlir.pmap(pxla_mlir.sharded_jit(body, in_parts=(None, P(1, 4)), out_parts=P(1, 4)), "data",
                       in_axes=(0, None))
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))

    def oracle_body(x, w):
        w = jax.lax.with_sharding_constraint(w, P(None, "model"))
        y = jax.lax.with_sharding_constraint(jnp.tanh(x[0] @ w), P(None, "model"))
        return jax.lax.psum(y, "data")[None]

    oracle = jax.jit(jax.shard_map(oracle_body, mesh=mesh, in_specs=(P("data"), P()), out_specs=P("data"),
                                   axis_names={"data"}))
    out = f(X, W)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(oracle(X, W)))
    assert out.sharding.spec == P("data", None, "part0") and out.sharding.mesh.shape == {"data": 2, "part0": 4}
    lowered = f.lower(X, W)
    assert "mhlo.num_partitions = 8" in lowered.as_text()
    assert re.search(r"f32\[4,8\]\S* dot\(", lowered.compile().as_text())  # (4, 16) @ (16, 8) per device


def test_bare_call_is_one_group_with_global_values():
    """2022: sharded_jit outside a pmap takes and returns global values over num_partitions devices."""
    f = pxla_mlir.sharded_jit(lambda x, y: x + y, in_parts=(P(2, 1), P(2, 1)), out_parts=None)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = f(x, x + 1)
    np.testing.assert_array_equal(np.asarray(out), x + x + 1)
    mesh = Mesh(np.array(jax.devices()[:2]), ("part0",))  # the partition axes alone, no unit pmap axis
    oracle = jax.jit(lambda x, y: x + y, in_shardings=NamedSharding(mesh, P("part0")),
                     out_shardings=NamedSharding(mesh, P()))
    assert out.shape == (4, 2) and out.sharding == oracle(x, x + 1).sharding
    hlo = f.lower(x, x + 1).compile().as_text()
    assert re.search(r"f32\[2,2\]\S* add\(", hlo), hlo  # each of the 2 devices adds its rows


@pytest.mark.slow
def test_specs_that_refine_each_other_share_one_grid():
    f = pxla_mlir.sharded_jit(lambda a, b: jnp.sin(a) @ b, in_parts=(P(2, 2), P(1, 4)), out_parts=P(4, 1))
    a = (np.arange(64, dtype=np.float32).reshape(8, 8) - 30) / 10
    out = f(a, a.T)
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("part0", "part1"))
    oracle = jax.jit(lambda a, b: jnp.sin(a) @ b,
                     in_shardings=(NamedSharding(mesh, P("part0", "part1")),
                                   NamedSharding(mesh, P(None, ("part0", "part1")))),
                     out_shardings=NamedSharding(mesh, P(("part0", "part1"), None)))
    expected = oracle(a, a.T)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(expected))
    assert out.sharding == expected.sharding
    assert f(out, a.T).sharding == expected.sharding  # a result goes back in as laid out
    g = jax.grad(lambda a: f(a, a.T).sum())(a)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(lambda a: oracle(a, a.T).sum())(a)), rtol=1e-5,
                               atol=1e-6)


def test_errors_say_what_to_give():
    with pytest.raises(ValueError, match=r"All partition specs must use the same number of total partitions"):
        pxla_mlir.sharded_jit(body, in_parts=(P(2, 1), P(1, 4)), out_parts=None)
    with pytest.raises(ValueError, match=r"running products 2 and 3: neither divides the other"):
        pxla_mlir.sharded_jit(body, in_parts=(P(2, 3), P(3, 2)), out_parts=None)
    with pytest.raises(TypeError, match=r"count the pieces of each dimension with positive ints"):
        pxla_mlir.sharded_jit(body, in_parts=P(None, "model"), out_parts=None)
    with pytest.raises(ValueError, match=r"num_partitions=8, but its specs split into 4 partitions"):
        pxla_mlir.sharded_jit(body, in_parts=P(1, 4), out_parts=None, num_partitions=8)
    with pytest.raises(TypeError, match=r"leave out partitions="):
        pxla_mlir.pmap(pxla_mlir.sharded_jit(body, P(1, 4), None), "data", partitions={"model": 4})
    with pytest.raises(PmapUsageError, match=r"only meaningful inside a sharded_jit function"):
        pxla_mlir.sharded_jit_constraint(np.zeros((4, 4)), P(2, 2))
    f = pxla_mlir.sharded_jit(lambda x: pxla_mlir.sharded_jit_constraint(x, P(2, 1)) * 2, P(1, 4), None)
    with pytest.raises(ValueError, match=r"doesn't match expected number of partitions: 4"):
        f(np.zeros((4, 4), np.float32))
    g = pxla_mlir.sharded_jit(lambda x: pxla_mlir.sharded_jit_constraint(x, P(2, 2, 1)), P(1, 4), None)
    with pytest.raises(PmapUsageError, match=r"P\(2, 2, 1\) has 3 entries, but the value has shape \(4, 4\)"):
        g(np.zeros((4, 4), np.float32))


def test_errors_of_a_bare_call_name_sharded_jits_options():
    x = np.zeros((4, 2), np.float32)
    f = pxla_mlir.sharded_jit(lambda a, b: a, in_parts=(P(2, 1), P(2, 1), P(2, 1)), out_parts=None)
    with pytest.raises(PmapUsageError, match=r"^sharded_jit in_parts specification must be a tree prefix"):
        f(x, x)
    with pytest.raises(PmapUsageError, match=r"^sharded_jit out_parts specification must be a tree prefix"):
        pxla_mlir.sharded_jit(lambda a: a, P(2, 1), out_parts=(P(2, 1), P(2, 1)))(x)
    with pytest.raises(PmapUsageError, match=r"^in_parts for argument 0: P\(2, 1, 1\) has 3 entries, but its value "):
        pxla_mlir.sharded_jit(lambda a: a, P(2, 1, 1), None)(x)
    with pytest.raises(PmapUsageError, match=r"^in_parts for argument 0: dimension 0 of its value \(shape \(6, 2\)\) "
                                             r"has size 6, which P\(4, 1\) splits 4 ways"):
        pxla_mlir.sharded_jit(lambda a: a, P(4, 1), None)(np.zeros((6, 2), np.float32))
    with pytest.raises(ValueError, match=r"^sharded_jit function has static_argnums=\(2,\) but was called with only "
                                         r"1 positional argument\. All static arguments"):
        pxla_mlir.sharded_jit(lambda a: a, P(2, 1), None, static_argnums=2)(x)
    with pytest.raises(TypeError, match=r"^sharded_jit argument args\[0\] of type str .* in static_argnums"):
        pxla_mlir.sharded_jit(lambda a: a, P(2, 1), None)("x")
    with pytest.raises(PmapUsageError, match=r"^sharded_jit '<lambda>' splits its values into 16 partitions, one per "
                                             r"device, but only 8 CPU devices"):
        pxla_mlir.sharded_jit(lambda a: a, P(16, 1), None)(np.zeros((16, 2), np.float32))


def test_jax_pmap_of_sharded_jit_says_to_use_pxla_mlir_pmap():
    f = pxla_mlir.sharded_jit(lambda a: a * 2, P(2, 1), P(2, 1))
    with pytest.raises(PmapUsageError, match=r"for 2022's pmap\(sharded_jit\(f, \.\.\.\)\) use pxla_mlir\.pmap "
                                             r"\(not jax\.pmap\)"):
        jax.pmap(f)(np.zeros((2, 4, 2), np.float32))


def test_keyword_arguments_of_a_bare_call_are_2022s_refusal():
    """Not a pmap's mapped keyword arguments over an axis of size 1 (a (1, n) one would lose its leading dim)."""
    f = pxla_mlir.sharded_jit(lambda x, b: x + b, in_parts=(P(2, 1),), out_parts=P(2, 1))
    x = np.zeros((4, 2), np.float32)
    for call in (f, jax.jit(f)):
        with pytest.raises(NotImplementedError, match=r"sharded_jit over kwargs not yet supported: .* keyword "
                                                      r"arguments b; pass them positionally"):
            call(x, b=np.ones((1, 2), np.float32))


def test_under_jax_jit_and_with_static_arguments():
    f = pxla_mlir.sharded_jit(lambda a, k: jnp.sin(a) * k, in_parts=P(2, 2), out_parts=P(4, 1), static_argnums=1)
    a = (np.arange(64, dtype=np.float32).reshape(8, 8) - 30) / 10
    eager = f(a, 3.0)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jax.jit(lambda a: jnp.sin(a) * 3.0)(a)))
    staged = jax.jit(lambda a: f(a, 3.0) + 1)
    np.testing.assert_array_equal(np.asarray(staged(a)), np.asarray(eager) + 1)
    text = staged.lower(a).as_text()  # jax drops the manual region of a size-1 axis; the constraints stay
    assert 'sharding_constraint %arg0 <@mesh, [{"part0"}, {"part1"}]>' in text
    assert '<@mesh, [{"part0", "part1"}, {}]>' in text
