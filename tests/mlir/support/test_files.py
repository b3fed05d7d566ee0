"""Files written whole or not at all (pxla_mlir/mlir/support/files.py), and no command of the package writes a
file another way."""

import ast
import os
import stat

import pytest
from conftest import REPO

from pxla_mlir.mlir.support.files import write_atomically


def test_written_whole_keeping_permissions_and_links(tmp_path):
    target = tmp_path / "out.mlir"
    write_atomically(target, "first\n")
    assert target.read_text() == "first\n"
    target.chmod(0o640)
    write_atomically(target, b"second\n")
    assert target.read_bytes() == b"second\n" and stat.S_IMODE(target.stat().st_mode) == 0o640
    link = tmp_path / "link.mlir"
    link.symlink_to(target)
    write_atomically(link, "third\n")
    assert link.is_symlink() and target.read_text() == "third\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.mlir", "out.mlir"]  # no temporary left


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    target = tmp_path / "out.mlir"
    target.write_text("good\n")

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        write_atomically(target, "half")
    assert target.read_text() == "good\n" and [p.name for p in tmp_path.iterdir()] == ["out.mlir"]


def test_a_new_file_gets_a_new_files_permissions(tmp_path):
    umask = os.umask(0o027)
    try:
        write_atomically(tmp_path / "new.mlir", "x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.mlir").stat().st_mode) == 0o640


#: Modules that open files for writing themselves, and why it is safe: each writes in a directory of its own.
OWN_DIRECTORIES = {
    "pxla_mlir/mlir/support/files.py": "the one writer",
    "pxla_mlir/jaxbridge/cache_access.py": "jax's cache directory, a temporary then a rename",
    "pxla_mlir/tools/update_checks.py": "the lit run's temporary directory",
    "pxla_mlir/mlir/explore/browser.py": "Chromium's temporary directory",
    "pxla_mlir/mlir/reduce/evaluate.py": "the reducer's temporary directory of candidates",
    "pxla_mlir/mlir/reduce/workers.py": "the reducer's temporary directory of candidates and logs",
    "pxla_mlir/mlir/reduce/worker.py": "a duplicate of the worker's stdout",
}


def _writes(tree: ast.AST) -> list[int]:
    """Lines opening a file for writing: open/fdopen with a w, a or x mode, write_text, write_bytes."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        mode = node.args[1] if len(node.args) > 1 else None
        writing_mode = isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax")
        if name in ("write_text", "write_bytes") or (name in ("open", "fdopen") and writing_mode):
            lines.append(node.lineno)
    return lines


def test_every_file_the_commands_write_is_written_whole():
    found = {}
    for path in [*(REPO / "pxla_mlir").rglob("*.py"), *(REPO / "passes").glob("*.py")]:
        rel = str(path.relative_to(REPO))
        lines = _writes(ast.parse(path.read_text()))
        if lines and rel not in OWN_DIRECTORIES:
            found[rel] = lines
    assert not found, f"write these through pxla_mlir.mlir.support.files.write_atomically: {found}"
