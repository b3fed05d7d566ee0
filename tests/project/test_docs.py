"""The generated pages of docs/ are current (``make docs-gen``): docs/passes.md
from the passes' docstrings and options, docs/cli.md from the command-line
parsers, docs/pxla-form.md from pxla_mlir/mlir/core/pxla_attrs.py,
docs/quickstart.md from the README; every pass documents its IR, and the API
page names every export."""

import importlib
import re

from conftest import REPO

from pxla_mlir.mlir.cli.docs import passes_markdown, pxla_form_markdown
from pxla_mlir.mlir.core import pxla_attrs
from pxla_mlir.mlir.pass_infra import registry
from pxla_mlir.tools.cli import build_parser
from pxla_mlir.tools.cli_reference import cli_markdown
from pxla_mlir.tools.quickstart_page import quickstart_markdown


def test_passes_md_is_current():
    current = (REPO / "docs" / "passes.md").read_text()
    assert current == passes_markdown(), "docs/passes.md is stale: run `make docs-gen`"


def test_cli_md_is_current():
    current = (REPO / "docs" / "cli.md").read_text()
    assert current == cli_markdown(), "docs/cli.md is stale: run `make docs-gen`"


def test_pxla_form_md_is_current():
    current = (REPO / "docs" / "pxla-form.md").read_text()
    assert current == pxla_form_markdown(), "docs/pxla-form.md is stale: run `make docs-gen`"


def test_quickstart_md_is_current():
    current = (REPO / "docs" / "quickstart.md").read_text()
    assert current == quickstart_markdown((REPO / "README.md").read_text()), \
        "docs/quickstart.md is stale: run `make docs-gen`"


def test_api_md_names_every_export():
    import pxla_mlir

    text = (REPO / "docs" / "api.md").read_text()
    for name in pxla_mlir.__all__:
        if name not in ("__version__", "distributed"):
            assert f'heading: "pxla_mlir.{name}"' in text, f"docs/api.md does not document pxla_mlir.{name}"
    for target in re.findall(r"^::: (\S+)$", text, re.M):
        module, _, attr = target.rpartition(".")
        assert hasattr(importlib.import_module(module), attr), f"docs/api.md: no {target}"


def test_the_site_names_its_address_and_repository():
    import tomllib

    config = dict(re.findall(r"^(site_url|repo_url|repo_name): (\S+)$", (REPO / "mkdocs.yml").read_text(), re.M))
    source = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]["Source"]
    assert config.get("repo_url") == source and source.endswith("/" + config.get("repo_name", "?"))
    assert config.get("site_url", "").startswith("https://") and config["site_url"].endswith("/")


def test_cli_md_documents_every_subcommand_and_flag():
    text = cli_markdown()
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    for name, child in sub.choices.items():
        section = text.split(f"\n### pxla-mlir {name}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
        for action in child._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in section, f"docs/cli.md: pxla-mlir {name} does not list {flag}"


def test_pxla_form_md_names_every_attribute_and_placeholder():
    text = pxla_form_markdown()
    for name in ("MESH", "DIMS", "TILE_DIMS", "SHARDING_SPEC", "MANUAL_AXES", "SHARD", "UNSHARD", "FULL_TO_SHARD",
                 "SHARD_TO_FULL", "SHARDING_CONSTRAINT", "AXIS", "AXIS_SIZE", "STRIDE", "AXIS_NAME"):
        value = getattr(pxla_attrs, name)
        assert text.count(value) >= 2, f"docs/pxla-form.md: {value} has no section beside its row"


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
