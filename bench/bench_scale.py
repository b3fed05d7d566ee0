"""Lowering and compile time as the device count grows: 8, 64 and 512
virtual CPU devices, each in a fresh process
(``--xla_force_host_platform_device_count=N``), pxla_mlir against jax
0.10.2 in the same run.

    python bench/bench_scale.py [--devices 8,64,512] [--rounds 3] [--signatures 24]

Programs, per device count N:
- flat: one pmap over N devices (sin, psum, axis_index) against jax.pmap
  and against ``jax.jit(shard_map)`` on a 1-D mesh of N;
- nested: a 3-level nested pmap over a cube of N devices (2x2x2, 4x4x4,
  8x8x8; psum over all three axes, psum over the middle one, axis_index of
  the innermost) against ``jax.jit(shard_map)`` on the same 3-D mesh.
Each round lowers (trace, lower, passes) and compiles a fresh program on
every side (a new constant in the body, caches cleared), sides alternating;
medians of ``--rounds``, printed in ms and per device, with ratios ours /
jax's. Every program's result is checked against jax's.

Last, the memory per compiled signature, by bench/bench_memory.py's method:
one pmap over all N devices called with ``--signatures`` shapes (each a
trace, lowering, compilation and C++ fast-path entry), in a fresh process
per side; the resident-set growth per signature over the last two thirds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def _env(devices: int) -> dict:
    return {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}


def child(rounds: int) -> None:
    """In a fresh process with the device count set: lower and compile times of every side, as JSON."""
    import jax
    import numpy as np
    from jax import lax
    from jax.sharding import Mesh, PartitionSpec as P

    import pxla_mlir
    from pxla_mlir.mlir.support.lru import clear_all

    n = len(jax.devices())
    side = round(n ** (1 / 3))
    assert side ** 3 == n, f"the nested program needs a cube of devices, got {n}"

    def flat_body(c):
        return lambda x: lax.psum(jax.numpy.sin(x) * c, "i") + lax.axis_index("i")

    def nested_ours(c):
        def level3(x): return lax.psum(jax.numpy.sin(x) * c, ("i", "j", "k")) + lax.axis_index("k")
        def level2(x): return pxla_mlir.pmap(level3, "k")(x) + lax.psum(x, "j")
        def level1(x): return pxla_mlir.pmap(level2, "j")(x) * 2
        return pxla_mlir.pmap(level1, "i")

    def nested_ref(c):
        return lambda x: (lax.psum(jax.numpy.sin(x) * c, ("i", "j", "k")) + lax.axis_index("k")
                          + lax.psum(x, "j")) * 2

    line = Mesh(np.array(jax.devices()), ("i",))
    cube = Mesh(np.array(jax.devices()).reshape(side, side, side), ("i", "j", "k"))
    sides = {
        "flat": (np.ones((n, 16), np.float32), {
            "pxla_mlir.pmap": lambda c: pxla_mlir.pmap(flat_body(c), "i"),
            "jax.pmap": lambda c: jax.pmap(flat_body(c), "i"),
            "jax.jit(shard_map)": lambda c: jax.jit(jax.shard_map(flat_body(c), mesh=line, in_specs=P("i"),
                                                                  out_specs=P("i")))}),
        "nested": (np.ones((side, side, side, 16), np.float32), {
            "pxla_mlir.pmap": nested_ours,
            "jax.jit(shard_map)": lambda c: jax.jit(jax.shard_map(nested_ref(c), mesh=cube,
                                                                  in_specs=P("i", "j", "k"),
                                                                  out_specs=P("i", "j", "k")))}),
    }
    out = {}
    for program, (x, makers) in sides.items():
        times = {name: ([], []) for name in makers}
        for r in range(-1, rounds):  # round -1 pays the first-use costs (lowering rules, MLIR context, passes)
            names = list(makers) if r % 2 == 0 else list(makers)[::-1]
            for name in names:
                jax.clear_caches()
                clear_all()
                f = makers[name](2.0 + r)
                t = time.perf_counter()
                lowered = f.lower(x)
                t1 = time.perf_counter()
                lowered.compile()
                t2 = time.perf_counter()
                if r >= 0:
                    times[name][0].append(t1 - t)
                    times[name][1].append(t2 - t1)
        results = {name: np.asarray(makers[name](0.5)(x)) for name in makers}
        want = results["jax.jit(shard_map)"]
        for name, got in results.items():
            np.testing.assert_allclose(got.reshape(-1), want.reshape(-1), rtol=1e-6, err_msg=f"{program} {name}")
        out[program] = {name: [statistics.median(lo), statistics.median(co)] for name, (lo, co) in times.items()}
    print(json.dumps(out))


def run_child(devices: int, rounds: int) -> dict:
    p = subprocess.run([sys.executable, __file__, "--child", "--rounds", str(rounds)], capture_output=True,
                       text=True, timeout=600, env=_env(devices))
    if p.returncode != 0:
        raise SystemExit(f"{devices} devices: the child failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def memory(devices: int, signatures: int) -> dict:
    """KiB of resident memory per compiled signature, each side in a fresh process (bench_memory.py's child)."""
    kib = {}
    for which in ("pxla_mlir", "jax"):
        p = subprocess.run([sys.executable, str(BENCH / "bench_memory.py"), "--one", which, "--signatures",
                            str(signatures)], capture_output=True, text=True, timeout=600, env=_env(devices))
        if p.returncode != 0:
            raise SystemExit(f"{devices} devices: bench_memory.py --one {which} failed:\n{p.stderr[-3000:]}")
        kib[which] = json.loads(p.stdout.strip().splitlines()[-1])["kib"]
    return kib


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default="8,64,512", help="comma-separated device counts (each a cube: 8, 64, 512)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--signatures", type=int, default=24, help="signatures per side for the memory measurement")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.rounds)
        return 0
    counts = [int(n) for n in args.devices.split(",")]
    print(f"{os.cpu_count()} cores; each device count in a fresh process; medians of {args.rounds} rounds; "
          f"ratios pxla_mlir / the jax side\n")
    print(f"{'devices':>7} {'program':<7} {'side':<19} {'lower ms':>9} {'us/dev':>7} {'compile ms':>10} {'us/dev':>7} "
          f"{'ratios lower, compile':>22}")
    kib = {}
    for n in counts:
        t = time.perf_counter()
        for program, sides in run_child(n, args.rounds).items():
            ours_lower, ours_compile = sides["pxla_mlir.pmap"]
            for name, (lo, co) in sides.items():
                ratios = "" if name == "pxla_mlir.pmap" else f"{ours_lower / lo:>10.2f} {ours_compile / co:>11.2f}"
                print(f"{n:>7} {program:<7} {name:<19} {lo * 1e3:>9.1f} {lo / n * 1e6:>7.1f} {co * 1e3:>10.1f} "
                      f"{co / n * 1e6:>7.1f} {ratios}")
        kib[n] = memory(n, args.signatures)
        print(f"{'':>7} ({time.perf_counter() - t:.0f} s for {n} devices)", flush=True)
    print(f"\nmemory per compiled signature (one pmap over all devices, {args.signatures} signatures, fresh process "
          "per side, RSS growth over the last two thirds):")
    for n, row in kib.items():
        ratio = row["pxla_mlir"] / row["jax"] if row["jax"] > 0 else float("nan")
        print(f"{n:>7} devices: pxla_mlir.pmap {row['pxla_mlir']:>7.1f} KiB, jax.pmap {row['jax']:>7.1f} KiB "
              f"(ratio {ratio:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
