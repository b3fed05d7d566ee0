"""What a plugin's pass is held to (pass_infra/plugin_checks.py and the bridge in base.py): however it goes wrong,
one error naming the pass and its plugin; never a signal, a silently changed program or a lost file."""

import pathlib
import subprocess
import sys
import textwrap

import pytest
from jaxlib.mlir import ir
from plugin_helpers import MODULE, clean_registry, write  # noqa: F401 (a fixture)

from pxla_mlir.mlir.cli import pxla_opt
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.pass_infra import Pipeline, PipelineFailure, plugins, run_pipeline
from pxla_mlir.mlir.pass_infra.options import OptionError, quoted, unquoted

pytestmark = pytest.mark.usefixtures("clean_registry")

MISBEHAVING = '''
import dataclasses
import sys

from jaxlib.mlir import ir

from pxla_mlir.passes import ModulePass, option

KEPT = []


def _main(module):
    return next(op for op in module.regions[0].blocks[0].operations
                if ir.StringAttr(op.attributes["sym_name"]).value == "main")


@dataclasses.dataclass(frozen=True)
class AddsArgument(ModulePass):
    argument = "adds-argument"
    summary = "Gives @main a second argument"

    def run(self, module):
        main = _main(module)
        block = main.regions[0].blocks[0]
        block.add_argument(ir.RankedTensorType.get([3], ir.F32Type.get()), main.location)
        inputs = [a.type for a in block.arguments]
        results = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


@dataclasses.dataclass(frozen=True)
class Donates(ModulePass):
    argument = "donates"
    summary = "Marks @main's argument donated"

    def run(self, module):
        main = _main(module)
        main.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get({"jax.buffer_donor": ir.BoolAttr.get(True)})])


@dataclasses.dataclass(frozen=True)
class SaysItChecks(ModulePass):
    argument = "says-it-checks"
    summary = "Declared checks_only, changes the module"
    checks_only = True

    def run(self, module):
        _main(module).attributes["test.changed"] = ir.UnitAttr.get()


@dataclasses.dataclass(frozen=True)
class Exits(ModulePass):
    argument = "exits"
    summary = "Calls sys.exit"

    def run(self, module):
        sys.exit(5)


class _NoStr(Exception):
    def __str__(self):
        raise RuntimeError("no str")


@dataclasses.dataclass(frozen=True)
class RaisesUnprintable(ModulePass):
    argument = "raises-unprintable"
    summary = "Raises an exception whose str() raises"

    def run(self, module):
        raise _NoStr()


@dataclasses.dataclass(frozen=True)
class Keeps(ModulePass):
    argument = "keeps"
    summary = "Keeps the module and its ops after run"
    checks_only = True

    def run(self, module):
        KEPT.append(module)
        for op in module.regions[0].blocks[0].operations:
            KEPT.append(op)
            KEPT.extend(op.regions[0].blocks[0].operations)


@dataclasses.dataclass(frozen=True)
class Say(ModulePass):
    argument = "say"
    summary = "Tags @main with its option"
    s: str = option("x", "the text")

    def run(self, module):
        _main(module).attributes["test.s"] = ir.StringAttr.get(self.s)
'''


@pytest.fixture
def plugin(tmp_path):
    path = write(tmp_path, "misbehaving.py", MISBEHAVING)
    plugins.load_plugin(path)
    return path


def run(pipeline: str, *, keep_main: bool = False) -> str:
    with make_context() as ctx:
        module = ir.Module.parse(MODULE)
        run_pipeline(module, Pipeline.parse(pipeline, ctx), reproducer=False, keep_main=keep_main)
        return str(module)


@pytest.mark.parametrize("name, said", [
    ("adds-argument", "changed the signature of @main, which the map launches as it was: it has 2 arguments "
                      "instead of 1"),
    ("donates", "changed the signature of @main, which the map launches as it was: the attributes of argument 0 "
                "are {jax.buffer_donor = true} instead of {}"),
])
def test_in_a_map_a_plugin_pass_keeps_mains_signature(plugin, name, said):
    with pytest.raises(PipelineFailure) as e:
        run(f"builtin.module({name})", keep_main=True)
    assert f"{name} (plugin {plugin}) {said}" in str(e.value)
    assert "@main(" in run(f"builtin.module({name})")  # elsewhere (pxla-opt) it may


def test_a_checks_only_pass_that_changes_the_module_is_refused(plugin):
    with pytest.raises(PipelineFailure) as e:
        run("builtin.module(says-it-checks)")
    assert f"says-it-checks (plugin {plugin}) is declared checks_only but changed the module" in str(e.value)


@pytest.mark.parametrize("name, said", [
    ("exits", "exits (plugin {}) called sys.exit(5): a pass reports a problem with `raise PassError(op, message)`"),
    ("raises-unprintable", "internal error in raises-unprintable (plugin {}): _NoStr: <_NoStr that cannot be printed>"),
])
def test_any_way_a_pass_ends_names_it(plugin, name, said, capsys, tmp_path):
    with pytest.raises(PipelineFailure) as e:
        run(f"builtin.module({name})")
    assert said.format(plugin) in str(e.value)
    module = write(tmp_path, "in.mlir", MODULE)
    assert pxla_opt.main([module, f"--load-pass-plugin={plugin}", f"-{name}"]) == 1
    assert said.format(plugin) in capsys.readouterr().err


KEEPER = """
import atexit, gc, sys
from pxla_mlir.mlir.cli import pxla_opt
from pxla_mlir.mlir.pass_infra import plugins
plugins.load_plugin(sys.argv[1])
kept = sys.modules[next(m for m in sys.modules if m.startswith("pxla_plugin_") and "misbehaving" in m)].KEPT

def touch():
    valid = raised = 0
    for op in kept:
        try:
            str(op)
            valid += 1
        except RuntimeError as e:
            assert "invalidated" in str(e), e
            raised += 1
    print("kept", len(kept), "valid", valid, "raised", raised, flush=True)

atexit.register(touch)  # after the module is freed
code = pxla_opt.main([sys.argv[2], "--load-pass-plugin", sys.argv[1], "-keeps", "-canonicalize", "-o", sys.argv[3]])
gc.collect()
touch()
sys.exit(code)
"""


@pytest.mark.subprocess
def test_ops_a_pass_keeps_never_kill_the_process(plugin, tmp_path):
    """Touched after later passes and after the module is freed, and again at exit: valid IR, or an error."""
    module = write(tmp_path, "in.mlir", MODULE)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(KEEPER), plugin, module, str(tmp_path / "out.mlir")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    lines = [line for line in proc.stdout.splitlines() if line.startswith("kept")]
    assert len(lines) == 2 and all(line == "kept 3 valid 2 raised 1" for line in lines), proc.stdout


def test_the_output_is_written_only_when_the_run_succeeds(plugin, tmp_path, capsys):
    module = write(tmp_path, "in.mlir", MODULE)
    out = tmp_path / "out.mlir"
    out.write_text("an earlier good output\n")
    assert pxla_opt.main([module, f"--load-pass-plugin={plugin}", "-exits", "-o", str(out)]) == 1
    assert out.read_text() == "an earlier good output\n"
    broken = write(tmp_path, "broken.mlir", "func.func @main( {\n")
    assert pxla_opt.main([broken, "-canonicalize", "-o", str(out)]) == 1
    assert out.read_text() == "an earlier good output\n"
    assert pxla_opt.main([module, f"--load-pass-plugin={plugin}", "-exits", "-o", module]) == 1
    assert pathlib.Path(module).read_text() == MODULE  # -o naming the input never destroys it
    assert pxla_opt.main([module, "-canonicalize", "-o", module]) == 0
    assert "func.func public @main" in pathlib.Path(module).read_text()
    assert pxla_opt.main([module, "-canonicalize", "-o", str(out)]) == 0
    assert "func.func public @main" in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.mlir", "in.mlir", "misbehaving.py", "out.mlir"]
    capsys.readouterr()


def test_one_pipeline_flag(capsys, tmp_path):
    module = write(tmp_path, "in.mlir", MODULE)
    assert pxla_opt.main([module, "-p", "builtin.module(canonicalize)", "-p", "builtin.module(cse)"]) == 2
    assert "given twice ('builtin.module(canonicalize)' and 'builtin.module(cse)')" in capsys.readouterr().err


@pytest.mark.parametrize("flag, text", [
    ('-say=s="a b"', "a b"), ("-say=s='a b'", "a b"), ("-say=s={a b}", "a b"), ('-say=s="a } b"', "a } b"),
    ('-say=s="a\nb"', "a\\0Ab"), ("-say=s=a,b", "a,b"),
])
def test_option_values_are_quoted_as_mlir_opt_quotes_them(plugin, tmp_path, capsys, flag, text):
    module = write(tmp_path, "in.mlir", MODULE)
    code = pxla_opt.main([module, f"--load-pass-plugin={plugin}", flag])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f'test.s = "{text}"' in captured.out


@pytest.mark.parametrize("value", ["plain", "a b", "it's", 'say "hi"', "x=1,y", "{braced}", "line\nbreak", ""])
def test_a_pipeline_prints_as_text_that_reads_back(plugin, value):
    with make_context() as ctx:
        first = Pipeline.parse(f"builtin.module(say{{s={quoted(value)}}})", ctx)
        assert first.steps[0].s == value
        again = Pipeline.parse(str(first), ctx)
        assert again.steps[0].s == value and str(again) == str(first)
    assert unquoted(quoted(value)) == value or value == ""


def test_a_value_that_cannot_be_written_says_so():
    with pytest.raises(OptionError, match="cannot be written"):
        quoted("\"' }{ }")


DICT_OPTION = '''
import dataclasses
from pxla_mlir.passes import ModulePass, option


@dataclasses.dataclass(frozen=True)
class HasDict(ModulePass):
    argument = "has-dict"
    summary = "An option pipeline text cannot give"
    d: dict = option(None, "a dict")

    def run(self, module):
        pass
'''


def test_a_plugins_bad_options_are_usage_errors_naming_it(plugin, tmp_path, capsys):
    module = write(tmp_path, "in.mlir", MODULE)
    bad = write(tmp_path, "dict_option.py", DICT_OPTION)
    assert pxla_opt.main([module, f"--load-pass-plugin={bad}", "-has-dict"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"pass plugin '{bad}': pass 'has-dict'" in err and "has type dict" in err
    assert "internal error" not in err
    assert pxla_opt.main([module, f"--load-pass-plugin={plugin}", "-p", "builtin.module(say{n=three})"]) == 2
    err = capsys.readouterr().err
    assert f"(plugin {plugin})" in err and "internal error" not in err


class _BrokenEntryPoint:
    name, value, module, attr, dist = "x", "no_such_package_x.passes", "no_such_package_x.passes", None, None


def test_a_broken_installed_plugin_is_a_note_not_every_names_error(monkeypatch, tmp_path, capsys):
    import importlib.metadata

    from pxla_mlir.mlir.pass_infra.registry import REGISTRY

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [_BrokenEntryPoint()])
    REGISTRY.entry_points_read = False
    module = write(tmp_path, "in.mlir", MODULE)
    assert pxla_opt.main([module, "-canonicalise"]) == 2  # a typo of a built-in pass: still its did-you-mean
    err = capsys.readouterr().err
    assert "did you mean '-canonicalize'" in err or "did you mean 'canonicalize'" in err, err
    assert pxla_opt.main([module, "-canonicalize"]) == 0  # the names it could not provide still run
    capsys.readouterr()
    assert pxla_opt.main(["--list-passes"]) == 0
    assert "warning: installed pass plugin entry point 'x = no_such_package_x.passes'" in capsys.readouterr().out
    assert pxla_opt.main([module, "-p", "builtin.module(maybe-the-plugins-pass)"]) == 2
    assert "no_such_package_x" in capsys.readouterr().err  # the unknown name's error notes it
