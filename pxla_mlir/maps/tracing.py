"""Tracing a map body with named axes bound, with clear errors for an
unbound axis name (jax's own message points at shard_map) and for
``jax.debug.inspect_array_sharding``, which needs devices the per-device
lowering does not have yet."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.jaxbridge.jax_internals import core, lu, pe, source_info_util

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr, Jaxpr


class UnboundAxisError(PxlaUserError, NameError):
    """A collective names an axis that no enclosing map binds."""


def _binding_hint(binder: str, name: str) -> str:
    """How to bind an axis name, in the words of the map being traced."""
    if binder == "xmap":
        return (f"name it in this xmap's in_axes (e.g. in_axes=[{name!r}, ...]) or axis_sizes ({{{name!r}: size}}), "
                f"or in an enclosing xmap's, or fix the name")
    if binder == "jit":
        return (f"bind it with a pxla_mlir.pmap(..., axis_name={name!r}) or pxla_mlir.xmap naming {name!r} around "
                f"the collective, or fix the name")
    return f"bind it with an enclosing pxla_mlir.pmap(..., axis_name={name!r}) or fix the name"


def trace_flat(flat_fun: Callable, avals: Sequence, axis_env: Sequence[tuple], debug_info, *,
               binder: str = "pmap") -> ClosedJaxpr:
    """Traces ``flat_fun`` on ``avals`` with ``axis_env`` ((name, size) pairs)
    bound; ``binder`` ("pmap", "xmap" or "jit") is the map being traced, whose
    words an unbound-axis error uses."""
    with core.extend_axis_env_nd(list(axis_env)):
        try:
            jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(flat_fun, debug_info=debug_info), list(avals))
        except UnboundAxisError:
            raise  # from a nested map's trace, which knows its own bound names
        except NameError as e:
            if "unbound axis name" not in str(e):
                raise
            bound = [repr(n) for n in core.get_axis_env().axis_sizes]
            name = str(e).split(":", 1)[-1].split(".")[0].strip()
            # jax's frames down to the collective go with it: the user's line is among them
            raise UnboundAxisError(
                f"unbound axis name: {name}. A collective (psum, axis_index, ...) refers to an axis name that no "
                f"enclosing map binds (bound: {', '.join(bound) or 'none'}); {_binding_hint(binder, name)}"
            ).with_traceback(e.__traceback__) from None
    _refuse_sharding_inspection(jaxpr)
    return core.ClosedJaxpr(jaxpr, consts)


def _refuse_sharding_inspection(jaxpr: Jaxpr) -> None:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "inspect_sharding":
            raise NotImplementedError(
                f"jax.debug.inspect_array_sharding/visualize_array_sharding at "
                f"{source_info_util.summarize(eqn.source_info)} cannot run inside a pxla_mlir map: maps are lowered "
                f"per device before devices are chosen. Inside a pmap every value is one device's shard; inspect "
                f"the map's results instead (result.sharding)")
        for sub in core.jaxprs_in_params(eqn.params):
            _refuse_sharding_inspection(sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub)
