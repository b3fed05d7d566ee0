"""What a pass of one's own often reads, without writing it again: `from pxla_mlir.passes import helpers`.

Read-only: nothing here changes the module. Ops are named by their *kind*,
the op name without its dialect (`all_reduce` for `mhlo.all_reduce` and
`stablehlo.all_reduce`), so one helper serves both dialects a pass sees.

* `walk` and `ops_of_kind`: the ops nested in an op, pre-order, as a list (rewrite while you go);
* `main_function`, `public_functions`: `@main` and what callers of the module call;
* `device_counts`, `mesh_axes`: the module's replicas and partitions, its `pxla.mesh`;
* `collectives`, `group_mode`, `device_groups`: which devices take part in each collective, numbered as XLA
  numbers them (`replica * num_partitions + partition`).

XLA reads a collective's `replica_groups` by its group mode, which the op's
`channel_handle` and `use_global_device_ids` select:

| channel_handle / use_global_device_ids | mode | a group, as devices |
|---|---|---|
| absent | cross-replica | its replicas, in every partition |
| present, use_global_device_ids | flattened-id | `replica * partitions + partition` |
| present, no use_global_device_ids | cross-replica-and-partition | its replicas x every partition |
| present on all_to_all / collective_permute | cross-partition | its partitions, in every replica |

An empty `replica_groups` is one group of every id.
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from pxla_mlir.mlir.core import device_groups as _groups, ir_utils, pxla_attrs

__all__ = ["COLLECTIVE_KINDS", "collectives", "device_counts", "device_groups", "group_mode", "id_rows", "kind",
           "main_function", "mesh_axes", "ops_of_kind", "public_functions", "walk"]

#: The collectives' kinds, in either dialect (`cross-replica-sum` is MHLO's older all_reduce).
COLLECTIVE_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
                    "collective_broadcast", "cross-replica-sum")
_DIALECTS = ("mhlo", "stablehlo")
#: Kinds whose channel makes their ids partitions (they have no use_global_device_ids).
_CROSS_PARTITION = ("all_to_all", "collective_permute", "collective_broadcast")


def kind(op: ir.Operation | ir.OpView) -> str:
    """The op's name without its dialect: `all_reduce` for `mhlo.all_reduce`."""
    return op.operation.name.partition(".")[2]


def walk(root: ir.Operation | ir.OpView) -> list[ir.Operation]:
    """Every op nested in `root` (`root` included), pre-order, as a list: the caller may rewrite the
    module while it goes through them."""
    return ir_utils.walk(root.operation)


def ops_of_kind(root: ir.Operation | ir.OpView, kinds: tuple[str, ...]) -> list[ir.Operation]:
    """The MHLO and StableHLO ops of `kinds` nested in `root`, in order."""
    return [op for op in walk(root) if kind(op) in kinds and op.name.partition(".")[0] in _DIALECTS]


def main_function(module: ir.Operation | ir.OpView) -> ir.Operation | None:
    """The module's `func.func @main`, or None."""
    return ir_utils.find_function(module.operation, "main")


def public_functions(module: ir.Operation | ir.OpView) -> list[str]:
    """The names of the module's public functions: what its callers (jax, XLA) call; a pass must keep them."""
    names = []
    for op in module.operation.regions[0].blocks[0].operations:
        if op.operation.name != "func.func":
            continue
        visibility = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None  # noqa: SIM401
        if visibility is None or ir.StringAttr(visibility).value == "public":
            names.append(ir.StringAttr(op.attributes["sym_name"]).value)
    return names


def device_counts(module: ir.Operation | ir.OpView) -> tuple[int, int]:
    """`(mhlo.num_replicas, mhlo.num_partitions)`, 1 where absent (a malformed count raises `PassError`)."""
    return pxla_attrs.device_counts(module.operation)


def mesh_axes(module: ir.Operation | ir.OpView) -> dict[str, int]:
    """The module's `pxla.mesh` as `{axis: size}` (in its order), `{}` for a module without one."""
    text = pxla_attrs.read_str(module.operation, pxla_attrs.MESH)
    if text is None:
        return {}
    mesh = pxla_attrs.parse_mesh(text, module.operation)
    return {str(name): int(size) for name, size in zip(mesh.axis_names, mesh.axis_sizes)}


def collectives(module: ir.Operation | ir.OpView, kinds: tuple[str, ...] = COLLECTIVE_KINDS) -> list[ir.Operation]:
    """The collectives of `kinds` in `module`, MHLO and StableHLO alike, in order."""
    return ops_of_kind(module, kinds)


def group_mode(op: ir.Operation | ir.OpView) -> str:
    """How XLA reads the op's ids (see the table above): `cross-replica`, `cross-partition`,
    `cross-replica-and-partition` or `flattened-id`."""
    attrs = op.operation.attributes
    if "channel_handle" not in attrs:
        return "cross-replica"
    if kind(op) in _CROSS_PARTITION:
        return "cross-partition"
    if "use_global_device_ids" in attrs:
        return "flattened-id"
    return "cross-replica-and-partition"


def id_rows(op: ir.Operation | ir.OpView, attr_name: str = "replica_groups") -> list[list[int]]:
    """The rows of an integer matrix attribute (`replica_groups`, `source_target_pairs`), `-1` padding
    dropped; `[]` where the op has none."""
    attrs = op.operation.attributes
    if attr_name not in attrs:
        return []
    rows = np.array(ir.DenseIntElementsAttr(attrs[attr_name]), dtype=np.int64)
    return [[int(i) for i in row if i != -1] for row in rows.reshape(rows.shape[0], -1)] if rows.size else []


def device_groups(op: ir.Operation | ir.OpView, replicas: int, partitions: int) -> list[list[int]]:
    """Each group of devices that take part together, in the order the op lists them; for a
    collective_permute, each `[source, target]` pair, in every replica (or partition) it repeats in."""
    mode = group_mode(op)
    if kind(op) == "collective_permute":
        return [list(pair) for pair in _groups.permute_pairs(mode, id_rows(op, "source_target_pairs"), replicas,
                                                              partitions)]
    return [list(group) for group in _groups.device_indices(mode, id_rows(op), replicas, partitions)]
