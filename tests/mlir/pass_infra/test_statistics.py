"""Pass statistics: declared on a pass (built-in or a plugin's), counted while it runs, reported in mlir-opt's
format by pxla-opt --mlir-pass-statistics, and listed in the pass's docs."""

import pytest
from plugin_helpers import MODULE, clean_registry, write  # noqa: F401 (a fixture)

from pxla_mlir.mlir.cli import pass_docs, pxla_opt
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.passes import ModulePass, Statistic

pytestmark = pytest.mark.usefixtures("clean_registry")

COUNTING = '''
import dataclasses
from pxla_mlir.passes import ModulePass, Statistic


@dataclasses.dataclass(frozen=True)
class CountFunctions(ModulePass):
    argument = "count-functions"
    summary = "Counts the functions"
    checks_only = True

    functions = Statistic("functions-seen", "functions in the module")
    publics = Statistic("public-functions", "public ones among them")

    def run(self, module):
        for op in module.regions[0].blocks[0].operations:
            self.functions.add()
            if str(op.attributes["sym_visibility"]) != '"private"':
                self.publics.add()
'''

TWO = MODULE + """func.func private @helper(%a: tensor<3xf32>) -> tensor<3xf32> {
  return %a : tensor<3xf32>
}
"""


def test_a_plugins_counters_are_reported_as_mlir_opt_reports_them(tmp_path, capsys):
    plugin = write(tmp_path, "counting.py", COUNTING)
    module = write(tmp_path, "in.mlir", TWO)
    assert pxla_opt.main([module, f"--load-pass-plugin={plugin}", "-count-functions", "-cse",
                          "-count-functions", "--mlir-pass-statistics", "-o", str(tmp_path / "out.mlir")]) == 0
    report = capsys.readouterr().err.splitlines()
    assert report[3:] == [
        "'builtin.module' Pipeline",
        "  CountFunctions",
        "    (functions-seen) 2 - functions in the module",
        "    (public-functions) 1 - public ones among them",
        "  cse",
        "  CountFunctions",
        "    (functions-seen) 2 - functions in the module",
        "    (public-functions) 1 - public ones among them",
        "",
    ], report


def test_declared_counters_are_in_the_docs(tmp_path):
    from pxla_mlir.mlir.pass_infra import plugins

    plugins.load_plugin(write(tmp_path, "counting.py", COUNTING))
    cls = REGISTRY.load("count-functions")
    assert [s.name for s in cls.statistics()] == ["functions-seen", "public-functions"]
    assert "- `functions-seen`: functions in the module" in pass_docs.markdown("count-functions")
    assert "  functions-seen: functions in the module" in pass_docs.text("count-functions")
    assert "shards-expanded" in pass_docs.text("pxla-expand-shard")  # the built-in passes count too


def test_counting_outside_a_run_counts_nowhere():
    class Counts(ModulePass):
        argument = "counts"
        summary = "x"
        n = Statistic("n", "n")

        def run(self, module):
            pass

    Counts().n.add()  # no error, and no run to count in
    assert Counts.statistics() == [Statistic("n", "n")]
