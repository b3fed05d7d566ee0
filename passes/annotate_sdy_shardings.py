"""pxla-annotate-sdy-shardings: pxla sharding attributes on function boundaries to Shardy's.

The Shardy counterpart of pxla-annotate-shardings. Arguments and results of
``func.func`` may carry ``pxla.dims`` (mesh axes per dimension of the
*global* value, against ``pxla.mesh``) or ``pxla.sharding_spec`` (a
serialized ShardingSpec over the mesh's dimensions, in order). Each becomes
``sdy.sharding`` on the module's ``sdy.mesh`` symbol (pxla-add-sdy-mesh):

* ``["x"]`` → ``{"x"}``, ``[]`` → ``{}``: closed dimensions, exactly these
  axes; axes named nowhere are replicated (implicitly);
* ``"?"`` (unspecified) → ``{?}``: an open dimension XLA's propagation may
  shard (the GSPMD form needs a ``@Sharding`` custom call for this);
* a ShardingSpec's ``Replicated`` mesh dimensions → ``replicated={...}``;
  without ``pxla.mesh`` the spec brings its own mesh, inlined
  (``#sdy.sharding<mesh<["a0"=4, "a1"=2]>, ...>``).

Arguments that every device holds whole also get
``mhlo.is_same_data_across_replicas``, as in the GSPMD form. The module must
be in partition mode (one replica): a per-device signature
(``pxla.tile_dims``) needs pxla-wrap-manual-main first.

Before::

    module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
      sdy.mesh @mesh = <["x"=2, "y"=4]>
      func.func public @main(%a: tensor<8x4xf32> {pxla.dims = [["x"], ["y"]]},
                             %b: tensor<3x5xf32> {pxla.dims = [[], "?"]}) -> (tensor<8x4xf32> {pxla.dims = [["x", "y"], []]})

After::

      func.func public @main(%a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
                             %b: tensor<3x5xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {?}]>})
          -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}, {}]>})

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-add-sdy-mesh,pxla-annotate-sdy-shardings)'
"""

from __future__ import annotations

import dataclasses

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import pxla_attrs, shardy
from pxla_mlir.mlir.core.boundaries import BoundaryValue, DeclaredDims, rewrite_boundaries
from pxla_mlir.mlir.core.pxla_attrs import format_mesh
from pxla_mlir.mlir.pass_infra import ModulePass, PassError
from pxla_mlir.mlir.sharding import ShardingSpecError, sdy_sharding
from pxla_mlir.mlir.sharding.mesh import MeshError


@dataclasses.dataclass(frozen=True)
class AnnotateSdyShardingsPass(ModulePass):
    argument = "pxla-annotate-sdy-shardings"
    summary = "Turn pxla.dims / pxla.sharding_spec on function arguments and results into sdy.sharding"

    def run(self, module):
        rewrite_boundaries(module, self._rewrite)

    def _rewrite(self, value: BoundaryValue) -> None:
        fn, what, entries = value.fn, value.what, value.entries
        replicas, partitions = pxla_attrs.device_counts(value.module)
        if replicas != 1:
            raise PassError(fn, f"{what}: Shardy shardings describe partitions, but the module runs as {replicas} "
                                f"replicas; use pxla-annotate-shardings for a replica-mode module")
        if value.is_tile:
            raise PassError(fn, f"{what} is a per-device tile (pxla.tile_dims); run pxla-wrap-manual-main first to "
                                f"give @main global types")
        declared = value.read()
        mesh = declared.mesh
        mesh_name = shardy.mesh_name_for(value.module, mesh, fn) if mesh is not None else None
        try:
            if isinstance(declared, DeclaredDims):
                sharding = sdy_sharding.of_mapping(declared.mesh, len(declared.shape), declared.dims.mapping,
                                                   declared.dims.unspecified, mesh_name)
            else:
                spec = declared.spec
                if mesh is not None and spec.mesh_shape != mesh.axis_sizes:
                    raise PassError(fn, f"{what}: {spec!r} lays the value on a mesh of shape {spec.mesh_shape}, "
                                        f"but pxla.mesh is \"{format_mesh(mesh.shape)}\"; the spec's mesh "
                                        f"dimensions must be the mesh's axes, in order")
                # Without pxla.mesh the spec brings its own mesh (axes a0, a1, ...), inlined.
                sharding = sdy_sharding.of_spec(spec, mesh.axis_names if mesh is not None else None, mesh_name)
        except (MeshError, ShardingSpecError) as e:
            raise PassError(fn, f"{what}: {e}") from None
        if partitions != sharding.mesh.size:
            raise PassError(fn, f"{what}: the sharding spans {sharding.mesh.size} devices but the module has "
                                f"mhlo.num_partitions = {partitions}")
        entries[shardy.SHARDING] = shardy.attribute(sharding)
        if value.is_arg and not sharding.open_dims and not any(d.axes for d in sharding.dims):
            entries["mhlo.is_same_data_across_replicas"] = ir.BoolAttr.get(True)
