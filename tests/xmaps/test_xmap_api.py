"""xmap's lowered modules: pure, deterministic MHLO; cached calls; outputs
sharded on the mesh as out_axes and axis_resources say."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pxla_mlir
from pxla_mlir.mlir.core.ir_utils import walk
from pxla_mlir.mlir.support.stats import STATS


def f(a, w):
    return lax.psum(a * w, "n") + lax.axis_index("m"), lax.pmean(a, ("m", "n"))


ARGS = (np.ones((4, 8, 3), np.float32), np.ones(3, np.float32))


def xm(lowering, shardings="sdy"):
    return pxla_mlir.xmap(f, ({0: "m", 1: "n"}, {}), ({0: "m", 1: "n"}, {}), axis_resources={"m": "x", "n": "y"},
                          lowering=lowering, shardings=shardings)


@pytest.mark.parametrize("lowering", ["replica", "manual", "vectorize"])
@pytest.mark.parametrize("shardings", ["sdy", "gspmd"])
def test_pure_mhlo_and_pipeline(lowering, shardings):
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        lowered = xm(lowering, shardings).lower(*ARGS)
    # builtin/func/mhlo, plus the sdy dialect in the Shardy form of the SPMD lowerings
    sdy = {"sdy"} if shardings == "sdy" and lowering != "replica" else set()
    assert {op.name.split(".")[0] for op in walk(lowered.mhlo().operation)} == {"builtin", "func", "mhlo"} | sdy
    assert lowered.pipeline == f"builtin.module(pxla-xmap-pipeline{{lowering={lowering} sharding-dialect={shardings}}})"


def test_every_lowering_costs_the_same_flops_per_device():
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        costs = {lowering: xm(lowering).lower(*ARGS).compile().cost_analysis()
                 for lowering in ("replica", "manual", "vectorize")}
    assert costs["replica"]["flops"] == costs["manual"]["flops"] == costs["vectorize"]["flops"] > 0
    # The manual region is the replica program inside @SPMDFullToShardShape: the same bytes too.
    assert costs["replica"]["bytes accessed"] == costs["manual"]["bytes accessed"] > 0


def test_cached_calls_and_output_sharding():
    m = pxla_mlir.Mesh.create({"x": 2, "y": 4})
    with m:
        g = xm("replica")
        first = g(*ARGS)
        before = STATS["traces"], STATS["compiles"]
        for _ in range(3):
            again = g(*ARGS)
    assert (STATS["traces"], STATS["compiles"]) == before
    assert again[0].sharding == jax.sharding.NamedSharding(jax.sharding.Mesh(m.devices, ("x", "y")),
                                                           jax.sharding.PartitionSpec("x", "y", None))
    assert again[1].sharding.is_fully_replicated
    np.testing.assert_allclose(np.asarray(first[0]), np.asarray(again[0]))


@pytest.mark.subprocess
@pytest.mark.slow
def test_as_text_is_identical_in_two_processes():
    script = textwrap.dedent("""
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
        import numpy as np, pxla_mlir
        from jax import lax
        f = lambda a: (lax.all_gather(a, "b"), lax.ppermute(a, "b", [(i, (i + 1) % 16) for i in range(16)]))
        with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
            for lowering in ("replica", "manual", "vectorize"):
                g = pxla_mlir.xmap(f, ["b", ...], ({}, ["b", ...]), axis_resources={"b": ("y", "x")},
                                   lowering=lowering)
                print(g.lower(np.ones((16, 2), np.float32)).as_text())
    """)
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1] and runs[0].count("module @") == 3


def test_without_a_mesh_everything_is_vectorized_on_one_device():
    g = pxla_mlir.xmap(lambda a: a - lax.pmean(a, "b"), ["b", ...], ["b", ...])
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = g(x)
    np.testing.assert_allclose(np.asarray(out), x - x.mean(0))
    assert len(out.devices()) == 1


# -- meshes, caching, argument containers (2022 usage) --------------------------------------------

LOWERINGS = ["replica", "manual", "vectorize"]


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_a_jax_mesh_is_the_current_mesh(lowering):
    devices = np.array(jax.devices()[:4]).reshape(2, 2)
    a, b = np.arange(16 * 8 * 5).reshape(16, 8, 5), np.arange(14).reshape(2, 7)
    with pytest.warns(DeprecationWarning), jax.sharding.Mesh(devices, ("x", "y")):
        fm = pxla_mlir.xmap(lambda u, v: (u * 2, v * 4), in_axes=({0: "a", 1: "b"}, ["c", ...]),
                            out_axes=({0: "a", 1: "b"}, ["c", ...]), axis_resources={"a": "x", "b": "y", "c": "x"},
                            lowering=lowering)
        c, d = fm(a, b)
    np.testing.assert_array_equal(np.asarray(c), a * 2)
    np.testing.assert_array_equal(np.asarray(d), b * 4)
    assert c.sharding.spec == jax.sharding.PartitionSpec("x", "y", None)
    assert set(c.sharding.device_set) == set(devices.flat)


def test_jax_set_mesh_is_the_current_mesh_too():
    jmesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))
    with jax.set_mesh(jmesh):
        out = pxla_mlir.xmap(lambda v: lax.psum(v, "i") * v, ["i", ...], ["i", ...], axis_resources={"i": "x"})(
            np.arange(8.0, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(out), np.arange(8.0) * 28.0)
    assert out.sharding.spec == jax.sharding.PartitionSpec("x")


@pytest.mark.parametrize("make", ["pxla", "jax"])
def test_a_zero_dimensional_mesh_vectorizes_every_axis_on_its_device(make):
    device = jax.devices()[3]
    devices = np.array(device, dtype=object).reshape(())
    mesh = pxla_mlir.Mesh(devices, ()) if make == "pxla" else jax.sharding.Mesh(devices, ())
    f = pxla_mlir.xmap(lambda: lax.axis_index("i") * 2, in_axes=(), out_axes=["i", ...], axis_sizes={"i": 6})
    ctx = pytest.warns(DeprecationWarning) if make == "jax" else _null()
    with ctx, mesh:
        out = f()
    np.testing.assert_array_equal(np.asarray(out), np.arange(6) * 2)
    assert out.devices() == {device}


def _null():
    import contextlib

    return contextlib.nullcontext()


def test_a_new_xmap_around_the_same_function_neither_traces_nor_compiles():
    executing = {"allowed": True}

    def f(v):
        assert executing["allowed"], "the function was traced again"
        return v * 2

    x = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    make = lambda: pxla_mlir.xmap(f, in_axes=["a", ...], out_axes=["a", ...], axis_resources={"a": "x"})  # noqa: E731
    with pxla_mlir.Mesh.create({"x": 2}):
        make()(x)
        executing["allowed"] = False
        before = STATS["traces"], STATS["compiles"]
        np.testing.assert_array_equal(np.asarray(make()(x)), x * 2)
    with pxla_mlir.Mesh.create({"x": 2}):  # an equal mesh object
        make()(x)
    assert (STATS["traces"], STATS["compiles"]) == before
    with pxla_mlir.Mesh.create({"x": 2}):  # other options: traced again
        executing["allowed"] = True
        pxla_mlir.xmap(f, in_axes=["a", ...], out_axes=["a", ...], axis_resources={"a": "x"}, lowering="manual")(x)
    assert STATS["traces"] == before[0] + 1


def test_no_arguments_broadcasts_and_collectives_over_axis_sizes():
    np.testing.assert_array_equal(np.asarray(pxla_mlir.xmap(lambda: lax.axis_index("i"), in_axes=(), out_axes=["i", ...],
                                                            axis_sizes={"i": 6})()), np.arange(6))
    assert int(pxla_mlir.xmap(lambda: lax.psum(jnp.array(2) ** 2, "i"), in_axes={}, out_axes={},
                              axis_sizes={"i": 4})()) == 16
    with pxla_mlir.Mesh.create({"x": 2}):
        out = pxla_mlir.xmap(lambda v: v, in_axes={}, out_axes=["i"], axis_sizes={"i": 4},
                             axis_resources={"i": "x"})(np.float32(2.0))
    np.testing.assert_array_equal(np.asarray(out), [2.0] * 4)
    assert out.sharding.spec == jax.sharding.PartitionSpec("x")


def test_dict_out_axes_scalars_and_list_argument_containers():
    assert pxla_mlir.xmap(lambda v: v, in_axes=[...], out_axes={"a": [...]})({"a": 1}) == {"a": 1}
    x = np.arange(4, dtype=np.float32)
    p = [["x"], ["x"], ["x"]]
    out = pxla_mlir.xmap(lambda v: [v[0] + v[1], v[1], v[2] * 2], [p], p)([x, x, x])
    np.testing.assert_array_equal(np.asarray(out[0]), 2 * x)
    np.testing.assert_array_equal(np.asarray(out[2]), 2 * x)


def test_lower_with_shape_dtype_structs_compile_and_call_checks():
    f = pxla_mlir.xmap(lambda v: v + 4, in_axes=["i", ...], out_axes=["i", ...])
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    compiled = f.lower(jax.ShapeDtypeStruct((2, 2), np.float32)).compile()
    np.testing.assert_array_equal(np.asarray(compiled(x)), x + 4)
    with pytest.raises(TypeError, match=r"Function compiled with input pytree does not match the input pytree"):
        compiled([x])
    with pytest.raises(TypeError, match=r"Argument 'flat_args\[0\]' compiled with float32\[2,2\] and called with int32\[2,2\]"):
        compiled(jnp.asarray(x, jnp.int32))


def test_one_named_axis_over_two_mesh_axes_shards_major_to_minor():
    v = np.arange(20, dtype=np.float32).reshape(4, 5)
    with pxla_mlir.Mesh.create({"x": 2, "y": 2}):
        out = {order: pxla_mlir.xmap(lambda a: a * 4, in_axes=["a", ...], out_axes={1: "a"},
                                     axis_resources={"a": order})(v) for order in [("x", "y"), ("y", "x")]}
    for order, devices in [(("x", "y"), [0, 1, 2, 3]), (("y", "x"), [0, 2, 1, 3])]:
        hlo = out[order].sharding._to_xla_hlo_sharding(2)
        assert hlo.tile_assignment_dimensions() == [1, 4] and hlo.tile_assignment_devices() == devices
        np.testing.assert_array_equal(np.asarray(out[order]), v.T * 4)


# -- inside pxla_mlir.jit, jax.jit and pmap bodies -------------------------------------------------

@pytest.mark.enable_checks
def test_pxla_mlir_jit_of_xmaps_is_one_program_on_their_mesh():
    with pxla_mlir.Mesh.create({"x": 4}):
        f = pxla_mlir.xmap(lambda v: jnp.sin(v) + lax.psum(v, "i"), ["i"], ["i"], axis_resources={"i": "x"})
        step = pxla_mlir.jit(lambda v: f(v * v) + v)
        x = np.arange(8, dtype=np.float32) / 8
        got = step(x)
        text = step.lower(x).as_text()
        grads = pxla_mlir.jit(jax.grad(lambda v: jnp.sum(f(v * v) + v)))(x)
    ref = lambda v: jnp.sin(v * v) + jnp.sum(v * v) + v  # noqa: E731
    np.testing.assert_allclose(np.asarray(got), ref(x), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(grads), jax.grad(lambda v: jnp.sum(ref(v)))(x), rtol=1e-5)
    assert text.count("module @") == 1 and "mhlo.num_replicas = 4" in text
    assert "mhlo.dynamic_slice" in text and "mhlo.all_gather" in text


def test_pxla_mlir_jit_refuses_pmaps_and_xmaps_in_one_program():
    xm = pxla_mlir.xmap(lambda v: v * 2, ["i", ...], ["i", ...])
    pm = pxla_mlir.pmap(lambda v: v * 2, "p")
    with pytest.raises(ValueError, match=r"holds both pmaps and xmaps"):
        pxla_mlir.jit(lambda v: pm(xm(v)))(np.ones((2, 3), np.float32))


def test_jax_jit_around_an_xmap_keeps_its_layout_on_the_mesh():
    with pxla_mlir.Mesh.create({"x": 2}):
        f = pxla_mlir.xmap(lambda v: jnp.sin(v) + lax.psum(v, "i"), ["i"], ["i"], axis_resources={"i": "x"})
        x = np.arange(20, dtype=np.float32)
        got = jax.jit(lambda v: f(v * v) + v)(x)
        text = jax.jit(lambda v: f(v * v) + v).lower(x).as_text()
    np.testing.assert_allclose(np.asarray(got), np.sin(x * x) + np.sum(x * x) + x, rtol=1e-5)
    assert "mhlo.num_partitions = 2" in text and text.count("sdy.sharding_constraint") == 2
    with pxla_mlir.Mesh.create({"x": 2}), pxla_mlir.serial_loop("l", 2):
        g = pxla_mlir.xmap(lambda v: v * 2, ["i"], ["i"], axis_resources={"i": ("x", "l")})
        with pytest.warns(pxla_mlir.XmapInsideJitWarning, match=r"does not use its serial loops"):
            np.testing.assert_array_equal(jax.jit(g)(x), 2 * x)


def test_xmap_inside_a_pmap_body_is_vectorized_and_mesh_axes_are_refused():
    f = pxla_mlir.xmap(lambda v: v * lax.axis_index("i") + lax.psum(v, "p"), ["i", ...], ["i", ...])
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    got = pxla_mlir.pmap(lambda v: f(v), "p")(x)
    want = jax.vmap(jax.vmap(lambda v: v * lax.axis_index("i") + lax.psum(v, "p"), axis_name="i"), axis_name="p")(x)
    np.testing.assert_allclose(np.asarray(got), want)
    with pxla_mlir.Mesh.create({"x": 3}):
        g = pxla_mlir.xmap(lambda v: v * 2, ["i", ...], ["i", ...], axis_resources={"i": "x"})
        with pytest.raises(ValueError, match=r"uses mesh axes inside a pmap body, which is not supported"):
            pxla_mlir.pmap(lambda v: g(v), "p")(x)


def test_jit_of_an_xmap_follows_the_mesh_in_scope():
    """pxla_mlir.jit's caches were not keyed by the mesh: called under an
    8-device mesh, then under a 4-device one, it kept running (and lowering)
    on the 8 devices of the first."""
    x = jnp.asarray(np.arange(16, dtype=np.float32).reshape(8, 2))
    f = pxla_mlir.jit(pxla_mlir.xmap(lambda a: a + lax.axis_index("b"), (["b", ...],), ["b", ...],
                                     axis_resources={"b": "x"}))
    want = np.asarray(x) + np.arange(8, dtype=np.float32)[:, None]
    for devices in (jax.devices()[:8], jax.devices()[4:8], jax.devices()[:8]):
        with pxla_mlir.Mesh(np.array(devices), ("x",)):
            for _ in range(2):  # the first call and the cached one
                out = f(x)
                np.testing.assert_array_equal(np.asarray(out), want)
                assert out.sharding.device_set == set(devices)
            assert f'pxla.mesh = "x={len(devices)}"' in f.lower(x).as_text()
