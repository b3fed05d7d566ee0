"""The documentation of any loaded pass or pipeline, built-in or a plugin's: its summary, description (its
docstring), options with types and defaults, and the plugin it came from, as Markdown (``docs/passes.md``,
``pxla-mlir passes --markdown``: what ``mlir-tblgen -gen-pass-doc`` writes for MLIR's passes) or as plain text for
a terminal (``pxla-mlir passes NAME``).

Docstrings are reST: ``Before::`` literal blocks, ````code````, and cross-reference roles (``:mod:``, ...). Markdown gets
fenced blocks and backquoted code; the terminal gets the blocks indented and the code in single backquotes.
"""

from __future__ import annotations

import inspect
import re
import sys

from pxla_mlir.mlir.pass_infra.options import option_fields, split_top_level
from pxla_mlir.mlir.pass_infra.pipeline import describe_options
from pxla_mlir.mlir.pass_infra.registry import REGISTRY

__all__ = ["pass_class", "description", "markdown", "text", "inline_markdown", "rst_to_markdown", "rst_to_text"]

_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj):`([^`]+)`")


def _role_target(match: re.Match) -> str:
    """A role's text as reST shows it: ``~a.b.C`` is ``C``, ``.x`` is ``x``."""
    target = match[1].split("<")[-1].rstrip(">").strip()
    if target.startswith("~"):
        target = target.rsplit(".", 1)[-1]
    return f"``{target.lstrip('.~!')}``"


def inline_markdown(text: str) -> str:
    """reST inline markup as Markdown: roles and double-backquoted code become single-backquoted code."""
    return re.sub(r"``([^`]+)``", r"`\1`", _ROLE.sub(_role_target, text))


def _literal_head(line: str) -> str | None:
    """The text before a literal block's ``::`` (``Before::`` is ``Before:``, a lone ``::`` nothing), or None."""
    stripped = line.rstrip()
    if not stripped.endswith("::") or stripped.lstrip().startswith(".."):
        return None
    if stripped.strip() == "::":
        return ""
    return stripped[:-3] if stripped.endswith(" ::") else stripped[:-1]


def _split_blocks(doc: str) -> list[tuple[str, list[str]]]:
    """The docstring as ("text", lines) and ("literal", lines) parts (a literal block's lines unindented)."""
    parts: list[tuple[str, list[str]]] = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        head = _literal_head(lines[i])
        text = lines[i] if head is None else head
        if parts and parts[-1][0] == "text":  # one part per run of text: code may span lines
            parts[-1][1].append(text)
        else:
            parts.append(("text", [text]))
        i += 1
        if head is None:
            continue
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
            block.append(lines[i][4:])
            i += 1
        while block and not block[-1].strip():
            block.pop()
        while block and not block[0].strip():
            block.pop(0)
        parts.append(("literal", block))
    return parts


def rst_to_markdown(doc: str) -> list[str]:
    """A docstring as Markdown lines: literal blocks fenced (```console for command lines, the docs' convention
    for commands that are shown, not run; else ```mlir)."""
    out: list[str] = []
    for kind, lines in _split_blocks(doc):
        if kind == "text":
            out += inline_markdown("\n".join(lines)).split("\n")
        else:
            lang = "console" if any(b.lstrip().startswith(("pxla-opt", "pxla-mlir")) for b in lines) else "mlir"
            out += ["", f"```{lang}", *lines, "```", ""]
    return out


def rst_to_text(doc: str) -> str:
    """A docstring as plain text for a terminal: literal blocks indented under their ``Before:`` line."""
    out: list[str] = []
    for kind, lines in _split_blocks(doc):
        if kind == "text":
            out += inline_markdown("\n".join(lines)).split("\n")
        else:
            out += ["", *(f"    {line}".rstrip() for line in lines), ""]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def pass_class(name: str):
    """The class of a loaded pass or pipeline (``KeyError`` for a name nothing registers)."""
    cls = REGISTRY.load(name)
    if cls is None:
        raise KeyError(name)
    return cls


def _docstring(name: str, cls: type) -> str:
    """What documents a pass: its module's docstring (a pass's file documents it; a plugin's, when it has
    one), else its class's; a pipeline's class docstring."""
    module_doc = inspect.getdoc(sys.modules[cls.__module__])
    if name in REGISTRY.passes or (name not in REGISTRY.pipelines and REGISTRY.origin(name) and module_doc):
        return module_doc or ""
    return inspect.getdoc(cls) or ""


def description(name: str) -> str:
    """The docstring after its ``ARGUMENT: summary`` line, which the summary says (a first paragraph of more
    lines is kept, without ``ARGUMENT:``)."""
    doc = _docstring(name, pass_class(name)).strip()
    if not doc.startswith(f"{name}:"):
        return doc
    first, _, rest = doc.partition("\n\n")
    if "\n" not in first:
        return rest.strip()
    first = first[len(name) + 1:].strip()
    return f"{first[:1].upper()}{first[1:]}\n\n{rest}".strip()


def _plugin(name: str) -> str | None:
    """The plugin a pass came from (a file, a module or an entry point), None for a built-in one."""
    return REGISTRY.source(name)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _options_table(cls: type) -> list[str]:
    infos = option_fields(cls)
    if not infos:
        return ["No options."]
    rows = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for i in infos:
        default = ",".join(map(str, i.default)) if isinstance(i.default, tuple) else i.default
        default = str(default).lower() if isinstance(default, bool) else default
        shown = f"`{default}`" if default != "" else "(none)"  # an empty code span renders as two backquotes
        rows.append(f"| `{i.name}` | {_cell(i.type_name())} | {shown} | {_cell(i.help)} |")
    return rows


def _where(name: str, cls: type) -> str:
    plugin = _plugin(name)
    if plugin is not None:
        return f" From the plugin `{plugin}` (class `{cls.__qualname__}`)."
    if name in REGISTRY.passes:
        return f" File: `passes/{cls.__module__.rsplit('.', 1)[1]}.py`."
    return ""


def _statistics(cls: type) -> list[str]:
    """The counters a pass reports under ``--mlir-pass-statistics`` (none for a pipeline)."""
    declared = cls.statistics() if hasattr(cls, "statistics") else []
    return [f"- `{s.name}`: {s.description}" for s in declared]


def markdown(name: str, level: int = 2) -> list[str]:
    """One pass's or pipeline's section: heading, summary and where it comes from, options table, description
    (a pipeline: description, options, then what it expands to)."""
    cls = pass_class(name)
    head = [f"{'#' * level} {name}", "", f"{cls.summary}.{_where(name, cls)}", ""]
    body = rst_to_markdown(description(name))
    if name not in REGISTRY.pipelines:
        counters = _statistics(cls)
        stats = ["Statistics (`pxla-opt --mlir-pass-statistics`):", "", *counters, ""] if counters else []
        return [*head, *_options_table(cls), "", *stats, *body]
    steps = split_top_level(cls().elements(), ",")
    return [*head, *body, "", *_options_table(cls), "",
            "With the default options it expands to (`pxla-opt --dump-pass-pipeline`):", "",
            "```text", "builtin.module(", *(f"  {s}," for s in steps[:-1]), f"  {steps[-1]})", "```"]


def text(name: str) -> str:
    """One pass's or pipeline's documentation for a terminal: its docstring as plain text, then its options
    (and the plugin it came from)."""
    cls = pass_class(name)
    doc = _docstring(name, cls)
    plugin = _plugin(name)
    lines = [rst_to_text(doc) if doc else cls.summary, ""]
    lines.append(f"From plugin {plugin}. Options:" if plugin else "Options:")
    lines += [f"  {line}" for line in describe_options(cls)] or ["  none"]
    counters = _statistics(cls)
    if counters:
        lines += ["Statistics (pxla-opt --mlir-pass-statistics):", *(f"  {c[2:].replace('`', '')}" for c in counters)]
    return "\n".join(lines)

