"""``backend=`` / ``devices=`` naming a platform other than jax's default:
the devices' own client compiles, caches and runs the program, inputs on
another platform are transferred (as jax.pmap's), and a backend that
disagrees with the devices is an error before anything reaches PjRt.

Only one CPU client exists here, so "the default backend is another
platform" is simulated: the default client is replaced by one that fails
the test when used, and devices or shardings of another platform are fake
objects with a ``platform`` name."""

import dataclasses
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pxla_mlir
from pxla_mlir.jaxbridge import executables, jax_internals
from pxla_mlir.jaxbridge.placement import same_platform
from pxla_mlir.maps.arguments import check_backend
from pxla_mlir.runtime import compile as runtime_compile, dispatch
from pxla_mlir.runtime.compile import PlatformMismatchError, device_platform


@dataclasses.dataclass(frozen=True)
class FakeDevice:
    platform: str
    id: int = 0
    client: object = None


class _DefaultClient:
    """Stands for the default backend of a TPU host: pxla_mlir must not compile, load or run with it."""

    def __getattr__(self, name):
        raise AssertionError(f"the default backend's client was used ({name}) for a program on other devices")


@pytest.fixture
def default_backend_is_elsewhere(monkeypatch):
    real = jax_internals.backend

    def backend(platform=None):
        return _DefaultClient() if platform is None else real(platform)

    monkeypatch.setattr(jax_internals, "backend", backend)


def body(v):
    return lax.psum(v, "i") + 1.0


@pytest.mark.parametrize("mode", ["replica", "partition"])
def test_backend_cpu_compiles_and_runs_on_the_cpu_client(default_backend_is_elsewhere, mode):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = pxla_mlir.pmap(lambda v: body(v) * 1.0, "i", backend="cpu", mode=mode)
    want = np.broadcast_to(x.sum(0) + 1, x.shape)
    for _ in range(3):  # the cache miss, then the C++ path
        out = f(x)
        np.testing.assert_array_equal(np.asarray(out), want)
    assert {d.platform for d in out.sharding.device_set} == {"cpu"}


def test_devices_compile_on_their_client(default_backend_is_elsewhere):
    f = pxla_mlir.pmap(lambda v: body(v) * 2.0, "i", devices=jax.devices("cpu")[:2])
    np.testing.assert_array_equal(np.asarray(f(np.ones((2, 3), np.float32))), np.full((2, 3), 6.0))


def test_xmap_with_backend_compiles_on_its_client(default_backend_is_elsewhere):
    xm = pxla_mlir.xmap(lambda a: a * 3.0, in_axes=["b", ...], out_axes=["b", ...], backend="cpu")
    np.testing.assert_array_equal(np.asarray(xm(np.ones((2, 3), np.float32))), np.full((2, 3), 3.0))


def test_device_client_is_the_devices_own():
    devices = jax.devices("cpu")[:2]
    assert executables.device_client(devices) is devices[0].client
    with pytest.raises(ValueError, match="several XLA clients"):
        executables.device_client([devices[0], FakeDevice("tpu", client=object())])


def test_compile_module_refuses_another_platform_before_xla(monkeypatch):
    lowered = pxla_mlir.pmap(body, "i").lower(np.ones((2, 3), np.float32))
    monkeypatch.setattr(executables, "compile_and_load", lambda *a, **k: pytest.fail("reached jaxlib"))
    with pytest.raises(PlatformMismatchError, match="cannot compile for platform 'tpu' on CPU devices"):
        runtime_compile.compile_module(lowered.mhlo(), lowered.devices, platform="tpu")


def test_device_platform():
    cpu = jax.devices("cpu")[:2]
    assert device_platform(cpu) == "cpu" and device_platform(cpu, "cpu") == "cpu"
    with pytest.raises(PlatformMismatchError, match=r"devices of \['cpu', 'tpu'\]"):
        device_platform([cpu[0], FakeDevice("tpu")])
    with pytest.raises(PlatformMismatchError, match="'gpu' on TPU devices"):
        device_platform([FakeDevice("tpu")], "gpu")


@pytest.mark.parametrize("make", [
    lambda devs, b: pxla_mlir.pmap(body, "i", devices=devs, backend=b),
    lambda devs, b: pxla_mlir.jit(lambda v: v, devices=devs, backend=b),
], ids=["pmap", "jit"])
def test_devices_and_backend_must_name_one_platform(make):
    devs = jax.devices("cpu")[:2]
    make(devs, "cpu")
    make(devs, "CPU")
    with pytest.raises(ValueError, match=r"backend='tpu' but its devices are CPU devices .*jax.devices\('tpu'\)"):
        make(devs, "tpu")  # checked on the names: the TPU backend is never started
    with pytest.raises(TypeError, match="backend must be a platform name"):
        make(devs, 3)


def test_check_backend_aliases():
    check_backend([FakeDevice("gpu")], "cuda", "pmap")
    check_backend([FakeDevice("gpu")], "rocm", "pmap")
    check_backend(None, "tpu", "pmap")  # no devices given: the backend picks them
    with pytest.raises(ValueError, match="GPU devices"):
        check_backend([FakeDevice("gpu")], "tpu", "pmap")


def test_xmap_backend_must_be_its_meshs_platform():
    xm = pxla_mlir.xmap(lambda a: a * 2.0, in_axes=["b", ...], out_axes=["b", ...], axis_resources={"b": "x"},
                        backend="tpu")
    with (pxla_mlir.Mesh.create({"x": 2}),
          pytest.raises(ValueError, match=r"xmap .* \(its mesh\): backend='tpu' but its devices are CPU")):
        xm(np.ones((2, 3), np.float32))


def test_same_platform():
    cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    tpu = types.SimpleNamespace(device_set={FakeDevice("tpu")})
    assert same_platform(cpu, jax.sharding.SingleDeviceSharding(jax.devices("cpu")[1]))
    assert not same_platform(tpu, cpu) and not same_platform(cpu, tpu)


def test_another_platforms_array_never_takes_the_cpp_path(monkeypatch):
    """C++ would hand its buffers to the executable (or reshard them across clients):
    the Python path transfers them with jax.device_put instead."""
    x = jnp.ones((2, 3))
    aval = jax.core.ShapedArray(x.shape, x.dtype)
    assert dispatch._safe(x, aval, x.sharding)
    monkeypatch.setattr(dispatch, "same_platform", lambda a, b: False)
    assert not dispatch._safe(x, aval, x.sharding)
