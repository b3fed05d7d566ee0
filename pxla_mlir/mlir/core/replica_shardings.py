"""Tiled ``mhlo.sharding`` in a module with both replicas and partitions.

jaxlib 0.10.2 compiles a module with ``mhlo.num_replicas > 1`` and
``mhlo.num_partitions > 1`` whose ops carry a tiled ``mhlo.sharding``, then
aborts the process in IFRT (``Check failed: xla_hlo_sharding_.TotalNumTiles()
== devices_->size() (4 vs. 8)``): its tiles count partitions, its devices
replicas x partitions. pxla-verify-handoff and ``compile_module`` refuse such
a module with :func:`problem` before jaxlib sees it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils, pxla_attrs
from pxla_mlir.mlir.core.shardy import GSPMD_SHARDING
from pxla_mlir.mlir.sharding.hlo_sharding import parse_elements

__all__ = ["places", "problem", "first_problem"]


class Attributes(Protocol):
    """What ``places`` gives for a place: an op's attribute map or a boundary's dict."""

    def __contains__(self, name: str, /) -> bool: ...
    def __getitem__(self, name: str, /) -> ir.Attribute: ...
    def __iter__(self) -> Iterator[str]: ...


def places(op: ir.Operation) -> list[tuple[str, Attributes]]:
    """("where", attributes) of the op and, for a function, of each argument and result."""
    found: list[tuple[str, Attributes]] = [("", op.attributes)]
    if op.name == "func.func":
        for key, kind in (("arg_attrs", "argument"), ("res_attrs", "result")):
            if key in op.attributes:
                found += [(f"{kind} {i} of ", d) for i, d in enumerate(pxla_attrs.boundary_attrs(op, key))]
    return found


def problem(op: ir.Operation, replicas: int, partitions: int) -> str:
    """Why ``op`` (or its function boundary) cannot run in a module of
    ``replicas`` x ``partitions`` devices ('' when it can)."""
    if replicas == 1 or partitions == 1:
        return ""
    for where, attrs in places(op):
        if GSPMD_SHARDING not in attrs or not isinstance(attrs[GSPMD_SHARDING], ir.StringAttr):
            continue
        text = ir.StringAttr(attrs[GSPMD_SHARDING]).value
        try:
            tiled = any(s.kind == "tiled" for s in parse_elements(text))
        except ValueError:
            tiled = True  # unreadable here: XLA might read it as tiled
        if tiled:
            return (f"{where}{op.name} has mhlo.sharding = \"{text}\" in a module of {replicas} replicas x "
                    f"{partitions} partitions: jaxlib 0.10.2 aborts the process running a module with both "
                    f"replicas and partitions that carries tiled shardings; lower it in partition mode "
                    f"(mode=\"partition\": mhlo.num_replicas = 1, mhlo.num_partitions = {replicas * partitions})")
    return ""


def first_problem(module: ir.Operation) -> tuple[ir.Operation, str] | None:
    """The first op of ``module`` with a :func:`problem`, and the problem."""
    replicas, partitions = pxla_attrs.device_counts(module)
    if replicas == 1 or partitions == 1:
        return None
    for op in ir_utils.walk(module):
        text = problem(op, replicas, partitions)
        if text:
            return op, text
    return None
