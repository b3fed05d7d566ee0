"""docs/quickstart.md: the README's quick starts as a page of the documentation site.

The README stays their one source (its tests run them as a newcomer does); this
page is cut from it, with its links rewritten for the site's folder.

    python -m pxla_mlir.tools.quickstart_page README.md > docs/quickstart.md   # make docs-gen
"""

from __future__ import annotations

import re
import sys

__all__ = ["quickstart_markdown"]

_QUICK_START = re.compile(r"^## Quick start [a-z]: .+$", re.M)
_LINK = re.compile(r"\]\((?P<target>[^)]+)\)")

PREFACE = """\
# Quick starts

Three ways in: port a `jax.pmap` loop, emit, diff and run a file with the
command line, and pin a lowering in a lit test. They run wherever pxla_mlir is
installed; in a checkout, `make demo` installs it into `.venv`: activate that
first (`source .venv/bin/activate`).

This page is the README's quick starts, cut from it by `make docs-gen`
(`tests/project/test_docs.py` fails when it is stale): edit them in the README.
"""


class QuickstartError(Exception):
    """The README cannot give the page: what, where and how to fix it."""


def _site_link(match: re.Match[str]) -> str:
    target = match["target"]
    if target.startswith(("http://", "https://", "#")):
        return match[0]
    if target.startswith("docs/"):
        return f"]({target.removeprefix('docs/')})"
    raise QuickstartError(f"README.md: the quick starts link to {target!r}, which the site does not have: "
                          f"link to a page under docs/ or to a full URL")


def quickstart_markdown(readme: str) -> str:
    """The page, from the README's text: its ``## Quick start x: ...`` sections, in order, up to the next ``##``."""
    starts = list(_QUICK_START.finditer(readme))
    if not starts:
        raise QuickstartError("README.md has no '## Quick start a: ...' section: the page cuts those sections out")
    end = readme.find("\n## ", starts[-1].end())
    body = readme[starts[0].start():end if end >= 0 else len(readme)].strip("\n")
    return f"{PREFACE}\n{_LINK.sub(_site_link, body)}\n"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m pxla_mlir.tools.quickstart_page README.md > docs/quickstart.md")
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            sys.stdout.write(quickstart_markdown(f.read()))
    except (OSError, QuickstartError) as e:
        sys.exit(f"quickstart_page: {e}")
