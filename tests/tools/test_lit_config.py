"""lit runs the FileCheck that FILECHECK names (LLVM's is stricter than the PyPI clone)."""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.subprocess

LIT = os.path.join(os.path.dirname(sys.executable), "lit")
ONE_TEST = str(REPO / "test" / "lit" / "tools" / "list_passes.mlir")


def lit(*args, env=None):
    return subprocess.run([LIT, "-a", ONE_TEST, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_filecheck_parameter_and_environment_pick_the_checker(tmp_path):
    fake = tmp_path / "FileCheck"
    fake.write_text("#!/bin/sh\necho fake-filecheck-ran >&2\nexit 3\n")
    fake.chmod(0o755)
    for run in (lit(f"-DFILECHECK={fake}"), lit(env={"FILECHECK": str(fake)})):
        assert run.returncode == 1 and "fake-filecheck-ran" in run.stdout, run.stdout[-2000:]
    plain = lit(env={"FILECHECK": ""})
    assert plain.returncode == 0 and "fake-filecheck-ran" not in plain.stdout


@pytest.mark.skipif(not shutil.which("FileCheck", path="/usr/lib/llvm-19/bin"), reason="LLVM 19's FileCheck absent")
def test_llvm_filecheck_runs_when_given():
    run = lit("-DFILECHECK=/usr/lib/llvm-19/bin/FileCheck")
    assert run.returncode == 0 and '"/usr/lib/llvm-19/bin/FileCheck"' in run.stdout, run.stdout[-2000:]
