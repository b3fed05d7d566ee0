"""pxla-expand-manual-computation: full_to_shard … shard_to_full regions to one sdy.manual_computation each.

The Shardy counterpart of pxla-expand-manual-sharding. Import (or
pxla-wrap-manual-main) marks the boundary of per-device code with
placeholders: ``@pxla.full_to_shard`` turns a global value into this
device's tile, ``@pxla.shard_to_full`` a tile back into the global value
(``pxla.dims`` of the full value, optional ``pxla.manual_axes``). The ops
between them (what depends on the tiles and what the results are computed
from) become the body of one ``sdy.manual_computation``: its operands are the
full values, its block arguments the tiles, its results the full results,
``in_shardings``/``out_shardings`` the placeholders' ``pxla.dims`` (``"?"``
→ ``{?}``) on the module's ``sdy.mesh`` symbol (pxla-add-sdy-mesh) and
``manual_axes`` the manual mesh axes. Constant-like values the body uses
(operand-free ops such as ``mhlo.constant`` and ``mhlo.partition_id``, and ops
computed from them only) are copied into it, as the region is isolated from
above. Unconnected groups of placeholders give separate regions.

It fails, at the offending op, when per-device code uses a global value
that did not go through ``pxla.full_to_shard``, when a tile leaves the
region without ``pxla.shard_to_full``, or when one region's placeholders
disagree on the mesh or the manual axes.

Before::

    module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
      sdy.mesh @mesh = <["x"=2, "y"=4]>
      func.func public @main(%g: tensor<8x4xf32>) -> tensor<8x4xf32> {
        %t = mhlo.custom_call @pxla.full_to_shard(%g) {pxla.dims = [["x"], ["y"]]} : (tensor<8x4xf32>) -> tensor<4x1xf32>
        %r = func.call @main_per_device(%t) : (tensor<4x1xf32>) -> tensor<4x1xf32>
        %o = mhlo.custom_call @pxla.shard_to_full(%r) {pxla.dims = [["x"], ["y"]]} : (tensor<4x1xf32>) -> tensor<8x4xf32>
        return %o : tensor<8x4xf32>

After::

        %o = sdy.manual_computation(%g) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{"x"}, {"y"}]>]
            manual_axes={"x", "y"} (%t: tensor<4x1xf32>) {
          %r = func.call @main_per_device(%t) : (tensor<4x1xf32>) -> tensor<4x1xf32>
          sdy.return %r : tensor<4x1xf32>
        } : (tensor<8x4xf32>) -> tensor<8x4xf32>
        return %o : tensor<8x4xf32>

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-add-sdy-mesh,pxla-expand-manual-computation)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy

from pxla_mlir.mlir.core import ir_utils, shardy
from pxla_mlir.mlir.core.pxla_attrs import (
    CUSTOM_CALLS,
    FULL_TO_SHARD,
    SHARD_TO_FULL,
    ManualBoundary,
    manual_boundary,
    placeholder_target,
)
from pxla_mlir.mlir.pass_infra import ModulePass, PassError
from pxla_mlir.mlir.sharding import sdy_sharding


@dataclasses.dataclass(frozen=True)
class ExpandManualComputationPass(ModulePass):
    argument = "pxla-expand-manual-computation"
    acts_on = CUSTOM_CALLS  # the placeholders
    summary = "Turn each pxla.full_to_shard ... pxla.shard_to_full region into one sdy.manual_computation"

    def run(self, module):
        blocks = []
        for op in ir_utils.walk(module):
            if op.name != shardy.MANUAL_COMPUTATION:  # nested manual regions are not ours to form
                blocks += [b for r in op.regions for b in r.blocks]
        for block in blocks:
            while True:
                boundaries = [manual_boundary(op.operation, module) for op in block.operations
                              if placeholder_target(op.operation) in (FULL_TO_SHARD, SHARD_TO_FULL)]
                if not boundaries:
                    break
                _Region(block, boundaries, module).build()


def _ancestor_in(block: ir.Block, op: ir.Operation) -> ir.Operation | None:
    """``op`` or the op that holds it, directly in ``block`` (None if outside)."""
    current: ir.Operation | None = op
    while current is not None:
        if current.block == block:
            return current
        current = current.parent.operation if current.parent is not None else None
    return None


def _defining_op(value: ir.Value) -> ir.Operation | None:
    return ir.OpResult(value).owner.operation if isinstance(value, ir.OpResult) else None


def _captured(op: ir.Operation) -> list[ir.Value]:
    """Operands of ``op`` and of the ops nested in it that are defined outside ``op``."""
    inner = set(ir_utils.walk(op))
    out = []
    for nested in inner:
        for v in nested.operands:
            owner = _defining_op(v)
            if owner is None:
                owner = ir.BlockArgument(v).owner.owner
                owner = owner.operation if owner is not None else None
            if owner not in inner:
                out.append(v)
    return out


class _Region:
    """One connected set of placeholders in a block and the per-device ops between them."""

    def __init__(self, block: ir.Block, boundaries: list[ManualBoundary], module):
        self.block, self.module = block, module
        self.ops = [op.operation for op in block.operations]
        self.order = {op: i for i, op in enumerate(self.ops)}
        self.by_op = {b.op: b for b in boundaries}
        self._constant: dict[ir.Operation, bool] = {}
        self.body_ops, self.ins, self.outs = self._collect(boundaries[0])

    # -- which ops go into the region -------------------------------------------------
    def _in_block(self, op: ir.Operation, what: str) -> ir.Operation:
        found = _ancestor_in(self.block, op)
        if found is None:
            raise PassError(op, f"{what} is outside the block of its manual region")
        return found

    def is_constant(self, op: ir.Operation) -> bool:
        """Operand-free ops, and region-free ops computed from those only: copied into the body."""
        if op not in self._constant:
            self._constant[op] = not op.regions and op not in self.by_op and all(
                (d := _defining_op(v)) is not None and d.block == self.block and self.is_constant(d)
                for v in op.operands)
        return self._constant[op]

    def _collect(self, seed: ManualBoundary):
        """Flood fill from one placeholder: users of tiles (forward, until a
        shard_to_full) and what tiles are computed from (backward, until a
        full_to_shard), skipping constants."""
        body, boundaries, work = set(), {seed.op}, [seed.op]
        while work:
            op = work.pop()
            b = self.by_op.get(op)
            forward = b is None or b.to_shard
            backward = b is None or not b.to_shard
            if forward:
                for result in op.results:
                    for use in result.uses:
                        user = self._in_block(use.owner.operation, "a user of a tile")
                        if user in boundaries or user in body:
                            continue
                        if user == self.ops[-1]:  # the block's terminator
                            raise PassError(op, f"a tile ({result.type}) reaches {user.name} without "
                                                f"{SHARD_TO_FULL}; per-device values must leave the manual "
                                                f"region through {SHARD_TO_FULL}")
                        if user in self.by_op and self.by_op[user].to_shard:
                            raise PassError(user, f"{FULL_TO_SHARD} of a tile: its operand must be a global "
                                                  "value, not one computed inside a manual region")
                        (boundaries if user in self.by_op else body).add(user)
                        work.append(user)
            if backward:
                values = op.operands if op in self.by_op else _captured(op)
                for v in values:
                    owner = _defining_op(v)
                    if owner is None or owner.block != self.block:
                        if owner is not None and _ancestor_in(self.block, owner) is not None:
                            continue  # defined inside a nested region of a body op
                        raise PassError(op, f"per-device code uses a global value ({v.type}) directly; pass it "
                                            f"through pxla.full_to_shard (or make it a constant)")
                    if owner in self.by_op and not self.by_op[owner].to_shard:
                        raise PassError(op, "a full value from pxla.shard_to_full is used as a tile: "
                                            "go through pxla.full_to_shard again")
                    if owner in boundaries or owner in body or self.is_constant(owner):
                        continue
                    (boundaries if owner in self.by_op else body).add(owner)
                    work.append(owner)
        ins = sorted((self.by_op[o] for o in boundaries if self.by_op[o].to_shard), key=lambda b: self.order[b.op])
        outs = sorted((self.by_op[o] for o in boundaries if not self.by_op[o].to_shard),
                      key=lambda b: self.order[b.op])
        for op in body:
            for result in op.results:
                for use in result.uses:
                    user = self._in_block(use.owner.operation, "a user of a per-device value")
                    if user not in body and user not in boundaries:
                        raise PassError(user, f"uses a per-device value computed by {op.name} inside a manual "
                                              f"region; pass it through pxla.shard_to_full")
        return sorted(body, key=self.order.__getitem__), ins, outs

    # -- building ------------------------------------------------------------------------
    def _check_agree(self) -> tuple:
        first = (self.ins + self.outs)[0]
        for b in self.ins + self.outs:
            if b.mesh != first.mesh or b.manual != first.manual:
                raise PassError(b.op, f"this placeholder's mesh {dict(b.mesh.shape)} / manual axes {list(b.manual)} "
                                      f"differ from {dict(first.mesh.shape)} / {list(first.manual)} of "
                                      f"{first.op.name} in the same manual region")
        return first.mesh, first.manual

    def _anchor(self) -> ir.Operation:
        """The op to insert the region before: the first use of its results (or
        the terminator), which must come after every full value it reads."""
        ops = self.ops
        lo = max((self.order[a] for b in self.ins
                  if (d := _defining_op(b.op.operands[0])) is not None and (a := _ancestor_in(self.block, d)) is not None),
                 default=-1)
        hi = min((self.order[self._in_block(u.owner.operation, "a user")] for b in self.outs
                  for u in b.op.results[0].uses), default=len(ops) - 1)
        if hi <= lo:
            raise PassError((self.outs or self.ins)[0].op, "cannot form one manual region: one of its results feeds "
                                                            "one of its own inputs")
        return ops[hi]

    def build(self) -> None:
        mesh, manual = self._check_agree()
        mesh_name = shardy.mesh_name_for(self.module, mesh, (self.ins + self.outs)[0].op)
        anchor = self._anchor()
        in_sh = [sdy_sharding.of_mapping(mesh, b.full_type.rank, b.spec.mapping, b.spec.unspecified, mesh_name)
                 for b in self.ins]
        out_sh = [sdy_sharding.of_mapping(mesh, b.full_type.rank, b.spec.mapping, b.spec.unspecified, mesh_name)
                  for b in self.outs]
        with ir.InsertionPoint(anchor), anchor.location:
            region = sdy.ManualComputationOp(
                [b.full_type for b in self.outs], [b.full_value for b in self.ins],
                ir.Attribute.parse(shardy.per_value(in_sh)), ir.Attribute.parse(shardy.per_value(out_sh)),
                ir.Attribute.parse(shardy.manual_axes(manual)))
            body = region.regions[0].blocks.append(*[b.tile_type for b in self.ins])
        for b, arg in zip(self.ins, body.arguments):
            b.tile_value.replace_all_uses_with(arg)
        with ir.InsertionPoint(body), anchor.location:
            ret = sdy.ReturnOp([b.tile_value for b in self.outs])
        for op in self.body_ops:
            op.move_before(ret)
        self._copy_constants(region.operation, body)
        for b, result in zip(self.outs, region.results):
            b.op.results[0].replace_all_uses_with(result)
        for b in self.outs + self.ins:
            ir_utils.erase_op(b.op)
        self._erase_unused_constants()

    def _copy_constants(self, region: ir.Operation, body: ir.Block) -> None:
        """Uses of constants defined outside the body get copies at its top."""
        copies: dict[ir.Operation, ir.Operation] = {}
        first = body.operations[0]

        def copy(op: ir.Operation) -> ir.Operation:
            if op not in copies:
                # A constant's operands are results of constants (is_constant), never block arguments.
                operands = [copy(ir.OpResult(v).owner.operation).results[ir.OpResult(v).result_number]
                            for v in op.operands]
                clone = op.clone(ir.InsertionPoint(first)).operation
                for i, v in enumerate(operands):
                    clone.operands[i] = v
                copies[op] = clone
            return copies[op]

        for op in ir_utils.walk(region)[1:]:  # not the region op: its operands are the full values
            for i, v in enumerate(op.operands):
                owner = _defining_op(v)
                if owner is not None and owner.block == self.block:
                    op.operands[i] = copy(owner).results[ir.OpResult(v).result_number]

    def _erase_unused_constants(self) -> None:
        for op in reversed([o.operation for o in self.block.operations]):
            if op in self._constant and self._constant[op] and all(not list(r.uses) for r in op.results):
                op.erase()
