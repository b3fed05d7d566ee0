"""The main job: a real pmap (psum, a nested pmap, out_axes=1) lowered to
pure MHLO, shown, compiled through jaxlib and run on 8 virtual CPU devices,
next to a reference computed without pxla_mlir (nested jax.vmap)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

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


def main() -> None:
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    f = pxla_mlir.pmap(outer, "i")
    lowered = f.lower(x)
    print(f"=== pass pipeline: {lowered.pipeline}")
    print("=== MHLO handed to XLA (2 x 4 = 8 replicas):")
    print(lowered.as_text())
    compiled = lowered.compile()
    got = np.asarray(compiled(x))
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
