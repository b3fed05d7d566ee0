"""Inputs real jax.pmap code passes: typed PRNG keys, float0, keyword and
static arguments, device lists, axis sizes, zero-size arrays, donation, and
psum over groups of different sizes. jax.pmap (jit of shard_map in jax
0.10.2) is the oracle wherever it runs; NumPy where it does not."""

import functools
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from jax import lax

import pxla_mlir

MODES = ["replica", "partition"]


def same_error(exc, call_ours, call_jax):
    """Both raise ``exc``; returns (ours, jax's) messages."""
    with pytest.raises(exc) as ours:
        call_ours()
    with pytest.raises(exc) as theirs:
        call_jax()
    return str(ours.value), str(theirs.value)


# -- typed PRNG keys and other extended dtypes -------------------------------------------------------

@pytest.mark.parametrize("mode", [pytest.param("replica", marks=pytest.mark.slow), "partition"])  # replica: 2-4 s
def test_typed_keys_in_and_out_match_jax_pmap(mode):
    keys = jax.random.split(jax.random.key(0), 8)

    def f(k):
        return jax.random.normal(k, (2,)), jax.random.split(k, 3)

    got, want = pxla_mlir.pmap(f, mode=mode)(keys), jax.pmap(f)(keys)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].dtype == want[1].dtype and got[1].shape == want[1].shape == (8, 3)
    np.testing.assert_array_equal(jax.random.key_data(got[1]), jax.random.key_data(want[1]))
    # Keys that came out of a pmap go back in (the cached path), and draw the same numbers.
    again = pxla_mlir.pmap(lambda k: jax.random.uniform(k[0]), mode=mode)
    np.testing.assert_array_equal(again(got[1]), jax.pmap(lambda k: jax.random.uniform(k[0]))(want[1]))


def test_keys_in_pytrees_broadcast_and_rbg():
    keys = jax.random.split(jax.random.key(1), 8)
    x = np.arange(8.0, dtype=np.float32)

    def f(tree, shared):
        return tree["x"] + jax.random.uniform(tree["k"]) + jax.random.uniform(shared)

    args = ({"k": keys, "x": x}, jax.random.key(7))
    np.testing.assert_array_equal(pxla_mlir.pmap(f, in_axes=(0, None))(*args), jax.pmap(f, in_axes=(0, None))(*args))
    rbg = jax.random.split(jax.random.key(3, impl="rbg"), 8)
    np.testing.assert_array_equal(pxla_mlir.pmap(lambda k: jax.random.bits(k, (2,)))(rbg),
                                  jax.pmap(lambda k: jax.random.bits(k, (2,)))(rbg))


@pytest.mark.slow  # about 2.5 s of CPU with jax warm: several nested pmaps compiled
def test_keys_through_nested_pmaps_and_in_axes_1():
    keys = jax.random.split(jax.random.key(2), 8).reshape(2, 4)
    draw = lambda k: jax.random.normal(k, (3,))  # noqa: E731
    got = pxla_mlir.pmap(pxla_mlir.pmap(draw, "j"), "i")(keys)
    np.testing.assert_array_equal(got, jax.vmap(jax.vmap(draw))(keys))
    column = lambda k: jax.vmap(draw)(k)  # noqa: E731  (4 keys per shard)
    got = pxla_mlir.pmap(column, in_axes=1, out_axes=1)(keys.T)
    np.testing.assert_array_equal(got, jax.vmap(column, in_axes=1, out_axes=1)(keys.T))


def test_a_key_of_the_wrong_shape_is_a_type_error():
    compiled = pxla_mlir.pmap(lambda k: jax.random.uniform(k)).lower(jax.random.split(jax.random.key(0), 8)).compile()
    with pytest.raises(TypeError, match=r"compiled with key<fry>\[8\] and called with key<fry>\[4\]"):
        compiled(jax.random.split(jax.random.key(0), 4))


# -- float0 -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_float0_inputs_and_outputs_as_jax_pmap(mode):
    x, z = np.ones(8, np.float32), np.zeros(8, jax.dtypes.float0)
    f = lambda a, t: (a * 2, t)  # noqa: E731
    got, want = pxla_mlir.pmap(f, mode=mode)(x, z), jax.pmap(f)(x, z)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].dtype == want[1].dtype == jax.dtypes.float0 and got[1].shape == (8,)
    assert type(got[1]) is type(want[1])  # a host value, as jax returns it
    unused = pxla_mlir.pmap(lambda a, t: a + 1, mode=mode)(x, z)
    np.testing.assert_array_equal(unused, x + 1)


def test_float0_tangents_and_cotangents_of_integer_inputs():
    xi = np.arange(8, dtype=np.int32)
    xf = np.arange(8, dtype=np.float32)
    f = lambda i, v: (i * 2, v * i)  # noqa: E731
    tangents = (np.zeros(8, jax.dtypes.float0), np.ones(8, np.float32))
    got = jax.jvp(pxla_mlir.pmap(f), (xi, xf), tangents)
    want = jax.jvp(jax.pmap(f), (xi, xf), tangents)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g, dtype=np.float32) if g.dtype != jax.dtypes.float0 else g.shape,
                                      np.asarray(w, dtype=np.float32) if w.dtype != jax.dtypes.float0 else w.shape)
    inner = pxla_mlir.pmap(lambda i, v: jax.grad(lambda a, b: (a * b).sum(), argnums=(0, 1), allow_int=True)(i, v))
    ct_int, ct_float = inner(xi, xf)
    assert ct_int.dtype == jax.dtypes.float0 and ct_int.shape == (8,)
    np.testing.assert_array_equal(ct_float, xi.astype(np.float32))
    keys = jax.random.split(jax.random.key(0), 8)
    _, vjp = jax.vjp(pxla_mlir.pmap(lambda k, v: jax.random.uniform(k) * v), keys, xf)
    ct_keys, ct_v = vjp(np.ones(8, np.float32))
    assert ct_keys.dtype == jax.dtypes.float0 and ct_keys.shape == (8,)
    np.testing.assert_allclose(ct_v, jax.pmap(jax.random.uniform)(keys))


# -- keyword arguments ------------------------------------------------------------------------------------

def test_keyword_arguments_are_mapped_over_axis_0_as_jax_pmap():
    x, y = np.arange(24.0, dtype=np.float32).reshape(8, 3), np.arange(8.0, dtype=np.float32)
    cases = [  # (function, pmap options, positional args, keyword args)
        (lambda a, b: a * b, {}, (x,), {"b": x}),
        (lambda a, b=None: a["u"] + b["v"], {}, ({"u": y},), {"b": {"v": y}}),
        (lambda a, b: a.sum() + b, dict(in_axes=1), (x.T,), {"b": y}),  # positional on axis 1, keyword on 0
        (lambda a, b: a + b, dict(in_axes=(None,)), (np.float32(2),), {"b": y}),
        (lambda **kw: kw["p"] * kw["q"], {}, (), {"p": y, "q": y}),
    ]
    for f, opts, args, kwargs in cases:
        want = jax.pmap(f, **opts)(*args, **kwargs)
        got = pxla_mlir.pmap(f, **opts)(*args, **kwargs)
        np.testing.assert_array_equal(got, want)
    with_psum = lambda a, b: lax.psum(a * b, "i")  # noqa: E731
    np.testing.assert_array_equal(pxla_mlir.pmap(with_psum, "i")(y, b=y), jax.pmap(with_psum, "i")(y, b=y))
    lowered = pxla_mlir.pmap(lambda a, b: a - b).lower(y, b=y)
    np.testing.assert_array_equal(lowered.compile()(y, b=2 * y), -y)


def test_keyword_argument_errors_as_jax_pmap():
    y = np.ones(8, np.float32)
    ours, theirs = same_error(ValueError, lambda: pxla_mlir.pmap(lambda a, b: a, in_axes=(0, 1))(y, b=y),
                              lambda: jax.pmap(lambda a, b: a, in_axes=(0, 1))(y, b=y))
    for msg in (ours, theirs):
        assert msg.startswith("pmap in_axes specification must be a tree prefix of the corresponding value") or \
            "pytree structure error" in msg
        assert "each argument passed by keyword is mapped over its leading axis" in msg
    ours, theirs = same_error(ValueError, lambda: pxla_mlir.pmap(lambda a, n: a * n, static_broadcasted_argnums=1)(y, n=2),
                              lambda: jax.pmap(lambda a, n: a * n, static_broadcasted_argnums=1)(y, n=2))
    assert ours == theirs
    assert "All static broadcasted arguments must be passed positionally" in ours
    with pytest.raises(ValueError, match=r"kwargs\['s'\] with shape \(\).*keyword arguments are always mapped"):
        pxla_mlir.pmap(lambda a, s: a * s)(y, s=np.float32(2))


def test_keyword_arguments_are_never_donated():
    f = pxla_mlir.pmap(lambda a, b: a + b, donate_argnums=(0, 1))
    x = f(np.ones(8, np.float32), b=np.ones(8, np.float32))  # an array already laid out as f's inputs
    y = f(np.ones(8, np.float32), b=np.ones(8, np.float32))
    out = f(x, b=y)
    assert x.is_deleted() and not y.is_deleted()
    np.testing.assert_array_equal(out, 4 * np.ones(8))


# -- static arguments -------------------------------------------------------------------------------------

def test_unhashable_static_argument_as_jax_pmap():
    ours, theirs = same_error(ValueError,
                              lambda: pxla_mlir.pmap(lambda a, s: a, static_broadcasted_argnums=1)(np.ones(8), [1]),
                              lambda: jax.pmap(lambda a, s: a, static_broadcasted_argnums=1)(np.ones(8), [1]))
    assert ours == theirs


def test_static_arguments_on_bound_methods():
    class Scaled:
        def __init__(self, scale):
            self.scale = scale

        @functools.partial(pxla_mlir.pmap, static_broadcasted_argnums=0)
        def apply(self, x):
            return x * self.scale

        @functools.partial(jax.pmap, static_broadcasted_argnums=0)
        def apply_jax(self, x):
            return x * self.scale

        def power(self, x, n):
            return x ** n * self.scale

    m, x = Scaled(3.0), np.arange(8.0, dtype=np.float32)
    np.testing.assert_array_equal(m.apply(x), m.apply_jax(x))
    np.testing.assert_array_equal(Scaled(5.0).apply(x), 5 * x)  # another instance: another static value
    np.testing.assert_array_equal(m.apply.lower(x).compile()(x), 3 * x)
    bound = pxla_mlir.pmap(m.power, static_broadcasted_argnums=1)
    np.testing.assert_array_equal(bound(x, 2), jax.pmap(m.power, static_broadcasted_argnums=1)(x, 2))
    jitted = pxla_mlir.jit(Scaled.power, static_argnums=(0, 2))
    np.testing.assert_array_equal(jitted(m, x, 3), m.power(x, 3))


def test_static_and_donated_argnums_must_be_ints():
    with pytest.raises(TypeError, match=r"pmap donate_argnums must be an int or a sequence of ints \(indices of "
                                        r"positional arguments\), got 'a'"):
        pxla_mlir.pmap(lambda x: x, donate_argnums="a")
    with pytest.raises(TypeError, match=r"static_broadcasted_argnums must be an int or a sequence of ints"):
        pxla_mlir.pmap(lambda x: x, static_broadcasted_argnums=[0.5])
    with pytest.raises(ValueError, match=r"`static_argnums` \[1\] and `donate_argnums` \[1\] cannot intersect"):
        pxla_mlir.pmap(lambda x, s: x, static_broadcasted_argnums=1, donate_argnums=1)
    with pytest.raises(TypeError, match="pmap requires a callable to map, got 3"):
        pxla_mlir.pmap(3)
    with pytest.raises(TypeError, match=r"xmap donate_argnums must be an int or a sequence of ints"):
        pxla_mlir.xmap(lambda x: x, in_axes=["m", ...], out_axes=["m", ...], donate_argnums="a")


def test_out_of_range_donate_argnums_are_ignored_not_wrapped():
    x = np.ones((8, 2), np.float32)
    for argnum, donated in ((3, False), (-1, True), (-2, False)):
        assert pxla_mlir.pmap(lambda a: a, donate_argnums=argnum).lower(x).args_info[0][0].donated is donated
        with pxla_mlir.Mesh.create({"x": 8}):
            xm = pxla_mlir.xmap(lambda a: a, in_axes=["m", ...], out_axes=["m", ...], axis_resources={"m": "x"},
                                donate_argnums=argnum)
            assert xm.lower(x).args_info[0][0].donated is donated


# -- devices and axis sizes ------------------------------------------------------------------------------

def test_invalid_device_lists_are_value_errors_up_front():
    ours, theirs = same_error(ValueError, lambda: pxla_mlir.pmap(lambda x: x, devices=[]),
                              lambda: jax.pmap(lambda x: x, devices=[]))
    assert ours.startswith(theirs)
    cases = [
        ([jax.devices()[0]] * 8, r"lists cpu:0 twice \(devices\[0\] and devices\[1\]\); each device runs one shard, so "
                                 r"pass distinct devices"),
        (["cpu"] * 8, r"must hold jax devices \(from jax.devices\(\)\), but devices\[0\] is 'cpu' of type str; use "
                      r"e.g. jax.devices\('cpu'\)\[:8\]"),
        (5, r"must be a sequence of jax devices"),
        ([0, 1], r"must hold jax devices \(from jax.devices\(\)\), but devices\[0\] is 0 of type int"),
    ]
    for devices, message in cases:
        with pytest.raises(ValueError, match=r"^'devices' argument to pmap " + message):
            pxla_mlir.pmap(lambda x: x, devices=devices)
    with pytest.raises(ValueError, match="lists cpu:1 twice"):
        pxla_mlir.jit(lambda x: x, devices=[jax.devices()[1]] * 2)


_TWO_REPLICAS = """module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    return %a : tensor<3xf32>
  }
}
"""


def _xmap_on(mesh):
    with mesh:
        pxla_mlir.xmap(lambda a: a, in_axes=["m", ...], out_axes=["m", ...], axis_resources={"m": "x"})(
            np.ones((2, 3), np.float32))


@pytest.mark.parametrize("entry, message", [
    (lambda d: pxla_mlir.pmap(lambda x: x, devices=d), "'devices' argument to pmap lists cpu:1 twice"),
    (lambda d: pxla_mlir.jit(lambda x: x, devices=d), "'devices' argument to pxla_mlir.jit lists cpu:1 twice"),
    (lambda d: pxla_mlir.load(_TWO_REPLICAS, devices=d), "'devices' argument to pxla_mlir.load lists cpu:1 twice"),
    (lambda d: _xmap_on(pxla_mlir.Mesh(np.array(d), ("x",))), "device 1 appears more than once in the mesh"),
    (lambda d: _xmap_on(jax.sharding.Mesh(np.array(d), ("x",))), "device 1 appears more than once in the mesh"),
], ids=["pmap", "jit", "load", "xmap", "xmap-jax-mesh"])
def test_a_device_listed_twice_is_refused_before_anything_compiles(entry, message):
    # XLA compiles and launches on [d, d], then fails reading the results ("Device 0 not unique") or returns garbage.
    from pxla_mlir.errors import PxlaUserError

    with pytest.raises(ValueError) as e:
        entry([jax.devices()[1]] * 2)
    assert str(e.value).startswith(message) and isinstance(e.value, PxlaUserError), str(e.value)
    assert "(e.g. jax.devices()[:2]" in str(e.value) or "np.array(jax.devices()[:2]).reshape(2)" in str(e.value)


@pytest.mark.parametrize("size, exc", [(2.5, TypeError), ("3", TypeError), (True, TypeError), (0, ValueError),
                                       (-2, ValueError)])
def test_axis_size_is_validated(size, exc):
    with pytest.raises(exc, match=r"pmap axis_size must be a positive int, got " + repr(size).replace(".", r"\.")):
        pxla_mlir.pmap(lambda x: x, in_axes=None, axis_size=size)


def test_axis_size_as_numpy_int():
    out = pxla_mlir.pmap(lambda x: x + lax.axis_index("i"), "i", in_axes=None, axis_size=np.int64(4))(np.float32(1))
    np.testing.assert_array_equal(out, [1, 2, 3, 4])


# -- zero-size arrays ------------------------------------------------------------------------------------

def test_zero_size_mapped_axis_is_a_clear_error():
    with pytest.raises(ValueError, match=r"pmap cannot map an axis of size 0: args\[0\] has shape \(0, 3\) and axis 0 "
                                         r"is to be mapped"):
        pxla_mlir.pmap(lambda x: x)(np.ones((0, 3)))


@pytest.mark.parametrize("mode", MODES)
def test_zero_size_inner_dimensions_as_jax_pmap(mode):
    x = np.ones((8, 0), np.float32)
    f = lambda a: (a * 2, lax.psum(a, "i"), a.sum())  # noqa: E731
    got, want = pxla_mlir.pmap(f, "i", mode=mode)(x), jax.pmap(f, "i")(x)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    nested = pxla_mlir.pmap(pxla_mlir.pmap(lambda a: a + 1, "j"), "i", mode=mode)(np.ones((2, 4, 0), np.float32))
    assert nested.shape == (2, 4, 0)


# -- what a body returns ---------------------------------------------------------------------------------

def test_a_body_returning_a_string_is_a_type_error():
    with pytest.raises(TypeError, match=r"^Value 'done' of type str is not a valid JAX type: the function 'body' "
                                        r"returned it as output\[1\]\. Return arrays"):
        def body(x):
            return x, "done"

        pxla_mlir.pmap(body)(np.ones(8))


# -- donation: deleted and reused arrays (each case in its own process: jaxlib would segfault) -----------

_DONATION_SCRIPT = textwrap.dedent("""
    import numpy as np, jax, pxla_mlir
    def report(name, fn):
        try:
            out = fn()
            print(name, "ok", np.asarray(out).ravel()[:3].tolist())
        except Exception as e:
            print(name, type(e).__name__, str(e).splitlines()[0])
    g = pxla_mlir.pmap(lambda a: a + 1, donate_argnums=0, mode=MODE)
    x = g(np.zeros(8, np.float32))
    y = g(x)
    print("donated", x.is_deleted(), y.is_deleted())
    report("reuse", lambda: g(x))
    report("reuse-again", lambda: g(x))
    two = pxla_mlir.pmap(lambda a, b: a + b, donate_argnums=(0, 1), mode=MODE)
    z = two(np.ones(8, np.float32), np.ones(8, np.float32))
    report("twice", lambda: two(z, z))
    one = pxla_mlir.pmap(lambda a, b: a + b, donate_argnums=0, mode=MODE)
    w = one(np.ones(8, np.float32), np.ones(8, np.float32))
    report("donated-and-plain", lambda: one(w, w))
    d = one(np.ones(8, np.float32), np.ones(8, np.float32))
    d.delete()
    report("deleted", lambda: pxla_mlir.pmap(lambda a: a * 2, mode=MODE)(d))
    out_of_range = pxla_mlir.pmap(lambda a, b: a - b, donate_argnums=(3, -5), mode=MODE)
    v = one(np.ones(8, np.float32), np.ones(8, np.float32))
    report("out-of-range", lambda: out_of_range(v, np.ones(8, np.float32)))
    print("kept", v.is_deleted())
    last = pxla_mlir.pmap(lambda a, b: a - b, donate_argnums=-1, mode=MODE)
    u, t = one(np.ones(8, np.float32), np.ones(8, np.float32)), one(np.ones(8, np.float32), np.ones(8, np.float32))
    report("negative", lambda: last(u, t))
    print("negative-donated", u.is_deleted(), t.is_deleted())
""")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.subprocess
def test_donated_and_deleted_arrays_raise_instead_of_crashing(mode):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    proc = subprocess.run([sys.executable, "-c", f"MODE = {mode!r}\n" + _DONATION_SCRIPT], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert lines["donated"] == "True False"
    for case in ("reuse", "reuse-again", "deleted"):
        assert lines[case].startswith("RuntimeError Array has been deleted with shape=float32[8]: argument 0 was "
                                      "donated to an earlier call (donate_argnums) or deleted"), lines[case]
    for case in ("twice", "donated-and-plain"):
        assert lines[case].startswith("RuntimeError Attempt to use a buffer that was previously donated in the same "
                                      "call: the array donated as argument 0 is also argument 1"), lines[case]
    assert lines["out-of-range"] == "ok [1.0, 1.0, 1.0]" and lines["kept"] == "False"  # ignored, as jax.pmap does
    assert lines["negative"] == "ok [0.0, 0.0, 0.0]" and lines["negative-donated"] == "False True"


# -- psum over groups of different sizes, and several values on a size-1 axis ------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_psum_over_groups_of_different_sizes(mode):
    x = np.arange(8.0, dtype=np.float32)
    groups = [[0, 1, 2], [3, 4, 5, 6, 7]]
    f = lambda v: (lax.psum(v, "i", axis_index_groups=groups), lax.pmax(v, "i", axis_index_groups=groups))  # noqa
    got, want = pxla_mlir.pmap(f, "i", mode=mode)(x), jax.pmap(f, "i")(x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[0], [3, 3, 3, 25, 25, 25, 25, 25])
    inner = pxla_mlir.pmap(lambda v: lax.psum(v, "j", axis_index_groups=[[0], [1, 2, 3]]), "j")
    nested = pxla_mlir.pmap(inner, "i", mode=mode)(x.reshape(2, 4))
    rows = x.reshape(2, 4)
    np.testing.assert_array_equal(nested, np.stack([[r[0], *[r[1:].sum()] * 3] for r in rows]))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 8])
def test_psum_of_several_values_of_different_rank(mode, n):
    f = lambda a: lax.psum((a, a.sum(), a[0] * 2), "i")  # noqa: E731
    x = np.arange(n * 3.0, dtype=np.float32).reshape(n, 3)
    got, want = pxla_mlir.pmap(f, "i", mode=mode)(x), jax.pmap(f, "i")(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("mode", ["replica", "partition"])
def test_host_views_that_share_memory_are_placed_as_jax_pmap_places_them(mode):
    """np.broadcast_to views (stride 0, as a replicated optimizer state often is) give pieces that share memory,
    which jaxlib cannot force-copy ("bad_function_call"); strided views too."""
    f = pxla_mlir.pmap(lambda v: v * 2, "i", mode=mode)
    row = np.arange(3, dtype=np.float32)
    inputs = [np.broadcast_to(row, (8, 3)), np.broadcast_to(np.int32(7), (8,)),
              np.arange(48, dtype=np.float32).reshape(8, 6)[:, ::2], np.broadcast_to(row[None, :, None], (8, 3, 2))]
    for x in inputs:
        for _ in range(2):  # the Python path, then the cached call
            np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(jax.pmap(lambda v: v * 2)(x)))
