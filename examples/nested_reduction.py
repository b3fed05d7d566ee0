"""Two-level reduction with nested pmaps: 2 hosts x 4 devices. The inner pmap
sums over the devices of a host, the outer over hosts; the per-device
partial sums come back with out_axes=1."""

from jax import lax

import pxla_mlir


def per_device(x):
    local = lax.psum(x, "device")
    return local, lax.psum(local, "host")


def per_host(block):
    return pxla_mlir.pmap(per_device, "device", out_axes=(1, 0))(block)


@pxla_mlir.example_args("f32[2,4,128]")
@pxla_mlir.pmap(axis_name="host")
def two_level_sum(x):
    return per_host(x)
