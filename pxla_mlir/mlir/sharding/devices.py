"""How many devices pxla_mlir lays values out on, at most; that each is
listed once (every entry point taking devices checks them here); and
whether jax can start the devices at all (every entry point turns a
backend that cannot start into :class:`BackendError` here)."""

from __future__ import annotations

import os

from pxla_mlir.errors import PxlaUserError

__all__ = ["MAX_DEVICES", "check_device_count", "repeated_device", "BackendError", "backend_error",
           "too_few_devices"]

#: The most devices a sharding or a mesh may span. Passes and the runtime build
#: device-id tables of this size (8 MiB at the limit); more is a typo or a
#: corrupt attribute, and would exhaust memory before anything else.
MAX_DEVICES = 1 << 20


def check_device_count(n: int, what: str) -> None:
    """Raises ValueError when ``what`` spans more than :data:`MAX_DEVICES` devices."""
    if n > MAX_DEVICES:
        raise ValueError(f"{what} spans {n} devices; at most {MAX_DEVICES} are supported")


def repeated_device(devices) -> tuple[int, int] | None:
    """The positions ``(first, second)`` of the first device listed twice, or
    None when all are distinct. XLA runs one shard per device: given one
    device twice it compiles and launches, then fails reading the results
    (``INTERNAL: Device 0 not unique``) or returns garbage."""
    seen: dict = {}
    for i, d in enumerate(devices):
        key = (getattr(d, "platform", None), getattr(d, "id", d))
        if key in seen:
            return seen[key], i
        seen[key] = i
    return None


def too_few_devices(n: int, devices, backend: str | None = None) -> str:
    """The end of a "needs ``n`` devices, but only ``len(devices)`` exist" message:
    which backend jax looked at (``backend=``, else its default one) and how
    to get ``n`` devices from Python, from ``pxla-mlir`` and under pytest.

    On a host whose default backend is an accelerator with fewer devices
    (one TPU chip), the way out is the host's CPU devices, which jax starts
    in the number XLA_FLAGS (or ``jax_num_cpu_devices``) sets."""
    platform = (getattr(devices[0], "platform", None) if len(devices) else None) or backend or "?"
    env = os.environ.get("JAX_PLATFORMS", "").strip()
    where = (f"on backend={backend!r}" if backend else
             "on jax's default backend" + (f" (JAX_PLATFORMS={env})" if env else ""))
    flag = f"XLA_FLAGS=--xla_force_host_platform_device_count={n} before importing jax"
    if platform == "cpu":
        how = (f"on CPU: Python: set {flag}, or jax.config.update('jax_num_cpu_devices', {n}) before jax starts; "
               f"pxla-mlir: --cpu-devices {n}; pytest: --pxla-cpu-devices {n}")
    else:
        how = (f"to use {n} CPU devices instead: Python: set {flag} and pass backend='cpu' or set "
               f"JAX_PLATFORMS=cpu; pxla-mlir: --backend cpu --cpu-devices {n}; "
               f"pytest: JAX_PLATFORMS=cpu pytest --pxla-cpu-devices {n}")
    return f" {where} ({how})"


class BackendError(PxlaUserError, RuntimeError):
    """jax cannot start the devices a program needs (JAX_PLATFORMS, a missing
    plugin, a ``backend=`` of an absent platform): the environment, not the program."""


_PLUGINS = {
    "cuda": "install jax's CUDA plugin (pip install -U 'jax[cuda12]') on a machine whose NVIDIA GPU nvidia-smi lists "
            "(and CUDA_VISIBLE_DEVICES does not hide)",
    "rocm": "install jax's ROCm plugin on a machine with an AMD GPU that rocm-smi lists",
    "tpu": "install libtpu (pip install -U 'jax[tpu]') on a TPU host",
}
_PLUGINS["gpu"] = _PLUGINS["cuda"]


def backend_error(error: BaseException, what: str, platform: str | None = None) -> BackendError | None:
    """The :class:`BackendError` to raise instead of ``error`` when jax cannot
    start its backend (``platform``'s, e.g. pmap's ``backend=``; else the
    default one), or None when it can (``error`` is then about something
    else). ``what`` says where (``pmap 'step'``, ``pxla_mlir.load``, ...).

    jax 0.10.2 given ``JAX_PLATFORMS=cuda`` without a visible NVIDIA GPU fails
    with a bare ``AssertionError``; other platforms with a ``RuntimeError``.
    Only those are looked into: probing starts the backend, which nothing
    else should do on an error path."""
    if not isinstance(error, (AssertionError, RuntimeError)) or isinstance(error, PxlaUserError):
        return None
    import jax

    try:
        jax.devices(platform)
        return None
    except (AssertionError, RuntimeError) as e:
        reason = str(e).strip()
    env = os.environ.get("JAX_PLATFORMS", "").strip()
    configured = jax.config.jax_platforms or ""  # pyright: ignore[reportAttributeAccessIssue] (options are set at run time)
    named = [p.strip() for p in (platform or configured or env).split(",") if p.strip()]
    if not reason:  # the bare assertion: jax skipped every platform named
        reason = (f"JAX_PLATFORMS={configured} names no platform that could start (jax skips 'cuda' when it sees "
                  f"no NVIDIA GPU)")
    else:
        reason = reason.replace(" (set JAX_PLATFORMS='' to automatically choose an available backend)", "")
        reason = reason.rstrip(".")
    installs = [_PLUGINS[p] for p in dict.fromkeys(named) if p in _PLUGINS]
    unknown = [p for p in named if p not in _PLUGINS and p != "cpu"]
    fixes = installs + ([f"name only platforms jax has (cpu, cuda, rocm, tpu), not {', '.join(map(repr, unknown))}"]
                        if unknown else [])
    if platform is not None:
        fixes.append(f"pass backend='cpu' (or None for jax's default) instead of backend={platform!r}")
    else:
        fixes.append("set JAX_PLATFORMS=cpu to run on the CPU (or JAX_PLATFORMS='' to let jax choose)")
    return BackendError(f"{what}: jax cannot start its {'backend ' + repr(platform) if platform else 'backend'}: "
                        f"{reason}. This is the environment, not the program: " + ", or ".join(fixes))
