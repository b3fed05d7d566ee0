"""pmap under jax transformations gives the numbers of the same transformation
of the jax.vmap(axis_name=...) reference; pxla_mlir.jit makes one program;
jax.jit keeps the devices; repeated transformed calls reuse everything."""

import functools
import warnings

import jax
import jax.numpy as jnp
import numerics
import numpy as np
import pytest
from jax import lax
from jax.test_util import check_grads

import pxla_mlir
from pxla_mlir.mlir.support.stats import STATS

RNG = np.random.default_rng(0)


def data(*shape):
    return (RNG.normal(size=shape) * 0.5).astype(np.float32)


def vmap_as_pmap(f, name, in_axes=0, out_axes=0):
    return jax.vmap(f, in_axes=in_axes, out_axes=out_axes, axis_name=name)


# Each program is written against a pmap-like `pm`, so the same code gives
# the pxla_mlir version and the vmap reference.
def one_level(pm):
    def body(x, w):
        return jnp.sin(x) * lax.psum(x * w, "i") + lax.all_gather(x, "i")[3], lax.pmean(jnp.cos(x) * w, "i")

    return pm(body, "i", in_axes=(0, None), out_axes=(1, None))


def nested(pm):
    def inner(y):
        return jnp.tanh(y) * lax.psum(y, "j") + lax.psum(y, "i") * 0.5

    def outer(x):
        return pm(inner, "j", in_axes=1, out_axes=0)(x) * lax.pmean(x, "i")[None, :, 0]

    return pm(outer, "i")


def with_pytrees(pm):
    def body(p, batch):
        h = jnp.tanh(batch["x"] @ p["w"] + p["b"])
        return {"loss": lax.pmean(jnp.sum(h ** 2), "i"), "h": h}

    return pm(body, "i", in_axes=({"w": None, "b": None}, {"x": 0}), out_axes={"loss": None, "h": 0})


def with_custom_rules(pm):
    @jax.custom_jvp
    def soft(v):
        return jnp.log1p(jnp.exp(v))

    soft.defjvp(lambda primals, tangents: (soft(primals[0]), jax.nn.sigmoid(primals[0]) * tangents[0]))

    @jax.custom_vjp
    def clipped(v):
        return v * 2

    clipped.defvjp(lambda v: (v * 2, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

    def body(x):
        return soft(x) + clipped(lax.psum(x, "i")) + clipped(x)

    return pm(body, "i")


PROGRAMS = {
    "one_level": (one_level, lambda: (data(8, 3), data(3))),
    "nested": (nested, lambda: (data(2, 3, 4),)),
    "pytrees": (with_pytrees, lambda: ({"w": data(4, 5), "b": data(5)}, {"x": data(8, 2, 4)})),
}


def scalar(f):
    return lambda *a: sum(jnp.sum(jnp.sin(leaf)) for leaf in jax.tree.leaves(f(*a)))


assert_close = functools.partial(numerics.assert_close, tol=2e-4)


TRANSFORMS = {
    "jvp": lambda f, args: jax.jvp(f, args, jax.tree.map(jnp.ones_like, args)),
    "grad": lambda f, args: jax.grad(scalar(f), argnums=tuple(range(len(args))))(*args),
    "vjp": lambda f, args: jax.vjp(f, *args)[1](jax.tree.map(jnp.ones_like, f(*args))),
    "linearize": lambda f, args: jax.linearize(f, *args)[1](*jax.tree.map(jnp.ones_like, args)),
    "jacfwd": lambda f, args: jax.jacfwd(scalar(f))(*args),
    "jacrev": lambda f, args: jax.jacrev(scalar(f))(*args),
    "grad_of_grad": lambda f, args: jax.grad(lambda *a: jnp.sum(jax.tree.leaves(jax.grad(scalar(f))(*a))[0] ** 2))(*args),
    "checkpoint": lambda f, args: jax.grad(scalar(jax.checkpoint(f)))(*args),
    "checkpoint_saving_dots": lambda f, args: jax.grad(scalar(jax.checkpoint(
        f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)))(*args),
    "vmap": lambda f, args: jax.vmap(f)(*jax.tree.map(lambda a: jnp.stack([a, 2 * a]), args)),
}


# The fast tier runs every first-order transform on the one-level program; the nested and pytree programs (1 to 5 s
# each under grad and the jacobians) run in make test.
@pytest.mark.parametrize("program", [p if p == "one_level" else pytest.param(p, marks=pytest.mark.slow)
                                     for p in PROGRAMS])
@pytest.mark.parametrize("transform", [pytest.param(t, marks=pytest.mark.slow) if t == "grad_of_grad" else t
                                       for t in TRANSFORMS])  # second order: about 2 s a program
def test_transform_matches_vmap_reference(program, transform):
    make, args = PROGRAMS[program]
    args = args()
    got = TRANSFORMS[transform](make(pxla_mlir.pmap), args)
    want = TRANSFORMS[transform](make(vmap_as_pmap), args)
    assert_close(got, want)


def test_custom_jvp_and_vjp_inside_the_body():
    x = data(8, 3)
    for transform in ("grad", "vmap", "jacrev"):
        assert_close(TRANSFORMS[transform](with_custom_rules(pxla_mlir.pmap), (x,)),
                     TRANSFORMS[transform](with_custom_rules(jax.pmap), (x,)))


def test_custom_vjp_after_psum_follows_pmap_semantics():
    """A non-linear custom backward after a psum: each device clips its own
    cotangent and psum's transpose sums them (2022 pmap, jax.pmap and
    shard_map(check_vma=False) agree; jax.vmap's invariance typing differs)."""
    @jax.custom_vjp
    def clipped(v):
        return v * 2

    clipped.defvjp(lambda v: (v * 2, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))
    body = lambda v: clipped(lax.psum(v, "i"))  # noqa: E731
    loss = lambda f: lambda v: jnp.sum(jnp.sin(f(v)))  # noqa: E731
    x = data(8, 3)
    assert_close(jax.grad(loss(pxla_mlir.pmap(body, "i")))(x), jax.grad(loss(jax.pmap(body, "i")))(x))


@pytest.mark.enable_checks
def test_vmap_with_collectives_over_both_axes():
    def body(x):
        return lax.psum(x, "b") * lax.psum(x, "i") + lax.axis_index("b")

    x = data(3, 8, 2)
    got = jax.vmap(pxla_mlir.pmap(body, "i"), axis_name="b")(x)
    want = jax.vmap(jax.vmap(body, axis_name="i"), axis_name="b")(x)
    assert_close(got, want)
    # pmap axis not leading, vmap axis not leading either
    moved = np.moveaxis(x, 1, 2).copy()  # (3, 2, 8)
    got1 = jax.vmap(pxla_mlir.pmap(body, "i", in_axes=1, out_axes=1), in_axes=0, out_axes=2, axis_name="b")(moved)
    assert_close(got1, np.transpose(np.asarray(want), (2, 1, 0)))  # [feature, i, b]


@pytest.mark.parametrize("order", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_check_grads(order):
    f = pxla_mlir.pmap(lambda x, w: jnp.sin(x * w) * lax.psum(x, "i"), "i", in_axes=(0, None))
    x, w = data(8, 2).astype(np.float64), data(2).astype(np.float64)
    with jax.enable_x64(True):
        check_grads(f, (x, w), order=order, modes=("fwd", "rev"), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap", "checkpoint",
                                       pytest.param("grad_of_grad", marks=pytest.mark.slow)])
def test_repeated_transformed_calls_reuse_traces_and_executables(transform):
    f = one_level(pxla_mlir.pmap)
    args = PROGRAMS["one_level"][1]()
    first = TRANSFORMS[transform](f, args)
    before = {k: STATS[k] for k in ("traces", "lowerings", "compiles")}
    for _ in range(3):
        again = TRANSFORMS[transform](f, args)
    assert {k: STATS[k] for k in before} == before
    assert_close(again, first, tol=0)


@pytest.mark.enable_checks
def test_pxla_mlir_jit_makes_one_program_with_nested_pmaps():
    def step(x, w):
        z = jnp.cos(w) * 2.0  # outside the pmaps: replicated
        a = nested(pxla_mlir.pmap)(x)
        return a * z, jnp.sum(a)

    def ref(x, w):
        return jnp.cos(w) * 2.0 * nested(vmap_as_pmap)(x), jnp.sum(nested(vmap_as_pmap)(x))

    x, w = data(2, 3, 4), np.float32(0.4)
    jitted = pxla_mlir.jit(step)
    assert_close(jitted(x, w), ref(x, w))
    text = jitted.lower(x, w).as_text()
    assert text.count("module @jit_step") == 1 and "mhlo.num_replicas = 8" in text
    assert "mhlo.dynamic_slice" in text and "mhlo.all_gather" in text
    grads = pxla_mlir.jit(jax.grad(lambda x, w: step(x, w)[1], argnums=(0, 1)))(x, w)
    assert_close(grads, jax.grad(lambda x, w: ref(x, w)[1], argnums=(0, 1))(x, w))
    before = STATS["compiles"]
    jitted(x, w)
    assert STATS["compiles"] == before


def test_jax_jit_around_pmap_keeps_its_devices():
    f = pxla_mlir.pmap(lambda v: lax.psum(v, "i") * v, "i")
    x = data(8, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pxla_mlir.PmapInsideJitWarning)
        got = jax.jit(f)(x)
        grads = jax.jit(jax.grad(lambda v: jnp.sum(f(v))))(x)
    assert len(got.sharding.device_set) == 8 and len(grads.sharding.device_set) == 8
    ref = jax.vmap(lambda v: lax.psum(v, "i") * v, axis_name="i")
    assert_close(got, ref(x))
    assert_close(grads, jax.grad(lambda v: jnp.sum(ref(v)))(x))


def test_pxla_mlir_jit_refuses_tracers():
    with pytest.raises(TypeError, match="apply jax transformations inside it"):
        jax.grad(pxla_mlir.jit(lambda v: jnp.sum(v)))(np.ones(3, np.float32))


@pytest.mark.slow
def test_transformations_inside_a_pmap_body_of_a_nested_pmap():
    def program(pm):
        def inner(y, w):
            return jnp.sin(y * w) * lax.psum(y, "j") + lax.pmean(y, "i")

        def outer(x, w):
            inner_pm = pm(inner, "j", in_axes=(0, None))
            gx, gw = jax.grad(lambda x, w: jnp.sum(inner_pm(x, w)), argnums=(0, 1))(x, w)
            tangent = jax.jvp(lambda x: inner_pm(x, w), (x,), (jnp.ones_like(x),))[1]
            batched = jax.vmap(lambda x: inner_pm(x, w))(jnp.stack([x, 2 * x]))
            return gx, lax.psum(gw, "i"), tangent, batched

        return pm(outer, "i", in_axes=(0, None), out_axes=(0, None, 0, 0))

    x, w = data(2, 4, 3), data(3)
    assert_close(program(pxla_mlir.pmap)(x, w), program(vmap_as_pmap)(x, w))


def test_pxla_mlir_jit_static_arguments_and_pytrees():
    @pxla_mlir.jit
    def scaled(params, x, k):
        out = pxla_mlir.pmap(lambda p, v: lax.psum(v * p["w"], "i") + k, "i", in_axes=(None, 0))(params, x)
        return {"out": out, "k": k * 2}

    f = pxla_mlir.jit(scaled.__wrapped__, static_argnums=2)
    x, w = data(8, 3), data(3)
    got = f({"w": w}, x, 3)
    want = jax.vmap(lambda v: lax.psum(v * w, "i") + 3, axis_name="i")(x)
    assert_close(got["out"], want)
    assert got["k"] == 6
    before = {k: STATS[k] for k in ("traces", "compiles")}
    f({"w": w}, x, 3)
    assert {k: STATS[k] for k in before} == before
    assert f({"w": w}, x, 4)["k"] == 8  # a new static value: one new program
    assert STATS["compiles"] == before["compiles"] + 1


@pytest.mark.parametrize("transform", ["grad", "checkpoint", "vmap", "jacfwd"])
def test_transformed_jaxprs_typecheck_under_jax_enable_checks(transform):
    make, args = PROGRAMS["nested"]
    args = args()
    with jax.enable_checks(True):  # jax typechecks every jaxpr it builds, ours included
        got = TRANSFORMS[transform](make(pxla_mlir.pmap), args)
    assert_close(got, TRANSFORMS[transform](make(vmap_as_pmap), args))


def test_vjp_compiles_forward_and_backward_programs_as_jax_pmap():
    """A transpose whose body prints like its forward pass (an identity's) is a program of its own, named for
    it, as jax.pmap compiles it (jax's api_test: one compilation for forward, one for backward)."""
    from jax._src import test_util as jtu  # jax's own counter of programs lowered

    def f(x, y):
        return x, y

    x = np.ones((1, 1, 1), np.float32)
    counts = {}
    for name, pmap in (("jax", jax.pmap), ("ours", pxla_mlir.pmap)):
        pmap(f)(x, x)  # the plain program first, as in jax's test
        with jtu.count_jit_and_pmap_lowerings() as count:
            for _ in range(2):
                jax.vjp(pmap(f), x, x)[1]((x, x))
        counts[name] = count()
    assert counts["ours"] == counts["jax"] == 2
