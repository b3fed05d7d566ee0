"""The time per op of every pass of the pmap pipeline, run by pxla-opt on the
pxla form of chains of N ops (N = 1,000, 10,000, 100,000 by default): no pass
may grow faster than the module.

    python bench/bench_pass_scaling.py [--sizes 1000,10000,100000] [--repeat 3]

Each module is a real pmap's pxla form (``pxla_mlir.pmap(chain).lower(x)
.pxla_text()``: elementwise ops with a psum every 50), written once; each
size then runs ``pxla-opt --mlir-timing`` on it in ``--repeat`` fresh
processes and takes each pass's median wall time from MLIR's timing report.
Prints microseconds per op for each pass and size, and the growth: the time
per op at the largest size over that at the smallest (1.0: linear; a
quadratic pass grows with N).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap

GENERATE = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, jax.numpy as jnp, numpy as np, pxla_mlir
    from jax import lax
    n = int(sys.argv[1])
    def chain(x):
        for k in range(n):
            x = jnp.sin(x) if k % 2 else x * 1.001
            if k % 50 == 49:
                x = lax.psum(x, "i") / 8
        return x
    lowered = pxla_mlir.pmap(chain, "i").lower(np.ones((8, 16), np.float32))
    with open(sys.argv[2], "w") as f:
        f.write(lowered.pxla_text())
    print(lowered.pipeline)
""")
ROW = re.compile(r"^\s*([0-9.]+) \(\s*[0-9.]+%\)\s+(.+?)\s*$")


def pass_times(path: str, pipeline: str) -> dict[str, float]:
    """Seconds per pass (MLIR's timing report) of one pxla-opt process."""
    cli = "import sys; from pxla_mlir.mlir.cli.pxla_opt import main; sys.exit(main())"
    p = subprocess.run([sys.executable, "-c", cli, path, "-p", pipeline, "--mlir-timing", "-o", os.devnull],
                       capture_output=True, text=True, timeout=3600, cwd=tempfile.gettempdir())
    if p.returncode:
        raise SystemExit(f"pxla-opt failed on {path}:\n{p.stderr[-2000:]}")
    times: dict[str, float] = {}
    for line in p.stderr.splitlines():
        m = ROW.match(line)
        if m and m.group(2) not in ("Total", "Rest", "'func.func' Pipeline"):
            times[m.group(2).strip()] = times.get(m.group(2).strip(), 0.0) + float(m.group(1))
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = os.path.join(tmp, f"chain{n}.mlir")
            p = subprocess.run([sys.executable, "-c", GENERATE, str(n), path], capture_output=True, text=True,
                               timeout=3600, cwd=tmp)
            if p.returncode:
                raise SystemExit(f"generating the {n}-op chain failed:\n{p.stderr[-2000:]}")
            pipeline = p.stdout.strip().splitlines()[-1]
            with open(path) as f:
                ops = sum(1 for line in f if " = " in line or line.lstrip().startswith(("return", "func.return")))
            runs = [pass_times(path, pipeline) for _ in range(args.repeat)]
            results[n] = {name: statistics.median(r.get(name, 0.0) for r in runs) / ops for name in runs[0]}
            print(f"N = {n}: {ops} ops in the pxla form, {pipeline}", flush=True)
    names = list(results[sizes[-1]])
    print(f"\nmicroseconds per op, median of {args.repeat} fresh pxla-opt processes (pxla-opt --mlir-timing)\n")
    print(f"{'pass':<34}" + "".join(f"{f'N={n}':>12}" for n in sizes) + f"{'growth':>9}")
    for name in names:
        per_op = [results[n].get(name, 0.0) * 1e6 for n in sizes]
        growth = per_op[-1] / per_op[0] if per_op[0] > 0 else float("nan")
        print(f"{name:<34}" + "".join(f"{v:>12.3f}" for v in per_op) + f"{growth:>9.2f}")
    totals = [sum(results[n].values()) * 1e6 for n in sizes]
    print(f"{'all passes':<34}" + "".join(f"{v:>12.3f}" for v in totals) + f"{totals[-1] / totals[0]:>9.2f}")


if __name__ == "__main__":
    main()
