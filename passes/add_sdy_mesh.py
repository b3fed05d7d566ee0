"""pxla-add-sdy-mesh: the module's pxla.mesh as a Shardy mesh symbol.

The first step of the Shardy (``sharding-dialect=sdy``) form of a
partition-mode module: ``pxla.mesh`` (axis names and sizes, major first)
becomes one ``sdy.mesh @mesh`` symbol, which the ``sdy.sharding`` attributes
and ``sdy.manual_computation`` regions written by pxla-annotate-sdy-shardings
and pxla-expand-manual-computation refer to. A different ``pxla.mesh`` on an
op gets its own symbol (``@mesh_1``, ...). ``pxla.mesh`` itself stays: it
documents the layout and XLA ignores it. A module without ``pxla.mesh`` is
left unchanged.

Shardy's mesh names partitions, so the module must be in partition mode with
``mhlo.num_partitions`` equal to the mesh's device count and one replica
(XLA rejects any other pairing at compile time).

Before::

    module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
      func.func public @main(...)

After::

    module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
      sdy.mesh @mesh = <["x"=2, "y"=4]>
      func.func public @main(...)

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-add-sdy-mesh)'
"""

from __future__ import annotations

import dataclasses

from pxla_mlir.mlir.core import ir_utils, pxla_attrs, shardy
from pxla_mlir.mlir.core.pxla_attrs import MESH, mesh_of
from pxla_mlir.mlir.pass_infra import ModulePass, PassError
from pxla_mlir.mlir.sharding import sdy_sharding


@dataclasses.dataclass(frozen=True)
class AddSdyMeshPass(ModulePass):
    argument = "pxla-add-sdy-mesh"
    summary = "Add the module's pxla.mesh as one sdy.mesh @mesh symbol (and one per other pxla.mesh on an op)"

    def run(self, module):
        wanted = []  # (AbstractMesh, the op that declares it)
        for op in ir_utils.walk(module):
            if MESH in op.attributes:
                mesh = mesh_of(op, module)
                if all(mesh != m for m, _ in wanted):
                    wanted.append((mesh, op))
        if not wanted:
            return
        replicas, partitions = pxla_attrs.device_counts(module)
        existing = shardy.meshes(module)
        for mesh, op in wanted:
            if replicas != 1 or partitions != mesh.size:
                raise PassError(op, f"{MESH} \"{pxla_attrs.format_mesh(mesh.shape)}\" has {mesh.size} devices, "
                                    f"but the module runs as {replicas} replicas x {partitions} partitions; a Shardy "
                                    f"mesh needs partition mode with mhlo.num_partitions = {mesh.size} and "
                                    f"mhlo.num_replicas = 1")
            sdy_mesh = sdy_sharding.mesh_of(mesh)
            if sdy_mesh in existing.values():
                continue
            name = _free_name(module)
            shardy.add_mesh(module, sdy_mesh, name)
            existing[name] = sdy_mesh


def _free_name(module) -> str:
    """``mesh``, else ``mesh_1``, ``mesh_2``, ...: a name no top-level symbol has."""
    taken = {ir_utils.symbol_name(op.operation) for op in module.regions[0].blocks[0].operations}
    name, n = shardy.MESH_NAME, 0
    while name in taken:
        n += 1
        name = f"{shardy.MESH_NAME}_{n}"
    return name
