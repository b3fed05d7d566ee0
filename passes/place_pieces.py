"""pxla-place-pieces: nested pmap values enter and leave @main by piece.

A pmap with nested pmaps runs one program per device; inside it, a nested
pmap's mapped input is a ``@pxla.shard`` (each device slices its own index
out of a value all the inner devices hold) and its mapped output a
``@pxla.unshard`` (an all-gather over the inner devices). When the value
comes straight from an argument of @main, or goes straight to a result,
neither is needed: the argument can be placed by piece (each device gets only
its slice, the argument's layout splitting that dimension over the inner
devices too) and the result assembled from the pieces, as a shard_map over a
mesh of all the axes does.

The pass first moves the placeholders to the boundary where that is exact:

* an unshard used only by an elementwise op (all operands and the result of
  one shape) or by a collective whose device groups each lie in one index of
  the unshard's axis (``all_reduce``, ``all_gather`` along another dimension,
  ``collective_permute``) moves below it; the op's other operands get a shard
  (each device's piece of them);
* a shard of such an op's result (all its uses shards alike), of a splat
  constant or of a scalar ``broadcast_in_dim`` moves above it (into the
  op's operands);
* a shard of an unshard along the same axis is the value itself.

Then, in @main: an argument whose value (after import's tile reshape) is
used only by alike shards, repeatedly, gets the piece type (a size-1
dimension where each shard took one index) and a reshape; a result that is
an unshard (of an unshard ...) returns the piece. ``pxla.mesh`` gets one axis
per distinct piece of the inner devices (named after the nested pmap axis
when that is unambiguous, else ``_pxla_rep1``, ``_pxla_rep2``, ...) and
``pxla.tile_dims`` says which axes split each argument and result. Aliased
donations whose tile types no longer match become buffer donors. Pieces that
do not tile the device grid as one mesh leave the boundary as it was.

Before (a 2x2 nested pmap: outer ``i``, inner ``j`` with stride 1)::

    module attributes {mhlo.num_partitions = 4 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
      func.func public @main(%arg0: tensor<1x2x8xf32> {pxla.tile_dims = [["i"], [], []]})
          -> (tensor<1x2x8xf32> {pxla.tile_dims = [["i"], [], []]}) {
        %0 = stablehlo.reshape %arg0 : (tensor<1x2x8xf32>) -> tensor<2x8xf32>
        %1 = stablehlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_name = "j",
            pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x8xf32>) -> tensor<8xf32>
        %2 = stablehlo.sine %1 : tensor<8xf32>
        %3 = stablehlo.custom_call @pxla.unshard(%2) {...same attributes...} : (tensor<8xf32>) -> tensor<2x8xf32>
        %4 = stablehlo.multiply %3, %3 : tensor<2x8xf32>
        %5 = stablehlo.reshape %4 : (tensor<2x8xf32>) -> tensor<1x2x8xf32>
        return %5 : tensor<1x2x8xf32>
      }
    }

After::

    module attributes {mhlo.num_partitions = 4 : i32, pxla.mesh = "i=2,j=2"} {
      func.func public @main(%arg0: tensor<1x1x8xf32> {pxla.tile_dims = [["i"], ["j"], []]})
          -> (tensor<1x1x8xf32> {pxla.tile_dims = [["i"], ["j"], []]}) {
        %0 = stablehlo.reshape %arg0 : (tensor<1x1x8xf32>) -> tensor<8xf32>
        %1 = stablehlo.sine %0 : tensor<8xf32>
        %2 = stablehlo.multiply %1, %1 : tensor<8xf32>
        %3 = stablehlo.reshape %2 : (tensor<8xf32>) -> tensor<1x1x8xf32>
        return %3 : tensor<1x1x8xf32>
      }
    }

pmap's import runs it on every pmap with nested pmaps (its layout is read
from the result); it works on StableHLO and MHLO alike::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-place-pieces)'
"""

from __future__ import annotations

import dataclasses
import itertools
import re

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import boundaries, ir_utils, placeholder_motion as motion, pxla_attrs
from pxla_mlir.mlir.core.diagnostics import PassError
from pxla_mlir.mlir.core.pxla_attrs import MESH, REP_AXIS, SHARD, TILE_DIMS, UNSHARD
from pxla_mlir.mlir.pass_infra import ModulePass

_NAME = re.compile(r"^[A-Za-z][\w]*$")


@dataclasses.dataclass(frozen=True)
class PlacePiecesPass(ModulePass):
    argument = "pxla-place-pieces"
    summary = "Move nested-pmap shards/unshards to @main's boundary and place those arguments and results by piece"

    def run(self, module):
        main = ir_utils.find_function(module, "main")
        if main is None or MESH not in module.attributes:
            return
        mesh = pxla_attrs.mesh_of(main, module)
        if REP_AXIS not in mesh.axis_names or mesh.axis_names[-1] != REP_AXIS or len(mesh.axis_names) != 2:
            return  # only a pmap with nested pmaps has inner devices to place pieces on
        if not main.regions[0].blocks:
            raise PassError(main, "@main is a declaration; pxla-place-pieces places the values of its body: give "
                                  "@main its definition")
        block = main.regions[0].blocks[0]
        with module.context, main.location:
            motion.move_to_boundary(block)
            _Boundary(module, main, block, mesh).run()


# -- the boundary of @main ---------------------------------------------------------------------

@dataclasses.dataclass
class _Piece:
    tile_dim: int
    stride: int
    size: int
    name: str


class _Boundary:
    def __init__(self, module, main, block, mesh):
        self.module, self.main, self.block = module, main, block
        self.label, self.inner = mesh.axis_names[0], mesh.axis_sizes[-1]
        self.outer = mesh.axis_sizes[0]
        self.ret = block.operations[len(block.operations) - 1]

    def run(self) -> None:
        arg_dicts = pxla_attrs.boundary_attrs(self.main, "arg_attrs")
        res_dicts = pxla_attrs.boundary_attrs(self.main, "res_attrs")
        args = [self._arg_chain(a, d) for a, d in zip(self.block.arguments, arg_dicts)]
        results = [self._result_chain(v, d) for v, d in zip(self.ret.operands, res_dicts)]
        pieces = [p for chain in args + results if chain for p in chain[1]]
        if not pieces:
            return
        axes = self._mesh_axes(pieces)
        if axes is None:
            return  # the pieces do not tile the devices as one mesh
        # Results first: a result may return the last shard of an argument's chain, which placing the argument
        # replaces.
        for i, chain in enumerate(results):
            if chain:
                self._place_result(i, res_dicts[i], chain, axes)
        for i, chain in enumerate(args):
            if chain:
                self._place_arg(self.block.arguments[i], arg_dicts[i], chain, axes)
        pxla_attrs.set_mesh(self.module, {name: size for name, (_, size) in axes.items()})
        ir_utils.set_boundary_attrs(self.main, "arg_attrs", arg_dicts)
        ir_utils.set_boundary_attrs(self.main, "res_attrs", res_dicts)
        in_types = [a.type for a in self.block.arguments]
        out_types = [v.type for v in self.ret.operands]
        self.main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(in_types, out_types))
        if boundaries.donate_mismatched_aliases(arg_dicts, boundaries.types_differ(in_types, out_types)):
            ir_utils.set_boundary_attrs(self.main, "arg_attrs", arg_dicts)

    def _tile(self, entries: dict, rank: int, where: str) -> list[list[str]]:
        if TILE_DIMS not in entries:
            raise PassError(self.main, f"@main's {where} has no {TILE_DIMS}; pmap's import writes it on every "
                                       f"argument and result")
        dims = [pxla_attrs.string_list(e, TILE_DIMS, self.main) for e in ir.ArrayAttr(entries[TILE_DIMS])]
        if len(dims) != rank:
            raise PassError(self.main, f"{TILE_DIMS} of @main's {where} has {len(dims)} entries, the value has "
                                       f"rank {rank}")
        return dims

    def _squeezed(self, t: ir.Type, tile: list) -> tuple[tuple, list[int]]:
        shape = tuple(ir.RankedTensorType(t).shape)
        kept = [d for d, axes in enumerate(tile) if not axes]
        return tuple(shape[d] for d in kept), kept

    def _arg_chain(self, arg, entries):
        if not isinstance(arg.type, ir.RankedTensorType):
            return None
        tile = self._tile(entries, ir.RankedTensorType(arg.type).rank, f"argument {arg.arg_number}")
        squeezed, dims = self._squeezed(arg.type, tile)
        value, ops = arg, []
        users = motion.users_of(arg)
        if len(users) == 1 and motion.short_name(users[0]) == "reshape" and \
                tuple(ir.RankedTensorType(users[0].results[0].type).shape) == squeezed and \
                dims != list(range(len(tile))):
            value, ops = users[0].results[0], [users[0]]
        elif dims != list(range(len(tile))):
            return None
        pieces = []
        while True:
            users = motion.users_of(value)
            if not users or not all(motion.placeholder_target(u) == SHARD and self._in_main(u)
                                    and motion.placeholder_key(u) == motion.placeholder_key(users[0]) for u in users):
                break
            axis, size, stride = motion.placeholder_key(users[0])
            pieces.append(_Piece(dims.pop(axis), stride, size, pxla_attrs.read_str(users[0], pxla_attrs.AXIS_NAME, "")))
            for other in users[1:]:
                ir_utils.replace_op(other, [users[0].results[0]])
            ops.append(users[0])
            value = users[0].results[0]
        return (value, pieces, ops) if pieces else None

    def _in_main(self, op) -> bool:
        return op.parent.operation == self.block.owner.operation

    def _result_chain(self, value, entries):
        if not isinstance(value.type, ir.RankedTensorType):
            return None
        tile = self._tile(entries, ir.RankedTensorType(value.type).rank, "result")
        squeezed, dims = self._squeezed(value.type, tile)
        owner = value.owner if isinstance(value, ir.OpResult) else None
        if owner is not None and motion.short_name(owner) == "reshape" and dims != list(range(len(tile))) and \
                tuple(ir.RankedTensorType(owner.operands[0].type).shape) == squeezed:
            value = owner.operands[0]
        elif dims != list(range(len(tile))):
            return None
        pieces = []
        while True:
            owner = value.owner if isinstance(value, ir.OpResult) else None
            if owner is None or motion.placeholder_target(owner) != UNSHARD or not self._in_main(owner):
                break
            axis, size, stride = motion.placeholder_key(owner)
            pieces.append(_Piece(dims.pop(axis), stride, size, pxla_attrs.read_str(owner.operation, pxla_attrs.AXIS_NAME, "")))
            value = owner.operands[0]
        return (value, pieces, None) if pieces else None

    def _mesh_axes(self, pieces) -> dict | None:
        """Mesh axis name -> (stride, size), major first; None if the pieces' strides do not nest."""
        n = self.outer * self.inner
        bounds = sorted({1, self.inner, n} | {p.stride for p in pieces} | {p.stride * p.size for p in pieces})
        if any(b % a for a, b in zip(bounds, bounds[1:])) or bounds[-1] != n:
            return None
        intervals = [(lo, hi // lo) for lo, hi in zip(bounds, bounds[1:]) if lo < self.inner]
        names: dict = {}
        taken = {self.label}
        for lo, size in intervals:
            exact = {p.name for p in pieces if p.stride == lo and p.size == size}
            others = {p.name for p in pieces if (p.stride, p.size) != (lo, size)}
            name = next(iter(exact)) if len(exact) == 1 else ""
            if not _NAME.fullmatch(name) or name.startswith("_pxla") or name in taken or name in others:
                # Not _pxla_rep itself: that name means "replicated over the inner devices"; nor a name taken
                # (the outer pmap's axis may be called _pxla_rep1).
                name = next(f"{REP_AXIS}{k}" for k in itertools.count(len(taken)) if f"{REP_AXIS}{k}" not in taken)
            taken.add(name)
            names[(lo, size)] = name
        axes = {self.label: (self.inner, self.outer)}
        for (lo, size), name in sorted(names.items(), key=lambda kv: -kv[0][0]):
            axes[name] = (lo, size)
        return axes

    @staticmethod
    def _axes_of(piece: _Piece, axes: dict) -> list[str]:
        return [name for name, (lo, size) in axes.items()
                if piece.stride <= lo and lo * size <= piece.stride * piece.size and name != next(iter(axes))]

    def _tile_attr(self, tile: list, pieces, axes) -> ir.ArrayAttr:
        for p in pieces:
            tile[p.tile_dim] = self._axes_of(p, axes)
        return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.StringAttr.get(a) for a in d]) for d in tile])

    def _piece_type(self, t: ir.Type, pieces) -> ir.RankedTensorType:
        t = ir.RankedTensorType(t)
        shape = list(t.shape)
        for p in pieces:
            shape[p.tile_dim] = 1
        return ir.RankedTensorType.get(shape, t.element_type)

    def _place_arg(self, arg, entries, chain, axes) -> None:
        value, pieces, ops = chain
        tile = self._tile(entries, ir.RankedTensorType(arg.type).rank, f"argument {arg.arg_number}")
        entries[TILE_DIMS] = self._tile_attr(tile, pieces, axes)
        new_type = self._piece_type(arg.type, pieces)
        first = self.block.operations[0]
        with ir.InsertionPoint(first):
            piece = motion.reshape(motion.dialect_of(ops[-1]), arg, value.type, ops[-1].location)
        value.replace_all_uses_with(piece)
        for op in reversed(ops):
            op.erase()
        arg.set_type(new_type)

    def _place_result(self, index: int, entries, chain, axes) -> None:
        value, pieces, _ = chain
        old = self.ret.operands[index]
        tile = self._tile(entries, ir.RankedTensorType(old.type).rank, "result")
        entries[TILE_DIMS] = self._tile_attr(tile, pieces, axes)
        with ir.InsertionPoint(self.ret):
            piece = self._piece_type(old.type, pieces)
            self.ret.operands[index] = motion.reshape(motion.dialect_of(old.owner), value, piece, self.ret.location)
        _erase_unused_chain(old)


def _erase_unused_chain(value: ir.Value) -> None:
    """The reshape and unshards that led to a result, once nothing uses them."""
    while isinstance(value, ir.OpResult) and not motion.users_of(value):
        op = value.owner
        if motion.short_name(op) != "reshape" and motion.placeholder_target(op) != UNSHARD:
            return
        value = op.operands[0]
        op.erase()
