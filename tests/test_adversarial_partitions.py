"""A partitioned pmap (partitions=, in/out_partitions) on inputs that broke
it, against numpy; integers exactly."""

import jax.numpy as jnp
import numpy as np
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
