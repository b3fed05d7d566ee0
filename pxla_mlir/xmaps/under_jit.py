"""An xmap inside ``jax.jit``: its global view with its layout on the mesh.

jax.jit compiles with jax's own pipeline. There an xmap whose named axes use
mesh axes runs as its global view (every named axis vectorized), as 2022's
SPMD lowering of xmap did: its operands and results are constrained to the
shardings its ``axis_resources`` give (``with_sharding_constraint`` over the
xmap's mesh), and jax.jit learns the mesh's devices
(``maps.jit_devices``), so XLA's partitioner spreads the
work over them. Serial loops are not used there (a one-time
:class:`XmapInsideJitWarning` says so); ``pxla_mlir.jit`` keeps them.
"""

from __future__ import annotations

import warnings

from jax import lax
from jax.sharding import Mesh as JaxMesh, NamedSharding, PartitionSpec

from pxla_mlir.jaxbridge.jax_internals import jax_mlir
from pxla_mlir.maps.jit_devices import register_jit_devices
from pxla_mlir.xmaps.body_programs import global_function
from pxla_mlir.xmaps.lower import uses_mesh, value_sharding
from pxla_mlir.xmaps.primitive import mapping_of, plan_of, pxla_xmap_p

__all__ = ["XmapInsideJitWarning", "lower", "register"]


class XmapInsideJitWarning(UserWarning):
    """A pxla_mlir.xmap under jax.jit does not use its serial loops."""


def _jax_mesh(jaxpr, params) -> JaxMesh | None:
    mesh = params["mesh"]
    if mesh is None or not mesh.axis_names or not (plan_of(params).uses_mesh or uses_mesh(jaxpr)):
        return None
    return JaxMesh(mesh.devices, mesh.axis_names)


_warned: set = set()


def lower(ctx, *in_nodes, jaxpr, **params):
    plan = plan_of(params)
    name = params["name"]
    if plan.used_loops and name not in _warned:
        _warned.add(name)
        warnings.warn(XmapInsideJitWarning(
            f"pxla_mlir.xmap {name!r} inside jax.jit does not use its serial loops: its named axes are vectorized "
            f"(and spread over its mesh axes). Same results; pxla_mlir.jit keeps the loops."), stacklevel=2)
    in_maps, out_maps = [mapping_of(s) for s in params["in_axes"]], [mapping_of(s) for s in params["out_axes"]]
    fn = global_function(plan.without_resources(), jaxpr, in_maps, out_maps)
    jmesh = _jax_mesh(jaxpr, params)
    if jmesh is None:
        return jax_mlir.lower_fun(lambda *xs: fn(*xs), multiple_results=True)(ctx, *in_nodes)
    devices = list(jmesh.devices.flat)
    ins = [value_sharding(jmesh, plan, m, av.ndim, devices) for m, av in zip(in_maps, ctx.avals_in)]
    outs = [value_sharding(jmesh, plan, m, av.ndim, devices) for m, av in zip(out_maps, ctx.avals_out)]

    def constrained(*xs):
        ys = fn(*[lax.with_sharding_constraint(x, s) for x, s in zip(xs, ins)])
        return [lax.with_sharding_constraint(y, s) for y, s in zip(ys, outs)]

    return jax_mlir.lower_fun(constrained, multiple_results=True)(ctx, *in_nodes)


def _jit_shardings(eqn) -> list:
    jmesh = _jax_mesh(eqn.params["jaxpr"], eqn.params)
    return [] if jmesh is None else [NamedSharding(jmesh, PartitionSpec())]


def register() -> None:
    register_jit_devices(pxla_xmap_p, _jit_shardings)
