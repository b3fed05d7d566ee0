"""pxla-mlir passes --load-pass-plugin: a plugin's passes listed with their source, and documented."""

import pytest
from plugin_helpers import TAG_PLUGIN, clean_registry, write  # noqa: F401 (a fixture)

from pxla_mlir.tools import cli

pytestmark = pytest.mark.usefixtures("clean_registry")


def test_listed_and_documented(tmp_path, capsys):
    plugin = write(tmp_path, "tag.py", TAG_PLUGIN)
    assert cli.main(["passes", "--load-pass-plugin", plugin]) == 0
    out = capsys.readouterr().out
    assert "pxla-expand-shard " in out
    assert f"tag-functions                      Tag every function with plugin.tag [plugin {plugin}]" in out
    assert cli.main(["passes", f"--load-pass-plugin={plugin}", "tag-functions"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("A pass that tags functions.")  # the plugin module's docstring
    assert f"From plugin {plugin}. Options:\n  n=<int> (default 1): the tag" in out


def test_a_plugin_that_does_not_load(tmp_path, capsys):
    assert cli.main(["passes", f"--load-pass-plugin={tmp_path / 'nope.py'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pxla-mlir: error: pass plugin ") and "does not exist" in err and err.count("\n") == 1


#: A plugin documented in reST, as the built-in passes are.
REST_DOC = '''"""tag-functions: tags every function with ``plugin.tag``, the count
:mod:`my_plugins.tags` keeps; see :class:`~my_plugins.tags.Tag`.

Before (``-tag-functions='n=2'``)::

    func.func @f()

After::

    func.func @f() attributes {plugin.tag = 2 : i64}
"""'''
REST_PLUGIN = TAG_PLUGIN.replace('"""A pass that tags functions."""', REST_DOC)


def test_a_plugins_docs_as_markdown(tmp_path, capsys):
    plugin = write(tmp_path, "tag.py", REST_PLUGIN)
    assert cli.main(["passes", "--markdown", f"--load-pass-plugin={plugin}", "tag-functions"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## tag-functions\n\nTag every function with plugin.tag. From the plugin "
                          f"`{plugin}` (class `TagFunctions`).\n\n"
                          "| option | type | default | meaning |\n|---|---|---|---|\n| `n` | int | `1` | the tag |\n\n"
                          "Tags every function with `plugin.tag`, the count\n`my_plugins.tags` keeps; see `Tag`.\n\n"
                          "Before (`-tag-functions='n=2'`):\n\n```mlir\nfunc.func @f()\n```\n"), out
    assert "``" not in out.replace("```", "") and ":mod:" not in out and "::" not in out


def test_every_loaded_pass_as_markdown(tmp_path, capsys):
    plugin = write(tmp_path, "tag.py", TAG_PLUGIN)
    assert cli.main(["passes", "--markdown", f"--load-pass-plugin={plugin}"]) == 0
    out = capsys.readouterr().out
    assert "\n## pxla-expand-shard\n" in out and "\n## pxla-pmap-pipeline\n" in out and "\n## tag-functions\n" in out


def test_a_plugins_docs_on_a_terminal_are_text_not_rest(tmp_path, capsys):
    plugin = write(tmp_path, "tag.py", REST_PLUGIN)
    assert cli.main(["passes", f"--load-pass-plugin={plugin}", "tag-functions"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tag-functions: tags every function with `plugin.tag`, the count\n`my_plugins.tags` keeps; "
                          "see `Tag`.\n\nBefore (`-tag-functions='n=2'`):\n\n    func.func @f()\n\nAfter:\n\n"), out
    assert "``" not in out and ":mod:" not in out and ":class:" not in out and "::" not in out


@pytest.mark.parametrize("name", ["pxla-expand-shard", "pxla-verify-handoff", "pxla-pmap-pipeline"])
def test_a_built_in_pass_on_a_terminal_is_text_with_its_options(name, capsys):
    assert cli.main(["passes", name]) == 0
    out = capsys.readouterr().out
    assert "``" not in out and not any(role in out for role in (":mod:`", ":func:`", ":class:`")), out
    assert not any(line.rstrip().endswith("::") for line in out.splitlines()), out
    assert "\nOptions:\n" in out
