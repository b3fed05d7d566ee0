"""Memory after many distinct signatures: every cache is bounded, so the
resident size levels off instead of growing with each compiled program.

    python bench/bench_memory.py [--signatures 2000] [--every 250]

Calls one pmap, one xmap and one ``pxla_mlir.jit`` with ``--signatures``
distinct shapes each (each a new trace, lowering, compilation and C++
fast-path entry), twice per shape (the second call takes the C++ path), and
prints the process's resident set size (VmRSS) every ``--every``
signatures, then the sizes of pxla_mlir's caches and of jaxlib's C++
dispatch cache. Last, against jax in the same run: one pxla_mlir.pmap and
one jax.pmap, each in a fresh process with the same ``--signatures``
shapes, and the growth per signature over the last two thirds of them
(after pxla_mlir's caches are full when there are more than 3 x 64).
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse
import gc
import json
import subprocess
import sys
import time

import jax.numpy as jnp
import numpy as np
from jax import lax

import pxla_mlir
from pxla_mlir.mlir.support import lru


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kib / 1024


def one_map(which: str, signatures: int) -> None:
    """Child process: KiB of RSS per signature over the last two thirds of ``signatures`` shapes."""
    import jax

    body = lambda v: lax.psum(jnp.tanh(v), "i")  # noqa: E731
    f = pxla_mlir.pmap(body, "i") if which == "pxla_mlir" else jax.pmap(body, "i")
    first = max(1, signatures // 3)
    devices = jax.local_device_count()  # all of them: bench_scale.py runs this child with 8 to 512
    for k in range(1, signatures + 1):
        x = np.ones((devices, k), np.float32)
        f(x).block_until_ready()
        f(x).block_until_ready()
        if k == first:
            gc.collect()
            start = rss_mib()
    gc.collect()
    print(json.dumps({"kib": (rss_mib() - start) * 1024 / max(1, signatures - first)}))


def against_jax(signatures: int) -> None:
    kib = {}
    for which in ("pxla_mlir", "jax"):
        out = subprocess.run([sys.executable, __file__, "--one", which, "--signatures", str(signatures)],
                             capture_output=True, text=True, check=True).stdout
        kib[which] = json.loads(out.strip().splitlines()[-1])["kib"]
    ratio = kib["pxla_mlir"] / kib["jax"] if kib["jax"] > 0 else float("nan")
    print(f"\none map, fresh processes, {signatures} signatures, RSS growth per signature over the last two "
          f"thirds: pxla_mlir.pmap {kib['pxla_mlir']:.1f} KiB, jax.pmap {kib['jax']:.1f} KiB (ratio {ratio:.2f})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--signatures", type=int, default=2000)
    ap.add_argument("--every", type=int, default=250)
    ap.add_argument("--one", choices=["pxla_mlir", "jax"], help=argparse.SUPPRESS)  # the child of against_jax
    args = ap.parse_args()
    if args.one:
        one_map(args.one, args.signatures)
        return 0
    pmapped = pxla_mlir.pmap(lambda v: lax.psum(jnp.tanh(v), "i"), "i")
    xmapped = pxla_mlir.xmap(lambda v: jnp.tanh(v) * 2, in_axes=["b", ...], out_axes=["b", ...])
    jitted = pxla_mlir.jit(lambda v: pmapped(v) + 1)
    maps = {"pmap": pmapped, "xmap": xmapped, "jit": jitted}
    start, t0 = rss_mib(), time.perf_counter()
    print(f"{'signatures':>10}  {'RSS MiB':>8}  {'growth MiB':>10}  {'KiB / signature':>15}  {'s':>6}")
    print(f"{0:>10}  {start:>8.1f}  {0.0:>10.1f}  {'':>15}  {0.0:>6.1f}")
    for k in range(1, args.signatures + 1):
        x = np.ones((8, k), np.float32)
        for f in maps.values():
            f(x)
            f(x)
        if k % args.every == 0:
            gc.collect()
            now = rss_mib()
            print(f"{k:>10}  {now:>8.1f}  {now - start:>10.1f}  {(now - start) * 1024 / k:>15.1f}  "
                  f"{time.perf_counter() - t0:>6.1f}", flush=True)
    sizes = {name: len(f._cache.compiled) for name, f in maps.items()}
    print(f"\ncompiled programs kept: {sizes}; LRU caches: {len(list(lru._ALL))}, "
          f"entries in all: {sum(len(c) for c in list(lru._ALL))}")
    fast = {name: f._entry.dispatchers.get(f._environment())._cpp._cache_size() for name, f in maps.items()}
    print(f"C++ fast-path signatures kept: {fast}")
    against_jax(min(args.signatures, 300))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
