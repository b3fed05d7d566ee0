"""The ``@pxla.shard`` / ``@pxla.unshard`` placeholders of nested pmaps.

Import emits them (see :mod:`pxla_mlir.pmaps.primitive`); the expand passes
read them through :func:`placeholders`, which validates the attributes and
the device layout once, with located errors::

    mhlo.custom_call @pxla.shard(%x) {pxla.axis = 1 : i64, pxla.axis_name = "j",
                                      pxla.axis_size = 4 : i64, pxla.stride = 2 : i64}

``pxla.axis`` is the mapped dimension of the *global* value (the operand of a
shard, the result of an unshard); ``axis_size * stride`` must divide the
module's device count (``mhlo.num_replicas * mhlo.num_partitions``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from jaxlib.mlir import ir

from . import ir_utils
from .pass_infra import PassError

ATTRS = ("pxla.axis", "pxla.axis_size", "pxla.stride")


@dataclasses.dataclass
class Placeholder:
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
        from .mhlo_build import axis_groups

        return axis_groups(self.num_devices, self.stride, self.axis_size)

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            raise PassError(self.op, f"@{ir_utils.custom_call_target(self.op)}: {message}")


def placeholders(module: ir.Operation, target: str) -> list[Placeholder]:
    devices = ir_utils.int_attr(module, "mhlo.num_replicas", 1) * ir_utils.int_attr(module, "mhlo.num_partitions", 1)
    out = []
    for op in ir_utils.walk(module):
        if ir_utils.custom_call_target(op) != target:
            continue
        missing = [a for a in ATTRS if a not in op.attributes]
        if missing:
            raise PassError(op, f"@{target} needs {', '.join(missing)} (integer attributes)")
        if len(op.operands) != 1 or len(op.results) != 1:
            raise PassError(op, f"@{target} takes one operand and has one result")
        for v in (op.operands[0], op.results[0]):
            if not isinstance(v.type, ir.RankedTensorType):
                raise PassError(op, f"@{target} works on ranked tensors, got {v.type}")
        p = Placeholder(op, ir_utils.int_attr(op, "pxla.axis"), ir_utils.int_attr(op, "pxla.axis_size"),
                        ir_utils.int_attr(op, "pxla.stride"), ir_utils.str_attr(op, "pxla.axis_name", "?"), devices)
        global_rank = len(p.operand_shape) if target == "pxla.shard" else len(p.result_shape)
        p.check(0 <= p.axis < global_rank, f"pxla.axis = {p.axis} is out of range for a rank-{global_rank} value")
        p.check(p.axis_size >= 1 and p.stride >= 1, "pxla.axis_size and pxla.stride must be positive")
        p.check(devices % (p.axis_size * p.stride) == 0,
                f"axis '{p.axis_name}' of size {p.axis_size} with stride {p.stride} does not fit the module's "
                f"{devices} devices (num_replicas * num_partitions)")
        out.append(p)
    return out
