"""pxla-opt --load-pass-plugin: a plugin's passes as flags, in -p, in --list-passes and --help, in reproducers;
and a bad plugin or a failing plugin pass: one clear error, exit 2 or 1, the input untouched."""

import subprocess
import sys

import pytest
from plugin_helpers import BAD_PASSES, MODULE, TAG_PLUGIN, clean_registry, write  # noqa: F401 (a fixture)

from pxla_mlir.mlir.cli import pxla_opt

pytestmark = pytest.mark.usefixtures("clean_registry")


@pytest.fixture
def files(tmp_path):
    return write(tmp_path, "tag.py", TAG_PLUGIN), write(tmp_path, "in.mlir", MODULE)


@pytest.mark.parametrize("form", ["=", " "])
def test_a_plugin_pass_as_a_flag_with_options(files, capsys, form):
    plugin, module = files
    load = [f"--load-pass-plugin={plugin}"] if form == "=" else ["-load-pass-plugin", plugin]
    assert pxla_opt.main([module, *load, "-tag-functions=n=2"]) == 0
    assert "plugin.tag = 2 : i64" in capsys.readouterr().out
    assert pxla_opt.main([module, *load, "-tag-functions"]) == 0
    assert "plugin.tag = 1 : i64" in capsys.readouterr().out
    assert pxla_opt.main([module, *load, "-p", "builtin.module(tag-functions{n=5},canonicalize)"]) == 0
    assert "plugin.tag = 5 : i64" in capsys.readouterr().out


def test_listed_with_its_source_helped_and_suggested(files, capsys):
    plugin, module = files
    assert pxla_opt.main([f"--load-pass-plugin={plugin}", "--list-passes"]) == 0
    out = capsys.readouterr().out
    assert f"tag-functions                      Tag every function with plugin.tag [plugin {plugin}]" in out
    assert "n=<int> (default 1): the tag" in out
    with pytest.raises(SystemExit):
        pxla_opt.main([f"--load-pass-plugin={plugin}", "--help"])
    assert "[plugin " in capsys.readouterr().out
    assert pxla_opt.main([module, f"--load-pass-plugin={plugin}", "-tag-function"]) == 2
    assert "did you mean '-tag-functions'?" in capsys.readouterr().err
    assert pxla_opt.main([module, f"--load-pass-plugin={plugin}", "-p", "builtin.module(tag-functionz)"]) == 2
    assert "did you mean 'tag-functions'?" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--load-pass-plugin=missing.py"], "pass plugin 'missing.py' does not exist"),
    (["--load-pass-plugin=no_such_module_here"], "no module named 'no_such_module_here'"),
    (["--load-pass-plugin="], "--load-pass-plugin= needs a plugin"),
    (["-load-pass-plugin"], "argument -load-pass-plugin: expected a plugin"),
    (["-tag-functions"], "unrecognized arguments: -tag-functions"),  # not loaded: not a flag
])
def test_usage_mistakes_exit_2(files, capsys, argv, fragment):
    _, module = files
    assert pxla_opt.main([module, *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err and err.startswith("pxla-opt: error: ")


def test_bad_options_and_a_broken_plugin_exit_2(files, tmp_path, capsys):
    plugin, module = files
    assert pxla_opt.main([module, f"--load-pass-plugin={plugin}", "-tag-functions=n=x"]) == 2
    assert f"option 'n' expects an integer, got 'x' (plugin {plugin})" in capsys.readouterr().err
    broken = write(tmp_path, "broken.py", "import dataclasses\nraise KeyError('k')\n")
    assert pxla_opt.main([module, f"--load-pass-plugin={broken}", "-cse"]) == 2
    assert f"pass plugin '{broken}' does not import: KeyError: 'k' at {broken}:2" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "fragment"), [
    ("plugin-raises", "internal error in plugin-raises (plugin "),
    ("plugin-breaks-ir", "plugin-breaks-ir (plugin "),
    ("plugin-deletes-main", "removed the public function @main"),
])
def test_failing_plugin_passes_exit_1_and_leave_the_input(tmp_path, capsys, name, fragment):
    plugin = write(tmp_path, "bad_passes.py", BAD_PASSES)
    module = write(tmp_path, "in.mlir", MODULE)
    repro = tmp_path / "repro.mlir"
    argv = [module, f"--load-pass-plugin={plugin}", f"-{name}", f"--mlir-pass-pipeline-crash-reproducer={repro}"]
    assert pxla_opt.main(argv) == 1
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err
    assert (tmp_path / "in.mlir").read_text() == MODULE
    # The reproducer records the plugin: a fresh registry replays it to the same error.
    assert f'pxla_plugins: "[\\22{plugin}\\22]"' in repro.read_text()
    from pxla_mlir.mlir.pass_infra.registry import REGISTRY

    REGISTRY.forget()
    assert pxla_opt.main(["--run-reproducer", str(repro)]) == 1
    assert fragment in capsys.readouterr().err


def test_a_reproducer_whose_plugin_is_gone(tmp_path, capsys):
    plugin = write(tmp_path, "bad_passes.py", BAD_PASSES)
    module = write(tmp_path, "in.mlir", MODULE)
    repro = tmp_path / "repro.mlir"
    assert pxla_opt.main([module, f"--load-pass-plugin={plugin}", "-plugin-raises",
                          f"--mlir-pass-pipeline-crash-reproducer={repro}"]) == 1
    capsys.readouterr()
    (tmp_path / "bad_passes.py").unlink()
    from pxla_mlir.mlir.pass_infra.registry import REGISTRY

    REGISTRY.forget()
    assert pxla_opt.main(["--run-reproducer", str(repro)]) == 2
    assert f"records the pass plugin '{plugin}', which does not load" in capsys.readouterr().err


@pytest.mark.subprocess
def test_the_installed_command(files):
    plugin, module = files
    proc = subprocess.run([sys.executable, "-m", "pxla_mlir.mlir.cli.pxla_opt", module,
                           f"--load-pass-plugin={plugin}", "-tag-functions=n=3"], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"plugin.tag = 3 : i64" in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "pxla_mlir.mlir.cli.pxla_opt", module,
                          "--load-pass-plugin", plugin + "x"], capture_output=True, timeout=300)
    assert bad.returncode == 2 and b"Traceback" not in bad.stderr and b"does not exist" in bad.stderr
