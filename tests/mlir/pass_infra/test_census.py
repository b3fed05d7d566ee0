"""The census a pipeline's passes share: a pass that declares the ops it acts on is skipped when the module
holds none of them, and never on a census older than the module (after a pass that rewrote, after jaxlib
passes, on the next module a PassManager runs on)."""

import dataclasses

import pytest
from jaxlib.mlir import ir

from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.pass_infra import census
from pxla_mlir.mlir.pass_infra.pipeline import Pipeline
from pxla_mlir.passes import ModulePass

PLAIN = """
func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.add %a, %a : tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""
CUSTOM_CALL = """
func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.custom_call @Something(%a) : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""

RAN: list[str] = []


@dataclasses.dataclass(frozen=True)
class OnCustomCalls(ModulePass):
    argument = "test-on-custom-calls"
    summary = "Records that it ran"
    checks_only = True
    acts_on = frozenset({"mhlo.custom_call"})

    def run(self, module):
        RAN.append(self.argument)


@dataclasses.dataclass(frozen=True)
class OnMultiplies(OnCustomCalls):
    argument = "test-on-multiplies"
    acts_on = frozenset({"stablehlo.multiply"})


@dataclasses.dataclass(frozen=True)
class AddsAMultiply(ModulePass):
    """Rewrites the module (declares no ops: it always runs)."""

    argument = "test-adds-a-multiply"
    summary = "Turns each add into a multiply"

    def run(self, module):
        from jaxlib.mlir.dialects import stablehlo

        for op in list(module.regions[0].blocks[0].operations[0].regions[0].blocks[0].operations):
            if op.name == "stablehlo.add":
                with ir.InsertionPoint(op):
                    new = stablehlo.MulOp(op.operands[0], op.operands[1])
                op.results[0].replace_all_uses_with(new.result)
                op.erase()


@pytest.fixture
def walks(monkeypatch):
    RAN.clear()
    taken: list[int] = []
    names_in = census._names_in
    monkeypatch.setattr(census, "_names_in", lambda module: taken.append(1) or names_in(module))
    return taken


def run(steps, *texts):
    ctx = make_context()
    pm = Pipeline(tuple(steps)).pass_manager(ctx, "none")
    with ctx:
        for text in texts:
            pm.run(ir.Module.parse(text).operation)


def test_a_pass_runs_only_on_a_module_holding_what_it_acts_on(walks):
    run([OnMultiplies(), OnCustomCalls()], PLAIN)
    assert RAN == [] and len(walks) == 1, "skipped passes share one walk"
    run([OnCustomCalls(), AddsAMultiply(), OnMultiplies()], PLAIN)  # the census taken before the rewrite
    assert RAN == ["test-on-multiplies"] and len(walks) == 3, "a pass that rewrote leaves no census behind"


def test_jaxlib_passes_make_the_census_stale(walks):
    # Before the legalization the module holds a stablehlo.custom_call; after it, an mhlo.custom_call.
    run([OnCustomCalls(), "stablehlo-legalize-to-hlo", OnCustomCalls()], CUSTOM_CALL)
    assert RAN == ["test-on-custom-calls"] and len(walks) == 2


def test_a_pass_manager_run_again_looks_at_the_new_module(walks):
    run([OnMultiplies()], PLAIN, PLAIN.replace("stablehlo.add", "stablehlo.multiply"))
    assert RAN == ["test-on-multiplies"] and len(walks) == 2


def test_every_builtin_pass_names_the_ops_it_acts_on_with_their_dialect():
    """What plugins are held to (plugins._check): a set of dialect-qualified op names, or none."""
    from pxla_mlir.mlir.pass_infra.registry import REGISTRY

    declared = {name: REGISTRY.load(name).acts_on for name in REGISTRY.passes}
    assert any(declared.values())
    for name, acts_on in declared.items():
        assert isinstance(acts_on, frozenset) and all("." in op for op in acts_on), (name, acts_on)
