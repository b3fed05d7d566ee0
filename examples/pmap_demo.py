"""The main job: a real pmap (psum, a nested pmap, out_axes=1) lowered to
pure MHLO, shown, compiled through jaxlib and run on 8 devices, next to a
reference computed without pxla_mlir (nested jax.vmap).

It runs on jax's default backend when that has 8 devices, else (a laptop, a
one-chip TPU host) on 8 virtual CPU devices, and says so in one line."""

import os
import re

DEVICES = 8


def _cpu_device_flags(flags: str, n: int) -> str:
    """XLA_FLAGS with at least ``n`` host (CPU) devices; set before jax starts."""
    found = re.search(r"--xla_force_host_platform_device_count=(\d+)", flags)
    if found and int(found.group(1)) >= n:
        return flags
    flags = re.sub(r"\s*--xla_force_host_platform_device_count=\S*", "", flags).strip()
    return f"{flags} --xla_force_host_platform_device_count={n}".strip()


if __name__ == "__main__":  # the demo's own process (not an import by pxla-mlir): before jax starts
    os.environ["XLA_FLAGS"] = _cpu_device_flags(os.environ.get("XLA_FLAGS", ""), DEVICES)
    if os.environ.get("JAX_NUM_CPU_DEVICES", "").isdigit() and int(os.environ["JAX_NUM_CPU_DEVICES"]) < DEVICES:
        os.environ["JAX_NUM_CPU_DEVICES"] = str(DEVICES)  # jax's own count wins over XLA_FLAGS

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import pxla_mlir  # noqa: E402


def inner(row):  # one device: a row of one column block
    return lax.psum(row, "j") + 10.0 * lax.axis_index("j")


def outer(block):  # one group of 4 devices: a (4, 3) block
    per_device = pxla_mlir.pmap(inner, "j", in_axes=0, out_axes=1)(block)  # (3, 4)
    return per_device + lax.psum(block, "i").T  # psum over the outer axis


def reference(x):
    vinner = jax.vmap(inner, axis_name="j", in_axes=0, out_axes=1)
    return jax.vmap(lambda b: vinner(b) + lax.psum(b, "i").T, axis_name="i")(x)


def choose_backend(default: list, cpu: list, n: int = DEVICES) -> tuple[str | None, str]:
    """``(backend, line)``: jax's default backend (None) when it has ``n``
    devices, else ``"cpu"`` (``cpu``: jax's CPU devices) with a line saying
    why; raises SystemExit saying how to get ``n`` devices when neither has them."""
    platform = default[0].platform if default else "?"
    if len(default) >= n:
        return None, ""
    if platform != "cpu" and len(cpu) >= n:
        return "cpu", (f"=== jax's default backend ({platform.upper()}) has {len(default)} device(s), the demo needs "
                       f"{n}: running on {n} CPU devices (backend='cpu'; JAX_PLATFORMS=cpu does the same)")
    found = (f"jax's default backend (CPU) has {len(default)}" if platform == "cpu" else
             f"jax's default backend ({platform.upper()}) has {len(default)} and its CPU backend {len(cpu)}")
    platforms_hint = "" if cpu or platform == "cpu" else " and JAX_PLATFORMS naming cpu"
    raise SystemExit(f"pmap_demo: needs {n} devices, but {found}: start jax with "
                     f"XLA_FLAGS=--xla_force_host_platform_device_count={n}{platforms_hint} (JAX_NUM_CPU_DEVICES and "
                     f"jax_num_cpu_devices, when set, must allow {n} too)")


def _cpu_devices() -> list:
    try:
        return jax.devices("cpu")
    except RuntimeError:  # JAX_PLATFORMS without cpu
        return []


def main() -> None:
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    default = jax.devices()
    cpu = default if default[0].platform == "cpu" else _cpu_devices() if len(default) < DEVICES else []
    backend, line = choose_backend(default, cpu)
    if line:
        print(line)
    f = pxla_mlir.pmap(outer, "i", backend=backend)
    lowered = f.lower(x)
    print(f"=== pass pipeline: {lowered.pipeline}")
    print("=== MHLO handed to XLA (2 x 4 = 8 replicas):")
    print(lowered.as_text())
    compiled = lowered.compile()
    got = np.asarray(compiled(x))
    with jax.default_device(lowered.devices[0]):
        want = np.asarray(reference(x))
    print(f"=== run on {len(lowered.devices)} {lowered.devices[0].platform.upper()} devices; result (2, 3, 4):")
    print(got)
    print("=== reference (nested jax.vmap):")
    print(want)
    ok = np.allclose(got, want)
    print("=== match:", ok)
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
