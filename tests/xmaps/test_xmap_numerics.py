"""xmap in all three lowerings (manual and vectorize in both sharding
dialects, Shardy and GSPMD) computes what nested jax.vmap(axis_name=...)
computes in the global view (numpy where vmap cannot express the collective),
on 8 CPU devices: meshes 8, 2x4, 4x2; named axes on one mesh axis, two mesh
axes, or vectorized; several named axes per argument; broadcasts; every
collective; pytrees; axis_sizes; donation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pxla_mlir
from pxla_mlir.jaxbridge.jax_internals import JAX_VERSION
from pxla_mlir.runtime.compile import KnownCrashError

# A lowering, with "-gspmd" for the GSPMD form of the SPMD lowerings (Shardy is the default).
LOWERINGS = ["replica", "manual", "manual-gspmd", "vectorize", "vectorize-gspmd"]
#: The sweeps over collectives and mesh layouts run the GSPMD forms in make test, the Shardy forms in the fast tier
#: too (the two differ only in their sharding constructs: tests/maps/test_shardy_form.py).
SHARDY_FAST = [pytest.param(l, marks=pytest.mark.slow) if l.endswith("-gspmd") else l for l in LOWERINGS]
RNG = np.random.default_rng(0)


def data(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def mesh(**shape):
    return pxla_mlir.Mesh.create(shape)


def check(got, want, tol=1e-5):
    got_l, got_t = jax.tree.flatten(got)
    want_l, want_t = jax.tree.flatten(want)
    assert got_t == want_t
    for g, w in zip(got_l, want_l):
        assert isinstance(g, jax.Array) and g.shape == np.shape(w), (g.shape, np.shape(w))
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


def form(lowering):
    """xmap's options for an entry of LOWERINGS."""
    name, _, shardings = lowering.partition("-")
    return {"lowering": name, "shardings": shardings or "sdy"}


def run(fun, in_axes, out_axes, args, m, lowering, **kw):
    with m:
        return pxla_mlir.xmap(fun, in_axes, out_axes, **form(lowering), **kw)(*args)


@pytest.mark.enable_checks
@pytest.mark.parametrize("lowering", LOWERINGS)
def test_one_mesh_axis(lowering):
    f = lambda a: a - lax.pmean(a, "batch")  # noqa: E731
    x = data(16, 3)
    got = run(f, ["batch", ...], ["batch", ...], (x,), mesh(x=8), lowering, axis_resources={"batch": "x"})
    check(got, jax.vmap(f, axis_name="batch")(x))
    assert got.sharding.spec == jax.sharding.PartitionSpec("x", None)


@pytest.mark.parametrize("lowering", SHARDY_FAST)
@pytest.mark.parametrize("shape", [(4, 8, 3), (2, 4, 3)], ids=["tiles-2x2", "tiles-1x1"])
def test_two_named_axes_on_a_2x4_mesh(lowering, shape):
    def f(b):
        return lax.psum(b, "n") + lax.axis_index("m") + 10.0 * lax.axis_index("n"), lax.pmax(b, ("m", "n"))

    x = data(*shape)
    got = run(f, {0: "m", 1: "n"}, ({0: "m", 1: "n"}, {}), (x,), mesh(x=2, y=4), lowering,
              axis_resources={"m": "x", "n": "y"})
    want = jax.vmap(jax.vmap(f, axis_name="n", out_axes=(0, None)), axis_name="m", out_axes=(0, None))(x)
    check(got, want)


def collectives(a):
    return {
        "pmean": lax.pmean(a, "batch"),
        "axis_index": lax.axis_index("batch") * jnp.ones_like(a),
        "all_gather": lax.all_gather(a, "batch"),
        "all_gather_1": lax.all_gather(a, "batch", axis=1),
        "all_gather_tiled": lax.all_gather(a, "batch", tiled=True),
        "shift": lax.ppermute(a, "batch", [(i, (i + 1) % 16) for i in range(16)]),
        "reverse": lax.ppermute(a, "batch", [(i, 15 - i) for i in range(16)]),
        "psum_pmax": lax.psum(a, "batch") * lax.pmax(a, "batch"),
        "pmin": lax.pmin(a, "batch"),
        "all_to_all": lax.all_to_all(a.reshape(16, 2), "batch", 0, 0, tiled=True),
    }


OUTS = {"pmean": ["batch", ...], "axis_index": ["batch", ...], "all_gather": {}, "all_gather_1": {},
        "all_gather_tiled": {}, "shift": ["batch", ...], "reverse": ["batch", ...], "psum_pmax": {}, "pmin": {},
        "all_to_all": ["batch", ...]}


@pytest.mark.parametrize("lowering", SHARDY_FAST)
@pytest.mark.parametrize("resources", [("x", "y"), ("y", "x"), "x", ()], ids=["xy", "yx", "x-and-local", "vectorized"])
def test_every_collective_over_two_mesh_axes(lowering, resources):
    x = data(16, 32)
    got = run(collectives, ["batch", ...], OUTS, (x,), mesh(x=2, y=4), lowering,
              axis_resources={"batch": resources} if resources else {})
    want = jax.vmap(collectives, axis_name="batch",
                    out_axes={k: 0 if isinstance(v, list) else None for k, v in OUTS.items()})(x)
    check(got, want)


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_mapped_and_vectorized_axes_on_a_4x2_mesh(lowering):
    def f(a):
        return (lax.psum(a, "v"), lax.psum(a * a, ("batch", "v")), lax.all_gather(a, "v"),
                lax.ppermute(a, "v", [(0, 1), (1, 2), (2, 0)]) + lax.axis_index("v"))

    x = data(8, 3, 5)  # batch=8 on x (tile 2), v=3 vectorized
    in_axes = {0: "batch", 1: "v"}
    out_axes = (["batch", ...], {}, ["batch", ...], {0: "v", 1: "batch"})
    got = run(f, in_axes, out_axes, (x,), mesh(x=4, y=2), lowering, axis_resources={"batch": "x"})
    inner = jax.vmap(f, in_axes=0, out_axes=(None, None, None, 0), axis_name="v")
    want = jax.vmap(inner, in_axes=0, out_axes=(0, None, 0, 1), axis_name="batch")(x)
    check(got, want, tol=1e-4)


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_broadcast_arguments_and_outputs(lowering):
    def f(a, w):
        return a * w, w + 1.0  # the second output does not vary along 'batch': broadcast

    x, w = data(8, 3), data(3)
    got = run(f, (["batch", ...], {}), (["batch", ...], ["batch", ...]), (x, w), mesh(x=8), lowering,
              axis_resources={"batch": "x"})
    check(got, jax.vmap(f, in_axes=(0, None), axis_name="batch")(x, w))


@pytest.mark.parametrize("lowering", [pytest.param("replica", marks=pytest.mark.slow), "vectorize"])
def test_key_arrays_mapped_and_broadcast(lowering):
    """A key array's buffer has its key data as a trailing dimension: not one of the named layout's."""
    def f(a, k, ks):
        return a + jax.random.normal(k, ()), jax.random.fold_in(ks, 3)

    a, k = data(8), jax.random.key(0)
    ks = jax.random.split(k, 8)
    got = run(f, (["batch", ...], [...], ["batch", ...]), (["batch", ...],) * 2, (a, k, ks), mesh(x=8), lowering,
              axis_resources={"batch": "x"})
    want = jax.vmap(f, in_axes=(0, None, 0))(a, k, ks)
    check(got[0], want[0])
    np.testing.assert_array_equal(jax.random.key_data(got[1]), jax.random.key_data(want[1]))


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_pytrees_and_axis_sizes(lowering):
    def f(params, batch):
        k = lax.axis_index("k").astype(jnp.float32)
        return {"loss": lax.pmean(jnp.sum(params["w"] * batch), "b"), "per_k": params["bias"] * k}

    params = {"w": data(3), "bias": data(3)}
    batch = data(8, 3)
    in_axes = ({"w": {}, "bias": {}}, ["b", ...])
    out_axes = {"loss": {}, "per_k": ["k", ...]}
    got = run(f, in_axes, out_axes, (params, batch), mesh(x=2, y=4), lowering, axis_sizes={"k": 4},
              axis_resources={"b": "y", "k": "x"})
    want = jax.vmap(jax.vmap(f, in_axes=(None, 0), out_axes={"loss": None, "per_k": None}, axis_name="b"),
                    in_axes=(None, None), out_axes={"loss": None, "per_k": 0}, axis_name="k", axis_size=4)(params, batch)
    check(got, want)


@pytest.mark.enable_checks
@pytest.mark.parametrize("lowering", SHARDY_FAST)
def test_collectives_inside_control_flow(lowering):
    def f(a):
        def step(c, _):
            return c + lax.psum(c, "batch") * 0.1, lax.pmax(c, "batch")

        c, ys = lax.scan(step, a, None, length=3)
        d = lax.cond(a.sum() > 0, lambda v: lax.pmean(v, "batch"), lambda v: v * 2, a)
        return c, ys, d

    x = data(16, 3)
    got = run(f, ["batch", ...], (["batch", ...], {}, ["batch", ...]), (x,), mesh(x=8), lowering,
              axis_resources={"batch": "x"})
    check(got, jax.vmap(f, axis_name="batch", out_axes=(0, None, 0))(x), tol=1e-4)


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_two_named_axes_in_one_collective_against_numpy(lowering):
    """vmap cannot gather or permute over two names; numpy is the oracle."""
    def f(b):
        return (lax.all_gather(b, ("n", "m")), lax.ppermute(b, ("n", "m"), [(i, (i + 3) % 8) for i in range(8)]),
                lax.axis_index(("n", "m")) * jnp.ones_like(b))

    x = data(2, 4, 3)  # m=2 on x, n=4 on y
    got = run(f, {0: "m", 1: "n"}, ({}, {0: "m", 1: "n"}, {0: "m", 1: "n"}), (x,), mesh(x=2, y=4), lowering,
              axis_resources={"m": "x", "n": "y"})
    linear = lambda m_, n_: n_ * 2 + m_  # noqa: E731  ('n', 'm'): n major
    gathered = np.stack([x[m_, n_] for n_ in range(4) for m_ in range(2)])
    shifted = np.zeros_like(x)
    for m_ in range(2):
        for n_ in range(4):
            t = (linear(m_, n_) + 3) % 8
            shifted[t % 2, t // 2] = x[m_, n_]
    index = np.array([[linear(m_, n_) for n_ in range(4)] for m_ in range(2)], np.float32)[..., None] * np.ones(3)
    check(got, (gathered, shifted, index))


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_donated_argument(lowering):
    f = lambda a: a * 2.0  # noqa: E731
    x = data(8, 4)
    with mesh(x=8):
        g = pxla_mlir.xmap(f, ["batch", ...], ["batch", ...], axis_resources={"batch": "x"}, donate_argnums=0,
                           **form(lowering))
        assert "tf.aliasing_output = 0" in g.lower(x).as_text()
        first = g(x)
        second = g(first)
    assert first.is_deleted()
    check(second, x * 4)


ODD_EVEN = [list(range(0, 16, 2)), list(range(1, 16, 2))]


def grouped(a):
    return {
        "scatter": lax.psum_scatter(a, "b", scatter_dimension=0, tiled=True),
        "scatter_untiled": lax.psum_scatter(a[:16], "b", scatter_dimension=0, tiled=False),
        "scatter_groups": lax.psum_scatter(a, "b", scatter_dimension=0, tiled=True, axis_index_groups=ODD_EVEN),
        "pbroadcast": lax.pbroadcast(a, "b", 3),
        "psum_groups": lax.psum(a, "b", axis_index_groups=[list(range(8)), list(range(8, 16))]),
        "pmax_groups": lax.pmax(a, "b", axis_index_groups=ODD_EVEN),
        "pmin_groups": lax.pmin(a, "b", axis_index_groups=ODD_EVEN),
        "all_gather_groups": lax.all_gather(a, "b", axis_index_groups=ODD_EVEN),
    }


def grouped_reference(x):
    """NumPy: vmap cannot run collectives with axis_index_groups."""
    total, halves = x.sum(0), [x[i % 2::2] for i in range(2)]
    return {
        "scatter": total.reshape(16, 2), "scatter_untiled": total[:16],
        "scatter_groups": np.stack([halves[i % 2].sum(0).reshape(8, 4)[i // 2] for i in range(16)]),
        "pbroadcast": np.broadcast_to(x[3], x.shape),
        "psum_groups": np.repeat(np.stack([x[:8].sum(0), x[8:].sum(0)]), 8, axis=0),
        "pmax_groups": np.stack([halves[i % 2].max(0) for i in range(16)]),
        "pmin_groups": np.stack([halves[i % 2].min(0) for i in range(16)]),
        "all_gather_groups": np.stack([halves[i % 2] for i in range(16)]),
    }


@pytest.mark.parametrize("lowering", SHARDY_FAST)
@pytest.mark.parametrize("resources", [("y", "x"), "x", ()], ids=["yx", "x-and-local", "vectorized"])
def test_psum_scatter_pbroadcast_and_axis_index_groups(lowering, resources):
    x = data(16, 32)
    got = run(grouped, ["b", ...], {k: ["b", ...] for k in grouped_reference(x)}, (x,), mesh(x=2, y=4), lowering,
              axis_resources={"b": resources} if resources else {})
    check(got, grouped_reference(x))


def control_flow_tables(a):
    """Collectives whose rewrites need constant tables, inside scan, cond and while."""
    def step(c, _):
        return (lax.ppermute(c, "b", [(i, (i + 3) % 16) for i in range(16)])
                + lax.psum(c, "b", axis_index_groups=ODD_EVEN) * 0.01,
                lax.all_to_all(c.reshape(16, 2), "b", 0, 0, tiled=True))

    c, ys = lax.scan(step, a, None, length=2)
    d = lax.cond(a.sum() > 0, lambda v: lax.all_gather(v, "b", axis_index_groups=ODD_EVEN)[1], lambda v: v, a)
    e = lax.while_loop(lambda t: t[1] < 2, lambda t: (lax.pbroadcast(t[0], "b", 5) + 1, t[1] + 1), (a, 0))[0]
    return c, ys, d, e


def control_flow_reference(x):
    c, ys = x, []
    for _ in range(2):
        ys.append(np.stack([c.reshape(16, 16, 2)[:, g, :] for g in range(16)]))
        c = c[[(i - 3) % 16 for i in range(16)]] + np.stack([c[i % 2::2].sum(0) for i in range(16)]) * 0.01
    d = np.stack([x[i % 2::2][1] if x[i].sum() > 0 else x[i] for i in range(16)])
    e = x
    for _ in range(2):
        e = np.broadcast_to(e[5], e.shape) + 1
    return c, np.stack(ys, 1), d, e


@pytest.mark.parametrize("lowering", SHARDY_FAST)
@pytest.mark.parametrize("resources", [("x", "y"), pytest.param("x", marks=pytest.mark.slow)],
                         ids=["xy", "x-and-local"])
def test_collectives_needing_constant_tables_inside_control_flow(lowering, resources):
    x = data(16, 32)
    got = run(control_flow_tables, ["b", ...], ["b", ...], (x,), mesh(x=2, y=4), lowering,
              axis_resources={"b": resources})
    check(got, control_flow_reference(x), tol=1e-4)


@pytest.mark.parametrize("lowering", ["replica", "manual", "vectorize"])
def test_an_xmap_donating_a_split_argument_to_a_replicated_result_of_its_type(lowering):
    """The argument split over the mesh and the result whole on every device have one type but other
    buffers per device: it is donated, not aliased (XLA refused the alias at compile time)."""
    x = np.arange(8 * 8, dtype=np.int32).reshape(8, 8)
    with pxla_mlir.Mesh.create({"x": 8}):
        f = pxla_mlir.xmap(lambda a: jnp.broadcast_to(lax.psum(a, "batch"), (8, 8)), (["batch", ...],), [...],
                           lowering=lowering, axis_resources={"batch": "x"}, donate_argnums=0)
        got = f(jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(x.sum(0), (8, 8)))


@pytest.mark.parametrize("lowering", ["replica", "vectorize"])
def test_psum_of_complex_outer_products(lowering):
    """pxla-contract-batch-sums read the complex zero it starts from and
    stopped the pipeline with an internal error; it now leaves the sum."""
    rng = np.random.default_rng(0)
    u = (rng.standard_normal((16, 3)) + 1j * rng.standard_normal((16, 3))).astype(np.complex64)
    v = (rng.standard_normal((16, 4)) - 2j).astype(np.complex64)
    outer = lambda a, b: lax.psum(jnp.einsum("i,j->ij", a, b), "batch")  # noqa: E731
    with pxla_mlir.Mesh.create({"x": 8}):
        got = pxla_mlir.xmap(outer, (["batch", ...], ["batch", ...]), {}, axis_resources={"batch": "x"},
                             lowering=lowering)(u, v)
    want = jax.vmap(outer, axis_name="batch", out_axes=None)(u, v)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


# -- zero-size axes -----------------------------------------------------------------------------

def _empty_collectives(v):
    return {"scaled": v * 2 + lax.axis_index("i"), "sum": lax.psum(v, "i"), "max": lax.pmax(v, "i"),
            "gathered": lax.all_gather(v, "i"), "tiled": lax.all_gather(v, "i", tiled=True)}


EMPTY_OUT_AXES = {"scaled": ["i", ...], "sum": [...], "max": [...], "gathered": ["i", ...], "tiled": ["i", ...]}


@pytest.mark.enable_checks
@pytest.mark.parametrize("lowering", SHARDY_FAST)
@pytest.mark.parametrize("resources", [("x", "y"), "x", ()], ids=["xy", "x", "vectorized"])
def test_a_named_axis_of_size_zero(lowering, resources):
    """Each device gets a tile of zero elements; reductions over it give their identities, as jax.vmap does."""
    x = np.zeros((0, 3), np.int32)
    got = run(_empty_collectives, ["i", ...], EMPTY_OUT_AXES, (x,), mesh(x=2, y=4), lowering,
              axis_resources={"i": resources})
    want = jax.vmap(_empty_collectives, axis_name="i", out_axes={"scaled": 0, "sum": None, "max": None,
                                                                  "gathered": 0, "tiled": 0})(x)
    check(got, want, tol=0)
    np.testing.assert_array_equal(np.asarray(got["max"]), np.full(3, np.iinfo(np.int32).min))


@pytest.mark.parametrize("lowering", ["replica", "manual", "vectorize"])
def test_a_nested_xmap_over_a_named_axis_of_size_zero(lowering):
    def inner(w):
        return w + lax.psum(w, "j") + lax.pmean(w, "i")

    def outer(u):
        return pxla_mlir.xmap(inner, ["j", ...], ["j", ...], axis_resources={"j": "y"})(u)

    x = data(4, 0, 3)  # i over x, j (size 0) over y
    got = run(outer, ["i", ...], ["i", ...], (x,), mesh(x=2, y=4), lowering, axis_resources={"i": "x"})
    check(got, jax.vmap(jax.vmap(inner, axis_name="j"), axis_name="i")(x), tol=0)


@pytest.mark.parametrize("lowering", LOWERINGS)
@pytest.mark.parametrize("alone", [True, False], ids=["one-result", "with-collectives"])
def test_zero_size_inner_dimensions(lowering, alone):
    """XLA folds a program whose only result has zero elements to a constant of the global shape on every device;
    it still comes back laid out as out_axes say."""
    def f(a, b):
        return (a * 2,) if alone else (a * 2, lax.psum(b, "i"), lax.all_gather(b, "i"))

    a, b = np.zeros((16, 0), np.float32), np.zeros((16, 0, 2), np.int32)
    out_axes = (["i", ...], [...], ["i", ...])[:1 if alone else 3]
    if JAX_VERSION[:2] == (0, 11) and form(lowering) in ({"lowering": "manual", "shardings": "sdy"},
                                                           {"lowering": "vectorize", "shardings": "sdy"}):
        with pytest.raises(KnownCrashError, match=r"argument 0 has no elements, .* lower the map with shardings=\"gspmd\""):
            run(f, (["i", ...], ["i", ...]), out_axes, (a, b), mesh(x=8), lowering, axis_resources={"i": "x"})
        lowering += "-gspmd"  # what the message advises
    got = run(f, (["i", ...], ["i", ...]), out_axes, (a, b), mesh(x=8), lowering, axis_resources={"i": "x"})
    check(got, jax.vmap(f, axis_name="i", out_axes=(0, None, 0)[:len(out_axes)])(a, b), tol=0)
    assert [s.data.shape for s in got[0].addressable_shards] == [(2, 0)] * 8
    check(got[0] + 1, a + 1, tol=0)  # a result is an ordinary array for the next computation


@pytest.mark.parametrize("lowering", LOWERINGS)
def test_named_contraction_in_place_of_pdot(lowering):
    """jax dropped lax.pdot and einsum's named specs; the guide's replacement, a
    psum of the product over the contracted name, is dot_general's contraction,
    with a batch name and the contracted name (two per device) on the mesh."""
    x, y = data(2, 3, 8), data(2, 8, 5)  # b, i, j / b, j, k
    got = run(lambda a, c: lax.psum(a * c, "j"), (["b", "i", "j"], ["b", "j", "k"]), ["b", "i", "k"], (x, y),
              mesh(x=2, y=4), lowering, axis_resources={"b": "x", "j": "y"})
    check(got, lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))), tol=1e-4)
