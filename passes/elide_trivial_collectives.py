"""pxla-elide-trivial-collectives: a collective whose every group is one device is its operand.

A map over an axis of size 1 (a pmap on a one-chip host, a nested pmap with
a size-1 inner axis) still lowers its collectives: jax 0.10.2 emits a psum
over ``i=1`` as an ``all_reduce`` with ``replica_groups = dense<0> :
tensor<1x1xi64>``, a channel and ``use_global_device_ids``, and so does
pxla. XLA's ``AllReduceSimplifier`` (run by the TPU and GPU compilers)
replaces an all-reduce whose groups have one participant by its operand,
but one with a channel only in a module compiled with SPMD partitioning:
jax.pmap's module is, a replica-mode module is not, so on a one-chip TPU
our training step kept an all-reduce per gradient that jax's lost. jax's
own lowering already drops one such op, ``all_to_all``
(``jax/_src/lax/parallel.py``, ``_all_to_all_lowering``)::

    if not is_async and len(replica_groups[0]) == 1:
      # TODO(mwhittaker): This optimization doesn't play well with async
      # collectives. Support it; or optimize it in XLA.
      return [x]

This pass drops, in the same way, every MHLO collective below whose device
groups (read as XLA reads them, in every group mode:
:mod:`pxla_mlir.mlir.core.device_groups`) are single devices that together are
every device of the module (``mhlo.num_replicas * mhlo.num_partitions``):

* ``all_reduce`` (any reduction, variadic too): each result is its operand.
  A reduction over one value never applies the reducer, so the result is
  the operand's bits: a ``-0.0`` stays ``-0.0`` (no ``+0.0`` is added), a
  NaN stays that NaN whatever ``max``/``min`` would make of two. That is
  what XLA's simplifier gives jax on TPU, and what XLA:CPU's one-device
  all-reduce (a copy) gives jax on CPU. One whose result type differs from
  its operand's (a promoting reduction) stays.
* ``all_gather`` and ``all_to_all`` (``split_count = 1``): gathering or
  exchanging one piece is the operand (a copy on CPU; XLA's simplifier
  drops a shape-preserving all-gather too). The result must have the
  operand's type, else XLA would refuse the module: an error here, at the op.
* ``collective_permute`` whose pairs are all ``(d, d)``, one per device:
  each device sends itself its value. Pairs that leave a device out stay
  (that device receives zeros), and so do pairs between different devices.
* ``collective_broadcast`` over single devices: each is its own source.

``reduce_scatter`` stays, even over one device: XLA's simplifier drops a
shape-preserving one in every module (so jax's and ours are the same on
TPU), and where it does not run, XLA:CPU adds the operand to ``+0.0``
(a ``-0.0`` becomes ``+0.0``, denormals flush to zero) in jax's program as
in ours; dropping it would make those values differ from jax's. Anything
else stays too: groups of two or more, groups that miss a device (the
verifier reports those), groups this module cannot read.

Before (a pmap of size 1: one replica, one partition)::

    module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
      func.func public @main(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
        %0 = "mhlo.all_reduce"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>,
            replica_groups = dense<0> : tensor<1x1xi64>, use_global_device_ids}> ({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>):
          %s = mhlo.add %a, %b : tensor<f32>
          mhlo.return %s : tensor<f32>
        }) : (tensor<4x2xf32>) -> tensor<4x2xf32>
        %1 = mhlo.tanh %0 : tensor<4x2xf32>
        return %1 : tensor<4x2xf32>

After::

        %1 = mhlo.tanh %x : tensor<4x2xf32>
        return %1 : tensor<4x2xf32>

It runs on final MHLO (after pxla-convert-to-replica-mode, whose groups it
reads), at the end of the pmap and xmap pipelines::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-elide-trivial-collectives)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import device_groups, ir_utils, pxla_attrs
from pxla_mlir.mlir.pass_infra import ModulePass, PassError
from pxla_mlir.mlir.pass_infra.statistics import Statistic

#: Ops whose result must have the operand's type when their groups are single devices.
_SAME_SHAPE = ("mhlo.all_gather", "mhlo.all_to_all")
#: What a one-device reduce_scatter computes depends on the backend (see above): it stays.
_ELIDED = tuple(name for name in device_groups.MHLO_COLLECTIVES if name != "mhlo.reduce_scatter")


@dataclasses.dataclass(frozen=True)
class ElideTrivialCollectivesPass(ModulePass):
    argument = "pxla-elide-trivial-collectives"
    acts_on = frozenset(_ELIDED)
    summary = "Replace collectives whose device groups are all single devices by their operands"

    elided = Statistic("collectives-elided", "collectives over groups of one device replaced by their operands")

    def run(self, module):
        counts = None
        for op, name in ir_utils.walk_selected(module, _ELIDED.__contains__):
            if counts is None:
                counts = pxla_attrs.device_counts(module)
            if not _single_devices(op, name, *counts):
                continue
            operands, results = list(op.operands), list(op.results)
            if len(operands) != len(results):
                continue
            if name in _SAME_SHAPE:
                for i, (a, r) in enumerate(zip(operands, results)):
                    if a.type != r.type:
                        which = f"operand {i}" if len(operands) > 1 else "its operand"
                        raise PassError(op, f"{name} over groups of one device returns {which} ({a.type}), but its "
                                            f"result is {r.type}; XLA would refuse this module. Over a size-1 axis "
                                            f"the result has the operand's shape")
            elif any(a.type != r.type for a, r in zip(operands, results)):
                continue  # a promoting all_reduce: not a plain copy
            ir_utils.replace_op(op, operands)
            self.elided.add()


def _single_devices(op: ir.Operation, name: str, replicas: int, partitions: int) -> bool:
    """Every group of ``op`` (every pair, for collective_permute) is one device, and each device is in one."""
    devices = replicas * partitions
    mode = device_groups.group_mode(op)
    attr = device_groups.groups_attr_name(op)
    try:
        raw = device_groups.groups(op).tolist() if attr in op.attributes else []
    except PassError:
        return False  # groups we cannot read (pxla-verify-handoff says why); leave the op
    n_ids = device_groups.id_count(mode, replicas, partitions)
    if name == "mhlo.collective_permute":
        if not raw or any(len(p) != 2 or p[0] != p[1] or not 0 <= p[0] < n_ids for p in raw):
            return False
        pairs = device_groups.permute_pairs(mode.value, raw, replicas, partitions)
        return sorted(t for _, t in pairs) == list(range(devices))
    rows = [[i for i in row if i != -1] for row in raw]  # -1 pads shorter groups (all_reduce)
    if any(not row or any(not 0 <= i < n_ids for i in row) for row in rows):
        return False
    groups = device_groups.device_indices(mode.value, rows, replicas, partitions)
    return all(len(g) == 1 for g in groups) and sorted(g[0] for g in groups) == list(range(devices))
