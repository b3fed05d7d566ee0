"""pmap and xmap inside jax.jit, with jax.jit(jax.pmap) as the oracle: the
program is one over the pmap's devices (mhlo.num_partitions = N, the pmap an
sdy.manual_computation as jax emits it), the results are jax's, bit for bit,
with jax's shardings; jit checks device counts and ordered effects as it
does for jax.pmap; nested pmaps get a mesh axis each; where a pmap cannot
keep its devices it runs as jax.vmap and says why."""

import re
import warnings

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import io_callback

import pxla_mlir

X = np.arange(16.0, dtype=np.float32).reshape(8, 2) / 7


def both(make, *args):
    """make(pmap) under jax.jit, with pxla_mlir.pmap and jax.pmap: (ours, theirs), no warning from ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", pxla_mlir.PmapInsideJitWarning)
        ours = jax.jit(make(pxla_mlir.pmap))(*args)
    return ours, jax.jit(make(jax.pmap))(*args)


def assert_same(ours, theirs):
    for o, t in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_array_equal(o, t)
        assert o.sharding == t.sharding


def loss(pmap):
    per_device = pmap(lambda w, a: lax.psum(jnp.sum(jnp.tanh(a @ w) ** 2), "i"), "i", in_axes=(None, 0))
    return lambda w, x: per_device(w, x)[0]


CASES = {
    "psum and axis_index": lambda pmap: pmap(lambda v: lax.psum(v, "i") + lax.axis_index("i"), "i"),
    "in_axes None, out_axes 1": lambda pmap: pmap(lambda v, s: (v * s).T, "i", in_axes=(0, None), out_axes=1),
    "several outputs": lambda pmap: pmap(lambda v: (v.sum(), lax.pmean(v, "i"), lax.all_gather(v, "i")), "i"),
    "grad of a pmap (a training step)": lambda pmap: (lambda w, x: w - 0.1 * jax.grad(loss(pmap))(w, x)),
    "vmap of a pmap": lambda pmap: jax.vmap(pmap(lambda v: lax.psum(v, "i"), "i"), in_axes=1, out_axes=1),
    "ppermute": lambda pmap: pmap(lambda v: lax.ppermute(v, "i", [(k, (k + 1) % 8) for k in range(8)]), "i"),
}
ARGS = {"in_axes None, out_axes 1": (X, np.float32(3)), "grad of a pmap (a training step)": (np.eye(2, dtype=np.float32), X)}


@pytest.mark.parametrize("case", CASES)
def test_jit_of_pmap_is_jax_jit_of_jax_pmap(case):
    args = ARGS.get(case, (X,))
    assert_same(*both(CASES[case], *args))


def test_the_program_is_jax_s_multi_device_program():
    ours = jax.jit(pxla_mlir.pmap(lambda v: lax.psum(v, "i"), "i")).lower(X).as_text()
    theirs = jax.jit(jax.pmap(lambda v: lax.psum(v, "i"), "i")).lower(X).as_text()
    assert "mhlo.num_partitions = 8" in ours and "sdy.manual_computation" in ours
    # The same manual computation (jax also states its in/out shardings on @main's arguments and results).
    region = lambda text: text[text.index("%0 = sdy.manual_computation"):]  # noqa: E731
    assert region(ours) == region(theirs)
    assert re.search(r"sdy.mesh @mesh = <\[\"i\"=8\]>", ours)
    compiled = jax.jit(pxla_mlir.pmap(lambda v: lax.psum(v, "i"), "i")).lower(X).compile()
    assert len(compiled.runtime_executable().local_devices()) == 8


def test_devices_of_a_pmap_given_devices():
    devices = jax.devices()[4:]
    ours, theirs = both(lambda pmap: pmap(lambda v: lax.psum(v, "i"), "i", devices=devices), X[:4])
    assert_same(ours, theirs)
    assert ours.sharding.device_set == set(devices)


def test_jit_checks_devices_and_ordered_effects_as_for_jax_pmap():
    committed = jax.device_put(X, jax.devices()[0])
    errors = []
    for pmap in (pxla_mlir.pmap, jax.pmap):
        with pytest.raises(ValueError) as info:
            jax.jit(lambda v, pmap=pmap: pmap(lambda r: r * 2, "i")(v) + v)(committed)
        errors.append(str(info.value))
    assert errors[0].startswith("Received incompatible devices for jitted computation") and \
        errors[1].startswith("Received incompatible devices for jitted computation")
    assert "pxla_pmap" in errors[0]

    from jax._src import effects
    from jax._src.interpreters import mlir

    class Ordered(effects.Effect):
        pass

    effects.lowerable_effects.add_type(Ordered)
    effects.ordered_effects.add_type(Ordered)
    effect_p = jax.extend.core.Primitive("jit_test_ordered_effect")
    effect_p.multiple_results = True
    effect_p.def_effectful_abstract_eval(lambda *avals, effect: (avals, {effect}))
    mlir.register_lowering(effect_p, lambda ctx, *, effect: (ctx.set_tokens_out(ctx.tokens_in), [])[1])
    ordered = Ordered()

    def body(v):
        effect_p.bind(effect=ordered)
        return v

    for pmap in (pxla_mlir.pmap, jax.pmap):
        with pytest.raises(ValueError, match=r"^The following ordered effects are not supported for more than 1 "
                                             r"device: \["):
            jax.jit(pmap(body))(X)
    # io_callback(ordered=True) is allowed on many devices, in both
    echo = lambda v: io_callback(lambda a: a, jax.ShapeDtypeStruct(v.shape, v.dtype), v, ordered=True)  # noqa: E731
    assert_same(*both(lambda pmap: pmap(echo), X))


def test_nested_pmaps_get_a_mesh_axis_each():
    def inner(row):
        return lax.psum(row, "j") + 10.0 * lax.axis_index("j")

    def outer(block):
        return pxla_mlir.pmap(inner, "j", out_axes=1)(block) + lax.psum(block, "i").T

    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    f = pxla_mlir.pmap(outer, "i")
    with warnings.catch_warnings():
        warnings.simplefilter("error", pxla_mlir.PmapInsideJitWarning)
        got = jax.jit(f)(x)
        text = jax.jit(f).lower(x).as_text()
    np.testing.assert_array_equal(got, f(x))
    np.testing.assert_array_equal(got, jax.vmap(lambda b: jax.vmap(inner, axis_name="j", out_axes=1)(b)
                                                + lax.psum(b, "i").T, axis_name="i")(x))
    assert '<["i"=2, "j"=4]>' in text and "mhlo.num_partitions = 8" in text


def test_where_a_pmap_cannot_keep_its_devices_it_says_why():
    def outer(block):  # sibling nested pmaps over different axes
        return pxla_mlir.pmap(lambda r: lax.psum(r, "j"), "j")(block) + \
            pxla_mlir.pmap(lambda r: lax.psum(r, "k"), "k")(block)

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    with pytest.warns(pxla_mlir.PmapInsideJitWarning, match="nested pmaps at one level map different axes"):
        got = jax.jit(pxla_mlir.pmap(outer, "i"))(x)
    ref = jax.vmap(lambda b: jax.vmap(lambda r: lax.psum(r, "j"), axis_name="j")(b)
                   + jax.vmap(lambda r: lax.psum(r, "k"), axis_name="k")(b))(x)
    np.testing.assert_array_equal(got, ref)


def test_xmap_inside_jit_is_spread_over_its_mesh():
    b = np.arange(4 * 8 * 3, dtype=np.float32).reshape(4, 8, 3)
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        g = pxla_mlir.xmap(lambda v: lax.psum(v, "n") + lax.axis_index("m"), in_axes={0: "m", 1: "n"},
                           out_axes={0: "m", 1: "n"}, axis_resources={"m": "x", "n": "y"})
        want = g(b)
        got = jax.jit(lambda v: g(v) * 2)(b)
    np.testing.assert_array_equal(got, 2 * np.asarray(want))
    assert got.sharding.spec == jax.P("x", "y") and len(got.sharding.device_set) == 8
