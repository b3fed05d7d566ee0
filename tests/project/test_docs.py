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
from pxla_mlir.mlir.pass_infra.registry import PASSES, PIPELINES, REGISTRY
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


API = REPO / "docs" / "api.md"
#: A Sphinx cross-reference role, which mkdocstrings shows as it is (the API page's docstrings use Markdown).
SPHINX_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj|exc|ref):`[^`]*`")


def _api_entries() -> dict[str, str]:
    """The API page's entries: the name each is shown as -> the object ``::: PATH`` renders."""
    entries = {}
    for m in re.finditer(r"^::: (\S+)\n((?:    .*\n)*)", API.read_text(), re.M):
        heading = re.search(r'heading: "([^"]+)"', m[2])
        entries[heading[1] if heading else m[1]] = m[1]
    return entries


def _anchors() -> set[str]:
    return set(re.findall(r"^\[\]\(\)\{#([\w.]+)\}$", API.read_text(), re.M))


def _public_names() -> list[str]:
    import pxla_mlir
    import pxla_mlir.passes

    return [f"pxla_mlir.{n}" for n in pxla_mlir.__all__] + [f"pxla_mlir.passes.{n}" for n in pxla_mlir.passes.__all__]


def _public(name: str):
    """What a public name is, as ``pxla_mlir``'s and ``pxla_mlir.passes``' lazy tables load it (``pxla_mlir.jit``
    is the function, not the module of that name)."""
    import pxla_mlir
    import pxla_mlir.passes

    if name.startswith("pxla_mlir.passes."):
        attr = name.rpartition(".")[2]
        return getattr(pxla_mlir.passes, attr)  # its lazy __getattr__: a name or a module
    module, attr = pxla_mlir._LAZY[name.removeprefix("pxla_mlir.")]
    return getattr(importlib.import_module(module), attr) if attr else importlib.import_module(module)


def _resolve(path: str):
    """The object a dotted path names: its longest importable module prefix, then attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def _shown_docstrings(obj) -> list[tuple[str, str]]:
    """(member, docstring) of what the page shows of ``obj``: its docstring, and for a class its public members
    defined in the package, inherited ones included."""
    found = [("", obj.__doc__ or "")]
    if isinstance(obj, type):
        seen = set()
        for klass in obj.__mro__:
            if not klass.__module__.startswith("pxla_mlir"):
                continue
            for name, member in vars(klass).items():
                if name.startswith("_") or name in seen:
                    continue
                seen.add(name)
                member = getattr(member, "fget", None) or getattr(member, "__func__", None) or member
                if callable(member) and member.__doc__:
                    found.append((f".{name}", member.__doc__))
    return found


def test_api_page_documents_every_public_name():
    """Every name pxla_mlir and pxla_mlir.passes export has an entry (``::: PATH``, shown under that name) of the
    very object the name is; an entry shown under another name than its path has an anchor of that name, so
    that cross-references to it resolve."""
    text, entries, anchors = API.read_text(), _api_entries(), _anchors()
    for name in _public_names():
        if name == "pxla_mlir.__version__":
            assert "`pxla_mlir.__version__`" in text
        elif name == "pxla_mlir.distributed":  # a module: the page's section on it
            assert name in anchors, "docs/api.md has no anchor [](){#pxla_mlir.distributed}"
        else:
            assert name in entries, f"docs/api.md does not document {name}"
            assert _resolve(entries[name]) is _public(name), f"docs/api.md: {name} renders {entries[name]}"
    for shown, path in entries.items():
        assert shown == path or shown in anchors, f"docs/api.md: {path}, shown as {shown}, needs [](){{#{shown}}}"
        _resolve(path)


def test_public_docstrings_use_markdown_not_sphinx_roles():
    """mkdocstrings shows a Sphinx role (``:class:`x```) as it is: the docstrings the API page shows use
    Markdown, and every cross-reference in them (``[text][pxla_mlir.Name]``) names an entry, an anchor or a
    member of an entry of the page; relative links name a page of docs/."""
    entries, anchors = _api_entries(), _anchors()
    shown = {*entries, *anchors}
    bad = []
    for name, path in entries.items():
        for member, doc in _shown_docstrings(_resolve(path)):
            bad += [f"{name}{member}: {m[0]}" for m in SPHINX_ROLE.finditer(doc)]
            for ref in re.findall(r"\]\[([\w.]+)\]", doc):
                owner, _, attr = ref.rpartition(".")
                if ref not in shown and not (owner in entries and hasattr(_resolve(entries[owner]), attr)):
                    bad.append(f"{name}{member}: cross-reference to {ref}, which the page does not show")
            for page in re.findall(r"\]\(([\w-]+\.md)(?:#[\w-]+)?\)", doc):
                if not (REPO / "docs" / page).is_file():
                    bad.append(f"{name}{member}: link to docs/{page}, which does not exist")
    assert not bad, "docs/api.md's docstrings:\n" + "\n".join(bad)


def test_the_docs_extra_formats_signatures():
    """mkdocstrings prints a signature on one line unless black or ruff is installed: the docs extra brings ruff."""
    import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    assert any(re.match(r"(ruff|black)\b", req) for req in extra), extra
    assert "separate_signature: true" in (REPO / "mkdocs.yml").read_text()


def test_the_maps_signatures_show_their_pipelines_defaults():
    """pmap, xmap and jit write their pipeline options' defaults as values (the API page shows ``mode: str =
    "replica"``, not an expression): they must be the pipelines' own."""
    import inspect

    from pxla_mlir.mlir.pipelines import PmapPipeline, XmapPipeline

    pmap_defaults = {"mode": PmapPipeline.mode, "unshard": PmapPipeline.unshard,
                     "shardings": PmapPipeline.sharding_dialect}
    xmap_defaults = {"lowering": XmapPipeline.lowering, "shardings": XmapPipeline.sharding_dialect}
    for name, defaults in (("pmap", pmap_defaults), ("jit", pmap_defaults), ("xmap", xmap_defaults)):
        parameters = inspect.signature(_public(f"pxla_mlir.{name}")).parameters
        assert {k: parameters[k].default for k in defaults} == defaults, name


def test_the_api_checks_find_a_role_and_a_missing_name(monkeypatch):
    def documented():
        try:
            test_api_page_documents_every_public_name()
            test_public_docstrings_use_markdown_not_sphinx_roles()
        except AssertionError:
            return False
        return True

    assert documented()
    from pxla_mlir.stages import aot

    monkeypatch.setattr(aot.Compiled.as_text, "__doc__", "See :class:`Lowered`.")
    assert not documented()
    monkeypatch.undo()
    monkeypatch.setattr(aot.Compiled.as_text, "__doc__", "See [Lowered][pxla_mlir.Lowered.nothing].")
    assert not documented()
    monkeypatch.undo()
    monkeypatch.setattr(importlib.import_module("pxla_mlir"), "__all__", [*_public_names_of_pxla_mlir(), "Extra"])
    assert not documented()


def _public_names_of_pxla_mlir() -> list[str]:
    import pxla_mlir

    return list(pxla_mlir.__all__)


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
    for name in [*PASSES, *PIPELINES]:
        section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert REGISTRY.load(name).summary in section
        for info in REGISTRY.load(name).options():
            assert f"| `{info.name}` |" in section, f"{name} documents no option {info.name}"
    for name in PASSES:
        section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert "```mlir" in section, f"{name}'s docstring shows no IR"
