"""pxla-opt start-up time and pxla pass throughput on generated modules.

    python bench/bench_pxla_opt.py [--sizes 1000,10000,100000] [--repeat 3]

Prints a table; the per-op column shows whether the passes scale linearly.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

PIPELINE = "builtin.module(pxla-convert-to-replica-mode,pxla-verify-handoff)"


def generate(num_ops: int, devices: int = 8) -> str:
    """A partition-mode chain of about ``num_ops`` ops: adds, with an
    all_reduce (3 ops) and a partition_id every 10 steps."""
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
    return "\n".join(lines) + "\n"


def startup_seconds(repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pxla_mlir.tools.pxla_opt", "--version"], check=True,
                       capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def pass_seconds(text: str, repeat: int) -> tuple[float, int]:
    from jaxlib.mlir import ir

    from pxla_mlir.ir.context import make_context
    from pxla_mlir.ir.ir_utils import walk
    from pxla_mlir.pass_infra import Pipeline

    times, nops = [], 0
    for _ in range(repeat):
        ctx = make_context()
        with ctx:
            module = ir.Module.parse(text)
            nops = len(walk(module.operation))
            pm = Pipeline.parse(PIPELINE, ctx).pass_manager(ctx)
            t = time.perf_counter()
            pm.run(module.operation)
            times.append(time.perf_counter() - t)
    return statistics.median(times), nops


def cli_seconds(text: str) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".mlir") as f:
        f.write(text)
        f.flush()
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pxla_mlir.tools.pxla_opt", f.name, f"--pass-pipeline={PIPELINE}",
                        "-o", "/dev/null"], check=True)
        return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"pxla-opt start-up (--version, median of {args.repeat * 3}): "
          f"{startup_seconds(args.repeat * 3) * 1e3:.0f} ms")
    print(f"pipeline: {PIPELINE}")
    print(f"{'ops':>8} {'passes [ms]':>12} {'per op [us]':>12} {'pxla-opt total [s]':>19}")
    for size in map(int, args.sizes.split(",")):
        text = generate(size)
        seconds, nops = pass_seconds(text, args.repeat)
        print(f"{nops:>8} {seconds * 1e3:>12.1f} {seconds / nops * 1e6:>12.2f} {cli_seconds(text):>19.2f}")


if __name__ == "__main__":
    main()
