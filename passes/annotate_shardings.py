"""pxla-annotate-shardings: pxla sharding attributes on function boundaries to XLA's.

Arguments and results of ``func.func`` may carry, instead of XLA's strings,
either ``pxla.dims`` (mesh axes per dimension of the *global* value, against
the module's ``pxla.mesh``) or ``pxla.sharding_spec`` (a serialized
ShardingSpec). This pass replaces them with what XLA reads:

* ``mhlo.sharding`` with the HLO sharding string (partition mode);
* ``mhlo.is_same_data_across_replicas`` on arguments that every device holds
  whole (in replica mode this is the only annotation an argument can have);
* ``pxla.tile_dims`` marks a per-device signature (pmap's and xmap's
  replica mode): fully replicated arguments get
  ``mhlo.is_same_data_across_replicas``, and the attribute stays: it is the
  final module's record of how each global value is laid out over the
  replicas (XLA ignores it; ``pxla_mlir.load`` and ``pxla-mlir run FILE.mlir``
  read it to take global inputs and give global outputs);
* for ``"?"`` (unspecified) dimensions: no boundary sharding, and instead a
  ``@Sharding`` custom call with ``backend_config = "unspecified_dims=[...]"``
  right after entry (arguments) or before the return (results), so XLA's
  propagation is free in those dimensions and bound in the others.

Before::

    module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
      func.func public @main(%a: tensor<8x4xf32> {pxla.dims = [["x"], ["y"]]},
                             %b: tensor<3xf32> {pxla.dims = [[]]}) -> (tensor<8x4xf32> {pxla.dims = [["x", "y"], []]})

After::

      func.func public @main(%a: tensor<8x4xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"},
                             %b: tensor<3xf32> {mhlo.is_same_data_across_replicas = true, mhlo.sharding = "{replicated}"})
          -> (tensor<8x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"})

Replica mode, before::

    module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "i=8"} {
      func.func public @main(%x: tensor<1x3xf32> {pxla.tile_dims = [["i"], []]}, %w: tensor<3xf32> {pxla.tile_dims = [[]]})

After (the device's row of an (8, 3) value, and a value every replica holds whole)::

      func.func public @main(%x: tensor<1x3xf32> {pxla.tile_dims = [["i"], []]},
                             %w: tensor<3xf32> {mhlo.is_same_data_across_replicas = true, pxla.tile_dims = [[]]})

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-annotate-shardings)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import mhlo

from pxla_mlir.mlir.core import pxla_attrs
from pxla_mlir.mlir.core.boundaries import BoundaryValue, DeclaredDims, rewrite_boundaries
from pxla_mlir.mlir.core.pxla_attrs import TILE_DIMS
from pxla_mlir.mlir.pass_infra import ModulePass, PassError
from pxla_mlir.mlir.sharding import HloSharding, hlo_sharding


@dataclasses.dataclass(frozen=True)
class AnnotateShardingsPass(ModulePass):
    argument = "pxla-annotate-shardings"
    summary = "Turn pxla.dims / pxla.sharding_spec on function arguments and results into mhlo.sharding"

    def run(self, module):
        replicas, partitions = pxla_attrs.device_counts(module)
        rewrite_boundaries(module, lambda value: self._rewrite(value, replicas, partitions))

    def _rewrite(self, value: BoundaryValue, replicas: int, partitions: int) -> None:
        fn, what, entries = value.fn, value.what, value.entries
        if value.is_tile and partitions > 1:
            raise PassError(fn, f"{what} is a per-device tile (pxla.tile_dims) in a partition-mode module; "
                                f"run pxla-wrap-manual-main first to give @main global types")
        record = entries.get(TILE_DIMS)
        declared = value.read()
        # A per-device signature, as pmap imports it: replica mode runs it as is.
        if isinstance(declared, DeclaredDims) and declared.tile:
            self._check_devices(fn, what, declared.mesh.size, replicas, partitions)
            if value.is_arg and not declared.dims.mapping and not declared.dims.unspecified:
                entries["mhlo.is_same_data_across_replicas"] = ir.BoolAttr.get(True)
            entries[TILE_DIMS] = record  # the global layout, kept for whoever runs the final module
            return
        unspecified_config = None
        if isinstance(declared, DeclaredDims):
            sharding = hlo_sharding.of_mapping(declared.mesh, len(declared.shape), declared.dims.mapping)
            devices = declared.mesh.size
            unspecified_config = declared.dims.backend_config()
        else:
            try:
                sharding = hlo_sharding.of_spec(declared.spec)
            except ValueError as e:
                raise PassError(fn, f"{what}: {e}") from None
            devices = declared.spec.num_devices
        self._check_devices(fn, what, devices, replicas, partitions)
        replicated = sharding.kind == "replicated" and unspecified_config is None
        if partitions == 1 and not replicated:
            raise PassError(fn, f"{what} is sharded ({sharding}) but the module runs as {replicas} replicas; "
                                f"sharded values need partition mode (mhlo.num_partitions > 1)")
        if replicated and value.is_arg:
            entries["mhlo.is_same_data_across_replicas"] = ir.BoolAttr.get(True)
        if partitions == 1:
            return
        if unspecified_config is None:
            entries["mhlo.sharding"] = ir.StringAttr.get(str(sharding))
        else:
            _constrain(fn, value.is_arg, value.index, sharding, unspecified_config)

    def _check_devices(self, fn, what, devices, replicas, partitions) -> None:
        total = replicas * partitions
        if devices != total:
            raise PassError(fn, f"{what}: the sharding spans {devices} devices but the module has {total} "
                                f"(num_replicas = {replicas}, num_partitions = {partitions})")


def _constrain(fn, is_arg: bool, index: int, sharding: HloSharding, config: str) -> None:
    """A @Sharding custom call on the argument after entry / result before return."""
    block = fn.regions[0].blocks[0]
    if is_arg:
        value = block.arguments[index]
        first = block.operations[0]
        with ir.InsertionPoint(first), fn.location:
            op = mhlo.CustomCallOp([value.type], [value], "Sharding", backend_config=ir.StringAttr.get(config))
        op.attributes["mhlo.sharding"] = ir.StringAttr.get(str(sharding))
        value.replace_all_uses_except(op.result, op.operation)
        return
    ret = block.operations[len(block.operations) - 1]
    value = ret.operands[index]
    with ir.InsertionPoint(ret), ret.location:
        op = mhlo.CustomCallOp([value.type], [value], "Sharding", backend_config=ir.StringAttr.get(config))
    op.attributes["mhlo.sharding"] = ir.StringAttr.get(str(sharding))
    ret.operands[index] = op.result
