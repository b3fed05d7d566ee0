"""The vectorize lowering's sharding constraints (2022's SPMD lowering): a
nested xmap's operands and results laid out as it maps them, and with
``ensure_fixed_sharding`` every intermediate; input arrays laid out on the
mesh otherwise than the xmap maps them are 2022's ValueError; 2022's empty
mesh is no mesh."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

import pxla_mlir
from pxla_mlir.xmaps import XmapError, XmapUnsupportedError

X = np.arange(64, dtype=np.float32).reshape(8, 8) - 20.5


def nested(shardings="sdy", inner_resources=("y",)):
    inner = pxla_mlir.xmap(lambda b: jnp.sin(b) * 2, ["j", ...], ["j", ...],
                           axis_resources={"j": inner_resources}, lowering="vectorize", shardings=shardings)
    return pxla_mlir.xmap(lambda a: inner(a) + 1, ["i", ...], ["i", ...], axis_resources={"i": "x"},
                          lowering="vectorize", shardings=shardings)


def constraints(text: str) -> list[str]:
    return re.findall(r"sdy\.sharding_constraint %\S+ (<@mesh, \[.*?\]>)", text)


def test_nested_xmap_values_are_constrained_to_their_tiling():
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        f = nested()
        text = f.lower(X).as_text()
        out = f(X)
    # the inner operand and result: rows on the outer 'x', the inner 'j' (columns) on 'y'
    assert constraints(text) == ['<@mesh, [{"x"}, {"y"}]>'] * 2
    np.testing.assert_allclose(np.asarray(out), np.sin(X) * 2 + 1, rtol=1e-6)


def test_nested_constraints_in_the_gspmd_form():
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        f = nested("gspmd")
        text = f.lower(X).as_text()
        out = f(X)
    assert re.findall(r'custom_call @Sharding\(\S+\) \{mhlo.sharding = "([^"]*)"', text) == ["{devices=[2,4]<=[8]}"] * 2
    assert "pxla.sharding_constraint" not in text
    np.testing.assert_allclose(np.asarray(out), np.sin(X) * 2 + 1, rtol=1e-6)


def test_an_inner_xmap_without_mesh_axes_keeps_the_outer_layout():
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        f = nested(inner_resources=())
        text = f.lower(X).as_text()
        out = f(X)
    assert constraints(text) == ['<@mesh, [{"x"}, {}]>'] * 2
    np.testing.assert_allclose(np.asarray(out), np.sin(X) * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("shardings", ["sdy", "gspmd"])
@pytest.mark.parametrize("inner_resources, tile", [(("y",), "f32[4,2]"), ((), "f32[4,8]")], ids=["on-y", "vectorized"])
def test_xla_splits_the_inner_computation_as_mapped(shardings, inner_resources, tile):
    """In XLA's partitioned program each device computes the inner sin on its
    tile: split over both mesh axes when the inner xmap maps 'j' to 'y'."""
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        hlo = nested(shardings, inner_resources).lower(X).compile().as_text()
    assert re.findall(r"= (f32\[[0-9,]*\])\S* sine\(", hlo) == [tile]


def test_no_constraints_without_nesting_or_the_option():
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        text = pxla_mlir.xmap(lambda a: jnp.sin(a) * 2, ["i", ...], ["i", ...], axis_resources={"i": "x"},
                              lowering="vectorize").lower(X).as_text()
    assert constraints(text) == []


@pytest.mark.parametrize("shardings", ["sdy", "gspmd"])
def test_ensure_fixed_sharding_constrains_every_intermediate(shardings):
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        f = pxla_mlir.xmap(lambda a: jnp.sin(a) * 2 + a, ["i", ...], ["i", ...], axis_resources={"i": "x"},
                           lowering="vectorize", shardings=shardings, ensure_fixed_sharding=True)
        text = f.lower(X).as_text()
        out = f(X)
    if shardings == "sdy":
        # sin, mul, add: rows on 'x', the rest replicated
        assert constraints(text) == ['<@mesh, [{"x"}, {}]>'] * 3
    else:
        assert text.count("custom_call @Sharding") == 3
    np.testing.assert_allclose(np.asarray(out), np.sin(X) * 2 + X, rtol=1e-6)


def test_ensure_fixed_sharding_needs_the_vectorize_lowering():
    with pytest.raises(XmapUnsupportedError, match=r"^This flag requires enabling the "
                                                   r"experimental_xmap_spmd_lowering flag.*lowering='vectorize'"):
        pxla_mlir.xmap(jnp.sin, ["i", ...], ["i", ...], lowering="manual", ensure_fixed_sharding=True)
    with pytest.raises(TypeError, match="ensure_fixed_sharding must be True or False"):
        pxla_mlir.xmap(jnp.sin, ["i", ...], ["i", ...], lowering="vectorize", ensure_fixed_sharding="yes")


def test_input_partitioned_otherwise_is_2022s_value_error():
    m = pxla_mlir.Mesh.create({"x": 2, "y": 4})
    jm = jax.sharding.Mesh(m.devices, m.axis_names)
    on_x = jax.device_put(X, NamedSharding(jm, PartitionSpec("x", None)))
    with m:
        f = pxla_mlir.xmap(lambda a: a + 1, ["i", ...], ["i", ...], axis_resources={"i": "y"})
        # laid out as the xmap maps it, or not on a mesh at all: accepted (the fast path too)
        on_y = jax.device_put(X, NamedSharding(jm, PartitionSpec("y")))
        for _ in range(3):
            np.testing.assert_array_equal(np.asarray(f(on_y)), X + 1)
        np.testing.assert_array_equal(np.asarray(f(jnp.asarray(X))), X + 1)
        np.testing.assert_array_equal(np.asarray(f(X)), X + 1)
        # after the fast path knows this xmap: still the error, not a silent reshard
        with pytest.raises(ValueError, match=r"^Got an input Array to xmap with different partitioning than "
                                             r"specified in xmap\. .*Array spec: P\('x', None\).*"
                                             r"xmap spec: P\('y', None\).*args\[0\]"):
            f(on_x)


def test_input_on_another_mesh_is_an_error():
    m = pxla_mlir.Mesh.create({"x": 2, "y": 4})
    other = jax.sharding.Mesh(np.array(jax.devices()[::-1]).reshape(2, 4), ("x", "y"))
    arg = jax.device_put(X, NamedSharding(other, PartitionSpec("x")))
    with m, pytest.raises(XmapError, match=r"^xmap's mesh and Array's mesh should be equal"):
        pxla_mlir.xmap(lambda a: a + 1, ["i", ...], ["i", ...], axis_resources={"i": "x"})(arg)


def test_2022s_empty_mesh_is_no_mesh():
    empty = pxla_mlir.Mesh(np.empty((), dtype=object), ())
    assert empty.empty and repr(empty) == "Mesh(np.empty((), dtype=object), ())"
    assert empty == pxla_mlir.Mesh(np.empty((), dtype=object), ()) and hash(empty) == hash(empty)
    with empty:
        out = pxla_mlir.xmap(lambda a: a * 2, ["i", ...], ["i", ...])(X)
        with pytest.raises(XmapError, match="missing resources"):
            pxla_mlir.xmap(lambda a: a * 2, ["i", ...], ["i", ...], axis_resources={"i": "x"})(X)
    np.testing.assert_array_equal(np.asarray(out), X * 2)
    with pytest.raises(ValueError, match=r"mesh entry 0 is 'cpu', not a device"):
        pxla_mlir.Mesh(np.array(["cpu"], dtype=object), ("x",))
