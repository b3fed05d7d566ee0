"""A pass's docs from its reST docstring: Markdown for docs/passes.md and ``pxla-mlir passes --markdown``, plain
text for a terminal (``pxla-mlir passes NAME``); tests/tools/test_cli_passes_plugins.py runs both on a plugin."""

from pxla_mlir.mlir.cli import pass_docs
from pxla_mlir.mlir.pass_infra.registry import REGISTRY

DOC = """x-pass: one line.

Reads ``pxla.axis`` (see :mod:`pxla_mlir.mlir.core.pxla_attrs` and
:func:`~pxla_mlir.mlir.core.ir_utils.find_function`), with ``a >
1`` across a line. Before::

    %0 = mhlo.negate %x

After (``mode=partition``)::

    %1 = mhlo.add %x, %x

Example ::

    pxla-opt in.mlir -p 'builtin.module(x-pass)'
"""


def test_rest_as_terminal_text():
    text = pass_docs.rst_to_text(DOC)
    assert text == ("x-pass: one line.\n\nReads `pxla.axis` (see `pxla_mlir.mlir.core.pxla_attrs` and\n"
                    "`find_function`), with `a >\n1` across a line. Before:\n\n    %0 = mhlo.negate %x\n\n"
                    "After (`mode=partition`):\n\n    %1 = mhlo.add %x, %x\n\nExample\n\n"
                    "    pxla-opt in.mlir -p 'builtin.module(x-pass)'")


def test_rest_as_markdown():
    text = "\n".join(pass_docs.rst_to_markdown(DOC))
    assert "Before:\n\n```mlir\n%0 = mhlo.negate %x\n```\n" in text
    assert "Example\n\n```console\npxla-opt in.mlir" in text  # commands are shown, not run: the docs' convention
    assert "``" not in text.replace("```", "") and ":mod:" not in text and "::" not in text


def test_every_built_in_pass_and_pipeline_has_docs_without_rest():
    for name in [*REGISTRY.passes, *REGISTRY.pipelines]:
        text = pass_docs.text(name)
        page = "\n".join(pass_docs.markdown(name))
        for shown in (text, page.replace("```", "")):
            assert "``" not in shown and ":mod:`" not in shown and ":func:`" not in shown, name
        assert page.startswith(f"## {name}\n\n{REGISTRY.load(name).summary}.")
