"""Every xmap mistake gets a clear error naming the axis or argument, of the
type 2022 code catches (ValueError, or TypeError for named-axis typing),
raised when the xmap is made where 2022 did so."""

import re

import jax
import numpy as np
import pytest
from jax import lax
from jax.errors import JAXTypeError

import pxla_mlir
from pxla_mlir.xmaps import XmapError, XmapMeshError, XmapTypeError, XmapUnsupportedError

X = np.zeros((8, 3), np.float32)


def call(fun, in_axes, out_axes, args, mesh=None, **kw):
    f = pxla_mlir.xmap(fun, in_axes, out_axes, **kw)
    if mesh is None:
        return f(*args)
    with mesh:
        return f(*args)


def mesh(**shape):
    return pxla_mlir.Mesh.create(shape)


def test_error_types_are_the_ones_2022_code_catches():
    assert issubclass(XmapError, ValueError)
    assert issubclass(XmapTypeError, JAXTypeError) and issubclass(XmapTypeError, XmapError)
    assert issubclass(XmapMeshError, RuntimeError)
    assert issubclass(XmapUnsupportedError, NotImplementedError)
    assert str(XmapTypeError("words")) == "words"  # no jax.errors page appended: it would not exist


# -- when the xmap is made (2022's words first, then which axis and how to fix it) ------------------

@pytest.mark.parametrize("in_axes, out_axes, kw, error, message", [
    (["a", ...], ["a", ...], {"axis_resources": {"a": ("x", "x")}}, ValueError,
     r"^Resource assignment of a single axis must be a tuple of distinct resources, but specified \('x', 'x'\) "
     r"for axis a\. List each mesh axis or loop once"),
    ((["a", ...], ["b", ...]), ["c", ...], {}, ValueError,
     r"^All axis names appearing in out_axes must also appear in in_axes or axis_sizes, but the following are "
     r"missing: \{'c'\}\. out_axes names 'c'"),
    ((["a", ...], ["a", ...]), ["a", ...], {"axis_resources": {"b": "x"}}, ValueError,
     r"^All axes that were assigned resources have to appear in in_axes or axis_sizes, but the following are "
     r"missing: \{'b'\}\. axis_resources maps 'b'"),
    ({-1: "i"}, {0: "i"}, {}, ValueError, r"^xmap doesn't support negative axes in in_axes: \{-1: 'i'\}"),
    ({0: "i"}, {-1: "i"}, {}, ValueError, r"^xmap doesn't support negative axes in out_axes"),
    ({0: "b", 1: "b"}, ["b", ...], {}, ValueError,
     r"^Named axes should be unique within each in_axes argument specification, but one them is: "
     r"\{0: 'b', 1: 'b'\}\. 'b' names two dimensions; give each dimension its own name"),
    (["b", ..., ...], ["b", ...], {}, XmapError, r"at most one \.\.\."),
    ("b", ["b", ...], {}, TypeError,
     r"^Value mapping specification in xmap in_axes pytree can be either:\n- lists of axis names \(possibly ending "
     r"with the ellipsis object: \.\.\.\)\n- dictionaries that map positional axes \(integers\) to axis names "
     r"\(e\.g\. \{2: 'name'\}\)\nbut got: b\n"),
    ([0, ...], ["b", ...], {}, TypeError, r"^Value mapping specification in xmap in_axes pytree can be either"),
    (["b", ...], ["b", ...], {"axis_sizes": {"c": -1}}, XmapError, r"axis_sizes gives 'c' size -1"),
    (["b", ...], ["b", ...], {"axis_resources": ["x"]}, TypeError,
     r"^xmap axis_resources must be a dict from named axes to resources \(a mesh axis name, a SerialLoop, or a tuple "
     r"of them\), got \['x'\] \(a list\) in the xmap of '<lambda>'; write e\.g\. axis_resources=\{'batch': 'x'\}"),
    (["b", ...], ["b", ...], {"axis_resources": ("x",)}, TypeError,
     r"^xmap axis_resources must be a dict from named axes .* got \('x',\) \(a tuple\) in the xmap of '<lambda>'; "
     r"write e\.g\. axis_resources=\{'batch': 'x'\}"),
    (["b", ...], ["b", ...], {"axis_resources": [("b", "x")]}, TypeError,
     r"^xmap axis_resources must be a dict from named axes .* got \[\('b', 'x'\)\] \(a list\)"),
    (["b", ...], ["b", ...], {"axis_resources": "x"}, TypeError,
     r"^xmap axis_resources must be a dict from named axes .* got 'x' \(a str\)"),
    (["b", ...], ["b", ...], {"axis_sizes": [("b", 4)]}, TypeError, r"^xmap axis_sizes must be a dict"),
    (["b", ...], (), {}, ValueError, r"^xmapped functions cannot have no return values"),
    (["b", ...], ["b", ...], {"lowering": "spmd"}, ValueError,
     r"lowering must be 'replica', 'manual' or 'vectorize', got 'spmd'"),
])
def test_mistakes_caught_when_the_xmap_is_made(in_axes, out_axes, kw, error, message):
    with pytest.raises(error, match=message):
        pxla_mlir.xmap(lambda *a: a[0], in_axes, out_axes, **kw)


def test_xmap_of_something_not_callable():
    with pytest.raises(TypeError, match=r"^Expected a callable value, got 3"):
        pxla_mlir.xmap(3, ["i", ...], ["i", ...])


# -- when it is called -----------------------------------------------------------------------------

def test_named_axis_not_divisible_by_its_devices():
    with pytest.raises(ValueError, match=r"^Size of axis b \(6\) is not divisible by the total number of resources "
                                         r"assigned to this axis \(\('x',\), 4 in total\)\. Named axis 'b' is split "
                                         r"over 4 devices"):
        call(lambda a: a, ["b", ...], ["b", ...], (np.zeros((6, 2)),), mesh(x=4), axis_resources={"b": "x"})


def test_axis_sizes_not_divisible_by_two_mesh_axes():
    """2022's testAxesNotDivisibleByResources."""
    with pytest.raises(ValueError, match=r"Size of axis i \(5\) is not divisible.*\(\('x', 'y'\), 4 in total\)"):
        call(lambda x: x, ["i", ...], ["i", ...], ({},), mesh(x=2, y=2), axis_sizes={"i": 5},
             axis_resources={"i": ("x", "y")})


def test_unknown_mesh_axis():
    """2022's testUndefinedAxisResource, then which axis wanted it."""
    with pytest.raises(ValueError, match=re.escape(
            "In-scope resources are insufficient to execute the xmapped function. The missing resources are: {'x'}. "
            "axis_resources maps 'a' to mesh axis 'x', which the current mesh (y=2) does not have")):
        call(lambda x: x, ["a", ...], ["a", ...], (np.zeros(4),), mesh(y=2), axis_resources={"a": "x"})


def test_resources_without_a_mesh():
    with pytest.raises(ValueError, match=r"^In-scope resources are insufficient to execute the xmapped function\. The "
                                         r"missing resources are: \{'x'\}\. axis_resources maps 'b' to mesh axis "
                                         r"'x', but no mesh is active; call the xmap inside `with pxla_mlir.Mesh"):
        call(lambda a: a, ["b", ...], ["b", ...], (X,), axis_resources={"b": "x"})


def test_size_of_an_axis_no_argument_carries():
    """2022's testEmptyArgumentTrees."""
    with pytest.raises(ValueError, match=r"^Failed to infer size of axes: i\. You've probably passed in empty "
                                         r"containers in place of arguments that had those axes in their in_axes\. "
                                         r"Provide the sizes of missing axes explicitly via axis_sizes to fix this "
                                         r"error\."):
        call(lambda x: x, ["i", ...], ["i", ...], ({},))


@pytest.mark.parametrize("args, kw, detail", [
    ((np.zeros(5), np.zeros(6)), {}, r"This is argument args\[1\]; 'i' got its size from args\[0\] \(dimension 0"),
    ((np.zeros(6),), {"axis_sizes": {"i": 5}}, r"This is argument args\[0\]; 'i' got its size from axis_sizes"),
])
def test_inconsistent_sizes(args, kw, detail):
    """2022's testInconsistentAxisSizes."""
    error = (r"^The size of axis i was previously inferred to be 5, but found an argument of shape \(6,\) with "
             r"in_axes specification \['i', \.\.\.\]\. Shape mismatch occurs in dimension 0: 6 != 5\. ")
    with pytest.raises(ValueError, match=error + detail):
        call(lambda *a: a[0], (["i", ...],) * len(args), ["i", ...], args, **kw)


@pytest.mark.parametrize("fun, in_axes, out_axes, shape, message", [
    (lambda x: x, ["i", "j", ...], ["j", "i", ...], (5,),
     r"^One of xmap arguments has an in_axes specification of \['i', 'j', \.\.\.\], which implies that it has at "
     r"least 2 dimensions, but the argument has rank 1\. This is argument args\[0\] \(shape \(5,\)\)"),
    (lambda x: x, ["i", None], ["i", None], (5,),
     r"^xmap argument has an in_axes specification of \['i', None\], which asserts that it should be of rank 2, "
     r"but the argument has rank 1 \(and shape \(5,\)\)\. This is argument args\[0\]; end the list with \.\.\."),
    (lambda x: x.reshape((2, 2)), ["i", None], ["i", None], (5, 4),
     r"^xmap output has an out_axes specification of \['i', None\], which asserts that it should be of rank 2, but "
     r"the output has rank 3 \(and shape \(5, 2, 2\)\)\. This is output 0"),
    (lambda x: x, ["i", ...], {1: "i"}, (5,),
     r"^One of xmap outputs has an out_axes specification of \{1: 'i'\}, which requires the result of the xmapped "
     r"function to have at least 1 positional dimensions, but it only has 0\. This is output 0"),
])
def test_ranks_the_axes_imply(fun, in_axes, out_axes, shape, message):
    """2022's testInAxesRankError, testListAxesRankAssertion, testOutAxesRankError."""
    with pytest.raises(ValueError, match=message):
        call(fun, in_axes, out_axes, (np.ones(shape, np.float32),))


def test_in_axes_that_are_not_a_prefix_of_the_arguments():
    """2022's testAxesMismatch."""
    x, p = np.ones(4, np.float32), [["x"], ["x"], ["x"]]
    call(lambda v: v, (p,), p, ([x, x, x],))  # a list of entries per argument, wrapped in the argument tuple
    call(lambda v: v, [p], p, ([x, x, x],))  # a list of argument entries is the argument tuple (as 2022)
    error = re.escape("xmap in_axes specification must be a tree prefix of the corresponding value, got specification "
                      "(['x'], ['x'], ['x']) for value tree PyTreeDef((*, *)). Note that xmap in_axes that are "
                      "non-trivial pytrees should always be wrapped in a tuple representing the argument list.\n")
    with pytest.raises(ValueError, match="^" + error + r"(.|\n)*length 3"):
        call(lambda u, v: u, p, p, (x, x))
    error = re.escape("xmap out_axes specification must be a tree prefix of the corresponding value, got "
                      "specification ([['x'], ['x'], ['x']], ['x']) for value tree PyTreeDef([*, *, *]).")
    with pytest.raises(ValueError, match="^" + error):
        call(lambda v: v, (p,), (p, ["x"]), ([x, x, x],))


def test_a_single_argument_that_needs_its_in_axes_wrapped():
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"In particular, you're passing in a single argument which means that xmap "
                                         r"in_axes might need to be wrapped in a singleton tuple\."):
        call(lambda v: v[0], (["i", ...],) * 3, ["i", ...], ((x, x, x),))


def test_two_named_axes_on_one_mesh_axis_in_one_input():
    """2022's testResourceConflictArgs, then which argument."""
    with pytest.raises(JAXTypeError, match=r"^Axes `a` and `b` are both mapped to the resource `x`, but they "
                                           r"coincide in the named_shape of an input to an xmapped function "
                                           r"<lambda> \(the argument args\[0\]\)\. A value cannot be split "
                                           r"along one mesh axis twice"):
        call(lambda v: lax.psum(v, ("a", "b")), ["a", "b"], [], (np.zeros((4, 4)),), mesh(x=2),
             axis_resources={"a": "x", "b": "x"})


def test_two_named_axes_on_one_mesh_axis_in_an_intermediate():
    """2022's testResourceConflictInner."""
    with pytest.raises(JAXTypeError, match=r"^Axes `a` and `b` are both mapped to the resource `x`, but they "
                                           r"coincide in the named_shape.*primitive add created at "
                                           r".*test_xmap_errors.py"):
        call(lambda u, v: u + v, (["a", ...], ["b", ...]), ["a", "b", ...], (np.zeros((4, 3)), np.zeros((2, 3))),
             mesh(x=2), axis_resources={"a": "x", "b": "x"})


def test_output_broadcast_along_an_axis_on_a_mesh_axis_it_is_already_split_by():
    """2022's testResourceConflictOut."""
    with pytest.raises(JAXTypeError, match=r"^One of xmapped function \(<lambda>\) outputs is broadcast "
                                           r"along axis `b` which is assigned to resources `x`, but the "
                                           r"output is already partitioned along `x`, because its named "
                                           r"shape contains `a`\. This is output 0; map 'b' and 'a' to different"):
        call(lambda u, v: u, (["a", ...], ["b", ...]), ["a", "b", ...], (np.zeros((4, 3)), np.zeros((2, 3))),
             mesh(x=2), axis_resources={"a": "x", "b": "x"})


def test_same_mesh_axis_is_fine_when_the_axes_never_meet():
    with mesh(x=4):
        f = pxla_mlir.xmap(lambda u, v: (u * 2, lax.psum(v, "b")), (["a", ...], ["b", ...]), (["a", ...], {}),
                           axis_resources={"a": "x", "b": "x"})
        out = f(np.ones((4, 2), np.float32), np.ones((4, 2), np.float32))
    np.testing.assert_array_equal(np.asarray(out[1]), np.full(2, 4.0))


def test_pmap_nested_in_xmap():
    inner = pxla_mlir.pmap(lambda v: v, "p")
    with pytest.raises(RuntimeError, match=r"^Nesting pmap inside xmaps not supported! \(a pxla_mlir\.pmap inside "
                                           r"the body of an xmap\); use a named axis of the xmap instead"):
        call(lambda a: inner(a.reshape(1, 3))[0], ["b", ...], ["b", ...], (X,), mesh(x=8),
             axis_resources={"b": "x"}, lowering="manual")


def test_unreduced_axis_missing_from_out_axes_is_a_type_error():
    """2022's testReturnExtraMappedAxes."""
    with pytest.raises(TypeError, match=r"^One of xmap results has an out_axes specification of \['a', \.\.\.\], "
                                        r"but is actually mapped along more axes defined by this xmap call: b\. Output "
                                        r"0 of '<lambda>' varies along 'b'; reduce over 'b' first"):
        call(lambda x, y: x + y, (["a", ...], ["b", ...]), ["a", ...], (np.zeros((4, 3)), np.zeros((2, 3))))


def test_per_example_gradients_need_their_axis_in_out_axes():
    def vjp(w, x, g):
        return jax.vjp(lambda w, x: jax.numpy.sin(x @ w), w, x)[1](g)

    w, x, g = np.ones((3, 4), np.float32), np.ones((2, 3), np.float32), np.ones((2, 4), np.float32)
    with pytest.raises(TypeError, match=r"^One of xmap results has an out_axes specification of \{\}, but is actually "
                                        r"mapped along more axes defined by this xmap call: batch\. Output \[0\] of "
                                        r"'vjp'"):
        call(vjp, ({}, {0: "batch"}, {0: "batch"}), ({}, {0: "batch"}), (w, x, g))


def test_axis_resources_for_an_axis_no_input_carries():
    with pytest.raises(XmapError, match=r"^All axes that were assigned resources .* missing: \{'q'\}"):
        call(lambda a: a, ["b", ...], ["b", ...], (X,), mesh(x=8), axis_resources={"q": "x"})


def test_lower_refuses_tracers():
    f = pxla_mlir.xmap(lambda a: a, ["b", ...], ["b", ...])
    with pytest.raises(XmapError, match=r"lower\(\) was given traced values"):
        jax.jit(lambda v: f.lower(v))(X)


def test_unbound_axis_hint_and_tree_errors_speak_xmap():
    with pytest.raises(NameError, match=r"^unbound axis name: q\..*\(bound: 'i'\); name it in this xmap's in_axes "
                                        r"\(e\.g\. in_axes=\['q', \.\.\.\]\) or axis_sizes") as info:
        call(lambda a: lax.psum(a, "q"), ["i", ...], ["i", ...], (X,))
    assert "pmap" not in str(info.value)
    with pytest.raises(XmapError, match=r"^xmap in_axes specification must be a tree prefix") as info:
        call(lambda a: a, ((["i", ...], ["i", ...]),), ["i", ...], (X,))
    assert "PytreeLeaf" not in str(info.value) and "a leaf (an array or scalar)" in str(info.value)
