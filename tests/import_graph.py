"""The package's import graph against its floors: cycles, upward imports,
imports between sibling map kinds, and jax in the jax-free floor.

    python tests/import_graph.py          # a report; exit 1 if a rule is broken
    python tests/import_graph.py --dot    # the graph for graphviz

Every import of a pxla_mlir module counts, at module level or inside a
function (a function-local import is still a dependency), except the
package ``__init__``'s ``TYPE_CHECKING`` block (its lazy table spelled for
type checkers). Modules are
assigned to floors by :data:`FLOORS` (first matching prefix); a module may
import its own floor or lower ones. ``tests/project/test_layout.py`` runs the rules.
"""

from __future__ import annotations

import argparse
import ast
import collections
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent

#: (folder or module prefix, floor); the first matching prefix wins. Floors 0-4 are the jax-free floor,
#: the folder pxla_mlir/mlir/ (and the top-level passes/): they never import jax.
FLOORS: list[tuple[str, int]] = [
    ("pxla_mlir.version", 0), ("pxla_mlir.errors", 0),
    ("pxla_mlir.mlir.support", 0), ("pxla_mlir.mlir.collectives", 0),
    ("pxla_mlir.mlir.sharding", 1),
    ("pxla_mlir.mlir.core", 2),
    ("pxla_mlir.mlir.pass_infra", 3), ("pxla_mlir.passes", 3), ("pxla_mlir.mlir.pipelines", 3),
    ("pxla_mlir.mlir.explore", 4), ("pxla_mlir.mlir.xla_handoff", 4), ("pxla_mlir.mlir.cli", 4),
    ("pxla_mlir.mlir.reduce", 4),
    ("pxla_mlir.mlir", 4),  # the folder's __init__ (imports nothing)
    ("pxla_mlir.jaxbridge", 5),
    ("pxla_mlir.distributed", 6),
    ("pxla_mlir.runtime", 7),  # runtime/executable.py launches on every process of a distributed run
    ("pxla_mlir.stages", 8),
    ("pxla_mlir.maps", 9),
    # floor 10: each map kind's package (KINDS, from pxla_mlir/maps/registry.py)
    ("pxla_mlir.jit", 11),
    ("pxla_mlir.tools", 12), ("pxla_mlir.testing", 12), ("pxla_mlir.pytest_plugin", 12), ("pxla_mlir.__main__", 12),
    ("pxla_mlir", 0),  # the package's __init__: lazy, imports nothing of ours when loaded
]
JAX_FREE = 4
KIND_FLOOR = 10


def _kind_packages() -> tuple[str, ...]:
    """The package of every map kind in the registry's table (read, not imported)."""
    tree = ast.parse((REPO / "pxla_mlir" / "maps" / "registry.py").read_text())
    table = next(node.value for node in tree.body if isinstance(node, ast.AnnAssign) and node.target.id == "KINDS")
    targets = [v.args[0].value for v in table.values]  # KindEntry("module:attribute", ...)
    return tuple(sorted({t.split(":")[0].rsplit(".", 1)[0] for t in targets}))


#: Map kinds: siblings on one floor that never import each other.
KINDS = _kind_packages()


def modules() -> dict[str, pathlib.Path]:
    found = {}
    for base, package in ((REPO / "pxla_mlir", "pxla_mlir"), (REPO / "passes", "pxla_mlir.passes")):
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def floor(module: str) -> int:
    for prefix, level in [*((k, KIND_FLOOR) for k in KINDS), *FLOORS]:
        if module == prefix or module.startswith(prefix + "."):
            return level
    raise KeyError(f"{module} has no floor: add it to FLOORS in {__file__}")


def _targets(module: str, is_package: bool, node, found) -> list[str]:
    """The pxla_mlir modules one import statement loads (the package itself
    for ``from package import name`` only when a name is not a submodule)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".")
        if not is_package:
            base = base[:-1]
        base = base[:len(base) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module
    submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in found]
    return submodules + ([target] if len(submodules) < len(node.names) else [])


def _type_checking_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports(found: dict[str, pathlib.Path]) -> dict[str, dict[str, int]]:
    """module -> {imported pxla_mlir module: first line}."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in found.items():
        tree = ast.parse(path.read_text(), str(path))
        if module == "pxla_mlir":  # its TYPE_CHECKING block is the lazy table again, for type checkers
            tree.body = [n for n in tree.body if not _type_checking_block(n)]
        deps: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, path.name == "__init__.py", node, found):
                    if target in found and target != module:
                        deps.setdefault(target, node.lineno)
        graph[module] = deps
    return graph


def jax_imports(found: dict[str, pathlib.Path]) -> dict[str, list[int]]:
    """Lines importing jax (not jaxlib) when each module is imported: its
    top-level statements (a function that loads jax when called is fine)."""
    out = collections.defaultdict(list)
    for module, path in found.items():
        tree = ast.parse(path.read_text())
        top = [n for stmt in tree.body for n in ast.walk(stmt)
               if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        top += [n for stmt in tree.body if isinstance(stmt, ast.ClassDef)
                for item in stmt.body if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                for n in ast.walk(item)]
        for node in top:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == "jax" or n.startswith("jax.") for n in names):
                out[module].append(node.lineno)
    return out


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(10000, limit))
    try:  # restored: the suite's other tests run in this interpreter
        for v in graph:
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found, key=len, reverse=True)


def _kind(module: str) -> str | None:
    return next((k for k in KINDS if module == k or module.startswith(k + ".")), None)


def violations(found=None) -> dict[str, list[str]]:
    found = found or modules()
    graph = imports(found)
    upward, siblings = [], []
    for module, deps in sorted(graph.items()):
        for dep, line in sorted(deps.items()):
            if floor(dep) > floor(module):
                upward.append(f"{module}:{line} imports {dep} (floor {floor(module)} -> {floor(dep)})")
            a, b = _kind(module), _kind(dep)
            if a and b and a != b:
                siblings.append(f"{module}:{line} imports {dep} (map kinds never import each other)")
    jax_lines = jax_imports(found)
    jax_floor = [f"{m}:{line} imports jax" for m in sorted(jax_lines) if floor(m) <= JAX_FREE for line in jax_lines[m]]
    return {"cycles": [" <-> ".join(c) for c in cycles(graph)], "upward imports": upward,
            "imports between map kinds": siblings, "jax in the jax-free floor": jax_floor}


def report() -> int:
    found = modules()
    broken = violations(found)
    per_folder = collections.Counter(m.rsplit(".", 1)[0] if found[m].name != "__init__.py" else m for m in found)
    sizes = sorted(((len(p.read_text().splitlines()), m) for m, p in found.items()), reverse=True)[:8]
    print(f"{len(found)} modules; {sum(len(d) for d in imports(found).values())} imports between them")
    print("modules per package: " + ", ".join(f"{k.removeprefix('pxla_mlir.') or 'pxla_mlir'} {v}"
                                              for k, v in sorted(per_folder.items())))
    print("largest: " + ", ".join(f"{m.removeprefix('pxla_mlir.')} {n}" for n, m in sizes))
    for rule, items in broken.items():
        print(f"{rule}: {len(items)}")
        for item in items:
            print(f"  {item}")
    return 1 if any(broken.values()) else 0


def dot() -> None:
    graph = imports(modules())
    print("digraph pxla_mlir {\n  rankdir=BT;")
    for module, deps in sorted(graph.items()):
        for dep in sorted(deps):
            style = ' [color=red]' if floor(dep) > floor(module) else ""
            print(f'  "{module.removeprefix("pxla_mlir.")}" -> "{dep.removeprefix("pxla_mlir.")}"{style};')
    print("}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dot", action="store_true", help="print the graph in graphviz's dot language")
    args = parser.parse_args()
    if args.dot:
        dot()
    else:
        sys.exit(report())
