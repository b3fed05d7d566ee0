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

import numpy as np
from jaxlib.mlir import ir

from pxla_mlir.mlir.ir import boundaries, ir_utils, pxla_attrs
from pxla_mlir.mlir.ir.diagnostics import PassError
from pxla_mlir.mlir.ir.pxla_attrs import MESH, REP_AXIS, SHARD, TILE_DIMS, UNSHARD
from pxla_mlir.mlir.pass_infra import ModulePass

_ELEMENTWISE = frozenset("""
    abs add and atan2 bitcast_convert cbrt ceil clamp compare complex convert cosine count_leading_zeros divide
    exponential exponential_minus_one floor imag is_finite log log_plus_one logistic maximum minimum multiply negate
    not or popcnt power real reduce_precision remainder round_nearest_afz round_nearest_even rsqrt select
    shift_left shift_right_arithmetic shift_right_logical sign sine sqrt subtract tan tanh xor
    acos acosh asin asinh atan atanh conj cosh digamma erf erf_inv erfc is_inf is_neg_inf is_pos_inf lgamma
    next_after polygamma sinh zeta
""".split())
_DIALECTS = ("stablehlo", "mhlo", "chlo")
_COLLECTIVES = frozenset(("all_reduce", "all_gather", "collective_permute"))
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
            _Mover(block).run()
            _Boundary(module, main, block, mesh).run()


# -- placeholders ------------------------------------------------------------------------------

def _target(op) -> str | None:
    """SHARD or UNSHARD for a placeholder (StableHLO or MHLO) with its integer
    attributes and a whole value of its piece's shape with the axis inserted;
    a malformed one is left to pxla-expand-shard/-unshard to report."""
    if op.name not in ("stablehlo.custom_call", "mhlo.custom_call") or "call_target_name" not in op.attributes:
        return None
    target = op.attributes["call_target_name"]
    target = ir.StringAttr(target).value if isinstance(target, ir.StringAttr) else None
    if target not in (SHARD, UNSHARD) or len(op.operands) != 1 or len(op.results) != 1:
        return None
    for name in (pxla_attrs.AXIS, pxla_attrs.AXIS_SIZE, pxla_attrs.STRIDE):
        attr = op.attributes.get(name)
        if not isinstance(attr, ir.IntegerAttr) or ir.IntegerAttr(attr).value < (0 if name == pxla_attrs.AXIS else 1):
            return None
    if not all(isinstance(v.type, ir.RankedTensorType) for v in (op.operands[0], op.results[0])):
        return None
    whole, piece = (op.operands[0], op.results[0]) if target == SHARD else (op.results[0], op.operands[0])
    whole, piece = list(ir.RankedTensorType(whole.type).shape), list(ir.RankedTensorType(piece.type).shape)
    axis, size = (pxla_attrs.read_int(op, a) for a in (pxla_attrs.AXIS, pxla_attrs.AXIS_SIZE))
    if axis >= len(whole) or whole[axis] != size or whole[:axis] + whole[axis + 1:] != piece:
        return None
    return target


def _key(op) -> tuple[int, int, int]:
    return tuple(pxla_attrs.read_int(op, a) for a in (pxla_attrs.AXIS, pxla_attrs.AXIS_SIZE, pxla_attrs.STRIDE))


def _dialect(op) -> str:
    return op.name.split(".", 1)[0] if op.name.split(".", 1)[0] in ("stablehlo", "mhlo") else "stablehlo"


def _without(t: ir.Type, dim: int) -> ir.RankedTensorType:
    t = ir.RankedTensorType(t)
    shape = list(t.shape)
    del shape[dim]
    return ir.RankedTensorType.get(shape, t.element_type)


def _with(t: ir.Type, dim: int, size: int) -> ir.RankedTensorType:
    t = ir.RankedTensorType(t)
    shape = list(t.shape)
    shape.insert(dim, size)
    return ir.RankedTensorType.get(shape, t.element_type)


def _placeholder(like, target: str, operand: ir.Value, result_type: ir.Type, axis: int | None = None):
    """A new placeholder with ``like``'s attributes (``axis`` replaced)."""
    attrs = {a.name: a.attr for a in (like.attributes[i] for i in range(len(like.attributes)))}
    attrs["call_target_name"] = ir.StringAttr.get(target)
    if axis is not None:
        attrs[pxla_attrs.AXIS] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), axis)
    return ir.Operation.create(like.name, results=[result_type], operands=[operand], attributes=attrs,
                               loc=like.location)


def _reshape(dialect: str, x: ir.Value, t: ir.Type, loc) -> ir.Value:
    return ir.Operation.create(f"{dialect}.reshape", results=[t], operands=[x], loc=loc).result


def _users(v: ir.Value) -> list:
    return [u.owner for u in v.uses]


def _short(op) -> str | None:
    dialect, _, name = op.name.partition(".")
    return name if dialect in _DIALECTS else None


# -- moving shards up and unshards down --------------------------------------------------------

class _Mover:
    """Rewrites in @main's block until none applies (unshards only move down, shards only up)."""

    def __init__(self, block):
        self.block = block

    def run(self) -> None:
        # Sweeps over a snapshot of the placeholders; ops a rewrite leaves unused are erased after the sweep
        # (an erased op must not be touched again).
        changed = True
        while changed:
            changed = False
            self.dead: list = []
            for op in [op for op in self.block.operations if _target(op)]:
                if not _users(op.results[0]):
                    continue
                if _target(op) == UNSHARD:
                    changed |= self._sink(op)
                else:
                    changed |= self._hoist(op)
            progress = True
            while progress:
                progress = False
                for op in list(self.dead):
                    if not _users(op.results[0]):
                        self.dead = [d for d in self.dead if d != op]
                        op.erase()
                        progress = True
                        break

    def _discard(self, op) -> None:
        if not any(op == d for d in self.dead):
            self.dead.append(op)

    def _replace(self, op, value: ir.Value) -> None:
        op.results[0].replace_all_uses_with(value)
        self._discard(op)

    def _in_block(self, op) -> bool:
        return op.parent is not None and op.parent.operation == self.block.owner.operation

    def _piecewise(self, op, key, piece_dim: int) -> int | None:
        """How ``op`` works on pieces along ``key``'s axis at result dimension
        ``piece_dim``: 0 elementwise, 1 a piecewise collective; None if not."""
        name = _short(op)
        if name is None or len(op.results) != 1 or not self._in_block(op):
            return None
        if name in _ELEMENTWISE:
            shape = ir.RankedTensorType(op.results[0].type).shape if isinstance(op.results[0].type,
                                                                                ir.RankedTensorType) else None
            same = shape is not None and all(isinstance(o.type, ir.RankedTensorType) and
                                             ir.RankedTensorType(o.type).shape == shape for o in op.operands)
            return 0 if same and op.operands else None
        if name not in _COLLECTIVES or len(op.operands) != 1 or len(op.regions) > 1:
            return None
        if name == "all_gather" and pxla_attrs.read_int(op, "all_gather_dim") == piece_dim:
            return None
        _, size, stride = key
        if name == "collective_permute":
            groups = pxla_attrs.read_int_matrix(op, "source_target_pairs")
        else:
            groups = pxla_attrs.read_int_matrix(op, "replica_groups")
        if groups.size == 0:
            return None
        index = (groups // stride) % size
        return 1 if bool(np.all(index == index[:, :1])) else None

    def _sink(self, unshard) -> bool:
        users = _users(unshard.results[0])
        if not users or not all(u == users[0] for u in users):
            return False
        op = users[0]
        key = _key(unshard)
        axis = key[0]
        if self._piecewise(op, key, axis) is None:
            return False
        alike = []  # unshards along the same axis feed the op their pieces directly
        with ir.InsertionPoint(op):
            for i, operand in enumerate(list(op.operands)):
                owner = operand.owner if isinstance(operand, ir.OpResult) else None
                if owner is not None and _target(owner) == UNSHARD and _key(owner) == key:
                    op.operands[i] = owner.operands[0]
                    alike.append(owner)
                else:
                    op.operands[i] = _placeholder(unshard, SHARD, operand, _without(operand.type, axis)).result
        self._set_piece_attrs(op, axis)
        full = op.results[0].type
        op.results[0].set_type(_without(full, axis))
        with ir.InsertionPoint.after(op):
            new = _placeholder(unshard, UNSHARD, op.results[0], full)
        op.results[0].replace_all_uses_except(new.results[0], new)
        for other in alike:
            self._discard(other)
        return True

    def _hoist(self, shard) -> bool:
        source = shard.operands[0]
        if not isinstance(source, ir.OpResult) or not self._in_block(source.owner):
            return False
        op, key = source.owner, _key(shard)
        axis = key[0]
        if _target(op) == UNSHARD and _key(op) == key:  # a shard of an unshard: the value itself
            self._replace(shard, op.operands[0])
            self._discard(op)
            return True
        users = _users(source)
        if not all(_target(u) == SHARD and _key(u) == key for u in users):
            return False
        name = _short(op)
        piece_type = shard.results[0].type
        if name == "constant" and len(users) >= 1:
            value = op.attributes["value"]
            if not (isinstance(value, ir.DenseElementsAttr) and ir.DenseElementsAttr(value).is_splat):
                return False
            with ir.InsertionPoint(op):
                splat = ir.DenseElementsAttr.get_splat(piece_type, ir.DenseElementsAttr(value).get_splat_value())
                new = ir.Operation.create(op.name, results=[piece_type], attributes={"value": splat}, loc=op.location)
            for u in users:
                self._replace(u, new.results[0])
            self._discard(op)
            return True
        if name == "broadcast_in_dim" and ir.RankedTensorType(op.operands[0].type).rank == 0:
            pass  # the scalar operand stays whole
        elif self._piecewise(op, key, axis) is not None:
            with ir.InsertionPoint(op):
                for i, operand in enumerate(list(op.operands)):
                    op.operands[i] = _placeholder(shard, SHARD, operand, _without(operand.type, axis)).result
            self._set_piece_attrs(op, axis)
        else:
            return False
        op.results[0].set_type(piece_type)
        for u in users:
            self._replace(u, op.results[0])
        return True

    @staticmethod
    def _set_piece_attrs(op, axis: int) -> None:
        """An all_gather's dimension on the piece (the piece lacks ``axis``)."""
        if _short(op) == "all_gather":
            dim = pxla_attrs.read_int(op, "all_gather_dim")
            if dim > axis:
                op.attributes["all_gather_dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim - 1)


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
        users = _users(arg)
        if len(users) == 1 and _short(users[0]) == "reshape" and \
                tuple(ir.RankedTensorType(users[0].results[0].type).shape) == squeezed and dims != list(range(len(tile))):
            value, ops = users[0].results[0], [users[0]]
        elif dims != list(range(len(tile))):
            return None
        pieces = []
        while True:
            users = _users(value)
            if not users or not all(_target(u) == SHARD and u.parent.operation == self.block.owner.operation
                                    and _key(u) == _key(users[0]) for u in users):
                break
            axis, size, stride = _key(users[0])
            pieces.append(_Piece(dims.pop(axis), stride, size, pxla_attrs.read_str(users[0], pxla_attrs.AXIS_NAME, "")))
            for other in users[1:]:
                ir_utils.replace_op(other, [users[0].results[0]])
            ops.append(users[0])
            value = users[0].results[0]
        return (value, pieces, ops) if pieces else None

    def _result_chain(self, value, entries):
        if not isinstance(value.type, ir.RankedTensorType):
            return None
        tile = self._tile(entries, ir.RankedTensorType(value.type).rank, "result")
        squeezed, dims = self._squeezed(value.type, tile)
        owner = value.owner if isinstance(value, ir.OpResult) else None
        if owner is not None and _short(owner) == "reshape" and dims != list(range(len(tile))) and \
                tuple(ir.RankedTensorType(owner.operands[0].type).shape) == squeezed:
            value = owner.operands[0]
        elif dims != list(range(len(tile))):
            return None
        pieces = []
        while True:
            owner = value.owner if isinstance(value, ir.OpResult) else None
            if owner is None or _target(owner) != UNSHARD or owner.parent.operation != self.block.owner.operation:
                break
            axis, size, stride = _key(owner)
            pieces.append(_Piece(dims.pop(axis), stride, size, pxla_attrs.read_str(owner, pxla_attrs.AXIS_NAME, "")))
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
            piece = _reshape(_dialect(ops[-1]), arg, value.type, ops[-1].location)
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
            self.ret.operands[index] = _reshape(_dialect(old.owner), value, self._piece_type(old.type, pieces),
                                                self.ret.location)
        _erase_unused_chain(old)


def _erase_unused_chain(value: ir.Value) -> None:
    """The reshape and unshards that led to a result, once nothing uses them."""
    while isinstance(value, ir.OpResult) and not _users(value):
        op = value.owner
        if _short(op) != "reshape" and _target(op) != UNSHARD:
            return
        value = op.operands[0]
        op.erase()
