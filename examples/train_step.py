"""Data-parallel training step: every device computes the gradient of its
batch shard, the gradients are averaged with pmean, and every device applies
the same update (so the parameters stay replicated)."""

import jax
import jax.numpy as jnp
from jax import lax

import pxla_mlir


def loss(params, x, y):
    w1, b1, w2 = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 - y) ** 2)


@pxla_mlir.example_args("f32[16,32]", "f32[32]", "f32[32,4]", "f32[8,16,16]", "f32[8,16,4]")
@pxla_mlir.pmap(axis_name="batch", in_axes=(None, None, None, 0, 0), out_axes=(None, None, None, None))
def train_step(w1, b1, w2, x, y):
    params = (w1, b1, w2)
    value, grads = jax.value_and_grad(loss)(params, x, y)
    grads = lax.pmean(grads, "batch")
    new = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    return (*new, lax.pmean(value, "batch"))
