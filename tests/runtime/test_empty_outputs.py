"""Values with a zero-size dimension come back as well-formed arrays in every
lowering: XLA's SPMD partitioner hands an empty output back whole on every
device, which wrapped in its sharding gave an Array whose pieces had the
global shape (reading it raised numpy's broadcast error)."""

import jax
import numpy as np
import pytest

import pxla_mlir


def assert_well_formed(y, want):
    assert y.shape == want.shape and y.dtype == want.dtype, (y.shape, want.shape, y.dtype, want.dtype)
    for shard in y.addressable_shards:
        assert shard.data.shape == y.sharding.shard_shape(y.shape), (shard.data.shape, y.sharding)
    np.testing.assert_array_equal(np.asarray(y), want)


@pytest.mark.parametrize("shape", [(8, 0), (8, 3, 0), (2, 4, 0, 2)])
@pytest.mark.parametrize("mode", ["replica", "partition"])
def test_pmap_outputs_with_an_empty_dimension(shape, mode):
    x = np.ones(shape, np.float32)
    inner = pxla_mlir.pmap(lambda v: v * 2, "j") if shape[0] != 8 else (lambda v: v * 2)
    f = pxla_mlir.pmap(lambda v: (inner(v), v.sum(), jax.lax.psum(v, "i")), "i", mode=mode)
    ref_inner = jax.vmap(lambda v: v * 2, axis_name="j") if shape[0] != 8 else (lambda v: v * 2)
    want = jax.vmap(lambda v: (ref_inner(v), v.sum(), jax.lax.psum(v, "i")), axis_name="i")(x)
    for _ in range(2):  # the first call, then calls C++ dispatches
        got = f(x)
        for g, w in zip(got, want):
            assert_well_formed(g, np.asarray(w))
    assert_well_formed(f(got[0] / 2)[0], np.asarray(want[0]))  # an empty output passed back in
    alone = pxla_mlir.pmap(inner, "i", mode=mode)  # the one output of the program
    for _ in range(2):
        assert_well_formed(alone(x), np.asarray(want[0]))


@pytest.mark.parametrize("lowering", ["replica", "manual", "vectorize"])
def test_xmap_outputs_with_an_empty_dimension(lowering):
    x = np.ones((8, 0, 3), np.float32)
    with pxla_mlir.Mesh.create({"x": 8}):
        g = pxla_mlir.xmap(lambda v: v * 2, in_axes=["b", ...], out_axes=["b", ...], axis_resources={"b": "x"},
                           lowering=lowering)
        for _ in range(2):
            assert_well_formed(g(x), np.zeros((8, 0, 3), np.float32))
