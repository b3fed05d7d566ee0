"""jax_debug_nans and jax_debug_infs inside maps, with jax.pmap as the oracle:
a FloatingPointError with jax.pmap's words, naming the primitive that made the
value (found by running the body again un-jitted, as jax.jit does), also on
the C++ fast path, under grad, in pxla_mlir.jit and xmap; donation is off
under jax_debug_nans, as in jax.pmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pxla_mlir

X = np.arange(8.0, dtype=np.float32)


def message(fn) -> str:
    with pytest.raises(FloatingPointError) as info:
        fn()
    return str(info.value)


def log_body(v):
    return jnp.log(v - 3) * 2


def test_a_nan_in_a_pmap_names_the_primitive_and_says_what_jax_pmap_says():
    f = pxla_mlir.pmap(log_body, "i")
    f(X)  # warm: the next calls with this signature would take the C++ path
    f(X)
    with jax.debug_nans(True):
        theirs = message(lambda: jax.pmap(log_body, "i")(X))
        ours = message(lambda: f(X))
    assert theirs == "Invalid value (nan) encountered in sharded computation."
    assert ours.startswith("invalid value (nan) encountered in log\n") and theirs[:-1] in ours
    assert "an output of pmap 'log_body' on 8 devices" in ours
    assert np.isnan(np.asarray(f(X))).sum() == 3  # off again: no check


def test_one_device_and_no_nan():
    with jax.debug_nans(True):
        assert "invalid value (nan) encountered in div" in message(
            lambda: pxla_mlir.pmap(lambda v: 0.0 / v)(jnp.zeros([1])))
        np.testing.assert_array_equal(pxla_mlir.pmap(lambda v: 0.0 / v)(jnp.ones([2])), [0.0, 0.0])


def test_debug_infs():
    with jax.debug_infs(True):
        ours = message(lambda: pxla_mlir.pmap(lambda v: 1.0 / (v - 3))(X))
        theirs = message(lambda: jax.pmap(lambda v: 1.0 / (v - 3))(X))
    assert ours.startswith("invalid value (inf) encountered in div") and theirs[:-1] in ours


def test_a_nan_literal_is_reported_as_jax_jit_reports_it():
    with jax.debug_nans(True):
        ours = message(lambda: pxla_mlir.pmap(lambda v: v * jnp.nan)(jnp.ones([2])))
        theirs = message(lambda: jax.jit(lambda v: v * jnp.nan)(jnp.ones([2])))
    assert ours.split("\n")[0] == theirs


def test_donation_is_off_under_debug_nans_as_in_jax_pmap():
    f = pxla_mlir.pmap(lambda v: 0.0 / v, donate_argnums=0)
    x = jax.device_put(jnp.zeros([2]), jax.pmap(lambda v: v)(jnp.zeros([2])).sharding)
    with jax.debug_nans(True):
        message(lambda: f(x))
    assert not x.is_deleted()  # the de-optimized run used it


def test_grad_of_a_pmap_checks_the_backward_pmap():
    @jax.jit
    def g(x):
        return jnp.log(x ** 2)

    _, vjp = jax.vjp(pxla_mlir.pmap(g), jnp.zeros([1]))
    with jax.debug_nans(True):
        ours = message(lambda: vjp(jnp.ones([1])))
    assert "encountered in jit(g)" in ours and "pmap 'transpose(lin(g))'" in ours


def test_vmap_of_a_pmap_checks_the_batched_pmap():
    f = jax.vmap(pxla_mlir.pmap(log_body), in_axes=1, out_axes=1)
    with jax.debug_nans(True):
        ours = message(lambda: f(np.stack([X, X], 1)))
        theirs = message(lambda: jax.vmap(jax.pmap(log_body), in_axes=1, out_axes=1)(np.stack([X, X], 1)))
    assert ours.startswith("invalid value (nan) encountered in ") and theirs[:-1] in ours
    assert "an output of pmap 'vmap(log_body)' on 8 devices" in ours


def test_pxla_mlir_jit_and_xmap():
    with jax.debug_nans(True):
        ours = message(lambda: pxla_mlir.jit(lambda v: pxla_mlir.pmap(lambda w: 0.0 / w)(v) + 1)(jnp.zeros([2])))
        assert ours.startswith("invalid value (nan) encountered in div") and ours.count("sharded computation") == 1
        with pxla_mlir.Mesh.create({"x": 8}):
            xm = pxla_mlir.xmap(log_body, ["b", ...], ["b", ...], axis_resources={"b": "x"})
            assert message(lambda: xm(X)).startswith("invalid value (nan) encountered in log")
