"""pxla-expand-sharding-constraints: pxla.sharding_constraint placeholders to XLA's sharding constraints.

xmap's vectorize lowering (the global view XLA's SPMD partitioner splits)
marks values inside the program with the layout the xmap maps them to: the
operands and results of a nested xmap, and with ``ensure_fixed_sharding``
every intermediate (2022's ``with_sharding_constraint`` in the SPMD
lowering). Each ``@pxla.sharding_constraint`` carries ``pxla.dims`` (mesh
axes per dimension against ``pxla.mesh``; ``"?"`` leaves a dimension to
XLA's propagation) and becomes, with option ``sharding-dialect``:

* ``sdy`` (default): ``sdy.sharding_constraint`` on the module's
  ``sdy.mesh`` symbol (run pxla-add-sdy-mesh first), ``"?"`` an open
  dimension ``{?}``;
* ``gspmd``: a ``@Sharding`` custom call with ``mhlo.sharding``, and
  ``backend_config = "unspecified_dims=[...]"`` for ``"?"`` dimensions.

Before::

    module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
      sdy.mesh @mesh = <["x"=2, "y"=4]>
      func.func public @main(%a: tensor<2x8xf32>) -> tensor<2x8xf32> {
        %0 = mhlo.custom_call @pxla.sharding_constraint(%a) {pxla.dims = [["x"], ["y"]]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
        return %0 : tensor<2x8xf32>
      }
    }

After (``sharding-dialect=sdy``)::

        %0 = sdy.sharding_constraint %a <@mesh, [{"x"}, {"y"}]> : tensor<2x8xf32>

After (``sharding-dialect=gspmd``)::

        %0 = mhlo.custom_call @Sharding(%a) {mhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<2x8xf32>) -> tensor<2x8xf32>

Inside a partially manual region (a pmap whose body is partitioned, manual
over the pmap axis and automatic over the partition axes) the placeholder
may carry ``pxla.manual_axes`` (default: the module's ``pxla.manual_axes``,
else none). Its ``pxla.dims`` then name automatic axes only, of the
per-index value; ``sdy`` writes the same constraint (inside the
``sdy.manual_computation`` it names the free axes), ``gspmd`` adds the
manual axes as a manual subgroup, as jax writes a constraint inside a
partially manual ``shard_map``. With ``pxla.mesh = "data=2,model=4"`` and
``pxla.manual_axes = ["data"]``::

        %0 = mhlo.custom_call @pxla.sharding_constraint(%w) {pxla.dims = [[], ["model"]]} : ...
        // sdy:
        %0 = sdy.sharding_constraint %w <@mesh, [{}, {"model"}]> : tensor<16x32xf32>
        // gspmd:
        %0 = mhlo.custom_call @Sharding(%w) {mhlo.sharding = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual}}"}

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-add-sdy-mesh,pxla-expand-sharding-constraints)'
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import mhlo

from pxla_mlir.mlir.core import ir_utils, pxla_attrs, shardy
from pxla_mlir.mlir.core.pxla_attrs import SHARDING_CONSTRAINT, ShardingConstraint, placeholder_target
from pxla_mlir.mlir.pass_infra import ModulePass, PassError, option
from pxla_mlir.mlir.sharding import hlo_sharding, sdy_sharding
from pxla_mlir.mlir.sharding.mesh import MeshError


@dataclasses.dataclass(frozen=True)
class ExpandShardingConstraintsPass(ModulePass):
    argument = "pxla-expand-sharding-constraints"
    acts_on = pxla_attrs.CUSTOM_CALLS  # the placeholders
    summary = "Turn pxla.sharding_constraint placeholders into sdy.sharding_constraint or @Sharding custom calls"

    sharding_dialect: Literal["gspmd", "sdy"] = option("sdy", "write Shardy (sdy) or GSPMD (@Sharding) constraints")

    def run(self, module):
        found = [op for op in ir_utils.walk(module) if placeholder_target(op) == SHARDING_CONSTRAINT]
        if not found:
            return
        replicas, partitions = pxla_attrs.device_counts(module)
        for op in found:
            c = pxla_attrs.sharding_constraint(op, module)
            if replicas != 1 or partitions != c.mesh.size:
                raise PassError(op, f"@{SHARDING_CONSTRAINT} lays a value out over a mesh of {c.mesh.size} "
                                    f"devices, but the module runs {replicas} replicas x {partitions} partitions; "
                                    f"constraints need a partition-mode module over the whole mesh")
            manual = _manual_axes(c, module)
            try:
                c.mesh.tile_shape(c.type.shape, c.spec.mapping, "constrained value")
            except MeshError as e:
                raise PassError(op, f"{e}: pad that dimension to a multiple of the axes' size, or constrain it "
                                    f"over axes that divide it (or none)") from None
            new = self._sdy(c, module) if self.sharding_dialect == "sdy" else self._gspmd(c, manual)
            op.results[0].replace_all_uses_with(new)
            op.erase()

    def _sdy(self, c: ShardingConstraint, module) -> ir.Value:
        sharding = sdy_sharding.of_mapping(c.mesh, c.type.rank, c.spec.mapping, c.spec.unspecified,
                                           shardy.mesh_name_for(module, c.mesh, c.op))
        with ir.InsertionPoint(c.op), c.op.location:
            new = ir.Operation.create("sdy.sharding_constraint", results=[c.type], operands=[c.op.operands[0]],
                                      attributes={"sharding": shardy.attribute(sharding)})
        return new.results[0]

    def _gspmd(self, c: ShardingConstraint, manual: tuple[str, ...] = ()) -> ir.Value:
        sharding = hlo_sharding.of_mapping(c.mesh, c.type.rank, c.spec.mapping, manual)
        config = c.spec.backend_config()
        with ir.InsertionPoint(c.op), c.op.location:
            new = mhlo.CustomCallOp([c.type], [c.op.operands[0]], "Sharding",
                                    backend_config=ir.StringAttr.get(config) if config else None)
        new.attributes["mhlo.sharding"] = ir.StringAttr.get(str(sharding))
        return new.result


def _manual_axes(c: ShardingConstraint, module) -> tuple[str, ...]:
    """The axes the constrained value is manual over (the op's, else the
    module's ``pxla.manual_axes``; none without either); ``pxla.dims`` may
    name only the others."""
    if pxla_attrs.MANUAL_AXES not in c.op.attributes and pxla_attrs.MANUAL_AXES not in module.attributes:
        return ()
    default = pxla_attrs.manual_axes(module, c.mesh) if pxla_attrs.MANUAL_AXES in module.attributes else ()
    manual = pxla_attrs.manual_axes(c.op, c.mesh, default)
    named = [a for a in c.spec.mapping if a in manual]
    if named:
        free = ", ".join(a for a in c.mesh.axis_names if a not in manual) or "none"
        raise PassError(c.op, f"mesh axis {named[0]!r} is manual here: a sharding constraint inside the manual "
                              f"region can only name the automatic axes ({free})")
    return manual
