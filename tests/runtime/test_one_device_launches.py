"""Which launches count against the in-flight window, and the donating step's one-pass check."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CPP_MODE
from jax import lax

import pxla_mlir
from pxla_mlir.runtime import inflight
from pxla_mlir.runtime.donation import clear_to_donate


def _devices(platform: str, n: int) -> list:
    return [types.SimpleNamespace(platform=platform, id=i) for i in range(n)]


@pytest.mark.parametrize(("platform", "n", "counted"), [
    ("cpu", 8, True), ("cpu", 2, True), ("cpu", 1, False), ("tpu", 1, False), ("tpu", 8, False), ("gpu", 4, False)])
def test_only_a_rendezvous_of_several_cpu_devices_is_windowed(platform, n, counted):
    assert inflight.windowed(_devices(platform, n)) is counted


@pytest.mark.parametrize("donate", [False, True])
def test_one_device_launches_never_wait_and_eight_device_ones_do(donate):
    """A map on one CPU device leaves the window alone (nothing there can deadlock); the same map on 8
    devices fills it. Both give the same values."""
    inflight.wait_for_launches()

    def step(x):
        return x + lax.psum(jnp.ones_like(x), "i")  # x + n: exact in int32
    one = pxla_mlir.pmap(step, "i", devices=jax.devices()[:1], donate_argnums=(0,) if donate else ())
    eight = pxla_mlir.pmap(step, "i", donate_argnums=(0,) if donate else ())
    y1, y8 = one(np.ones((1, 4), np.int32)), eight(np.ones((8, 4), np.int32))
    inflight.wait_for_launches()
    for _ in range(inflight.INFLIGHT_WINDOW + 2):
        y1 = one(y1)
    assert len(inflight.INFLIGHT) == 0
    for _ in range(inflight.INFLIGHT_WINDOW + 2):
        y8 = eight(y8)
    assert len(inflight.INFLIGHT) > 0
    calls = inflight.INFLIGHT_WINDOW + 3
    np.testing.assert_array_equal(np.asarray(y1), np.full((1, 4), 1 + calls, np.int32))
    np.testing.assert_array_equal(np.asarray(y8), np.full((8, 4), 1 + 8 * calls, np.int32))


def test_clear_to_donate_clears_only_distinct_live_arrays():
    a, b = jnp.ones(3), jnp.zeros(3)
    assert clear_to_donate([a, b])
    assert not clear_to_donate([a, a])  # passed twice
    assert not clear_to_donate([a, np.ones(3)])  # not a jax.Array: the full checks name it
    gone = jnp.ones(3)
    gone.delete()
    assert not clear_to_donate([a, gone])


def test_a_cleared_donating_call_still_refuses_what_the_full_checks_refuse():
    """The one-pass check only lets the clean call through: a deleted or twice-passed array still gets
    jax's message, on the same map, after cached calls went through the fast check."""
    f = pxla_mlir.pmap(lambda s, b: (s + b, jnp.sum(b)), "i", donate_argnums=0)
    s, b = jnp.zeros((8, 2)), jnp.ones((8, 2))
    for _ in range(3):
        s, _ = f(s, b)
    with pytest.raises(RuntimeError, match="previously donated in the same call"):
        f(s, s)
    old = s
    s, _ = f(s, b)
    with pytest.raises(RuntimeError, match="has been deleted"):
        f(old, b)
    np.testing.assert_array_equal(np.asarray(s), np.full((8, 2), 4.0, np.float32))


def _dispatcher(mapped):
    return mapped._entry.dispatchers.latest[2]


def test_a_one_device_map_leaves_the_checks_to_jaxlib_until_it_spans_several():
    """After a one-device signature is handed to C++, calls skip the Python-side argument checks; the same
    map called with an eight-device signature checks every call again (jaxlib crashes there). (CPP_MODE: the
    mode whose eight-device programs C++ launches on this jaxlib; the others always take the checked path.)"""
    f = pxla_mlir.pmap(lambda s, b: (s + b, jnp.sum(b)), "i", donate_argnums=0, mode=CPP_MODE)
    s1 = f(jnp.zeros((1, 2)), jnp.ones((1, 2)))[0]
    s1 = f(s1, jnp.ones((1, 2)))[0]
    assert _dispatcher(f).checks is False
    s8 = f(jnp.zeros((8, 2)), jnp.ones((8, 2)))[0]
    s8 = f(s8, jnp.ones((8, 2)))[0]
    assert _dispatcher(f).checks is True
    s1 = f(s1, jnp.ones((1, 2)))[0]
    assert _dispatcher(f).checks is True
    np.testing.assert_array_equal(np.asarray(s1), np.full((1, 2), 3.0, np.float32))
    np.testing.assert_array_equal(np.asarray(s8), np.full((8, 2), 2.0, np.float32))


@pytest.mark.parametrize("how", ["donated", "deleted", "donated twice"])
def test_jaxlibs_refusal_on_one_device_is_named_as_the_checks_name_it(how):
    """On one device jaxlib refuses a bad buffer itself; the error the user sees is still ours, naming the
    argument, and the map keeps working afterwards."""
    f = pxla_mlir.pmap(lambda s, b: (s + b, jnp.sum(b)), "i", donate_argnums=0)
    s = f(jnp.zeros((1, 2)), jnp.ones((1, 2)))[0]
    s = f(s, jnp.ones((1, 2)))[0]
    assert _dispatcher(f).checks is False
    batch = jnp.ones((1, 2))
    if how == "donated":
        old, (s, _) = s, f(s, batch)
        bad, match = (old, batch), r"has been deleted with shape=float32\[1,2\]: argument 0"
    elif how == "deleted":
        gone = jnp.ones((1, 2))
        gone.delete()
        bad, match = (s, gone), r"has been deleted with shape=float32\[1,2\]: argument 1"
    else:
        bad, match = (s, s), "previously donated in the same call: the array donated as argument 0"
    with pytest.raises(RuntimeError, match=match) as raised:
        f(*bad)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert not s.is_deleted()  # refused before anything was donated
    before = np.asarray(s)
    s, loss = f(s, batch)
    np.testing.assert_array_equal(np.asarray(s), before + 1.0)
    assert float(np.asarray(loss)[0]) == 2.0
