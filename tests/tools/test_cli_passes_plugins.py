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
