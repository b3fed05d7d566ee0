"""pxla_mlir.pmap's errors read as jax's own tests (jax's tests/pmap_test.py)
expect jax.pmap's to read."""

import math

import jax
import jax.numpy as jnp
import pytest

import pxla_mlir


@pytest.mark.parametrize("make, shape", [
    (lambda: pxla_mlir.pmap(lambda x: 2 * x), (9,)),
    (lambda: pxla_mlir.pmap(lambda x: 2 * x), (9, 10)),
    (lambda: pxla_mlir.pmap(lambda x: pxla_mlir.pmap(lambda y: 2 * y)(x)), (8, 2, 10)),
    (lambda: pxla_mlir.pmap(lambda x: 3), (9,)),
    (lambda: pxla_mlir.pmap(pxla_mlir.pmap(lambda x: 3)), (2, 5, 3)),
], ids=["flat", "rank-2", "nested", "constant", "nested-constant"])
def test_too_few_devices_matches_both_of_pmap_tests_patterns(make, shape):
    """testDeviceCountError and testPmapConstantError / testNestedPmapConstantError."""
    x = jnp.arange(math.prod(shape)).reshape(shape)
    assert jax.device_count() == 8
    for pattern in (r".*requires.*replicas", r"compiling computation that requires \d+ logical devices, "
                                              r"but only \d+ XLA devices are available .*"):
        with pytest.raises(ValueError, match=pattern):
            make()(x)
    with pytest.raises(ValueError, match=r"set XLA_FLAGS=--xla_force_host_platform_device_count=\d+ before"):
        make()(x)
