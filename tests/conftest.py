"""Test configuration: 8 virtual CPU devices, set before jax is imported."""

import os

os.environ["XLA_FLAGS"] = " ".join(
    [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
    + ["--xla_force_host_platform_device_count=8"])
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pathlib

import pytest

from pxla_mlir.runtime.results import needs_assembly  # imports jax: after the device count above

REPO = pathlib.Path(__file__).resolve().parent.parent

# jaxlib >= 0.12 cannot wrap a replica-mode program's outputs in C++ (Python assembles them): the C++ fast path
# is tested on the pmap mode and xmap lowering whose cached calls run in C++ on this jaxlib.
REPLICAS_ASSEMBLE = needs_assembly(True)
CPP_MODE = "partition" if REPLICAS_ASSEMBLE else "replica"
CPP_LOWERING = "manual" if REPLICAS_ASSEMBLE else "replica"


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
