"""lit runs the FileCheck that FILECHECK names (LLVM's is stricter than the PyPI clone); several, as make test
names two, check each RUN line's output under every one (test/lit/filecheck_each.py)."""

import os
import shutil
import signal
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.subprocess

LIT = os.path.join(os.path.dirname(sys.executable), "lit")
ONE_TEST = str(REPO / "test" / "lit" / "tools" / "list_passes.mlir")
#: A test whose RUN lines expect a check to fail (``not filecheck``).
NOT_TEST = str(REPO / "test" / "lit" / "tools" / "gen_checks.mlir")
EACH = str(REPO / "test" / "lit" / "filecheck_each.py")
PYPI_FILECHECK = os.path.join(os.path.dirname(sys.executable), "filecheck")


def lit(*args, env=None, test=ONE_TEST):
    return subprocess.run([LIT, "-a", test, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def checker(tmp_path, name, status, *, keep=None):
    """A FileCheck stand-in that exits with ``status`` (and copies its input to ``keep``)."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho {name}-ran \"$@\" >&2\n{f'cat > {keep}' if keep else 'cat > /dev/null'}\n"
                    f"exit {status}\n")
    path.chmod(0o755)
    return str(path)


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


def test_several_checkers_each_get_the_input_and_must_agree(tmp_path):
    passes, fails = checker(tmp_path, "passes", 0, keep=tmp_path / "in1"), checker(tmp_path, "fails", 1)
    second = checker(tmp_path, "passes-too", 0, keep=tmp_path / "in2")

    def each(checkers):
        return subprocess.run([sys.executable, EACH, os.pathsep.join(checkers), "--", "check.mlir", "--x"],
                              input="the output\n", capture_output=True, text=True, timeout=60)

    agree = each([passes, second])
    assert agree.returncode == 0 and "passes-ran check.mlir --x" in agree.stderr, agree.stderr
    assert "passes-too-ran check.mlir --x" in agree.stderr
    assert (tmp_path / "in1").read_text() == (tmp_path / "in2").read_text() == "the output\n"
    both_fail = each([fails, fails])
    assert both_fail.returncode == 1 and "disagree" not in both_fail.stderr
    disagree = each([passes, fails])
    assert disagree.returncode == -signal.SIGABRT, disagree
    assert f"the checkers disagree: {fails} failed, {passes} passed" in disagree.stderr


def test_two_checkers_run_each_run_line_once_and_fail_it_when_either_fails(tmp_path):
    fails = checker(tmp_path, "fails", 1)
    run = lit(f"-DFILECHECK=filecheck{os.pathsep}{fails}")
    assert run.returncode == 1 and "fails-ran" in run.stdout and "disagree" in run.stdout, run.stdout[-2000:]
    both = lit(f"-DFILECHECK=filecheck{os.pathsep}filecheck")
    assert both.returncode == 0 and f'"{EACH}" "{PYPI_FILECHECK}{os.pathsep}{PYPI_FILECHECK}" --' in both.stdout, \
        both.stdout[-2000:]


def test_a_disagreement_fails_a_run_line_that_expects_the_checks_to_fail(tmp_path):
    """``not filecheck`` passes when the checks fail; where one checker fails and the other passes, the test
    fails all the same."""
    assert lit(f"-DFILECHECK=filecheck{os.pathsep}filecheck", test=NOT_TEST).returncode == 0
    passes = checker(tmp_path, "passes", 0)
    run = lit(f"-DFILECHECK=filecheck{os.pathsep}{passes}", test=NOT_TEST)
    assert run.returncode == 1 and "the checkers disagree" in run.stdout, run.stdout[-2000:]
