"""xmap on a 2x4 mesh: rows ('batch') over mesh axis x, features ('feat')
over y; each element is normalised by the batch mean and the feature norm."""

import jax.numpy as jnp
from jax import lax

import pxla_mlir


def normalise(v):
    centered = v - lax.pmean(v, "batch")
    return centered / jnp.sqrt(lax.psum(centered * centered, "feat") + 1e-6)


normalise_2d = pxla_mlir.example_args("f32[8,16]", mesh="2x4:x,y")(
    pxla_mlir.xmap(normalise, in_axes=["batch", "feat"], out_axes=["batch", "feat"],
                   axis_resources={"batch": "x", "feat": "y"}))
