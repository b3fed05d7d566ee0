"""What the device ids in an MHLO collective mean, following XLA's
``CollectiveOpGroupMode``.

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

from jaxlib.mlir import ir

from .pxla_attrs import CHANNEL_HANDLE, read_int_matrix

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
