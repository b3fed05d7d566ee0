"""The lowering rule of ``pxla_xmap``: where jax lowers an xmap equation.

An xmap inside another xmap (or inside ``pxla_mlir.jit``) never gets here:
the enclosing xmap's interpreter evaluates it in place (:mod:`.body_programs`). jax
lowers it in two places:

* inside a pmap body (a pxla_mlir module over the pmap's devices): an xmap
  whose named axes are all vectorized runs as its global view (``jax.vmap``
  over the named axes) on each device; one with mesh axes is refused: the
  pmap's devices are laid out by its axis, not by the xmap's mesh;
* inside ``jax.jit`` (jax's own pipeline): the xmap runs as its global view
  with its layout on its mesh (:mod:`.under_jit`).
"""

from __future__ import annotations

from pxla_mlir.jaxbridge.jax_internals import jax_mlir
from pxla_mlir.jaxbridge.stablehlo_lowering import sharding_impls_mesh
from pxla_mlir.xmaps import under_jit
from pxla_mlir.xmaps.body_programs import global_function
from pxla_mlir.xmaps.lower import uses_mesh
from pxla_mlir.xmaps.plan import XmapError
from pxla_mlir.xmaps.primitive import mapping_of, plan_of, pxla_xmap_p
from pxla_mlir.xmaps.under_jit import XmapInsideJitWarning

__all__ = ["XmapInsideJitWarning", "register"]


def _lowering(ctx, *in_nodes, jaxpr, **params):
    plan = plan_of(params)
    spread = plan.uses_mesh or uses_mesh(jaxpr)
    name = params["name"]
    if sharding_impls_mesh(ctx.module_context.axis_context) is None:  # inside jax.jit
        return under_jit.lower(ctx, *in_nodes, jaxpr=jaxpr, **params)
    if spread:
        raise XmapError(f"xmap {name!r} uses mesh axes inside a pmap body, which is not supported: a pmap's "
                        f"devices are laid out by its axis, not by the xmap's mesh. Make the pmap axis a named "
                        f"axis of the xmap instead, or drop the xmap's axis_resources (its named axes are then "
                        f"vectorized on each pmap device)")
    fn = global_function(plan.without_resources(), jaxpr, [mapping_of(s) for s in params["in_axes"]],
                         [mapping_of(s) for s in params["out_axes"]])
    return jax_mlir.lower_fun(lambda *xs: fn(*xs), multiple_results=True)(ctx, *in_nodes)


def register() -> None:
    # cacheable=False: jax's lowering cache key ignores the axis context.
    jax_mlir.register_lowering(pxla_xmap_p, _lowering, cacheable=False)
    under_jit.register()  # jax.jit learns an xmap's mesh
