"""The example rewrite plugin (unshard-as-all-gather) on nested pmaps whose inner
pmap gathers a large output, on 8 virtual CPU devices.

    python bench/bench_plugins.py [--rows 512] [--rounds 5] [--calls 20]

Each program is lowered with ``unshard="all-reduce"`` (2022's pad + all-reduce),
then the plugin rewrites the final module; the pipeline's own
``unshard="all-gather"`` is the reference. For each: the collectives in XLA's
optimized HLO and the bytes each device feeds into them, the bytes the
collectives send (the collective-bytes plugin's total over the final MHLO,
ring formulas), the time per call (median, the forms timed in turn), and the
ratios to the all-reduce form. Every rewritten program's result is checked
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
from pxla_mlir.mlir.pass_infra import Pipeline
from pxla_mlir.mlir.pass_infra.registry import REGISTRY


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


_HLO_COLLECTIVE = re.compile(r"= (\w+)\[([\d,]*)\]\S* (all-reduce|all-gather)(?:-start)?\(.*?replica_groups=\{\{([\d,]*)\}")
_BYTES = {"f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "pred": 1, "s8": 1, "u8": 1, "f16": 2, "bf16": 2}


def hlo_collectives(hlo: str) -> tuple[str, int]:
    """The all-reduces and all-gathers in XLA's optimized HLO, and the bytes each device feeds into them (an
    all-gather's operand is its result over the group size)."""
    counts = {"all-reduce": 0, "all-gather": 0}
    fed = 0
    for element, dims, op, group in _HLO_COLLECTIVE.findall(hlo):
        counts[op] += 1
        size = _BYTES[element] * int(np.prod([int(d) for d in dims.split(",") if d]))
        fed += size // (len(group.split(",")) if op == "all-gather" else 1)
    return " ".join(f"{op}={n}" for op, n in counts.items()), fed


def interleaved_times(fns: list, x, rounds: int, calls: int) -> list[float]:
    """Median seconds per call of each of ``fns``, timed in turn within each round (so that load from other
    processes on the machine falls on all of them alike)."""
    for fn in fns:
        jax.block_until_ready(fn(x))
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, seen in zip(fns, times):
            start = time.perf_counter()
            for _ in range(calls):
                jax.block_until_ready(fn(x))
            seen.append((time.perf_counter() - start) / calls)
    return [statistics.median(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=512, help="rows of each device's block (256 columns, f32)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    for cls in (UnshardAsAllGatherPass, CollectiveBytesPass):
        REGISTRY.add(cls, cls.__module__)
    print(f"jax {jax.__version__}, {jax.device_count()} {jax.devices()[0].platform.upper()} devices, "
          f"blocks of {args.rows}x256 f32 ({args.rows * 256 * 4 / 2**20:.2f} MiB)")
    print(f"{'program':<12} {'form':<19} {'optimized HLO':<26} {'HLO B in/dev':>12} {'MHLO B sent':>12} "
          f"{'ms/call':>9} {'in ratio':>8} {'sent ratio':>10} {'time ratio':>10}")
    for name, (fn, shape) in PROGRAMS.items():
        x = np.random.default_rng(0).normal(size=shape(args.rows)).astype(np.float32)
        reduce_text = pxla_mlir.pmap(fn, "i", unshard="all-reduce").lower(x).as_text()
        forms = {"all-reduce (2022)": reduce_text,
                 "plugin rewrite": run_passes(reduce_text, "builtin.module(unshard-as-all-gather)"),
                 "unshard=all-gather": pxla_mlir.pmap(fn, "i", unshard="all-gather").lower(x).as_text()}
        compiled = {form: pxla_mlir.load(text).compile() for form, text in forms.items()}
        results = {form: np.asarray(c(x)[0]) for form, c in compiled.items()}
        want = results["all-reduce (2022)"].view(np.uint32)
        assert np.array_equal(results["plugin rewrite"].view(np.uint32), want), f"{name}: the results differ"
        seconds = interleaved_times([lambda a, c=c: c(a)[0] for c in compiled.values()], x, args.rounds, args.calls)
        sent = {form: bytes_sent(text) for form, text in forms.items()}
        hlo = {form: hlo_collectives(c.as_text()) for form, c in compiled.items()}
        base_in, base_sent, base_time = hlo["all-reduce (2022)"][1], sent["all-reduce (2022)"], seconds[0]
        for form, t in zip(compiled, seconds):
            ops, fed = hlo[form]
            print(f"{name:<12} {form:<19} {ops:<26} {fed:>12} {sent[form]:>12} {t * 1e3:>9.3f} "
                  f"{fed / base_in:>8.3f} {sent[form] / base_sent:>10.3f} {t / base_time:>10.3f}")

if __name__ == "__main__":
    main()
