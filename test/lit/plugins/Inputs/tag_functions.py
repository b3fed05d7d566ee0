"""A pass plugin for the lit tests beside it: tags each public function with ``plugin.tag = N``."""

import dataclasses

from jaxlib.mlir import ir

from pxla_mlir.passes import ModulePass, PassError, option


@dataclasses.dataclass(frozen=True)
class TagFunctionsPass(ModulePass):
    argument = "tag-functions"
    summary = "Tag every public function with plugin.tag = N"

    n: int = option(1, "the tag, a non-negative integer")

    def run(self, module):
        for op in module.regions[0].blocks[0].operations:
            if op.operation.name != "func.func" or _private(op):
                continue
            if self.n < 0:
                raise PassError(op, f"n={self.n}: a tag is a non-negative integer")
            if "plugin.tag" in op.attributes:
                self.error(op, "already tagged: run tag-functions once")
                continue
            op.attributes["plugin.tag"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), self.n)


def _private(op) -> bool:
    return "sym_visibility" in op.attributes and ir.StringAttr(op.attributes["sym_visibility"]).value == "private"
