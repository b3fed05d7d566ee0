"""Real jax.pmap code under transformations, and the errors users grep for:
jax.checkpoint policies of a pmap, vmap of a pmap on batched tracers, pmap
bodies closing over outer tracers, jax's wording for unbound axes, in_axes
prefixes and device counts, and out_axes=None on values that vary."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import io_callback

import pxla_mlir
from pxla_mlir.jaxbridge.jax_internals import core, pe

X = np.arange(8.0, dtype=np.float32)


def count_primitives(jaxpr, names=("sin", "cos")) -> dict:
    """Occurrences of each primitive, nested jaxprs (pmap bodies) included."""
    counts = dict.fromkeys(names, 0)

    def walk(j):
        for eqn in j.eqns:
            if eqn.primitive.name in counts:
                counts[eqn.primitive.name] += 1
            for sub in core.jaxprs_in_params(eqn.params):
                walk(sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub)

    walk(jaxpr.jaxpr)
    return counts


POLICIES = {
    "save cos": (lambda prim, *_, **__: prim is lax.cos_p, {"sin": 0, "cos": 0}),
    "save sin": (lambda prim, *_, **__: prim is lax.sin_p, {"sin": 0, "cos": 2}),
    "save nothing": (jax.checkpoint_policies.nothing_saveable, {"sin": 1, "cos": 2}),
}


@pytest.mark.parametrize("policy", POLICIES)
def test_checkpoint_of_a_pmap_follows_its_policy(policy):
    saveable, expected = POLICIES[policy]

    def backward_counts(pmap):
        f = jax.checkpoint(pmap(lambda x: jnp.sin(jnp.sin(x))), policy=saveable)
        _, vjp = jax.vjp(f, X)
        return count_primitives(jax.make_jaxpr(vjp)(np.ones(8, np.float32))), f

    ours, f = backward_counts(pxla_mlir.pmap)
    assert ours == expected
    assert backward_counts(jax.pmap)[0] == expected  # jax.pmap's backward pass saves the same
    np.testing.assert_allclose(jax.grad(lambda x: f(x).sum())(X), jnp.cos(jnp.sin(X)) * jnp.cos(X), rtol=1e-6)


def test_dead_code_elimination_reaches_into_a_pmap():
    f = pxla_mlir.pmap(lambda x: (jnp.sin(x), jnp.cos(x)))
    jaxpr = jax.make_jaxpr(lambda x: f(x)[0])(X)
    assert count_primitives(jaxpr) == {"sin": 1, "cos": 1}  # staged as written
    pruned, used_inputs = pe.dce_jaxpr(jaxpr.jaxpr, [True])
    assert count_primitives(core.ClosedJaxpr(pruned, jaxpr.consts)) == {"sin": 1, "cos": 0}
    assert used_inputs == [True]


@pytest.mark.parametrize("mode", ["replica", "partition"])
def test_vmap_of_pmap_on_batched_tracers(mode):
    batch = np.arange(24.0, dtype=np.float32).reshape(3, 8)

    def cases(pmap):
        body = lambda a, b: lax.psum(a * b, "i") + a  # noqa: E731
        return [
            jax.vmap(lambda v: pmap(body, "i")(X, v))(batch),
            jax.vmap(pmap(body, "i"), in_axes=(None, 0))(X, batch),
            jax.vmap(pmap(body, "i"), in_axes=(1, None), out_axes=1)(batch.T, X),
            jax.vmap(lambda v: pmap(lambda a, s: a * s, "i", in_axes=(0, None))(X, v))(np.float32([1, 2, 3])),
        ]

    for got, want in zip(cases(lambda f, n, **k: pxla_mlir.pmap(f, n, mode=mode, **k)), cases(jax.pmap)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_pmap_bodies_closing_over_outer_tracers():
    def cases(pmap):
        return [
            jax.grad(lambda w: pmap(lambda x: x * w)(X).sum())(2.0),
            jax.vmap(lambda v: pmap(lambda x: x * v)(X))(np.float32([1, 2, 3])),
            jax.jvp(lambda w: pmap(lambda x: jnp.sin(x * w))(X), (2.0,), (1.0,)),
            jax.jit(lambda w: pmap(lambda x: x + w)(X))(3.0),
            jax.grad(lambda w: pmap(lambda x: lax.psum(x * w, "i"), "i")(X).sum())(np.float32(1.5)),
        ]

    ours = cases(pxla_mlir.pmap)
    for got, want in zip(ours, cases(jax.pmap)):
        jax.tree_util.tree_map(lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-6), got, want)
    # The same pmap object, called again at the top level, recompiles nothing and holds no stale tracer.
    f = pxla_mlir.pmap(lambda x: x * 2)
    jax.grad(lambda w: (f(X) * w).sum())(1.0)
    np.testing.assert_array_equal(f(X), 2 * X)


def test_pxla_mlir_jit_closing_over_outer_tracers_is_a_clear_error():
    with pytest.raises(TypeError, match=r"pxla_mlir.jit function '<lambda>' closes over values traced by an outer "
                                        r"transformation"):
        jax.grad(lambda w: pxla_mlir.jit(lambda a: (a * w).sum())(X))(2.0)
    # Concrete values under a transformation are fine: the program runs as it is.
    out = jax.vmap(lambda v: pxla_mlir.jit(lambda a: pxla_mlir.pmap(lambda r: r * 2)(a))(X) * v)(np.ones(3, np.float32))
    np.testing.assert_array_equal(out, np.broadcast_to(2 * X, (3, 8)))


# -- errors users grep for: jax's words first, our detail after ----------------------------------------

def test_unbound_axis_name_starts_with_jax_words():
    with pytest.raises(NameError, match=r"^unbound axis name: j\. A collective"):
        pxla_mlir.pmap(lambda a: lax.psum(a, "j"), "i")(X)
    with pytest.raises(NameError, match=r"^unbound axis name: k\..*\(bound: 'i', 'j'\)"):
        pxla_mlir.pmap(pxla_mlir.pmap(lambda a: lax.psum(a, "k"), "j"), "i")(X.reshape(2, 4))


def test_in_axes_prefix_error_has_jax_path():
    for pmap in (pxla_mlir.pmap, jax.pmap):
        with pytest.raises(ValueError, match=r"pmap in_axes\[0\]\[0\]\n"):
            pmap(lambda a: a, in_axes=((0, 0),))((X,))
    with pytest.raises(ValueError, match=r"^pmap in_axes specification must be a tree prefix of the corresponding "
                                         r"value(.|\n)*pmap in_axes\[0\]\[1\]\n(.|\n)*\('b',\)"):
        pxla_mlir.pmap(lambda a, t: a, in_axes=(0, {"a": 0}))(X, {"b": X})


# -- out_axes=None only for values the same on every device --------------------------------------------

@pytest.mark.parametrize("body", [
    lambda v: lax.cond(lax.axis_index("i") > 3, lambda: 1.0, lambda: 0.0),
    lambda v: lax.switch(lax.axis_index("i") % 3, [lambda: 1.0, lambda: 2.0, lambda: 3.0]),
    lambda v: io_callback(lambda: np.float32(1), jax.ShapeDtypeStruct((), np.float32)),
    lambda v: lax.cond(True, lambda: io_callback(lambda: np.float32(1), jax.ShapeDtypeStruct((), np.float32)),
                       lambda: np.float32(0)),
], ids=["cond on axis_index", "switch on axis_index", "io_callback", "io_callback in cond"])
def test_out_axes_none_on_a_varying_choice_raises(body):
    with pytest.raises(ValueError, match=r"output 0 of pmap '<lambda>' has out_axes=None, but it may differ"):
        pxla_mlir.pmap(body, "i", out_axes=None)(X)


def test_out_axes_none_on_invariant_choices_is_accepted():
    by_psum = pxla_mlir.pmap(lambda v: lax.cond(lax.psum(v, "i") > 3, lambda: 1.0, lambda: 0.0), "i", out_axes=None)
    assert float(by_psum(X)) == 1.0
    pure = pxla_mlir.pmap(lambda v: jax.pure_callback(lambda: np.float32(5), jax.ShapeDtypeStruct((), np.float32)),
                          "i", out_axes=None)
    assert float(pure(X)) == 5.0


# -- small drop-in gaps -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", [dict(in_axes=False), dict(in_axes=(0, 1.0)), dict(out_axes=False),
                                  dict(out_axes={"a": "0"})])
def test_axes_that_are_not_ints_are_jax_type_errors(spec):
    with pytest.raises(TypeError) as theirs:
        jax.pmap(lambda x: x, **spec)
    with pytest.raises(TypeError) as ours:  # when the pmap is made, as jax.pmap
        pxla_mlir.pmap(lambda x: x, **spec)
    assert str(ours.value) == str(theirs.value)


def test_an_ordered_effect_without_a_host_callback():
    from jax._src import effects
    from jax._src.interpreters import mlir

    class OrderedTestEffect(effects.Effect):
        pass

    effects.lowerable_effects.add_type(OrderedTestEffect)
    effects.ordered_effects.add_type(OrderedTestEffect)
    effect_p = core.Primitive("ordered_test_effect")
    effect_p.multiple_results = True
    effect_p.def_effectful_abstract_eval(lambda *avals, effect: (avals, {effect}))

    def lowering(ctx, *, effect):
        ctx.set_tokens_out(ctx.tokens_in)
        return []

    mlir.register_lowering(effect_p, lowering)
    effect = OrderedTestEffect()

    def body(v):
        effect_p.bind(effect=effect)
        return v * 2

    np.testing.assert_array_equal(pxla_mlir.pmap(body)(X), 2 * X)  # its tokens live inside the program
    assert "stablehlo.token" not in pxla_mlir.pmap(body).lower(X).as_text("stablehlo")


def test_name_stacks_of_the_equation_and_its_body_as_jax_pmap():
    """jax's name_stack_test: the pmap equation keeps the scope around the pmap, its body's equations only the
    scopes inside it. jax.pmap's body sits two levels down (a jit holding a shard_map); ours is the pmap
    equation's own ``jaxpr``."""
    def stacks(pmap):
        @jax.named_scope("foo")
        @pmap
        def f(x):
            with jax.named_scope("bar"):
                return x + 1

        jaxpr = jax.make_jaxpr(f)(jnp.ones(1)).jaxpr
        found = []

        def walk(j):
            for eqn in j.eqns:
                if eqn.primitive.name == "add":
                    found.append(str(eqn.source_info.name_stack))
                for sub in core.jaxprs_in_params(eqn.params):
                    walk(sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub)

        walk(jaxpr)
        return str(jaxpr.eqns[0].source_info.name_stack), found

    assert stacks(pxla_mlir.pmap) == stacks(jax.pmap) == ("foo", ["bar"])


def test_shape_polymorphic_code_in_a_body_is_refined():
    from jax import export

    exported = export.export(jax.jit(lambda v: v * jnp.arange(v.shape[0], dtype=v.dtype)))(
        jax.ShapeDtypeStruct(export.symbolic_shape("b"), np.float32))
    x = np.arange(24.0, dtype=np.float32).reshape(8, 3)
    np.testing.assert_array_equal(pxla_mlir.pmap(exported.call)(x), jax.pmap(exported.call)(x))
    with pxla_mlir.Mesh.create({"x": 8}):
        xm = pxla_mlir.xmap(exported.call, in_axes=["m", ...], out_axes=["m", ...], axis_resources={"m": "x"},
                            lowering="manual")
        np.testing.assert_array_equal(xm(x), jax.pmap(exported.call)(x))


# -- errors as jax's own tests (jax's tests/pmap_test.py) expect jax.pmap's to read -------------------


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
