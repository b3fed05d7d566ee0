"""The jax release installed is one pxla_mlir supports: every private name
it lists exists, the bridges take the branch of this release, and the
supported range in the package metadata says the truth."""

import re
import sys

import jax
import jaxlib.version
import pytest
from conftest import REPO

from pxla_mlir.jaxbridge import jax_internals
from pxla_mlir.jaxbridge.jax_internals import CHECKED_ON, JAX_VERSION, PrivateNames, core


def _version(text):
    return tuple(int(p) for p in re.findall(r"\d+", text))


def test_every_listed_private_name_exists_in_the_installed_jax():
    assert jax_internals.missing_names() == []


def test_the_installed_jax_is_in_the_supported_range():
    metadata = (REPO / "pyproject.toml").read_text()
    low, high = re.search(r'"jax>=([\d.]+),<([\d.]+)"', metadata).groups()
    assert _version(low) <= _version(jax.__version__) < _version(high)
    assert _version(low) == _version(CHECKED_ON[0]) and _version(CHECKED_ON[-1]) < _version(high)
    assert jaxlib.version.__version__ == jax.__version__  # the pins keep the two together
    assert _version(jax.__version__)[:3] == JAX_VERSION


def test_python_range_follows_jax():
    """jax 0.11 dropped Python 3.11: the pins let pip pick the release the interpreter allows."""
    metadata = (REPO / "pyproject.toml").read_text()
    assert re.search(r'requires-python = ">=3\.11,<3\.14"', metadata)
    if sys.version_info[:2] == (3, 11):
        assert JAX_VERSION < (0, 11)


def test_an_unlisted_or_missing_name_says_where_to_add_it():
    with pytest.raises(AttributeError, match=r"jax\._src\.core\.no_such_name is not among the private names .* "
                                             r"pxla_mlir/jaxbridge/jax_internals\.py"):
        getattr(core, "no_such_name")  # noqa: B009 (a constant name, hidden from the unlisted-names scan below)
    import types

    fake = types.ModuleType("jax._src.fake")
    table = PrivateNames(fake, "gone")
    assert table.missing() == ["jax._src.fake.gone"]
    with pytest.raises(AttributeError, match=rf"jax {re.escape(jax.__version__)} has no jax\._src\.fake\.gone .*"
                                             r"checked on jax 0\.10\.2"):
        _ = table.gone


def test_closed_jaxpr_is_jaxs_class_on_every_release():
    closed = jax.make_jaxpr(lambda x: x * 2)(1.0)
    assert isinstance(closed, core.ClosedJaxpr)
    rebuilt = core.ClosedJaxpr(closed.jaxpr, closed.consts)
    assert rebuilt.in_avals == closed.in_avals and str(rebuilt.jaxpr) == str(closed.jaxpr)


def test_patched_names_reach_jax_itself():
    from jax._src import dispatch

    from pxla_mlir.maps import jit_devices  # noqa: F401  (patches jax's walk on import)

    assert dispatch.get_intermediate_shardings is jax_internals.dispatch.get_intermediate_shardings
    assert dispatch.get_intermediate_shardings.__module__ == "pxla_mlir.maps.jit_devices"


def _table_reads(path):
    """(table, name, line) for every ``table.name`` read in ``path`` whose table comes from jax_internals."""
    import ast

    tree = ast.parse(path.read_text(), str(path))
    tables = {}  # local name -> table name
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("jax_internals"):
            for alias in node.names:
                if isinstance(getattr(jax_internals, alias.name, None), PrivateNames):
                    tables[alias.asname or alias.name] = alias.name
    reads = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in tables:
            reads.append((tables[owner.id], node.attr, node.lineno))
        elif (isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name)
              and owner.value.id == "jax_internals" and isinstance(getattr(jax_internals, owner.attr, None),
                                                                   PrivateNames)):
            reads.append((owner.attr, node.attr, node.lineno))
    return reads


@pytest.mark.slow
def test_every_private_name_read_in_the_code_base_is_listed():
    """A name read from a table but not listed fails only on the path that reads it; find them all here."""
    unlisted = []
    for path in sorted([*(REPO / "pxla_mlir").rglob("*.py"), *(REPO / "passes").rglob("*.py"),
                        *(REPO / "tests").rglob("*.py"), *(REPO / "bench").rglob("*.py")]):
        for table, name, line in _table_reads(path):
            methods = {"listed", "missing", "patch"}
            if name not in getattr(jax_internals, table).listed() | methods:
                unlisted.append(f"{path.relative_to(REPO)}:{line}: {table}.{name}")
    assert unlisted == []
