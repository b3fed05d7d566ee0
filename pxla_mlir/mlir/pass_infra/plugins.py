"""Passes from outside the package: plugin files and modules, installed entry points, ``register_pass``.

    pxla-opt in.mlir --load-pass-plugin=my_passes.py -my-pass='n=2'
    pxla-opt in.mlir --load-pass-plugin=my_package.passes -p 'builtin.module(my-pass)'

:func:`load_plugin` imports a ``.py`` file or a dotted module and registers
every pass it defines (a module-level ``ModulePass`` subclass with an
``argument``); installed packages declare theirs in the ``pxla_mlir.passes``
entry-point group (:func:`load_entry_points`, read by the registry the first
time a name is not found); :func:`register_pass` registers one class from
Python. A registered pass is a pass like the built-in ones: pipelines, pass
flags, ``--list-passes``, reproducers (which record the plugins,
:meth:`~pxla_mlir.mlir.pass_infra.registry.PassRegistry.specs_for`).

Loading is all or nothing: a plugin that does not import, defines no pass, or
whose pass is malformed or clashes with a pass already known raises
:class:`PluginError` (one line: the plugin, the pass, how to fix it) and
leaves the registry as it was. An installed entry point that does not load
is not an error for every name: the registry keeps it as a note for the
names it could have defined (:attr:`~pxla_mlir.mlir.pass_infra.registry.PassRegistry.broken`).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import re
import sys
import types

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.pass_infra.base import ModulePass
from pxla_mlir.mlir.pass_infra.options import OptionError, check_types
from pxla_mlir.mlir.pass_infra.registry import REGISTRY, BrokenPlugin

__all__ = ["ENTRY_POINT_GROUP", "PluginError", "load_entry_points", "load_plugin", "read_entry_points", "register_pass",
           "resolve"]

ENTRY_POINT_GROUP = "pxla_mlir.passes"
_ARGUMENT = re.compile(r"[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*")


class PluginError(PxlaUserError, ValueError):
    """A plugin that cannot be loaded, or a pass that cannot be registered; nothing of it was registered."""


def _is_file(spec: str) -> bool:
    return spec.endswith(".py") or os.sep in spec or (os.altsep is not None and os.altsep in spec)


def _file_state(path: str) -> str:
    """What tells one version of a plugin file from another: an edited file loads again."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return f"{st.st_size}:{st.st_mtime_ns}"


def load_plugin(spec: str) -> list[type]:
    """Imports the plugin ``spec`` (a path to a ``.py`` file or a dotted module name) and registers every pass it
    defines; returns their classes. Loading the same plugin again returns them again (a file edited since
    loads anew: its passes replace the old ones)."""
    path = os.path.realpath(spec) if _is_file(spec) else None
    key, state = (path, _file_state(path)) if path is not None else (spec, "")
    loaded = REGISTRY.plugin(key, state)
    if loaded is not None:
        return list(loaded)
    with REGISTRY.changing():  # all or nothing: one that registers passes with register_pass and then fails
        module = _import_file(spec, key) if path is not None else _import_module(spec)
        classes = _passes_of(module, spec)
        for cls in classes:
            _register(cls, spec, key)
        REGISTRY.remember_plugin(key, state, classes)
    return list(classes)


def _import_file(spec: str, path: str) -> types.ModuleType:
    import importlib.util  # here: pxla-opt without a plugin does not pay for it

    if not os.path.isfile(path):
        why = "is a directory" if os.path.isdir(path) else "does not exist"
        raise PluginError(f"pass plugin '{spec}' {why}: give the path to a .py file that defines passes, "
                          f"or a dotted module name")
    # A name of its own per file: two plugins called passes.py do not replace each other in sys.modules.
    name = "pxla_plugin_" + re.sub(r"\W", "_", os.path.splitext(path)[0])
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise PluginError(f"pass plugin '{spec}' cannot be imported: name a .py file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # dataclasses look their module up while the body runs
    try:
        loader_spec.loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop(name, None)
        raise _import_failed(spec, e) from None
    return module


def _import_module(spec: str) -> types.ModuleType:
    if not all(part.isidentifier() for part in spec.split(".")):
        raise PluginError(f"pass plugin '{spec}' is neither a .py file nor a dotted module name "
                          f"(e.g. my_package.passes)")
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as e:
        if e.name is not None and (spec == e.name or spec.startswith(e.name + ".")):
            raise PluginError(f"pass plugin '{spec}': no module named '{e.name}' (install the package that "
                              f"provides it, add its folder to PYTHONPATH, or give the path to the .py file)") \
                from None
        raise _import_failed(spec, e) from None
    except BaseException as e:
        raise _import_failed(spec, e) from None


def _import_failed(spec: str, e: BaseException) -> PluginError:
    if isinstance(e, KeyboardInterrupt):
        raise e
    if isinstance(e, SyntaxError):
        where = f"{e.filename}:{e.lineno}" if e.filename else f"line {e.lineno}"
        return PluginError(f"pass plugin '{spec}' does not import: {where}: SyntaxError: {e.msg} (fix the plugin)")
    frames = [f for f in inspect.getinnerframes(e.__traceback__) if f.filename != __file__] \
        if e.__traceback__ else []
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return PluginError(f"pass plugin '{spec}' does not import: {type(e).__name__}: {e}{where} (fix the plugin)")


def _passes_of(module: types.ModuleType, spec: str) -> list[type]:
    """The module's own passes: module-level ModulePass subclasses defined in it (private ones are bases)."""
    found: list[type] = []
    for name, value in vars(module).items():
        if not isinstance(value, type) or value.__module__ != module.__name__ or name.startswith("_"):
            continue
        if issubclass(value, ModulePass):
            found.append(value)
        elif "argument" in vars(value):
            raise PluginError(f"pass plugin '{spec}': class {name} has an argument but is not a pass "
                              f"(derive it from pxla_mlir.passes.ModulePass)")
    if not found:
        raise PluginError(f"pass plugin '{spec}' defines no pass: define a module-level subclass of "
                          f"pxla_mlir.passes.ModulePass with an argument and a run(module) method")
    return found


def register_pass(cls: type) -> type:
    """Checks ``cls`` (a ``pxla_mlir.passes.ModulePass`` subclass) and registers it under its ``argument``;
    returns it, so it serves as a class decorator. Raises ``PluginError`` (a ``ValueError``) for a class that
    is not a pass or whose argument is taken (by a built-in pass or pipeline, a jaxlib pass, or another plugin's
    pass)."""
    module = getattr(cls, "__module__", "__main__")
    # A reproducer can load the class's module again, unless it is a script or a plugin file (recorded by path).
    from_file = module.startswith("pxla_plugin_")
    reloadable = module if module != "__main__" and not from_file else None
    source = getattr(sys.modules.get(module), "__file__", None) if from_file else None
    return _register(cls, source or module, reloadable)


def _register(cls: type, source: str, reloadable: str | None) -> type:
    _check(cls, source)
    return REGISTRY.add(cls, source, reloadable)


def _check(cls: type, source: str) -> None:
    what = f"pass plugin '{source}': {getattr(cls, '__name__', cls)!s}"
    if not (isinstance(cls, type) and issubclass(cls, ModulePass)) or cls is ModulePass:
        raise PluginError(f"{what} is not a pass (derive it from pxla_mlir.passes.ModulePass)")
    argument = vars(cls).get("argument")
    if not isinstance(argument, str) or not _ARGUMENT.fullmatch(argument):
        found = "has no argument" if argument is None else f"has argument {argument!r}"
        raise PluginError(f"{what} {found}: set argument = 'my-pass' (lower case words joined by '-'), the name "
                          f"pipelines and flags call it by")
    what = f"pass plugin '{source}': pass '{argument}' ({cls.__name__})"
    if not isinstance(getattr(cls, "summary", None), str):
        raise PluginError(f"{what} has no summary: set summary = 'one line: what it does'")
    if cls.run is ModulePass.run:
        raise PluginError(f"{what} has no run(self, module) method")
    if not isinstance(cls.version, str):
        raise PluginError(f"{what}: version must be a string, got {cls.version!r}")
    # The census skips a pass whose acts_on names no op of the module: a str's letters, or a name without its
    # dialect, would skip it always and silently.
    if not isinstance(cls.acts_on, (frozenset, set)) or not all(
            isinstance(name, str) and "." in name for name in cls.acts_on):
        raise PluginError(f"{what}: acts_on must be a frozenset of op names with their dialect, e.g. "
                          f"frozenset({{'mhlo.add'}}), got {cls.acts_on!r}")
    if not dataclasses.is_dataclass(cls) or "__dataclass_fields__" not in vars(cls) and _own_fields(cls):
        raise PluginError(f"{what}: decorate it with @dataclasses.dataclass(frozen=True), which makes its "
                          f"fields its options")
    try:
        check_types(cls)
    except OptionError as e:
        raise PluginError(f"{what}: {e}") from None
    try:
        cls()
    except Exception as e:
        raise PluginError(f"{what}: its options do not work: {type(e).__name__}: {e} (declare each as "
                          f"NAME: TYPE = option(DEFAULT, 'help'))") from None
    _check_free(argument, cls, what)


def _own_fields(cls: type) -> bool:
    return any(not str(t).startswith(("ClassVar", "typing.ClassVar")) for t in vars(cls).get("__annotations__", {})
               .values())


def _check_free(argument: str, cls: type, what: str) -> None:
    from pxla_mlir.mlir.pass_infra import jaxlib_passes

    if REGISTRY.is_builtin(argument):
        kind = "pass" if argument in REGISTRY.passes else "pipeline"
        raise PluginError(f"{what} has the name of the built-in {kind} '{argument}': rename it")
    if jaxlib_passes.is_jaxlib_name(argument):
        raise PluginError(f"{what} has the name of jaxlib's pass '{argument}': rename it")
    taken = REGISTRY.registered().get(argument)
    if taken is not None and not _same_class(taken, cls):
        raise PluginError(f"{what} has the name of a pass already loaded from {REGISTRY.source(argument)} "
                          f"({taken.__module__}.{taken.__qualname__}): rename one of them")


def _same_class(a: type, b: type) -> bool:
    """One pass, whatever route loaded it: the same class, or the class of the same name defined by the
    same file (a plugin file that is also an installed module, loaded both ways)."""
    if a is b or (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__):
        return True
    return a.__qualname__ == b.__qualname__ and _defined_in(a) is not None and _defined_in(a) == _defined_in(b)


def _defined_in(cls: type) -> str | None:
    try:
        return os.path.realpath(inspect.getfile(cls))
    except (TypeError, OSError):
        return None


def resolve(argument: str):
    """The pass or pipeline class for ``argument``, or None if it is unknown: a name no table knows first
    reads the installed entry points (once per process; never for a jaxlib pass)."""
    found = REGISTRY.load(argument)
    if found is None and not REGISTRY.entry_points_read:
        from pxla_mlir.mlir.pass_infra import jaxlib_passes

        if not jaxlib_passes.is_jaxlib_name(argument) and read_entry_points():
            found = REGISTRY.load(argument)
    return found


def read_entry_points() -> bool:
    """Loads the installed ``pxla_mlir.passes`` entry points unless read already; whether this call read them.
    One that does not load is kept in the registry's ``broken`` list, not raised."""
    if not REGISTRY.reading_entry_points():
        return False
    REGISTRY.broken = load_entry_points()
    return True


def load_entry_points() -> list[BrokenPlugin]:
    """Loads the installed ``pxla_mlir.passes`` entry points (the registry calls it once); returns those that did
    not load. An entry point names a module (``my-pass = "my_package.passes"``) or one class
    (``"my_package.passes:MyPass"``); each loads all or nothing, on its own."""
    from importlib import metadata

    broken: list[BrokenPlugin] = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep.dist, "name", None)
        label = f"entry point '{ep.name} = {ep.value}'" + (f" of {dist}" if dist else "")
        try:
            if ep.attr is None:
                load_plugin(ep.module)
            else:
                with REGISTRY.changing():
                    _register(_load_class(ep, label, dist), ep.value, ep.module)
        except PluginError as e:
            broken.append(BrokenPlugin(label, str(e)))
    return broken


def _load_class(ep, label: str, dist: str | None) -> type:
    try:
        return ep.load()
    except Exception as e:
        raise PluginError(f"pass plugin {label} does not load: {type(e).__name__}: {e} (fix or uninstall "
                          f"{dist or 'the package'})") from None
