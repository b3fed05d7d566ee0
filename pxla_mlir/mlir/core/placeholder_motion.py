"""Moving a nested pmap's placeholders towards @main's boundary (jax-free).

pxla-place-pieces places by piece the arguments and results of @main that
only a ``@pxla.shard`` reads or an ``@pxla.unshard`` writes. This module
moves the placeholders there first, wherever that is exact: an unshard down
through an elementwise op or a collective that works piece by piece (the
op's other operands get a shard), a shard up through such an op, a splat
constant or a scalar broadcast, and a shard of an unshard along the same
axis is the value itself. It also reads placeholders for the pass (a
malformed one is not a placeholder here: pxla-expand-shard/-unshard report it).
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from pxla_mlir.mlir.core import pxla_attrs
from pxla_mlir.mlir.core.attr_readers import CALL_TARGET_NAME
from pxla_mlir.mlir.core.pxla_attrs import SHARD, UNSHARD

__all__ = ["dialect_of", "move_to_boundary", "placeholder_key", "placeholder_target", "reshape", "short_name",
           "users_of"]

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


def placeholder_target(op) -> str | None:
    """SHARD or UNSHARD for a placeholder (StableHLO or MHLO) with its integer
    attributes and a whole value of its piece's shape with the axis inserted;
    a malformed one is left to pxla-expand-shard/-unshard to report."""
    if op.name not in pxla_attrs.CUSTOM_CALLS or CALL_TARGET_NAME not in op.attributes:
        return None
    target = op.attributes[CALL_TARGET_NAME]
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
    axis, size = (pxla_attrs.require_int(op, a) for a in (pxla_attrs.AXIS, pxla_attrs.AXIS_SIZE))
    if axis >= len(whole) or whole[axis] != size or whole[:axis] + whole[axis + 1:] != piece:
        return None
    return target


def placeholder_key(op) -> tuple[int, int, int]:
    """(axis, axis size, stride) of a placeholder :func:`placeholder_target` accepts."""
    axis, size, stride = (pxla_attrs.require_int(op, a) for a in (pxla_attrs.AXIS, pxla_attrs.AXIS_SIZE,
                                                                 pxla_attrs.STRIDE))
    return axis, size, stride


def dialect_of(op) -> str:
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
    attrs[CALL_TARGET_NAME] = ir.StringAttr.get(target)
    if axis is not None:
        attrs[pxla_attrs.AXIS] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), axis)
    return ir.Operation.create(like.name, results=[result_type], operands=[operand], attributes=attrs,
                               loc=like.location)


def reshape(dialect: str, x: ir.Value, t: ir.Type, loc) -> ir.Value:
    return ir.Operation.create(f"{dialect}.reshape", results=[t], operands=[x], loc=loc).result


def users_of(v: ir.Value) -> list:
    return [u.owner for u in v.uses]


def short_name(op) -> str | None:
    dialect, _, name = op.name.partition(".")
    return name if dialect in _DIALECTS else None


# -- moving shards up and unshards down --------------------------------------------------------

def move_to_boundary(block: ir.Block) -> None:
    """Moves the shards and unshards of @main's ``block`` towards its
    boundary wherever that is exact, until no move applies."""
    _Mover(block).run()


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
            for op in [op for op in self.block.operations if placeholder_target(op)]:
                if not users_of(op.results[0]):
                    continue
                if placeholder_target(op) == UNSHARD:
                    changed |= self._sink(op)
                else:
                    changed |= self._hoist(op)
            progress = True
            while progress:
                progress = False
                for op in list(self.dead):
                    if not users_of(op.results[0]):
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
        name = short_name(op)
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
        users = users_of(unshard.results[0])
        if not users or not all(u == users[0] for u in users):
            return False
        op = users[0]
        key = placeholder_key(unshard)
        axis = key[0]
        if self._piecewise(op, key, axis) is None:
            return False
        alike = []  # unshards along the same axis feed the op their pieces directly
        with ir.InsertionPoint(op):
            for i, operand in enumerate(list(op.operands)):
                owner = operand.owner if isinstance(operand, ir.OpResult) else None
                if owner is not None and placeholder_target(owner) == UNSHARD and placeholder_key(owner) == key:
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
        op, key = source.owner, placeholder_key(shard)
        axis = key[0]
        if placeholder_target(op) == UNSHARD and placeholder_key(op) == key:  # a shard of an unshard: the value itself
            self._replace(shard, op.operands[0])
            self._discard(op)
            return True
        users = users_of(source)
        if not all(placeholder_target(u) == SHARD and placeholder_key(u) == key for u in users):
            return False
        name = short_name(op)
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
        if short_name(op) == "all_gather":
            dim = pxla_attrs.require_int(op, "all_gather_dim")
            if dim > axis:
                op.attributes["all_gather_dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim - 1)
