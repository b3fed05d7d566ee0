"""pxla passes, one per file; the file name is the pass argument without the
``pxla-`` prefix. Registered in :mod:`pxla_mlir.mlir.pass_infra.registry`.

The public API for writing a pass of your own (docs/writing-a-pass.md)::

    from pxla_mlir.passes import ModulePass, PassError, Statistic, option
    from pxla_mlir.passes import helpers  # read-only: ops by kind, @main, device counts, collectives' groups

Importing this package stays cheap: those names load jaxlib's MLIR bindings on first use.
"""

from typing import TYPE_CHECKING

_PUBLIC = {
    "ModulePass": "pxla_mlir.mlir.pass_infra.base",
    "PassError": "pxla_mlir.mlir.core.diagnostics",
    "Statistic": "pxla_mlir.mlir.pass_infra.statistics",
    "option": "pxla_mlir.mlir.pass_infra.options",
}

#: Modules of the public API, by the name it gives them.
_MODULES = {"helpers": "pxla_mlir.mlir.pass_infra.helpers"}

if TYPE_CHECKING:
    from pxla_mlir.mlir.core.diagnostics import PassError as PassError
    from pxla_mlir.mlir.pass_infra import helpers as helpers
    from pxla_mlir.mlir.pass_infra.base import ModulePass as ModulePass
    from pxla_mlir.mlir.pass_infra.options import option as option
    from pxla_mlir.mlir.pass_infra.statistics import Statistic as Statistic


def __getattr__(name: str) -> object:
    if name in _PUBLIC or name in _MODULES:
        import importlib

        value = importlib.import_module(_MODULES[name]) if name in _MODULES else \
            getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pxla_mlir.passes' has no attribute {name!r}")


__all__ = ["ModulePass", "PassError", "Statistic", "helpers", "option"]
