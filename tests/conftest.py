"""Test configuration: 8 virtual CPU devices, set before jax is imported. Two rules hold for every test:

* jax is imported by the tests that use it, never here: ``pytest tests/mlir`` (the tests of the jax-free floor,
  ``pxla_mlir/mlir/``) loads no jax, and a test there that does fails (:func:`pytest_runtest_call`);
* a test that starts a process (``subprocess``, ``multiprocessing``, ``os.system``, ...) carries one of
  :data:`PROCESS_MARKS`, which keep it out of ``make test-fast``; one without fails when it starts it.
"""

import os

os.environ["XLA_FLAGS"] = " ".join(
    [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
    + ["--xla_force_host_platform_device_count=8"])
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import contextlib
import multiprocessing.util
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
#: The tests of the jax-free floor: they load no jax.
JAX_FREE_TESTS = REPO / "tests" / "mlir"


def __getattr__(name: str):
    """``REPLICAS_ASSEMBLE``, ``CPP_MODE`` and ``CPP_LOWERING``, read from jaxlib when a test first imports them
    (so that loading this file loads no jax).

    jaxlib >= 0.12 cannot wrap a replica-mode program's outputs in C++ (Python assembles them): the C++ fast path
    is tested on the pmap mode and xmap lowering whose cached calls run in C++ on this jaxlib."""
    if name not in ("REPLICAS_ASSEMBLE", "CPP_MODE", "CPP_LOWERING"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pxla_mlir.runtime.results import needs_assembly

    assemble = needs_assembly(True)
    values = {"REPLICAS_ASSEMBLE": assemble, "CPP_MODE": "partition" if assemble else "replica",
              "CPP_LOWERING": "manual" if assemble else "replica"}
    globals().update(values)
    return values[name]


def assembles_results(mapped, *args) -> bool:
    """Does ``mapped``'s program for ``args`` assemble its outputs in Python (every call then takes the
    Python path, STATS["python_calls"] counting each)?"""
    return mapped.lower(*args).compile().executable.assembles_results


@pytest.fixture
def ctx():
    from pxla_mlir.mlir.core.context import make_context

    return make_context()


@pytest.fixture
def parse(ctx):
    from jaxlib.mlir import ir

    def _parse(text: str):
        with ctx:
            return ir.Module.parse(text)

    return _parse


@pytest.fixture(autouse=True, scope="session")
def _reproducers_in_a_temporary_directory(tmp_path_factory):
    """Pipelines that fail on purpose save reproducers here, not in the user's cache."""
    os.environ["PXLA_REPRO_DIR"] = str(tmp_path_factory.mktemp("reproducers"))


# -- jax_enable_checks: jax re-checks every jaxpr it builds, ours included ------------------------------

def pytest_addoption(parser):
    parser.addoption("--jax-enable-checks", action="store_true", default=False,
                     help="run every test with jax_enable_checks=True")


def pytest_configure(config):
    config.addinivalue_line("markers", "enable_checks: run this test a second time with jax_enable_checks=True")


def pytest_generate_tests(metafunc):
    if metafunc.definition.get_closest_marker("enable_checks") and not metafunc.config.getoption("--jax-enable-checks"):
        metafunc.parametrize("jax_checks", [False, True], ids=["default", "enable_checks"], indirect=True)


@pytest.fixture(autouse=True)
def jax_checks(request):
    """Under ``jax_enable_checks`` (``@pytest.mark.enable_checks`` or
    ``--jax-enable-checks``) every jaxpr jax builds or transforms is
    type-checked, collectives against the axis names bound at that point;
    restored afterwards."""
    if not (getattr(request, "param", False) or request.config.getoption("--jax-enable-checks")):
        yield False
        return
    import jax

    from pxla_mlir.mlir.support import lru

    lru.clear_all()  # a cached trace would skip the checks
    with jax.enable_checks(True):
        yield True


# -- the jax-free floor's tests load no jax -------------------------------------------------------------

def _jax_free(path) -> bool:
    return pathlib.Path(path).is_relative_to(JAX_FREE_TESTS)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A test file of the jax-free floor that imports jax fails to collect."""
    watch = isinstance(collector, pytest.Module) and _jax_free(collector.path) and "jax" not in sys.modules
    report = yield
    if watch and "jax" in sys.modules and report.passed:
        report.outcome = "failed"
        report.longrepr = (f"{collector.path.relative_to(REPO)} imports jax, but tests/mlir/ holds the tests of the "
                           f"jax-free floor: a test that needs jax lives in the folder of the jax-side code it uses")
    return report


@contextlib.contextmanager
def _loads_no_jax(item):
    if not _jax_free(item.path) or "jax" in sys.modules:
        yield
        return
    yield
    if "jax" in sys.modules:
        pytest.fail(f"{item.nodeid} loaded jax, but tests/mlir/ holds the tests of the jax-free floor: a test that "
                    f"needs jax lives in the folder of the jax-side code it uses", pytrace=False)


# -- a test that starts a process says so --------------------------------------------------------------

#: The marks of a test that starts processes (pyproject.toml's markers): any one lets it.
PROCESS_MARKS = ("subprocess", "multiprocess", "browser")


class UnmarkedProcessError(RuntimeError):
    """A test with none of :data:`PROCESS_MARKS` started a process."""


#: Where a process starts: every way subprocess, multiprocessing and os start one ends in one of these.
_STARTERS = ((subprocess.Popen, "_execute_child"), (multiprocessing.util, "spawnv_passfds"), (os, "system"),
             (os, "fork"), (os, "forkpty"), (os, "posix_spawn"), (os, "posix_spawnp"))


@contextlib.contextmanager
def _processes_refused(item):
    if any(item.get_closest_marker(mark) for mark in PROCESS_MARKS):
        yield
        return
    started: list[str] = []

    def starter(owner, name):
        def refuse(*args, **kwargs):
            command = args[1] if owner is subprocess.Popen and len(args) > 1 else args[:1]
            message = (f"{item.nodeid} started a process ({name}: {command!r}) but has no process mark: add "
                       f"@pytest.mark.subprocess (a child process: python, the CLI, filecheck, lit) or "
                       f"@pytest.mark.multiprocess (jax processes that join one run); the marks keep it out of "
                       f"make test-fast")
            started.append(message)
            raise UnmarkedProcessError(message)
        return refuse

    saved = [(owner, name, getattr(owner, name)) for owner, name in _STARTERS if hasattr(owner, name)]
    for owner, name, _ in saved:
        setattr(owner, name, starter(owner, name))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
    if started:  # the test caught the error: it still fails
        pytest.fail(started[0], pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _loads_no_jax(item), _processes_refused(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _loads_no_jax(item), _processes_refused(item):
        return (yield)
