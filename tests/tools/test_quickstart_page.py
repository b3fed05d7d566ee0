"""docs/quickstart.md is cut from the README: its quick start sections, in order, with links that work in the site."""

import pytest

from pxla_mlir.tools.quickstart_page import QuickstartError, quickstart_markdown

README = """\
# project

```console
make demo
```

## Quick start a: one

See the [guide](docs/guide.md#golden-files), [lit](https://llvm.org/) and [below](#quick-start-b-two).

## Quick start b: two

```sh
echo b
```

## Documentation

* [Guide](docs/guide.md)
"""


def test_the_page_holds_the_quick_starts_and_nothing_else():
    page = quickstart_markdown(README)
    assert page.startswith("# Quick starts\n")
    body = page.split("\n## ", 1)[1]
    assert body.startswith("Quick start a: one\n") and "## Quick start b: two\n\n```sh\necho b\n```\n" in page
    assert "make demo" not in body and "Documentation" not in page and page.endswith("```\n")


def test_links_into_docs_lose_their_folder_and_others_stay():
    page = quickstart_markdown(README)
    assert "[guide](guide.md#golden-files)" in page
    assert "[lit](https://llvm.org/)" in page and "[below](#quick-start-b-two)" in page


@pytest.mark.parametrize("readme, said", [
    ("# project\n\n## Install\n", "README.md has no '## Quick start a: ...' section"),
    ("## Quick start a: one\n\nSee [the license](LICENSE).\n",
     "README.md: the quick starts link to 'LICENSE', which the site does not have: link to a page under docs/"),
])
def test_what_the_page_cannot_hold_is_an_error_that_says_how_to_fix_it(readme, said):
    with pytest.raises(QuickstartError, match="^" + said.replace("(", r"\(").replace(")", r"\)")):
        quickstart_markdown(readme)
