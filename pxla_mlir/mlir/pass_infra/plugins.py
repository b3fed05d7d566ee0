"""Passes of your own, loaded from a plugin: a ``.py`` file or a dotted module name.

    load_plugin("my_passes.py")      # or load_plugin("mypkg.passes")

Every module-level ``ModulePass`` subclass the plugin defines with an
``argument`` is registered (:mod:`.registry`) and may then be named in any
pipeline, a map's ``extra_passes=`` included. A plugin that cannot be
loaded is a :class:`PluginError` naming it and saying how to fix it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.pass_infra import registry
from pxla_mlir.mlir.pass_infra.base import ModulePass

__all__ = ["PluginError", "load_plugin", "plugin_specs"]

_LOADED: dict[str, list[type]] = {}


class PluginError(PxlaUserError, ValueError):
    """A plugin that does not exist, does not import, or defines no usable pass."""


def _import(spec: str):
    if spec.endswith(".py"):
        path = os.path.abspath(spec)
        if not os.path.isfile(path):
            raise PluginError(f"pass plugin {spec!r}: no such file; give the path of a .py file that defines "
                              f"ModulePass subclasses, or a dotted module name")
        name = "pxla_plugin_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
        loader_spec = importlib.util.spec_from_file_location(name, path)
        assert loader_spec is not None and loader_spec.loader is not None
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        loader_spec.loader.exec_module(module)
        return module
    return importlib.import_module(spec)


def load_plugin(spec: str) -> list[type]:
    """Imports the plugin ``spec`` (a .py path or a dotted module name) once, registers its passes and
    returns their classes."""
    if spec in _LOADED:
        return _LOADED[spec]
    try:
        module = _import(spec)
    except PluginError:
        raise
    except Exception as e:  # the plugin's own code failed: name it, never a traceback
        raise PluginError(f"pass plugin {spec!r} does not import: {type(e).__name__}: {e}; fix the plugin "
                          f"(set PXLA_DEBUG=1 for the traceback)") from e
    passes = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, ModulePass)
              and v.__module__ == module.__name__ and isinstance(getattr(v, "argument", None), str)]
    if not passes:
        raise PluginError(f"pass plugin {spec!r} defines no pass: define a ModulePass subclass with an argument "
                          f"at the module's top level")
    for cls in passes:
        registry.register(cls)
    _LOADED[spec] = passes
    return passes


def plugin_specs() -> tuple[str, ...]:
    """The plugins loaded so far, in order."""
    return tuple(_LOADED)
