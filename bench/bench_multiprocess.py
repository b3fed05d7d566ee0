"""pxla_mlir.pmap across processes (one jax.distributed run on 127.0.0.1,
gloo collectives) against jax.jit(shard_map) doing the same work in the
same run.

    python bench/bench_multiprocess.py [--processes 2] [--devices 4] [--calls 200] [--rounds 5]

Two programs, each written once per device and mapped by both: ``tiny``
(psum of an (8, 16) f32 block plus the axis index) and ``train step`` (a
2-layer MLP's loss, grad, pmean of the gradients, SGD update; parameters
replicated, the batch split). Inputs are global jax.Arrays already laid out
for each side. Blocked: wait after every call. Un-blocked: ``--calls``
calls, one wait at the end; pxla_mlir bounds un-completed launches with its
in-flight window, while jax.jit(shard_map) deadlocks XLA:CPU after ~40
un-blocked collective launches on a small machine, so jax waits every 8
calls (the same window). Per-call medians of ``--rounds`` on process 0;
ratio = pxla_mlir / jax.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from pxla_mlir.distributed.launch import ENV_PROCESS_ID, launch

WINDOW = 8


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--devices", type=int, default=4, help="CPU devices per process")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=900)
    return ap.parse_args()


def main() -> int:
    args = parse()
    if os.environ.get(ENV_PROCESS_ID) is not None:
        return worker(args)
    finished = launch([sys.executable, os.path.abspath(__file__), *sys.argv[1:]], args.processes,
                      timeout_s=args.timeout, cpu_devices=args.devices)
    for f in finished:
        if f.returncode != 0:
            print(f"process {f.index}: {f.describe()}\n{f.output[-3000:]}", file=sys.stderr)
            return 1
    print("".join(line for line in finished[0].output.splitlines(keepends=True)
                  if line.startswith(("|", "jax ", "program agreement")) or not line.strip()))
    return 0


def worker(args) -> int:
    import pxla_mlir

    pxla_mlir.distributed.initialize()
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    n = jax.device_count()
    mesh = Mesh(np.array(jax.devices()), ("i",))

    def tiny(x):
        return lax.psum(x, "i") + lax.axis_index("i").astype(x.dtype)

    def step(w1, w2, x, y):
        def loss(w1, w2):
            return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * lax.pmean(g1, "i"), w2 - 0.1 * lax.pmean(g2, "i")

    rng = np.random.default_rng(0)
    x_tiny = rng.normal(size=(n, 8, 16)).astype(np.float32)
    w1 = rng.normal(size=(16, 32)).astype(np.float32) / 4
    w2 = rng.normal(size=(32, 4)).astype(np.float32) / 6
    xb = rng.normal(size=(n, 8, 16)).astype(np.float32)
    yb = rng.normal(size=(n, 8, 4)).astype(np.float32)

    def placed(values, shardings):
        return [jax.make_array_from_callback(v.shape, s, lambda index, v=v: v[index])
                for v, s in zip(values, shardings)]

    def both(pmapped, shard_mapped, values, specs, chained):
        """The two functions with their inputs, each already laid out as its program wants them."""
        jax_inputs = placed(values, [NamedSharding(mesh, spec) for spec in specs])
        lowered = pmapped.lower(*jax_inputs)
        return pmapped, placed(values, lowered.in_shardings[len(lowered.consts):]), shard_mapped, jax_inputs, chained

    programs = {
        "tiny": both(pxla_mlir.pmap(tiny, "i"),
                     jax.jit(jax.shard_map(lambda b: tiny(b[0])[None], mesh=mesh, in_specs=P("i"),
                                           out_specs=P("i"))),
                     [x_tiny], [P("i")], None),
        "train step": both(pxla_mlir.pmap(step, "i", in_axes=(None, None, 0, 0), out_axes=None),
                           jax.jit(jax.shard_map(lambda a, b, c, d: step(a, b, c[0], d[0]), mesh=mesh,
                                                 in_specs=(P(), P(), P("i"), P("i")), out_specs=(P(), P()),
                                                 check_vma=False)),  # as pmap: per-device grad of parameters
                           [w1, w2, xb, yb], [P(), P(), P("i"), P("i")], 2),
    }

    def run(fn, inputs, chained, calls, window):
        out = None
        for k in range(calls):
            out = fn(*inputs)
            if chained:  # the step's new parameters feed the next call
                inputs = list(out) + list(inputs[chained:])
            if window and (k + 1) % window == 0:
                jax.block_until_ready(out)
        jax.block_until_ready(out)
        return out

    def per_call(fn, inputs, chained, calls, window):
        times = []
        for _ in range(args.rounds):
            t = time.perf_counter()
            run(fn, inputs, chained, calls, window)
            times.append((time.perf_counter() - t) / calls)
        return statistics.median(times)

    rows = []
    for name, (ours, our_args, theirs, their_args, chained) in programs.items():
        a, b = run(ours, our_args, chained, 3, 1), run(theirs, their_args, chained, 3, 1)
        for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):  # same numbers
            np.testing.assert_allclose(pxla_mlir.process_local(u), pxla_mlir.process_local(v), rtol=1e-4,
                                       atol=1e-5)
        blocked = (per_call(ours, our_args, chained, max(1, args.calls // 4), 1),
                   per_call(theirs, their_args, chained, max(1, args.calls // 4), 1))
        unblocked = (per_call(ours, our_args, chained, args.calls, None),
                     per_call(theirs, their_args, chained, args.calls, WINDOW))
        rows.append((name, "blocked", *blocked))
        rows.append((name, f"un-blocked, {args.calls} calls", *unblocked))
    from pxla_mlir.distributed.program_check import LaunchAgreement

    agreement = LaunchAgreement(pxla_mlir.pmap(step, "i", in_axes=(None, None, 0, 0), out_axes=None)
                                .lower(*programs["train step"][1]))
    agreements = []
    for _ in range(args.rounds):  # what every multi-process launch pays before it launches
        t = time.perf_counter()
        for _ in range(args.calls):
            agreement(lambda: None)
        agreements.append((time.perf_counter() - t) / args.calls)
    if jax.process_index() == 0:
        print(f"jax {jax.__version__}, {jax.process_count()} processes x {jax.local_device_count()} CPU devices, "
              f"{os.cpu_count()} cores; per-call medians of {args.rounds} rounds (process 0)\n")
        print(f"| {'program':<11}| {'calls':<24}| {'pxla_mlir.pmap':>15} | {'jit(shard_map)':>15} | {'ratio':>6} |")
        print(f"|{'-' * 12}|{'-' * 25}|{'-' * 17}|{'-' * 17}|{'-' * 8}|")
        for name, what, ours, theirs in rows:
            print(f"| {name:<11}| {what:<24}| {ours * 1e3:>12.3f} ms | {theirs * 1e3:>12.3f} ms | "
                  f"{ours / theirs:>6.2f} |")
        print(f"\nprogram agreement before every launch (one key-value write and one blocking read per other "
              f"process, the wait for the other process included): {statistics.median(agreements) * 1e3:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
