"""docs/passes.md is generated from the passes' docstrings and options
(``make docs``) and must be current; every pass documents its IR."""

from conftest import REPO

from pxla_mlir.mlir.cli.docs import passes_markdown
from pxla_mlir.mlir.pass_infra import registry


def test_passes_md_is_current():
    current = (REPO / "docs" / "passes.md").read_text()
    assert current == passes_markdown(), "docs/passes.md is stale: run `make docs`"


def test_every_pass_and_pipeline_has_a_section_with_its_options():
    text = passes_markdown()
    for name in [*registry.PASSES, *registry.PIPELINES]:
        section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert registry.load(name).summary in section
        for info in registry.load(name).options():
            assert f"| `{info.name}` |" in section, f"{name} documents no option {info.name}"
    for name in registry.PASSES:
        section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert "```mlir" in section, f"{name}'s docstring shows no IR"
