"""pxla-mlir emit / run / explore with --load-pass-plugin and --extra-passes, as a user types them."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

PLAIN = str(REPO / "examples/pmap_demo.py") + ":inner"  # a plain function: psum over 'j'
MAP = ["--map", "pmap", "--axis-name", "j", "--arg", "f32[4,3]"]

PLUGIN = textwrap.dedent('''
    """A pass that doubles @main's results, and one that tags @main."""
    import dataclasses

    from jaxlib.mlir import ir

    from pxla_mlir.mlir.core import ir_utils
    from pxla_mlir.mlir.pass_infra import ModulePass, option


    def _main_return(module):
        block = ir_utils.find_function(module, "main").regions[0].blocks[0]
        return block.operations[len(block.operations) - 1]


    @dataclasses.dataclass(frozen=True)
    class DoubleResults(ModulePass):
        argument = "demo-double-results"
        summary = "Double @main's results"

        def run(self, module):
            ret = _main_return(module)
            with ir.InsertionPoint(ret):
                doubled = [ir.Operation.create("mhlo.add", results=[v.type], operands=[v, v]).result
                           for v in ret.operands]
            for i, v in enumerate(doubled):
                ret.operands[i] = v


    @dataclasses.dataclass(frozen=True)
    class Tag(ModulePass):
        argument = "demo-tag"
        summary = "Tag @main"
        version = "3"
        tag: str = option("t", "the tag")

        def run(self, module):
            ir_utils.find_function(module, "main").attributes["demo.tag"] = ir.StringAttr.get(self.tag)
''')


def cli(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the CLI sets 8 CPU devices itself
    return subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=300, cwd=cwd)


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "demo_passes.py"
    path.write_text(PLUGIN)
    return path


@pytest.mark.subprocess
def test_emit_runs_the_plugins_passes_before_the_handoff_check(plugin):
    result = cli("emit", PLAIN, *MAP, "--load-pass-plugin", plugin, "--extra-passes", "demo-tag{tag=cli}")
    assert result.returncode == 0, result.stderr
    assert 'demo.tag = "cli"' in result.stdout
    # the pipeline the map ran names the pass, its options and version: replaying it stops after the pass
    after = cli("emit", PLAIN, *MAP, f"--load-pass-plugin={plugin}", "--extra-passes=demo-tag{tag=cli}",
                "--stage", "after:demo-tag")
    assert after.returncode == 0, after.stderr
    assert 'demo.tag = "cli"' in after.stdout


@pytest.mark.subprocess
def test_run_shows_the_pipeline_and_the_changed_numbers(plugin, tmp_path):
    plain = cli("run", PLAIN, *MAP, "--calls", "1")
    doubled = cli("run", PLAIN, *MAP, "--calls", "1", "--load-pass-plugin", plugin,
                  "--extra-passes", "builtin.module(demo-double-results)")
    assert plain.returncode == 0 and doubled.returncode == 0, doubled.stderr
    assert "mhlo-passes={demo-double-results} pass-versions=demo-double-results@1" in doubled.stderr  # what ran
    assert "mhlo-passes" not in plain.stderr

    def numbers(text):
        import re

        return [float(x) for x in re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", text.split("output", 1)[-1])]

    a, b = numbers(plain.stdout), numbers(doubled.stdout)
    assert a and len(a) == len(b)
    assert all(abs(2 * x - y) <= 1e-4 * max(1.0, abs(y)) for x, y in zip(a, b))


@pytest.mark.subprocess
def test_compare_pipeline_names_a_plugin_pass(plugin, tmp_path):
    module = tmp_path / "inner.mlir"
    assert cli("emit", PLAIN, *MAP, "-o", module).returncode == 0
    same = cli("run", module, "--load-pass-plugin", plugin, "--compare-pipeline", "builtin.module(demo-tag)")
    assert same.returncode == 0, same.stderr
    differ = cli("run", module, "--load-pass-plugin", plugin,
                 "--compare-pipeline", "builtin.module(demo-double-results)")
    assert differ.returncode == 1, differ.stderr


@pytest.mark.subprocess
@pytest.mark.parametrize("flags, words", [
    (["--extra-passes", "demo-tga"], ["extra_passes", "unknown pass or pipeline 'demo-tga'",
                                      "did you mean 'demo-tag'"]),
    (["--extra-passes", "demo-tag"], ["unknown pass or pipeline 'demo-tag'"]),  # its plugin not loaded
])
def test_mistakes_are_one_line_and_exit_2(plugin, flags, words):
    load = ["--load-pass-plugin", plugin] if words[0] == "extra_passes" else []
    result = cli("emit", PLAIN, *MAP, *load, *flags)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    for w in words:
        assert w in result.stderr


@pytest.mark.subprocess
def test_a_missing_plugin_is_a_clear_error(tmp_path):
    result = cli("emit", PLAIN, *MAP, "--load-pass-plugin", tmp_path / "nowhere.py")
    assert result.returncode == 2 and "nowhere.py" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.subprocess
def test_explore_lists_the_plugins_pass(plugin, tmp_path):
    page = tmp_path / "page.html"
    result = cli("explore", PLAIN, *MAP, "--load-pass-plugin", plugin, "--extra-passes", "demo-tag", "-o", page)
    assert result.returncode == 0, result.stderr
    assert "demo-tag" in page.read_text()
