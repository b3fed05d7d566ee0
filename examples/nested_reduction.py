"""Two-level reduction with nested pmaps: 2 hosts x 4 devices. The inner pmap
sums over the devices of a host, the outer over hosts; the per-device
partial sums come back with out_axes=1.

It keeps 2022's layout (``pieces="off"``: every value replicated over the
inner devices, each inner pmap slicing its input by device index and
gathering its outputs), so the placeholders' expansion shows; by default
the argument and both results would go by piece, with no slice or
all-gather (``pxla-mlir diff`` it against ``...:two_level_sum?pieces=on``)."""

from jax import lax

import pxla_mlir


def per_device(x):
    local = lax.psum(x, "device")
    return local, lax.psum(local, "host")


def per_host(block):
    return pxla_mlir.pmap(per_device, "device", out_axes=(1, 0))(block)


def two_level_sum(x):
    return per_host(x)


two_level_sum = pxla_mlir.example_args("f32[2,4,128]")(pxla_mlir.pmap(two_level_sum, "host").with_options(pieces="off"))
