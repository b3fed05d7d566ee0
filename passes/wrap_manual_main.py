"""pxla-wrap-manual-main: a per-device @main becomes one manual region of a global @main.

pmap imports a *per-device* program: each argument and result of ``@main``
is a device's tile, and ``pxla.tile_dims`` says how the global value is split
over the module's ``pxla.mesh`` (same syntax as ``pxla.dims``; absent means
every device holds the whole value). Replica mode runs that program as is.
Partition mode needs XLA's SPMD partitioner, which only accepts per-device
code (``partition_id``, manual collectives) inside a manual region; this pass
builds that region.

Before::

    module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
      func.func public @main(%x: tensor<1x3xf32> {pxla.tile_dims = [["i"], []]}) -> (tensor<1x3xf32> {pxla.tile_dims = [["i"], []]})

After (the placeholders are expanded by pxla-expand-manual-sharding, the
``pxla.dims`` by pxla-annotate-shardings)::

      func.func private @main_per_device(%x: tensor<1x3xf32>) -> tensor<1x3xf32>
      func.func public @main(%g: tensor<8x3xf32> {pxla.dims = [["i"], []]}) -> (tensor<8x3xf32> {pxla.dims = [["i"], []]}) {
        %t = mhlo.custom_call @pxla.full_to_shard(%g) {pxla.dims = [["i"], []]} : (tensor<8x3xf32>) -> tensor<1x3xf32>
        %r = func.call @main_per_device(%t) : (tensor<1x3xf32>) -> tensor<1x3xf32>
        %o = mhlo.custom_call @pxla.shard_to_full(%r) {pxla.dims = [["i"], []]} : (tensor<1x3xf32>) -> tensor<8x3xf32>
        return %o : tensor<8x3xf32>

Other argument and result attributes (donation, result names) move to the
new ``@main``.

A module ``pxla.manual_axes = ["i"]`` makes the region manual over those
axes only (a pmap whose body is partitioned): the tile is the global value
divided by its manual axes, an automatic axis in ``pxla.tile_dims`` (after
the manual ones of its dimension) lays the global value out without
dividing the tile, and the placeholders get the module's
``pxla.manual_axes``. With ``pxla.mesh = "i=2,model=4"``::

    func.func public @main(%w: tensor<1x16x32xf32> {pxla.tile_dims = [["i"], [], ["model"]]})
    // becomes
    func.func public @main(%g: tensor<2x16x32xf32> {pxla.dims = [["i"], [], ["model"]]}) {
      %t = mhlo.custom_call @pxla.full_to_shard(%g) {pxla.dims = [["i"], [], ["model"]], pxla.manual_axes = ["i"]}
          : (tensor<2x16x32xf32>) -> tensor<1x16x32xf32>

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-wrap-manual-main,pxla-expand-manual-sharding,pxla-annotate-shardings)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func, mhlo

from pxla_mlir.mlir.core import ir_utils, pxla_attrs
from pxla_mlir.mlir.core.pxla_attrs import (
    DIMS,
    FULL_TO_SHARD,
    MANUAL_AXES,
    SHARD_TO_FULL,
    TILE_DIMS,
    mesh_of,
    parse_dims,
)
from pxla_mlir.mlir.pass_infra import ModulePass, PassError
from pxla_mlir.mlir.sharding.mesh import MeshError

BODY = "main_per_device"


@dataclasses.dataclass(frozen=True)
class WrapManualMainPass(ModulePass):
    argument = "pxla-wrap-manual-main"
    summary = "Wrap the per-device @main into a global @main made of one manual region (partition mode)"

    def run(self, module):
        main = ir_utils.find_function(module, "main")
        if main is None:
            raise PassError(module, "no func.func @main to wrap")
        mesh = mesh_of(main, module)
        replicas, partitions = pxla_attrs.device_counts(module)
        if partitions != mesh.size or replicas != 1:
            raise PassError(module, f"{pxla_attrs.MESH} has {mesh.size} devices; the module must be in partition mode with "
                                    f"mhlo.num_partitions = {mesh.size} and mhlo.num_replicas = 1")
        manual = pxla_attrs.manual_axes(module, mesh)
        ftype = pxla_attrs.function_type(main)
        ins = [self._boundary(main, mesh, manual, d, t, f"argument {i}")
               for i, (d, t) in enumerate(zip(pxla_attrs.boundary_attrs(main, "arg_attrs"), ftype.inputs))]
        outs = [self._boundary(main, mesh, manual, d, t, f"result {i}")
                for i, (d, t) in enumerate(zip(pxla_attrs.boundary_attrs(main, "res_attrs"), ftype.results))]
        main.attributes["sym_name"] = ir.StringAttr.get(BODY)
        main.attributes["sym_visibility"] = ir.StringAttr.get("private")
        for key in ("arg_attrs", "res_attrs"):
            if key in main.attributes:
                del main.attributes[key]
        with ir.InsertionPoint.at_block_begin(module.regions[0].blocks[0]), main.location:
            wrapper = func.FuncOp("main", ([b.global_type for b in ins], [b.global_type for b in outs]))
            wrapper.attributes["sym_visibility"] = ir.StringAttr.get("public")
            wrapper.arg_attrs = ir.ArrayAttr.get([b.global_attrs() for b in ins])
            wrapper.res_attrs = ir.ArrayAttr.get([b.global_attrs() for b in outs])
            entry = wrapper.add_entry_block()
            with ir.InsertionPoint(entry):
                tiles = [b.convert(FULL_TO_SHARD, a, b.tile_type) for b, a in zip(ins, entry.arguments)]
                call = func.CallOp([b.tile_type for b in outs], ir.FlatSymbolRefAttr.get(BODY), tiles)
                func.ReturnOp([b.convert(SHARD_TO_FULL, r, b.global_type) for b, r in zip(outs, call.results)])

    def _boundary(self, main, mesh, manual, attrs: dict, tile_type, what) -> _Boundary:
        if not isinstance(tile_type, ir.RankedTensorType):
            raise PassError(main, f"{what} of @main is {tile_type}; only ranked tensors can be tiled")
        dims_attr = attrs.pop(TILE_DIMS, None)
        rank = tile_type.rank
        if dims_attr is None:
            dims_attr = pxla_attrs.dims_attr([()] * rank)
        spec = parse_dims(dims_attr, rank, mesh, main, what, TILE_DIMS)
        try:  # automatic axes split the global value, not the tile
            shape = mesh.untile_shape(tile_type.shape, {a: d for a, d in spec.mapping.items() if a in manual}, what)
        except MeshError as e:
            raise PassError(main, str(e)) from None
        manual_attr = None if len(manual) == len(mesh.axis_names) else \
            ir.ArrayAttr.get([ir.StringAttr.get(a) for a in manual])
        return _Boundary(dims_attr, tile_type, ir.RankedTensorType.get(list(shape), tile_type.element_type), attrs,
                         manual_attr)


@dataclasses.dataclass
class _Boundary:
    dims_attr: ir.Attribute
    tile_type: ir.Type
    global_type: ir.Type
    other_attrs: dict
    manual_attr: ir.Attribute | None = None  # pxla.manual_axes of a partially manual region

    def global_attrs(self) -> ir.DictAttr:
        return ir.DictAttr.get({**self.other_attrs, DIMS: self.dims_attr})

    def convert(self, target: str, value: ir.Value, result_type: ir.Type) -> ir.Value:
        op = mhlo.CustomCallOp([result_type], [value], target)
        op.attributes[DIMS] = self.dims_attr
        if self.manual_attr is not None:
            op.attributes[MANUAL_AXES] = self.manual_attr
        return op.result

