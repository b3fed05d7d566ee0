"""Tracing a map body with named axes bound, with clear errors for an
unbound axis name (jax's own message points at shard_map) and for host
callbacks, which the per-device programs cannot carry."""

from __future__ import annotations

from typing import Callable, Sequence

from .jax_internals import core, lu, pe, source_info_util


class UnboundAxisError(NameError):
    """A collective names an axis that no enclosing map binds."""


class HostCallbackError(NotImplementedError):
    """jax.debug.print/callback, pure_callback or io_callback inside a map."""


_CALLBACKS = {"debug_print": "jax.debug.print", "debug_callback": "jax.debug.callback",
              "pure_callback": "jax.pure_callback", "io_callback": "io_callback"}


def trace_flat(flat_fun: Callable, avals: Sequence, axis_env: Sequence[tuple], debug_info) -> core.ClosedJaxpr:
    """Traces ``flat_fun`` on ``avals`` with ``axis_env`` ((name, size) pairs) bound."""
    with core.extend_axis_env_nd(list(axis_env)):
        try:
            jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(flat_fun, debug_info=debug_info), list(avals))
        except NameError as e:
            if "unbound axis name" not in str(e):
                raise
            bound = [repr(n) for n in core.get_axis_env().axis_sizes]
            name = str(e).split(":", 1)[-1].split(".")[0].strip()
            raise UnboundAxisError(
                f"{name!r} is not bound here: a collective (psum, axis_index, ...) refers to an axis name that no "
                f"enclosing map binds (bound: {', '.join(bound) or 'none'})") from None
    _reject_host_callbacks(jaxpr)
    return core.ClosedJaxpr(jaxpr, consts)


def _reject_host_callbacks(jaxpr: core.Jaxpr) -> None:
    for eqn in jaxpr.eqns:
        what = _CALLBACKS.get(eqn.primitive.name)
        if what is not None:
            where = source_info_util.summarize(eqn.source_info)
            raise HostCallbackError(
                f"{what} at {where}: host callbacks are not supported inside pxla_mlir maps (their per-device "
                f"programs cannot call back to the host); return the values and use or print them after the call")
        for sub in core.jaxprs_in_params(eqn.params):
            _reject_host_callbacks(sub)
