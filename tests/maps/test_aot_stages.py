"""jax's AOT stages as jax gives them: Lowered and Compiled are jax.stages instances with in_avals and
out_info, Compiled.call runs, and pxla_mlir.jit has trace and eval_shape, checked against jax.jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pxla_mlir


def _step(params, x, *, scale=2.0):
    y = jnp.tanh(x @ params["w"]) * scale
    return {"y": y, "n": jnp.sum(y).astype(jnp.int32)}, y.shape[0]


def _shapes(tree):
    return jax.tree.map(lambda s: (s.shape, s.dtype), tree)


@pytest.fixture
def inputs():
    return {"w": jnp.ones((3, 4), jnp.float32)}, jnp.ones((8, 2, 3), jnp.float32)


def test_lowered_and_compiled_are_jax_stages_with_jaxs_trees(inputs):
    params, x = inputs
    f = pxla_mlir.pmap(lambda p, x: _step(p, x)[0], "i", in_axes=(None, 0), donate_argnums=1)
    lowered = f.lower(params, x)
    compiled = lowered.compile()
    assert isinstance(lowered, jax.stages.Lowered) and isinstance(compiled, jax.stages.Compiled)
    expected_in = jax.tree.map(lambda a: (a.shape, a.dtype), ((params, x), {}))
    for stage in (lowered, compiled):
        assert jax.tree.map(lambda a: (a.shape, a.dtype), stage.in_avals) == expected_in
        info = stage.out_info
        assert all(isinstance(s, jax.ShapeDtypeStruct) for s in jax.tree.leaves(info))
        assert _shapes(info) == {"y": ((8, 2, 4), jnp.dtype("float32")), "n": ((8,), jnp.dtype("int32"))}
        assert jax.tree.leaves(stage.args_info)[-1].donated
    out = compiled.call(params, x + 0)
    ref = jax.vmap(lambda x: _step(params, x)[0])(x)
    np.testing.assert_array_equal(np.asarray(out["y"]), np.asarray(ref["y"]))


def test_out_info_carries_the_executables_shardings(inputs):
    params, x = inputs
    compiled = pxla_mlir.pmap(lambda p, x: _step(p, x)[0], "i", in_axes=(None, 0)).lower(params, x).compile()
    for info, sharding in zip(jax.tree.leaves(compiled.out_info), jax.tree.leaves(compiled.output_shardings)):
        assert info.sharding == sharding


def test_jit_trace_and_eval_shape_agree_with_jax_jit(inputs):
    params, x = inputs

    def body(p, x):
        return pxla_mlir.pmap(lambda x: lax.psum(_step(p, x)[0]["y"], "i"), "i")(x), x.shape[0]

    ours = pxla_mlir.jit(body, static_argnums=())
    traced = ours.trace(params, x)
    assert isinstance(traced, jax.stages.Traced)
    theirs = jax.eval_shape(lambda p, x: (jax.vmap(lambda x: _step(p, x)[0]["y"])(x), x.shape[0]), params, x)
    assert _shapes(ours.eval_shape(params, x)[0]) == _shapes(theirs[0])
    assert _shapes(traced.out_info) == _shapes(ours.eval_shape(params, x))
    assert jax.tree.map(lambda a: a.shape, traced.args_info) == (({"w": (3, 4)}, (8, 2, 3)), {})
    assert "pxla_pmap" in str(traced.jaxpr)
    lowered = traced.lower()
    assert isinstance(lowered, jax.stages.Lowered)
    out, n = lowered.compile()(params, x)
    np.testing.assert_allclose(np.asarray(out), np.asarray(traced(params, x)[0]), rtol=0, atol=0)
    assert n == 8


# -- every attribute of jax's stages, on ours, compared with jax.jit's -----------------------------------------

X = np.arange(40.0, dtype=np.float32).reshape(8, 5)
Y = np.linspace(0.0, 1.0, 8, dtype=np.float32)


def _named(name, fun):
    fun.__name__ = fun.__qualname__ = name  # jax's fun_name and ours name the same function
    return fun


def _per_device(x, y):
    return {"s": lax.psum(x * 2 + 1, "i"), "y": y * 3}


def _kind(kind):
    """(ours, jax.jit's equivalent, positional args, keyword args, does ours trace): one program in each."""
    vmapped = jax.vmap(_per_device, axis_name="i")
    if kind == "pmap":
        return pxla_mlir.pmap(_per_device, "i", donate_argnums=0), jax.jit(vmapped, donate_argnums=0), (X,), {"y": Y}
    if kind == "jit":
        ours = _named("step", lambda x, y: pxla_mlir.pmap(_per_device, "i")(x, y=y))
        theirs = _named("step", lambda x, y: vmapped(x, y=y))
        return pxla_mlir.jit(ours, donate_argnums=0), jax.jit(theirs, donate_argnums=0), (X,), {"y": Y}
    xmapped = pxla_mlir.xmap(lambda x, y: {"s": lax.psum(x * 2 + 1, "m"), "y": y * 3}, in_axes=(["m", ...], ["m", ...]),
                             out_axes={"s": [...], "y": ["m", ...]}, axis_resources={"m": "x"})
    ref = jax.vmap(lambda x, y: {"s": lax.psum(x * 2 + 1, "m"), "y": y * 3}, axis_name="m",
                   out_axes={"s": None, "y": 0})
    return xmapped, jax.jit(ref), (X, Y), {}


def _public(obj) -> list[str]:
    return sorted(name for name in dir(obj) if not name.startswith("_"))


def _avals(tree):
    return jax.tree.map(lambda a: (a.shape, a.dtype), tree)


def _leaves(tree):
    return jax.tree.leaves(tree, is_leaf=lambda x: x is None or isinstance(x, jax.sharding.Sharding)
                           or type(x).__name__ == "Format")


class _Identity:
    """jax's physicalization context, physicalizing nothing."""

    @staticmethod
    def physicalize_closed_jaxpr(jaxpr):
        return jaxpr


def _compare(stage, name, ours, theirs, args, kwargs):
    """Checks ``ours.<name>`` against ``theirs.<name>`` (jax's), by what the attribute is."""
    mine, jaxs = getattr(ours, name), getattr(theirs, name)
    expected = jax.tree.map(np.asarray, theirs.lower().compile()(*args, **kwargs) if stage == "Traced" else
                            (theirs if stage == "Compiled" else theirs.compile())(*args, **kwargs))

    def same_numbers(out):
        jax.tree.map(lambda a, b: np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6), out, expected)

    if name in ("in_tree", "out_tree", "donate_argnums", "fun_name", "effects"):
        assert mine == jaxs
    elif name in ("in_avals", "out_avals"):
        assert _avals(mine) == _avals(jaxs)
    elif name == "args_info":
        assert jax.tree.map(lambda a: (a.shape, a.dtype, a.donated), mine) == \
            jax.tree.map(lambda a: (a.shape, a.dtype, a.donated), jaxs)
    elif name == "out_info":
        assert _avals(mine) == _avals(jaxs)
        if stage == "Compiled":  # each leaf carries its format, as jax's
            assert [i.format.layout for i in jax.tree.leaves(mine)] == [i.format.layout for i in jax.tree.leaves(jaxs)]
            assert [i.sharding for i in jax.tree.leaves(mine)] == _leaves(ours.output_shardings)
    elif name in ("input_formats", "output_formats"):
        assert jax.tree.structure(mine) == jax.tree.structure(jaxs)
        assert [f.layout for f in _leaves(mine)] == [f.layout for f in _leaves(jaxs)]  # XLA's, per device
        shardings = ours.input_shardings if name == "input_formats" else ours.output_shardings
        assert [f.sharding for f in _leaves(mine)] == _leaves(shardings)
    elif name in ("input_shardings", "output_shardings"):
        assert jax.tree.structure(mine) == jax.tree.structure(jaxs)
        if name == "output_shardings":  # what the results are placed with
            out = ours(*args, **kwargs)
            assert [o.sharding for o in jax.tree.leaves(out)] == _leaves(mine)
    elif name in ("as_text", "cost_analysis", "memory_analysis", "runtime_executable", "compiler_ir"):
        assert type(mine()) is type(jaxs())
    elif name == "compile":
        assert isinstance(mine(), jax.stages.Compiled) and isinstance(jaxs(), jax.stages.Compiled)
    elif name == "lower":
        assert isinstance(mine(), jax.stages.Lowered) and mine().out_tree == ours.out_tree
    elif name == "call":
        same_numbers(mine(*args, **kwargs))
    elif name == "jaxpr":
        assert type(mine) is type(jaxs)
    elif name == "lojax":  # the trace with its high-level types lowered (none here)
        for field in ("jaxpr", "fun_name", "args_info", "out_tree"):
            assert getattr(mine, field) == getattr(ours, field) and hasattr(jaxs, field)
    elif name == "closure_convert":
        consts, fun = mine()
        same_numbers(fun(consts, *args, **kwargs))
    elif name == "with_consts_as_arg":
        consts, traced = mine()
        assert isinstance(traced, jax.stages.Traced)
        same_numbers(traced.lower().compile()(consts, *args, **kwargs))
    elif name == "physicalize":
        same_numbers(mine(_Identity()).lower().compile()(*args, **kwargs))
    else:
        pytest.fail(f"jax.stages.{stage}.{name} is new on jax {jax.__version__}: compare it in this test")


@pytest.mark.parametrize("kind", ["pmap", "jit", "xmap"])
def test_every_attribute_of_jaxs_stages_works_on_ours_and_agrees(kind):
    """Each public attribute, property and method of jax.jit's Traced, Lowered and Compiled (as the installed
    jax has them), read or called on ours and compared with jax's for the same computation."""
    ours, theirs, args, kwargs = _kind(kind)
    with pxla_mlir.Mesh.create({"x": 8}):
        our_lowered = ours.lower(*args, **kwargs)
        our_traced = ours.trace(*args, **kwargs) if kind == "jit" else None
    their_traced = theirs.trace(*args, **kwargs)
    stages = {"Traced": (our_traced, their_traced), "Lowered": (our_lowered, their_traced.lower()),
              "Compiled": (our_lowered.compile(), their_traced.lower().compile())}
    for stage, (mine, jaxs) in stages.items():
        if mine is None:  # as jax.pmap, pmap and xmap have no trace()
            assert not hasattr(jax.pmap(_per_device), "trace")
            continue
        assert isinstance(mine, getattr(jax.stages, stage))
        for name in _public(jaxs):
            _compare(stage, name, mine, jaxs, args, kwargs)


def test_jaxs_own_fields_of_a_lowering_read_on_ours():
    """jax code reads these fields of any jax.stages.Lowered/Compiled (e.g. jax.pmap's lower reads _no_kwargs)."""
    lowered = pxla_mlir.pmap(_per_device, "i").lower(X, Y)
    theirs = jax.jit(jax.vmap(_per_device, axis_name="i")).lower(X, Y)
    for field in ("_no_kwargs", "_in_types", "_out_types"):
        assert getattr(lowered, field) == getattr(theirs, field)
    assert lowered.compile()._no_kwargs is theirs.compile()._no_kwargs is False


def test_compile_takes_jaxs_device_assignment_for_its_own_devices():
    lowered = pxla_mlir.pmap(_per_device, "i", devices=jax.devices()[:4]).lower(X[:4], Y[:4])
    out = lowered.compile(device_assignment=tuple(jax.devices()[:4]))(X[:4], Y[:4])
    np.testing.assert_allclose(np.asarray(out["y"]), Y[:4] * 3)
    with pytest.raises(ValueError, match=r"lowered for devices \[0, 1, 2, 3\] and runs on those only, got "
                                         r"\[4, 5, 6, 7\]; leave device_assignment out, or lower the map"):
        lowered.compile(device_assignment=tuple(jax.devices()[4:]))
