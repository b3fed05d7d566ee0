"""Every attribute pxla writes or reads, in one place (jax-free).

Import writes them, passes read them; both go through this module, so an
attribute's spelling, kind and meaning live here only. ``pxla-verify-form``
checks a module against all of it (the map pipelines run it first).

On the module (or on a placeholder op, to override it):

* ``pxla.mesh = "x=2,y=4"``: mesh axis names and sizes, major first.
* ``mhlo.num_replicas`` / ``mhlo.num_partitions`` (XLA's): positive device
  counts whose product is at most ``MAX_DEVICES`` (2^20), read with
  :func:`device_counts`.
* ``pxla.manual_axes = ["i"]`` (with a per-device signature): the mesh axes
  the per-device program is manual over (default: every axis). The others
  are automatic: the program sees whole values along them and XLA's SPMD
  partitioner splits it over them (a pmap whose body is partitioned).

On ``func.func`` arguments and results (in ``arg_attrs`` / ``res_attrs``):

* ``pxla.dims = [["x"], [], "?"]``: for each dimension of the *global* value,
  the mesh axes that split it (major first); ``[]`` not split, ``"?"``
  unspecified (XLA's propagation decides);
* ``pxla.tile_dims``: the same syntax on a *per-device* signature (pmap and
  the replica/manual xmap import @main as one device's program): the value is
  this device's tile of a global value split as written (an automatic axis,
  one not in the module's ``pxla.manual_axes``, splits the global value but
  not the tile). Replica-mode modules keep it to the end (XLA ignores it):
  the final module's record of its global inputs and outputs, read by
  :mod:`pxla_mlir.stages.text_module`;
* ``pxla.sharding_spec = "ShardingSpec(...)"``: a serialized ShardingSpec.

On placeholder custom calls (``mhlo.custom_call @<target>``):

* ``@pxla.shard`` / ``@pxla.unshard`` (a nested pmap's mapped input and
  output): ``pxla.axis`` (the mapped dimension of the *global* value: the
  operand of a shard, the result of an unshard), ``pxla.axis_size``,
  ``pxla.stride`` (devices between neighbours along the axis) and
  ``pxla.axis_name`` (for messages); ``axis_size * stride`` divides the
  module's device count;
* ``@pxla.full_to_shard`` / ``@pxla.shard_to_full`` (the boundary of a
  manual region): ``pxla.dims`` of the full value and optionally
  ``pxla.manual_axes = ["x"]`` (default: every mesh axis);
* ``@pxla.sharding_constraint`` (a global value inside a partition-mode
  program, laid out as an xmap maps it): ``pxla.dims`` of the value, ``"?"``
  where XLA's propagation decides.

XLA's attributes that passes read go through the same checked readers:
``mhlo.sharding`` (a string), ``call_target_name`` (:func:`custom_call_target`),
``channel_handle`` (:func:`read_channel_handle`), ``replica_groups`` and
``source_target_pairs`` (:func:`read_int_matrix`), and a function's
``function_type`` / ``arg_attrs`` / ``res_attrs`` (:func:`function_type`,
:func:`boundary_attrs`).

Every reader checks the attribute's kind and range and raises
:class:`PassError` located at the op that carries it, naming the attribute
and what it should be.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

import numpy as np
from jaxlib.mlir import ir

from pxla_mlir.mlir.core import attr_readers, ir_utils
from pxla_mlir.mlir.core.attr_readers import (
    MAX_I32 as MAX_I32,
    MAX_I64 as MAX_I64,
    boundary_attrs as boundary_attrs,
    custom_call_target as custom_call_target,
    function_type as function_type,
    kind_error,
    read_channel_handle as read_channel_handle,
    read_int as read_int,
    read_int_matrix as read_int_matrix,
    read_str as read_str,
    require_int as require_int,
    string_list as string_list,
    string_value as string_value,
)
from pxla_mlir.mlir.core.diagnostics import PassError
from pxla_mlir.mlir.sharding.devices import MAX_DEVICES
from pxla_mlir.mlir.sharding.mesh import AbstractMesh, MeshError, axis_groups, mapping_from_dims

MESH = "pxla.mesh"
#: The trailing pxla.mesh axis of the devices a pmap's nested pmaps use (its inner replicas).
REP_AXIS = "_pxla_rep"
DIMS = "pxla.dims"
TILE_DIMS = "pxla.tile_dims"
SHARDING_SPEC = "pxla.sharding_spec"
MANUAL_AXES = "pxla.manual_axes"
AXIS, AXIS_SIZE, STRIDE, AXIS_NAME = "pxla.axis", "pxla.axis_size", "pxla.stride", "pxla.axis_name"
NUM_REPLICAS, NUM_PARTITIONS = "mhlo.num_replicas", "mhlo.num_partitions"
SHARDING = "mhlo.sharding"
CHANNEL_HANDLE = attr_readers.CHANNEL_HANDLE

#: Placeholder custom-call targets.
SHARD, UNSHARD = "pxla.shard", "pxla.unshard"
FULL_TO_SHARD, SHARD_TO_FULL = "pxla.full_to_shard", "pxla.shard_to_full"
SHARDING_CONSTRAINT = "pxla.sharding_constraint"
#: jax's donation attributes on @main's arguments: an input aliased to an output, or only donated.
ALIASING_OUTPUT, BUFFER_DONOR = "tf.aliasing_output", "jax.buffer_donor"

#: The prefix of every pxla attribute and placeholder target.
PREFIX = "pxla."
ATTRIBUTES = frozenset((MESH, DIMS, TILE_DIMS, SHARDING_SPEC, MANUAL_AXES, AXIS, AXIS_SIZE, STRIDE, AXIS_NAME))
PLACEHOLDERS = frozenset((SHARD, UNSHARD, FULL_TO_SHARD, SHARD_TO_FULL, SHARDING_CONSTRAINT))
UNSPECIFIED = "?"
#: The ops a placeholder can be: a custom call in either form (StableHLO as import leaves it, or MHLO).
CUSTOM_CALLS = frozenset({"mhlo.custom_call", "stablehlo.custom_call"})
_MESH_ITEM = re.compile(r"^\s*([A-Za-z_][\w]*)\s*=\s*(\d+)\s*$")


# -- the module's device counts ---------------------------------------------------------------

def is_pxla_name(name: str) -> bool:
    """Whether an attribute name or custom-call target is in the pxla form's namespace."""
    return name.startswith(PREFIX)


def device_counts(module: ir.Operation) -> tuple[int, int]:
    """``(mhlo.num_replicas, mhlo.num_partitions)``, 1 where absent."""
    return (read_int(module, NUM_REPLICAS, 1, minimum=1, maximum=MAX_DEVICES),
            read_int(module, NUM_PARTITIONS, 1, minimum=1, maximum=MAX_DEVICES))


def num_devices(module: ir.Operation) -> int:
    replicas, partitions = device_counts(module)
    if replicas * partitions > MAX_DEVICES:
        raise PassError(module, f"{NUM_REPLICAS} * {NUM_PARTITIONS} = {replicas * partitions} devices is more than "
                                f"the {MAX_DEVICES} supported")
    return replicas * partitions


def set_device_counts(module: ir.Operation, replicas: int, partitions: int) -> None:
    ir_utils.set_i32_attr(module, NUM_REPLICAS, replicas)
    ir_utils.set_i32_attr(module, NUM_PARTITIONS, partitions)


# -- pxla.mesh ------------------------------------------------------------------------------

def format_mesh(shape: Mapping[str, int]) -> str:
    return ",".join(f"{n}={s}" for n, s in shape.items())


def set_mesh(op: ir.Operation, shape: Mapping[str, int]) -> None:
    """Writes ``pxla.mesh`` (needs a live context)."""
    op.attributes[MESH] = ir.StringAttr.get(format_mesh(shape))


def parse_mesh(text: str, where) -> AbstractMesh:
    names, sizes = [], []
    for item in text.split(","):
        m = _MESH_ITEM.match(item)
        if not m:
            raise PassError(where, f"bad {MESH} {text!r}: expected comma-separated name=size, e.g. \"x=2,y=4\"")
        names.append(m.group(1))
        sizes.append(int(m.group(2)))
    try:
        return AbstractMesh(sizes, names)
    except MeshError as e:
        raise PassError(where, f"bad {MESH} {text!r}: {e}") from None


def declared_mesh(op: ir.Operation) -> AbstractMesh | None:
    """The op's ``pxla.mesh`` for display: None where it has none, or a malformed one."""
    text = op.attributes.get(MESH)
    if not isinstance(text, ir.StringAttr):
        return None
    try:
        return parse_mesh(text.value, op)
    except PassError:
        return None


def mesh_of(op: ir.Operation, module: ir.Operation) -> AbstractMesh:
    """The op's own ``pxla.mesh``, else the module's."""
    for holder in (op, module):
        if MESH in holder.attributes:
            return parse_mesh(string_value(holder.attributes[MESH], MESH, holder), holder)
    raise PassError(op, f"no {MESH} on the op or the module; add e.g. {MESH} = \"x=2,y=4\" to the module")


# -- pxla.dims / pxla.tile_dims -----------------------------------------------------------------

def dims_attr(dims: Sequence[Sequence[str] | None]) -> ir.ArrayAttr:
    """``pxla.dims`` text for mesh axes per dimension (None: unspecified)."""
    return ir.ArrayAttr.get([ir.StringAttr.get(UNSPECIFIED) if axes is None else
                             ir.ArrayAttr.get([ir.StringAttr.get(a) for a in axes]) for axes in dims])


@dataclasses.dataclass(frozen=True)
class DimsSpec:
    """A parsed ``pxla.dims``: mesh axes per dimension, and unspecified dims."""

    dims: tuple[tuple[str, ...], ...]
    unspecified: frozenset[int]

    @property
    def mapping(self) -> dict[str, int]:
        return mapping_from_dims(self.dims)

    def backend_config(self) -> str | None:
        if not self.unspecified:
            return None
        return "unspecified_dims=[" + ",".join(map(str, sorted(self.unspecified))) + "]"


def parse_dims(attr: ir.Attribute, rank: int, mesh: AbstractMesh, where, what: str = "value",
               name: str = DIMS) -> DimsSpec:
    if not isinstance(attr, ir.ArrayAttr):
        raise kind_error(where, name, "an array with one entry per dimension (e.g. [[\"x\"], []])", attr)
    entries = list(ir.ArrayAttr(attr))
    if len(entries) != rank:
        raise PassError(where, f"{name} has {len(entries)} entries but the {what} has rank {rank}")
    dims, unspecified = [], set()
    for d, entry in enumerate(entries):
        if isinstance(entry, ir.StringAttr) and ir.StringAttr(entry).value == UNSPECIFIED:
            unspecified.add(d)
            dims.append(())
        else:
            dims.append(tuple(string_list(entry, f"{name} entry {d}", where)))
    spec = DimsSpec(tuple(dims), frozenset(unspecified))
    try:
        mesh.check_mapping(spec.mapping, rank, what)
    except MeshError as e:
        raise PassError(where, str(e)) from None
    return spec


# -- placeholders ------------------------------------------------------------------------------

def any_custom_call_target(op: ir.Operation) -> str | None:
    """The target of a custom call in either form (StableHLO, as import
    leaves it, or MHLO); None for other ops."""
    if op.name in CUSTOM_CALLS and attr_readers.CALL_TARGET_NAME in op.attributes:
        return string_value(op.attributes[attr_readers.CALL_TARGET_NAME], attr_readers.CALL_TARGET_NAME, op)
    return None


def placeholder_target(op: ir.Operation) -> str | None:
    """The target of an ``mhlo.custom_call`` placeholder; a ``stablehlo`` one
    (the pxla form before legalization) is an error that says what to run."""
    if op.name == "stablehlo.custom_call":
        target = any_custom_call_target(op)
        if target is not None and is_pxla_name(target):
            raise PassError(op, f"placeholder @{target} is still a stablehlo.custom_call: legalize the module to "
                                f"MHLO first (stablehlo-legalize-to-hlo, the first step of the map pipelines)")
    return custom_call_target(op)


def placeholder_attrs(*, axis: int, axis_size: int, stride: int, axis_name) -> dict[str, ir.Attribute]:
    """The attributes of a ``@pxla.shard`` / ``@pxla.unshard`` (needs a live context)."""
    i64 = ir.IntegerType.get_signless(64)
    return {AXIS: ir.IntegerAttr.get(i64, int(axis)), AXIS_SIZE: ir.IntegerAttr.get(i64, int(axis_size)),
            STRIDE: ir.IntegerAttr.get(i64, int(stride)), AXIS_NAME: ir.StringAttr.get(str(axis_name))}


@dataclasses.dataclass
class Placeholder:
    """A checked ``@pxla.shard`` or ``@pxla.unshard``."""

    op: ir.Operation
    axis: int
    axis_size: int
    stride: int
    axis_name: str
    num_devices: int

    @property
    def operand_shape(self) -> list[int]:
        return list(ir.RankedTensorType(self.op.operands[0].type).shape)

    @property
    def result_shape(self) -> list[int]:
        return list(ir.RankedTensorType(self.op.results[0].type).shape)

    @property
    def groups(self) -> np.ndarray:
        return axis_groups(self.num_devices, self.stride, self.axis_size)

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            raise PassError(self.op, f"@{any_custom_call_target(self.op)}: {message}")


def placeholders(module: ir.Operation, target: str) -> list[Placeholder]:
    """Every ``@target`` placeholder in ``module``, its attributes and layout checked."""
    devices = None
    out: list[Placeholder] = []
    # Only custom calls can be placeholders: the other ops are touched for their name alone.
    for op, _ in ir_utils.walk_selected(module, CUSTOM_CALLS.__contains__):
        if placeholder_target(op) != target:
            continue
        if devices is None:
            devices = num_devices(module)
        out.append(check_placeholder(op, target, devices))
    return out


def check_placeholder(op: ir.Operation, target: str, devices: int) -> Placeholder:
    """A ``@pxla.shard`` / ``@pxla.unshard`` (either form) read and checked
    against the module's ``devices``."""
    missing = [a for a in (AXIS, AXIS_SIZE, STRIDE) if a not in op.attributes]
    if missing:
        raise PassError(op, f"@{target} needs {', '.join(missing)} (integer attributes)")
    if len(op.operands) != 1 or len(op.results) != 1:
        raise PassError(op, f"@{target} takes one operand and has one result")
    for v in (op.operands[0], op.results[0]):
        if not isinstance(v.type, ir.RankedTensorType):
            raise PassError(op, f"@{target} works on ranked tensors, got {v.type}")
    p = Placeholder(op, require_int(op, AXIS, minimum=0), require_int(op, AXIS_SIZE, minimum=1),
                    require_int(op, STRIDE, minimum=1), read_str(op, AXIS_NAME, "?"), devices)
    global_rank = len(p.operand_shape) if target == SHARD else len(p.result_shape)
    p.check(p.axis < global_rank, f"{AXIS} = {p.axis} is out of range for a rank-{global_rank} value")
    p.check(devices % (p.axis_size * p.stride) == 0,
            f"axis '{p.axis_name}' of size {p.axis_size} with stride {p.stride} does not fit the module's "
            f"{devices} devices (num_replicas * num_partitions)")
    return p


@dataclasses.dataclass
class ManualBoundary:
    """A checked ``@pxla.full_to_shard`` or ``@pxla.shard_to_full``."""

    op: ir.Operation
    to_shard: bool  # full_to_shard (else shard_to_full)
    full_type: ir.RankedTensorType
    tile_type: ir.RankedTensorType
    mesh: AbstractMesh
    spec: DimsSpec  # pxla.dims of the full value
    manual: tuple[str, ...]  # manual mesh axes, in mesh order

    @property
    def full_value(self) -> ir.Value:
        return self.op.operands[0] if self.to_shard else self.op.results[0]

    @property
    def tile_value(self) -> ir.Value:
        return self.op.results[0] if self.to_shard else self.op.operands[0]


def manual_axes(op: ir.Operation, mesh: AbstractMesh, default: Sequence[str] | None = None) -> tuple[str, ...]:
    """The op's ``pxla.manual_axes`` in mesh order (``default``, else every mesh axis, when absent)."""
    if MANUAL_AXES in op.attributes:
        manual = string_list(op.attributes[MANUAL_AXES], MANUAL_AXES, op)
    else:
        manual = list(mesh.axis_names if default is None else default)
    unknown = [a for a in manual if a not in mesh.axis_names]
    if unknown:
        raise PassError(op, f"manual axis {unknown[0]!r} is not in the mesh; its axes are "
                            f"{', '.join(map(repr, mesh.axis_names))}")
    return tuple(a for a in mesh.axis_names if a in manual)


def set_manual_axes(op: ir.Operation, axes: Sequence[str]) -> None:
    """Writes ``pxla.manual_axes`` (needs a live context)."""
    op.attributes[MANUAL_AXES] = ir.ArrayAttr.get([ir.StringAttr.get(a) for a in axes])


def manual_boundary(op: ir.Operation, module: ir.Operation, target: str | None = None) -> ManualBoundary:
    """Reads a manual-region placeholder (``target``: its target, read from an
    MHLO ``op`` when None): its mesh, ``pxla.dims`` and
    ``pxla.manual_axes``, checking that the manual axes of each dimension come
    before its automatic ones and that the tile is the full value divided by
    the manual axes."""
    target = placeholder_target(op) if target is None else target
    if len(op.operands) != 1 or len(op.results) != 1:
        raise PassError(op, f"@{target} takes one operand and has one result")
    to_shard = target == FULL_TO_SHARD
    full_t, tile_t = (op.operands[0].type, op.results[0].type) if to_shard else (op.results[0].type,
                                                                                 op.operands[0].type)
    for t in (full_t, tile_t):
        if not isinstance(t, ir.RankedTensorType):
            raise PassError(op, f"expected a ranked tensor, got {t}")
    full_t, tile_t = ir.RankedTensorType(full_t), ir.RankedTensorType(tile_t)
    mesh = mesh_of(op, module)
    if DIMS not in op.attributes:
        raise PassError(op, f"missing {DIMS} (mesh axes per dimension, e.g. [[\"x\"], []])")
    spec = parse_dims(op.attributes[DIMS], full_t.rank, mesh, op, "full value")
    manual = manual_axes(op, mesh)
    for d, axes in enumerate(spec.dims):
        kinds = [a in manual for a in axes]
        if kinds != sorted(kinds, reverse=True):
            raise PassError(op, f"dimension {d} is split by {list(axes)}: manual axes ({', '.join(manual)}) must "
                                f"come before the automatic ones of a dimension (major first)")
    split = {a: d for a, d in spec.mapping.items() if a in manual}
    try:
        tile_shape = mesh.tile_shape(full_t.shape, split, "full value")
    except MeshError as e:
        raise PassError(op, str(e)) from None
    if list(tile_shape) != list(tile_t.shape) or full_t.element_type != tile_t.element_type:
        expected = ir.RankedTensorType.get(list(tile_shape), full_t.element_type)
        raise PassError(op, f"the tile type must be {expected} (the full {full_t} split by "
                            f"{split}), got {tile_t}")
    return ManualBoundary(op, to_shard, full_t, tile_t, mesh, spec,
                          tuple(a for a in mesh.axis_names if a in manual))


@dataclasses.dataclass
class ShardingConstraint:
    """A checked ``@pxla.sharding_constraint``: its value's type, mesh and ``pxla.dims``."""

    op: ir.Operation
    type: ir.RankedTensorType
    mesh: AbstractMesh
    spec: DimsSpec


def sharding_constraint(op: ir.Operation, module: ir.Operation) -> ShardingConstraint:
    """Reads a ``@pxla.sharding_constraint``: one operand and one result of
    the same ranked type, ``pxla.dims`` valid on the op's (or module's) mesh."""
    if len(op.operands) != 1 or len(op.results) != 1:
        raise PassError(op, f"@{SHARDING_CONSTRAINT} takes one operand and has one result")
    t = op.operands[0].type
    if not isinstance(t, ir.RankedTensorType) or op.results[0].type != t:
        raise PassError(op, f"@{SHARDING_CONSTRAINT} takes and returns one ranked tensor of the same type, got "
                            f"{t} -> {op.results[0].type}")
    t = ir.RankedTensorType(t)
    mesh = mesh_of(op, module)
    if DIMS not in op.attributes:
        raise PassError(op, f"missing {DIMS} (mesh axes per dimension, e.g. [[\"x\"], []])")
    return ShardingConstraint(op, t, mesh, parse_dims(op.attributes[DIMS], t.rank, mesh, op))
