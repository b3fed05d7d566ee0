"""Time to the first result in a fresh process (import, trace, lower,
compile, run) of pxla_mlir against jax 0.10.2 on 8 virtual CPU devices.

    python bench/bench_first_result.py [--rounds 3] [--programs tiny,nested,mlp] [--cache]

Programs: a tiny pmap (x*2, psum) against jax.pmap; a 3-level nested pmap
(2x2x2) against jax.jit(shard_map) on a 2x2x2 mesh; a 30-layer MLP train
step (grad, pmean) against jax.pmap; a chain of 1,000 elementwise ops
(``--programs chain``: lowering is most of its first call) against jax.pmap.
Each round starts one fresh process per side, alternating which side goes
first; a process measures from its first line (before any import) until its
result is ready and checks it against a numpy reference. Prints the medians
and the ratios, of the whole process and of the first call alone (after the
imports, which both sides share).
``--cache`` adds the same rows with the persistent compilation cache on
(pxla_mlir.enable_compilation_cache against jax's own, every program kept),
each side's cache directory filled by one unmeasured process first: a warm
start then loads pxla_mlir's lowering and executable without parsing a module
(:mod:`pxla_mlir.stages.lowering_cache`, :mod:`pxla_mlir.runtime.module_facts`),
jax's lowers and loads.

Both sides import from bytecode, as an installed package does: the children
may write ``__pycache__`` (whatever PYTHONDONTWRITEBYTECODE says) and one
unmeasured warm-up process per side runs first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import os, sys, json
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    program, side, cache = sys.argv[1], sys.argv[2], sys.argv[3]
    import numpy as np
    import jax
    from jax import lax
    if side == "pxla_mlir":
        import pxla_mlir
        pmap = pxla_mlir.pmap
        if cache:
            pxla_mlir.enable_compilation_cache(cache)
    else:
        pmap = jax.pmap
        if cache:  # jax's persistent cache with the same threshold (every program is kept)
            jax.config.update("jax_compilation_cache_dir", cache)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    t_call = time.perf_counter()  # imports done: from here on each side's own code runs
    if program == "tiny":
        x = np.arange(128, dtype=np.float32).reshape(8, 16)
        out = pmap(lambda v: lax.psum(v * 2, "i"), "i")(x)
        want = np.broadcast_to(2 * x.sum(0), x.shape)
    elif program == "chain":  # 1,000 elementwise ops: lowering is most of the first call
        x = np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16)
        def chain(v):
            for k in range(1000):
                v = jax.numpy.sin(v) * 1.0001 if k % 2 else v + 0.001
            return v
        out = pmap(chain, "i")(x)
        want = x
        for k in range(1000):
            want = np.sin(want) * np.float32(1.0001) if k % 2 else want + np.float32(0.001)
    elif program == "nested":
        x = np.arange(128, dtype=np.float32).reshape(2, 2, 2, 16)
        if side == "pxla_mlir":
            def level3(v): return lax.psum(jax.numpy.sin(v), ("i", "j", "k")) + lax.axis_index("k")
            def level2(v): return pmap(level3, "k")(v) + lax.psum(v, "j")
            def level1(v): return pmap(level2, "j")(v) * 2
            out = pmap(level1, "i")(x)
        else:
            from jax.sharding import Mesh, PartitionSpec as P
            mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), ("i", "j", "k"))
            def ref(v):
                return (lax.psum(jax.numpy.sin(v), ("i", "j", "k")) + lax.axis_index("k") + lax.psum(v, "j")) * 2
            out = jax.jit(jax.shard_map(ref, mesh=mesh, in_specs=P("i", "j", "k"), out_specs=P("i", "j", "k")))(x)
        k = np.arange(2).reshape(1, 1, 2, 1)
        want = np.broadcast_to((np.sin(x).sum((0, 1, 2), keepdims=True) + k + x.sum(1, keepdims=True)) * 2, x.shape)
    else:
        layers = 30
        rng = np.random.default_rng(0)
        ws = [rng.normal(size=(16, 16)).astype(np.float32) * 0.3 for _ in range(layers)]
        xs = rng.normal(size=(8, 4, 16)).astype(np.float32)

        def loss(ws, x):
            for w in ws:
                x = jax.numpy.tanh(x @ w)
            return (x ** 2).mean()

        def step(ws, x):
            g = lax.pmean(jax.grad(loss)(ws, x), "i")
            return [w - 0.1 * d for w, d in zip(ws, g)]

        out = pmap(step, "i", in_axes=(None, 0))(ws, xs)[-1]
        def np_loss_grad(ws, x):  # the reference: numpy backprop of the same chain
            acts = [x]
            for w in ws:
                acts.append(np.tanh(acts[-1] @ w))
            d = 2 * acts[-1] / acts[-1].size
            grads = []
            for w, a_in, a_out in zip(ws[::-1], acts[-2::-1], acts[:0:-1]):
                d = d * (1 - a_out ** 2)
                grads.append(a_in.reshape(-1, 16).T @ d.reshape(-1, 16))
                d = d @ w.T
            return grads[::-1]
        mean = np.mean([np_loss_grad(ws, x)[-1] for x in xs], axis=0)
        want = np.broadcast_to(ws[-1] - 0.1 * mean, (8, 16, 16))
    jax.block_until_ready(out)
    done = time.perf_counter()
    np.testing.assert_allclose(np.asarray(out), want, rtol=2e-4, atol=2e-5)
    print(json.dumps({"seconds": done - t0, "call": done - t_call}))
""")

SIDES = {"tiny": ("pxla_mlir", "jax.pmap"), "nested": ("pxla_mlir", "jax.jit(shard_map)"),
         "mlp": ("pxla_mlir", "jax.pmap"), "chain": ("pxla_mlir", "jax.pmap")}
LABELS = {"tiny": "tiny pmap (x*2, psum)", "nested": "3-level nested pmap 2x2x2", "mlp": "30-layer MLP train step",
          "chain": "chain of 1,000 elementwise ops"}


def fresh(program: str, side: str, env: dict, cache: str = "") -> dict:
    """{"seconds": the whole process until the result, "call": from after the imports until the result}."""
    p = subprocess.run([sys.executable, "-c", CHILD, program, side, cache], capture_output=True, text=True,
                       timeout=600, env=env)
    if p.returncode != 0:
        raise SystemExit(f"{program} on {side} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--programs", default="tiny,nested,mlp")
    ap.add_argument("--cache", action="store_true",
                    help="also with the persistent compilation cache on, warmed by an earlier process")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items()
           if k not in ("XLA_FLAGS", "PXLA_MLIR_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")}
    for side in ("pxla_mlir", "jax"):  # bytecode for both sides' modules
        fresh("tiny", side, env)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; medians of {args.rounds} rounds of "
          f"fresh processes, sides alternating\n")
    print("process: from the first line (imports included, the same ~1-2 s of `import jax` on both sides) to the "
          "result;\nfirst call: from after the imports (trace, lower, compile or load, run) to the result\n")
    print(f"{'first result (fresh process)':<40} {'process':>9} {'jax':>9} {'ratio':>6}   {'1st call':>9} {'jax':>9} "
          f"{'ratio':>6}  jax side")
    with tempfile.TemporaryDirectory() as caches:
        for cached in (False, True) if args.cache else (False,):
            for program in args.programs.split(","):
                dirs = {side: os.path.join(caches, f"{program}-{side}") if cached else "" for side in ("pxla_mlir", "jax")}
                for side in dirs if cached else ():
                    fresh(program, side, env, dirs[side])  # the earlier process that fills the cache
                times: dict = {"pxla_mlir": [], "jax": []}
                for r in range(args.rounds):
                    for side in ("pxla_mlir", "jax") if r % 2 == 0 else ("jax", "pxla_mlir"):
                        times[side].append(fresh(program, side, env, dirs[side]))
                cells = []
                for what in ("seconds", "call"):
                    ours = statistics.median(t[what] for t in times["pxla_mlir"])
                    theirs = statistics.median(t[what] for t in times["jax"])
                    cells.append(f"{ours * 1e3:>7.0f}ms {theirs * 1e3:>7.0f}ms {ours / theirs:>6.2f}")
                label = LABELS[program] + (", warm cache" if cached else "")
                print(f"{label:<40} {cells[0]}   {cells[1]}  {SIDES[program][1]}", flush=True)


if __name__ == "__main__":
    main()
