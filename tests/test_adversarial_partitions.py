"""Donated arguments whose type equals a result's but whose layout over the
devices does not (a partitioned pmap, an xmap's vectorize lowering): they are
donated, not aliased (XLA refused the alias at compile time). Against numpy,
integers exactly."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import PartitionSpec as P

import pxla_mlir


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


@pytest.mark.parametrize("lowering", ["replica", "manual", "vectorize"])
def test_an_xmap_donating_a_split_argument_to_a_replicated_result_of_its_type(lowering):
    x = np.arange(8 * 8, dtype=np.int32).reshape(8, 8)
    with pxla_mlir.Mesh.create({"x": 8}):
        f = pxla_mlir.xmap(lambda a: jnp.broadcast_to(lax.psum(a, "batch"), (8, 8)), (["batch", ...],), [...],
                           lowering=lowering, axis_resources={"batch": "x"}, donate_argnums=0)
        got = f(jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(x.sum(0), (8, 8)))
