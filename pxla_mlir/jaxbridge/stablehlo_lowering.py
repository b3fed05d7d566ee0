"""jaxprs to StableHLO with jax's own per-primitive rules, in one shared MLIR context.

A per-device body is lowered as a manual SPMD program over an abstract mesh
(no devices needed), a global-view body for N partitions without shardings
(pxla passes annotate them).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from jax.sharding import AxisType

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.jaxbridge.jax_internals import JaxAbstractMesh, backend, core, effects, jax_mlir, sharding_impls
from pxla_mlir.jaxbridge.jaxpr_protocols import high_level_avals, lojax, lower_jaxpr_to_module, lowering_flags

__all__ = ["LOWERING_LOCK", "CONTEXT_LOWERINGS", "shared_lowering_context", "parse_in_shared_context", "spmd_axis_context",
           "sharding_impls_mesh", "lower_per_device", "lower_global", "refined_module", "low_level",
           "HighLevelTypeError"]


def spmd_axis_context(axis_names: Sequence, axis_sizes: Sequence[int], manual_axes: Sequence | None = None):
    """A manual SPMD lowering context over an abstract mesh: manual over
    ``manual_axes`` (default: every axis), automatic over the others."""
    manual = frozenset(axis_names if manual_axes is None else manual_axes)
    if manual == frozenset(axis_names):
        return sharding_impls.SPMDAxisContext(JaxAbstractMesh(tuple(axis_sizes), tuple(axis_names)), manual)
    types = tuple(AxisType.Manual if a in manual else AxisType.Auto for a in axis_names)
    mesh = JaxAbstractMesh(tuple(axis_sizes), tuple(axis_names), axis_types=types)
    return sharding_impls.SPMDAxisContext(mesh, manual)


def sharding_impls_mesh(axis_context):
    """The abstract mesh of a manual SPMD lowering context, or None for others
    (jax.jit's ShardingContext)."""
    if isinstance(axis_context, sharding_impls.SPMDAxisContext):
        return axis_context.mesh
    return None


# -- one MLIR context for our lowerings ---------------------------------------------------

#: Held while a lowering and its pass pipeline use the shared context (a
#: context's diagnostic handlers and pass managers are not to be shared
#: between threads).
LOWERING_LOCK = threading.RLock()
#: Lowerings before the shared context is replaced by a fresh one: uniqued
#: attributes (constants) never leave a context, so its memory is bounded.
CONTEXT_LOWERINGS = 256
_shared = threading.local()
_context_state: dict[str, Any] = {"ctx": None, "uses": 0}


def _make_ir_context():
    """jax's ``make_ir_context``, except inside :func:`shared_lowering_context`
    on this thread, where every lowering reuses one context. Building a
    context and loading its dialects is about half of jax's lowering time, and
    jax 0.10.2 keeps every context it made alive (memory grows ~1 MiB per
    lowering); one context removes both costs."""
    if not getattr(_shared, "active", False):
        return _jax_make_ir_context()
    state = _context_state
    if state["ctx"] is None or state["uses"] >= CONTEXT_LOWERINGS:
        state["ctx"], state["uses"] = _jax_make_ir_context(), 0
    state["uses"] += 1
    return state["ctx"]


_jax_make_ir_context = jax_mlir.patch("make_ir_context", _make_ir_context)


@contextlib.contextmanager
def shared_lowering_context():
    """Lowerings on this thread share one MLIR context (under LOWERING_LOCK)."""
    with LOWERING_LOCK:
        previous = getattr(_shared, "active", False)
        _shared.active = True
        try:
            yield
        finally:
            _shared.active = previous


def parse_in_shared_context(text: str):
    """``text`` parsed into a module of the shared lowering context, as a
    lowering would have left it there (callers hold LOWERING_LOCK)."""
    from jaxlib.mlir import ir

    with LOWERING_LOCK, shared_lowering_context():
        ctx = _make_ir_context()
        with ctx:
            return ir.Module.parse(text)


def lower_per_device(closed_jaxpr: core.ClosedJaxpr, axis_names: Sequence, axis_sizes: Sequence[int],
                     *, platform: str = "cpu", name: str = "pxla_fn", donated: Sequence[bool] | None = None,
                     manual_axes: Sequence | None = None):
    """Lowers a per-device jaxpr whose named axes are ``axis_names`` with jax's
    rules, as a manual SPMD program over an abstract mesh (no devices needed).

    Returns jax's ``LoweringResult``; its StableHLO module lives in jax's own
    MLIR context. Collectives use partition ids, channel handles and global
    device ids; host callbacks carry ``{manual}`` (every device calls back).
    With ``manual_axes`` (a partitioned pmap body) the program is manual over
    those only; it is lowered with Shardy on, so each sharding constraint is
    an ``sdy.sharding_constraint`` on the automatic axes.
    """
    n = int(np.prod(axis_sizes, dtype=np.int64))
    return _lower(closed_jaxpr, spmd_axis_context(axis_names, axis_sizes, manual_axes), n, platform, name, donated,
                  shardy=manual_axes is not None)


def lower_global(closed_jaxpr: core.ClosedJaxpr, num_devices: int, *, platform: str = "cpu",
                 name: str = "pxla_fn", donated: Sequence[bool] | None = None):
    """Lowers a global-view jaxpr (no named axes left) for ``num_devices``
    SPMD partitions, without shardings: pxla passes annotate them."""
    return _lower(closed_jaxpr, sharding_impls.ShardingContext(num_devices), num_devices, platform, name, donated)


class HighLevelTypeError(PxlaUserError, TypeError):
    """A map's operand or result is of one of jax's high-level types."""


def low_level(closed_jaxpr: core.ClosedJaxpr, name: str = "pxla_fn") -> core.ClosedJaxpr:
    """``closed_jaxpr`` as jax lowers it: jax's high-level primitives (jax
    0.12's ``jnp.searchsorted``, ...) expanded by their ``to_lojax`` rules,
    which jax runs on a jit's jaxpr before looking up MLIR rules (those
    primitives have none). Called under the body's axis environment: an
    expansion may bind collectives over its named axes."""
    boundary = high_level_avals(closed_jaxpr)
    if boundary:
        raise HighLevelTypeError(
            f"{name}: operands or results of jax's high-level types ({', '.join(map(str, boundary))}) cannot cross "
            f"a pxla_mlir map's boundary: pass and return the arrays they are made of (jax.Array leaves) instead")
    return lojax(closed_jaxpr)


def _lower(closed_jaxpr, axis_context, num_partitions: int, platform: str, name: str, donated, shardy: bool = False):
    closed_jaxpr = low_level(closed_jaxpr, name)
    # Ordered effects (io_callback(ordered=True), ...) get token arguments and
    # results on @main (importing makes them internal). With Shardy off, host
    # callbacks carry GSPMD shardings like the rest of our modules.
    ordered = list(effects.ordered_effects.filter_in(closed_jaxpr.effects))
    with lowering_flags(shardy), shared_lowering_context():
        return lower_jaxpr_to_module(
            name, closed_jaxpr, num_const_args=0, in_avals=closed_jaxpr.in_avals, ordered_effects=ordered,
            platforms=(platform,), backend=backend(platform), axis_context=axis_context,
            donated_args=list(donated) if donated is not None else [False] * len(closed_jaxpr.in_avals),
            num_partitions=num_partitions, lowering_parameters=jax_mlir.LoweringParameters())


def refined_module(lowering):
    """The module of jax's ``LoweringResult`` with shape-polymorphic code (a
    ``jax.export``'ed function called in the body) refined to static shapes,
    as jax does before compiling; the module itself when it has none."""
    state = lowering.shape_poly_state
    if state is None or not state.uses_dim_vars:
        return lowering.module
    with lowering_flags(False):  # as it was lowered (see _lower)
        return jax_mlir.refine_polymorphic_shapes(lowering.module)
