"""pxla-verify-form: check the pxla form a map pipeline starts from.

Import writes the pxla form (:mod:`pxla_mlir.mlir.core.pxla_attrs` documents
every attribute and placeholder); a module written by hand or saved and
edited must hold the same. This pass reads all of it before any pass
rewrites the module, in StableHLO (as import leaves it) or MHLO, and reports
every problem at the op that carries it, so that a misspelled or malformed
attribute fails here with what to write instead of later, in a pass that
assumed it:

* the module's ``mhlo.num_replicas`` / ``mhlo.num_partitions`` and its (or
  a function's) ``pxla.mesh``, and ``pxla.manual_axes`` naming mesh axes;
* ``pxla.dims`` / ``pxla.tile_dims`` / ``pxla.sharding_spec`` on function
  arguments and results, one per value, against the mesh and the value's type;
* every ``@pxla.*`` custom call: a known placeholder whose attributes and
  types fit (``pxla.axis``, ``pxla.axis_size``, ``pxla.stride`` within the
  device count; ``pxla.dims`` and the tile type of a manual-region boundary);
* no ``pxla.*`` attribute that the form does not define (a misspelling).

It changes nothing; the map pipelines (``pxla-pmap-pipeline``,
``pxla-xmap-pipeline``) run it first.

Before (a shard whose attribute name is misspelled)::

    module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "i=2,_pxla_rep=4"} {
      func.func public @main(%arg0: tensor<1x4x3xf32> {pxla.tile_dims = [["i"], [], []]}) -> tensor<3xf32> {
        %0 = stablehlo.reshape %arg0 : (tensor<1x4x3xf32>) -> tensor<4x3xf32>
        %1 = stablehlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_size = 4 : i64,
            pxla.strides = 1 : i64} : (tensor<4x3xf32>) -> tensor<3xf32>
        return %1 : tensor<3xf32>
      }
    }

After: the module unchanged, and::

    error: unknown attribute pxla.strides: the pxla form has no such name; did you mean 'pxla.stride'?
    error: @pxla.shard needs pxla.stride (integer attributes)

Run it alone to check a module by hand::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-verify-form)'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TypeVar

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils, pxla_attrs
from pxla_mlir.mlir.core.boundaries import KEYS, BoundaryValue
from pxla_mlir.mlir.core.diagnostics import PassError
from pxla_mlir.mlir.pass_infra import ModulePass
from pxla_mlir.mlir.pass_infra.base import location
from pxla_mlir.mlir.sharding.mesh import AbstractMesh
from pxla_mlir.mlir.support.suggest import did_you_mean

T = TypeVar("T")

_MANUAL_REGION = (pxla_attrs.FULL_TO_SHARD, pxla_attrs.SHARD_TO_FULL)
_SHARD_OR_UNSHARD = (pxla_attrs.SHARD, pxla_attrs.UNSHARD)


def _attribute_names(op: ir.Operation) -> list[str]:
    attrs = op.attributes
    return [attrs[i].name for i in range(len(attrs))]


@dataclasses.dataclass(frozen=True)
class VerifyFormPass(ModulePass):
    argument = "pxla-verify-form"
    summary = "Check the pxla form: every pxla attribute and placeholder known, well-typed and in range"
    checks_only = True

    def run(self, module: ir.Operation) -> None:
        _Check(self, module).run()


class _Check:
    """One run over a module: reports each problem once (a bad module mesh is
    read again by every value laid out on it), and keeps going."""

    def __init__(self, owner: VerifyFormPass, module: ir.Operation):
        self.owner, self.module = owner, module
        self.reported: set[tuple[str, str]] = set()

    def run(self) -> None:
        module = self.module
        devices = self.checked(module, lambda: pxla_attrs.num_devices(module))
        self.holder(module)
        for op, name in ir_utils.walk_selected(module, lambda n: n == "func.func" or n in pxla_attrs.CUSTOM_CALLS):
            if name == "func.func":
                self.holder(op)
                self.boundaries(op)
            else:
                self.custom_call(op, devices)

    def error(self, where, message: str, notes=()) -> None:
        key = (str(location(where)), message)
        if key not in self.reported:
            self.reported.add(key)
            self.owner.error(where, message, notes)

    def checked(self, where: ir.Operation, read: Callable[[], T]) -> T | None:
        """``read()``, its PassError reported (not raised) so that one run finds every problem."""
        try:
            return read()
        except PassError as e:
            self.error(e.where if e.where is not None else where, e.message, e.notes)
            return None

    def unknown_names(self, op: ir.Operation, names: Iterable[str]) -> None:
        for name in names:
            if pxla_attrs.is_pxla_name(name) and name not in pxla_attrs.ATTRIBUTES:
                self.error(op, f"unknown attribute {name}: the pxla form has no such name"
                               f"{did_you_mean(name, sorted(pxla_attrs.ATTRIBUTES))}")

    def holder(self, op: ir.Operation) -> None:
        """The module or a function: its attribute names, ``pxla.mesh`` and ``pxla.manual_axes``."""
        self.unknown_names(op, _attribute_names(op))
        mesh = self.own_mesh(op)
        if pxla_attrs.MANUAL_AXES in op.attributes and op.name == "builtin.module":
            if mesh is None:
                self.error(op, f"{pxla_attrs.MANUAL_AXES} names mesh axes, but the module has no "
                               f"{pxla_attrs.MESH}; add one (e.g. {pxla_attrs.MESH} = \"x=2,y=4\")")
            else:
                self.checked(op, lambda: pxla_attrs.manual_axes(op, mesh))

    def own_mesh(self, op: ir.Operation) -> AbstractMesh | None:
        if pxla_attrs.MESH not in op.attributes:
            return None
        return self.checked(op, lambda: pxla_attrs.parse_mesh(pxla_attrs.read_str(op, pxla_attrs.MESH, ""), op))

    def boundaries(self, fn: ir.Operation) -> None:
        ftype = self.checked(fn, lambda: pxla_attrs.function_type(fn))
        if ftype is None:
            return
        for key, types in (("arg_attrs", ftype.inputs), ("res_attrs", ftype.results)):
            dicts = self.checked(fn, lambda key=key: pxla_attrs.boundary_attrs(fn, key))
            for index, (entries, t) in enumerate(zip(dicts or (), types)):
                self.unknown_names(fn, entries)
                value = BoundaryValue(fn, self.module, index, key == "arg_attrs", t, dict(entries))
                layouts = [k for k in KEYS if k in entries]
                if pxla_attrs.DIMS in layouts and pxla_attrs.TILE_DIMS in layouts:
                    self.error(fn, f"{value.what} has both {pxla_attrs.DIMS} (a global value) and "
                                   f"{pxla_attrs.TILE_DIMS} (a per-device tile); keep the one its type is")
                elif layouts:
                    self.checked(fn, value.read)  # reads a copy: the module keeps its attributes

    def custom_call(self, op: ir.Operation, devices: int | None) -> None:
        self.unknown_names(op, _attribute_names(op))
        target = self.checked(op, lambda: pxla_attrs.any_custom_call_target(op))
        if target is None or not pxla_attrs.is_pxla_name(target):
            return
        module = self.module
        if target in _SHARD_OR_UNSHARD:
            if devices is not None:
                self.checked(op, lambda: pxla_attrs.check_placeholder(op, target, devices))
        elif target in _MANUAL_REGION:
            self.checked(op, lambda: pxla_attrs.manual_boundary(op, module, target))
        elif target == pxla_attrs.SHARDING_CONSTRAINT:
            self.checked(op, lambda: pxla_attrs.sharding_constraint(op, module))
        else:
            self.error(op, f"unknown placeholder @{target}; the pxla form's placeholders are "
                           f"{', '.join('@' + p for p in sorted(pxla_attrs.PLACEHOLDERS))}"
                           f"{did_you_mean(target, sorted(pxla_attrs.PLACEHOLDERS))}")
