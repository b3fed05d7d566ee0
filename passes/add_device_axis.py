"""pxla-add-device-axis: a per-device @main that records no layout gets a leading device axis.

A replica-mode module whose ``@main`` states nothing about its global layout
(no ``pxla.tile_dims``: a module written by hand, converted from jax's
per-device StableHLO, or emitted before pxla kept the record) is one
device's program: each argument and result is that device's value alone.
This pass gives every argument and result a leading dimension of size 1
(reshaped away at entry, added back before the return) and records it as
``pxla.tile_dims = [["device"], ...]`` over ``pxla.mesh = "device=N"`` on
``@main``: the global value is the N devices' values stacked on a new
leading axis, in replica order. ``pxla_mlir.load`` and ``pxla-mlir run`` use
it to run such a module on stacked per-device inputs.

The module must be in replica mode (``mhlo.num_partitions = 1``; a
per-device partition-mode module goes through pxla-convert-to-replica-mode
first), and no boundary value of ``@main`` may carry ``pxla.tile_dims``
already.

Before::

    module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
      func.func public @main(%x: tensor<3xf32>) -> tensor<i32> {

After::

      func.func public @main(%x: tensor<1x3xf32> {pxla.tile_dims = [["device"], []]})
          -> (tensor<1xi32> {pxla.tile_dims = [["device"]]}) attributes {pxla.mesh = "device=4"} {
        %0 = mhlo.reshape %x : (tensor<1x3xf32>) -> tensor<3xf32>
        ...
        %r = mhlo.reshape %2 : (tensor<i32>) -> tensor<1xi32>
        return %r : tensor<1xi32>

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-add-device-axis)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func, mhlo

from pxla_mlir.mlir.core import ir_utils, pxla_attrs
from pxla_mlir.mlir.core.pxla_attrs import TILE_DIMS
from pxla_mlir.mlir.pass_infra import ModulePass, PassError

#: The mesh axis of the stacked devices.
DEVICE_AXIS = "device"


@dataclasses.dataclass(frozen=True)
class AddDeviceAxisPass(ModulePass):
    argument = "pxla-add-device-axis"
    summary = "Give a per-device replica-mode @main a leading device axis on every value, recorded as pxla.tile_dims"

    def run(self, module):
        main = ir_utils.find_function(module, "main")
        if main is None:
            raise PassError(module, "no func.func @main to give a device axis")
        replicas, partitions = pxla_attrs.device_counts(module)
        if partitions != 1:
            raise PassError(module, f"the module runs as {partitions} partitions; a per-device program needs replica "
                                    f"mode first (pxla-convert-to-replica-mode)")
        ftype = pxla_attrs.function_type(main)
        args, results = pxla_attrs.boundary_attrs(main, "arg_attrs"), pxla_attrs.boundary_attrs(main, "res_attrs")
        for what, dicts, types in (("argument", args, ftype.inputs), ("result", results, ftype.results)):
            for i, (entries, t) in enumerate(zip(dicts, types)):
                if TILE_DIMS in entries:
                    raise PassError(main, f"{what} {i} already has {TILE_DIMS}: @main records its layout")
                if not isinstance(t, ir.RankedTensorType) or not ir.RankedTensorType(t).has_static_shape:
                    raise PassError(main, f"{what} {i} is {t}; a device axis needs a tensor of static shape")
        block = main.regions[0].blocks[0]
        first = block.operations[0]
        for arg in block.arguments:
            per_device = arg.type
            arg.set_type(_stacked(per_device))
            with ir.InsertionPoint(first), main.location:
                squeezed = mhlo.ReshapeOp(per_device, arg)
            arg.replace_all_uses_except(squeezed.result, squeezed.operation)
        ret = block.operations[len(block.operations) - 1]
        with ir.InsertionPoint(ret), ret.location:
            values = [mhlo.ReshapeOp(_stacked(v.type), v).result for v in ret.operands]
            func.ReturnOp(values)
        ret.erase()
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], [v.type for v in values]))
        for dicts, types in ((args, ftype.inputs), (results, ftype.results)):
            for entries, t in zip(dicts, types):
                entries[TILE_DIMS] = pxla_attrs.dims_attr([[DEVICE_AXIS]] + [[]] * ir.RankedTensorType(t).rank)
        ir_utils.set_boundary_attrs(main, "arg_attrs", args)
        ir_utils.set_boundary_attrs(main, "res_attrs", results)
        pxla_attrs.set_mesh(main, {DEVICE_AXIS: replicas})


def _stacked(t: ir.Type) -> ir.RankedTensorType:
    t = ir.RankedTensorType(t)
    return ir.RankedTensorType.get([1, *t.shape], t.element_type)
