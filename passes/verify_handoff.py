"""pxla-verify-handoff: checks that a module is ready to hand to XLA.

The last pass of every pxla pipeline. It changes nothing; it fails, with an
error at the offending op, when:

* an op outside builtin/func/mhlo remains (stablehlo, chlo, sdy, ...);
* a ``pxla.*`` placeholder (``mhlo.custom_call @pxla.shard`` etc.) survived;
* ``mhlo.num_replicas`` / ``mhlo.num_partitions`` are missing, not positive,
  or differ from the expected counts given as options;
* a collective's device ids do not fit the module: in every mode (see
  :mod:`pxla_mlir.collectives`) the groups must all have the same size, use
  ids in range, be disjoint and together cover every id; a collective
  permute's sources and targets must be in range and distinct.

It warns when ``replica_id`` is used in a module with one replica (it is then
always 0), and likewise for ``partition_id``.

Before (fails: group {0,1,2} is not all 4 replicas, and 7 is out of range)::

    module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
      func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
        %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>}> ...
        %1 = "mhlo.collective_permute"(%0) <{source_target_pairs = dense<[[0, 7]]> : tensor<1x2xi64>}> ...

After: unchanged when valid.

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-verify-handoff{num-replicas=4})'
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pxla_mlir.ir import collectives, ir_utils, pxla_attrs
from pxla_mlir.ir.pxla_attrs import NUM_PARTITIONS, NUM_REPLICAS
from pxla_mlir.pass_infra import ModulePass, PassError, option

ALLOWED_DIALECTS = ("builtin", "func", "mhlo")
#: Which pass expands each placeholder.
EXPANDED_BY = {
    "pxla.full_to_shard": "pxla-expand-manual-sharding",
    "pxla.shard_to_full": "pxla-expand-manual-sharding",
    "pxla.shard": "pxla-expand-shard",
    "pxla.unshard": "pxla-expand-unshard",
}
_HOW_TO_REMOVE = {
    "stablehlo": "legalize it with stablehlo-legalize-to-hlo",
    "chlo": "legalize it with func.func(chlo-legalize-to-hlo)",
    "sdy": "lower without Shardy (mhlo.sharding strings) instead",
}


@dataclasses.dataclass(frozen=True)
class VerifyHandoffPass(ModulePass):
    argument = "pxla-verify-handoff"
    summary = "Check that only builtin/func/mhlo remain and device counts agree with every collective"

    num_replicas: int = option(0, "expected mhlo.num_replicas (0: any)", minimum=0, maximum=pxla_attrs.MAX_DEVICES)
    num_partitions: int = option(0, "expected mhlo.num_partitions (0: any)", minimum=0,
                                 maximum=pxla_attrs.MAX_DEVICES)

    def run(self, module):
        replicas, partitions = self._device_counts(module)
        unknown_dialect_seen: set[str] = set()
        for op in ir_utils.walk(module):
            dialect = op.name.split(".", 1)[0] if "." in op.name else "builtin"
            target = pxla_attrs.custom_call_target(op)
            if target is not None and target.startswith("pxla."):
                expander = EXPANDED_BY.get(target, "the pxla pass that expands it (pxla-opt --list-passes)")
                self.error(op, f"placeholder @{target} was not expanded; run {expander} before handing "
                               f"the module to XLA")
            elif op.name.startswith("pxla."):
                self.error(op, f"pxla placeholder op '{op.name}' was not expanded")
            elif dialect not in ALLOWED_DIALECTS and op.name not in unknown_dialect_seen:
                unknown_dialect_seen.add(op.name)
                how = _HOW_TO_REMOVE.get(dialect, "only builtin, func and mhlo ops can be handed to XLA")
                self.error(op, f"'{op.name}' is not builtin/func/mhlo; {how}")
            elif op.name in collectives.MHLO_COLLECTIVES:
                self._check_collective(op, replicas, partitions)
            elif op.name == "mhlo.replica_id" and replicas == 1 and partitions > 1:
                self.warn(op, "replica_id is always 0 in a module with num_replicas = 1; "
                              "did you mean partition_id?")
            elif op.name == "mhlo.partition_id" and partitions == 1 and replicas > 1:
                self.warn(op, "partition_id is always 0 in a module with num_partitions = 1; "
                              "did you mean replica_id?")

    def _device_counts(self, module) -> tuple[int, int]:
        for attr in (NUM_REPLICAS, NUM_PARTITIONS):
            if attr not in module.attributes:
                raise PassError(module, f"module has no '{attr}' attribute; XLA needs "
                                        f"'{attr} = N : i32' on the module to compile it")
        counts = pxla_attrs.device_counts(module)
        for attr, value, expected in zip((NUM_REPLICAS, NUM_PARTITIONS), counts,
                                         (self.num_replicas, self.num_partitions)):
            if expected and value != expected:
                raise PassError(module, f"'{attr}' is {value} but {expected} was expected")
        return counts

    def _check_collective(self, op, replicas: int, partitions: int) -> None:
        mode = collectives.group_mode(op)
        n = collectives.id_count(mode, replicas, partitions)
        what = f"{op.name} ({mode.value}, ids 0..{n - 1})"
        ids = collectives.groups(op)
        if op.name == "mhlo.collective_permute":
            self._check_pairs(op, ids, n, what)
            return
        if ids.size == 0:
            return  # one group of every id (the op verifier rejects it where invalid)
        if (ids < 0).any():
            self.error(op, f"{what}: replica groups have different sizes (padded with -1): "
                           f"{ids.tolist()}")
            return
        flat = ids.ravel()
        bad = sorted({int(i) for i in flat if i >= n})
        if bad:
            self.error(op, f"{what}: ids {bad} are out of range for "
                           f"num_replicas = {replicas}, num_partitions = {partitions}")
            return
        values, counts = np.unique(flat, return_counts=True)
        if (counts > 1).any():
            self.error(op, f"{what}: ids {values[counts > 1].tolist()} appear in more than one "
                           f"group (groups must be disjoint)")
        elif len(values) != n:
            missing = sorted(set(range(n)) - set(values.tolist()))
            self.error(op, f"{what}: groups do not cover ids {missing}; every id must be in a group")

    def _check_pairs(self, op, pairs, n: int, what: str) -> None:
        if pairs.size == 0:
            return
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            self.error(op, f"{what}: source_target_pairs must be an Nx2 array")
            return
        bad = sorted({int(i) for i in pairs.ravel() if not 0 <= i < n})
        if bad:
            self.error(op, f"{what}: ids {bad} are out of range")
            return
        for col, role in ((0, "source"), (1, "target")):
            vals, counts = np.unique(pairs[:, col], return_counts=True)
            if (counts > 1).any():
                self.error(op, f"{what}: {role} ids {vals[counts > 1].tolist()} appear more than once")
