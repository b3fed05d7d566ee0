"""pxla-inline-manual-computations: a one-partition module keeps no sdy.manual_computation.

With ``mhlo.num_partitions = 1`` every mesh axis has size 1: a manual
region's tiles are its global values, and its body is the program. XLA
compiles such a module without its SPMD partitioner, and that is the only
part of XLA that takes a manual region apart. jaxlib hands a Shardy module
over in Shardy's round-trip form (each ``sdy.manual_computation`` becomes a
call between ``@xla.sdy.GlobalToLocalShape`` and
``@xla.sdy.LocalToGlobalShape`` custom calls); the one-partition pipeline
runs ShardyXLA without propagation, which imports the calls and writes them
back unchanged, and the backend then fails on the first one (TPU:
``Custom emitter for xla.sdy.GlobalToLocalShape not found``; CPU, for a
module given as an ``ir.Module``: ``No registered implementation for untyped
custom call to xla.sdy.GlobalToLocalShape``).

jax never hands such a region over: its shard_map lowering emits no
``ManualComputationOp`` when the manual axes' sizes multiply to 1 (and
Shardy's canonicalizer inlines one like it). This pass does the same for the
pipelines' output: in a module with one partition, each manual computation
is replaced by its body (block arguments by the operands, results by what
``sdy.return`` returns), outermost first. Meshes and the boundary's
``sdy.sharding`` stay (XLA's one-partition pipeline drops them). Modules
with more than one partition are left as they are.

Before::

    module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
      sdy.mesh @mesh = <["i"=1]>
      func.func public @main(%g: tensor<1x12xf32>) -> tensor<1x12xf32> {
        %0 = sdy.manual_computation(%g) in_shardings=[<@mesh, [{"i"}, {}]>] out_shardings=[<@mesh, [{"i"}, {}]>]
            manual_axes={"i"} (%t: tensor<1x12xf32>) {
          %1 = func.call @main_per_device(%t) : (tensor<1x12xf32>) -> tensor<1x12xf32>
          sdy.return %1 : tensor<1x12xf32>
        } : (tensor<1x12xf32>) -> tensor<1x12xf32>
        return %0 : tensor<1x12xf32>

After::

        %0 = func.call @main_per_device(%g) : (tensor<1x12xf32>) -> tensor<1x12xf32>
        return %0 : tensor<1x12xf32>

It fails, at the region, when a tile's type is not its global value's (a
mesh axis larger than 1 in a one-partition module).

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-inline-manual-computations)'
"""

from __future__ import annotations

import dataclasses

from pxla_mlir.mlir.core import ir_utils, pxla_attrs, shardy
from pxla_mlir.mlir.pass_infra import ModulePass, PassError
from pxla_mlir.mlir.pass_infra.statistics import Statistic


@dataclasses.dataclass(frozen=True)
class InlineManualComputationsPass(ModulePass):
    argument = "pxla-inline-manual-computations"
    acts_on = frozenset({shardy.MANUAL_COMPUTATION})
    summary = "Replace each sdy.manual_computation of a one-partition module by its body (as jax lowers it)"

    inlined = Statistic("regions-inlined", "manual computations replaced by their bodies")

    def run(self, module):
        if pxla_attrs.device_counts(module)[1] != 1:
            return
        # walk() lists an op before the ops nested in it: outer regions go first, and an inner
        # region moved out with its parent's body is still the same op (only the terminators go).
        for op in [o for o in ir_utils.walk(module) if o.name == shardy.MANUAL_COMPUTATION]:
            inline(op)
            self.inlined.add()


def inline(op) -> None:
    """Replaces the manual computation ``op`` by its body's ops, in place."""
    body = op.regions[0].blocks[0]
    args, operands = list(body.arguments), list(op.operands)
    for arg, value in zip(args, operands):
        if arg.type != value.type:
            raise PassError(op, f"{shardy.MANUAL_COMPUTATION} in a module with mhlo.num_partitions = 1 has a tile of "
                                f"type {arg.type} for a global value of type {value.type}; with one partition every "
                                f"mesh axis must have size 1")
    for arg, value in zip(args, operands):
        arg.replace_all_uses_with(value)
    ops = [o.operation for o in body.operations]
    terminator, ops = ops[-1], ops[:-1]
    returned = list(terminator.operands)
    for inner in ops:
        inner.move_before(op)
    ir_utils.replace_op(op, returned)
