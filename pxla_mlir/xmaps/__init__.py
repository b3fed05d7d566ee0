"""xmap on the pxla_mlir pipeline (see :mod:`.api`).

Loaded lazily: the collective table (:mod:`pxla_mlir.collectives`) imports
:mod:`.rewrites` without pulling in the whole xmap machinery.
"""

_LAZY = {"xmap": "api", "XmapFunction": "api", "LOWERINGS": "api", "XmapError": "plan", "XmapTypeError": "plan",
         "XmapMeshError": "plan", "XmapUnsupportedError": "plan", "serial_loop": "resources", "SerialLoop": "resources",
         "XmapInsideJitWarning": "lowering"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_LAZY)
