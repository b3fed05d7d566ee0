"""The README and docs/ stay true to the code: the architecture page describes
every folder of the package, the user guide's environment table every variable the package
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


def _package_folders() -> set[str]:
    """Every folder that holds modules of the package: pxla_mlir/ and those under it, the top-level passes/."""
    modules = [*(REPO / "pxla_mlir").rglob("*.py"), *(REPO / "passes").glob("*.py")]
    return {p.parent.relative_to(REPO).as_posix() + "/" for p in modules}


def test_architecture_describes_every_folder_and_no_folder_that_is_gone():
    """The codemap goes by folder, not by module: a section per folder, each module it names in that folder."""
    sections, folders = _codemap_sections(), _package_folders()
    assert len(folders) > 10, folders
    missing, gone = sorted(folders - sections.keys()), sorted(sections.keys() - folders)
    assert not missing, f"docs/architecture.md's codemap has no section for {missing}"
    assert not gone, f"docs/architecture.md's codemap describes folders that are gone: {gone}"
    for folder, text in sections.items():
        for name in re.findall(r"(?<![\w/.-])(\w+\.py)\b", text):
            assert (REPO / folder / name).is_file(), f"docs/architecture.md: {folder} holds no {name}"
    outside = ARCHITECTURE.split("\n## Outside the package\n", 1)[1]
    named = re.findall(r"^\| `([^`]+/)`", outside, re.M)
    assert "examples/" in named and "tests/" in named, named
    assert all((REPO / folder).is_dir() for folder in named), named


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
