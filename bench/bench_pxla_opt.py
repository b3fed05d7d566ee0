"""pxla-opt against its C++ floor on generated modules of 10k, 100k (and 1M) ops.

    python bench/bench_pxla_opt.py [--sizes 10000,100000] [--large] [--repeat 3]

The floor is the same file through jaxlib's C++ ``canonicalize`` pass alone
(parse, one pass, print, in a fresh process with jaxlib's MLIR bindings
only); pxla-opt runs the two pxla passes of the handoff on it
(pxla-convert-to-replica-mode, pxla-verify-handoff: the target, <= 1.2x) and
the whole pxla-handoff-pipeline (those and four C++ passes). Each size
alternates fresh processes of every side and prints the medians of wall and
CPU (user + system) time and the ratios to the floor; the per-op column shows
whether pxla-opt scales linearly. ``--large`` adds the 1M-op module (about 70 MB of text,
well over a minute for both sides together).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

#: What pxla-opt runs: the two pxla passes of the handoff alone (the target), and the whole handoff
#: pipeline, which adds four C++ passes (two legalizations, canonicalize, cse) to them.
PIPELINES = {"pxla passes": "builtin.module(pxla-convert-to-replica-mode,pxla-verify-handoff)",
             "handoff pipeline": "builtin.module(pxla-handoff-pipeline)"}
FLOOR = textwrap.dedent("""
    import sys
    from jaxlib.mlir import ir, passmanager
    from pxla_mlir.mlir.core.context import make_context

    with make_context():
        with open(sys.argv[1], "rb") as f:
            module = ir.Module.parse(f.read())
        passmanager.PassManager.parse("builtin.module(canonicalize)").run(module.operation)
        with open(sys.argv[2], "w") as f:
            module.operation.print(file=f)
""")


def generate(num_ops: int, devices: int = 8) -> tuple[str, int]:
    """A partition-mode chain of about ``num_ops`` ops (and how many exactly):
    adds, with an all_reduce (3 ops) and a partition_id every 10 steps."""
    groups = ", ".join(str(i) for i in range(devices))
    lines = [f"module attributes {{mhlo.num_partitions = {devices} : i32, mhlo.num_replicas = 1 : i32}} {{",
             "  func.func public @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<ui32>) {",
             "    %p = mhlo.partition_id : tensor<ui32>",
             "    %v0 = mhlo.add %x, %x : tensor<4xf32>"]
    count, step = 4, 0
    while count < num_ops:
        step += 1
        prev, cur = f"%v{step - 1}", f"%v{step}"
        if step % 10 == 0:
            lines += [f"    {cur} = \"mhlo.all_reduce\"({prev}) <{{channel_handle = #mhlo.channel_handle<handle = 1, "
                      f"type = 1>, replica_groups = dense<[[{groups}]]> : tensor<1x{devices}xi64>, use_global_device_ids}}> ({{",
                      "    ^bb0(%a: tensor<f32>, %b: tensor<f32>):",
                      "      %s = mhlo.add %a, %b : tensor<f32>",
                      "      mhlo.return %s : tensor<f32>",
                      "    }) : (tensor<4xf32>) -> tensor<4xf32>"]
            count += 3
        elif step % 10 == 5:
            lines += [f"    %p{step} = mhlo.partition_id : tensor<ui32>",
                      f"    {cur} = mhlo.add {prev}, {prev} : tensor<4xf32>"]
            count += 2
        else:
            lines.append(f"    {cur} = mhlo.add {prev}, %x : tensor<4xf32>")
            count += 1
    lines += [f"    return %v{step}, %p : tensor<4xf32>, tensor<ui32>", "  }", "}"]
    return "\n".join(lines) + "\n", count + 1  # count started with the module and function; + the return


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def startup_seconds(repeat: int) -> float:
    return statistics.median(timed([sys.executable, "-m", "pxla_mlir.mlir.cli.pxla_opt", "--version"])[0]
                             for _ in range(repeat))


def compare(size: int, repeat: int, where: str) -> tuple[int, dict]:
    """Medians of (wall, cpu) per side for a module of about ``size`` ops."""
    text, nops = generate(size)
    path, out = os.path.join(where, f"m{size}.mlir"), os.path.join(where, "out.mlir")
    with open(path, "w") as f:
        f.write(text)
    sides = {"floor": [sys.executable, "-c", FLOOR, path, out]}
    for label, pipeline in PIPELINES.items():
        sides[label] = [sys.executable, "-m", "pxla_mlir.mlir.cli.pxla_opt", path, f"--pass-pipeline={pipeline}",
                        "-o", out]
    runs: dict = {side: [] for side in sides}
    for r in range(repeat):
        for side in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            runs[side].append(timed(sides[side]))
    return nops, {side: tuple(statistics.median(x[i] for x in v) for i in (0, 1)) for side, v in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--large", action="store_true", help="also the 1M-op module")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] + ([1_000_000] if args.large else [])
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; medians of {args.repeat} fresh "
          f"processes per side, alternating")
    print(f"pxla-opt start-up (--version): {startup_seconds(args.repeat * 3) * 1e3:.0f} ms")
    print("floor: parse + canonicalize + print; " + "; ".join(f"{k}: {v}" for k, v in PIPELINES.items()) + "\n")
    print(f"{'ops':>8} {'pxla-opt runs':<17} {'wall [s]':>9} {'floor':>7} {'ratio':>6} {'cpu [s]':>8} {'floor':>7} "
          f"{'ratio':>6} {'us/op':>7}")
    with tempfile.TemporaryDirectory() as where:
        for size in sizes:
            nops, t = compare(size, args.repeat, where)
            fw, fc = t["floor"]
            for label in PIPELINES:
                w, c = t[label]
                print(f"{nops:>8} {label:<17} {w:>9.2f} {fw:>7.2f} {w / fw:>6.2f} {c:>8.2f} {fc:>7.2f} {c / fc:>6.2f} "
                      f"{w / nops * 1e6:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
