"""Every reduction, in the order one round of the reducer runs them: the ones
that take away most first (cleanup passes, whole functions, ops, regions),
then ops that stay only as inputs become arguments, then the boundaries of
the entry functions, then what stays is simplified
(constants, attributes)."""

from __future__ import annotations

from pxla_mlir.mlir.reduce.reductions import InlineRegions, Reduction, RemoveOps, Rewrite
from pxla_mlir.mlir.reduce.signatures import OpsToArguments, RemoveArguments, RemoveFunctions, RemoveResults
from pxla_mlir.mlir.reduce.simplify import Cleanup, DropAttributes, SplatConstants

__all__ = ["default_reductions"]


def default_reductions() -> list[Reduction | Rewrite]:
    return [Cleanup(), RemoveFunctions(), RemoveOps(), InlineRegions(), OpsToArguments(), RemoveArguments(),
            RemoveResults(), SplatConstants(), DropAttributes()]
