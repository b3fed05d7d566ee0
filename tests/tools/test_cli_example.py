"""pxla-mlir example NAME -o DIR: a DIR it cannot copy into is one line with the reason, never 'None'."""

from __future__ import annotations

import errno
import os
import shutil

import pytest
from conftest import REPO

from pxla_mlir.tools import cli, cmd_example


@pytest.fixture
def installed(tmp_path, monkeypatch) -> cmd_example.Example:
    """train_step installed in a folder of its own, so no test can touch the repository's examples."""
    folder = tmp_path / "site-packages" / "pxla_mlir" / "examples"
    folder.mkdir(parents=True)
    shutil.copyfile(REPO / "examples" / "train_step.py", folder / "train_step.py")
    example = cmd_example.Example("train_step", folder / "train_step.py", "train_step")
    monkeypatch.setattr(cmd_example, "examples", lambda: {"train_step": example})
    return example


def _error(capsys, *argv) -> str:
    assert cli.main(["example", "train_step", *map(str, argv)]) == 2
    captured = capsys.readouterr()
    assert not captured.out and captured.err.startswith("pxla-mlir: error: ") and captured.err.count("\n") == 1
    assert "None" not in captured.err and "PXLA_DEBUG" not in captured.err
    return captured.err.rstrip("\n")


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_the_examples_own_folder_is_refused(capsys, installed, force):
    before = installed.path.read_bytes()
    err = _error(capsys, "-o", installed.path.parent, *force)
    assert err == (f"pxla-mlir: error: -o {installed.path.parent} is where the example is installed: {installed.path} "
                   f"is the example itself; give another directory with -o DIR (pxla-mlir example train_step --path "
                   f"prints where it is)")
    assert installed.path.read_bytes() == before


def test_a_link_to_the_examples_own_folder_is_refused(capsys, installed, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(installed.path.parent, target_is_directory=True)
    assert f"-o {link} is where the example is installed: {link / 'train_step.py'} is the example itself" in \
        _error(capsys, "-o", link)


def test_the_example_file_itself_is_not_a_directory(capsys, installed):
    assert _error(capsys, "-o", installed.path) == (
        f"pxla-mlir: error: -o {installed.path} is a file (the installed example itself), not a directory; give the "
        f"directory to copy the example into (made if missing)")


def test_another_file_is_not_a_directory(capsys, installed, tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    assert f"-o {tmp_path / 'notes.txt'} is a file, not a directory" in _error(capsys, "-o", tmp_path / "notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_a_directory_named_as_the_example_is_refused(capsys, installed, tmp_path):
    (tmp_path / "out" / "train_step.py").mkdir(parents=True)
    err = _error(capsys, "-o", tmp_path / "out")
    assert err.endswith(f"cannot copy the example to {tmp_path / 'out' / 'train_step.py'}: it is a directory; give "
                        f"another directory with -o DIR")


def test_a_folder_under_a_file_gives_the_systems_reason(capsys, installed, tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    target = tmp_path / "notes.txt" / "sub" / "train_step.py"
    assert _error(capsys, "-o", tmp_path / "notes.txt" / "sub") == (
        f"pxla-mlir: error: cannot copy the example to {target}: {os.strerror(errno.ENOTDIR)}; give a writable directory with "
        f"-o DIR")


def test_an_os_error_without_strerror_gives_its_message(capsys, installed, tmp_path, monkeypatch):
    def refuse(source, target):
        raise OSError(f"disk quota exceeded writing {target}")

    monkeypatch.setattr(cmd_example.shutil, "copyfile", refuse)
    target = tmp_path / "out" / "train_step.py"
    assert _error(capsys, "-o", tmp_path / "out") == (
        f"pxla-mlir: error: cannot copy the example to {target}: disk quota exceeded writing {target}; give a "
        f"writable directory with -o DIR")


def test_a_same_file_error_from_shutil_gives_its_message(capsys, installed, tmp_path, monkeypatch):
    copyfile = shutil.copyfile
    monkeypatch.setattr(cmd_example.shutil, "copyfile", lambda source, target: copyfile(source, source))
    err = _error(capsys, "-o", tmp_path / "out")
    assert err.endswith("are the same file; give a writable directory with -o DIR")


def test_a_fresh_directory_still_gets_the_copy(capsys, installed, tmp_path):
    assert cli.main(["example", "train_step", "-o", str(tmp_path / "new")]) == 0
    assert (tmp_path / "new" / "train_step.py").read_bytes() == installed.path.read_bytes()
    assert capsys.readouterr().out.startswith(f"wrote {tmp_path / 'new' / 'train_step.py'}\n")


def test_a_pass_plugin_is_copied_with_the_line_that_loads_it_and_has_no_run(capsys, tmp_path):
    assert cli.main(["example", "collective_bytes", "-o", str(tmp_path)]) == 0
    copied = tmp_path / "collective_bytes.py"
    assert copied.read_bytes() == (REPO / "examples" / "plugins" / "collective_bytes.py").read_bytes()
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"run it with: pxla-opt IN.mlir --load-pass-plugin={copied} -p 'builtin.module(collective-bytes)'")
    assert cli.main(["example", "unshard_as_all_gather", "--run"]) == 2
    err = capsys.readouterr().err
    assert "unshard_as_all_gather is a pass plugin: it runs inside pxla-opt on a module" in err
    assert "-p 'builtin.module(unshard-as-all-gather)'" in err and err.count("\n") == 1
