"""pxla-convert-to-replica-mode: runs a per-device partition-mode program as replicas.

jax lowers collectives only in SPMD form: ``partition_id``, channel handles,
``use_global_device_ids`` and ``mhlo.num_partitions = N``. The same per-device
program runs as N *replicas* (the 2022 pmap form, no SPMD partitioner) once:

* the module says ``mhlo.num_replicas = N, mhlo.num_partitions = 1``;
* every ``mhlo.partition_id`` becomes ``mhlo.replica_id``;
* collectives lose ``channel_handle`` and ``use_global_device_ids``. Their ids
  keep their meaning: with one replica, flattened ids and partition ids equal
  the new replica ids. Groups that counted replicas (cross-replica, or
  cross-replica-and-partition) are rewritten to the replica groups they meant
  over N devices;
* ``mhlo.sharding`` of ``{manual}`` or ``{replicated}`` is dropped.

Tiled shardings and the SPMD custom calls (``@Sharding``,
``@SPMDFullToShardShape``, ``@SPMDShardToFullShape``) need XLA's partitioner,
so they are errors here, as is a module with both replicas and partitions.

Before::

    module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
      func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
        %0 = "mhlo.all_reduce"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>,
               replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ...
        %1 = mhlo.partition_id : tensor<ui32>

After::

    module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
      func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
        %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>}> ...
        %1 = mhlo.replica_id : tensor<ui32>

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-convert-to-replica-mode,canonicalize)'
"""

from __future__ import annotations

import dataclasses

import numpy as np
from jaxlib.mlir import ir

from pxla_mlir.mlir.core import device_groups, ir_utils, pxla_attrs
from pxla_mlir.mlir.core.device_groups import GroupMode
from pxla_mlir.mlir.core.pxla_attrs import SHARDING, read_str, string_value
from pxla_mlir.mlir.pass_infra import ModulePass, PassError
from pxla_mlir.mlir.pass_infra.statistics import Statistic

_SPMD_CALLS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape")
#: The ops this pass rewrites or checks (besides those that carry an mhlo.sharding).
_CONVERTED = frozenset(("mhlo.partition_id", "mhlo.custom_call", "func.func", *device_groups.MHLO_COLLECTIVES))
_DROPPABLE_SHARDINGS = ("{manual}", "{replicated}")


@dataclasses.dataclass(frozen=True)
class ConvertToReplicaModePass(ModulePass):
    argument = "pxla-convert-to-replica-mode"
    summary = "Turn a partition-mode per-device MHLO module into the equivalent replica-mode module"

    ids = Statistic("ids-converted", "partition_id ops turned into replica_id")
    collectives = Statistic("collectives-converted", "collectives given replica groups and no channel")

    def run(self, module):
        replicas, partitions = pxla_attrs.device_counts(module)
        if partitions == 1:
            return  # already replica mode: nothing to convert
        if replicas != 1:
            raise PassError(module, f"module has both replicas and partitions (num_replicas = "
                                    f"{replicas}, num_partitions = {partitions}); only a pure "
                                    f"partition-mode module (num_replicas = 1) can be converted")
        n = partitions
        ops = ir_utils.walk_selected(module, _is_converted, attrs=(SHARDING,))
        self._reject_spmd(ops)
        if self._failed_sharding_check(ops):
            return
        converted: dict = {}  # (op name, group mode, groups attribute) -> new groups: collectives repeat
        for op, name in ops:
            if name == "mhlo.partition_id":  # built generically: the typed builder costs twice as much
                new = ir.Operation.create("mhlo.replica_id", results=[op.result.type], loc=op.location,
                                          ip=ir.InsertionPoint(op))
                ir_utils.replace_op(op, [new.result])
                self.ids.add()
            elif name in device_groups.MHLO_COLLECTIVES:
                self._convert_collective(op, n, converted)
                self.collectives.add()
        pxla_attrs.set_device_counts(module, n, 1)

    def _reject_spmd(self, ops) -> None:
        for op, name in ops:
            target = pxla_attrs.custom_call_target(op) if name == "mhlo.custom_call" else None
            if target in _SPMD_CALLS:
                raise PassError(op, f"@{target} needs XLA's SPMD partitioner, which replica mode "
                                    f"does not run; convert the per-device (manual) program instead")
            if name.startswith("sdy."):
                raise PassError(op, f"'{name}' (Shardy) has no replica-mode meaning; lower without "
                                    f"Shardy or legalize the module to per-device MHLO first")

    def _failed_sharding_check(self, ops) -> bool:
        """Drops trivial shardings; reports tiled ones. True if any was reported."""
        failed = False
        for op, name in ops:
            if SHARDING in op.attributes:
                failed |= self._drop_op_sharding(op)
            if name == "func.func":
                for key in ("arg_attrs", "res_attrs"):
                    failed |= self._drop_func_shardings(op, key)
        return failed

    def _drop_func_shardings(self, func_op, key: str) -> bool:
        if key not in func_op.attributes:
            return False
        failed, dicts = False, []
        for d in ir.ArrayAttr(func_op.attributes[key]):
            entries = {a.name: a.attr for a in ir.DictAttr(d)}
            sharding = entries.get(SHARDING)
            if sharding is not None:
                if string_value(sharding, SHARDING, func_op) in _DROPPABLE_SHARDINGS:
                    del entries[SHARDING]
                else:
                    what = "argument" if key == "arg_attrs" else "result"
                    self.error(func_op, f"{what} sharding {sharding} needs XLA's SPMD "
                                        f"partitioner; replica mode runs per-device programs")
                    failed = True
            dicts.append(ir.DictAttr.get(entries))
        if not failed:
            func_op.attributes[key] = ir.ArrayAttr.get(dicts)
        return failed

    def _drop_op_sharding(self, op) -> bool:
        value = read_str(op, SHARDING)
        if value in _DROPPABLE_SHARDINGS:
            del op.attributes[SHARDING]
            return False
        self.error(op, f"sharding {value!r} needs XLA's SPMD partitioner; replica mode runs "
                          f"per-device programs")
        return True

    def _convert_collective(self, op, n: int, converted: dict) -> None:
        mode = device_groups.group_mode(op)
        attr = device_groups.groups_attr_name(op)
        key = (op.name, mode, op.attributes.get(attr))
        if key not in converted:
            converted[key] = self._replica_groups(op, mode, n)
        if converted[key] is not None:
            op.attributes[attr] = converted[key]
        for name in ("channel_handle", "use_global_device_ids"):
            if name in op.attributes:
                del op.attributes[name]

    def _replica_groups(self, op, mode: GroupMode, n: int) -> ir.Attribute | None:
        """The groups over N replicas that groups counting replicas meant (None: keep them)."""
        ids = device_groups.groups(op)
        if mode not in (GroupMode.CROSS_REPLICA, GroupMode.CROSS_REPLICA_AND_PARTITION) or not ids.size:
            return None
        if set(ids.ravel().tolist()) != {0}:
            raise PassError(op, f"{op.name} groups {ids.tolist()} name replicas other than 0 "
                                f"in a module with one replica")
        if op.name == "mhlo.collective_permute":
            ids = np.stack([np.arange(n)] * 2, axis=1)  # every device to itself
        elif mode is GroupMode.CROSS_REPLICA:
            ids = np.arange(n).reshape(n, 1)  # each partition was its own group
        else:
            ids = np.arange(n).reshape(1, n)  # one group spanning all partitions
        return ir_utils.dense_i64(ids)


def _is_converted(name: str) -> bool:
    return name in _CONVERTED or name.startswith("sdy.")
