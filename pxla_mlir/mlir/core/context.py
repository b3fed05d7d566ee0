"""The one place that builds MLIR contexts from jaxlib.

This module must not import jax: ``pxla-opt`` uses it and starts in a fraction
of a second only because it loads jaxlib's MLIR bindings alone. Private jaxlib
names (``jaxlib.mlir._mlir_libs.*``) are imported here and nowhere else.
"""

from __future__ import annotations

import functools

from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext
from jaxlib.mlir.dialects import chlo, mhlo, sdy, stablehlo

__all__ = ["make_context", "register_passes", "DIALECTS"]

#: Dialects loaded into every context (besides builtin).
DIALECTS = ("func", "mhlo", "stablehlo", "chlo", "sdy")


@functools.cache
def _upstream_registry() -> ir.DialectRegistry:
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)  # func, arith, ... as jax loads them
    return registry


@functools.cache
def register_passes() -> None:
    """Registers jaxlib's textual passes (stablehlo/chlo legalizations etc.).

    Registration is process-global; MLIR aborts on a duplicate registration, so
    it must happen exactly once.
    """
    mhlo.register_mhlo_passes()
    stablehlo.register_stablehlo_passes()


def make_context(*, threading: bool = True, allow_unregistered_dialects: bool = False) -> ir.Context:
    """A fresh context with builtin, func, mhlo, stablehlo, chlo and sdy loaded.

    ``threading=False`` is required before IR printing with module scope
    (otherwise MLIR aborts the process).
    """
    register_passes()
    ctx = ir.Context()
    ctx.append_dialect_registry(_upstream_registry())
    ctx.load_all_available_dialects()
    mhlo.register_mhlo_dialect(ctx)
    stablehlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    sdy.register_dialect(ctx)
    ctx.enable_multithreading(threading)
    ctx.allow_unregistered_dialects = allow_unregistered_dialects
    return ctx
