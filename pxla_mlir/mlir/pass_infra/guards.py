"""Checks that run right before jaxlib passes known to kill the process on
some inputs, turning the crash into a located error.

Found by fuzzing pxla-opt (tests/fuzzing/opt_fuzz.py) on jaxlib 0.10.2:

* ``chlo-legalize-to-hlo`` dies with SIGSEGV on an op of an unregistered
  dialect (only parseable with ``--allow-unregistered-dialect``).

and on jaxlib 0.12.0.1:

* ``canonicalize`` aborts (Shardy's ``Check failed: mesh expected inputs and
  outputs to have a common mesh``) on an ``sdy.manual_computation`` whose
  shardings name two different meshes with axes (another size, other axis
  names or another device order): Shardy's verifier refuses that only when
  the op has manual axes.
"""

from __future__ import annotations

import dataclasses
import re

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy

from pxla_mlir.mlir.core import ir_utils, shardy
from pxla_mlir.mlir.pass_infra.base import ModulePass, PassError

__all__ = ["guards_for"]


@dataclasses.dataclass(frozen=True)
class _NoUnregisteredOps(ModulePass):
    argument = "pxla-guard-unregistered-ops"
    summary = "Refuse ops of unregistered dialects before a jaxlib pass that crashes on them"
    checks_only = True

    before: str = ""

    def run(self, module):
        if not module.context.allow_unregistered_dialects:
            return  # the parser has already refused such ops
        for op in ir_utils.walk(module):
            if not module.context.is_registered_operation(op.name):
                raise PassError(op, f"'{op.name}' belongs to an unregistered dialect, and {self.before} "
                                    f"(in this pipeline) crashes on such ops; remove the op or the pass")


@dataclasses.dataclass(frozen=True)
class _OneMeshPerManualComputation(ModulePass):
    argument = "pxla-guard-manual-computation-meshes"
    summary = "Refuse an sdy.manual_computation over two meshes before a jaxlib pass that aborts on it"
    checks_only = True
    acts_on = frozenset({shardy.MANUAL_COMPUTATION})

    before: str = ""

    def run(self, module):
        symbols: dict[str, ir.Attribute] | None = None
        for op, _ in ir_utils.walk_selected(module, lambda name: name == shardy.MANUAL_COMPUTATION):
            if symbols is None:
                symbols = {ir.StringAttr(m.attributes["sym_name"]).value: m.attributes["mesh"]
                           for m in shardy.mesh_ops(module.operation)}
            meshes = {str(mesh): written for written, mesh in _meshes(op, symbols)}
            if len(meshes) > 1:
                raise PassError(op, f"{op.name} names {len(meshes)} different meshes in its in_shardings and "
                                    f"out_shardings ({', '.join(meshes.values())}), and {self.before} (in this "
                                    f"pipeline) aborts the process on it; give every sharding of the op one mesh")


def _meshes(op: ir.Operation, symbols: dict[str, ir.Attribute]):
    """(as written, the mesh) of each sharding of a manual computation whose mesh has axes."""
    for key in ("in_shardings", "out_shardings"):
        attr = op.attributes.get(key)
        if attr is None or not sdy.TensorShardingPerValueAttr.isinstance(attr):
            continue  # the verifier has refused it
        for sharding in sdy.TensorShardingPerValueAttr(attr).shardings:
            written = sdy.TensorShardingAttr(sharding).mesh_or_ref
            mesh = written if sdy.MeshAttr.isinstance(written) else symbols.get(ir.FlatSymbolRefAttr(written).value)
            if mesh is not None and len(sdy.MeshAttr(mesh).axes) > 0:
                yield str(written), mesh


#: jaxlib pass argument -> the guards that must run before it.
_HAZARDS = {"chlo-legalize-to-hlo": (_NoUnregisteredOps,), "canonicalize": (_OneMeshPerManualComputation,)}


def guards_for(step_text: str) -> list[ModulePass]:
    """Guards to run before a step of jaxlib passes (canonical pipeline text)."""
    names = set(re.findall(r"[\w.\-]+", step_text))
    return [guard(before=name) for name, guards in _HAZARDS.items() if name in names for guard in guards]
