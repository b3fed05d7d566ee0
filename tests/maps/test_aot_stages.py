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
