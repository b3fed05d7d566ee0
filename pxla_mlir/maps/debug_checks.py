"""``jax_debug_nans`` / ``jax_debug_infs`` for maps, as jax.jit does them.

With either flag on, every call of a map runs through the Python path (the
C++ fast path checks nothing) and its outputs are checked for nan (inf). On
one, the map's body is run again un-jitted, as ``jax.vmap`` over its named
axes on the same inputs: each primitive then runs on its own and jax names
the first that makes the value (``invalid value (nan) encountered in div``),
as jax does for jax.jit. The raised FloatingPointError says that, then which
map's output held it. With ``jax_debug_nans`` donation is off (the inputs
are needed again), as in jax.pmap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pxla_mlir.distributed.processes import spans_processes
from pxla_mlir.jaxbridge.jax_internals import (
    InternalFloatingPointError,
    debug_nans_active,
    dispatch,
    no_special_values_in_deoptimized,
    special_checks_active,
)

__all__ = ["active", "donation_allowed", "check_outputs", "MapFloatingPointError"]


class MapFloatingPointError(FloatingPointError):
    """A nan or inf in a map's output, with the primitive that made it (when the un-jitted run found it)."""

active = special_checks_active


def donation_allowed() -> bool:
    """jax.pmap donates nothing under jax_debug_nans: the de-optimized run needs the inputs."""
    return not debug_nans_active()


def find_special_values(name: str, arrays: Sequence) -> str | None:
    """"nan" or "inf" if one of this process's pieces of ``arrays`` holds one that
    jax_debug_nans / jax_debug_infs asks to report (jax's own check), else None."""
    buffers = [s.data for x in arrays for s in getattr(x, "addressable_shards", ())]
    try:
        dispatch.check_special(name, buffers)
    except InternalFloatingPointError as e:
        return e.ty
    return None


def check_outputs(outs: Sequence, *, what: str, devices: Sequence, rerun: Callable[[], object]) -> None:
    """Raises FloatingPointError if an output of ``what`` (a map on ``devices``)
    holds a value the flags report, after running ``rerun`` (the body
    un-jitted) to name the primitive that made it."""
    kind = find_special_values(what, outs)
    if kind is None:
        return
    where = (f"Invalid value ({kind}) encountered in sharded computation: an output of {what} on "
             f"{len(devices)} device{'s' if len(devices) != 1 else ''} holds {kind}")
    if spans_processes(devices):  # the other processes' pieces are not here to run the body on
        raise FloatingPointError(f"{where}. In a multi-process run the body is not run again un-jitted; run it on "
                                 f"one process to find the primitive")
    print(f"Invalid {kind} value encountered in the output of {what}. Calling the de-optimized version.")
    try:
        rerun()
    except MapFloatingPointError:
        raise  # a map inside this one's body found it and said where
    except InternalFloatingPointError as e:  # from a jax.jit in the body, which leaves the report to its caller
        found = f"invalid value ({e.ty}) encountered in {e.name}"
    except FloatingPointError as e:
        found = str(e)
    else:
        no_special_values_in_deoptimized(what, kind)
    raise MapFloatingPointError(f"{found}\n\n{where}; running its body un-jitted (jax.vmap over its axes, each "
                                f"primitive checked) found the primitive above") from None
