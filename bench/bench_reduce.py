"""pxla-mlir reduce on a generated module of about 1,000 ops whose failure has a two-op cause.

    python bench/bench_reduce.py [--ops 1000] [--jobs 2] [--modes test,pipeline]

The module is a pxla-form ``@main`` (a chain of StableHLO ops: elementwise
ops, non-splat constants, calls to private helpers, while loops) with one
``@pxla.unshard`` followed by a ``@pxla.shard`` of the wrong result type
buried at 60% of the chain: ``pxla-fold-shard-of-unshard`` fails on that pair
and on nothing else. Each mode reduces it from the failure:

* ``test``: a shell test, ``pxla-opt {} -p 'builtin.module(pxla-fold-shard-of-unshard)' 2>&1 | grep -q ...``
  (a process per candidate, as a user's script is);
* ``pipeline``: the built-in test, ``--pipeline ... --expect-error ...`` (the pipeline in worker processes
  that stay up).

It prints, per mode, the ops before and after, the wall time (the target:
at most 10 ops in under 2 minutes on 2 cores) and the candidates tested.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time

PIPELINE = "builtin.module(pxla-fold-shard-of-unshard)"
ERROR = "so its result must be"


def _helper(name: str, steps: int) -> list[str]:
    lines = [f"  func.func private @{name}(%a: tensor<3xf32>) -> tensor<3xf32> {{"]
    prev = "%a"
    for i in range(steps):
        op = ("stablehlo.tanh", "stablehlo.exponential", "stablehlo.negate")[i % 3]
        lines.append(f"    %h{i} = {op} {prev} : tensor<3xf32>")
        prev = f"%h{i}"
    return lines + [f"    return {prev} : tensor<3xf32>", "  }"]


def generate(num_ops: int = 1000, seed: int = 0) -> str:
    """The module (about ``num_ops`` ops, counted as the reducer counts them: every op but the module)."""
    rng = random.Random(seed)
    lines = ["module @big attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {"]
    helpers = [f"helper{k}" for k in range(4)]
    for name in helpers:
        lines += _helper(name, 9)
    count = 1 + len(helpers) * 11 + 2  # the module's functions, their ops, @main and its return
    lines.append("  func.func public @main(%x: tensor<3xf32>, %y: tensor<3xf32>, %k: tensor<i32>) "
                 "-> (tensor<3xf32>, tensor<i32>) {")
    values, n, cause_at = ["%x", "%y"], 0, int(num_ops * 0.6)
    while count < num_ops:
        n += 1
        v, a, b = f"%v{n}", rng.choice(values[-4:]), rng.choice(values[-8:])
        kind = rng.randrange(10)
        if count >= cause_at and cause_at:
            lines += [f"    %g{n} = mhlo.custom_call @pxla.unshard({a}) {{pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, "
                      f"pxla.stride = 1 : i64}} : (tensor<3xf32>) -> tensor<8x3xf32>",
                      f"    %s{n} = mhlo.custom_call @pxla.shard(%g{n}) {{pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, "
                      f"pxla.stride = 1 : i64}} : (tensor<8x3xf32>) -> tensor<3xf16>",
                      f"    {v} = stablehlo.convert %s{n} : (tensor<3xf16>) -> tensor<3xf32>"]
            count, cause_at = count + 3, 0
        elif n % 50 == 0:
            lines += [f"    %c{n} = stablehlo.constant dense<0> : tensor<i32>",
                      f"    %w{n}:2 = stablehlo.while(%i{n} = %c{n}, %t{n} = {a}) : tensor<i32>, tensor<3xf32>",
                      "     cond {",
                      f"      %lim{n} = stablehlo.constant dense<3> : tensor<i32>",
                      f"      %lt{n} = stablehlo.compare LT, %i{n}, %lim{n} : (tensor<i32>, tensor<i32>) -> tensor<i1>",
                      f"      stablehlo.return %lt{n} : tensor<i1>",
                      "    } do {",
                      f"      %one{n} = stablehlo.constant dense<1> : tensor<i32>",
                      f"      %inc{n} = stablehlo.add %i{n}, %one{n} : tensor<i32>",
                      f"      %th{n} = stablehlo.tanh %t{n} : tensor<3xf32>",
                      f"      %mu{n} = stablehlo.multiply %th{n}, %t{n} : tensor<3xf32>",
                      f"      stablehlo.return %inc{n}, %mu{n} : tensor<i32>, tensor<3xf32>",
                      "    }",
                      f"    {v} = stablehlo.add %w{n}#1, {b} : tensor<3xf32>"]
            count += 11
        elif kind < 4:
            op = ("add", "multiply", "subtract", "maximum")[kind]
            lines.append(f"    {v} = stablehlo.{op} {a}, {b} : tensor<3xf32>")
            count += 1
        elif kind < 7:
            op = ("tanh", "exponential", "negate")[kind - 4]
            lines.append(f"    {v} = stablehlo.{op} {a} : tensor<3xf32>")
            count += 1
        elif kind < 9:
            numbers = ", ".join(f"{rng.uniform(-2, 2):.3f}" for _ in range(3))
            lines += [f"    %k{n} = stablehlo.constant dense<[{numbers}]> : tensor<3xf32>",
                      f"    {v} = stablehlo.add {a}, %k{n} : tensor<3xf32>"]
            count += 2
        else:
            lines.append(f"    {v} = func.call @{rng.choice(helpers)}({a}) : (tensor<3xf32>) -> tensor<3xf32>")
            count += 1
        values.append(v)
    lines += [f"    return {values[-1]}, %k : tensor<3xf32>, tensor<i32>", "  }", "}"]
    return "\n".join(lines) + "\n"


def _tool(name: str) -> str:
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.exists(here) else name


def reduce(module: str, mode: str, jobs: int, directory: str) -> dict:
    source = os.path.join(directory, f"big_{mode}.mlir")
    out = os.path.join(directory, f"small_{mode}.mlir")
    with open(source, "w") as f:
        f.write(module)
    if mode == "test":
        how = ["--test", f"{_tool('pxla-opt')} {{}} -p '{PIPELINE}' 2>&1 | grep -q '{ERROR}'"]
    else:
        how = ["--pipeline", PIPELINE, "--expect-error", ERROR]
    command = [_tool("pxla-mlir"), "reduce", source, *how, "--jobs", str(jobs), "-o", out]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed (exit {proc.returncode}):\n{proc.stderr}")
    summary = proc.stderr.strip().splitlines()[-1]
    tested = re.search(r"(\d+) tested", summary)
    ops = re.search(r"(\d+) ops -> (\d+) ops", summary)
    assert ops is not None, summary
    return {"mode": mode, "before": int(ops[1]), "after": int(ops[2]), "seconds": seconds,
            "tested": int(tested[1]) if tested else -1, "command": shlex.join(command)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=1000, help="ops of the generated module (default 1000)")
    parser.add_argument("--jobs", type=int, default=2, help="tests at a time (default 2)")
    parser.add_argument("--modes", default="test,pipeline", help="test, pipeline or both (default)")
    args = parser.parse_args()
    module = generate(args.ops)
    print(f"pxla-mlir reduce: a {args.ops}-op module with a two-op cause, --jobs {args.jobs}, "
          f"{os.cpu_count()} cores")
    print(f"{'mode':<10} {'ops before':>10} {'ops after':>10} {'seconds':>8} {'tested':>7}")
    with tempfile.TemporaryDirectory(prefix="bench_reduce_") as directory:
        for mode in args.modes.split(","):
            row = reduce(module, mode, args.jobs, directory)
            print(f"{row['mode']:<10} {row['before']:>10} {row['after']:>10} {row['seconds']:>8.1f} "
                  f"{row['tested']:>7}")
            print(f"  {row['command']}")


if __name__ == "__main__":
    main()
