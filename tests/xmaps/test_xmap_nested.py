"""xmap inside xmap: nested named axes (the inner body may use the outer
names), nested meshes (the inner xmap spreads other mesh axes than the outer
one), broadcasts, vmap and xmap around an xmap, in the three lowerings,
against nested jax.vmap or NumPy; resource conflicts between levels, a mesh
changed inside an xmap and shadowed names are errors."""

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.errors import JAXTypeError
from numerics import assert_close

import pxla_mlir
from pxla_mlir.xmaps import XmapMeshError

LOWERINGS = ["replica", "manual", "vectorize"]
RNG = np.random.default_rng(0)


def data(*shape):
    return RNG.normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("lowering", LOWERINGS)
@pytest.mark.parametrize("mesh_shape, outer, inner", [
    ({"x": 2, "y": 2}, {"a": "y"}, {"b": "x"}),
    ({"x": 2, "y": 2, "z": 2}, {"a": "y"}, {"b": ("x", "z")}),
], ids=["one-to-one", "inner-on-two-axes"])
def test_nested_mesh_as_2022_tested_it(lowering, mesh_shape, outer, inner):
    """The inner xmap spreads 'b' over other mesh axes than the outer 'a', its
    body uses both names, and a constant array exercises the hoisting of
    constants; the result is laid out by the outer xmap only."""
    xm = partial(pxla_mlir.xmap, lowering=lowering)

    @partial(xm, in_axes={1: "a"}, out_axes=({0: "a"}, {}), axis_resources=outer)
    def f(x):
        @partial(xm, in_axes={0: "b"}, out_axes=({1: "b"}, {}), axis_resources=inner)
        def h(y):
            return jnp.sin(y) * np.arange(y.size, dtype=np.float32), lax.psum(y, ("a", "b"))

        return h(x * 2)

    x = np.arange(40, dtype=np.float32).reshape(4, 2, 5)
    with pxla_mlir.Mesh.create(mesh_shape):
        y = f(x)
    assert_close(y, ((np.sin(x * 2) * np.arange(5)[None, None]).transpose((1, 2, 0)), (x * 2).sum((0, 1))))
    replicas = math.prod(mesh_shape.values()) // 2
    assert y[0].sharding._to_xla_hlo_sharding(3).tile_assignment_dimensions() == [2, 1, 1, replicas]


@pytest.mark.enable_checks
@pytest.mark.parametrize("lowering", LOWERINGS)
def test_inner_collectives_over_outer_and_inner_names_with_local_tiles(lowering):
    def inner(v):
        return v * lax.psum(v, "j") + lax.pmean(v, "i") + lax.axis_index(("i", "j")) * 0.01

    def outer(u):
        return pxla_mlir.xmap(inner, ["j", ...], ["j", ...], axis_resources={"j": "y"}, lowering=lowering)(u) \
            - lax.all_gather(u, "i")[1]

    x = data(8, 8, 3)  # i=8 over x (tile 2), j=8 over y (tile 4)
    with pxla_mlir.Mesh.create({"x": 4, "y": 2}):
        got = pxla_mlir.xmap(outer, ["i", ...], ["i", ...], axis_resources={"i": "x"}, lowering=lowering)(x)
    want = jax.vmap(lambda u: jax.vmap(inner, axis_name="j")(u) - lax.all_gather(u, "i")[1], axis_name="i")(x)
    assert_close(got, want)


def test_nested_broadcast_and_xmap_of_xmap_as_vmap():
    f = pxla_mlir.xmap(lambda v: v, in_axes={}, out_axes=["i"], axis_sizes={"i": 4})
    g = pxla_mlir.xmap(f, in_axes={}, out_axes=["j", ...], axis_sizes={"j": 7})
    np.testing.assert_array_equal(np.asarray(g(np.float32(2.0))), np.full((7, 4), 2.0))
    x, y = data(7, 11, 2, 3), data(3, 13, 5)
    inner = pxla_mlir.xmap(lambda a, b: jnp.einsum("nk,km->nm", a, b), in_axes=({0: "x"}, {1: "y"}),
                           out_axes={0: "x", 2: "y"})
    outer = pxla_mlir.xmap(inner, in_axes=({0: "v"}, {}), out_axes={1: "v"})
    assert_close(outer(x, y), np.einsum("vxnk,kym->xvnym", x, y))


# Samples of 2022's VmapOfXmapCases: the outer map is jax.vmap or an xmap.
CASES = [
    (({0: "x"}, {1: "y"}), {0: "x", 2: "y"}, (0, None), 1),
    (({1: "x", 0: "y"}, {}), {3: "x", 0: "y"}, (2, 1), 0),
    (({}, {2: "x"}), {1: "x"}, (None, 0), 2),
    (({0: "x", 2: "y"}, {0: "y"}), {2: "y", 0: "x"}, (1, 3), 3),
]


@pytest.mark.parametrize("outer", ["vmap", "xmap"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_einsum_under_vmap_or_xmap_against_numpy(case, outer):
    (xin_x, xin_y), xout, (vin_x, vin_y), vout = CASES[case]
    sizes = {"x": 11, "y": 13}
    shapes, indices = {"a": [2, 3], "b": [3, 5], "z": [2, 5]}, {"a": list("nk"), "b": list("km"), "z": list("nm")}
    for key, spec in (("a", xin_x), ("b", xin_y), ("z", xout)):
        for pos, name in sorted(spec.items()):
            shapes[key].insert(pos, sizes[name])
            indices[key].insert(pos, name)
    for key, pos in (("a", vin_x), ("b", vin_y), ("z", vout)):
        if pos is not None:
            shapes[key].insert(pos, 7)
            indices[key].insert(pos, "v")
    mapped = pxla_mlir.xmap(lambda p, q: jnp.einsum("nk,km->nm", p, q), in_axes=(xin_x, xin_y), out_axes=xout)
    if outer == "vmap":
        fm = jax.vmap(mapped, in_axes=(vin_x, vin_y), out_axes=vout, axis_name="v")
    else:
        fm = pxla_mlir.xmap(mapped, in_axes=tuple({} if d is None else {d: "v"} for d in (vin_x, vin_y)),
                            out_axes={vout: "v"})
    a, b = data(*shapes["a"]), data(*shapes["b"])
    spec = f"{''.join(indices['a'])},{''.join(indices['b'])}->{''.join(indices['z'])}"
    assert_close(fm(a, b), np.einsum(spec, a, b))


# -- errors between levels -------------------------------------------------------------------------

def _nest(inner_kw, outer_kw, x):
    f = pxla_mlir.xmap(**inner_kw)
    with pxla_mlir.Mesh.create({"x": 2}):
        return pxla_mlir.xmap(f, ["j", ...], ["j", ...], axis_resources={"j": "x"}, **outer_kw)(x)


def test_conflict_in_an_input_of_the_inner_xmap():
    """2022's testResourceConflictNestArgs."""
    with pytest.raises(JAXTypeError, match=r"^Axes `i` and `j` are both mapped to the resource `x`, but they coincide "
                                           r"in the named_shape of an input to an xmapped function <lambda> \(xmap "
                                           r"called at .*test_xmap_nested.py:\d+:\d+ \(_nest\)\) \(input 0\)"):
        _nest(dict(fun=lambda v: v, in_axes=["i"], out_axes=["i"], axis_resources={"i": "x"}), {},
              np.arange(16.0).reshape(4, 4))


def test_conflict_in_a_value_inside_the_inner_xmap():
    """2022's testResourceConflictNestInner."""
    with pytest.raises(JAXTypeError, match=r"^Axes `i` and `j` are both mapped to the resource `x`, but they coincide "
                                           r"in the named_shape of a value returned from a primitive add created at "
                                           r".*test_xmap_nested.py.* \(inside an xmapped function <lambda>"):
        _nest(dict(fun=lambda v: lax.axis_index("i") + v, in_axes=[], out_axes=["i"], axis_sizes={"i": 4},
                   axis_resources={"i": "x"}), {}, np.arange(4, dtype=np.int32))


def test_conflict_in_an_output_of_the_inner_xmap():
    """2022's testResourceConflictNestOut."""
    with pytest.raises(JAXTypeError, match=r"^One of xmapped function \(<lambda>\) outputs is broadcast along axis `i` "
                                           r"which is assigned to resources `x`, but the output is already "
                                           r"partitioned along `x`, because its named shape contains `j`"):
        _nest(dict(fun=lambda v: v, in_axes=[], out_axes=["i"], axis_sizes={"i": 4}, axis_resources={"i": "x"}),
              {}, np.arange(4.0))


def test_changing_the_mesh_inside_an_xmap_is_an_error():
    def f(v):
        with jax.sharding.Mesh(np.empty((), dtype=object), ()):
            return pxla_mlir.xmap(lambda w: w, in_axes={0: "b"}, out_axes={0: "b"})(v)

    g = pxla_mlir.xmap(f, in_axes={0: "a"}, out_axes={0: "a"}, axis_resources={"a": "x"})
    with (pytest.warns(DeprecationWarning), jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",)),
          pytest.raises(XmapMeshError, match=r"^Changing the physical mesh is not allowed inside xmap\. xmap "
                                             r"'<lambda>' is called under mesh")):
        g(np.zeros((2, 5, 6), np.float32))


def test_an_inner_xmap_may_not_shadow_an_outer_name():
    inner = pxla_mlir.xmap(lambda v: v, ["i", ...], ["i", ...])
    with pytest.raises(JAXTypeError, match=r"^Detected disallowed xmap axis name shadowing at .*test_xmap_nested.py"
                                           r".* \(shadowed axes: `i`\)\. xmap '<lambda>' names axis 'i', which an "
                                           r"enclosing map already binds"):
        pxla_mlir.xmap(inner, ["i", ...], ["i", ...])(np.ones((2, 2, 2), np.float32))
