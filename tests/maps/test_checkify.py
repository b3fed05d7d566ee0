"""checkify.checkify of maps, with jax.pmap as the oracle: checks and automatic
nan, division and index checks inside a pmap report each failing mapped index
as jax.pmap does (also under jax.jit and grad); nested pmaps and xmap report
every index of their named axes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import pxla_mlir

X = np.arange(8.0, dtype=np.float32)


def checked(v):
    checkify.check(v < 5, "v too big {v}", v=v)
    return v * 2


CASES = {
    "check": (lambda pmap: checkify.checkify(pmap(checked, "i")), X, {}),
    "check passes": (lambda pmap: checkify.checkify(pmap(checked, "i")), X - 5, {}),
    "nan": (lambda pmap: checkify.checkify(pmap(lambda v: jnp.log(v - 3)), errors=checkify.float_checks), X, {}),
    "division": (lambda pmap: checkify.checkify(pmap(lambda v: 1 // v.astype(int)), errors=checkify.div_checks), X,
                 {}),
    "broadcast operand": (lambda pmap: checkify.checkify(pmap(
        lambda v, w: (checkify.check(w > 0, "w is {w}", w=w), v * w)[1], in_axes=(0, None))), X, {"w": -1.0}),
    "under jax.jit": (lambda pmap: jax.jit(checkify.checkify(pmap(checked, "i"))), X, {}),
}


@pytest.mark.parametrize("case", CASES)
def test_errors_per_mapped_index_as_jax_pmap(case):
    make, x, extra = CASES[case]
    (our_err, ours), (their_err, theirs) = (make(pmap)(x, *extra.values()) for pmap in (pxla_mlir.pmap, jax.pmap))
    assert our_err.get() == their_err.get()
    np.testing.assert_array_equal(ours, theirs)
    if their_err.get() is not None:
        with pytest.raises(checkify.JaxRuntimeError) as info:
            our_err.throw()
        with pytest.raises(checkify.JaxRuntimeError) as jax_info:
            their_err.throw()
        assert str(info.value) == str(jax_info.value)


def test_an_out_of_bounds_index():
    err, _ = checkify.checkify(pxla_mlir.pmap(lambda v: jnp.arange(4.0)[v.astype(int)]),
                               errors=checkify.index_checks)(X)
    assert err.get().startswith("at mapped index 4: out-of-bounds indexing for array of shape (4,): index 4 is out of "
                                "bounds for axis 0 with size 4")


@pytest.mark.slow
def test_nested_pmaps_xmap_and_grad_report_every_index():
    err, out = checkify.checkify(pxla_mlir.pmap(pxla_mlir.pmap(checked, "j"), "i"))(X.reshape(2, 4))
    np.testing.assert_array_equal(out, 2 * X.reshape(2, 4))
    assert err.get().splitlines() == [f"at mapped index 1, {j}: v too big {v}.0 (`check` failed)"
                                      for j, v in ((1, 5), (2, 6), (3, 7))]
    with pxla_mlir.Mesh.create({"x": 8}):
        xm = pxla_mlir.xmap(checked, ["b", ...], ["b", ...], axis_resources={"b": "x"})
        err, _ = checkify.checkify(xm)(X)
    assert err.get() == checkify.checkify(jax.pmap(checked))(X)[0].get()
    err, grad = checkify.checkify(jax.grad(lambda a: pxla_mlir.pmap(checked)(a).sum()))(X - 5)
    assert err.get() is None
    np.testing.assert_array_equal(grad, np.full(8, 2.0, np.float32))
