"""The README stays true to the code: its pass table is the registry's, its
layout names every module, its environment table every variable the package reads."""

import re

from conftest import REPO

from pxla_mlir.mlir.cli.docs import pass_table

README = (REPO / "README.md").read_text()


def test_pass_table_is_generated_from_the_registry():
    assert pass_table() in README, "regenerate the table with: python -m pxla_mlir.mlir.cli.docs"


def test_layout_names_every_module():
    layout = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    modules = [p for p in (REPO / "pxla_mlir").rglob("*.py") if p.name != "__init__.py"]
    assert modules
    for path in modules:
        rel = path.relative_to(REPO).as_posix()
        folder = rel.rsplit("/", 1)[0] + "/"
        assert rel in layout or (folder in layout and re.search(rf"\b{re.escape(path.name)}\b", layout)), \
            f"README's layout does not mention {rel}"


def test_environment_table_names_every_variable_the_package_reads():
    table = README.split("## Environment variables and jax's flags", 1)[1].split("\n## ", 1)[0]
    sources = [p.read_text() for p in [*(REPO / "pxla_mlir").rglob("*.py"), *(REPO / "passes").glob("*.py")]]
    read = {m for text in sources for m in re.findall(r"\b(PXLA_[A-Z_]*[A-Z])\b", text)}
    read -= {"PXLA_MP_RESULT"}  # a marker in a process's output, not a variable
    assert {"PXLA_DEBUG", "PXLA_MLIR_CACHE_DIR", "PXLA_REPRO_DIR"} <= read
    for name in sorted(read):
        assert f"`{name}" in table, f"README's environment table does not list {name}"
