"""The documentation site builds offline with ``mkdocs build --strict`` (as
``make docs`` runs it): every page in the navigation, every link and anchor
found; it searches when opened from its files (Material's offline plugin), and
holds the quick starts, the API reference from the docstrings and the changelog.
Skipped where the docs extra (mkdocs, mkdocs-material, mkdocstrings) is not installed."""

import html
import json
import re
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason="the docs extra is not installed (make docs installs it)")
    site = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def text_of(page) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_site_builds_strict(site):
    for page in ("index.html", "quickstart.html", "guide.html", "porting.html", "cli.html", "passes.html",
                 "pxla-form.html", "api.html", "architecture.html", "contributing.html", "multiprocess.html",
                 "changelog.html"):
        assert (site / page).exists(), page


def test_search_works_from_the_files(site):
    """From file:// a browser fetches no JSON and starts no web worker: the offline plugin's script carries the
    index (Material's bundle loads search/search_index.js there), and the iframe-worker shim, vendored, runs the
    search worker; no page loads a script from the network."""
    script = (site / "search" / "search_index.js").read_text()
    assert script.startswith("var __index = ")
    index = json.loads(script.removeprefix("var __index = ").rstrip().rstrip(";"))
    locations = {doc["location"].split("#")[0] for doc in index["docs"]}
    assert {"index.html", "quickstart.html", "api.html", "changelog.html"} <= locations
    bundle = next((site / "assets" / "javascripts").glob("bundle.*.min.js")).read_text()
    assert 'location.protocol==="file:"?' in bundle and "search/search_index.js" in bundle
    assert (site / "assets" / "iframe-worker" / "shim.js").is_file()
    for page in (p for p in site.glob("*.html") if p.name != "404.html"):  # 404: a server's page, root-relative
        text = page.read_text()
        assert '<script src="assets/iframe-worker/shim.js"' in text, page.name
        assert not re.search(r"<script[^>]+src=\"(https?:)?//", text), f"{page.name} loads a script from the network"


def test_the_api_page_documents_every_export_from_its_docstring(site):
    import pxla_mlir
    import pxla_mlir.passes
    from pxla_mlir.pmaps.api import pmap

    text = text_of(site / "api.html")
    for name in [*pxla_mlir.__all__, *(f"passes.{n}" for n in pxla_mlir.passes.__all__)]:
        if name not in ("__version__", "distributed"):
            assert f"pxla_mlir.{name}\n" in text, name
    assert pmap.__doc__.split("\n")[0].replace("``", "") in text  # the docstring, rendered
    # the signature, with its types, one parameter a line (formatted by ruff, which the docs extra brings)
    assert "pmap(\n    fun: Callable | None = None,\n    axis_name: Hashable | None = None,\n" in text
    assert 'static_broadcasted_argnums: int | Sequence[int] = (),\n' in text and 'mode: str = "replica",' in text
    module_pass = text.rsplit("pxla_mlir.passes.ModulePass\n", 1)[1].split("pxla_mlir.passes.PassError\n")[0]
    for member in ("run(module: Operation) -> None", "error(\n", "warn(where: Where, message: str) -> None",
                   "remark(where: Where, message: str) -> None", "add_to(", "keep_main: bool = False"):
        assert member in module_pass, member
    assert "Bases: _" not in text  # no private base, shown without its members
    assert not re.search(r":(mod|class|meth|func|attr):[\w.~]", text), "a Sphinx role shown as it is"


def test_the_quick_starts_and_the_changelog_are_pages(site):
    quick = text_of(site / "quickstart.html")
    for title in ("Quick start a: port a jax.pmap loop", "Quick start c: a lit golden test"):
        assert title in quick
    changelog = (REPO / "CHANGELOG.md").read_text()
    first_entry = re.search(r"^\* (.+)$", changelog, re.M)[1].split("`")[0]
    assert first_entry in text_of(site / "changelog.html")
