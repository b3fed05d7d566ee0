"""psum/pmax/pmin in an xmap body over a named axis its operand does not vary
over: arithmetic, not a collective (as jax's vmap and shard_map do), in every
lowering, with jax.vmap as the oracle; integers exactly, wrapping as their sum
would, also across serial loops. A value from a host callback keeps its
collective."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pxla_mlir

LOWERINGS = ["replica", "manual", "vectorize"]


def _xmap(fun, in_axes, out_axes, lowering, **kw):
    return pxla_mlir.xmap(fun, in_axes, out_axes, lowering=lowering, **kw)


def _all_reduces(compiled_text: str) -> int:
    return len(re.findall(r"\ball-reduce(?:-start)?\(", compiled_text))


@pytest.mark.enable_checks
@pytest.mark.parametrize("lowering", LOWERINGS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8], ids=lambda d: np.dtype(d).name)
def test_reductions_of_unmapped_values_equal_vmaps(lowering, dtype):
    def body(a, w):  # w is not mapped along "batch"; a is
        return lax.psum(w, "batch"), lax.pmax(w, "batch"), lax.pmin(w + 1, "batch"), lax.psum(a * w, "batch")

    a = (np.arange(256 * 3) % 7).astype(dtype).reshape(256, 3)  # 256 copies of a uint8 sum to 0 mod 256
    w = np.array([3, 5, 250], dtype)
    # numpy, not jax.vmap: vmap's own psum of an unmapped uint8 overflows on the axis size 256
    want = ((w.astype(np.int64) * 256).astype(dtype), w, w + dtype(1), (a * w).sum(0, dtype=dtype))
    with pxla_mlir.Mesh.create({"x": 8}):
        got = _xmap(body, (["batch", ...], [...]), ([...],) * 4, lowering, axis_resources={"batch": "x"})(a, w)
    for g, e in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))
        assert np.asarray(g).dtype == np.asarray(e).dtype


@pytest.mark.parametrize("lowering", ["replica", "manual"])
def test_a_reduction_over_two_names_keeps_the_collective_only_for_the_one_the_value_varies_over(lowering):
    def body(a):  # a varies over "i" only
        return lax.psum(a, ("i", "j")), lax.psum(a, "j")

    a = np.arange(8 * 5, dtype=np.float32).reshape(8, 5)
    want = jax.vmap(jax.vmap(body, in_axes=None, out_axes=None, axis_name="j", axis_size=4), axis_name="i",
                    out_axes=(None, 0))(a)
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        f = _xmap(body, (["i", ...],), ([...], ["i", ...]), lowering, axis_sizes={"j": 4},
                  axis_resources={"i": "x", "j": "y"})
        got = f(a)
        text = pxla_mlir.jit(f).lower(a).compile().as_text()
    for g, e in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))
    assert _all_reduces(text) == 1  # over "i" (mesh axis x); nothing over "j"


@pytest.mark.parametrize("lowering", ["replica", "manual"])
def test_the_grad_of_a_mean_loss_has_the_collectives_of_jax_shard_map(lowering):
    """The cotangent of a pmean-ed loss does not vary over the batch: its
    psum in the backward pass is a multiply, so one step all-reduces once
    (the gradients, combined), as jax.jit(shard_map) of the same step."""
    def mse(w, x, y):
        return jnp.mean((jnp.tanh(x @ w) - y) ** 2)

    rng = np.random.default_rng(1)
    w, x, y = (rng.normal(size=s).astype(np.float32) for s in ((8, 4), (64, 8), (64, 4)))
    loss = _xmap(lambda w, a, b: lax.pmean(mse(w, a, b), "batch"), ([...], ["batch", ...], ["batch", ...]), [...],
                 lowering, axis_resources={"batch": "x"})
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
    spec = jax.sharding.PartitionSpec
    theirs = jax.jit(jax.grad(jax.shard_map(lambda w, a, b: lax.pmean(mse(w, a, b), "x"), mesh=mesh,
                                            in_specs=(spec(), spec("x"), spec("x")), out_specs=spec())))
    with pxla_mlir.Mesh.create({"x": 8}):
        ours = pxla_mlir.jit(jax.grad(loss))
        np.testing.assert_allclose(np.asarray(ours(w, x, y)), np.asarray(theirs(w, x, y)), rtol=1e-6, atol=1e-7)
        ours_text = ours.lower(w, x, y).compile().as_text()
    assert _all_reduces(ours_text) == _all_reduces(theirs.lower(w, x, y).compile().as_text()) == 1


def test_a_host_callback_result_is_reduced_by_a_collective():
    """A host call may answer differently on every device: its result is not
    taken to be the same everywhere."""
    calls = iter(range(1000))

    def host():
        return np.float32(next(calls))

    def body(a):
        v = jax.experimental.io_callback(host, jax.ShapeDtypeStruct((), np.float32), ordered=False)
        return a + lax.psum(v, "batch") * 0

    with pxla_mlir.Mesh.create({"x": 8}):
        f = _xmap(body, (["batch", ...],), ["batch", ...], "replica", axis_resources={"batch": "x"})
        text = pxla_mlir.jit(f).lower(np.zeros((8,), np.float32)).compile().as_text()
    assert _all_reduces(text) == 1


@pytest.mark.parametrize("looped", [False, True], ids=["mesh", "mesh-and-loop"])
@pytest.mark.parametrize("lowering", ["replica", "vectorize"])
def test_the_sum_of_an_unmapped_value_has_the_zeros_infinities_and_overflow_of_jax_shard_maps(lowering, looped):
    """A -0 sums to +0, a complex infinity keeps its zero imaginary part and
    a float16 pmean overflows in its psum, as jax.jit(shard_map)'s all-reduce."""
    def body(a, z, c, h):
        return lax.psum(z, "batch"), lax.pmean(z, "batch"), lax.psum(c, "batch"), lax.pmean(c, "batch"), \
            lax.pmean(h, "batch")

    z = np.array([-0.0, 0.0, 1.5, np.inf], np.float32)
    c = np.array([np.inf + 0j, -0.0 + 0j, complex(np.inf, np.inf), 1 - 2j], np.complex64)
    h = np.array([3e4, -0.0], np.float16)
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))
    spec = jax.sharding.PartitionSpec
    want = jax.jit(jax.shard_map(lambda *a: body(None, *a), mesh=mesh, in_specs=spec(), out_specs=spec()))(z, c, h)
    with pxla_mlir.Mesh.create({"x": 4 if looped else 8}), pxla_mlir.serial_loop("l", 2):
        got = _xmap(body, (["batch", ...], [...], [...], [...]), ([...],) * 5, lowering,
                    axis_resources={"batch": ("x", "l") if looped else "x"})(np.zeros(8, np.float32), z, c, h)
    for g, e in zip(got, want):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)
        for part in (np.real, np.imag):
            np.testing.assert_array_equal(np.signbit(part(g)), np.signbit(part(e)))


def test_a_host_callback_inside_a_nested_xmap_is_reduced_by_a_collective():
    """The callback's result reaches the outer body through a nested xmap:
    it still may differ on every device, so the outer psum sums them."""
    calls = iter(range(1, 1000))

    def host():
        return np.float32(next(calls))

    def inner(_):
        return jax.experimental.io_callback(host, jax.ShapeDtypeStruct((), np.float32), ordered=False)

    def body(a):
        v = pxla_mlir.xmap(inner, ([...],), [...])(a)
        return lax.psum(v, "batch"), v

    with pxla_mlir.Mesh.create({"x": 8}):
        total, each = _xmap(body, (["batch", ...],), ([...], ["batch", ...]), "replica",
                            axis_resources={"batch": "x"})(np.zeros((8, 2), np.float32))
    assert sorted(np.asarray(each).tolist()) == list(range(1, 9))  # one call per device
    assert float(total) == 36.0


def test_pmap_out_axes_none_refuses_a_host_callback_result_from_a_nested_xmap():
    """The same analysis types pmap's out_axes=None: the callback inside the xmap may differ per device."""
    def inner(_):
        return jax.experimental.io_callback(lambda: np.float32(1), jax.ShapeDtypeStruct((), np.float32),
                                            ordered=False)

    f = pxla_mlir.pmap(lambda x: pxla_mlir.xmap(inner, ([...],), [...])(x), "i", out_axes=None)
    with pytest.raises(ValueError, match=r"has out_axes=None, but it may differ between the devices of axis 'i'"):
        f(np.zeros((8, 2), np.float32))
