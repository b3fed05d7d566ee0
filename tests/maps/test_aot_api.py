"""jax's ahead-of-time API on pxla_mlir's stages, for pmap, pxla_mlir.jit and
xmap alike (they share ``stages.Lowered``/``Compiled``): dialects, compiler
IR, cost and memory analysis, argument info, pytrees, compiler options, and
jax's TypeErrors for calls with other pytrees or types."""

import jax
import numpy as np
import pytest
from jax import lax
from jaxlib.mlir import ir

import pxla_mlir

MODES = ["replica", "partition"]
X = np.arange(40.0, dtype=np.float32).reshape(8, 5)
Y = np.ones(8, np.float32)


def body(x, y):
    return lax.psum(x * 2 + 1, "i"), y


KINDS = ["pmap-replica", "pmap-partition", "jit", "xmap"]


@pytest.fixture(scope="module", params=KINDS)
def case(request):
    """(kind, Lowered, positional args, keyword args): pmap in both modes, pxla_mlir.jit and xmap."""
    kind = request.param
    if kind.startswith("pmap"):
        mode = kind.split("-")[1]
        return kind, pxla_mlir.pmap(body, "i", mode=mode, donate_argnums=0).lower(X, y=Y), (X,), {"y": Y}
    if kind == "jit":
        jit = pxla_mlir.jit(lambda x, y: (pxla_mlir.pmap(body, "i")(x, y)[0], y))
        return kind, jit.lower(X, y=Y), (X,), {"y": Y}
    with pxla_mlir.Mesh.create({"x": 8}):
        xm = pxla_mlir.xmap(lambda x: lax.psum(x * 2 + 1, "m"), in_axes=["m", ...], out_axes=[...],
                            axis_resources={"m": "x"})
        return kind, xm.lower(X), (X,), {}


def test_lowered_text_in_every_dialect(case):
    _, lowered, _, _ = case
    mhlo = lowered.as_text()
    assert mhlo == lowered.as_text("mhlo") and "mhlo.all_reduce" in mhlo and "stablehlo." not in mhlo
    assert "loc(" not in mhlo and "loc(" in lowered.as_text(debug_info=True)
    stable = lowered.as_text("stablehlo")
    assert "stablehlo.all_reduce" in stable and "mhlo.all_reduce" not in stable
    hlo = lowered.as_text("hlo")
    assert hlo.startswith("HloModule ") and "all-reduce(" in hlo
    assert "metadata=" not in hlo and "metadata=" in lowered.as_text("hlo", debug_info=True)
    assert isinstance(lowered.compiler_ir(), ir.Module) and lowered.compiler_ir() is lowered.compiler_ir("mhlo")
    assert str(lowered.compiler_ir("stablehlo")) == stable
    assert "all-reduce(" in lowered.compiler_ir("hlo").as_hlo_text()
    assert lowered.as_text() == mhlo  # the conversions worked on copies
    with pytest.raises(ValueError, match=r"unknown dialect: 'tosa'; use one of 'mhlo', 'stablehlo', 'hlo'"):
        lowered.as_text("tosa")


def test_args_info_and_trees(case):
    kind, lowered, args, kwargs = case
    info = lowered.args_info
    assert info[0][0].shape == (8, 5) and info[0][0].dtype == np.float32
    assert info[0][0].donated == kind.startswith("pmap")
    if kwargs:
        assert info[1]["y"].shape == (8,) and not info[1]["y"].donated
    assert lowered.in_tree == jax.tree_util.tree_structure((args, kwargs))
    compiled = lowered.compile()
    assert compiled.in_tree == lowered.in_tree and compiled.out_tree == lowered.out_tree
    assert jax.tree_util.tree_structure(compiled.args_info) == lowered.in_tree


def test_trees_and_args_info_match_jax_pmap():
    ours = pxla_mlir.pmap(body, "i", donate_argnums=0).lower(X, y=Y)
    theirs = jax.pmap(body, "i", donate_argnums=0).lower(X, y=Y)
    assert ours.in_tree == theirs.in_tree and ours.out_tree == theirs.out_tree
    for a, b in zip(jax.tree_util.tree_leaves(ours.args_info), jax.tree_util.tree_leaves(theirs.args_info)):
        assert (a.shape, a.dtype, a.donated) == (b.shape, b.dtype, b.donated)


def test_cost_analysis_before_and_after_compiling():
    per_device = jax.jit(lambda r: r * 2 + 1).lower(np.ones(5, np.float32))
    lowered = pxla_mlir.pmap(lambda r: r * 2 + 1).lower(X)
    # A replica-mode module is the per-device program: the same flops as jax.jit of one shard.
    assert lowered.cost_analysis()["flops"] == per_device.cost_analysis()["flops"] == 10.0
    assert lowered.compile().cost_analysis()["flops"] == per_device.compile().cost_analysis()["flops"]


@pytest.mark.parametrize("mode", MODES)
def test_compiled_introspection(mode):
    lowered = pxla_mlir.pmap(body, "i", mode=mode).lower(X, y=Y)
    compiled = lowered.compile()
    assert compiled.as_text().startswith("HloModule ")
    assert compiled.cost_analysis()["flops"] > 0
    memory = compiled.memory_analysis()
    assert memory.argument_size_in_bytes == 5 * 4 + 4  # one row of x and one element of y, per device
    exe = compiled.runtime_executable()
    assert len(exe.local_devices()) == 8 and exe.hlo_modules()
    out = compiled(X, y=Y)
    shardings = compiled.input_shardings
    assert jax.tree_util.tree_structure(shardings) == lowered.in_tree
    placed = jax.device_put(X, shardings[0][0])
    assert placed.sharding.is_equivalent_to(shardings[0][0], 2)
    assert out[0].sharding.is_equivalent_to(compiled.output_shardings[0], 2)
    assert jax.tree_util.tree_structure(compiled.output_shardings) == lowered.out_tree


def test_compile_with_compiler_options():
    lowered = pxla_mlir.pmap(lambda r: r * 2 + 1).lower(X)
    fast = lowered.compile(compiler_options={"xla_cpu_enable_fast_math": True, "xla_backend_optimization_level": 1})
    np.testing.assert_array_equal(fast(X), X * 2 + 1)
    assert fast is not lowered.compile() and lowered.compile() is lowered.compile()
    for lower in (lambda: lowered, lambda: jax.pmap(lambda r: r * 2 + 1).lower(X)):  # jax.pmap raises the same
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"^INVALID_ARGUMENT: No such compile option: "
                                                             r"'xla_nonexistent'"):
            lower().compile(compiler_options={"xla_nonexistent": True})
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"'maybe' is not a valid bool value"):
            lower().compile(compiler_options={"xla_cpu_enable_fast_math": "maybe"})
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"'xla_nonexistent'\. compiler_options keys are XLA debug "
                                                         r"option names"):
        lowered.compile(compiler_options={"xla_nonexistent": True})
    with pytest.raises(TypeError, match=r"compiler_options must be a dict"):
        lowered.compile(compiler_options=["xla_cpu_enable_fast_math"])
    with pytest.raises(TypeError, match=r"compiler_options\['xla_cpu_enable_fast_math'\] must be a bool, int"):
        lowered.compile(compiler_options={"xla_cpu_enable_fast_math": [True]})


def test_calls_with_another_pytree_or_types_raise_jax_type_errors():
    ours = pxla_mlir.pmap(lambda x, y: x + y).lower(X, y=Y[:, None]).compile()
    theirs = jax.jit(lambda x, y: x + y).lower(X, y=Y[:, None]).compile()
    for call in (lambda c: c(X, Y[:, None]), lambda c: c(X, z=Y[:, None]), lambda c: c((X,), y=Y[:, None])):
        with pytest.raises(TypeError) as mine:
            call(ours)
        with pytest.raises(TypeError) as jaxs:
            call(theirs)
        assert str(mine.value) == str(jaxs.value)
        assert str(mine.value).startswith("Function compiled with input pytree does not match the input pytree it "
                                          "was called with. There are")
    with pytest.raises(TypeError) as mine:
        ours(X.astype(np.int32), y=np.ones((8, 2), np.float32))
    with pytest.raises(TypeError) as jaxs:  # jax.pmap's words for the same mismatches
        jax.pmap(lambda x, y: x + y).lower(X, y=Y[:, None]).compile()(X.astype(np.int32), y=np.ones((8, 2), np.float32))
    ours_lines, jax_lines = str(mine.value).splitlines(), str(jaxs.value).splitlines()
    assert len(ours_lines) == len(jax_lines) == 3 and ours_lines[0] == jax_lines[0]
    assert ours_lines[1:] == [jax_lines[1] + " (it is args[0] of the call)", jax_lines[2] + " (it is kwargs['y'] of the call)"]
    np.testing.assert_array_equal(ours(X.astype(np.float64), y=Y[:, None]), X + 1)  # canonicalized, as jax does


def test_compiled_with_static_arguments():
    f = pxla_mlir.pmap(lambda x, n: x * n, static_broadcasted_argnums=1)
    compiled = f.lower(X, 3).compile()
    np.testing.assert_array_equal(compiled(X), 3 * X)  # as jax: statics are compiled in
    np.testing.assert_array_equal(compiled(X, 3), 3 * X)  # or passed again with the same value
    with pytest.raises(TypeError, match=r"compiled for static argument 1 = 3, called with 4; lower and compile "
                                        r"again"):
        compiled(X, 4)
    assert f.lower(X, 3).in_tree == jax.tree_util.tree_structure(((X,), {}))


def test_jit_and_xmap_compiled_calls():
    jit = pxla_mlir.jit(lambda x, y: pxla_mlir.pmap(body, "i")(x, y)).lower(X, y=Y).compile()
    out = jit(X, y=Y)
    np.testing.assert_allclose(out[0], np.broadcast_to((X * 2 + 1).sum(0), (8, 5)))
    with pytest.raises(TypeError, match="^Function compiled with input pytree does not match"):
        jit(X, Y)
    with pxla_mlir.Mesh.create({"x": 8}):
        xm = pxla_mlir.xmap(lambda x: x * 2, in_axes=["m", ...], out_axes=["m", ...], axis_resources={"m": "x"})
        compiled = xm.lower(X).compile()
    np.testing.assert_array_equal(compiled(X), 2 * X)
    with pytest.raises(TypeError, match=r"Argument 'flat_args\[0\]' compiled with float32\[8,5\] and called with "
                                        r"float32\[8,4\]"):
        compiled(X[:, :4])
