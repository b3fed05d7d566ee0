"""Every Sphinx-style reference in the package's docstrings and comments, and in the docs' pages, names
something that exists: modules move and names change, and a reference that outlives its target misleads.

A reference is ``:mod:``, ``:func:``, ``:class:``, ``:meth:``, ``:attr:`` or ``:data:`` around a name that is
absolute (``pxla_mlir.runtime.dispatch.launch_cached``), relative to the module's package (``.dispatch``,
``..maps.rules``, as Python's relative imports count dots) or plain (``check_live``, ``LaunchLock.acquire``: a name
of the module itself, or a member of one of its classes). Names are resolved from the sources with ``ast``,
nothing is imported (no jax): a name another module of ours imports is followed there; a name bound to something
outside the package (jax, numpy) is taken as it is."""

from __future__ import annotations

import ast
import functools
import pathlib
import re

import import_graph
from conftest import REPO

ROLE = re.compile(r":(mod|func|class|meth|attr|data):`([^`]+)`")
MODULES = import_graph.modules()  # module name -> path (pxla_mlir/ and the top-level passes/ as pxla_mlir.passes)
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


class _Scope:
    """The names one module or class binds, read from its source."""

    def __init__(self, body: list[ast.stmt], module: str, *, is_class: bool = False):
        self.module = module
        self.nodes: dict[str, ast.AST] = {}
        self.imports: dict[str, tuple[str, str | None]] = {}  # name -> (module, name in it; None: the module)
        self.lazy = False  # a module __getattr__ that hands out more names
        self.bases: list[ast.expr] = []
        for node in _top_level(body):
            self._bind(node)
        if is_class:
            for node in ast.walk(ast.Module(body=body, type_ignores=[])):  # self.x = ... in the methods
                for target in _targets(node):
                    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                            and target.value.id in ("self", "cls")):
                        self.nodes.setdefault(target.attr, node)

    def _bind(self, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.nodes[node.name] = node
            self.lazy |= node.name == "__getattr__"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    self.imports[top] = (top, None)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(self.module, node.module, node.level)
            for alias in node.names:
                self.imports[alias.asname or alias.name] = (source, alias.name)
        else:
            for target in _targets(node):
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        self.nodes[name.id] = node

    def strings(self) -> set[str]:
        """The string constants of the scope's assignments (the names a lazy ``__getattr__`` hands out)."""
        return {c.value for node in self.nodes.values() if not isinstance(node, ast.FunctionDef | ast.ClassDef)
                for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)}


def _top_level(body: list[ast.stmt]):
    """The statements that bind names in a module or class body: inside if/try/with blocks too (``if
    TYPE_CHECKING:``), not inside functions."""
    for node in body:
        if isinstance(node, ast.If | ast.Try | ast.With):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [handler.body for handler in getattr(node, "handlers", [])]
            for block in blocks:
                yield from _top_level(block)
        else:
            yield node


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return [node.target]
    return []


def _package(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _absolute(module: str, name: str | None, level: int) -> str:
    """``from <level dots><name> import ...`` in ``module``, as an absolute module name."""
    if not level:
        return name or ""
    base = _package(module).split(".")
    base = base[:len(base) - level + 1]
    return ".".join(base + ([name] if name else []))


@functools.cache
def _module_scope(module: str) -> _Scope:
    return _Scope(ast.parse(MODULES[module].read_text()).body, module)


@functools.cache
def _class_scope(module: str, name: str) -> _Scope:
    node = _module_scope(module).nodes[name]
    assert isinstance(node, ast.ClassDef)
    scope = _Scope(node.body, module, is_class=True)
    scope.bases = node.bases
    return scope


def _resolve_in_module(module: str, parts: list[str]) -> bool:
    if not parts:
        return True
    head, rest = parts[0], parts[1:]
    if f"{module}.{head}" in MODULES:
        return _resolve_in_module(f"{module}.{head}", rest)
    scope = _module_scope(module)
    if head in scope.imports:
        source, name = scope.imports[head]
        if not source.startswith("pxla_mlir"):
            return True  # jax, numpy, the standard library: not ours to check
        if name is None:
            return source in MODULES and _resolve_in_module(source, rest)
        return _resolve_in_module(source, [name, *rest])
    node = scope.nodes.get(head)
    if node is None:
        return scope.lazy and head in scope.strings() and not rest
    if isinstance(node, ast.ClassDef):
        return _resolve_in_class(module, head, rest)
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return not rest
    value = getattr(node, "value", None)  # NAME = SomeClass(...): its members are the class's
    if rest and isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return _resolve_in_module(module, [value.func.id, *rest])
    return True if not rest else value is not None and not isinstance(value, ast.Constant)


def _resolve_in_class(module: str, name: str, parts: list[str]) -> bool:
    if not parts:
        return True
    scope = _class_scope(module, name)
    head, rest = parts[0], parts[1:]
    node = scope.nodes.get(head)
    if isinstance(node, ast.ClassDef):
        return True  # a nested class: deeper names are not checked
    if node is not None:
        return not rest or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    for base in scope.bases:
        dotted = ast.unparse(base).split("[")[0]
        if dotted in ("object", "Protocol", "Generic", "typing.Protocol", "typing.Generic"):
            continue
        if not _is_ours(module, dotted):
            return True  # a member inherited from outside the package (Exception, NamedTuple, threading.local)
        if _resolve_in_module(module, [*dotted.split("."), *parts]):
            return True
    return False


def _is_ours(module: str, dotted: str) -> bool:
    """Whether the name ``dotted`` in ``module`` is bound by the package (not imported from outside it)."""
    scope = _module_scope(module)
    head = dotted.split(".")[0]
    if head in scope.imports:
        return scope.imports[head][0].startswith("pxla_mlir")
    return head in scope.nodes


def resolves(ref: str, module: str | None) -> bool:
    """Whether the reference ``ref`` (its role's text) names something, read in ``module`` (None: a docs page)."""
    target = ref.split("<")[-1].rstrip(">").strip().lstrip("~!").removesuffix("()")
    if target.startswith("pxla_mlir."):
        parts = target.split(".")
        for i in range(len(parts), 0, -1):  # the longest module prefix, then names in it
            if ".".join(parts[:i]) in MODULES:
                return _resolve_in_module(".".join(parts[:i]), parts[i:])
        return False
    if module is None:
        return False  # a page has no module to read a relative or plain name in
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        base = _absolute(module, None, dots)
        return resolves(f"{base}.{target[dots:]}" if target[dots:] else base, module)
    parts = target.split(".")
    if _resolve_in_module(module, parts):
        return True
    scope = _module_scope(module)  # a member of one of the module's classes (a method's docstring names another)
    return any(isinstance(node, ast.ClassDef) and parts[0] in _class_scope(module, name).nodes
               and _resolve_in_class(module, name, parts) for name, node in scope.nodes.items())


def references() -> list[tuple[pathlib.Path, str | None, str]]:
    """Every (file, module or None, reference) of the package's sources and the docs' pages."""
    found = [(path, module, m[2]) for module, path in MODULES.items() for m in ROLE.finditer(path.read_text())]
    found += [(page, None, m[2]) for page in PAGES for m in ROLE.finditer(page.read_text())]
    return found


def test_every_docstring_reference_names_something_that_exists():
    found = references()
    assert len(found) > 300, len(found)
    bad = [f"{path.relative_to(REPO)}: `{ref}`" for path, module, ref in found if not resolves(ref, module)]
    assert not bad, "references to nothing (renamed or moved?):\n" + "\n".join(bad)


def test_the_check_finds_what_is_gone():
    module = "pxla_mlir.runtime.launches"
    for ref in (".dispatch", "pxla_mlir.runtime.dispatch.launch_cached", "check_live", "LaunchLock.acquire",
                "LaunchLock.holders", "~.launches.LaunchLock", "..maps.rules", "pxla_mlir.pmap", "LAUNCHES.acquire"):
        assert resolves(ref, module), ref
    for ref in (".nesting", "pxla_mlir.runtime.dispatch.launch_fast", "check_alive", "LaunchLock.take",
                "..maps.stage", "pxla_mlir.pmapp", "pxla_mlir.runtime.nothing.x"):
        assert not resolves(ref, module), ref
