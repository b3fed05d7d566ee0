"""Who talks to whom in a collective, and how many bytes each device sends.

Device index ``d`` is XLA's flattened id ``replica * num_partitions +
partition`` (the order of ``Lowered.devices``: replica-major); a
collective's groups as device indices come from
:func:`pxla_mlir.mlir.core.device_groups.device_indices`.

Bytes sent per device per call follow NCCL's bus-bandwidth conventions
(nccl-tests ``doc/PERFORMANCE.md``), i.e. bandwidth-optimal ring algorithms,
for a group of ``g`` devices:

=====================  =====================================  ==================
op                     bytes each member sends                ``n`` is
=====================  =====================================  ==================
all_reduce             ``2 * (g - 1) / g * n``                operand bytes
all_gather             ``(g - 1) / g * n`` = ``(g - 1) * op``  result bytes
reduce_scatter         ``(g - 1) / g * n``                    operand bytes
all_to_all             ``(g - 1) / g * n``                    operand bytes
collective_permute     ``n`` if the device is a source, else 0 operand bytes
collective_broadcast   ``n`` for every ring member but the    operand bytes
                       last (the ring starts at the root,
                       the group's first id)
=====================  =====================================  ==================

A group of one sends nothing; a device in no group sends nothing. Variadic
ops count all their operands (results for all_gather).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

__all__ = ["bytes_sent", "element_bytes", "tensor_bytes"]

Groups = tuple[tuple[int, ...], ...]

_BITS = re.compile(r"^(?:complex<)?(?:[su]?i|f|bf|tf)(\d+)")


def element_bytes(element_type: str) -> int:
    """Bytes of one element of an MLIR element type (``i1`` is XLA's 1-byte pred)."""
    m = _BITS.match(element_type)
    if not m:
        raise ValueError(f"unknown element type {element_type!r}")
    bits = int(m.group(1))
    if element_type.startswith("complex<"):
        bits *= 2
    return max(1, math.ceil(bits / 8))


def tensor_bytes(shape: Sequence[int], element_type: str) -> int:
    return math.prod(shape) * element_bytes(element_type)


def bytes_sent(op: str, groups: Groups, operand_bytes: int, result_bytes: int, num_devices: int) -> tuple[int, ...]:
    """Bytes each device sends in one call (see the module docs). ``groups``
    holds (source, target) pairs for collective_permute."""
    sent = [0.0] * num_devices
    short = op.rsplit(".", 1)[-1]
    if short == "collective_permute":
        for src, _ in groups:
            sent[src] += operand_bytes
        return tuple(int(s) for s in sent)
    for group in groups:
        g = len(group)
        if g < 2:
            continue
        if short == "all_reduce":
            each = 2 * (g - 1) / g * operand_bytes
        elif short == "all_gather":
            each = (g - 1) / g * result_bytes
        elif short in ("reduce_scatter", "all_to_all"):
            each = (g - 1) / g * operand_bytes
        elif short == "collective_broadcast":
            for d in group[:-1]:
                sent[d] += operand_bytes
            continue
        else:
            raise ValueError(f"not a collective: {op!r}")
        for d in group:
            sent[d] += each
    return tuple(int(round(s)) for s in sent)
