"""The README stays true to the code: its pass table is the registry's, its
layout names every module."""

import re

from conftest import REPO

from pxla_mlir.tools.docs import pass_table

README = (REPO / "README.md").read_text()


def test_pass_table_is_generated_from_the_registry():
    assert pass_table() in README, "regenerate the table with: python -m pxla_mlir.tools.docs"


def test_layout_names_every_module():
    layout = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    modules = [p for p in (REPO / "pxla_mlir").rglob("*.py") if p.name != "__init__.py"]
    assert modules
    for path in modules:
        rel = path.relative_to(REPO).as_posix()
        folder = rel.rsplit("/", 1)[0] + "/"
        assert rel in layout or (folder in layout and re.search(rf"\b{re.escape(path.name)}\b", layout)), \
            f"README's layout does not mention {rel}"
