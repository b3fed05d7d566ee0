"""pxla-fold-shard-of-unshard: a shard of an unshard along the same axis is the original value.

When one program holds several pmaps over the same axis (``pxla_mlir.jit``,
or a differentiated pmap whose residuals leave the forward pmap and enter
the backward one), a value often leaves one pmap and enters the next
unchanged: an unshard (an all-gather over the axis) immediately sharded
again (each device slices its own piece back out). Same axis, size, stride
and dimension means every device gets back exactly what it had, so the
pair folds to the original value and the collective disappears. Pairs that
differ in any of these stay.

Before::

    %g = mhlo.custom_call @pxla.unshard(%x) {pxla.axis = 0 : i64, pxla.axis_name = "i",
        pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<16x64xf32>) -> tensor<8x16x64xf32>
    %s = mhlo.custom_call @pxla.shard(%g) {pxla.axis = 0 : i64, pxla.axis_name = "i",
        pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x16x64xf32>) -> tensor<16x64xf32>
    %y = mhlo.tanh %s : tensor<16x64xf32>

After (the unshard goes too once nothing else uses it)::

    %y = mhlo.tanh %x : tensor<16x64xf32>

Run it before pxla-expand-shard / pxla-expand-unshard, which turn the
placeholders into slices and collectives::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-fold-shard-of-unshard)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.core.pxla_attrs import CUSTOM_CALLS, SHARD, UNSHARD, Placeholder, placeholders
from pxla_mlir.mlir.pass_infra import ModulePass
from pxla_mlir.mlir.pass_infra.statistics import Statistic


@dataclasses.dataclass(frozen=True)
class FoldShardOfUnshardPass(ModulePass):
    argument = "pxla-fold-shard-of-unshard"
    acts_on = CUSTOM_CALLS  # the placeholders
    summary = "Fold pxla.shard(pxla.unshard(x)) to x when both use the same axis, size, stride and dimension"

    folded = Statistic("shards-folded", "pxla.shard of a pxla.unshard folded to the unsharded value")

    def run(self, module):
        unshards = {u.op.operation: u for u in placeholders(module, UNSHARD)}
        folded = {}  # each unshard is erased at most once
        for shard in placeholders(module, SHARD):
            source = shard.op.operands[0]
            if not isinstance(source, ir.OpResult):
                continue
            unshard = unshards.get(source.owner.operation)
            if unshard is None or _key(unshard) != _key(shard):
                continue
            original = unshard.op.operands[0]
            shard.check(original.type == shard.op.results[0].type,
                        f"it shards an unshard of {original.type} along the same axis, so its result must be "
                        f"{original.type}, got {shard.op.results[0].type}")
            ir_utils.replace_op(shard.op, [original])
            folded[source.owner.operation] = unshard
            self.folded.add()
        for unshard in folded.values():
            if not any(True for _ in unshard.op.results[0].uses):
                ir_utils.erase_op(unshard.op)


def _key(p: Placeholder) -> tuple[int, int, int]:
    return p.axis, p.axis_size, p.stride
