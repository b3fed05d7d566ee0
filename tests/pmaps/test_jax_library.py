"""Whatever jax.pmap lowers, pxla_mlir.pmap lowers: jax's library (jax.numpy, jax.scipy, jax.nn, jax.random, lax
control flow) binds primitives jax lowers in its own ways, such as the high-level primitives of jax 0.12
(``call_hi_primitive``: ``jnp.searchsorted``, hence ``jax.scipy.linalg.expm``), which jax expands before it looks
up MLIR rules. The bodies come from tests/fuzzing/library_sweep.py, which runs them all (and ``--auto`` more)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fuzzing import library_sweep
from jax.experimental import hijax

import pxla_mlir


@pytest.mark.parametrize("name", library_sweep.QUICK)
def test_a_library_body_gives_what_jax_pmap_gives(name):
    outcome = library_sweep.run_case(name)
    assert (outcome.kind, outcome.detail) == ("same", "")


@pytest.mark.slow
def test_every_library_body_of_the_sweep_gives_what_jax_pmap_gives():
    outcomes = {name: library_sweep.run_case(name) for name in library_sweep.CASES if name not in library_sweep.QUICK}
    assert {name: (o.kind, o.detail) for name, o in outcomes.items() if o.kind != "same"} == {}


# -- a high-level primitive of our own: the mechanism on every supported jax ---------------------------------

#: jax 0.10 names the base class of a high-level primitive VJPHiPrimitive, 0.11+ HiPrim (both jax.experimental).
HiPrimitive = getattr(hijax, "HiPrim", None) or hijax.VJPHiPrimitive


class AffineHi(HiPrimitive):
    """``scale * x + 1`` as one ``call_hi_primitive`` equation, which has no MLIR rule: jax expands it first."""

    def __init__(self, aval, scale: float):
        self.in_avals, self.out_aval, self.params = (aval,), aval, {"scale": scale}
        super().__init__()

    def expand(self, x):
        return self.scale * x + 1.0

    def batch(self, axis_data, args, dims):  # jax.pmap (a vmap inside, on some releases) batches it
        return AffineHi(jax.typeof(args[0]), self.scale)(*args), dims[0]


def affine(x):
    return AffineHi(jax.typeof(x), 3.0)(x) - jax.lax.psum(x, "i")


X = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)


def test_the_body_binds_a_high_level_primitive():
    jaxpr = jax.make_jaxpr(affine, axis_env=[("i", 8)])(X[0])
    assert [e.primitive.name for e in jaxpr.eqns][0] == "call_hi_primitive"


def test_a_high_level_primitive_lowers_in_a_pmap_as_in_jax_pmap():
    np.testing.assert_array_equal(pxla_mlir.pmap(affine, "i")(X), jax.pmap(affine, "i")(X))
    assert "call_hi_primitive" not in pxla_mlir.pmap(affine, "i").lower(X).pxla_text()


def test_a_high_level_primitive_lowers_in_a_nested_pmap_and_under_jax_jit():
    # The enclosing lowering (the outer pmap's, jax.jit's) expands the nested map's body.
    nested = pxla_mlir.pmap(pxla_mlir.pmap(affine, "i"), "j")
    want = 3.0 * X + 1.0 - X.reshape(2, 4, 4).sum(1, keepdims=True).repeat(4, 1).reshape(8, 4)
    np.testing.assert_array_equal(nested(X.reshape(2, 4, 4)).reshape(8, 4), want)
    np.testing.assert_array_equal(jax.jit(pxla_mlir.pmap(affine, "i"))(X), jax.pmap(affine, "i")(X))


def test_a_high_level_primitive_lowers_in_an_xmap_and_a_pxla_jit():
    body = lambda x: AffineHi(jax.typeof(x), 3.0)(x)  # noqa: E731
    xmapped = pxla_mlir.xmap(body, in_axes=["i", ...], out_axes=["i", ...])
    np.testing.assert_array_equal(xmapped(X), 3.0 * X + 1.0)
    jitted = pxla_mlir.jit(lambda x: pxla_mlir.pmap(body, "i")(x) * 2)
    np.testing.assert_array_equal(jitted(X), 2 * (3.0 * X + 1.0))


@pytest.mark.slow  # about 2 s; the sweep's expm runs in the fast tier
def test_jax_expm_under_pmap_as_the_issue_reported_it():
    """It failed on jax 0.12: expm's Padé degree is chosen by jnp.searchsorted (its gradient: the sweep)."""
    x = jnp.eye(3) * 0.2 + 0.05
    np.testing.assert_allclose(pxla_mlir.pmap(jax.scipy.linalg.expm)(jnp.array([x, x])),
                               jax.pmap(jax.scipy.linalg.expm)(jnp.array([x, x])), rtol=1e-6, atol=1e-6)


def test_a_high_level_type_at_the_boundary_is_refused_with_what_to_pass_instead():
    from pxla_mlir.jaxbridge.stablehlo_lowering import HighLevelTypeError, low_level

    class HighAval:
        is_high = True

        def __str__(self):
            return "MyHiType"

    class FakeJaxpr:
        in_avals, out_avals, is_high = (HighAval(),), (), True

    with pytest.raises(HighLevelTypeError, match=r"pmap_f: .*\(MyHiType\) cannot cross a pxla_mlir map's boundary: "
                                                 r"pass and return the arrays they are made of"):
        low_level(FakeJaxpr(), "pmap_f")
