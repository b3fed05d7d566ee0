"""Plugins from Python: load_plugin, register_pass, entry points, and what a bad plugin gets."""

import dataclasses
import importlib.metadata
import os
import pathlib
import subprocess
import sys
import time

import pytest
from jaxlib.mlir import ir
from plugin_helpers import BAD_PASSES, MODULE, TAG_PLUGIN, clean_registry, write  # noqa: F401 (a fixture)

import pxla_mlir
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.pass_infra import Pipeline, PipelineFailure, plugins, reproducer, run_pipeline
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.passes import ModulePass, option

pytestmark = pytest.mark.usefixtures("clean_registry")


def run(pipeline: str, text: str = MODULE, **kw) -> str:
    with make_context() as ctx:
        module = ir.Module.parse(text)
        run_pipeline(module, Pipeline.parse(pipeline, ctx), reproducer=False, **kw)
        return str(module)


def test_a_loaded_pass_runs_with_its_options(tmp_path):
    [cls] = plugins.load_plugin(write(tmp_path, "tag.py", TAG_PLUGIN))
    assert cls.argument == "tag-functions" and REGISTRY.load("tag-functions") is cls
    assert "plugin.tag = 2 : i64" in run("builtin.module(tag-functions{n=2})")
    assert REGISTRY.plugin_specs() == (str(tmp_path / "tag.py"),)
    assert plugins.load_plugin(str(tmp_path / "tag.py")) == [cls]  # once only


def test_a_dotted_module_loads(tmp_path, monkeypatch):
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    write(tmp_path, "my_pkg/passes.py", TAG_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    [cls] = plugins.load_plugin("my_pkg.passes")
    assert REGISTRY.source("tag-functions") == "my_pkg.passes"
    with make_context():
        pipeline = Pipeline.parse("builtin.module(tag-functions)", ir.Context())
    assert pipeline.plugins() == ("my_pkg.passes",) and cls.version == "2"


def test_register_pass_is_public_and_a_decorator():
    @pxla_mlir.register_pass
    @dataclasses.dataclass(frozen=True)
    class Upper(ModulePass):
        argument = "test-noop"
        summary = "Does nothing"
        k: int = option(3, "unused")

        def run(self, module):
            pass

    assert REGISTRY.load("test-noop") is Upper
    assert "func.func public @main" in run("builtin.module(test-noop{k=4})")


@pytest.mark.parametrize(("text", "fragment"), [
    ("import nothing_here_at_all\n", "does not import: ModuleNotFoundError: No module named 'nothing_here_at_all'"),
    ("def f(:\n", "does not import: "),
    ("raise RuntimeError('boom')\n", "does not import: RuntimeError: boom at "),
    ("x = 1\n", "defines no pass"),
    ("class Thing:\n    argument = 'thing'\n", "class Thing has an argument but is not a pass"),
    ("import dataclasses\nfrom pxla_mlir.passes import ModulePass\n"
     "@dataclasses.dataclass(frozen=True)\nclass P(ModulePass):\n    summary = 's'\n    def run(self, m): pass\n",
     "P has no argument: set argument = 'my-pass'"),
    ("import dataclasses\nfrom pxla_mlir.passes import ModulePass\n"
     "@dataclasses.dataclass(frozen=True)\nclass P(ModulePass):\n    argument = 'canonicalize'\n    summary = 's'\n"
     "    def run(self, m): pass\n", "has the name of jaxlib's pass 'canonicalize': rename it"),
    ("import dataclasses\nfrom pxla_mlir.passes import ModulePass\n"
     "@dataclasses.dataclass(frozen=True)\nclass P(ModulePass):\n    argument = 'pxla-expand-shard'\n"
     "    summary = 's'\n    def run(self, m): pass\n", "has the name of the built-in pass 'pxla-expand-shard'"),
    ("import dataclasses\nfrom pxla_mlir.passes import ModulePass\n"
     "@dataclasses.dataclass(frozen=True)\nclass P(ModulePass):\n    argument = 'pxla-pmap-pipeline'\n"
     "    summary = 's'\n    def run(self, m): pass\n", "has the name of the built-in pipeline 'pxla-pmap-pipeline'"),
    ("from pxla_mlir.passes import ModulePass\nclass P(ModulePass):\n    argument = 'p'\n    summary = 's'\n"
     "    n: int = 3\n    def run(self, m): pass\n", "decorate it with @dataclasses.dataclass(frozen=True)"),
    ("import dataclasses\nfrom pxla_mlir.passes import ModulePass\n"
     "@dataclasses.dataclass(frozen=True)\nclass P(ModulePass):\n    argument = 'p'\n    summary = 's'\n",
     "has no run(self, module) method"),
    *((f"import dataclasses\nfrom pxla_mlir.passes import ModulePass\n"
       f"@dataclasses.dataclass(frozen=True)\nclass P(ModulePass):\n    argument = 'p'\n    summary = 's'\n"
       f"    acts_on = {acts_on}\n    def run(self, m): pass\n",
       "acts_on must be a frozenset of op names with their dialect")
      for acts_on in ("'mhlo.add'", "('mhlo.add',)", "frozenset({'add'})", "frozenset({1})")),
])
def test_a_bad_plugin_says_what_and_registers_nothing(tmp_path, text, fragment):
    path = write(tmp_path, "bad.py", text)
    before = REGISTRY.registered()
    with pytest.raises(plugins.PluginError) as e:
        plugins.load_plugin(path)
    assert fragment in str(e.value) and f"'{path}'" in str(e.value)
    assert "\n" not in str(e.value)
    assert before == REGISTRY.registered() and REGISTRY.plugin_specs() == ()


def test_a_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "bad.py", "x = 1\ndef f(:\n")
    with pytest.raises(plugins.PluginError, match=rf"{path}:2: SyntaxError"):
        plugins.load_plugin(path)


def test_missing_file_and_module(tmp_path):
    with pytest.raises(plugins.PluginError, match="does not exist: give the path to a .py file"):
        plugins.load_plugin(str(tmp_path / "nope.py"))
    with pytest.raises(plugins.PluginError, match="no module named 'no_such_pkg'.*PYTHONPATH"):
        plugins.load_plugin("no_such_pkg.passes")
    with pytest.raises(plugins.PluginError, match="neither a .py file nor a dotted module"):
        plugins.load_plugin("not a module")
    assert isinstance(plugins.PluginError("x"), ValueError)


def test_a_clash_between_plugins_keeps_the_first(tmp_path):
    plugins.load_plugin(write(tmp_path, "a.py", TAG_PLUGIN))
    other = write(tmp_path, "b.py", TAG_PLUGIN + "\nclass Later(TagFunctions):\n    argument = 'later'\n")
    with pytest.raises(plugins.PluginError, match=r"'tag-functions'.*already loaded from .*a\.py.*rename one"):
        plugins.load_plugin(other)
    assert REGISTRY.source("tag-functions").endswith("a.py") and not REGISTRY.is_registered("later")


def test_a_plugin_that_registers_then_fails_keeps_nothing(tmp_path):
    text = TAG_PLUGIN.replace("@dataclasses.dataclass", "@pxla_mlir.register_pass\n@dataclasses.dataclass")
    text = "import pxla_mlir\n" + text + "\nraise ImportError('late')\n"
    with pytest.raises(plugins.PluginError, match="ImportError: late"):
        plugins.load_plugin(write(tmp_path, "late.py", text))
    assert not REGISTRY.is_registered("tag-functions")


def test_failing_passes_name_the_plugin_and_the_pass(tmp_path):
    path = write(tmp_path, "bad_passes.py", BAD_PASSES)
    plugins.load_plugin(path)
    expected = {
        "plugin-raises": f"internal error in plugin-raises (plugin {path}): ZeroDivisionError: division by zero",
        "plugin-breaks-ir": f"plugin-breaks-ir (plugin {path}) left invalid IR (the verifier",
        "plugin-deletes-main": f"plugin-deletes-main (plugin {path}) removed the public function @main",
    }
    for name, fragment in expected.items():
        for verify_each in (True, False):  # verified after a plugin's pass even with the verifier off
            with pytest.raises(PipelineFailure) as e:
                run(f"builtin.module({name})", verify_each=verify_each)
            assert fragment in str(e.value), (name, verify_each, str(e.value))


def test_bad_options_name_the_plugin(tmp_path):
    path = write(tmp_path, "tag.py", TAG_PLUGIN)
    plugins.load_plugin(path)
    with make_context() as ctx, pytest.raises(Exception, match=rf"tag-functions: option 'n'.*\(plugin {path}\)"):
        Pipeline.parse("builtin.module(tag-functions{n=x})", ctx)


class _EntryPoint:
    def __init__(self, name, value):
        self.name, self.value = name, value
        self.module, _, attr = value.partition(":")
        self.attr = attr or None
        self.dist = None

    def load(self):
        module = importlib.import_module(self.module)
        return getattr(module, self.attr) if self.attr else module


def test_entry_points_load_when_a_name_is_unknown(tmp_path, monkeypatch):
    write(tmp_path, "ep_passes.py", TAG_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    calls = []

    def entry_points(group):
        calls.append(group)
        return [_EntryPoint("tag", "ep_passes:TagFunctions")]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    REGISTRY.entry_points_read = False
    assert plugins.resolve("canonicalize") is None and calls == []  # a jaxlib name reads no entry point
    assert plugins.resolve("tag-functions").__name__ == "TagFunctions" and calls == ["pxla_mlir.passes"]
    assert plugins.resolve("nothing-at-all") is None and calls == ["pxla_mlir.passes"]  # once
    assert REGISTRY.specs_for(["tag-functions"]) == ("ep_passes",)


def test_a_broken_entry_point_is_a_note_on_unknown_names_only(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [_EntryPoint("x", "no_such_mod_x:P")])
    REGISTRY.entry_points_read = False
    assert plugins.resolve("unknown-name") is None  # no error for every name
    assert "entry point 'x = no_such_mod_x:P' does not load" in REGISTRY.broken_note()
    with make_context() as ctx, pytest.raises(Exception) as e:  # a typo still gets its did-you-mean
        Pipeline.parse("builtin.module(canonicalise)", ctx)
    assert "did you mean 'canonicalize'?" in str(e.value) and "no_such_mod_x" in str(e.value)


def test_the_public_names():
    import pxla_mlir.passes as public
    from pxla_mlir.mlir.core.diagnostics import PassError
    from pxla_mlir.mlir.pass_infra import helpers

    assert public.ModulePass is ModulePass and public.PassError is PassError and callable(public.option)
    assert public.helpers is helpers
    assert set(public.__all__) == {"ModulePass", "PassError", "Statistic", "helpers", "option"}


@pytest.mark.subprocess
def test_importing_the_public_package_loads_no_jax():
    code = "import sys, pxla_mlir.passes; assert not any(m.split('.')[0] in ('jax', 'jaxlib') for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_failing_pipeline_saves_a_reproducer_that_names_the_plugin(tmp_path, monkeypatch):
    path = write(tmp_path, "bad_passes.py", BAD_PASSES)
    plugins.load_plugin(path)
    monkeypatch.setenv("PXLA_REPRO_DIR", str(tmp_path / "repro"))
    with make_context() as ctx, pytest.raises(PipelineFailure) as e:
        module = ir.Module.parse(MODULE)
        run_pipeline(module, Pipeline.parse("builtin.module(canonicalize,plugin-raises)", ctx))
    saved = e.value.reproducer
    assert saved is not None
    with open(saved, "rb") as f:
        _, recorded = reproducer.split(f.read())
    assert recorded is not None and recorded.plugins == (path,)  # canonicalize is jaxlib's: no plugin
    assert recorded.pipeline.startswith("builtin.module(canonicalize{") and recorded.pipeline.endswith(",plugin-raises)")


def test_an_edited_plugin_file_loads_anew_and_parsed_pipelines_follow(tmp_path):
    path = write(tmp_path, "tag.py", TAG_PLUGIN)
    [first] = plugins.load_plugin(path)
    generation = REGISTRY.generation
    assert "plugin.tag = 1 : i64" in run("builtin.module(tag-functions)")
    assert plugins.load_plugin(path) == [first] and REGISTRY.generation == generation  # unchanged: not again
    edited = TAG_PLUGIN.replace('version = "2"', 'version = "3"').replace("self.n)", "self.n + 10)")
    pathlib.Path(path).write_text(edited)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new time even on a coarse clock
    [second] = plugins.load_plugin(path)
    assert second is not first and second.version == "3" and REGISTRY.load("tag-functions") is second
    assert REGISTRY.generation > generation
    assert "plugin.tag = 11 : i64" in run("builtin.module(tag-functions)")  # not the pipeline parsed before
    with make_context():
        cached = Pipeline.cached("builtin.module(tag-functions)")
    assert type(cached.steps[0]) is second


def test_the_same_plugin_from_a_file_and_as_an_installed_module_is_one_pass(tmp_path, monkeypatch):
    (tmp_path / "twice_pkg").mkdir()
    (tmp_path / "twice_pkg" / "__init__.py").write_text("")
    path = write(tmp_path, "twice_pkg/passes.py", TAG_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    [from_file] = plugins.load_plugin(path)
    [from_module] = plugins.load_plugin("twice_pkg.passes")  # no "has the name of a pass already loaded"
    assert from_module.argument == from_file.argument == "tag-functions"
    assert REGISTRY.load("tag-functions") is from_module


def test_a_failed_load_leaves_the_registry_as_it_was(tmp_path):
    plugins.load_plugin(write(tmp_path, "tag.py", TAG_PLUGIN))
    before = (REGISTRY.registered(), REGISTRY.plugin_specs(), REGISTRY.specs_for(["tag-functions"]))
    clash = TAG_PLUGIN.replace("class TagFunctions", "class Other") + TAG_PLUGIN.replace(
        '"tag-functions"', '"canonicalize"')
    with pytest.raises(plugins.PluginError):
        plugins.load_plugin(write(tmp_path, "clash.py", clash))
    assert (REGISTRY.registered(), REGISTRY.plugin_specs(), REGISTRY.specs_for(["tag-functions"])) == before
