"""Test configuration: 8 virtual CPU devices, set before jax is imported."""

import os

os.environ["XLA_FLAGS"] = " ".join(
    [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
    + ["--xla_force_host_platform_device_count=8"])
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture
def ctx():
    from pxla_mlir.ir.context import make_context

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
