"""What the device ids in an MHLO collective mean, following XLA's
``CollectiveOpGroupMode``, and its groups as device indices (XLA's flattened
id ``replica * num_partitions + partition``, the order of ``Lowered.devices``).

=====================================  ==================  ====================
channel_handle / use_global_device_ids  group mode          ids index
=====================================  ==================  ====================
absent / -                             cross-replica       replicas
present / false (all_reduce family)    cross-replica-and-  replicas (each group
                                       partition           spans all partitions)
present / true                         flattened-id        replica*P + partition
present / not an attribute of the op   cross-partition     partitions
(all_to_all, collective_permute,
collective_broadcast)
=====================================  ==================  ====================
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from jaxlib.mlir import ir

from pxla_mlir.mlir.core.pxla_attrs import CHANNEL_HANDLE, read_int_matrix

#: Ops whose ``use_global_device_ids`` is a real (boolean) attribute.
WITH_GLOBAL_IDS = ("mhlo.all_reduce", "mhlo.all_gather", "mhlo.reduce_scatter")
#: Ops whose channel makes them cross-partition.
CROSS_PARTITION_WITH_CHANNEL = ("mhlo.all_to_all", "mhlo.collective_permute", "mhlo.collective_broadcast")
MHLO_COLLECTIVES = WITH_GLOBAL_IDS + CROSS_PARTITION_WITH_CHANNEL


class GroupMode(enum.Enum):
    CROSS_REPLICA = "cross-replica"
    CROSS_PARTITION = "cross-partition"
    CROSS_REPLICA_AND_PARTITION = "cross-replica-and-partition"
    FLATTENED_ID = "flattened-id"


def group_mode(op: ir.Operation) -> GroupMode:
    if CHANNEL_HANDLE not in op.attributes:
        return GroupMode.CROSS_REPLICA
    if op.name in CROSS_PARTITION_WITH_CHANNEL:
        return GroupMode.CROSS_PARTITION
    if "use_global_device_ids" in op.attributes:
        return GroupMode.FLATTENED_ID
    return GroupMode.CROSS_REPLICA_AND_PARTITION


def id_count(mode: GroupMode, num_replicas: int, num_partitions: int) -> int:
    """How many distinct ids the groups of a collective in ``mode`` range over."""
    if mode is GroupMode.CROSS_PARTITION:
        return num_partitions
    if mode is GroupMode.FLATTENED_ID:
        return num_replicas * num_partitions
    return num_replicas


def groups_attr_name(op: ir.Operation) -> str:
    return "source_target_pairs" if op.name == "mhlo.collective_permute" else "replica_groups"


def groups(op: ir.Operation):
    """The op's replica groups (or source/target pairs) as a 2-d int64 array."""
    return read_int_matrix(op, groups_attr_name(op))


Groups = tuple[tuple[int, ...], ...]


def op_device_groups(op: ir.Operation, num_replicas: int, num_partitions: int) -> Groups:
    """The device indices of each of ``op``'s groups ((source, target) pairs for collective_permute)."""
    mode = group_mode(op).value
    ids = groups(op).tolist() if groups_attr_name(op) in op.attributes else []
    if op.name == "mhlo.collective_permute":
        return permute_pairs(mode, ids, num_replicas, num_partitions)
    return device_indices(mode, ids, num_replicas, num_partitions)


def device_indices(mode: str, groups: Sequence[Sequence[int]], num_replicas: int, num_partitions: int) -> Groups:
    """Device indices of each group, for a group mode's value (``GroupMode.value``).

    An empty group list means one group of every id. Cross-replica groups
    repeat in every partition, cross-partition groups in every replica.
    """
    R, P = num_replicas, num_partitions
    n_ids = {"cross-partition": P, "flattened-id": R * P}.get(mode, R)
    ids = [list(g) for g in groups if len(g)] or [list(range(n_ids))]
    if mode == "flattened-id":
        return tuple(tuple(g) for g in ids)
    if mode == "cross-partition":
        return tuple(tuple(r * P + p for p in g) for r in range(R) for g in ids)
    if mode == "cross-replica-and-partition":
        return tuple(tuple(r * P + p for r in g for p in range(P)) for g in ids)
    if mode == "cross-replica":
        return tuple(tuple(r * P + p for r in g) for p in range(P) for g in ids)
    raise ValueError(f"unknown group mode {mode!r}")


def permute_pairs(mode: str, pairs: Sequence[Sequence[int]], num_replicas: int,
                  num_partitions: int) -> tuple[tuple[int, int], ...]:
    """(source, target) device indices of a collective_permute."""
    if not len(pairs):
        return ()
    return tuple((g[0], g[1]) for g in device_indices(mode, pairs, num_replicas, num_partitions))
