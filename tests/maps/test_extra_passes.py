"""A map's own passes (``extra_passes=``) in pmap, xmap and pxla_mlir.jit:
where they run, what they change (checked against jax), how they are
checked when the map is made, the cache keys that include them and their
versions, and the handoff check that still runs after them."""

import dataclasses
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jaxlib.mlir import ir

import pxla_mlir
from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.pass_infra import ModulePass, option
from pxla_mlir.mlir.pass_infra.extra_passes import ExtraPassesError
from pxla_mlir.mlir.pass_infra.pipeline import PipelineFailure
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.mlir.support.stats import STATS

X = np.arange(32.0, dtype=np.float32).reshape(8, 4)


@dataclasses.dataclass(frozen=True)
class TagMain(ModulePass):
    """Writes ``test.tag`` on @main and remarks on it: a pass that leaves the numbers alone."""

    argument = "test-tag-main"
    summary = "Tag @main"
    checks_only = False
    tag: str = option("t", "the tag")

    def run(self, module):
        main = ir_utils.find_function(module, "main")
        main.attributes["test.tag"] = ir.StringAttr.get(self.tag)
        self.remark(main, f"tagged {self.tag}")


@dataclasses.dataclass(frozen=True)
class DoubleResults(ModulePass):
    """Doubles every result of @main (``mhlo.add %r, %r``): visible in the numbers."""

    argument = "test-double-results"
    summary = "Double @main's results"

    def run(self, module):
        main = ir_utils.find_function(module, "main")
        ret = main.regions[0].blocks[0].operations[len(main.regions[0].blocks[0].operations) - 1]
        with ir.InsertionPoint(ret):
            doubled = [ir.Operation.create("mhlo.add", results=[v.type], operands=[v, v]).result
                       for v in ret.operands]
        for i, v in enumerate(doubled):
            ret.operands[i] = v


@dataclasses.dataclass(frozen=True)
class BreakTypes(ModulePass):
    """Leaves invalid IR: @main returns a value of another type than it declares."""

    argument = "test-break-types"
    summary = "Return the wrong type"

    def run(self, module):
        main = ir_utils.find_function(module, "main")
        ret = main.regions[0].blocks[0].operations[len(main.regions[0].blocks[0].operations) - 1]
        with ir.InsertionPoint(ret):
            wrong = ir.Operation.create("mhlo.constant", results=[ir.RankedTensorType.get([7], ir.IntegerType.get_signless(8))],
                                        attributes={"value": ir.DenseElementsAttr.get(np.zeros(7, np.int8))}).result
        ret.operands[0] = wrong


@dataclasses.dataclass(frozen=True)
class DeleteMain(ModulePass):
    argument = "test-delete-main"
    summary = "Delete @main"

    def run(self, module):
        ir_utils.find_function(module, "main").erase()


@pytest.fixture(autouse=True)
def test_passes():
    with REGISTRY.restored_after():
        for cls in (TagMain, DoubleResults, BreakTypes, DeleteMain):
            REGISTRY.add(cls, cls.__module__)
        yield


def body(x):
    return lax.psum(x, "i") + x


def expected(x):
    return jax.vmap(body, axis_name="i")(x)


def make(kind, extra, fun=body):
    if kind == "pmap":
        return pxla_mlir.pmap(fun, "i", extra_passes=extra)
    if kind == "pmap-partition":
        return pxla_mlir.pmap(fun, "i", mode="partition", extra_passes=extra)
    if kind == "jit":
        return pxla_mlir.jit(_jit_body(fun), extra_passes=extra)
    return pxla_mlir.xmap(fun, in_axes=["i", ...], out_axes=["i", ...], axis_resources={"i": "x"},
                          extra_passes=extra)


_JIT_BODIES: dict = {}


def _jit_body(fun):
    """One jit body per map body: jit's caches, as pmap's, are shared by function."""
    if fun not in _JIT_BODIES:
        _JIT_BODIES[fun] = lambda x: pxla_mlir.pmap(fun, "i")(x)
    return _JIT_BODIES[fun]


def run(kind, f, *args):
    if kind == "xmap":
        with pxla_mlir.Mesh.create({"x": 8}):
            return f(*args), f.lower(*args)
    return f(*args), f.lower(*args)


KINDS = ["pmap", "pmap-partition", "jit", "xmap"]


@pytest.mark.parametrize("kind", KINDS)
def test_mhlo_passes_run_before_the_handoff_check_and_change_the_numbers(kind):
    out, lowered = run(kind, make(kind, "builtin.module(test-double-results,test-tag-main{tag=seen})"), X)
    np.testing.assert_allclose(np.asarray(out), 2 * np.asarray(expected(X)))
    text = lowered.as_text()
    assert 'test.tag = "seen"' in text
    pipeline = lowered.pipeline
    assert "mhlo-passes={test-double-results,test-tag-main{tag=seen}}" in pipeline
    assert "pass-versions=test-double-results@1,test-tag-main@1" in pipeline
    # the handoff check comes after them in the expanded pipeline
    from pxla_mlir.mlir.core.context import make_context
    from pxla_mlir.mlir.pass_infra import Pipeline

    steps = [str(s) for s in Pipeline.parse(pipeline, make_context()).steps]
    assert steps[-1].startswith("pxla-verify-handoff")
    assert steps[-3:-1] == ["test-double-results", "test-tag-main{tag=seen}"]


def test_bare_element_list_and_anchored_text_are_the_same_pipeline():
    a = pxla_mlir.pmap(body, "i", extra_passes="test-tag-main{tag=a},canonicalize")
    b = pxla_mlir.pmap(body, "i", extra_passes="builtin.module(test-tag-main{tag=a},canonicalize)")
    assert a.lower(X).pipeline == b.lower(X).pipeline


def test_pxla_stage_runs_on_the_pxla_form_before_expansion():
    seen = []

    @dataclasses.dataclass(frozen=True)
    class CountPlaceholders(ModulePass):
        argument = "test-count-placeholders"
        summary = "Remember the placeholders"
        checks_only = True

        def run(self, module):
            seen.append(sum(op.name == "mhlo.custom_call" for op in ir_utils.walk(module)))

    REGISTRY.add(CountPlaceholders, CountPlaceholders.__module__)
    outer = pxla_mlir.pmap(lambda x: pxla_mlir.pmap(lambda y: y * 3, "j")(x).sum(0), "i",
                           extra_passes={"pxla": "test-count-placeholders", "mhlo": "test-count-placeholders"})
    x = np.arange(16.0, dtype=np.float32).reshape(2, 4, 2)
    lowered = outer.lower(x)
    assert seen[0] > 0 and seen[1] == 0  # the nested pmap's placeholders, then none left
    assert "pxla-passes={test-count-placeholders}" in lowered.pipeline
    np.testing.assert_allclose(np.asarray(outer(x)), (x * 3).sum(1))


@pytest.mark.parametrize("extra, words", [
    ("test-double-reslts", ["extra_passes", "unknown pass or pipeline 'test-double-reslts'",
                            "did you mean 'test-double-results'"]),
    ("test-tag-main{tg=x}", ["extra_passes", "unknown option 'tg'", "valid options: tag"]),
    ("builtin.module(test-tag-main", ["extra_passes", "expected ')'"]),
    ({"mlho": "cse"}, ["extra_passes has no stage 'mlho'", "did you mean 'mhlo'"]),
    (3, ["extra_passes must be pipeline text"]),
])
@pytest.mark.parametrize("make_map", ["pmap", "xmap", "jit"])
def test_bad_extra_passes_are_refused_when_the_map_is_made(extra, words, make_map):
    with pytest.raises(ExtraPassesError) as e:
        make(make_map, extra)
    assert isinstance(e.value, PxlaUserError)
    for w in words:
        assert w in str(e.value)


def _lowerings(f, *args):
    before = STATS["lowerings"]
    f(*args)
    return STATS["lowerings"] - before


@pytest.mark.parametrize("kind", ["pmap", "xmap", "jit"])
def test_cache_keys_hold_the_passes_their_options_and_versions(kind):
    def fun(x):  # a function of its own: the caches are shared by function
        return lax.psum(x, "i") * 2

    ctx = pxla_mlir.Mesh.create({"x": 8}) if kind == "xmap" else None
    with ctx if ctx is not None else _null():
        assert _lowerings(make(kind, "test-tag-main{tag=a}", fun), X) == 1
        assert _lowerings(make(kind, "test-tag-main{tag=a}", fun), X) == 0  # same passes: a hit
        assert _lowerings(make(kind, "test-tag-main{tag=b}", fun), X) == 1  # another option
        assert _lowerings(make(kind, "test-double-results", fun), X) == 1  # another pass
        f = make(kind, "test-tag-main{tag=a}", fun)
        assert _lowerings(f, X) == 0

        @dataclasses.dataclass(frozen=True)
        class TagMainV2(TagMain):
            version = "2"

        REGISTRY.add(TagMainV2, TagMainV2.__module__)  # the same pass, registered again with another version
        assert _lowerings(f, X) == 1  # the same object lowers again
        assert "test-tag-main@2" in make(kind, "test-tag-main{tag=a}", fun).lower(X).pipeline
        lowered = f.lower(X)
        assert "test-tag-main@2" in lowered.pipeline
        REGISTRY.add(TagMain, TagMain.__module__)
        assert _lowerings(f, X) == 0  # version 1's program is still cached
        assert "test-tag-main@1" in f.lower(X).pipeline


def _null():
    import contextlib

    return contextlib.nullcontext()


def test_the_bound_primitive_is_keyed_on_the_versions_too():
    f = pxla_mlir.pmap(body, "i", extra_passes="test-double-results")
    grad = jax.grad(lambda x: f(x).sum())
    g1 = grad(X)

    @dataclasses.dataclass(frozen=True)
    class Triple(DoubleResults):
        version = "2"

        def run(self, module):  # x + x + x
            DoubleResults.run(self, module)

    before = STATS["lowerings"]
    REGISTRY.add(Triple, Triple.__module__)
    g2 = grad(X)
    assert STATS["lowerings"] > before
    np.testing.assert_allclose(np.asarray(g1), np.asarray(g2))


def test_final_module_text_follows_the_version():
    """jax's persistent cache is keyed on the final module: a pass that changed what it writes changes it."""
    lowered = pxla_mlir.pmap(body, "i", extra_passes="test-tag-main{tag=v1}").lower(X)
    other = pxla_mlir.pmap(body, "i", extra_passes="test-tag-main{tag=v2}").lower(X)
    plain = pxla_mlir.pmap(body, "i").lower(X)
    texts = {lowered.as_text(), other.as_text(), plain.as_text()}
    assert len(texts) == 3  # (jax's persistent cache hashes this text: see the test below)


@pytest.mark.parametrize("extra, words", [
    ("test-break-types", ["test-break-types (plugin ", "left invalid IR", "type of return operand 0"]),
    ("test-delete-main", ["test-delete-main (plugin ", "removed the public function @main"]),
])
def test_a_pass_that_breaks_the_module_fails_before_xla(extra, words):
    before = STATS["compiles"]
    f = pxla_mlir.pmap(body, "i", extra_passes=extra)
    with pytest.raises(PipelineFailure) as e:
        f(X)
    assert STATS["compiles"] == before
    for w in words:
        assert w in str(e.value)
    assert "reproduce with" in str(e.value)


@dataclasses.dataclass(frozen=True)
class AddArgument(ModulePass):
    """Gives @main one more argument (a map launches it with the ones it had: jaxlib would crash)."""

    argument = "test-add-argument"
    summary = "Add an argument to @main"

    def run(self, module):
        main = ir_utils.find_function(module, "main")
        block = main.regions[0].blocks[0]
        block.add_argument(block.arguments[0].type, main.location)
        ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([a.type for a in block.arguments],
                                                                                 ftype.results))
        if "arg_attrs" in main.attributes:
            attrs = list(ir.ArrayAttr(main.attributes["arg_attrs"]))
            main.attributes["arg_attrs"] = ir.ArrayAttr.get([*attrs, attrs[-1]])


@dataclasses.dataclass(frozen=True)
class HalfResults(ModulePass):
    """Makes @main's f32 results f16 (a jax.Array saying float32 would hold f16 buffers)."""

    argument = "test-half-results"
    summary = "Convert @main's results to f16"

    def run(self, module):
        main = ir_utils.find_function(module, "main")
        ret = main.regions[0].blocks[0].operations[len(main.regions[0].blocks[0].operations) - 1]
        with ir.InsertionPoint(ret):
            for i, v in enumerate(list(ret.operands)):
                t = ir.RankedTensorType(v.type)
                half = ir.RankedTensorType.get(t.shape, ir.F16Type.get())
                ret.operands[i] = ir.Operation.create("mhlo.convert", results=[half], operands=[v]).result
        ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ftype.inputs,
                                                                                 [o.type for o in ret.operands]))


@pytest.mark.parametrize("mode", ["replica", "partition"])
@pytest.mark.parametrize("cls, said", [
    (AddArgument, "it has 2 arguments instead of 1"),
    (HalfResults, "result 0 is tensor<"),
])
def test_a_pass_that_changes_mains_signature_fails_before_xla(mode, cls, said):
    with REGISTRY.restored_after():
        REGISTRY.add(cls, cls.__module__)
        before = STATS["compiles"]
        f = pxla_mlir.pmap(lambda x: lax.psum(x, "i") * 2, "i", mode=mode, extra_passes=cls.argument)
        with pytest.raises(PipelineFailure) as e:
            f(X)
        assert STATS["compiles"] == before
        message = str(e.value)
        assert f"{cls.argument} (plugin {cls.__module__}) changed the signature of @main, which the map launches as " \
               f"it was: {said}" in message, message
        for stage in ("pxla", "mhlo"):  # also on the pxla form
            g = pxla_mlir.pmap(lambda x: lax.psum(x, "i") * 3, "i", mode=mode, extra_passes={stage: cls.argument})
            with pytest.raises(PipelineFailure, match="changed the signature of @main"):
                g.lower(X)


KEEPS_OPS = '''
import dataclasses, gc, os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, numpy as np, pxla_mlir
from jax import lax
from pxla_mlir.mlir.support import lru
from pxla_mlir.passes import ModulePass

KEPT = []


@dataclasses.dataclass(frozen=True)
class Keeps(ModulePass):
    argument = "test-keeps"
    summary = "Keeps the module and its ops, for a later report"
    checks_only = True

    def run(self, module):
        KEPT.append(module)
        for op in module.regions[0].blocks[0].operations:
            KEPT.append(op)
            KEPT.extend(op.regions[0].blocks[0].operations)


pxla_mlir.register_pass(Keeps)
f = pxla_mlir.pmap(lambda x: lax.psum(x, "i") * 2, "i", extra_passes={"pxla": "test-keeps", "mhlo": "test-keeps"})
x = np.arange(8.0, dtype=np.float32)
assert np.asarray(f(x)).tolist() == [56.0] * 8
del f
lru.clear_all()
jax.clear_caches()
gc.collect()
valid = raised = 0
for op in KEPT:
    try:
        str(op)
        valid += 1
    except RuntimeError as e:
        assert "invalidated" in str(e), e
        raised += 1
print(len(KEPT), valid, raised)
'''


@pytest.mark.subprocess
def test_ops_a_pass_keeps_survive_the_map_and_its_caches():
    """Touched after the map is dropped and every cache emptied: valid IR or an error, never a signal."""
    from isolation import run_isolated

    kept, valid, raised = map(int, run_isolated(KEEPS_OPS, timeout=240).split()[-3:])
    assert kept > 4 and raised == 2 and valid == kept - 2  # the two modules the pass was handed raise


def test_with_options_takes_extra_passes():
    f = pxla_mlir.pmap(body, "i").with_options(extra_passes="test-double-results")
    np.testing.assert_allclose(np.asarray(f(X)), 2 * np.asarray(expected(X)))
    assert "mhlo-passes" not in pxla_mlir.pmap(body, "i").lower(X).pipeline


def test_the_pipeline_replays_in_pxla_opt_form():
    """The recorded pipeline text parses again, and gives the same module from the pxla form."""
    from pxla_mlir.mlir.core.context import make_context
    from pxla_mlir.mlir.pass_infra import run_pipeline

    lowered = pxla_mlir.pmap(body, "i", extra_passes="test-tag-main{tag=r}").lower(X)
    ctx = make_context()
    with ctx:
        module = ir.Module.parse(lowered.pxla_text())
    run_pipeline(module, lowered.pipeline, reproducer=False)
    assert 'test.tag = "r"' in ir_utils.asm_text(module.operation)


def test_a_pipeline_recorded_with_another_version_is_refused():
    from pxla_mlir.mlir.pipelines import PmapPipeline

    with pytest.raises(ExtraPassesError, match="test-tag-main is version 9"):
        PmapPipeline.from_options("mhlo-passes={test-tag-main} pass-versions=test-tag-main@9")
    with pytest.raises(ExtraPassesError, match="load the plugin"):
        PmapPipeline.from_options("pass-versions=nobody@1")


def test_jnp_reference():
    # the doubling pass against jax on a non-collective body
    f = pxla_mlir.pmap(jnp.sin, "i", extra_passes="test-double-results")
    np.testing.assert_allclose(np.asarray(f(X)), 2 * np.sin(X), rtol=1e-6)


def test_jit_of_xmaps_runs_the_jits_passes():
    xm = pxla_mlir.xmap(lambda v: lax.psum(v, "i"), in_axes=["i", ...], out_axes=[...], axis_resources={"i": "x"})
    f = pxla_mlir.jit(lambda v: xm(v) + 1, extra_passes="test-double-results")
    with pxla_mlir.Mesh.create({"x": 8}):
        out = f(X)
        assert "mhlo-passes={test-double-results}" in f.lower(X).pipeline
    np.testing.assert_allclose(np.asarray(out), 2 * (X.sum(0) + 1))


def test_xmap_with_options_takes_extra_passes():
    xm = pxla_mlir.xmap(body, in_axes=["i", ...], out_axes=["i", ...], axis_resources={"i": "x"})
    with pxla_mlir.Mesh.create({"x": 8}):
        doubled = xm.with_options(extra_passes={"mhlo": "test-double-results"})
        np.testing.assert_allclose(np.asarray(doubled(X)), 2 * np.asarray(expected(X)))


PERSISTENT = '''
import dataclasses, os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, numpy as np, pxla_mlir
from jax import lax
from jaxlib.mlir import ir
from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.pass_infra import ModulePass, register_pass

version = sys.argv[2]


@dataclasses.dataclass(frozen=True)
class Tag(ModulePass):
    argument = "test-persistent-tag"
    summary = "Tag @main with the pass's version"

    def run(self, module):
        ir_utils.find_function(module, "main").attributes["test.tag"] = ir.StringAttr.get(version)


Tag.version = version
register_pass(Tag)
pxla_mlir.enable_compilation_cache(sys.argv[1])
hits = []
jax.monitoring.register_event_listener(lambda name, **kw: hits.append(name) if name.endswith("cache_hits") else 0)
f = pxla_mlir.pmap(lambda x: lax.psum(x, "i"), "i", extra_passes="test-persistent-tag")
out = f(np.ones((8, 2), np.float32))
print(len(hits), float(np.asarray(out).sum()))
'''


@pytest.mark.subprocess
@pytest.mark.slow
def test_the_persistent_cache_follows_the_passes_version(tmp_path):
    import subprocess
    import sys

    def run(version):
        p = subprocess.run([sys.executable, "-c", PERSISTENT, str(tmp_path), version], capture_output=True,
                           text=True, timeout=240, env={"PATH": "/usr/bin:/bin"})
        assert p.returncode == 0, p.stderr[-2000:]
        return p.stdout.split()

    assert run("1")[0] == "0"  # cold
    assert run("1")[0] == "1"  # the same pass and version: loaded
    assert run("2") == ["0", "128.0"]  # the pass changed: compiled anew, never the stale executable


SCALE_PLUGIN = '''
import dataclasses
from jaxlib.mlir import ir
from pxla_mlir.passes import ModulePass


@dataclasses.dataclass(frozen=True)
class ScaleResults(ModulePass):
    argument = "test-scale-results"
    summary = "Adds @main's results to themselves FACTOR - 1 times"
    version = "VERSION"

    def run(self, module):
        main = next(op for op in module.regions[0].blocks[0].operations
                    if ir.StringAttr(op.attributes["sym_name"]).value == "main")
        ret = main.regions[0].blocks[0].operations[len(main.regions[0].blocks[0].operations) - 1]
        with ir.InsertionPoint(ret):
            for i, v in enumerate(list(ret.operands)):
                total = v
                for _ in range(FACTOR - 1):
                    total = ir.Operation.create("mhlo.add", results=[v.type], operands=[total, v]).result
                ret.operands[i] = total
'''


@pytest.mark.parametrize("kind", ["pmap", "xmap", "jit"])
def test_a_plugin_file_edited_and_loaded_again_runs_its_new_version_in_old_and_new_maps(tmp_path, kind):
    from pxla_mlir.mlir.pass_infra import plugins

    path = tmp_path / "scale.py"
    path.write_text(SCALE_PLUGIN.replace("VERSION", "1").replace("FACTOR", "2"))
    plugins.load_plugin(str(path))

    def fun(x):  # a function of its own: the caches are shared by function
        return lax.psum(x, "i") * 1.0

    ctx = pxla_mlir.Mesh.create({"x": 8}) if kind == "xmap" else _null()
    with ctx:
        before = make(kind, "test-scale-results", fun)
        plain = np.asarray(jax.vmap(fun, axis_name="i")(X))
        np.testing.assert_array_equal(np.asarray(before(X)), 2 * plain)
        path.write_text(SCALE_PLUGIN.replace("VERSION", "2").replace("FACTOR", "3"))
        os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
        plugins.load_plugin(str(path))
        np.testing.assert_array_equal(np.asarray(before(X)), 3 * plain)  # the map made before
        np.testing.assert_array_equal(np.asarray(make(kind, "test-scale-results", fun)(X)), 3 * plain)
        assert "test-scale-results@2" in before.lower(X).pipeline
