"""The terminal picture of a jax sharding (``show_sharding`` of a NamedSharding
or SingleDeviceSharding): the pieces jax lays out, and jax's own refusal of a
spec longer than the value's rank. (The pictures of pxla_mlir's own sharding
values: tests/mlir/sharding/test_show_sharding.py.)"""

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from pxla_mlir.mlir.sharding.show import shard_ranges, show_sharding


@pytest.mark.parametrize("spec", [("x", "y"), ("y", None), (("y", "x"),), (None, None)], ids=str)
def test_jax_shardings_are_drawn_as_jax_lays_them_out(spec):
    devices = np.array(jax.devices()[::-1]).reshape(2, 4)  # device ids and positions differ
    sharding = NamedSharding(jax.sharding.Mesh(devices, ("x", "y")), PartitionSpec(*spec))
    shape = (8, 8)
    expected = {d.id: tuple((s.start or 0, shape[i] if s.stop is None else s.stop) for i, s in enumerate(idx))
                for d, idx in sharding.devices_indices_map(shape).items()}
    ranges = shard_ranges(shape, sharding)
    got = dict(zip([d.id for d in sharding._device_assignment], ranges))
    assert got == expected
    text = show_sharding(shape, sharding, color=False)
    assert "dev 7" in text and "dev 0" in text
    one = show_sharding((3,), jax.sharding.SingleDeviceSharding(jax.devices()[5]), color=False)
    assert "dev 5" in one and "[0:3]" in one


@pytest.mark.parametrize("spec", [("x", None, None), (None, "x")], ids=str)
def test_a_jax_sharding_longer_than_the_rank_is_refused_as_jax_refuses_it(spec):
    sharding = NamedSharding(jax.sharding.Mesh(np.array(jax.devices()), ("x",)), PartitionSpec(*spec))
    with pytest.raises(ValueError) as jax_error:
        jax.device_put(np.zeros(8), sharding)
    assert f"only valid for values of rank at least {len(spec)}" in str(jax_error.value)
    with pytest.raises(ValueError, match=rf"cannot draw .* for a rank-1 value: .*only valid for values of rank at "
                                         rf"least {len(spec)}, but was applied to a value of rank 1"):
        show_sharding((8,), sharding, color=False)
