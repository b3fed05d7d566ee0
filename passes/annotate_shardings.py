"""pxla-annotate-shardings: pxla sharding attributes on function boundaries to XLA's.

Arguments and results of ``func.func`` may carry, instead of XLA's strings,
either ``pxla.dims`` (mesh axes per dimension of the *global* value, against
the module's ``pxla.mesh``) or ``pxla.sharding_spec`` (a serialized
ShardingSpec). This pass replaces them with what XLA reads:

* ``mhlo.sharding`` with the HLO sharding string (partition mode);
* ``mhlo.is_same_data_across_replicas`` on arguments that every device holds
  whole (in replica mode this is the only annotation an argument can have);
* ``pxla.tile_dims`` marks a per-device signature (pmap's replica mode):
  fully replicated arguments get ``mhlo.is_same_data_across_replicas``, the
  attribute is dropped;
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

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-annotate-shardings)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import mhlo

from pxla_mlir.ir import ir_utils, pxla_attrs
from pxla_mlir.ir.pxla_attrs import DIMS, SHARDING_SPEC, TILE_DIMS, mesh_of, parse_dims, string_value
from pxla_mlir.pass_infra import ModulePass, PassError
from pxla_mlir.sharding import HloSharding, ShardingSpec, ShardingSpecError
from pxla_mlir.sharding.mesh import MeshError

_PXLA_KEYS = (DIMS, SHARDING_SPEC, TILE_DIMS)


@dataclasses.dataclass(frozen=True)
class AnnotateShardingsPass(ModulePass):
    argument = "pxla-annotate-shardings"
    summary = "Turn pxla.dims / pxla.sharding_spec on function arguments and results into mhlo.sharding"

    def run(self, module):
        replicas, partitions = pxla_attrs.device_counts(module)
        for fn in ir_utils.functions(module):
            self._annotate(fn, module, replicas, partitions)

    def _annotate(self, fn, module, replicas: int, partitions: int) -> None:
        ftype = pxla_attrs.function_type(fn)
        for key, types in (("arg_attrs", ftype.inputs), ("res_attrs", ftype.results)):
            if key not in fn.attributes:
                continue
            dicts = pxla_attrs.boundary_attrs(fn, key)
            for index, (entries, t) in enumerate(zip(dicts, types)):
                what = f"{'argument' if key == 'arg_attrs' else 'result'} {index}"
                if TILE_DIMS in entries:
                    self._per_device(fn, module, entries, t, what, key == "arg_attrs", replicas, partitions)
                elif any(k in entries for k in _PXLA_KEYS):
                    self._rewrite(fn, module, entries, t, what, key == "arg_attrs", index, replicas, partitions)
            ir_utils.set_boundary_attrs(fn, key, dicts)

    def _rewrite(self, fn, module, entries, type_, what, is_arg, index, replicas, partitions) -> None:
        if not isinstance(type_, ir.RankedTensorType):
            raise PassError(fn, f"{what}: pxla shardings need a ranked tensor, got {type_}")
        rank = ir.RankedTensorType(type_).rank
        shape = ir.RankedTensorType(type_).shape
        unspecified_config = None
        if DIMS in entries and SHARDING_SPEC in entries:
            raise PassError(fn, f"{what} has both {DIMS} and {SHARDING_SPEC}; keep one")
        if DIMS in entries:
            mesh = mesh_of(fn, module)
            spec = parse_dims(entries.pop(DIMS), rank, mesh, fn, what)
            try:
                mesh.tile_shape(shape, spec.mapping, what)
            except MeshError as e:
                raise PassError(fn, str(e)) from None
            sharding = mesh.hlo_sharding(rank, spec.mapping)
            devices = mesh.size
            unspecified_config = spec.backend_config()
        else:
            text = string_value(entries.pop(SHARDING_SPEC), SHARDING_SPEC, fn)
            try:
                parsed = ShardingSpec.parse(text)
                parsed.shard_shape(shape)
                sharding = parsed.to_hlo()
            except ShardingSpecError as e:
                raise PassError(fn, f"{what}: {e}") from None
            devices = parsed.num_devices
        self._check_devices(fn, what, devices, replicas, partitions)
        replicated = sharding.kind == "replicated" and unspecified_config is None
        if partitions == 1 and not replicated:
            raise PassError(fn, f"{what} is sharded ({sharding}) but the module runs as {replicas} replicas; "
                                f"sharded values need partition mode (mhlo.num_partitions > 1)")
        if replicated and is_arg:
            entries["mhlo.is_same_data_across_replicas"] = ir.BoolAttr.get(True)
        if partitions == 1:
            return
        if unspecified_config is None:
            entries["mhlo.sharding"] = ir.StringAttr.get(str(sharding))
        else:
            _constrain(fn, is_arg, index, sharding, unspecified_config)

    def _per_device(self, fn, module, entries, type_, what, is_arg, replicas, partitions) -> None:
        """A per-device (tile) signature, as pmap imports it: only replica mode runs it as is."""
        if partitions > 1:
            raise PassError(fn, f"{what} is a per-device tile (pxla.tile_dims) in a partition-mode module; "
                                f"run pxla-wrap-manual-main first to give @main global types")
        mesh = mesh_of(fn, module)
        if not isinstance(type_, ir.RankedTensorType):
            raise PassError(fn, f"{what}: a per-device tile needs a ranked tensor, got {type_}")
        spec = parse_dims(entries.pop(TILE_DIMS), ir.RankedTensorType(type_).rank, mesh, fn, what, TILE_DIMS)
        self._check_devices(fn, what, mesh.size, replicas, partitions)
        if is_arg and not spec.mapping and not spec.unspecified:
            entries["mhlo.is_same_data_across_replicas"] = ir.BoolAttr.get(True)

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
