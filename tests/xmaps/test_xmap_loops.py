"""Serial loop resources (2022's serial_loop / SerialLoop): a named axis
mapped to a loop runs its chunks one after another on each device (a while
loop in the MHLO), with memory for one chunk; collectives over a looped axis
and axis_index stay correct; loops compose with mesh axes, other loops,
nested xmaps and transformations. Numbers against nested jax.vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from numerics import assert_close

import pxla_mlir
from pxla_mlir.xmaps import XmapError, XmapTypeError

LOWERINGS = ["replica", "manual", "vectorize"]
RNG = np.random.default_rng(0)


def data(*shape):
    return RNG.normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_loops_as_2022_tested_them(lowering):
    x = np.arange(16)
    xm = lambda res: pxla_mlir.xmap(lambda v: v + 4, ["i"], ["i"], axis_resources={"i": res},  # noqa: E731
                                    lowering=lowering)
    with pxla_mlir.serial_loop("l", 4):
        np.testing.assert_array_equal(np.asarray(xm("l")(x)), x + 4)
        with pxla_mlir.Mesh.create({"x": 2}):
            np.testing.assert_array_equal(np.asarray(xm(("x", "l"))(x)), x + 4)
    np.testing.assert_array_equal(np.asarray(xm(pxla_mlir.SerialLoop(4))(x)), x + 4)
    with pxla_mlir.Mesh.create({"x": 2}):
        np.testing.assert_array_equal(np.asarray(xm(("x", pxla_mlir.SerialLoop(4)))(x)), x + 4)


@pxla_mlir.serial_loop("l", 2)  # a decorator too, as 2022's was
def test_serial_loop_as_a_decorator():
    out = pxla_mlir.xmap(lambda v: v * lax.axis_index("i"), ["i"], ["i"], axis_resources={"i": "l"})(np.ones(6))
    np.testing.assert_array_equal(np.asarray(out), np.arange(6.0))


def collectives(v):
    return {"centered": (v - lax.pmean(v, "i")) * lax.axis_index("i"), "gathered": lax.all_gather(v, "i")[5],
            "shifted": lax.ppermute(v, "i", [(k, (k + 3) % 16) for k in range(16)]),
            "max": lax.pmax(jnp.sum(v), "i")}


OUT_AXES = {"centered": ["i", ...], "gathered": ["i", ...], "shifted": ["i", ...], "max": []}


@pytest.mark.enable_checks
@pytest.mark.parametrize("lowering", LOWERINGS)
@pytest.mark.parametrize("resources", [("x", "l"), ("l",)], ids=["mesh-and-loop", "loop"])
def test_collectives_over_a_looped_axis(lowering, resources):
    """2022 refused these; the loop is cut at each collective (all chunks at
    once there) and resumes after it."""
    x = data(16, 3)
    with pxla_mlir.Mesh.create({"x": 2}), pxla_mlir.serial_loop("l", 4):
        got = pxla_mlir.xmap(collectives, ["i", ...], OUT_AXES, axis_resources={"i": resources},
                             lowering=lowering)(x)
    want = jax.vmap(collectives, axis_name="i", out_axes={k: 0 if v else None for k, v in OUT_AXES.items()})(x)
    assert_close(got, want)


@pytest.mark.parametrize("lowering", [pytest.param("replica", marks=pytest.mark.slow), "vectorize"])
def test_the_loop_is_a_while_and_needs_memory_for_one_chunk(lowering):
    def f(a):
        sorted_rows = jnp.sort(jnp.tanh(jnp.outer(a, a)), axis=0)  # a 128x128 intermediate per row
        return sorted_rows[-1] - lax.pmean(a, "i")

    x = data(64, 128)
    temp = {}
    for resources in [("x",), ("x", "l")]:
        with pxla_mlir.Mesh.create({"x": 2}), pxla_mlir.serial_loop("l", 8):
            g = pxla_mlir.xmap(f, ["i", ...], ["i", ...], axis_resources={"i": resources}, lowering=lowering)
            lowered = g.lower(x)
            assert ("mhlo.while" in lowered.as_text()) == ("l" in resources)
            stats = lowered.compile().executable.xla.get_compiled_memory_stats()
            temp[resources] = stats.temp_size_in_bytes
            assert_close(g(x), jax.vmap(f, axis_name="i")(x))
    # 32 rows per device: 32 x 128 x 128 floats (2 MiB) at once, or 4 rows per iteration
    assert temp[("x",)] >= 32 * 128 * 128 * 4
    assert temp[("x", "l")] < temp[("x",)] / 4


@pytest.mark.parametrize("lowering", [pytest.param("replica", marks=pytest.mark.slow),
                                      pytest.param("manual", marks=pytest.mark.slow), "vectorize"])  # 3 s each
def test_two_named_axes_on_two_loops_and_a_nested_looped_xmap(lowering):
    def two(v):
        return v - lax.pmean(v, "a") + lax.psum(v, "b") * lax.axis_index("b")

    x = data(4, 6, 3)
    with pxla_mlir.serial_loop("l1", 2), pxla_mlir.serial_loop("l2", 3):
        got = pxla_mlir.xmap(two, {0: "a", 1: "b"}, {0: "a", 1: "b"}, axis_resources={"a": "l1", "b": "l2"},
                             lowering=lowering)(x)
    assert_close(got, jax.vmap(jax.vmap(two, axis_name="b"), axis_name="a")(x))

    def inner(v):
        return v * lax.psum(v, "j") + lax.axis_index("i")

    def outer(u):
        return pxla_mlir.xmap(inner, ["j", ...], ["j", ...], axis_resources={"j": ("y", "l2")}, lowering=lowering)(u) \
            + lax.pmean(u, "i")

    y = data(8, 12, 3)
    with pxla_mlir.Mesh.create({"x": 2, "y": 2}), pxla_mlir.serial_loop("l1", 2), pxla_mlir.serial_loop("l2", 3):
        got = pxla_mlir.xmap(outer, ["i", ...], ["i", ...], axis_resources={"i": ("x", "l1")}, lowering=lowering)(y)
    want = jax.vmap(lambda u: jax.vmap(inner, axis_name="j")(u) + lax.pmean(u, "i"), axis_name="i")(y)
    assert_close(got, want)


@pytest.mark.slow
def test_looped_xmap_under_grad_vmap_and_pxla_mlir_jit():
    def body(a, w):
        return jnp.tanh(a * w) - lax.pmean(a, "i"), lax.psum(jnp.sum(a * w), "i")

    ref = jax.vmap(body, in_axes=(0, None), out_axes=(0, None), axis_name="i")
    loss = lambda f: lambda a, w: jnp.sum(jnp.sin(f(a, w)[0])) + f(a, w)[1]  # noqa: E731
    x, w = data(16, 6), data(6)
    with pxla_mlir.Mesh.create({"x": 2}), pxla_mlir.serial_loop("l", 4):
        f = pxla_mlir.xmap(body, (["i", ...], {}), (["i", ...], {}), axis_resources={"i": ("x", "l")})
        assert_close(jax.grad(loss(f), (0, 1))(x, w), jax.grad(loss(ref), (0, 1))(x, w))
        assert_close(jax.vmap(f, in_axes=(0, None))(np.stack([x, -x]), w), jax.vmap(ref, (0, None))(np.stack([x, -x]), w))
        assert_close(pxla_mlir.jit(lambda a, w: f(a, w)[0] * 2)(x, w), ref(x, w)[0] * 2)


def test_loop_mistakes():
    x = np.ones((4, 4), np.float32)
    with pxla_mlir.serial_loop("l", 2):
        with pytest.raises(XmapTypeError, match=r"^Axes `a` and `b` are both mapped to the resource `l`, but they "
                                                r"coincide in the named_shape of an input to an xmapped function "
                                                r"<lambda> .*along one serial loop twice"):
            pxla_mlir.xmap(lambda v: v, ["a", "b"], ["a", "b"], axis_resources={"a": "l", "b": "l"})(x)
        with (pxla_mlir.Mesh.create({"x": 2}),
              pytest.raises(NotImplementedError, match=r"^Loop resources cannot appear before mesh axes in the "
                                                       r"resource_axis argument\. axis_resources of 'a' lists mesh "
                                                       r"axis 'x' after the serial loop 'l'; put mesh axes first")):
            pxla_mlir.xmap(lambda v: v, ["a", ...], ["a", ...], axis_resources={"a": ("l", "x")})(x)
        with pytest.raises(XmapError, match=r"^Size of axis a \(3\) is not divisible by the total number of "
                                            r"resources assigned to this axis \(\('l',\), 2 in total\)\. Named axis "
                                            r"'a' is split over 2 loop iterations"):
            pxla_mlir.xmap(lambda: lax.axis_index("a"), (), ["a"], axis_sizes={"a": 3}, axis_resources={"a": "l"})()
        with (pytest.raises(XmapError, match=r"^Cannot extend the resource environment with loop named `l`\. "
                                             r"An axis of this name is already defined! 'l' is a serial_loop of an "
                                             r"enclosing block; give the loop another name"),
              pxla_mlir.serial_loop("l", 3)):
            pass
    with pytest.raises(XmapError, match=r"SerialLoop needs a positive number of iterations"):
        pxla_mlir.SerialLoop(0)


def test_jit_of_an_xmap_follows_the_loops_in_scope():
    """Nor by the serial loops: after a call inside serial_loop, one outside
    ran the loop's program instead of saying the resource is missing."""
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    f = pxla_mlir.jit(pxla_mlir.xmap(lambda a: a + lax.axis_index("b"), (["b", ...],), ["b", ...],
                                     axis_resources={"b": "l"}))
    with pxla_mlir.serial_loop("l", 4):
        np.testing.assert_array_equal(np.asarray(f(x)), x + np.arange(8, dtype=np.float32)[:, None])
    from pxla_mlir.errors import PxlaUserError

    with pytest.raises(PxlaUserError, match=r"missing resources are: \{'l'\}"):
        f(x)
