"""From a traced pmap body to a ``Lowered``, and the primitive's impl (a
pmap bound with concrete arguments: lower, compile once, run)."""

from __future__ import annotations

import jax

from ..jax_internals import core, pe
from ..maps.impl import ImplCache, plain_avals
from ..pipelines import PmapPipeline
from ..stages import Lowered, Signature, timed
from .arguments import PmapUsageError
from .importer import import_pmap, mesh_axis_label
from .layout import DeviceLayout
from .primitive import pxla_pmap_p, replicas_needed

__all__ = ["lower_traced", "register_impl"]


def devices_for(n: int, devices, backend) -> list:
    if devices is not None:
        if len(devices) != n:
            raise PmapUsageError(f"pmap was given {len(devices)} devices, but the computation needs {n} "
                                 f"(the product of the pmap axis sizes); pass exactly {n} devices")
        return list(devices)
    available = jax.local_devices(backend=backend)
    if n > len(available):
        raise PmapUsageError(f"the computation needs {n} devices (the product of the pmap axis sizes), but "
                             f"only {len(available)} {available[0].platform.upper()} devices are available"
                             + (f" (on CPU, set XLA_FLAGS=--xla_force_host_platform_device_count={n} before "
                                f"importing jax)" if available[0].platform == "cpu" else ""))
    return available[:n]


def lower_traced(jaxpr: core.ClosedJaxpr, *, axis_name, axis_size: int, in_axes, out_axes, name, global_avals,
                 donated, devices, backend, options: PmapPipeline, signature: Signature | None = None,
                 kind: str = "pmap") -> Lowered:
    """Imports a traced pmap body and runs the pmap pipeline on it.

    Closed-over constants become leading broadcast inputs that the
    ``Compiled`` supplies itself.
    """
    consts = tuple(jaxpr.consts)
    if consts:
        n = len(consts)
        jaxpr = core.ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr.jaxpr), ())
        in_axes = (None,) * n + tuple(in_axes)
        global_avals = tuple(core.shaped_abstractify(c) for c in consts) + tuple(global_avals)
        donated = (False,) * n + tuple(donated)
    devs = devices_for(axis_size * replicas_needed(jaxpr), devices, backend)
    with timed("import"):
        imported = import_pmap(jaxpr, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes,
                               out_axes=out_axes, name=name, donated=donated, platform=devs[0].platform, kind=kind)
    out_avals = [core.unmapped_aval(axis_size, a, av) if a is not None else av
                 for av, a in zip(jaxpr.out_avals, out_axes)]
    layout = DeviceLayout(devs, axis_size, mesh_axis_label(axis_name))
    return Lowered(
        imported.module, pipeline=options.anchored(), devices=devs, in_avals=global_avals, out_avals=out_avals,
        in_shardings=[layout.sharding(a, av.ndim) for a, av in zip(in_axes, global_avals)],
        out_shardings=[layout.sharding(a, av.ndim) for a, av in zip(out_axes, out_avals)],
        signature=signature or Signature.flat(len(global_avals) - len(consts), len(out_avals)),
        consts=consts, keepalive=imported.keepalive, jaxpr_text=jaxpr.pretty_print)


# -- the primitive's impl: a pmap bound with concrete arguments ------------------------------

_impl_cache = ImplCache(256)  # compiled programs of bound (transformed) pmaps


def _impl(*args, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices, backend, donated, options):
    avals = plain_avals(args)

    def build():
        return lower_traced(jaxpr, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes, out_axes=out_axes,
                            name=name, global_avals=avals, donated=donated, devices=devices, backend=backend,
                            options=options).compile()

    params = (axis_name, axis_size, in_axes, out_axes, devices, backend, donated, options, avals)
    return _impl_cache.compiled(jaxpr, params, build).call_flat(args)


def register_impl() -> None:
    pxla_pmap_p.def_impl(_impl)
