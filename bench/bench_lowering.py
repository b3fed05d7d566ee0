"""Lowering and start-up costs of pxla_mlir.pmap against jax 0.10.2, measured
in one run on virtual CPU devices.

    python bench/bench_lowering.py [--rounds 9] [--skip-scale]

1. trace+lower+passes of five programs against ``jax.pmap(...).lower``,
   cold (the lowering cache off) and cached (an equal program lowered
   before), and where pxla_mlir's time goes: tracing, jax's lowering
   (import), then each pass of the pipeline, legalization first.
2. Linearity: a chain of N elementwise ops (N = 100, 1,000, 10,000) and the
   time per op.
3. Warm start: the first call of a pmap in a fresh process, without and with
   the persistent compilation cache (``PXLA_MLIR_CACHE_DIR``) filled by an
   earlier process.
4. Scale: lowering and compile time of a 3-level nested pmap (2x2x2) and of
   a pmap over 64 virtual devices, against ``jax.jit(shard_map)`` on the
   same mesh (each in a fresh process).
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import pxla_mlir
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.pass_infra import Pipeline, run_pipeline
from pxla_mlir.mlir.pass_infra.stepwise import elementary_steps, step_name
from pxla_mlir.mlir.support.stats import TIMINGS
from pxla_mlir.stages import lowering_cache


def tiny(x):
    return lax.psum(x * 2, "i")


def mlp(params, x):
    w1, w2 = params
    h = jax.nn.relu(x @ w1)
    return lax.pmean(jnp.mean(h @ w2, axis=0), "i"), lax.all_gather(h, "i")


def chain(n: int):
    def f(x):
        for k in range(n):
            x = jnp.sin(x) if k % 2 else x * 1.001
            if k % 50 == 49:
                x = lax.psum(x, "i") / 8
        return x
    return f


def transformer(blocks: int):
    """A pre-LN transformer of ``blocks`` blocks (attention and MLP), its loss's gradient pmeaned."""
    def block(x, w):
        h = jax.nn.standardize(x, axis=-1)
        q, k, v = h @ w[0], h @ w[1], h @ w[2]
        att = jax.nn.softmax(q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1]), axis=-1)
        x = x + (att @ v) @ w[3]
        return x + jax.nn.gelu(jax.nn.standardize(x, axis=-1) @ w[4]) @ w[5]

    def loss(ws, x):
        for w in ws:
            x = block(x, w)
        return (x ** 2).mean()

    def step(ws, x):
        return lax.pmean(jax.grad(loss)(ws, x), "i")

    rng = np.random.default_rng(0)
    ws = [rng.normal(size=(6, 32, 32)).astype(np.float32) * 0.1 for _ in range(blocks)]
    return step, (None, 0), (ws, rng.normal(size=(8, 16, 32)).astype(np.float32))


def hundred(*xs):
    return lax.psum(sum(xs), "i")


def programs():
    rng = np.random.default_rng(0)
    f32 = np.float32
    return {
        "tiny (x*2, psum)": (tiny, 0, (rng.normal(size=(8, 16)).astype(f32),)),
        "mlp (pmean, gather)": (mlp, (None, 0), ((rng.normal(size=(32, 64)).astype(f32),
                                                   rng.normal(size=(64, 10)).astype(f32)),
                                                  rng.normal(size=(8, 16, 32)).astype(f32))),
        "chain 200, 4 psums": (chain(200), 0, (rng.normal(size=(8, 64)).astype(f32),)),
        "100 args, one psum": (hundred, 0, tuple(rng.normal(size=(8, 4)).astype(f32) for _ in range(100))),
        "transformer, 32 blocks": transformer(32),
    }


def lower_times(fn, in_axes, args, rounds: int) -> tuple[float, float, float]:
    """Median seconds of lowering new function objects of one program
    (neither side's trace cache can hit), interleaved: pxla_mlir without its
    lowering cache (``PXLA_MLIR_LOWERING_CACHE=0``: jax's lowering, import,
    passes), pxla_mlir with it (the program was lowered before: trace, key,
    parse), jax.pmap (trace, lower; jax keys its lowerings on the jaxpr object,
    so it lowers each time)."""
    cold, cached, theirs = [], [], []
    for _ in range(rounds + 1):
        os.environ[lowering_cache.ENV] = "0"
        t = time.perf_counter()
        pxla_mlir.pmap(lambda *a: fn(*a), "i", in_axes=in_axes).lower(*args)
        cold.append(time.perf_counter() - t)
        del os.environ[lowering_cache.ENV]
        t = time.perf_counter()
        pxla_mlir.pmap(lambda *a: fn(*a), "i", in_axes=in_axes).lower(*args)
        cached.append(time.perf_counter() - t)
        t = time.perf_counter()
        jax.pmap(lambda *a: fn(*a), "i", in_axes=in_axes).lower(*args)
        theirs.append(time.perf_counter() - t)
    return statistics.median(cold[1:]), statistics.median(cached[1:]), statistics.median(theirs[1:])


def breakdown(fn, in_axes, args, rounds: int) -> dict:
    """Median milliseconds per step: tracing, jax's lowering (import), and
    each pass of the pipeline replayed one at a time."""
    steps: dict = {}
    for _ in range(rounds):
        TIMINGS.clear()
        os.environ[lowering_cache.ENV] = "0"  # a cold lowering
        lowered = pxla_mlir.pmap(lambda *a: fn(*a), "i", in_axes=in_axes).lower(*args)
        del os.environ[lowering_cache.ENV]
        for k in ("trace", "import", "passes"):
            steps.setdefault(k, []).append(TIMINGS[k])
        ctx = make_context()
        pipeline = Pipeline.parse(lowered.pipeline, ctx)
        with ctx:
            from jaxlib.mlir import ir

            module = ir.Module.parse(lowered.pxla_text())
        for step in elementary_steps(pipeline):
            t = time.perf_counter()
            run_pipeline(module, Pipeline((step,)), reproducer=False, verify_each=False)
            steps.setdefault(f"  {step_name(step)}", []).append(time.perf_counter() - t)
    return {k: statistics.median(v) * 1e3 for k, v in steps.items()}


def jax_breakdown(fn, in_axes, args, rounds: int) -> dict:
    """Median milliseconds of jax.pmap's side: its trace (``jax.make_jaxpr`` of the pmap) and the rest of
    ``.lower`` (jax's lowering of the traced program)."""
    trace, total = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        jax.make_jaxpr(jax.pmap(lambda *a: fn(*a), "i", in_axes=in_axes))(*args)
        trace.append(time.perf_counter() - t)
        t = time.perf_counter()
        jax.pmap(lambda *a: fn(*a), "i", in_axes=in_axes).lower(*args)
        total.append(time.perf_counter() - t)
    return {"trace": statistics.median(trace) * 1e3,
            "lowering (the rest of .lower)": (statistics.median(total) - statistics.median(trace)) * 1e3}


def linearity(rounds: int) -> list[tuple[int, float, float, float]]:
    x = np.ones((8, 16), np.float32)
    rows = []
    for n in (100, 1000, 10000):
        rows.append((n, *lower_times(chain(n), 0, (x,), max(1, rounds // (1 if n < 10000 else 3)))))
    return rows


WARM = textwrap.dedent("""
    import os, sys, time, json
    t0 = time.perf_counter()
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, numpy as np, pxla_mlir
    from jax import lax
    from pxla_mlir.mlir.support.stats import TIMINGS
    def layer(x):
        for _ in range(30):
            x = jax.numpy.tanh(x @ jax.numpy.full((64, 64), 0.01))
        return lax.psum(x, "i")
    x = np.ones((8, 16, 64), np.float32)
    t = time.perf_counter()
    jax.block_until_ready(pxla_mlir.pmap(layer, "i")(x))
    print(json.dumps({"first call": time.perf_counter() - t, "compile": TIMINGS["compile"],
                      "process": time.perf_counter() - t0}))
""")


def warm_start() -> dict:
    with tempfile.TemporaryDirectory() as cache:
        out = {}
        for label, env in (("no cache", {}), ("cold cache", {"PXLA_MLIR_CACHE_DIR": cache}),
                           ("warm cache", {"PXLA_MLIR_CACHE_DIR": cache})):
            p = subprocess.run([sys.executable, "-c", WARM], capture_output=True, text=True, timeout=300,
                               env={**os.environ, **env})
            out[label] = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-300:]}
        return out


SCALE = textwrap.dedent("""
    import os, sys, time, json
    n, what = int(sys.argv[1]), sys.argv[2]
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
    import jax, numpy as np, pxla_mlir
    from jax import lax
    from jax.sharding import Mesh, PartitionSpec as P
    def body(x):
        return lax.psum(jax.numpy.sin(x) * 2, "i") + lax.axis_index("i")
    if what == "nested":
        def level3(x): return lax.psum(jax.numpy.sin(x), ("i", "j", "k")) + lax.axis_index("k")
        def level2(x): return pxla_mlir.pmap(level3, "k")(x) + lax.psum(x, "j")
        def level1(x): return pxla_mlir.pmap(level2, "j")(x) * 2
        ours = pxla_mlir.pmap(level1, "i")
        x = np.ones((2, 2, 2, 16), np.float32)
        mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), ("i", "j", "k"))
        def ref(x):
            y = lax.psum(jax.numpy.sin(x), ("i", "j", "k")) + lax.axis_index("k")
            return (y + lax.psum(x, "j")) * 2
        theirs = jax.jit(jax.shard_map(ref, mesh=mesh, in_specs=P("i", "j", "k"), out_specs=P("i", "j", "k")))
    else:
        ours = pxla_mlir.pmap(body, "i")
        x = np.ones((n, 16), np.float32)
        mesh = Mesh(np.array(jax.devices()), ("i",))
        theirs = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    def times(f):
        t = time.perf_counter(); low = f.lower(x); t1 = time.perf_counter(); low.compile(); t2 = time.perf_counter()
        return t1 - t, t2 - t1
    times(pxla_mlir.pmap(lambda v: v + 1, "i")); times(jax.jit(lambda v: v + 1))  # first-use costs
    o, j = times(ours), times(theirs)
    np.testing.assert_allclose(np.asarray(ours(x)).reshape(-1), np.asarray(theirs(x)).reshape(-1), rtol=1e-5)
    print(json.dumps({"ours": o, "theirs": j}))
""")


def scale() -> dict:
    out = {}
    for label, n, what in (("3-level nested pmap (2x2x2)", 8, "nested"), ("pmap over 64 devices", 64, "flat")):
        p = subprocess.run([sys.executable, "-c", SCALE, str(n), what], capture_output=True, text=True, timeout=600)
        out[label] = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-400:]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--skip-scale", action="store_true")
    args = ap.parse_args()
    print(f"jax {jax.__version__}, {len(jax.devices())} {jax.devices()[0].platform} devices, {os.cpu_count()} cores; "
          f"medians of {args.rounds} interleaved rounds\n")
    print("cold: pxla_mlir's lowering cache off; cached: the program was lowered before (a new function object)\n")
    print(f"{'trace+lower(+passes)':<24} {'cold':>10} {'cached':>10} {'jax.pmap':>10} {'ratios':>12}")
    for name, (fn, in_axes, fargs) in programs().items():
        cold, cached, theirs = lower_times(fn, in_axes, fargs, args.rounds)
        print(f"{name:<24} {cold * 1e3:>8.2f}ms {cached * 1e3:>8.2f}ms {theirs * 1e3:>8.2f}ms "
              f"{cold / theirs:>5.2f} {cached / theirs:>5.2f}")
    print("\nwhere pxla_mlir's lowering time goes (tiny; ms; passes replayed one at a time):")
    fn, in_axes, fargs = programs()["tiny (x*2, psum)"]
    for step, ms in breakdown(fn, in_axes, fargs, args.rounds).items():
        print(f"  {step:<34} {ms:>7.3f}")
    print("and jax.pmap's (ms):")
    for name in ("tiny (x*2, psum)", "chain 200, 4 psums"):
        fn, in_axes, fargs = programs()[name]
        for step, ms in jax_breakdown(fn, in_axes, fargs, args.rounds).items():
            print(f"  {name + ': ' + step:<50} {ms:>7.3f}")
    print(f"\n{'chain of N ops':<12} {'cold':>9} {'per op':>8} {'cached':>9} {'per op':>8} {'jax.pmap':>9} "
          f"{'per op':>8} {'ratios':>11}")
    rows = linearity(args.rounds)
    for n, cold, cached, theirs in rows:
        print(f"N = {n:<8} {cold * 1e3:>7.1f}ms {cold / n * 1e6:>6.1f}us {cached * 1e3:>7.1f}ms "
              f"{cached / n * 1e6:>6.1f}us {theirs * 1e3:>7.1f}ms {theirs / n * 1e6:>6.1f}us "
              f"{cold / theirs:>5.2f} {cached / theirs:>5.2f}")
    first = rows[0]
    for n, cold, cached, theirs in rows[1:]:  # the cost of each op beyond the first program's: no fixed costs
        print(f"  from N = {first[0]} to {n}: each added op {(cold - first[1]) / (n - first[0]) * 1e6:.1f}us cold, "
              f"{(cached - first[2]) / (n - first[0]) * 1e6:.1f}us cached, "
              f"{(theirs - first[3]) / (n - first[0]) * 1e6:.1f}us jax.pmap")
    print("\nwarm start: first call of a 30-layer pmap in a fresh process (ms)")
    for label, row in warm_start().items():
        if "error" in row:
            print(f"  {label:<12} failed: {row['error']}")
        else:
            print(f"  {label:<12} first call {row['first call'] * 1e3:>8.1f}   of which compile "
                  f"{row['compile'] * 1e3:>8.1f}   whole process {row['process'] * 1e3:>8.1f}")
    if args.skip_scale:
        return
    print(f"\n{'scale (fresh process)':<30} {'lower':>9} {'compile':>9} {'jit(shard_map) lower':>21} "
          f"{'compile':>9} {'ratios':>12}")
    for label, row in scale().items():
        if "error" in row:
            print(f"{label:<30} failed: {row['error']}")
            continue
        (ol, oc), (jl, jc) = row["ours"], row["theirs"]
        print(f"{label:<30} {ol * 1e3:>7.1f}ms {oc * 1e3:>7.1f}ms {jl * 1e3:>19.1f}ms {jc * 1e3:>7.1f}ms "
              f"{ol / jl:>5.2f} {oc / jc:>5.2f}")


if __name__ == "__main__":
    main()
