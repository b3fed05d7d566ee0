"""The test tiers hold (tests/conftest.py enforces both rules on every run):
the tests of the jax-free floor, ``pytest tests/mlir``, load no jax, neither
when collected (tests/conftest.py and the installed pytest plugin included)
nor when run; and a test that starts a process without one of the process
marks fails, even when it catches the error. make test's xdist groups hold:
a file marked ``xdist_group`` runs on one worker."""

import contextlib
import os
import re
import subprocess
import sys
import textwrap

import conftest
import pytest
from conftest import REPO

FAST = "not slow and not multiprocess and not subprocess and not browser"


class _Item:
    """What the enforcement reads of a pytest item."""

    def __init__(self, *marks):
        self.nodeid, self.marks = "tests/x/test_x.py::test_x", marks

    def get_closest_marker(self, name):
        return name if name in self.marks else None


def _pytest_loads_jax(*args) -> subprocess.CompletedProcess:
    code = ("import sys, pytest\n"
            f"code = pytest.main({list(args)!r})\n"
            "print('jax loaded' if 'jax' in sys.modules else 'no jax')\n"
            "sys.exit(code)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=600)


@pytest.mark.subprocess
def test_collecting_the_jax_free_floors_tests_loads_no_jax():
    done = _pytest_loads_jax("tests/mlir", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "no jax", done.stdout[-3000:]


@pytest.mark.subprocess
@pytest.mark.slow
def test_running_the_jax_free_floors_fast_tests_loads_no_jax():
    done = _pytest_loads_jax("tests/mlir", "-q", "-m", FAST, "-p", "no:cacheprovider", "-p", "no:xdist")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "no jax", done.stdout[-3000:]


@pytest.mark.parametrize("start", [
    lambda: subprocess.run(["true"]),
    lambda: subprocess.check_output(["true"]),
    lambda: os.system("true"),
    lambda: os.popen("true").read(),
], ids=["run", "check_output", "os.system", "os.popen"])
def test_an_unmarked_test_that_starts_a_process_fails_naming_the_mark(start):
    refused = pytest.raises(conftest.UnmarkedProcessError,
                            match=r"tests/x/test_x.py::test_x started a process .* add @pytest.mark.subprocess")
    with refused, conftest._processes_refused(_Item()):
        start()


def test_an_unmarked_test_that_catches_the_error_still_fails():
    failed = pytest.raises(pytest.fail.Exception, match="has no process mark")
    with failed, conftest._processes_refused(_Item()), contextlib.suppress(conftest.UnmarkedProcessError):
        subprocess.run(["true"])


def test_multiprocessing_is_refused_too():
    import multiprocessing

    with pytest.raises(conftest.UnmarkedProcessError), conftest._processes_refused(_Item()):
        process = multiprocessing.get_context("spawn").Process(target=print)
        process.start()


@pytest.mark.subprocess
@pytest.mark.parametrize("mark", conftest.PROCESS_MARKS)
def test_a_marked_test_starts_processes(mark):
    with conftest._processes_refused(_Item(mark)):
        assert subprocess.run(["true"]).returncode == 0


def test_the_process_marks_are_the_tiers_cost_marks():
    import tomllib

    markers = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    names = {m.split(":")[0] for m in markers}
    assert set(conftest.PROCESS_MARKS) <= names
    assert all(f"not {mark}" in FAST for mark in conftest.PROCESS_MARKS)
    assert f'FAST := {FAST}' in (REPO / "Makefile").read_text()


@pytest.mark.subprocess
def test_an_xdist_group_runs_on_one_worker(tmp_path):
    """make test spreads the tests with the Makefile's XDIST flags (--dist loadgroup): the tests of a group run on
    one worker, so that a module fixture that builds the wheel or runs the benchmarks runs once. (pytest 9.2 with
    pytest-xdist 3.8 drops the groups without a word, pytest-xdist#1386: this fails instead.)"""
    (flags,) = re.findall(r"^XDIST \?= (.*)$", (REPO / "Makefile").read_text(), re.M)
    argv = ["2" if flag == "auto" else flag for flag in flags.split()]  # two workers, whatever the cores
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(textwrap.dedent("""\
            import os
            import pytest

            pytestmark = pytest.mark.xdist_group("together")

            @pytest.mark.parametrize("i", range(4))
            def test_worker(i):
                with open("workers.txt", "a") as f:
                    f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
            """))
        (tmp_path / f"test_alone_{name}.py").write_text("def test_alone():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *argv], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and "10 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 8 and len(set(workers)) == 1, f"the group ran on {sorted(set(workers))}"
