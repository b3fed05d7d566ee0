"""Plugin passes that fail each way a pass can, for load_pass_plugin_failures.mlir."""

import dataclasses

from pxla_mlir.passes import ModulePass


@dataclasses.dataclass(frozen=True)
class RaisesPass(ModulePass):
    argument = "test-raises"
    summary = "Raises a Python exception"

    def run(self, module):
        raise ZeroDivisionError("division by zero")


@dataclasses.dataclass(frozen=True)
class BreaksIRPass(ModulePass):
    argument = "test-breaks-ir"
    summary = "Erases the terminators of the functions"

    def run(self, module):
        for f in module.regions[0].blocks[0].operations:
            for op in list(f.regions[0].blocks[0].operations):
                op.erase()


@dataclasses.dataclass(frozen=True)
class DeletesMainPass(ModulePass):
    argument = "test-deletes-main"
    summary = "Erases every function"

    def run(self, module):
        for op in list(module.regions[0].blocks[0].operations):
            op.erase()
