"""The README and docs/ stay true to the code: the architecture page names
every module, the user guide's environment table every variable the package
reads, and the README keeps the project's rules (short; the two commands that
work on a fresh machine first; its links lead to pages that exist)."""

import re

from conftest import REPO

README = (REPO / "README.md").read_text()
ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text()
GUIDE = (REPO / "docs" / "guide.md").read_text()


def _codemap_sections() -> dict[str, str]:
    """Each ``### `folder/` ...`` section of the architecture page's codemap, by folder."""
    codemap = ARCHITECTURE.split("\n## Codemap\n", 1)[1].split("\n## ", 1)[0]
    sections = re.split(r"\n### ", codemap)[1:]
    return {re.match(r"`([^`]+)`", s)[1]: s for s in sections}


def test_architecture_names_every_module_in_its_folders_codemap():
    sections = _codemap_sections()
    modules = [p for p in [*(REPO / "pxla_mlir").rglob("*.py"), *(REPO / "passes").glob("*.py")]
               if p.name != "__init__.py"]
    assert len(modules) > 100
    for path in modules:
        folder = path.parent.relative_to(REPO).as_posix() + "/"
        assert folder in sections, f"docs/architecture.md has no codemap section for {folder}"
        assert re.search(rf"(?<![\w/]){re.escape(path.name)}\b", sections[folder]), \
            f"docs/architecture.md's codemap of {folder} does not name {path.name}"


def test_architecture_names_every_floor():
    for floor in ("pxla_mlir/mlir/", "pxla_mlir/jaxbridge/", "pxla_mlir/distributed/", "pxla_mlir/runtime/",
                  "pxla_mlir/maps/", "pxla_mlir/pmaps/", "pxla_mlir/xmaps/", "pxla_mlir/jit.py", "pxla_mlir/tools/",
                  "passes/"):
        assert f"`{floor}" in ARCHITECTURE.split("\n## Codemap\n", 1)[0], floor


def test_environment_table_names_every_variable_the_package_reads():
    table = GUIDE.split("## Environment variables and jax's flags", 1)[1].split("\n## ", 1)[0]
    sources = [p.read_text() for p in [*(REPO / "pxla_mlir").rglob("*.py"), *(REPO / "passes").glob("*.py")]]
    read = {m for text in sources for m in re.findall(r"\b(PXLA_[A-Z_]*[A-Z])\b", text)}
    read -= {"PXLA_MP_RESULT"}  # a marker in a process's output, not a variable
    assert {"PXLA_DEBUG", "PXLA_MLIR_CACHE_DIR", "PXLA_REPRO_DIR"} <= read
    for name in sorted(read):
        assert f"`{name}" in table, f"docs/guide.md's environment table does not list {name}"


def test_readme_is_short_and_starts_with_the_two_commands():
    assert len(README.splitlines()) <= 250, "the README stays short: move details into docs/"
    first = README.split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in first.splitlines()[1:] if line.strip()]
    assert commands == ["make demo", "make test"], commands


def test_links_lead_to_pages_that_exist():
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(REPO)} links to a missing {target}"


def test_every_docs_page_is_in_the_site_navigation():
    nav = (REPO / "mkdocs.yml").read_text()
    for page in (REPO / "docs").glob("*.md"):
        assert page.name in nav, f"mkdocs.yml's nav does not list docs/{page.name}"
