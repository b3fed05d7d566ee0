"""The lowering rule of ``pxla_xmap``: where jax lowers an xmap equation.

An xmap inside another xmap (or inside ``pxla_mlir.jit``) never gets here:
the enclosing xmap's interpreter evaluates it in place (:mod:`.bodies`). jax
lowers it in two places:

* inside a pmap body (a pxla_mlir module over the pmap's devices): an xmap
  whose named axes are all vectorized runs as its global view (``jax.vmap``
  over the named axes) on each device; one with mesh axes is refused: the
  pmap's devices are laid out by its axis, not by the xmap's mesh;
* inside ``jax.jit`` (jax's own pipeline): the xmap runs as its global view
  on jit's devices, with a one-time :class:`XmapInsideJitWarning` when it
  asked for mesh axes or loops (``pxla_mlir.jit`` keeps the mesh).
"""

from __future__ import annotations

import warnings

from ..jax_internals import jax_mlir, sharding_impls_mesh
from .bodies import global_function
from .plan import XmapError
from .primitive import mapping_of, plan_of, pxla_xmap_p
from .stage import uses_mesh

__all__ = ["XmapInsideJitWarning", "register"]


class XmapInsideJitWarning(UserWarning):
    """pxla_mlir.xmap under jax.jit runs as jax.vmap on jit's devices."""


_warned: set = set()


def _lowering(ctx, *in_nodes, jaxpr, **params):
    plan = plan_of(params)
    spread = plan.uses_mesh or uses_mesh(jaxpr)
    name = params["name"]
    if sharding_impls_mesh(ctx.module_context.axis_context) is not None:
        if spread:
            raise XmapError(f"xmap {name!r} uses mesh axes inside a pmap body, which is not supported: a pmap's "
                            f"devices are laid out by its axis, not by the xmap's mesh. Make the pmap axis a named "
                            f"axis of the xmap instead, or drop the xmap's axis_resources (its named axes are then "
                            f"vectorized on each pmap device)")
    elif (spread or plan.used_loops) and name not in _warned:
        _warned.add(name)
        warnings.warn(XmapInsideJitWarning(
            f"pxla_mlir.xmap {name!r} inside jax.jit runs as jax.vmap over its named axes on jit's device(s): "
            f"same results, but its axis_resources (mesh axes, serial loops) are not used. Use pxla_mlir.jit to "
            f"keep them."), stacklevel=2)
    fn = global_function(plan.without_resources(), jaxpr, [mapping_of(s) for s in params["in_axes"]],
                         [mapping_of(s) for s in params["out_axes"]])
    return jax_mlir.lower_fun(lambda *xs: fn(*xs), multiple_results=True)(ctx, *in_nodes)


def register() -> None:
    # cacheable=False: jax's lowering cache key ignores the axis context.
    jax_mlir.register_lowering(pxla_xmap_p, _lowering, cacheable=False)
