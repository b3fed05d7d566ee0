"""The pass and pipeline tables agree with the classes, docs and lit tests."""

import inspect
import sys

import pytest
from conftest import REPO

from pxla_mlir.mlir.pass_infra import ModulePass, NamedPipeline
from pxla_mlir.mlir.pass_infra.registry import PASSES, PIPELINES, REGISTRY

ALL = [*PASSES, *PIPELINES]


def test_tables_are_alphabetical_and_prefixed():
    for table in (PASSES, PIPELINES):
        assert list(table) == sorted(table)
        assert all(name.startswith("pxla-") for name in table)
    assert not set(PASSES) & set(PIPELINES)


@pytest.mark.parametrize("argument", ALL)
def test_entry_imports_and_matches(argument):
    cls = REGISTRY.load(argument)
    assert cls.argument == argument
    assert cls.summary and "\n" not in cls.summary
    kind = ModulePass if argument in PASSES else NamedPipeline
    assert issubclass(cls, kind)
    cls.from_options("")  # every option has a usable default


@pytest.mark.parametrize("argument", list(PASSES))
def test_pass_file_docs_and_lit_tests(argument):
    cls = REGISTRY.load(argument)
    module = sys.modules[cls.__module__]
    stem = argument.removeprefix("pxla-").replace("-", "_")
    assert module.__name__ == f"pxla_mlir.passes.{stem}", "one pass per file, named after the pass"
    doc = inspect.getdoc(module)
    assert doc.startswith(f"{argument}: ")
    assert "Before" in doc and "After" in doc and "pxla-opt" in doc, "docstring needs before/after IR and an example"
    lit_dir = REPO / "test" / "lit" / "passes"
    assert (lit_dir / f"{stem}.mlir").exists()
    errors = lit_dir / f"{stem}_errors.mlir"
    assert errors.exists() and "--verify-diagnostics" in errors.read_text()


@pytest.mark.parametrize("argument", list(PIPELINES))
def test_pipeline_has_lit_test(argument):
    stem = argument.removeprefix("pxla-").replace("-", "_")
    assert (REPO / "test" / "lit" / "pipelines" / f"{stem}.mlir").exists()


def test_every_pass_file_is_registered():
    files = {p.stem for p in (REPO / "passes").glob("*.py") if not p.stem.startswith("_")}
    registered = {a.removeprefix("pxla-").replace("-", "_") for a in PASSES}
    assert files == registered
