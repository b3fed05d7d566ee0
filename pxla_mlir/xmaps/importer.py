"""Import: a traced xmap to a module in "pxla form".

* ``vectorize`` (and an xmap on one device): the *global view*, every named
  axis a ``jax.vmap`` (:func:`.body_programs.global_function`), lowered for all mesh
  devices; @main has global types and ``pxla.dims`` says which mesh axes
  split each argument and result.
* ``replica`` and ``manual``: the *tile* program one device runs
  (:func:`.body_programs.tile_function`), lowered per device with the mesh axes as
  manual SPMD axes; @main has per-device tile types and ``pxla.tile_dims``.

The module carries ``pxla.mesh``; the pxla-xmap-pipeline legalizes it and
makes replica-mode, manual-SPMD or vectorized-SPMD MHLO.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import jax

from pxla_mlir.jaxbridge.jax_internals import api_util, core, is_extended, pe
from pxla_mlir.jaxbridge.stablehlo_lowering import lower_global, lower_per_device
from pxla_mlir.maps import pxla_form
from pxla_mlir.maps.tracing import trace_flat
from pxla_mlir.mlir.core import pxla_attrs
from pxla_mlir.mlir.sharding.mesh import Mesh
from pxla_mlir.xmaps.body_programs import global_function, tile_function
from pxla_mlir.xmaps.plan import Plan

if TYPE_CHECKING:
    from jax.core import ShapedArray


def mesh_labels(mesh_shape: Mapping[str, int]) -> dict:
    """Names for the mesh axes in ``pxla.mesh``."""
    return {a: pxla_form.mesh_label(a, i) for i, a in enumerate(mesh_shape)}


def _key_dims(aval) -> list:
    """The trailing dimensions a key array's buffer has beyond its shape (its key data), never split."""
    if not is_extended(aval.dtype):
        return []
    data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(aval.shape, aval.dtype))
    return [[]] * (data.ndim - aval.ndim)


def tile_aval(aval, mapping, plan: Plan) -> ShapedArray:
    return core.ShapedArray(plan.tile_shape(aval.shape, mapping), aval.dtype, weak_type=aval.weak_type)


def import_xmap(t, mesh: Mesh | None, lowering: str, num_devices: int, platform: str,
                name: str) -> pxla_form.Imported:
    """``t``: the xmap call (plan, body jaxpr, in/out maps, global avals, donation)."""
    plan = t.plan
    module_name = pxla_form.module_name("xmap", name)
    if mesh is None or lowering == "vectorize":
        closed = jax.make_jaxpr(global_function(plan, t.jaxpr, t.in_maps, t.out_maps,
                                                fixed=t.fixed_sharding))(*t.global_in)
        lowered = lower_global(closed, num_devices, platform=platform, name=module_name, donated=t.donated)
        key = pxla_attrs.DIMS  # global types
    else:
        mesh_env = list(mesh.shape.items())
        tiles = [tile_aval(av, m, plan) for av, m in zip(t.global_in, t.in_maps)]
        body = tile_function(plan, t.jaxpr, t.in_maps, t.out_maps)
        debug = api_util.debug_info("pxla_mlir.xmap", body, tuple(range(len(tiles))), {})
        closed = trace_flat(body, tiles, mesh_env, debug, binder="xmap")
        # The mesh axes stay bound: with jax_enable_checks, dce_jaxpr re-checks the body's collectives.
        with core.extend_axis_env_nd(mesh_env):
            # Results of nested xmaps that the next one takes as tiles leave dead gathers.
            closed = core.ClosedJaxpr(pe.dce_jaxpr(closed.jaxpr, True, instantiate=True)[0], closed.consts)
            lowered = lower_per_device(closed, list(mesh.shape), list(mesh.shape.values()), platform=platform,
                                       name=module_name, donated=t.donated)
        key = pxla_attrs.TILE_DIMS  # per-device tile types
    result = pxla_form.imported(lowered, per_device=key == pxla_attrs.TILE_DIMS)
    if mesh is not None:
        labels = mesh_labels(dict(mesh.shape))

        def dims(maps, avals):
            return [[[labels[a] for a in axes] for axes in plan.spec_dims(m, av.ndim)] + _key_dims(av)
                    for m, av in zip(maps, avals)]

        pxla_form.annotate(result.module, {labels[a]: s for a, s in mesh.shape.items()}, key,
                           dims(t.in_maps, t.global_in), dims(t.out_maps, t.global_out))
    return result
