"""pxla-place-tiles: an argument each device only slices its own tile out of enters as that tile.

In ``pxla_mlir.jit`` of a function holding xmaps, code outside the xmaps runs
on every device, so @main takes each argument whole; an xmap that maps it
then slices out the device's tile (``dynamic_slice`` at
``(partition_id / stride) % size * tile``, jax's lowering of
``lax.axis_index``). When every use of an argument of @main is such a slice,
all alike, the argument can enter as the tile itself, split over those mesh
axes (as ``jax.jit(shard_map)`` takes a block per device): the module no
longer holds the whole value on every device nor computes the slice, and
``pxla.tile_dims`` says which mesh axes split the argument. Values do not
change (each device gets the same elements); where the argument was aliased
to a result of another type it stays a donor only.

A dimension matches when its slice size ``t`` times the size ``n`` of the
device index makes the whole dimension, and ``(stride, n)`` is one mesh
axis (or a run of neighbouring ones) of ``pxla.mesh``; the other
dimensions must be taken whole from a zero start. Arguments with any other
use, a dimension already split, or slices that differ stay as they are.

Before (``pxla.mesh = "x=8"``)::

    func.func public @main(%arg0: tensor<128x32xf32> {pxla.tile_dims = [[], []]}) -> tensor<16x32xf32> {
      %0 = stablehlo.partition_id : tensor<ui32>
      %1 = stablehlo.divide %0, %c1 : tensor<ui32>
      %2 = stablehlo.remainder %1, %c8 : tensor<ui32>
      %3 = stablehlo.convert %2 : (tensor<ui32>) -> tensor<i32>
      %4 = stablehlo.multiply %3, %c16 : tensor<i32>
      %5 = stablehlo.compare LT, %4, %c0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %6 = stablehlo.add %4, %c128 : tensor<i32>
      %7 = stablehlo.select %5, %6, %4 : tensor<i1>, tensor<i32>
      %8 = stablehlo.dynamic_slice %arg0, %7, %c0, sizes = [16, 32]
          : (tensor<128x32xf32>, tensor<i32>, tensor<i32>) -> tensor<16x32xf32>
      return %8 : tensor<16x32xf32>
    }

After (the index computation is left for dead-code elimination)::

    func.func public @main(%arg0: tensor<16x32xf32> {pxla.tile_dims = [["x"], []]}) -> tensor<16x32xf32> {
      return %arg0 : tensor<16x32xf32>
    }

It runs on the per-device pxla form (StableHLO or MHLO, partition ids);
``pxla_mlir.jit`` of xmaps runs it at import, in the replica and manual
lowerings::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-place-tiles)'
"""

from __future__ import annotations

import dataclasses
import math

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import boundaries, ir_utils, pxla_attrs
from pxla_mlir.mlir.core.pxla_attrs import MESH, TILE_DIMS
from pxla_mlir.mlir.pass_infra import ModulePass, PassError

_DIALECTS = ("stablehlo.", "mhlo.")


@dataclasses.dataclass(frozen=True)
class PlaceTilesPass(ModulePass):
    argument = "pxla-place-tiles"
    summary = "Give @main the device's tile of an argument that every device only slices its tile out of"

    def run(self, module):
        op = module.operation if hasattr(module, "operation") else module
        main = ir_utils.find_function(op, "main")
        if main is None or MESH not in op.attributes or not main.regions[0].blocks:
            return
        mesh = pxla_attrs.parse_mesh(pxla_attrs.string_value(op.attributes[MESH], MESH, op), op)
        axes = list(zip(mesh.axis_names, mesh.axis_sizes))
        dicts = pxla_attrs.boundary_attrs(main, "arg_attrs")
        block = main.regions[0].blocks[0]
        changed = False
        for arg, entries in zip(block.arguments, dicts):
            if TILE_DIMS not in entries:
                continue
            tile = _tile_dims(entries[TILE_DIMS], main, arg.arg_number)
            split = _common_split(arg, axes)
            if split is None or len(tile) != ir.RankedTensorType(arg.type).rank or any(tile[d] for d in split) \
                    or _reuses_an_axis(tile, split):
                continue
            slices = [use.owner for use in arg.uses]
            piece = slices[0].results[0].type
            for s in slices:
                s.results[0].replace_all_uses_with(arg)
                s.erase()
            arg.set_type(piece)
            for d, names in split.items():
                tile[d] = names
            entries[TILE_DIMS] = ir.ArrayAttr.get([ir.ArrayAttr.get([ir.StringAttr.get(a) for a in d]) for d in tile])
            changed = True
        if not changed:
            return
        ret = block.operations[len(block.operations) - 1]
        in_types, out_types = [a.type for a in block.arguments], [v.type for v in ret.operands]
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(in_types, out_types))
        boundaries.donate_mismatched_aliases(dicts, boundaries.types_differ(in_types, out_types))
        ir_utils.set_boundary_attrs(main, "arg_attrs", dicts)


def _tile_dims(attr: ir.Attribute, main, index: int) -> list[list[str]]:
    if isinstance(attr, ir.ArrayAttr) and all(isinstance(d, ir.ArrayAttr) and
                                              all(isinstance(a, ir.StringAttr) for a in d) for d in attr):
        return [[ir.StringAttr(a).value for a in ir.ArrayAttr(d)] for d in attr]
    raise PassError(main, f"argument {index}: {TILE_DIMS} must be an array of arrays of mesh axis names")


def _reuses_an_axis(tile: list[list[str]], split: dict[int, list[str]]) -> bool:
    named = [a for d in tile for a in d] + [a for names in split.values() for a in names]
    return len(named) != len(set(named))


def _common_split(arg: ir.Value, axes: list) -> dict[int, list[str]] | None:
    """{dim: mesh axes} when every use of ``arg`` is the same slice of this device's tile; else None."""
    found = None
    for use in arg.uses:
        op = use.owner
        if _short(op) != "dynamic_slice" or use.operand_number != 0:
            return None
        split = _split_of(op, axes)
        if split is None or (found is not None and (split, op.results[0].type) != found):
            return None
        found = (split, op.results[0].type)
    return dict(found[0]) if found is not None and found[0] else None


def _split_of(op, axes: list) -> tuple | None:
    whole = ir.RankedTensorType(op.operands[0].type)
    if not whole.has_static_shape:
        return None
    attr = op.attributes["slice_sizes"]  # StableHLO: array<i64>; MHLO: dense elements
    sizes = list(attr) if isinstance(attr, ir.DenseI64ArrayAttr) else ir_utils.dense_to_numpy(attr).tolist()
    split = []
    for d, (start, size, full) in enumerate(zip(list(op.operands)[1:], sizes, whole.shape)):
        if size == full and _constant(start) == 0:
            continue
        found = _device_index(_unnormalized(start, full), size)
        if found is None or size * found[1] != full:
            return None
        names = _mesh_run(axes, *found)
        if names is None:
            return None
        split.append((d, names))
    return tuple(split)


def _mesh_run(axes: list, stride: int, size: int) -> list[str] | None:
    """The neighbouring mesh axes whose index is ``(device / stride) % size`` (row-major), fewest first."""
    for length in range(1, len(axes) + 1):
        for first in range(len(axes) - length + 1):
            run = axes[first:first + length]
            if math.prod(s for _, s in run) == size and math.prod(s for _, s in axes[first + length:]) == stride:
                return [n for n, _ in run]
    return None


def _unnormalized(start: ir.Value, full: int) -> ir.Value:
    """jax's dynamic_slice wraps a negative start: ``select(start < 0, start + full, start)``."""
    op = _owner(start, "select")
    if op is None:
        return start
    pred, wrapped, plain = op.operands
    lt, add = _owner(pred, "compare"), _owner(wrapped, "add")
    if lt is None or add is None or "LT" not in str(lt.attributes["comparison_direction"]):
        return start
    if list(lt.operands) == [plain, lt.operands[1]] and _constant(lt.operands[1]) == 0 \
            and add.operands[0] == plain and _constant(add.operands[1]) == full:
        return plain
    return start


def _device_index(value: ir.Value, tile: int) -> tuple[int, int] | None:
    """``(stride, size)`` when ``value`` is ``((partition_id / stride) % size) * tile`` as i32."""
    if tile != 1:
        mul = _owner(value, "multiply")
        if mul is None:
            return None
        a, b = mul.operands
        factor = a if _constant(b) == tile else b if _constant(a) == tile else None
        if factor is None:
            return None
        value = factor
    convert = _owner(value, "convert")
    rem = _owner(convert.operands[0], "remainder") if convert is not None else None
    size = _constant(rem.operands[1]) if rem is not None else None
    if rem is None or size is None:
        return None
    index = rem.operands[0]
    stride = 1
    div = _owner(index, "divide")
    if div is not None:
        stride, index = _constant(div.operands[1]), div.operands[0]
    if stride is None or _owner(index, "partition_id") is None:
        return None
    return stride, size


def _short(op) -> str:
    name = op.name
    return next((name[len(p):] for p in _DIALECTS if name.startswith(p)), "")


def _owner(value: ir.Value, short: str):
    if not isinstance(value, ir.OpResult) or _short(value.owner) != short:
        return None
    return value.owner


def _constant(value: ir.Value) -> int | None:
    op = _owner(value, "constant")
    if op is None:
        return None
    attr = op.attributes["value"]
    if not isinstance(attr, ir.DenseIntElementsAttr) or not attr.is_splat:
        return None
    return ir.IntegerAttr(attr.get_splat_value()).value
