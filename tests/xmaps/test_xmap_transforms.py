"""xmap under jax transformations gives the numbers of the same
transformation of its nested-jax.vmap reference, in the three lowerings:
grad, jvp, vjp, linearize, vmap (also over a named axis the body uses),
checkpoint (with a policy), jacfwd; second order; closures over tracers of
an outer transformation; repeated transformed calls reuse everything."""

import functools

import jax
import jax.numpy as jnp
import numerics
import numpy as np
import pytest
from jax import lax
from jax.test_util import check_grads

import pxla_mlir
from pxla_mlir.mlir.support.stats import STATS

LOWERINGS = ["replica", "manual", "vectorize"]
#: Replica lowering is the costliest (2 to 6 s a test here): some tests run it in make test only.
REPLICA_SLOW = [pytest.param("replica", marks=pytest.mark.slow), "manual", "vectorize"]
RNG = np.random.default_rng(0)


def data(*shape):
    return (RNG.normal(size=shape) * 0.5).astype(np.float32)


assert_close = functools.partial(numerics.assert_close, tol=2e-4)


def body(x, w):
    """One row of 'batch' (16 rows, on mesh axes x and y), a broadcast weight."""
    h = jnp.tanh(x * w + lax.pmean(x, "batch"))
    shifted = lax.ppermute(h, "batch", [(i, (i + 1) % 16) for i in range(16)])
    return h * shifted + lax.all_gather(x, "batch")[3] * lax.axis_index("batch"), lax.psum(jnp.sum(h * w), "batch")


def as_xmap(lowering):
    return pxla_mlir.xmap(body, (["batch", ...], {}), (["batch", ...], {}), axis_resources={"batch": ("x", "y")},
                          lowering=lowering)


REFERENCE = jax.vmap(body, in_axes=(0, None), out_axes=(0, None), axis_name="batch")
ARGS = (data(16, 3), data(3))


def scalar(f):
    return lambda *a: sum(jnp.sum(jnp.sin(leaf)) for leaf in jax.tree.leaves(f(*a)))


TRANSFORMS = {
    "jvp": lambda f, args: jax.jvp(f, args, jax.tree.map(jnp.ones_like, args)),
    "grad": lambda f, args: jax.grad(scalar(f), argnums=(0, 1))(*args),
    "vjp": lambda f, args: jax.vjp(f, *args)[1](jax.tree.map(jnp.ones_like, f(*args))),
    "linearize": lambda f, args: jax.linearize(f, *args)[1](*jax.tree.map(jnp.ones_like, args)),
    "vmap": lambda f, args: jax.vmap(f, in_axes=(1, None), out_axes=(2, 0))(jnp.stack([args[0], 2 * args[0]], 1),
                                                                          args[1]),
    "checkpoint": lambda f, args: jax.grad(scalar(jax.checkpoint(
        f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)), argnums=(0, 1))(*args),
    "jacfwd": lambda f, args: jax.jacfwd(scalar(f), argnums=1)(*args),
}


# Replica lowering costs the most under every transform: the fast tier runs grad and vmap on it, the others on
# manual and vectorize; make test runs every pair.
@pytest.mark.parametrize("transform, lowering", [
    pytest.param(t, l, marks=pytest.mark.slow) if l == "replica" and t not in ("grad", "vmap") else (t, l)
    for l in LOWERINGS for t in TRANSFORMS], ids=lambda v: v)
def test_transform_matches_nested_vmap_reference(transform, lowering):
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        got = TRANSFORMS[transform](as_xmap(lowering), ARGS)
    assert_close(got, TRANSFORMS[transform](REFERENCE, ARGS))


def two_axes(v):
    return jnp.sin(v) * lax.psum(v, "n") + lax.pmean(v, ("m", "n")) * lax.axis_index("m")


@pytest.mark.enable_checks
@pytest.mark.parametrize("lowering", REPLICA_SLOW)
def test_grad_and_vmap_over_two_named_axes_with_local_tiles(lowering):
    x = data(4, 8, 3)  # m=4 over x (tile 2), n=8 over y (tile 2)
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        f = pxla_mlir.xmap(two_axes, {0: "m", 1: "n"}, {0: "m", 1: "n"}, axis_resources={"m": "x", "n": "y"},
                           lowering=lowering)
        grad = jax.grad(lambda v: jnp.sum(f(v) ** 2))(x)
        batched = jax.vmap(f, in_axes=2, out_axes=0)(x)
    ref = jax.vmap(jax.vmap(two_axes, axis_name="n"), axis_name="m")
    assert_close(grad, jax.grad(lambda v: jnp.sum(ref(v) ** 2))(x))
    assert_close(batched, jax.vmap(ref, in_axes=2, out_axes=0)(x))


def test_vmap_with_collectives_over_the_vmapped_name_inside_the_body():
    def f(v):
        return lax.psum(v, "b") * lax.psum(v, "i") + lax.axis_index("b")

    x = data(3, 8, 2)
    with pxla_mlir.Mesh.create({"x": 8}):
        got = jax.vmap(pxla_mlir.xmap(f, ["i", ...], ["i", ...], axis_resources={"i": "x"}), axis_name="b")(x)
    assert_close(got, jax.vmap(jax.vmap(f, axis_name="i"), axis_name="b")(x))


@pytest.mark.parametrize("broadcast", [True, False], ids=["broadcast-weight", "mapped-weight"])
@pytest.mark.slow
def test_check_grads_to_second_order(broadcast):
    """2022's testAutodiffBroadcast / NoBroadcast: forward and reverse, order 2."""
    def f(x, y):
        return jnp.cos(lax.dot(x, jnp.sin(y), precision=lax.Precision.HIGHEST))

    x = np.arange(12, dtype=np.float64).reshape(3, 4) / 100
    y = np.arange(20 if broadcast else 12, dtype=np.float64).reshape((4, 5) if broadcast else (4, 3)) / 100
    in_axes = (["i", ...], {}) if broadcast else (["i", ...], [None, "i"])
    with jax.enable_x64(True):
        check_grads(pxla_mlir.xmap(f, in_axes, ["i", ...]), (x, y), order=2, modes=("fwd", "rev"),
                    atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_closure_over_a_tracer_of_an_enclosing_transformation(lowering):
    """2022's testBatchingPostProcess: the body closes over vmap's tracer."""
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    with pxla_mlir.Mesh.create({"x": 5}):
        f = jax.vmap(lambda y: pxla_mlir.xmap(lambda v: v + y + lax.pmean(v, "i"), ["i", ...], ["i", ...],
                                              axis_resources={"i": "x"}, lowering=lowering)(x))
        got = f(x * 2)
        grads = jax.grad(lambda w: jnp.sum(pxla_mlir.xmap(lambda v: jnp.sin(v * w), ["i", ...], ["i", ...],
                                                           lowering=lowering)(x)))(np.float32(0.3))
    assert_close(got, jax.vmap(lambda y: jax.vmap(lambda v: v + y + lax.pmean(v, "i"), axis_name="i")(x))(x * 2))
    assert_close(grads, jax.grad(lambda w: jnp.sum(jnp.sin(x * w)))(np.float32(0.3)))


def test_checkpoint_of_an_xmap_as_2022_tested_it():
    f = jax.checkpoint(pxla_mlir.xmap(lambda v: v, in_axes=["i", ...], out_axes=["i", ...]))
    np.testing.assert_array_equal(np.asarray(jax.grad(lambda v: f(v).sum())(jnp.arange(3.0))), np.ones(3))
    g = jax.checkpoint(pxla_mlir.xmap(lambda v: jnp.sin(jnp.sin(v)), in_axes=["i", ...], out_axes=["i", ...]),
                       policy=lambda prim, *_, **__: str(prim) == "sin")
    assert_close(jax.grad(lambda v: g(v).sum())(jnp.arange(3.0)),
                 jax.grad(lambda v: jnp.sin(jnp.sin(v)).sum())(jnp.arange(3.0)))


@pytest.mark.parametrize("transform", ["grad", "vmap", "checkpoint"])
def test_repeated_transformed_calls_reuse_traces_and_executables(transform):
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        f = as_xmap("replica")
        first = TRANSFORMS[transform](f, ARGS)
        before = {k: STATS[k] for k in ("traces", "lowerings", "compiles")}
        for _ in range(2):
            again = TRANSFORMS[transform](as_xmap("replica"), ARGS)  # a new xmap object, too
    assert {k: STATS[k] for k in before} == before
    assert_close(again, first, tol=0)


@pytest.mark.parametrize("transform", ["grad", "checkpoint", "vmap"])
def test_transformed_jaxprs_typecheck_under_jax_enable_checks(transform):
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}), jax.enable_checks(True):
        got = TRANSFORMS[transform](as_xmap("replica"), ARGS)
    assert_close(got, TRANSFORMS[transform](REFERENCE, ARGS))


def test_the_forward_and_backward_programs_are_xmaps_with_residuals_on_their_axes():
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        jaxpr = jax.make_jaxpr(jax.grad(scalar(as_xmap("replica")), argnums=(0, 1)))(*ARGS)
    xmaps = [e for e in jaxpr.eqns if e.primitive.name == "pxla_xmap"]
    assert [e.params["name"] for e in xmaps] == ["lin_fwd(body)", "transpose(lin(body))"]
    forward, backward = xmaps
    residuals = forward.params["out_axes"][2:]
    assert residuals and all(spec in ((), ((0, "batch"),)) for spec in residuals)
    assert backward.params["in_axes"][:len(residuals)] == residuals
    # the cotangent of the broadcast weight leaves unmapped (a psum inside the backward xmap)
    assert backward.params["out_axes"] == (((0, "batch"),), ())


def test_a_staged_xmap_with_constants_evaluates_again():
    """2022's test_can_stage_and_interpret_xmap_with_constants: the body's
    constants are operands of the staged equation; evaluating it runs the
    primitive's compiled program."""
    from jax.extend.core import jaxpr_as_fun

    def outer(x):
        return pxla_mlir.xmap(lambda v: v + np.ones(v.shape, v.dtype), in_axes=({0: "batch"},),
                              out_axes={0: "batch"})(x)

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    jaxpr = jax.make_jaxpr(outer)(x)
    [eqn] = jaxpr.eqns
    assert eqn.primitive.name == "pxla_xmap" and eqn.params["in_axes"] == ((), ((0, "batch"),))
    np.testing.assert_array_equal(np.asarray(jaxpr_as_fun(jaxpr)(x)[0]), x + 1)


def mse(params, x, y):
    w1, w2 = params
    return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_weight_gradients_sum_over_the_batch_in_one_dot(lowering):
    """grad of a loss over named examples with broadcast weights: each weight
    gradient is one dot contracting the examples (pxla-contract-batch-sums),
    as jax.jit(shard_map)'s block matmul; the same numbers up to float
    reassociation. Integers: the same sums exactly."""
    from jax.sharding import Mesh as JaxMesh, PartitionSpec as P

    params, x, y = (data(6, 5), data(5, 3)), data(16, 6), data(16, 3)
    ints = (np.arange(48, dtype=np.int32).reshape(16, 3) - 20, (np.arange(64, dtype=np.int32) % 7 - 3).reshape(16, 4))
    with pxla_mlir.Mesh.create({"x": 8}) as mesh:
        loss = pxla_mlir.xmap(lambda p, a, b: lax.pmean(mse(p, a, b), "batch"), ({}, ["batch", ...], ["batch", ...]),
                              {}, axis_resources={"batch": "x"}, lowering=lowering)
        step = pxla_mlir.jit(jax.grad(loss))
        outer = pxla_mlir.xmap(lambda u, v: lax.psum(jnp.einsum("i,j->ij", u, v), "batch"),
                               (["batch", ...], ["batch", ...]), {}, axis_resources={"batch": "x"}, lowering=lowering)
        texts = step.lower(params, x, y).as_text(), outer.lower(*ints).as_text()
        got, summed = step(params, x, y), outer(*ints)
    assert all("dot_general" in t and "batching_dimensions" not in t for t in texts)
    block = jax.shard_map(lambda p, a, b: lax.pmean(mse(p, a, b), "x"), mesh=JaxMesh(mesh.devices, ("x",)),
                          in_specs=(P(), P("x"), P("x")), out_specs=P())
    assert_close(got, jax.jit(jax.grad(block))(params, x, y))
    np.testing.assert_array_equal(np.asarray(summed), ints[0].T @ ints[1])


@pytest.mark.parametrize("lowering", REPLICA_SLOW)
def test_jit_takes_the_blocks_its_xmaps_slice(lowering):
    """pxla_mlir.jit of grad(xmap): the examples, which only the xmap reads,
    enter each device as its block (pxla-place-tiles), as jax.jit(shard_map)
    takes them; the weights, read outside it too, whole. The vectorize
    lowering hands XLA the global view: XLA splits it. Host and committed
    replicated inputs give the same numbers."""
    from jax.sharding import NamedSharding, PartitionSpec as P

    params, x, y = (data(6, 5), data(5, 3)), data(16, 6), data(16, 3)
    with pxla_mlir.Mesh.create({"x": 8}) as mesh:
        loss = pxla_mlir.xmap(lambda p, a, b: lax.pmean(mse(p, a, b), "batch"), ({}, ["batch", ...], ["batch", ...]),
                              {}, axis_resources={"batch": "x"}, lowering=lowering)
        step = pxla_mlir.jit(lambda p, a, b: jax.tree.map(lambda w, g: w - 0.1 * g, p, jax.grad(loss)(p, a, b)),
                             donate_argnums=2)
        lowered = step.lower(params, x, y)
        whole = jax.device_put(x, NamedSharding(jax.sharding.Mesh(mesh.devices, ("x",)), P()))
        got, again = step(params, x, y), step(params, whole, y)
    by_block = lowering != "vectorize"
    block = ("x", None) if by_block else (None, None)
    assert [tuple(s.spec) for s in lowered.in_shardings] == [(None, None), (None, None), block, block]
    assert ("tensor<2x6xf32>" in lowered.pxla_text()) == by_block
    ref = jax.tree.map(lambda w, g: w - 0.1 * g, params, jax.grad(mse)(params, x, y))
    assert_close(got, ref)
    assert_close(again, got, tol=0)


def _size_dependent_primitive():
    """A primitive whose batching rule adds arange(batch size): its result shows
    which vmap the xmap put it under (2022's ``constant_introducing_p``)."""
    from jax.extend.core import Primitive
    from jax.interpreters import batching

    prim = Primitive("pxla_test_adds_arange")
    prim.def_abstract_eval(lambda x: x)

    def rule(axis_data, xs, dims):
        (x,), (d,) = xs, dims
        return x + jnp.arange(x.size, dtype=x.dtype).reshape(x.shape), d

    batching.fancy_primitive_batchers[prim] = rule
    return prim


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_a_batching_rule_sees_a_tile_or_the_global_view_as_the_guide_says(lowering):
    """replica and manual vmap a device's tile (as 2022 did), also under
    pxla_mlir.jit; vectorize, and jax.jit of any lowering, vmap the whole axis."""
    prim = _size_dependent_primitive()
    x = data(16)
    per_tile = jax.vmap(jax.vmap(prim.bind))(x.reshape(2, 8)).reshape(16)  # 8 per device on 'x'
    whole_axis = jax.vmap(prim.bind)(x)
    with pxla_mlir.Mesh.create({"x": 2}):
        f = pxla_mlir.xmap(prim.bind, ["i"], ["i"], axis_resources={"i": "x"}, lowering=lowering)
        tiled = whole_axis if lowering == "vectorize" else per_tile
        assert_close(f(x), tiled)
        assert_close(pxla_mlir.jit(f)(x), tiled)
        assert_close(jax.jit(f)(x), whole_axis)
