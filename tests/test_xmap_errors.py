"""Every xmap mistake gets a clear error naming the axis or argument."""

import jax
import numpy as np
import pytest
from jax import lax

import pxla_mlir
from pxla_mlir.xmaps import XmapError

X = np.zeros((8, 3), np.float32)


def call(fun, in_axes, out_axes, args, mesh=None, **kw):
    f = pxla_mlir.xmap(fun, in_axes, out_axes, **kw)
    if mesh is None:
        return f(*args)
    with mesh:
        return f(*args)


def mesh(**shape):
    return pxla_mlir.Mesh.create(shape)


def test_named_axis_not_divisible_by_its_devices():
    with pytest.raises(XmapError, match=r"named axis 'b' has size 6, which its mesh axes \('x',\) \(4 devices\) do not divide"):
        call(lambda a: a, ["b", ...], ["b", ...], (np.zeros((6, 2)),), mesh(x=4), axis_resources={"b": "x"})


def test_unknown_mesh_axis():
    with pytest.raises(XmapError, match=r"maps 'b' to mesh axis 'z', which the current mesh \(x=2, y=4\) does not have"):
        call(lambda a: a, ["b", ...], ["b", ...], (X,), mesh(x=2, y=4), axis_resources={"b": "z"})


def test_resources_without_a_mesh():
    with pytest.raises(XmapError, match=r"no mesh is active; call the xmap inside `with pxla_mlir.Mesh"):
        call(lambda a: a, ["b", ...], ["b", ...], (X,), axis_resources={"b": "x"})


def test_two_named_axes_on_one_mesh_axis_in_one_input():
    with pytest.raises(XmapError, match=r"named axes 'a' and 'b' are both mapped to mesh axis 'x', but they coincide "
                                        r"in the input args\[0\]"):
        call(lambda v: v, {0: "a", 1: "b"}, {0: "a", 1: "b"}, (np.zeros((4, 4)),), mesh(x=4),
             axis_resources={"a": "x", "b": "x"})


def test_two_named_axes_on_one_mesh_axis_in_an_intermediate():
    with pytest.raises(XmapError, match=r"coincide in a value computed by add at .*test_xmap_errors.py"):
        call(lambda u, v: u + v, (["a", ...], ["b", ...]), {}, (np.zeros((4, 2)), np.zeros((4, 2))), mesh(x=4),
             axis_resources={"a": "x", "b": "x"})


def test_same_mesh_axis_is_fine_when_the_axes_never_meet():
    with mesh(x=4):
        f = pxla_mlir.xmap(lambda u, v: (u * 2, lax.psum(v, "b")), (["a", ...], ["b", ...]), (["a", ...], {}),
                           axis_resources={"a": "x", "b": "x"})
        out = f(np.ones((4, 2), np.float32), np.ones((4, 2), np.float32))
    np.testing.assert_array_equal(np.asarray(out[1]), np.full(2, 4.0))


def test_pmap_nested_in_xmap():
    inner = pxla_mlir.pmap(lambda v: v, "p")
    with pytest.raises(XmapError, match=r"pxla_mlir.pmap cannot be nested inside xmap"):
        call(lambda a: inner(a.reshape(1, 3))[0], ["b", ...], ["b", ...], (X,), mesh(x=8),
             axis_resources={"b": "x"}, lowering="manual")


def test_unreduced_axis_missing_from_out_axes():
    with pytest.raises(XmapError, match=r"output 0 varies along named axis 'b', but out_axes does not place 'b' in it; "
                                        r"reduce over 'b' first"):
        call(lambda a: a * 2, ["b", ...], {}, (X,))


def test_out_axes_names_an_unknown_axis():
    with pytest.raises(XmapError, match=r"out_axes of output 0 names 'c', which is not a named axis of this xmap "
                                        r"\(named axes: b\)"):
        call(lambda a: a, ["b", ...], {0: "b", 1: "c"}, (X,))


def test_inconsistent_sizes():
    with pytest.raises(XmapError, match=r"named axis 'b' has size 8 in args\[0\] \(dimension 0 of shape \(8, 3\)\) but "
                                        r"4 in args\[1\] \(dimension 0 of shape \(4,\)\)"):
        call(lambda u, v: u, (["b", ...], ["b", ...]), ["b", ...], (X, np.zeros(4)))


def test_axis_resources_for_an_unknown_axis():
    with pytest.raises(XmapError, match=r"axis_resources maps 'q', which no input carries and axis_sizes does not give"):
        call(lambda a: a, ["b", ...], ["b", ...], (X,), mesh(x=8), axis_resources={"q": "x"})


@pytest.mark.parametrize("in_axes, message", [
    ({0: "b", 1: "b"}, r"axis 'b' names two dimensions of the same value"),
    ({3: "b"}, r"dimension 3 \(for axis 'b'\) is out of range for rank 2"),
    (["b"], r"\['b'\] has 1 entries for rank 2; use \.\.\. for the rest"),
    (["b", ..., ...], r"at most one \.\.\."),
    ("b", r"axes must be a \{dim: name\} dict or a list"),
])
def test_malformed_in_axes(in_axes, message):
    with pytest.raises(XmapError, match=message):
        call(lambda a: a, in_axes, in_axes, (X,))


def test_called_on_tracers():
    f = pxla_mlir.xmap(lambda a: a, ["b", ...], ["b", ...])
    with pytest.raises(XmapError, match=r"xmap cannot be called on traced values"):
        jax.jit(f)(X)


def test_bad_lowering_name():
    with pytest.raises(ValueError, match=r"lowering must be 'replica', 'manual' or 'vectorize', got 'spmd'"):
        pxla_mlir.xmap(lambda a: a, ["b", ...], ["b", ...], lowering="spmd")
