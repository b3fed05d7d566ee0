"""Who takes part in an MHLO/StableHLO collective, in XLA's terms (a helper of the example plugins).

XLA reads a collective's ``replica_groups`` by its group mode, which the
op's ``channel_handle`` and ``use_global_device_ids`` select:

===========================================  ===========================  =================================
channel_handle / use_global_device_ids       mode                         a group, as devices
===========================================  ===========================  =================================
absent                                       cross-replica                its replicas, in every partition
present, use_global_device_ids               flattened ids                ``replica * partitions + partition``
present, no use_global_device_ids            cross-replica-and-partition  its replicas x every partition
present on all_to_all / collective_permute   cross-partition              its partitions, in every replica
===========================================  ===========================  =================================

An empty ``replica_groups`` is one group of every id. Devices are numbered
as XLA numbers them: ``replica * num_partitions + partition``.
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

#: Ops whose channel makes the ids partitions (they have no use_global_device_ids).
_CROSS_PARTITION = ("all_to_all", "collective_permute", "collective_broadcast")


def kind(op: ir.Operation) -> str:
    """The op's name without its dialect: ``all_reduce`` for ``mhlo.all_reduce`` and ``stablehlo.all_reduce``."""
    return op.name.partition(".")[2]


def collectives(module: ir.Operation, kinds: tuple[str, ...]) -> list[ir.Operation]:
    """The mhlo and stablehlo ops of ``kinds`` (``all_reduce``, ...) in ``module``, in order."""
    found: list[ir.Operation] = []

    def visit(op):
        if kind(op) in kinds and op.name.partition(".")[0] in ("mhlo", "stablehlo"):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


def device_counts(module: ir.Operation) -> tuple[int, int]:
    """``(mhlo.num_replicas, mhlo.num_partitions)``, 1 where absent."""
    attrs = module.attributes
    replicas, partitions = (ir.IntegerAttr(attrs[n]).value if n in attrs else 1
                            for n in ("mhlo.num_replicas", "mhlo.num_partitions"))
    return replicas, partitions


def mode(op: ir.Operation) -> str:
    if "channel_handle" not in op.attributes:
        return "cross-replica"
    if kind(op) in _CROSS_PARTITION:
        return "cross-partition"
    if "use_global_device_ids" in op.attributes:
        return "flattened-ids"
    return "cross-replica-and-partition"


def id_rows(op: ir.Operation, attr_name: str = "replica_groups") -> list[list[int]]:
    """The rows of an integer matrix attribute (``-1`` padding dropped)."""
    if attr_name not in op.attributes:
        return []
    rows = np.array(ir.DenseIntElementsAttr(op.attributes[attr_name]), dtype=np.int64)
    return [[int(i) for i in row if i != -1] for row in rows.reshape(rows.shape[0], -1)] if rows.size else []


def groups(op: ir.Operation, replicas: int, partitions: int) -> list[list[int]]:
    """Each group of devices that take part together, in the order the op lists them."""
    m = mode(op)
    ids = [row for row in id_rows(op) if row]
    if not ids:
        ids = [list(range({"cross-partition": partitions, "flattened-ids": replicas * partitions}.get(m, replicas)))]
    if m == "flattened-ids":
        return ids
    if m == "cross-partition":
        return [[r * partitions + p for p in g] for r in range(replicas) for g in ids]
    if m == "cross-replica-and-partition":
        return [[r * partitions + p for r in g for p in range(partitions)] for g in ids]
    return [[r * partitions + p for r in g] for p in range(partitions) for g in ids]
