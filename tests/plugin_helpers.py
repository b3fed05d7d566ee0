"""Plugin files the plugin tests write (tests/mlir/pass_infra, tests/mlir/cli), and a registry fixture."""

import pytest

from pxla_mlir.mlir.pass_infra.registry import REGISTRY

#: A plugin with one pass that has an option: it tags every public function with ``plugin.tag = N``.
TAG_PLUGIN = '''
"""A pass that tags functions."""
import dataclasses

from jaxlib.mlir import ir

from pxla_mlir.passes import ModulePass, PassError, option


@dataclasses.dataclass(frozen=True)
class TagFunctions(ModulePass):
    argument = "tag-functions"
    summary = "Tag every function with plugin.tag"
    version = "2"

    n: int = option(1, "the tag")

    def run(self, module):
        for op in module.regions[0].blocks[0].operations:
            if self.n < 0:
                raise PassError(op, "n must not be negative")
            op.attributes["plugin.tag"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), self.n)
'''

#: Passes that go wrong in each way a pass can.
BAD_PASSES = '''
import dataclasses

from pxla_mlir.passes import ModulePass


@dataclasses.dataclass(frozen=True)
class Raises(ModulePass):
    argument = "plugin-raises"
    summary = "Raises"

    def run(self, module):
        raise ZeroDivisionError("division by zero")


@dataclasses.dataclass(frozen=True)
class BreaksIR(ModulePass):
    argument = "plugin-breaks-ir"
    summary = "Removes every func.return, which the verifier refuses"

    def run(self, module):
        for f in module.regions[0].blocks[0].operations:
            for op in list(f.regions[0].blocks[0].operations):
                op.erase()


@dataclasses.dataclass(frozen=True)
class DeletesMain(ModulePass):
    argument = "plugin-deletes-main"
    summary = "Erases @main"

    def run(self, module):
        for op in list(module.regions[0].blocks[0].operations):
            op.erase()
'''

MODULE = """func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  return %a : tensor<3xf32>
}
"""


@pytest.fixture
def clean_registry():
    """The registry as it was, after the test; no installed entry points read."""
    with REGISTRY.restored_after():
        REGISTRY.entry_points_read = True
        yield


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)
