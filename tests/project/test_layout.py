"""The package's floors hold (tests/import_graph.py: no import cycle, no
import up a floor, no import between map kinds), and the jax-free floor
really is: each of its modules, imported alone in a fresh interpreter (a fork
of one that has loaded only what the floor uses from outside the package),
loads no jax; nor do ``pxla-mlir --version`` and ``pxla-mlir passes``. The
tests' folders mirror the package's."""

import json
import os
import pathlib
import subprocess
import sys
import tomllib

import import_graph
import pytest
from conftest import REPO

JAX_FREE = sorted(m for m in import_graph.modules() if import_graph.floor(m) <= import_graph.JAX_FREE)


@pytest.fixture(scope="module")
def violations():
    """The graph's violations, computed once for the four rules (it parses every module)."""
    return import_graph.violations()


@pytest.mark.parametrize("rule", ["cycles", "upward imports", "imports between map kinds", "jax in the jax-free floor"])
def test_import_graph_rule(rule, violations):
    broken = violations[rule]
    assert not broken, f"{rule}:\n" + "\n".join(broken) + "\n(python tests/import_graph.py shows the whole graph)"


def test_every_module_has_a_floor():
    for module in import_graph.modules():
        import_graph.floor(module)  # raises for a module FLOORS does not place


def test_private_imports_have_two_homes():
    """ruff's TID251 (make lint) bans private jax/jaxlib imports outside two modules: jax_internals.py (jax._src)
    and the jax-free floor's context.py (jaxlib's MLIR internals). A moved or renamed shim must take its
    exemption along (else the ban fails it), and no third module may join them."""
    lint = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "TID251" in lint["select"]
    assert {"jax._src", "jaxlib.mlir._mlir_libs"} <= set(lint["flake8-tidy-imports"]["banned-api"])
    homes = sorted(p for p, rules in lint["per-file-ignores"].items() if "TID251" in rules and not p.startswith("tests/"))
    assert len(homes) == 2 and all((REPO / p).is_file() for p in homes), homes


def _loads_jax(code: str) -> subprocess.CompletedProcess:
    check = f"{code}\nimport sys\nprint(sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120, env=env,
                          cwd=REPO)


#: What the jax-free floor imports from outside the package (jaxlib's MLIR bindings and dialects, numpy): loaded
#: once, before the forks, so that each fork runs only its module's own imports. None of it loads jax (checked).
PRELOADED = ["numpy", "jaxlib.mlir.ir", "jaxlib.mlir.passmanager", "jaxlib.mlir.dialects.func",
             "jaxlib.mlir.dialects.chlo", "jaxlib.mlir.dialects.mhlo", "jaxlib.mlir.dialects.stablehlo",
             "jaxlib.mlir.dialects.sdy"]

#: Imports each module of MODULES alone, in a fork of this interpreter, and prints what each loaded of jax.
_IMPORT_EACH = """
import importlib, json, os, sys, traceback

def jax_modules():
    return sorted(m for m in sys.modules if m == "jax" or m.startswith("jax."))

for name in PRELOADED:
    try:
        importlib.import_module(name)
    except ImportError:  # not in this jaxlib: a module that needs it loads it itself
        pass
assert not any(m == "pxla_mlir" or m.startswith("pxla_mlir.") for m in sys.modules)
results = {"(the preloaded modules)": {"jax": jax_modules(), "error": ""}}
for module in MODULES:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(module)
            report = {"jax": jax_modules(), "error": ""}
        except BaseException:
            report = {"jax": jax_modules(), "error": traceback.format_exc()[-500:]}
        with os.fdopen(write, "w") as out:
            json.dump(report, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as inp:
        text = inp.read()
    _, status = os.waitpid(pid, 0)
    results[module] = json.loads(text) if text else {"jax": [], "error": f"the import ended with status {status}"}
print(json.dumps(results))
"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_jax_free_floor_loads_no_jax():
    assert len(JAX_FREE) > 40  # ir, sharding, pass_infra, passes, pipelines, explore, pxla-opt, ...
    code = f"PRELOADED = {PRELOADED!r}\nMODULES = {JAX_FREE!r}\n{_IMPORT_EACH}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}  # no BLAS threads across the forks
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    assert set(results) == {"(the preloaded modules)", *JAX_FREE}
    failed = {m: r["error"] for m, r in results.items() if r["error"]}
    assert not failed, failed
    loaded = {m: r["jax"] for m, r in results.items() if r["jax"]}
    assert not loaded, f"modules of the jax-free floor that load jax: {loaded}"


@pytest.mark.parametrize("argv", [["--version"], ["passes"], ["passes", "pxla-expand-shard"],
                                  ["gen-checks", "examples/per_device_psum.mlir"],
                                  ["reduce", "examples/per_device_psum.mlir", "--pipeline",
                                   "builtin.module(pxla-verify-handoff)", "--jobs", "1"]])
@pytest.mark.subprocess
def test_cli_listing_loads_no_jax(argv):
    proc = _loads_jax(f"import contextlib, io\nfrom pxla_mlir.tools import cli\n"
                      f"with contextlib.redirect_stdout(io.StringIO()):\n"
                      f"    try:\n        cli.main({argv!r})\n    except SystemExit:\n        pass")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout


# -- tests/ mirrors the package -----------------------------------------------------------------------------

TESTS = REPO / "tests"


def _test_files():
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def _mirrored(rel: pathlib.PurePath) -> pathlib.Path | None:
    """The package folder tests/``rel`` mirrors: pxla_mlir/``rel``, the top-level passes/ (pxla_mlir.passes) for
    tests/passes; None for tests/project, the tests of the repository as a whole (layout, packaging, benchmarks,
    fuzzing)."""
    if rel.parts[0] == "project":
        return None
    if rel.parts[0] == "passes":
        return REPO.joinpath(*rel.parts)
    return REPO / "pxla_mlir" / rel


def test_test_folders_mirror_the_package_folders():
    """A test of pxla_mlir/X/Y/... lives in tests/X/Y/ (tests/mlir/sharding/ for pxla_mlir/mlir/sharding/)."""
    bad = []
    for folder in sorted({p.parent for p in _test_files()} - {TESTS}):
        rel = folder.relative_to(TESTS)
        mirrored = _mirrored(rel)
        if mirrored is not None and not mirrored.is_dir():
            bad.append(f"tests/{rel.as_posix()}/ mirrors no package folder ({mirrored.relative_to(REPO)}/)")
    assert not bad, "\n".join(bad)


def test_test_file_names_are_unique():
    """pytest imports test files by their basename (the default import mode, no __init__.py in the test
    folders, tests/ on sys.path for the shared helpers): two files of one name in two folders would clash."""
    seen = {}
    for path in _test_files():
        seen.setdefault(path.name, []).append(path.relative_to(REPO).as_posix())
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, clashes
    packages = sorted(p.parent.relative_to(REPO).as_posix() for p in TESTS.rglob("__init__.py")
                      if any(q.name.startswith("test_") for q in p.parent.glob("*.py")))
    assert not packages, f"test folders are not packages: {packages}"
