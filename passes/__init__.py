"""pxla passes, one per file; the file name is the pass argument without the
``pxla-`` prefix. Registered in :mod:`pxla_mlir.mlir.pass_infra.registry`.

The public API for writing a pass of your own (docs/writing-a-pass.md)::

    from pxla_mlir.passes import ModulePass, PassError, option

Importing this package stays cheap: those names load jaxlib's MLIR bindings on first use.
"""

from typing import TYPE_CHECKING

_PUBLIC = {
    "ModulePass": "pxla_mlir.mlir.pass_infra.base",
    "PassError": "pxla_mlir.mlir.core.diagnostics",
    "option": "pxla_mlir.mlir.pass_infra.options",
}

if TYPE_CHECKING:
    from pxla_mlir.mlir.core.diagnostics import PassError as PassError
    from pxla_mlir.mlir.pass_infra.base import ModulePass as ModulePass
    from pxla_mlir.mlir.pass_infra.options import option as option


def __getattr__(name: str) -> object:
    if name in _PUBLIC:
        import importlib

        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pxla_mlir.passes' has no attribute {name!r}")


__all__ = ["ModulePass", "PassError", "option"]
