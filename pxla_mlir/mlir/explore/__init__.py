"""``pxla-mlir explore``: a whole lowering as one self-contained HTML page.

    html = explore_html(lowered)                    # every stage, collectives, shardings
    html = explore_html(lowered, compare=other)     # two lowerings side by side
    lowered.explore("page.html")                    # the same, written to a file

:mod:`.model` gathers the data (jax-free), :mod:`.render` writes the HTML
with the CSS and JS of this folder inlined (no network, works from file://).
"""

from __future__ import annotations

import html as _html

from pxla_mlir.mlir.explore.model import Comparison, Page, build_page, compare as compare_pages
from pxla_mlir.mlir.explore.render import render, render_comparison

__all__ = ["Page", "Comparison", "build_page", "compare_pages", "render", "render_comparison", "explore_html",
           "notebook_html"]


def explore_html(lowered, *, compare=None, title: str | None = None, labels: tuple[str, str] = ("A", "B"),
                 compile: bool = True) -> str:
    """The page of ``lowered``; with ``compare`` (another Lowered), the two side by side."""
    page = build_page(lowered, title=title, compile=compile)
    if compare is None:
        return render(page)
    other = build_page(compare, compile=compile)
    return render_comparison(compare_pages(page, other, *labels))


def notebook_html(lowered) -> str:
    """The page in an iframe, so its CSS and JS cannot touch the notebook's."""
    page = explore_html(lowered)
    return (f'<iframe srcdoc="{_html.escape(page, quote=True)}" style="width:100%;height:720px;'
            f'border:1px solid #ccc" sandbox="allow-scripts"></iframe>')
