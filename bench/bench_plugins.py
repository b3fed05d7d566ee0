"""The example rewrite plugin (unshard-as-all-gather) on nested pmaps whose inner
pmap gathers a large output, on 8 virtual CPU devices.

    python bench/bench_plugins.py [--rows 512] [--rounds 5] [--calls 20]

Each program is lowered with ``unshard="all-reduce"`` (2022's pad + all-reduce),
then the plugin rewrites the final module; the pipeline's own
``unshard="all-gather"`` is the reference. For each: the collectives in XLA's
optimized HLO, the bytes the collectives send (the collective-bytes plugin's
total over the final MHLO, ring formulas), the time per call (median), and the
ratios rewritten / all-reduce. Every rewritten program's result is checked
equal, bit for bit, to the all-reduce program's.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse
import json
import re
import statistics
import tempfile
import time

import jax
import numpy as np
from jaxlib.mlir import ir

import pxla_mlir
from pxla_mlir.examples.plugins.collective_bytes import CollectiveBytesPass
from pxla_mlir.examples.plugins.unshard_as_all_gather import UnshardAsAllGatherPass
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.core.diagnostics import DiagnosticCollector
from pxla_mlir.mlir.pass_infra import Pipeline, registry


def gather_rows(x):
    """i=2 over j=4: each device scales its (rows, 256) block; the outer body reads the gathered (4, rows, 256)."""
    y = pxla_mlir.pmap(lambda v: v * 2.0 + 1.0, "j")(x)
    return y.sum(0) - y[0]


def two_levels(x):
    """i=2 over j=2 over k=2: two unshards, the inner one inside the middle pmap."""
    def middle(v):
        z = pxla_mlir.pmap(lambda w: w * 3.0, "k")(v)
        return z * z[::-1]
    y = pxla_mlir.pmap(middle, "j")(x)
    return y.max(0)


PROGRAMS = {"gather_rows": (gather_rows, lambda rows: (2, 4, rows, 256)),
            "two_levels": (two_levels, lambda rows: (2, 2, 2, rows, 256))}


def run_passes(text: str, pipeline: str) -> str:
    ctx = make_context()
    with ctx, DiagnosticCollector(ctx):
        module = ir.Module.parse(text)
        Pipeline.parse(pipeline, ctx).pass_manager(ctx).run(module.operation)
        return str(module)


def bytes_sent(text: str) -> int:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bytes.json")
        run_passes(text, f"builtin.module(collective-bytes{{json={path}}})")
        with open(path, encoding="utf-8") as f:
            return json.load(f)["totals"]["bytes_sent_total"]


def hlo_counts(hlo: str) -> str:
    counts = {op: len(re.findall(rf"= \S+ {op}(?:-start)?\(", hlo)) for op in ("all-reduce", "all-gather")}
    return " ".join(f"{op}={n}" for op, n in counts.items())


def median_time(fn, x, rounds: int, calls: int) -> float:
    jax.block_until_ready(fn(x))
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(fn(x))
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=512, help="rows of each device's block (256 columns, f32)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    for cls in (UnshardAsAllGatherPass, CollectiveBytesPass):
        registry.register(cls)
    print(f"jax {jax.__version__}, {jax.device_count()} {jax.devices()[0].platform.upper()} devices, "
          f"blocks of {args.rows}x256 f32 ({args.rows * 256 * 4 / 2**20:.2f} MiB)")
    print(f"{'program':<12} {'form':<22} {'optimized HLO':<28} {'MHLO bytes sent':>16} {'ms/call':>9} "
          f"{'bytes ratio':>11} {'time ratio':>10}")
    for name, (fn, shape) in PROGRAMS.items():
        x = np.random.default_rng(0).normal(size=shape(args.rows)).astype(np.float32)
        reduce_text = pxla_mlir.pmap(fn, "i", unshard="all-reduce").lower(x).as_text()
        forms = {"all-reduce (2022)": reduce_text,
                 "plugin rewrite": run_passes(reduce_text, "builtin.module(unshard-as-all-gather)"),
                 "unshard=all-gather": pxla_mlir.pmap(fn, "i", unshard="all-gather").lower(x).as_text()}
        base = None
        for form, text in forms.items():
            compiled = pxla_mlir.load(text).compile()
            result = np.asarray(compiled(x)[0])
            sent = bytes_sent(text)
            t = median_time(lambda a, c=compiled: c(a)[0], x, args.rounds, args.calls)
            if base is None:
                base = (result, sent, t)
            elif form == "plugin rewrite":
                assert np.array_equal(result.view(np.uint32), base[0].view(np.uint32)), f"{name}: results differ"
            print(f"{name:<12} {form:<22} {hlo_counts(compiled.as_text()):<28} {sent:>16} {t * 1e3:>9.3f} "
                  f"{sent / base[1]:>11.3f} {t / base[2]:>10.3f}")


if __name__ == "__main__":
    main()
